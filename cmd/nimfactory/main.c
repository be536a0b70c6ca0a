/*
 * main.c - the nimfactory command: one table of subcommands, one file each
 * (cmd/nimfactory/<name>.c), in the manner of git.c.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cmd/nimfactory/commands.h"
#include "util/error.h"
#include "util/banned.h"

static const struct nf_command commands[] = {
	{"build", nf_cmd_build, "build, gate and package a recipe into an OCI image"},
	{"validate", nf_cmd_validate, "check a recipe and print its digest (or --json)"},
	{"plan", nf_cmd_plan, "show the profiles and stages a build would run"},
	{"run", nf_cmd_run, "generate text with a built engine"},
	{"inspect", nf_cmd_inspect, "describe an engine, an OCI layout or a build output"},
	{"tokenize", nf_cmd_tokenize, "print the token ids of a text (engine, build output or HF folder)"},
	{"detokenize", nf_cmd_detokenize, "print the text of token ids"},
	{"convert", nf_cmd_convert, "rewrite a checkpoint (llama2.c <-> Hugging Face layout)"},
	{"push", nf_cmd_push, "push an image of an OCI layout (with its gate report) to a registry"},
	{"promote", nf_cmd_promote, "copy a gated image between registry repositories by mounting"},
	{"bench-serve", nf_cmd_bench_serve, "benchmark an OpenAI-compatible server: latency, throughput, goodput"},
	{"precisions", nf_cmd_precisions, "list the precisions: weight format, bits, devices"},
	{"cache", nf_cmd_cache, "seed and inspect the local cache (add, path, ls)"},
	{"version", nf_cmd_version, "print the version"},
};

int nf_cmd_fail(const char *cmd, int err)
{
	fprintf(stderr, "nimfactory %s: %s\n", cmd, nf_error_last());
	return nf_error_exit_status(err);
}

static void usage(FILE *to)
{
	fprintf(to, "usage: nimfactory <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(to, "  %-12s %s\n", commands[i].name, commands[i].summary);
	fprintf(to, "\nRun 'nimfactory <command> --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
	/* Past RLIMIT_FSIZE a write fails with EFBIG, which we report like a full
	 * disk (exit 4, the path named), rather than the default: killed. */
	signal(SIGXFSZ, SIG_IGN);
	if (argc < 2) {
		usage(stderr);
		return NF_EXIT_INPUT;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return NF_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version"))
		return nf_cmd_version(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "nimfactory: '%s' is not a command; see 'nimfactory --help'\n", argv[1]);
	return NF_EXIT_INPUT;
}
