/* pipeline.c - the recipes' CI jobs as one graph (see pipeline.h). */
#define _GNU_SOURCE
#include "factory/pipeline.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define CACHE_VAR "\"$NIMFACTORY_REMOTE_CACHE\""
#define REGISTRY_VAR "$NIMFACTORY_REGISTRY"

int nf_pipeline_format_parse(nf_pipeline_format *out, const char *name)
{
	static const struct {
		const char *name;
		nf_pipeline_format fmt;
	} formats[] = {
		{"gitlab", NF_PIPELINE_GITLAB},
		{"jenkins", NF_PIPELINE_JENKINS},
		{"json", NF_PIPELINE_JSON},
	};
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		if (name && !strcmp(name, formats[i].name))
			return (*out = formats[i].fmt), 0;
	return nf_error_set(NF_EINPUT, "--emit '%.40s': not gitlab, jenkins or json",
			    name ? name : "");
}

char *nf_pipeline_shell_quote(const char *s)
{
	static const char plain[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				    "0123456789_./:@%+=,-";
	size_t n = strlen(s), quotes = 0;
	char *out, *w;

	if (n && strspn(s, plain) == n)
		return strdup(s);
	for (const char *p = s; *p; p++)
		quotes += *p == '\'';
	/* 'abc' with each ' as '\'' (4 bytes): n + 3 * quotes + 2 quotes + NUL */
	if (n > SIZE_MAX / 8 || !(out = malloc(n + 3 * quotes + 3)))
		return NULL;
	w = out;
	*w++ = '\'';
	for (const char *p = s; *p; p++) {
		if (*p == '\'') {
			memcpy(w, "'\\''", 4);
			w += 4;
		} else {
			*w++ = *p;
		}
	}
	*w++ = '\'';
	*w = '\0';
	return out;
}

/* The options with their defaults filled in, and the shell words the jobs share. */
typedef struct graph_ctx {
	nf_pipeline_opts o;
	char *cache;    /* shell word: the remote cache */
	char *tool;     /* shell word: the nimfactory command */
	const char *insecure; /* " --insecure" or "" */
} graph_ctx;

static void ctx_release(graph_ctx *g)
{
	free(g->cache);
	free(g->tool);
}

static int ctx_init(graph_ctx *g, const nf_pipeline_opts *o)
{
	memset(g, 0, sizeof(*g));
	if (o)
		g->o = *o;
	if (!g->o.out_dir)
		g->o.out_dir = "out";
	g->cache = g->o.cache_ref ? nf_pipeline_shell_quote(g->o.cache_ref) : strdup(CACHE_VAR);
	g->tool = nf_pipeline_shell_quote(g->o.nimfactory ? g->o.nimfactory : "nimfactory");
	g->insecure = g->o.insecure ? " --insecure" : "";
	return g->cache && g->tool ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
}

/* The push destination of a recipe's image as a shell word. */
static char *push_word(const graph_ctx *g, const nf_recipe *r)
{
	char *literal, *word;
	if (!g->o.registry)
		/* the variable expands inside double quotes; the rest is [a-z0-9./:_-] */
		return nf_strdup_printf("\"" REGISTRY_VAR "/%s:%s\"", r->image.repository, r->image.tag);
	literal = nf_strdup_printf("%s/%s:%s", g->o.registry, r->image.repository, r->image.tag);
	word = literal ? nf_pipeline_shell_quote(literal) : NULL;
	free(literal);
	return word;
}

/* Append the printf'd string to the array a; -1 on ENOMEM. */
static int append_line(json_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int append_line(json_t *a, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	int err = json_array_append_new(a, json_string(s));
	free(s);
	return err;
}

/* Where a job writes: OUT/MODEL/PROFILE, or OUT/MODEL/image for the package
 * job (beside, not above, the compile jobs' folders, which a build's swap of
 * its output folder would remove on a shared workspace). */
static char *job_out(const graph_ctx *g, const nf_recipe *r, const nf_profile *p)
{
	return nf_strdup_printf("%s/%s/%s", g->o.out_dir, r->model.name, p ? p->name : "image");
}

/* The runner a profile's job needs: its GPU's SKU name, or "cpu". */
static const char *runner_of(const nf_profile *p)
{
	return p->is_gpu ? p->device : "cpu";
}

/* A job object with the fields every job has. */
static json_t *job_new(const char *name, const char *kind, const nf_recipe *r, const char *runner,
		       const char *out)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:[], s:[], s:s, s:s+}", "name", name, "kind", kind,
			 "recipe", r->model.name, "runner", runner, "needs", "script", "out", out,
			 "junit", out, "/reports/junit.xml");
}

