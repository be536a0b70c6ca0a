/*
 * run.c - `nimfactory run ENGINE --prompt TEXT --max-tokens N --temperature T
 * --seed S`: generate text with a built engine and print it on stdout
 * (greedy at temperature 0).  Timing goes to stderr so stdout is the text.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/nimfactory/commands.h"
#include "cmd/nimfactory/output.h"
#include <jansson.h>

#include "engine/chat.h"
#include "engine/cuda/driver.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/banned.h"

static const char run_usage[] =
	"usage: nimfactory run ENGINE_DIR [--prompt TEXT | --chat TEXT] [--max-tokens N] [--temperature T]\n"
	"                      [--top-p P] [--seed S] [--threads N] [--quiet]\n"
	"       nimfactory run OUT_DIR --profile NAME|ID [options]   (a build's output)\n";

/* A GPU profile's engine (config.json's profile.device is a GPU of the
 * table) runs on its GPU when the driver and such a device are here
 * (nf_engine_use_gpu: one sequence); otherwise one line says why it runs
 * on the CPU (its weights are in a format the CPU runs). */
static void use_gpu(nf_engine *e, int quiet)
{
	const nf_sku *sku = nf_engine_gpu_sku(e);
	if (!sku)
		return;
	if (nf_engine_use_gpu(e, 1) != 0) {
		if (!quiet)
			fprintf(stderr, "run: %s engine on the CPU: %s\n", sku->name, nf_error_last());
	} else if (!quiet) {
		fprintf(stderr, "run: %s engine on the GPU\n", sku->name);
	}
}

static int print_piece(void *user, int token, const char *piece, size_t len)
{
	(void)user;
	(void)token;
	fwrite(piece, 1, len, stdout);
	fflush(stdout);
	return 0;
}

int nf_cmd_run(int argc, char **argv)
{
	static const struct option options[] = {
		{"prompt", required_argument, NULL, 'p'},
		{"chat", required_argument, NULL, 'C'},
		{"max-tokens", required_argument, NULL, 'n'},
		{"temperature", required_argument, NULL, 't'},
		{"top-p", required_argument, NULL, 'P'},
		{"seed", required_argument, NULL, 's'},
		{"threads", required_argument, NULL, 'j'},
		{"quiet", no_argument, NULL, 'q'},
		{"profile", required_argument, NULL, 'R'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *prompt = "", *profile = NULL, *chat = NULL;
	char *engine_dir = NULL, *rendered = NULL;
	size_t rendered_len = 0;
	nf_gen_params params = {.max_tokens = 256, .temperature = 0.0f, .top_p = 1.0f, .seed = 0,
				.stop_at_eos = 1};
	nf_gen_stats stats = {0};
	nf_engine *engine = NULL;
	long threads = 0, max_tokens = 256;
	double temperature = 0, top_p = 1;
	int quiet = 0, c, err = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "p:n:t:s:j:qh", options, NULL)) != -1) {
		switch (c) {
		case 'p': prompt = optarg; break;
		case 'C': chat = optarg; break;
		case 'n': err = nf_parse_long(&max_tokens, optarg, 0, 1 << 20, "--max-tokens"); break;
		case 't': err = nf_parse_double(&temperature, optarg, 0, 100, "--temperature"); break;
		case 'P': err = nf_parse_double(&top_p, optarg, 0, 1, "--top-p"); break;
		case 's': err = nf_parse_u64(&params.seed, optarg, UINT64_MAX, "--seed"); break;
		case 'j': err = nf_parse_long(&threads, optarg, 0, 1024, "--threads"); break;
		case 'q': quiet = 1; break;
		case 'R': profile = optarg; break;
		case 'h': fputs(run_usage, stdout); return NF_EXIT_OK;
		default: fputs(run_usage, stderr); return NF_EXIT_INPUT;
		}
		if (err)
			goto done;
	}
	if (optind + 1 != argc) {
		fputs(run_usage, stderr);
		return NF_EXIT_INPUT;
	}
	params.max_tokens = (int)max_tokens;
	params.temperature = (float)temperature;
	params.top_p = (float)top_p;

	err = nf_output_engine_dir(&engine_dir, argv[optind], profile);
	if (!err)
		err = nf_engine_open(&engine, engine_dir, (int)threads);
	if (!err)
		use_gpu(engine, quiet);
	/* --chat: one user message through the model's own chat template */
	if (!err && chat && !(err = nf_chat_render_user(&rendered, &rendered_len,
							nf_engine_tokenizer(engine), chat,
							strlen(chat))))
		prompt = rendered;
	if (err)
		goto done;
	err = nf_generate(engine, prompt, strlen(prompt), &params, print_piece, NULL, &stats);
	fputc('\n', stdout);
	if (!err && !quiet) {
		double tps = stats.decode_seconds > 0 && stats.generated_tokens > 1
				     ? (stats.generated_tokens - 1) / stats.decode_seconds
				     : 0;
		fprintf(stderr,
			"run: %d prompt tokens, %d generated; first token %.1f ms, decode %.1f tokens/s (%s)\n",
			stats.prompt_tokens, stats.generated_tokens, stats.first_token_seconds * 1e3, tps,
			nf_engine_kernel_name(engine));
	}
done:
	nf_engine_free(engine);
	free(engine_dir);
	free(rendered);
	return err ? nf_cmd_fail("run", err) : NF_EXIT_OK;
}
