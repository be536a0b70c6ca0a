/*
 * build.c - `nimfactory build RECIPE`: the whole pipeline (factory/build.h).
 * Exit status: 0 built, 2 bad input, 3 a gate failed, 4 environment.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/nimfactory/commands.h"
#include "factory/build.h"
#include "factory/build_shared.h"
#include "factory/recipe.h"
#include "factory/log.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/banned.h"

static const char build_usage[] =
	"usage: nimfactory build RECIPE... [--out DIR] [--cache DIR] [--threads N] [--rebuild]\n"
	"                        [-j|--jobs N] [--memory SIZE]\n"
	"                        [--cache-from REF] [--cache-to REF] [--insecure] [--profile NAME]\n"
	"                        [--allow-skipped-gates]\n"
	"                        [--log-format auto|text|tty|json] [--log-level debug|info|warn|error]\n"
	"\n"
	"Builds every profile of RECIPE, gates it and writes the OCI image to DIR/oci\n"
	"(default DIR: out/<model name>).  Several recipes share one stage graph: a\n"
	"checkpoint they pin is fetched and converted once, and each recipe's output\n"
	"goes to DIR/<model name> (default out/<model name>).  Exit status: 0 built, 2 bad input, 3 a gate\n"
	"failed or was skipped (reports in DIR/reports), 4 environment (network, disk,\n"
	"missing tool).\n"
	"  -j, --jobs N      profiles compiled at once (default: the number of cores)\n"
	"  --memory SIZE     their memory budget, e.g. 24G or 512M (default: the machine's\n"
	"                    available memory): a compile starts only when its estimate fits\n"
	"                    in what the float32 model and the running ones leave\n"
	"  --cache-from REF  pull a stage missing from the local cache from the registry\n"
	"                    repository REF (HOST[:PORT]/NAME) before running it\n"
	"  --cache-to REF    push every stage result to REF (docs/ci.md)\n"
	"  --insecure        plain HTTP to the remote cache, for a loopback registry only\n"
	"  --profile NAME    compile and gate that profile only, and make no image\n"
	"  --allow-skipped-gates  package the profiles whose gates did not run: a GPU\n"
	"                    profile is built on any machine, its gates skipped where its\n"
	"                    GPU is not (with the roofline model's figures); gates.json\n"
	"                    records the choice and never says passed (docs/cuda.md)\n";

/* --memory: bytes, or a count of K, M, G or T (binary units); at most 1 PiB.
 * (nf_cli_parse_size caps at 4 GiB, the registry's chunk sizes.) */
static int parse_memory(uint64_t *out, const char *s)
{
	static const char units[] = "KMGT";
	char buf[32];
	size_t n = strlen(s);
	const char *u = n ? strchr(units, s[n - 1] & ~0x20) : NULL;
	unsigned shift = u && *u ? 10u * (unsigned)(u - units + 1) : 0;
	uint64_t v;
	int err;

	if (n == 0 || n >= sizeof(buf))
		return nf_error_set(NF_EINPUT, "--memory: '%.40s' is not a size", s);
	memcpy(buf, s, n + 1);
	if (shift)
		buf[n - 1] = '\0';
	if ((err = nf_parse_u64(&v, buf, ((uint64_t)1 << 50) >> shift, "--memory")))
		return err;
	if ((*out = v << shift) == 0)
		return nf_error_set(NF_EINPUT, "--memory: must be more than 0");
	return 0;
}

static int build_one(nf_build_opts *bo, const char *recipe)
{
	bo->recipe_path = recipe;
	int err = nf_build_run(bo);
	if (err)
		nf_log_error(bo->log, "build", "%s", nf_error_last());
	return err;
}

/* What identifies a recipe's checkpoint for ordering ("" when it cannot be
 * read: its build reports why). */
static char *checkpoint_of(const char *recipe)
{
	nf_recipe *r = NULL;
	char *id = NULL;
	if (nf_recipe_load(&r, recipe) == 0) {
		const nf_recipe_source *s = &r->model.source;
		id = strdup(s->sha256 ? s->sha256 : s->url ? s->url : s->path ? s->path
						 : s->git.commit ? s->git.commit : "");
	}
	nf_error_clear();
	nf_recipe_free(r);
	return id ? id : strdup("");
}

/* The recipes in the order given, except that those pinning one checkpoint
 * come one after the other (at the first one's place), so it is loaded
 * once.  order[] gets indices into recipes. */