/* The runner time of a job, from plan's estimates (factory/stage_estimate.h):
 * a compile job (profile >= 0) runs the shared stages (fetch, convert,
 * reference: a build --profile) and its profile's, the package job (-1) the
 * package.  -1 when any is unknown, so a job's figure is never a part
 * passed off as the whole. */
static double job_estimate(const nf_plan *plan, int profile)
{
	double sum = 0;
	for (size_t i = 0; i < plan->n_stages; i++) {
		const nf_stage *st = &plan->stages[i];
		int shared = st->profile < 0 && st->kind != NF_STAGE_PACKAGE;
		if (profile >= 0 ? st->profile != profile && !shared : st->kind != NF_STAGE_PACKAGE)
			continue;
		if (st->estimate < 0)
			return -1;
		sum += st->estimate;
	}
	return sum;
}

/* "estimate_seconds" on job when the plan knows it. */
static int set_estimate(json_t *job, double seconds)
{
	return seconds < 0 ? 0 : json_object_set_new(job, "estimate_seconds", json_real(seconds));
}

/* A compile job's name, as the job and its package job's needs say it. */
static char *compile_name(const nf_recipe *r, const nf_profile *p)
{
	return nf_strdup_printf("compile %s %s", r->model.name, p->name);
}

/* compile MODEL PROFILE: build --profile, sharing the engine through the cache. */
static int compile_job(json_t *jobs, const graph_ctx *g, const nf_pipeline_recipe *pr,
		       const char *recipe_word, const nf_profile *p)
{
	char *out = job_out(g, pr->recipe, p), *out_word = out ? nf_pipeline_shell_quote(out) : NULL;
	char *name = compile_name(pr->recipe, p);
	json_t *job = out_word && name ? job_new(name, "compile", pr->recipe, runner_of(p), out) : NULL;
	int err = 0;

	if (!job || json_object_set_new(job, "profile", json_string(p->name)) ||
	    json_object_set_new(job, "profile_id", json_string(p->id)) ||
	    json_object_set_new(job, "device", json_string(p->device)) ||
	    set_estimate(job, job_estimate(pr->plan, (int)(p - pr->plan->profiles))) ||
	    append_line(json_object_get(job, "script"),
			"%s build %s --profile %s --out %s --cache-from %s --cache-to %s%s", g->tool,
			recipe_word, p->name, out_word, g->cache, g->cache, g->insecure) ||
	    json_array_append(jobs, job))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	json_decref(job);
	free(out);
	free(out_word);
	free(name);
	return err;
}

/* package MODEL: after its compile jobs, build from the cache, then push. */
static int package_job(json_t *jobs, const graph_ctx *g, const nf_pipeline_recipe *pr,
		       const char *recipe_word, json_t *needs)
{
	const nf_recipe *r = pr->recipe;
	char *out = job_out(g, r, NULL), *out_word = out ? nf_pipeline_shell_quote(out) : NULL;
	char *name = nf_strdup_printf("package %s", r->model.name), *dest = push_word(g, r);
	char *image = nf_strdup_printf("%s:%s", r->image.repository, r->image.tag);
	json_t *job = out_word && name && dest && image ? job_new(name, "package", r, "cpu", out) : NULL;
	json_t *script = job ? json_object_get(job, "script") : NULL;
	int err = 0;

	if (!job || json_object_set(job, "needs", needs) ||
	    json_object_set_new(job, "image", json_string(image)) ||
	    set_estimate(job, job_estimate(pr->plan, -1)) ||
	    append_line(script, "%s build %s --out %s --cache-from %s%s", g->tool, recipe_word,
			out_word, g->cache, g->insecure) ||
	    append_line(script, "%s push %s/oci:%s %s%s", g->tool, out_word, r->image.tag, dest,
			g->insecure) ||
	    json_array_append(jobs, job))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	json_decref(job);
	free(out);
	free(out_word);
	free(name);
	free(dest);
	free(image);
	return err;
}

