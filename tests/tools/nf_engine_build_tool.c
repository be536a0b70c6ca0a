/*
 * nf_engine_build_tool.c - build an engine folder from a checkpoint, for
 * benchmarks and tests that need an engine without a recipe:
 *
 *   nf_engine_build_tool MODEL TOKENIZER PRECISION OUTDIR [--threads N] [--no-autotune]
 *                        [--kv-cache KIND] [--stream]
 *
 * MODEL is any checkpoint nf_ckpt_load reads (llama2.c file, HF folder, GGUF
 * file).  TOKENIZER is a llama2.c tokenizer.bin, a folder holding
 * tokenizer.json and tokenizer_config.json, or "-": the checkpoint's own (a
 * GGUF file's metadata, the tokenizer.json beside HF weights), as
 * `nimfactory build` takes it.  PRECISION a canonical name ("fp32",
 * "int8-wo", ...).  The engine is autotuned on this CPU with N threads
 * (default 0: all cores) unless --no-autotune.  --stream builds straight
 * from the file a layer at a time (nf_engine_build_stream) instead of
 * loading the model whole, and prints the peak resident memory
 * ("peak_rss_kib N") so that tests can hold it bounded.  Exit 0; 2 on bad arguments
 * or input; 4 on I/O errors; one line on stderr naming the problem.
 */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "engine/checkpoint.h"
#include "engine/ckpt_reader.h"
#include "engine/engine.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "util/error.h"
#include "util/parse.h"

#include "util/banned.h"

static void usage(void)
{
	fprintf(stderr, "usage: nf_engine_build_tool MODEL TOKENIZER PRECISION OUTDIR "
			"[--threads N] [--no-autotune] [--kv-cache f32|f16|int8] [--stream]\n"
			"  TOKENIZER: a llama2.c tokenizer.bin, a folder with tokenizer.json, or - "
			"(the checkpoint's own)\n");
}

/* A llama2.c tokenizer.bin (the model's, or any *.bin) is copied in as it
 * is (the engine format of llama2.c tokenizers); anything else goes through nf_ckpt_load_tokenizer, which
 * also finds a GGUF file's or an HF folder's own tokenizer ("-"). */
static int set_tokenizer(nf_engine_build_opts *opts, nf_tokenizer **tok, const char *model,
			 const char *arg, int vocab)
{
	nf_ckpt_format fmt = nf_ckpt_sniff(model);
	size_t len = strlen(arg);
	int bin = len > 4 && strcmp(arg + len - 4, ".bin") == 0;
	if (strcmp(arg, "-") != 0 && (fmt == NF_CKPT_LLAMA2C || bin)) {
		opts->tokenizer_path = arg;
		return 0;
	}
	int err = nf_ckpt_load_tokenizer(tok, model, fmt, strcmp(arg, "-") ? arg : NULL, vocab);
	opts->tokenizer = *tok;
	return err;
}

/* The engine straight from the file; the config read from its header only. */
static int build_streamed(nf_engine_build_opts *opts, nf_tokenizer **tok, const char *const *pos)
{
	nf_ckpt_reader *r;
	struct rusage ru;
	int err = nf_ckpt_open(&r, pos[0], NF_CKPT_AUTO);
	if (err)
		return err;
	int vocab = r->cfg.vocab_size;
	nf_ckpt_close(r);
	if ((err = set_tokenizer(opts, tok, pos[0], pos[1], vocab)) ||
	    (err = nf_engine_build_stream(pos[3], pos[0], NF_CKPT_AUTO, opts)))
		return err;
	getrusage(RUSAGE_SELF, &ru);
	printf("nf_engine_build_tool: wrote %s (%s) streaming\npeak_rss_kib %ld\n", pos[3],
	       nf_precision_name(opts->precision), ru.ru_maxrss);
	return 0;
}

int main(int argc, char **argv)
{
	const char *pos[4] = {NULL, NULL, NULL, NULL};
	nf_engine_build_opts opts = {.threads = 0, .autotune = 1};
	nf_model *m = NULL;
	nf_tokenizer *tok = NULL;
	long threads = 0;
	int npos = 0, err = 0, stream = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
			if ((err = nf_parse_long(&threads, argv[++i], 0, 1024, "--threads")))
				goto done;
		} else if (strcmp(argv[i], "--kv-cache") == 0 && i + 1 < argc) {
			opts.kv_cache = argv[++i]; /* checked by nf_engine_build */
		} else if (strcmp(argv[i], "--stream") == 0) {
			stream = 1;
		} else if (strcmp(argv[i], "--no-autotune") == 0) {
			opts.autotune = 0;
		} else if ((argv[i][0] != '-' || strcmp(argv[i], "-") == 0) && npos < 4) {
			pos[npos++] = argv[i];
		} else {
			usage();
			return NF_EXIT_INPUT;
		}
	}
	if (npos != 4) {
		usage();
		return NF_EXIT_INPUT;
	}
	opts.threads = (int)threads;
	if ((err = nf_precision_parse(&opts.precision, pos[2])))
		goto done;
	if (stream) {
		err = build_streamed(&opts, &tok, pos);
		goto done;
	}
	if ((err = nf_ckpt_load(&m, pos[0], NF_CKPT_AUTO)))
		goto done;
	if ((err = set_tokenizer(&opts, &tok, pos[0], pos[1], m->cfg.vocab_size)))
		goto done;
	if ((err = nf_engine_build(pos[3], m, &opts)))
		goto done;
	printf("nf_engine_build_tool: wrote %s (%s)\n", pos[3], nf_precision_name(opts.precision));
done:
	nf_tokenizer_free(tok);
	nf_model_free(m);
	if (err) {
		fprintf(stderr, "nf_engine_build_tool: %s\n", nf_error_last());
		return nf_error_exit_status(err);
	}
	return 0;
}
