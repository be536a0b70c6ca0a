/*
 * nf_tokenizer_tool.c - tokenizer chores for tests and benchmarks.
 *
 *   nf_tokenizer_tool rewrite SRC_DIR DST_DIR
 *       load the tokenizer of SRC_DIR and write it to DST_DIR with
 *       nf_tokenizer_write_hf (tokenizer.json + tokenizer_config.json)
 *   nf_tokenizer_tool time DIR FILE [REPEAT]
 *       encode FILE REPEAT times (default 3) with control tokens matched and
 *       print "BYTES bytes TOKENS tokens BEST_SECONDS s" for the fastest run
 *
 * Exit 0, 2 on bad input, 4 on I/O errors, with one line on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/tokenizer.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/parse.h"
#include "util/banned.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int rewrite(const char *src, const char *dst)
{
	nf_tokenizer *t = NULL;
	int err = nf_tokenizer_load_dir(&t, src, 0);
	if (!err)
		err = nf_tokenizer_write_hf(t, dst);
	nf_tokenizer_free(t);
	return err;
}

static int time_encode(const char *dir, const char *file, long repeat)
{
	nf_tokenizer *t = NULL;
	char *text = NULL;
	size_t len = 0, n = 0;
	double best = 1e30;
	int err;
	if ((err = nf_tokenizer_load_dir(&t, dir, 0)) ||
	    (err = nf_fs_read_file(&text, &len, file, 1u << 30)))
		goto done;
	for (long r = 0; r < repeat && !err; r++) {
		int *ids = NULL;
		double t0 = now_s();
		err = nf_tokenizer_encode(t, text, len, NF_TOK_ADD_SPECIAL | NF_TOK_PARSE_SPECIAL,
					  &ids, &n);
		if (now_s() - t0 < best)
			best = now_s() - t0;
		free(ids);
	}
	if (!err)
		printf("%zu bytes %zu tokens %.4f s\n", len, n, best);
done:
	free(text);
	nf_tokenizer_free(t);
	return err;
}

int main(int argc, char **argv)
{
	long repeat = 3;
	int err;
	if (argc == 4 && !strcmp(argv[1], "rewrite")) {
		err = rewrite(argv[2], argv[3]);
	} else if ((argc == 4 || argc == 5) && !strcmp(argv[1], "time")) {
		err = argc == 5 ? nf_parse_long(&repeat, argv[4], 1, 1000, "REPEAT") : 0;
		if (!err)
			err = time_encode(argv[2], argv[3], repeat);
	} else {
		fprintf(stderr, "usage: nf_tokenizer_tool rewrite SRC_DIR DST_DIR\n"
				"       nf_tokenizer_tool time DIR FILE [REPEAT]\n");
		return NF_EXIT_INPUT;
	}
	if (err)
		fprintf(stderr, "nf_tokenizer_tool: %s\n", nf_error_last());
	return err ? nf_error_exit_status(err) : 0;
}
