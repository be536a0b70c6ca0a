/*
 * plan.c - `nimfactory plan RECIPE...`: the profiles (and whether each fits
 * its device), the stages a build would run or find cached (locally, or in
 * --cache-from's registry) and the runner time it would take, or (--emit) the
 * CI pipeline that builds the recipes (factory/pipeline.h).
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/nimfactory/commands.h"
#include "factory/cache.h"
#include "factory/pipeline.h"
#include "factory/plan.h"
#include "factory/plan_fit.h"
#include "factory/remote_cache.h"
#include "factory/stage_estimate.h"
#include "factory/recipe.h"
#include "factory/stage_plan.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

static const char plan_usage[] =
	"usage: nimfactory plan RECIPE... [--json] [--cache DIR] [--cache-from REF [--insecure]]\n"
	"       nimfactory plan RECIPE... --emit gitlab|jenkins|json [--output FILE]\n"
	"                       [--cache-ref REF] [--registry HOST[/PREFIX]] [--insecure]\n"
	"  --json             the plans as JSON (each profile's memory; each stage's key, cached,\n"
	"                     remote, seconds, estimate; docs/schemas/plan.schema.json)\n"
	"  --cache DIR        the local cache whose stage results are reported (default:\n"
	"                     $NIMFACTORY_CACHE or the XDG default); each stage says whether\n"
	"                     a build would run it or find it cached, and how long it took\n"
	"  --cache-from REF   also say which stages the remote cache REF holds (asks the\n"
	"                     registry for their tags; nothing is pulled)\n"
	"  --emit FORMAT      the CI pipeline that builds the recipes: a GitLab child pipeline,\n"
	"                     a declarative Jenkinsfile, or the job graph as JSON (docs/ci.md);\n"
	"                     each job with its estimated runner time when known\n"
	"  --output FILE      write it to FILE instead of stdout\n"
	"  --cache-ref REF    the remote cache the jobs share (default: $NIMFACTORY_REMOTE_CACHE)\n"
	"  --registry HOST    where the package jobs push (default: $NIMFACTORY_REGISTRY)\n"
	"  --insecure         plain HTTP for the jobs' registry commands (loopback registries)\n";

/* The recipes and their plans, loaded together. */
typedef struct plan_set {
	nf_recipe **recipes;
	nf_plan **plans;
	nf_stage_graph_keys *keys; /* per plan, with known */
	int *known;                /* per plan: 0 when a source's digest needs a fetch */
	size_t n;
} plan_set;

static void plan_set_release(plan_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		nf_plan_free(s->plans[i]);
		nf_recipe_free(s->recipes[i]);
	}
	free(s->plans);
	free(s->recipes);
	free(s->keys);
	free(s->known);
}

static int plan_set_load(plan_set *s, char **paths, size_t n)
{
	int err = 0;
	memset(s, 0, sizeof(*s));
	s->recipes = calloc(n, sizeof(*s->recipes));
	s->plans = calloc(n, sizeof(*s->plans));
	s->keys = calloc(n, sizeof(*s->keys));
	s->known = calloc(n, sizeof(*s->known));
	if (!s->recipes || !s->plans || !s->keys || !s->known)
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (; !err && s->n < n; s->n++) {
		err = nf_recipe_load(&s->recipes[s->n], paths[s->n]);
		if (!err)
			err = nf_plan_make(&s->plans[s->n], s->recipes[s->n]);
	}
	return err;
}

/* Each plan's stage keys, what the cache at cache_dir (NULL: the default)
 * and the remote cache cache_from (NULL: none) hold of them, the profiles'
 * fit and the stages' estimates. */
static int plan_set_check_cache(plan_set *s, const char *cache_dir, const char *cache_from,
				bool insecure)
{
	char *root = NULL;
	nf_cache *c = NULL;
	nf_remote_cache *rc = NULL;
	int err = cache_dir ? 0 : nf_cache_default_root(&root);
	if (!err)
		err = nf_cache_open(&c, cache_dir ? cache_dir : root);
	if (!err && cache_from)
		err = nf_remote_cache_open(&rc, cache_from, insecure, NULL);
	nf_stage_plan_opts o = {.cache = c, .remote = rc, .host_memory = nf_fit_host_memory()};
	for (size_t i = 0; !err && i < s->n; i++)
		err = nf_stage_plan(&s->keys[i], &s->known[i], s->plans[i], s->recipes[i], &o);
	nf_remote_cache_free(rc);
	nf_cache_free(c);
	free(root);
	return err;
}

/* "about 12.30 s, recorded" for a stage that runs, "time unknown" without an estimate. */
static void print_estimate(const nf_stage *st)
{
	if (st->estimate >= 0)
		printf("about %.2f s, %s", st->estimate, st->estimate_modelled ? "modelled" : "recorded");
	else
		printf("time unknown");
}

/* What a build would do with a stage: find it cached (and how long it
 * took), pull it from the remote cache, or run it (and for how long). */