static int order_by_checkpoint(size_t *order, char **recipes, size_t n)
{
	char **ids = calloc(n, sizeof(*ids));
	size_t m = 0;
	int err = ids ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
	for (size_t i = 0; !err && i < n; i++)
		if (!(ids[i] = checkpoint_of(recipes[i])))
			err = nf_error_set(NF_ENOMEM, "out of memory");
	for (size_t i = 0; !err && i < n; i++) {
		int seen = 0;
		for (size_t j = 0; j < i && !seen; j++)
			seen = ids[i][0] && !strcmp(ids[i], ids[j]);
		for (size_t k = i; !seen && k < n; k++) /* i and every later one like it */
			if (k == i || (ids[i][0] && !strcmp(ids[i], ids[k])))
				order[m++] = k;
	}
	for (size_t i = 0; ids && i < n; i++)
		free(ids[i]);
	free(ids);
	return err;
}

/* Each recipe in turn on one shared graph; every recipe is built even when
 * an earlier one fails, and the first failure decides the exit status. */
static int build_many(nf_build_opts *bo, char **recipes, size_t n)
{
	nf_build_shared *shared = NULL;
	size_t *order = calloc(n, sizeof(*order));
	int first = 0, err = order ? nf_build_shared_new(&shared)
				   : nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = order_by_checkpoint(order, recipes, n);
	bo->shared = shared;
	bo->out_parent = bo->out_dir;
	for (size_t i = 0; !err && i < n; i++) {
		int built = build_one(bo, recipes[order[i]]);
		if (built && !first)
			first = built;
	}
	nf_build_shared_free(shared);
	free(order);
	return err ? err : first;
}

int nf_cmd_build(int argc, char **argv)
{
	static const struct option options[] = {
		{"out", required_argument, NULL, 'o'},
		{"cache", required_argument, NULL, 'c'},
		{"threads", required_argument, NULL, 'T'},
		{"jobs", required_argument, NULL, 'j'},
		{"memory", required_argument, NULL, 'm'},
		{"rebuild", no_argument, NULL, 'r'},
		{"allow-skipped-gates", no_argument, NULL, 'S'},
		{"log-format", required_argument, NULL, 'F'},
		{"log-level", required_argument, NULL, 'L'},
		{"cache-from", required_argument, NULL, 'f'},
		{"cache-to", required_argument, NULL, 't'},
		{"insecure", no_argument, NULL, 'k'},
		{"profile", required_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	nf_build_opts bo = {0};
	nf_log_opts lo = {.level = NF_LOG_INFO};
	nf_log *log = NULL;
	long threads = 0, jobs = 0;
	int c, err = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:c:j:rh", options, NULL)) != -1) {
		switch (c) {
		case 'o': bo.out_dir = optarg; break;
		case 'c': bo.cache_dir = optarg; break;
		case 'T': err = nf_parse_long(&threads, optarg, 0, 1024, "--threads"); break;
		case 'j': err = nf_parse_long(&jobs, optarg, 1, 1024, "--jobs"); break;
		case 'm': err = parse_memory(&bo.memory, optarg); break;
		case 'r': bo.rebuild = 1; break;
		case 'S': bo.allow_skipped_gates = 1; break;
		case 'f': bo.cache_from = optarg; break;
		case 't': bo.cache_to = optarg; break;
		case 'k': bo.cache_insecure = 1; break;
		case 'p': bo.profile = optarg; break;
		case 'F': err = nf_log_format_parse(&lo.format, optarg); break;
		case 'L': err = nf_log_level_parse(&lo.level, optarg); break;
		case 'h': fputs(build_usage, stdout); return NF_EXIT_OK;
		default: fputs(build_usage, stderr); return NF_EXIT_INPUT;
		}
		if (err) {
			fprintf(stderr, "nimfactory build: %s\n", nf_error_last());
			return NF_EXIT_INPUT;
		}
	}
	if (optind >= argc) {
		fputs(build_usage, stderr);
		return NF_EXIT_INPUT;
	}
	bo.threads = (int)threads;
	bo.jobs = (int)jobs;
	if ((err = nf_log_new(&log, &lo))) {
		fprintf(stderr, "nimfactory build: %s\n", nf_error_last());
		return nf_error_exit_status(err);
	}
	nf_log_set_default(log);
	bo.log = log;
	err = argc - optind == 1 ? build_one(&bo, argv[optind]) : build_many(&bo, argv + optind,
									   (size_t)(argc - optind));
	nf_log_set_default(NULL);
	nf_log_free(log);
	return nf_error_exit_status(err);
}
