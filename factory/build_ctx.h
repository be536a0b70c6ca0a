/*
 * build_ctx.h - what the phases of one `nimfactory build` share (factory/build.c),
 * and the stage results they keep in the cache (factory/build_stage_cache.c).
 * Private to the build: not a public interface.
 */
#ifndef NF_FACTORY_BUILD_CTX_H
#define NF_FACTORY_BUILD_CTX_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/model.h"
#include "engine/tokenizer.h"
#include "factory/build.h"
#include "factory/cache.h"
#include "factory/gate_reference.h"
#include "factory/gates.h"
#include "factory/plan.h"
#include "factory/recipe.h"
#include "factory/remote_cache.h"
#include "factory/stage_graph.h"

typedef struct build_ctx {
	const nf_build_opts *opts;
	nf_log *log;
	nf_recipe *recipe;
	nf_plan *plan;
	nf_cache *cache;
	char *out_final;  /* OUT */
	char *out_tmp;    /* OUT being assembled */
	int out_tmp_lock; /* flock on out_tmp while we live: a later build knows it is ours */
	char *model_path; /* fetched checkpoint (file or folder) */
	char *tok_path;   /* fetched tokenizer, NULL when none */
	char source_digest[NF_SHA256_HEX_LEN + 1];
	char tok_digest[NF_SHA256_HEX_LEN + 1];
	nf_model *model;
	nf_tokenizer *tokenizer; /* borrowed from model_tokenizer; NULL for llama2.c models
				    (tok_path is their tokenizer) */
	char *calib_text;        /* build.quantization.calibration_text read, NULL: the default */
	char calib_digest[NF_SHA256_HEX_LEN + 1]; /* its sha256, "" for the default */
	nf_tokenizer *model_tokenizer; /* every model's, llama2.c's too: the gates tokenize with it */
	char *gate_tmp;           /* the gates' temporary folder beside OUT, removed at the end */
	nf_gate_ref *ref;         /* the float32 reference, once per build */
	nf_gate_result *perf_fp32; /* the fp32 engine's performance, the ratios' denominator */
	nf_gate_results results;
	nf_remote_cache *remote_from; /* --cache-from, NULL when not given */
	nf_remote_cache *remote_to;   /* --cache-to, NULL when not given */
	nf_stage_graph_keys keys; /* the keys the plan's stages do not hold */
	int model_borrowed;       /* model and tokenizers belong to opts->shared */
	bool *gated_now; /* per profile: its gates ran in this build (not from the cache) */
} build_ctx;

/* Seconds on the monotonic clock. */
double nf_build_now(void);

/* The checkpoint in memory, loaded the first time a stage needs the model
 * (why: for the log); a build that finds every result cached never reads
 * the weights (factory/build.c). */
int nf_build_load_model(build_ctx *b, const char *why);

/* Every profile's gates: those cached are read back; the others run against
 * the float32 reference (from the cache, or computed), get their ratios to
 * fp32, and are stored under their keys (factory/build_gates.c). */
int nf_build_stage_gates(build_ctx *b);

/* Where a stage's result was found. */
typedef enum nf_build_found {
	NF_BUILD_MISSING = 0, /* run it */
	NF_BUILD_LOCAL,       /* in the local cache */
	NF_BUILD_PULLED,      /* pulled from --cache-from into the local cache */
} nf_build_found;

/* The folder of stage (kind, key) from the local cache, else pulled from
 * the remote one; *dir NULL when neither has it (or --rebuild). */
nf_build_found nf_build_stage_lookup(build_ctx *b, const char *kind, const char *key, char **dir);

/* " (pulled from REF)" after a stage that came from the remote cache, else "". */
const char *nf_build_pulled_note(build_ctx *b, nf_build_found f, char *buf, size_t size);

/* Push the finished stage (kind, key) to --cache-to, made or found. */
int nf_build_stage_push(build_ctx *b, const char *kind, const char *key);

/* Fill a stage folder being made (dir) with the stage's result. */
typedef int (*nf_build_fill_fn)(build_ctx *b, const char *dir, const void *arg);

/*
 * Make the result of stage st under key (st->key, or the package's): begin
 * it in the cache, fill it, record its time (seconds, or when negative the
 * time the fill took; stage.json in the folder, and
 * the latest time of its scale key, which plan estimates from), commit.  On
 * any failure the half-made folder goes and nothing is published.  *out
 * (may be NULL) the published folder.
 */
int nf_build_stage_store(build_ctx *b, const nf_stage *st, const char *key, double seconds,
			 nf_build_fill_fn fill, const void *arg, char **out);

/* convert: 1 when the cache holds it (the chat template it resolved is
 * restored into the plan), else 0; and the store of a convert just run. */
int nf_build_convert_from_cache(build_ctx *b, const nf_stage *st);
int nf_build_convert_to_cache(build_ctx *b, const nf_stage *st);

/* The gates of profile i: 1 when cached (its results added to b->results),
 * 0 when they must run; and the store of gates just run. */
int nf_build_gate_from_cache(build_ctx *b, size_t i);
int nf_build_gate_to_cache(build_ctx *b, size_t i);

/* The gates' float32 reference from the local cache into b->ref: 1 when it
 * was there (st marked cached); and the store of one just computed. */
int nf_build_reference_from_cache(build_ctx *b, nf_stage *st);
int nf_build_reference_to_cache(build_ctx *b, const nf_stage *st);

/* OUT/oci restored byte for byte from the package stage `key`: 1 when it
 * was there (image the digest its tag points at); and the store of an image
 * just packaged. */
int nf_build_package_from_cache(build_ctx *b, const char *key, char image[NF_SHA256_HEX_LEN + 1]);
int nf_build_package_to_cache(build_ctx *b, const char *key, const char *image, double seconds);

#endif