/* What the graph says of a recipe: where it is, its model, profiles and dropped points. */
static json_t *recipe_entry(const nf_pipeline_recipe *pr)
{
	const nf_plan *p = pr->plan;
	json_t *profiles = json_array(), *dropped = json_array();
	for (size_t i = 0; profiles && i < p->n_profiles; i++)
		if (json_array_append_new(profiles, json_string(p->profiles[i].name)))
			return json_decref(profiles), json_decref(dropped), NULL;
	for (size_t i = 0; dropped && i < p->n_dropped; i++) {
		const nf_dropped *d = &p->dropped[i];
		if (json_array_append_new(dropped, json_pack("{s:s, s:s, s:i, s:s}", "device", d->device,
							     "precision", d->precision, "tensor_parallel",
							     d->tensor_parallel, "reason", d->reason)))
			return json_decref(profiles), json_decref(dropped), NULL;
	}
	return json_pack("{s:s, s:s, s:s, s:s++, s:o, s:o}", "path", pr->path, "model",
			 pr->recipe->model.name, "recipe_digest", p->recipe_digest, "image",
			 pr->recipe->image.repository, ":", pr->recipe->image.tag, "profiles", profiles,
			 "dropped", dropped);
}

/* One recipe's entry and jobs: a compile job per profile, then its package job. */
static int add_recipe(json_t *recipes, json_t *jobs, const graph_ctx *g,
		      const nf_pipeline_recipe *pr)
{
	char *recipe_word = nf_pipeline_shell_quote(pr->path);
	json_t *needs = json_array(), *entry = recipe_entry(pr);
	int err = 0;

	if (!recipe_word || !needs || !entry || json_array_append(recipes, entry))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	for (size_t i = 0; !err && i < pr->plan->n_profiles; i++) {
		const nf_profile *p = &pr->plan->profiles[i];
		char *name = compile_name(pr->recipe, p);
		if (!(err = compile_job(jobs, g, pr, recipe_word, p)) &&
		    (!name || json_array_append_new(needs, json_string(name))))
			err = nf_error_set(NF_ENOMEM, "out of memory");
		free(name);
	}
	if (!err)
		err = package_job(jobs, g, pr, recipe_word, needs);
	json_decref(needs);
	json_decref(entry);
	free(recipe_word);
	return err;
}

/* Two recipes of one model would give their jobs the same names and folders. */
static int check_models_unique(const nf_pipeline_recipe *recipes, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < i; k++)
			if (!strcmp(recipes[i].recipe->model.name, recipes[k].recipe->model.name))
				return nf_error_set(NF_EINPUT, "%s and %s both build model %s: one "
						    "pipeline builds a model once", recipes[k].path,
						    recipes[i].path, recipes[i].recipe->model.name);
	return 0;
}

int nf_pipeline_graph(json_t **out, const nf_pipeline_recipe *recipes, size_t n,
		      const nf_pipeline_opts *o)
{
	json_t *root = NULL, *rs = json_array(), *jobs = json_array();
	graph_ctx g;
	int err;

	*out = NULL;
	if ((err = ctx_init(&g, o)) || (err = check_models_unique(recipes, n)))
		goto done;
	if (!rs || !jobs) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; !err && i < n; i++)
		err = add_recipe(rs, jobs, &g, &recipes[i]);
	if (err)
		goto done;
	root = json_pack("{s:s, s:s, s:O, s:O}", "schema", NF_PIPELINE_SCHEMA, "cache",
			 g.o.cache_ref ? g.o.cache_ref : "$NIMFACTORY_REMOTE_CACHE", "recipes", rs,
			 "jobs", jobs);
	if (!root)
		err = nf_error_set(NF_ENOMEM, "out of memory");
	*out = root;
done:
	json_decref(rs);
	json_decref(jobs);
	ctx_release(&g);
	return err;
}

int nf_pipeline_write(FILE *f, const json_t *graph, nf_pipeline_format fmt)
{
	switch (fmt) {
	case NF_PIPELINE_GITLAB: return nf_pipeline_write_gitlab(f, graph);
	case NF_PIPELINE_JENKINS: return nf_pipeline_write_jenkins(f, graph);
	case NF_PIPELINE_JSON: break;
	}
	if (json_dumpf(graph, f, JSON_INDENT(2) | JSON_SORT_KEYS) || fputc('\n', f) == EOF ||
	    ferror(f))
		return nf_error_set(NF_EIO, "cannot write the pipeline: %s", "write failed");
	return 0;
}
