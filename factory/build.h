/*
 * build.h - `nimfactory build`: the whole pipeline for one recipe.
 *
 *   recipe -> plan -> fetch -> convert -> compile (per profile)
 *          -> gates (per profile) -> reports -> package (OCI layout)
 *
 * Output folder OUT (default out/<model name>):
 *   oci/                   OCI image layout (absent when a gate failed)
 *   engines/<profile id>/  engine folders
 *   model_manifest.yaml    profiles, as the image carries it
 *   reports/               gates.json, junit.xml, gates.tap
 *   plan.json              profiles, dropped points, stages with keys and times
 * OUT is assembled beside itself and swapped in whole when the build ends
 * (built, or stopped by a failed gate with its reports); on any other error
 * the previous OUT is left as it was.
 */
#ifndef NF_FACTORY_BUILD_H
#define NF_FACTORY_BUILD_H

#include <stdint.h>

#include "factory/log.h"

typedef struct nf_build_opts {
	const char *recipe_path;
	const char *out_dir;   /* NULL: out/<model name> */
	const char *cache_dir; /* NULL: $NIMFACTORY_CACHE or the XDG default */
	int threads;           /* engine threads for gates; 0 = all cores */
	int jobs;              /* profiles compiled at once; 0 = the number of cores */
	uint64_t memory;       /* memory budget in bytes for those compiles; 0 = the
				  machine's available memory (factory/stage_sched.h) */
	int rebuild;           /* 1: ignore cached stage results */
	int allow_skipped_gates; /* 1: package profiles whose gates were skipped (a GPU
				    profile built where its GPU is not); 0: such a build
				    stops before packaging, like a failed gate */
	const char *runtime_dir; /* folder holding nimserve for the runtime layer; NULL: beside
				    the running nimfactory */
	nf_log *log;           /* NULL: the default logger */
	/* The remote cache (factory/remote_cache.h): HOST[:PORT]/NAME or NULL.
	 * A stage missing locally is pulled from cache_from before it is run;
	 * every stage result, made or found, is pushed to cache_to. */
	const char *cache_from;
	const char *cache_to;
	int cache_insecure;    /* plain http to a loopback registry */
	/* NULL: every profile.  A name: compile and gate that profile only, with
	 * its reports, and make no image (a CI job per profile; the package job
	 * then builds the whole recipe from the shared cache). */
	const char *profile;
	/* Several recipes in one build (`nimfactory build a.yaml b.yaml`): what
	 * their builds share (factory/build_shared.h), NULL for one recipe; and
	 * OUT as out_parent/<model name> (NULL: out_dir as above). */
	struct nf_build_shared *shared;
	const char *out_parent;
} nf_build_opts;

/* 0 built; NF_EGATE a gate failed, or was skipped without allow_skipped_gates
 * (reports written, no image); other codes as usual. */
int nf_build_run(const nf_build_opts *o);

#endif