static void print_stage_state(const nf_stage *st, int known, const nf_stage_graph_keys *keys)
{
	const char *key = st->kind == NF_STAGE_PACKAGE ? keys->package : st->key;
	if (st->cached && st->kind == NF_STAGE_FETCH)
		printf("  cached");
	else if (st->cached && st->seconds >= 0)
		printf("  cached (key %.12s, took %.2f s)", key, st->seconds);
	else if (st->cached)
		printf("  cached (key %.12s)", key);
	else if (st->remote)
		printf("  remote (key %.12s)", key);
	else if (st->skipped)
		printf("  skipped (no gate runs)");
	else if (!known && st->kind != NF_STAGE_FETCH) {
		printf("  runs (key known once the sources are fetched, ");
		print_estimate(st);
		printf(")");
	} else {
		printf("  runs (");
		print_estimate(st);
		printf(")");
	}
}

/* The runner time of each CI job (the shared stages, each profile's compile
 * and gate, the package) and of all of them: what a build would run. */
static void print_jobs(const nf_plan *plan)
{
	size_t unknown = 0;
	double shared = 0, total = nf_stage_estimate_total(plan, &unknown);
	int shared_unknown = 0;
	printf("\nrunner time:\n");
	for (size_t i = 0; i < plan->n_stages; i++)
		if (plan->stages[i].profile < 0 && plan->stages[i].kind != NF_STAGE_PACKAGE) {
			shared += plan->stages[i].estimate >= 0 ? plan->stages[i].estimate : 0;
			shared_unknown |= plan->stages[i].estimate < 0;
		}
	printf("  %-36s %s%.2f s\n", "shared: fetch, convert, reference", shared_unknown ? ">= " : "",
	       shared);
	for (size_t p = 0; p < plan->n_profiles; p++) {
		double job = 0;
		int job_unknown = 0;
		for (size_t i = 0; i < plan->n_stages; i++)
			if (plan->stages[i].profile == (int)p) {
				job += plan->stages[i].estimate >= 0 ? plan->stages[i].estimate : 0;
				job_unknown |= plan->stages[i].estimate < 0;
			}
		char label[128];
		/* "profile NAME": a line that starts with the name is the profile list's */
		snprintf(label, sizeof(label), "profile %s", plan->profiles[p].name);
		printf("  %-36s %s%.2f s\n", label, job_unknown ? ">= " : "", job);
	}
	const nf_stage *pkg = nf_plan_stage((nf_plan *)plan, NF_STAGE_PACKAGE, -1);
	if (pkg)
		printf("  %-36s %s%.2f s\n", "package", pkg->estimate < 0 ? ">= " : "",
		       pkg->estimate < 0 ? 0 : pkg->estimate);
	printf("  %-36s %s%.2f s", "total", unknown ? ">= " : "", total);
	if (unknown)
		printf(" (%zu stage%s without an estimate)", unknown, unknown == 1 ? "" : "s");
	printf("\n");
}

/* A profile's line: its id, and whether it fits its device. */
static void print_profile(const nf_plan *plan, size_t i)
{
	char fit[200];
	printf("  %-28s %s\n", plan->profiles[i].name, plan->profiles[i].id);
	if (plan->fits) {
		nf_fit_describe(fit, sizeof(fit), &plan->fits[i], plan->profiles[i].device);
		printf("  %-28s memory: %s\n", "", fit);
	} else {
		printf("  %-28s fit unknown until fetched\n", "");
	}
}

static void print_text(const nf_recipe *recipe, const nf_plan *plan, int known,
		       const nf_stage_graph_keys *keys)
{
	printf("recipe %s (sha256:%s)\n\nprofiles:\n", recipe->model.name, plan->recipe_digest);
	for (size_t i = 0; i < plan->n_profiles; i++)
		print_profile(plan, i);
	if (plan->n_dropped)
		printf("\ndropped:\n");
	for (size_t i = 0; i < plan->n_dropped; i++)
		printf("  %s-%s-tp%d: %s\n", plan->dropped[i].device, plan->dropped[i].precision,
		       plan->dropped[i].tensor_parallel, plan->dropped[i].reason);
	printf("\nstages:\n");
	for (size_t i = 0; i < plan->n_stages; i++) {
		printf("  %2zu %-36s", i, plan->stages[i].name);
		int width = 0;
		for (size_t k = 0; k < plan->stages[i].n_deps; k++)
			width += printf("%s%zu", k ? "," : " after ", plan->stages[i].deps[k]);
		printf("%*s", width < 12 ? 12 - width : 0, "");
		print_stage_state(&plan->stages[i], known, keys);
		printf("\n");
	}
	print_jobs(plan);
}

