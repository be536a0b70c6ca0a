/*
 * registry_cli.h - what push, promote and inspect REF share: client options
 * from the command line (--insecure, --chunk-size, --verbose), progress on a
 * terminal, debug lines on stderr, and `inspect REF`.
 */
#ifndef NF_CMD_REGISTRY_CLI_H
#define NF_CMD_REGISTRY_CLI_H

#include <stdbool.h>

#include "images/registry.h"

/* Progress and log state behind nf_reg_options' callbacks. */
typedef struct nf_cli_reg {
	const char *cmd;      /* "push", ... for line prefixes */
	bool tty;             /* stderr is a terminal: redraw a progress line */
	bool verbose;         /* --verbose or NIMFACTORY_DEBUG=1: one line per request */
	bool line_open;       /* a progress line is on screen */
	char what[80];        /* the blob being reported */
	double start;
} nf_cli_reg;

/* Fill o with defaults, our callbacks and st (cmd borrowed). */
void nf_cli_reg_init(nf_reg_options *o, nf_cli_reg *st, const char *cmd, bool insecure,
		     bool verbose);

/* End an open progress line. */
void nf_cli_reg_done(nf_cli_reg *st);

/* "N", "Nk", "NM", "NG" (binary units) in [4 KiB, 4 GiB]. */
int nf_cli_parse_size(uint64_t *out, const char *s, const char *what);

/* True when path looks like a registry reference rather than a local path. */
bool nf_cli_is_registry_ref(const char *path);

/* `nimfactory inspect REF`: profiles, layers, sizes, digests, gate verdict. */
int nf_cli_inspect_ref(const char *ref, bool insecure, bool as_json);

#endif
