/*
 * stage_graph.h - every key of a plan's stage graph at once, from the
 * digests the graph starts from (the fetched sources, the files the recipe
 * names, the runtime shipped), and what the cache holds of it.
 *
 * `build` calls it once its sources are fetched, and runs each stage whose
 * key the cache lacks; `plan` calls it before any work (the sources' digests
 * from their pins or local files) to say which stages a build would run and
 * how long they took when they last ran (each stage result records its time
 * in NF_STAGE_TIMING_FILE).
 */
#ifndef NF_FACTORY_STAGE_GRAPH_H
#define NF_FACTORY_STAGE_GRAPH_H

#include "factory/cache.h"
#include "factory/plan.h"
#include "factory/recipe.h"

/* What the keys start from. */
typedef struct nf_stage_inputs {
	const char *source_digest;  /* the checkpoint's content digest */
	const char *tok_digest;     /* the tokenizer's, "" when the recipe has none */
	const char *calib_digest;   /* build.quantization.calibration_text's sha256, NULL: none */
	const char *eval_digest;    /* gates.correctness.eval_text's, "" for the shipped text */
	const char *runtime_digest; /* the nimserve binary shipped, "" for none */
	int threads;                /* engine threads of the gates (--threads, 0 all) */
} nf_stage_inputs;

/* The keys the plan's stages do not hold (plan.h keeps the image digest in
 * the package stage's key once packaged). */
typedef struct nf_stage_graph_keys {
	char reference[NF_SHA256_HEX_LEN + 1]; /* the float32 reference the gates share */
	char package[NF_SHA256_HEX_LEN + 1];   /* the image's inputs */
} nf_stage_graph_keys;

/* Fill the key of convert, every compile and every gate in plan, and *keys. */
int nf_stage_graph_keys_fill(nf_stage_graph_keys *keys, nf_plan *plan, const nf_recipe *r,
			     const nf_stage_inputs *in);

/* Each stage result's record of how long it took to make ({"seconds": s}). */
#define NF_STAGE_TIMING_FILE "stage.json"

/* Write the record into a stage folder being filled (before its commit). */
int nf_stage_timing_write(const char *stage_dir, double seconds);

/* The seconds a cached stage result took to make; -1 when it has no record. */
double nf_stage_timing_read(const char *stage_dir);

/* Mark the stages of plan whose results c holds (cached = 1, seconds = the
 * time they took to make, -1 when the result records none); the package
 * stage by package_key; the reference skipped when no gate runs.  Fetch
 * stages are left to the caller (their keys are blob digests). */
void nf_stage_graph_mark_cached(nf_plan *plan, const nf_cache *c, const char *package_key);

/* Mark the reference skipped when every gate is cached or (plan) remote:
 * a build makes the reference only for a gate that runs. */
void nf_stage_graph_mark_skipped(nf_plan *plan);

#endif