/* One plan as its JSON object; several as an array of them. */
static int print_json(const plan_set *s)
{
	json_t *all = s->n > 1 ? json_array() : NULL, *j = NULL;
	int err = s->n > 1 && !all ? nf_error_set(NF_ENOMEM, "out of memory") : 0;
	for (size_t i = 0; !err && i < s->n; i++) {
		if ((err = nf_plan_to_json(&j, s->plans[i])))
			break;
		size_t unknown;
		double total = nf_stage_estimate_total(s->plans[i], &unknown);
		if (json_object_set_new(j, "keys_known", json_boolean(s->known[i])) ||
		    json_object_set_new(j, "fit_known", json_boolean(s->plans[i]->fits != NULL)) ||
		    json_object_set_new(j, "estimate_total",
					json_pack("{s:f, s:I}", "seconds", total, "stages_unknown",
						  (json_int_t)unknown)) ||
		    (s->known[i] && json_object_set_new(j, "package_key", json_string(s->keys[i].package)))) {
			json_decref(j);
			err = nf_error_set(NF_ENOMEM, "out of memory");
			break;
		}
		if (!all)
			all = j;
		else if (json_array_append_new(all, j))
			err = nf_error_set(NF_ENOMEM, "out of memory");
	}
	if (!err) {
		json_dumpf(all, stdout, JSON_SORT_KEYS | JSON_INDENT(2));
		fputc('\n', stdout);
	}
	json_decref(all);
	return err;
}

/* The pipeline in fmt, to stdout or (atomically) to output. */
static int emit(const plan_set *s, char **paths, nf_pipeline_format fmt, const nf_pipeline_opts *po,
		const char *output)
{
	nf_pipeline_recipe *prs = calloc(s->n, sizeof(*prs));
	json_t *graph = NULL;
	char *text = NULL;
	size_t len = 0;
	FILE *mem = NULL;
	int err = prs ? 0 : nf_error_set(NF_ENOMEM, "out of memory");

	for (size_t i = 0; !err && i < s->n; i++)
		prs[i] = (nf_pipeline_recipe){paths[i], s->recipes[i], s->plans[i]};
	if (!err)
		err = nf_pipeline_graph(&graph, prs, s->n, po);
	if (!err && !(mem = open_memstream(&text, &len)))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = nf_pipeline_write(mem, graph, fmt);
	if (mem && fclose(mem) && !err)
		err = nf_error_set(NF_ENOMEM, "out of memory");
	if (!err && output)
		err = nf_fs_write_atomic(output, text, len, 0644);
	else if (!err && (fwrite(text, 1, len, stdout) != len || fflush(stdout)))
		err = nf_error_set(NF_EIO, "stdout: write failed");
	free(text);
	free(prs);
	json_decref(graph);
	return err;
}

int nf_cmd_plan(int argc, char **argv)
{
	static const struct option options[] = {
		{"json", no_argument, NULL, 'J'},
		{"emit", required_argument, NULL, 'e'},
		{"output", required_argument, NULL, 'o'},
		{"cache-ref", required_argument, NULL, 'c'},
		{"registry", required_argument, NULL, 'r'},
		{"insecure", no_argument, NULL, 'k'},
		{"cache", required_argument, NULL, 'C'},
		{"cache-from", required_argument, NULL, 'F'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	nf_pipeline_opts po = {0};
	nf_pipeline_format fmt = NF_PIPELINE_JSON;
	const char *output = NULL, *cache_dir = NULL, *cache_from = NULL;
	plan_set set = {0};
	int as_json = 0, emitting = 0, c, err = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "ho:", options, NULL)) != -1) {
		switch (c) {
		case 'J': as_json = 1; break;
		case 'e': emitting = 1; err = nf_pipeline_format_parse(&fmt, optarg); break;
		case 'o': output = optarg; break;
		case 'c': po.cache_ref = optarg; break;
		case 'r': po.registry = optarg; break;
		case 'k': po.insecure = true; break;
		case 'C': cache_dir = optarg; break;
		case 'F': cache_from = optarg; break;
		case 'h': fputs(plan_usage, stdout); return NF_EXIT_OK;
		default: fputs(plan_usage, stderr); return NF_EXIT_INPUT;
		}
		if (err)
			return nf_cmd_fail("plan", err);
	}
	if (optind >= argc || (!emitting && (output || po.cache_ref || po.registry)) ||
	    (emitting && cache_from) || (!emitting && po.insecure && !cache_from)) {
		fputs(plan_usage, stderr);
		return NF_EXIT_INPUT;
	}
	if ((err = plan_set_load(&set, argv + optind, (size_t)(argc - optind))))
		goto done;
	/* with --emit too: the jobs carry their estimates, and profiles that do not fit go */
	if ((err = plan_set_check_cache(&set, cache_dir, cache_from, po.insecure)))
		goto done;
	if (emitting)
		err = emit(&set, argv + optind, fmt, &po, output);
	else if (as_json)
		err = print_json(&set);
	else
		for (size_t i = 0; i < set.n; i++) {
			if (i)
				printf("\n");
			print_text(set.recipes[i], set.plans[i], set.known[i], &set.keys[i]);
		}
done:
	plan_set_release(&set);
	if (err) {
		fprintf(stderr, "%s\n", nf_error_last());
		return nf_error_exit_status(err);
	}
	return NF_EXIT_OK;
}
