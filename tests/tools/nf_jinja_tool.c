/*
 * nf_jinja_tool - render a Jinja template with engine/jinja.h, for tests
 * that compare it with jinja2 (tests/e2e/jinja_ref.sh).
 *
 *   nf_jinja_tool render TEMPLATE_FILE CONTEXT_JSON_FILE
 *       prints the rendering (exactly its bytes); on error prints the one
 *       line "nf_jinja_tool: message" on stderr and exits 2 (bad input).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "engine/jinja.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

int main(int argc, char **argv)
{
	char *src = NULL, *out = NULL;
	size_t len = 0, out_len = 0;
	nf_jinja *t = NULL;
	json_t *ctx = NULL;
	json_error_t jerr;
	int err;

	if (argc != 4 || strcmp(argv[1], "render") != 0) {
		fprintf(stderr, "usage: nf_jinja_tool render TEMPLATE_FILE CONTEXT_JSON_FILE\n");
		return 2;
	}
	if ((err = nf_fs_read_file(&src, &len, argv[2], (size_t)4 << 20)))
		goto fail;
	if (!(ctx = json_load_file(argv[3], JSON_REJECT_DUPLICATES, &jerr))) {
		err = nf_error_set(NF_EINPUT, "%s:%d:%d: %s", argv[3], jerr.line, jerr.column, jerr.text);
		goto fail;
	}
	if ((err = nf_jinja_compile(&t, src, len, argv[2])) ||
	    (err = nf_jinja_render(&out, &out_len, t, ctx, (size_t)16 << 20)))
		goto fail;
	fwrite(out, 1, out_len, stdout);
	free(out);
	nf_jinja_free(t);
	json_decref(ctx);
	free(src);
	return 0;
fail:
	fprintf(stderr, "nf_jinja_tool: %s\n", nf_error_last());
	nf_jinja_free(t);
	json_decref(ctx);
	free(src);
	return nf_error_exit_status(err);
}
