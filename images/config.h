/*
 * config.h - the OCI image configuration (config.md,
 * application/vnd.oci.image.config.v1+json): platform, created time, the
 * runtime config (Entrypoint, Cmd, Env, ExposedPorts, Labels, WorkingDir,
 * StopSignal, User, and Docker's Healthcheck extension, which OCI tools
 * ignore), rootfs.diff_ids in order and one history entry per layer.
 * Built with jansson; written canonically by the caller (manifest.h).
 */
#ifndef NF_IMAGES_CONFIG_H
#define NF_IMAGES_CONFIG_H

#include <jansson.h>
#include <stdint.h>

#include "images/manifest.h"

/* Docker's Healthcheck (times in seconds; 0 = the runtime's default). */
typedef struct nf_oci_healthcheck {
	const char *const *test; /* NULL-terminated, e.g. {"CMD", "/usr/bin/nimserve", "--health", NULL} */
	int64_t interval_s;
	int64_t timeout_s;
	int64_t start_period_s;
	int retries;
} nf_oci_healthcheck;

/*
 * What the caller says about the image; all strings borrowed, lists
 * NULL-terminated.  A NULL field keeps the base image's value (or is left out).
 */
typedef struct nf_oci_config_spec {
	const char *architecture;         /* NULL: base's, else "amd64" */
	const char *os;                   /* NULL: base's, else "linux" */
	int64_t created;                  /* epoch seconds (SOURCE_DATE_EPOCH / recipe time), >= 0 */
	const char *author;
	const char *user;
	const char *const *entrypoint;
	const char *const *cmd;
	const char *const *env;           /* "KEY=VALUE"; replaces the base's KEY */
	const char *const *exposed_ports; /* "8000/tcp"; added to the base's */
	const nf_oci_kv *labels;          /* added to / replacing the base's */
	size_t n_labels;
	const char *working_dir;
	const char *stop_signal;
	const nf_oci_healthcheck *healthcheck;
} nf_oci_config_spec;

/* "YYYY-MM-DDTHH:MM:SSZ" of an epoch (UTC).  buf must hold 32 bytes. */
int nf_oci_time_rfc3339(char buf[32], int64_t epoch);

/*
 * Build a config object: base (borrowed; a config read from a base image, or
 * NULL) supplies what the spec leaves NULL, plus its diff_ids and history;
 * then n layers are appended (diff_ids[i] "sha256:...", created_by[i] the
 * history text of layer i).  Caller owns *out.
 */
int nf_oci_config_json(json_t **out, const json_t *base, const nf_oci_config_spec *spec,
		       const char *const *diff_ids, const char *const *created_by, size_t n);

/*
 * Check a config from outside: an object whose rootfs.type is "layers" and
 * whose rootfs.diff_ids are n_layers valid digests.  `what` names it in errors.
 */
int nf_oci_config_check(const json_t *config, size_t n_layers, const char *what);

#endif
