/*
 * validate.c - `nimfactory validate [--json] RECIPE`: check a recipe and
 * print its digest (or, with --json, its canonical JSON).  A bad recipe
 * prints one "FILE:LINE:COL: message" line on stderr and exits 2.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/nimfactory/commands.h"
#include "factory/recipe.h"
#include "util/error.h"
#include "util/banned.h"

static void usage(FILE *to)
{
	fprintf(to, "usage: nimfactory validate [--json] RECIPE\n\n"
		    "Check RECIPE against the nimfactory/v1 format (docs/recipe.md).\n"
		    "  --json   print the canonical JSON (defaults filled in) instead of the digest\n");
}

int nf_cmd_validate(int argc, char **argv)
{
	const char *path = NULL;
	int as_json = 0, err;
	nf_recipe *r = NULL;
	json_t *j = NULL;
	char hex[NF_SHA256_HEX_LEN + 1];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return NF_EXIT_OK;
		} else if (!strcmp(argv[i], "--json")) {
			as_json = 1;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "nimfactory validate: unknown option '%s'\n", argv[i]);
			usage(stderr);
			return NF_EXIT_INPUT;
		} else if (path) {
			fprintf(stderr, "nimfactory validate: one recipe at a time\n");
			return NF_EXIT_INPUT;
		} else {
			path = argv[i];
		}
	}
	if (!path) {
		usage(stderr);
		return NF_EXIT_INPUT;
	}
	if ((err = nf_recipe_load(&r, path)) < 0)
		goto done;
	if (as_json) {
		char *text;
		if ((err = nf_recipe_to_json(&j, r)) < 0)
			goto done;
		text = json_dumps(j, JSON_SORT_KEYS | JSON_INDENT(2));
		if (!text) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
		printf("%s\n", text);
		free(text);
	} else {
		if ((err = nf_recipe_digest(hex, r)) < 0)
			goto done;
		printf("%s: ok (%s, %zu target%s, digest sha256:%s)\n", path, r->model.name,
		       r->build.n_targets, r->build.n_targets == 1 ? "" : "s", hex);
	}
done:
	if (err < 0)
		fprintf(stderr, "%s\n", nf_error_last());
	json_decref(j);
	nf_recipe_free(r);
	return nf_error_exit_status(err);
}
