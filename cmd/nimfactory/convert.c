/*
 * convert.c - `nimfactory convert SRC DEST`: rewrite a checkpoint in another
 * layout: llama2.c or GGUF -> a Hugging Face folder (config.json, safetensors,
 * and for a GGUF its tokenizer: tokenizer.json, tokenizer_config.json with
 * the chat template, generation_config.json), or Hugging Face -> llama2.c.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cmd/nimfactory/commands.h"
#include "engine/checkpoint.h"
#include "engine/tokenizer.h"
#include "util/error.h"
#include "util/banned.h"

static const char convert_usage[] =
	"usage: nimfactory convert SRC DEST [--from auto|llama2c|hf|gguf] [--to hf|llama2c]\n"
	"                          [--dtype F32|F16|BF16]\n";

static int parse_dtype(nf_dtype *out, const char *s)
{
	if (!strcmp(s, "F32") || !strcmp(s, "f32") || !strcmp(s, "fp32"))
		*out = NF_DTYPE_F32;
	else if (!strcmp(s, "F16") || !strcmp(s, "f16") || !strcmp(s, "fp16"))
		*out = NF_DTYPE_F16;
	else if (!strcmp(s, "BF16") || !strcmp(s, "bf16"))
		*out = NF_DTYPE_BF16;
	else
		return nf_error_set(NF_EINPUT, "--dtype: '%s' is not one of F32, F16, BF16", s);
	return 0;
}

int nf_cmd_convert(int argc, char **argv)
{
	static const struct option options[] = {
		{"from", required_argument, NULL, 'f'},
		{"to", required_argument, NULL, 't'},
		{"dtype", required_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	nf_ckpt_format from = NF_CKPT_AUTO, to = NF_CKPT_HF;
	nf_dtype dtype = NF_DTYPE_F32;
	nf_model *model = NULL;
	nf_tokenizer *tok = NULL;
	int c, err = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "f:t:d:h", options, NULL)) != -1) {
		switch (c) {
		case 'f': err = nf_ckpt_format_parse(&from, optarg); break;
		case 't':
			err = nf_ckpt_format_parse(&to, optarg);
			if (!err && to == NF_CKPT_AUTO)
				err = nf_error_set(NF_EINPUT, "--to: name the format: hf or llama2c");
			if (!err && to == NF_CKPT_GGUF)
				err = nf_error_set(NF_EUNSUPPORTED, "--to gguf: writing GGUF is not "
						   "supported (hf or llama2c)");
			break;
		case 'd': err = parse_dtype(&dtype, optarg); break;
		case 'h': fputs(convert_usage, stdout); return NF_EXIT_OK;
		default: fputs(convert_usage, stderr); return NF_EXIT_INPUT;
		}
		if (err)
			goto done;
	}
	if (optind + 2 != argc) {
		fputs(convert_usage, stderr);
		return NF_EXIT_INPUT;
	}
	if (from == NF_CKPT_AUTO)
		from = nf_ckpt_sniff(argv[optind]);
	err = nf_ckpt_load(&model, argv[optind], from);
	/* a GGUF carries its tokenizer and chat template: they come along */
	if (!err && from == NF_CKPT_GGUF && to == NF_CKPT_HF)
		err = nf_ckpt_load_tokenizer(&tok, argv[optind], from, NULL, model->cfg.vocab_size);
	if (err)
		goto done;
	if (to == NF_CKPT_HF) {
		err = nf_ckpt_write_hf(argv[optind + 1], model, dtype);
		if (!err && tok)
			err = nf_ckpt_write_hf_tokenizer(argv[optind + 1], tok);
	} else if (dtype != NF_DTYPE_F32)
		err = nf_error_set(NF_EINPUT, "--dtype: llama2.c checkpoints are float32 only");
	else
		err = nf_ckpt_write_llama2c(argv[optind + 1], model);
	if (!err)
		fprintf(stderr, "convert: wrote %s (%s)\n", argv[optind + 1],
			to == NF_CKPT_HF ? "Hugging Face layout" : "llama2.c");
done:
	nf_model_free(model);
	nf_tokenizer_free(tok);
	return err ? nf_cmd_fail("convert", err) : NF_EXIT_OK;
}
