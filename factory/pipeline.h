/*
 * pipeline.h - the build of one or more recipes as CI jobs
 * (`nimfactory plan RECIPE... --emit gitlab|jenkins|json`).
 *
 * The graph is made once, as data (docs/schemas/pipeline.schema.json), and
 * each CI system's file is rendered from it, so the three never disagree:
 *
 *   compile  one job per profile of every recipe: `nimfactory build RECIPE
 *            --profile NAME`, which compiles and gates that profile and
 *            shares its engine through the remote cache; it runs on a runner
 *            tagged (GitLab) or labelled (Jenkins) with the profile's device:
 *            the SKU name for a GPU profile, "cpu" for the CPU; its gate
 *            report (junit.xml) is attached to the job.
 *   package  one job per recipe, after its compile jobs: `nimfactory build
 *            RECIPE` pulls every engine from the remote cache (compiling
 *            none), gates, packages, and `nimfactory push`es the image.
 *
 * Renderings:
 *   gitlab   a child pipeline (.gitlab-ci.yml): stages compile and package,
 *            `tags:`, `needs:` (the package job needs its recipe's compile
 *            jobs, without their artifacts), `artifacts: reports: junit:`.
 *   jenkins  a declarative Jenkinsfile: a `parallel` stage of one stage per
 *            profile with `agent { label ... }`, the `junit` step, then a
 *            `parallel` package stage of one stage per recipe.
 *   json     the graph itself.
 */
#ifndef NF_FACTORY_PIPELINE_H
#define NF_FACTORY_PIPELINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "factory/plan.h"
#include "factory/recipe.h"

/* The version of the graph's format: "schema" in the JSON. */
#define NF_PIPELINE_SCHEMA "nimfactory.pipeline/v1"

typedef enum nf_pipeline_format {
	NF_PIPELINE_GITLAB,
	NF_PIPELINE_JENKINS,
	NF_PIPELINE_JSON,
} nf_pipeline_format;

/* "gitlab" | "jenkins" | "json" -> *out; NF_EINPUT naming the choices otherwise. */
int nf_pipeline_format_parse(nf_pipeline_format *out, const char *name);

/* One recipe of the pipeline.  Borrowed. */
typedef struct nf_pipeline_recipe {
	const char *path;         /* as the jobs will name it (relative to the checkout) */
	const nf_recipe *recipe;
	const nf_plan *plan;
} nf_pipeline_recipe;

typedef struct nf_pipeline_opts {
	/* The remote cache repository (HOST[:PORT]/NAME); NULL: the CI variable
	 * $NIMFACTORY_REMOTE_CACHE, expanded by the job's shell. */
	const char *cache_ref;
	/* Where images are pushed (HOST[:PORT][/PREFIX]), before the recipe's
	 * image.repository:tag; NULL: $NIMFACTORY_REGISTRY. */
	const char *registry;
	const char *out_dir;      /* the jobs' output folder; NULL: "out" */
	const char *nimfactory;   /* the command; NULL: "nimfactory" */
	bool insecure;            /* --insecure on every registry command (loopback registries) */
} nf_pipeline_opts;

/*
 * The graph of the recipes' jobs (see above; docs/schemas/pipeline.schema.json).
 * NF_EINPUT when two recipes build the same model name (their jobs would
 * share names and outputs).  o may be NULL (defaults).  Caller owns *out.
 */
int nf_pipeline_graph(json_t **out, const nf_pipeline_recipe *recipes, size_t n,
		      const nf_pipeline_opts *o);

/* Write the graph in format fmt to f.  NF_EIO when f fails. */
int nf_pipeline_write(FILE *f, const json_t *graph, nf_pipeline_format fmt);

/* The renderers behind nf_pipeline_write (factory/pipeline_gitlab.c, pipeline_jenkins.c). */
int nf_pipeline_write_gitlab(FILE *f, const json_t *graph);
int nf_pipeline_write_jenkins(FILE *f, const json_t *graph);

/*
 * A shell word: s as is when it holds only [A-Za-z0-9_./:@%+=,-] (and is not
 * empty), else single-quoted with ' as '\''.  Caller frees; NULL on ENOMEM.
 */
char *nf_pipeline_shell_quote(const char *s);

#endif
