/*
 * plan.h - expand a recipe's build matrix into engine profiles and lay out
 * the stage DAG that builds, gates and packages them.
 *
 * Each (device, precision, tensor-parallel) point becomes a profile, unless:
 *   - the device cannot run the precision at all (fp8 on an A100): rejected,
 *     NF_EINPUT naming the recipe, the target and the devices that can;
 *   - this nimfactory cannot build it yet (a GPU engine without the CUDA
 *     backend, tensor parallelism on the CPU): dropped, with the reason kept
 *     in the plan and printed, so the build goes on with the rest.
 * Stages are listed in an order where every stage comes after the ones it
 * depends on; their keys (digests of their inputs) are filled in as the
 * build learns its inputs (a source's digest is known once it is fetched).
 */
#ifndef NF_FACTORY_PLAN_H
#define NF_FACTORY_PLAN_H

#include <jansson.h>
#include <stddef.h>

#include "factory/profile.h"
#include "factory/recipe.h"

typedef enum nf_stage_kind {
	NF_STAGE_FETCH,   /* a source into the cache */
	NF_STAGE_CONVERT, /* checkpoint -> float32 model */
	NF_STAGE_COMPILE, /* quantize + build one profile's engine */
	NF_STAGE_GATE,    /* correctness and performance gates of one profile */
	NF_STAGE_PACKAGE, /* OCI image layout */
	NF_STAGE_REFERENCE, /* the gates' float32 reference (logits on the evaluation
			       text and prompts), shared by every profile's gate */
} nf_stage_kind;

const char *nf_stage_kind_name(nf_stage_kind k); /* "fetch" "convert" ... "reference" */

#define NF_STAGE_MAX_DEPS 4

typedef struct nf_stage {
	nf_stage_kind kind;
	char name[128];                 /* "fetch model", "compile cpu-int8-wo-tp1" */
	int profile;                    /* index into profiles, or -1 */
	size_t deps[NF_STAGE_MAX_DEPS]; /* indices of earlier stages */
	size_t n_deps;
	char key[NF_SHA256_HEX_LEN + 1]; /* digest of the inputs; "" until known */
	int cached;                     /* 1 when the result came from the cache */
	int remote;                     /* plan: 1 when --cache-from holds it (not local) */
	double seconds;                 /* time it took, once run */
	double estimate;                /* plan: seconds a run would take, -1 unknown */
	int estimate_modelled;          /* 1: from the cost model, 0: a past build's timing */
	int skipped;                    /* plan: not run, as no stage that needs it runs
					   (the reference when every gate is cached) */
} nf_stage;

typedef struct nf_dropped {
	char device[64];
	char precision[16];
	int tensor_parallel;
	char reason[200];
} nf_dropped;

typedef struct nf_plan {
	char recipe_digest[NF_SHA256_HEX_LEN + 1];
	nf_profile *profiles; /* owned */
	size_t n_profiles;
	nf_dropped *dropped;  /* owned */
	size_t n_dropped;
	nf_stage *stages;     /* owned, dependency order */
	size_t n_stages;
	/* The chat template nimserve renders with ("model" or a built-in), known
	 * once the checkpoint is loaded (serving.chat_template auto resolved);
	 * NULL before: the recipe's own value. */
	const char *chat_template;
	/* Each profile's memory on its device (factory/plan_fit.h), once the
	 * model's shapes are known (n_profiles entries); NULL before. */
	struct nf_fit *fits; /* owned */
} nf_plan;

/* Expand r into a plan.  Caller owns *out (nf_plan_free). */
int nf_plan_make(nf_plan **out, const nf_recipe *r);
void nf_plan_free(nf_plan *p); /* NULL is fine */

/* The stage of a kind for a profile (-1 for profile-less stages), or NULL. */
nf_stage *nf_plan_stage(nf_plan *p, nf_stage_kind kind, int profile);

/*
 * Narrow p to the profile named name (`build --profile`): the other profiles
 * are released, the stages of no profile (fetch, convert) and those of this
 * one (compile, gate) stay, renumbered, and the package stage goes (one
 * profile makes no image).  NF_EINPUT naming the plan's profiles when there
 * is no such profile (factory/plan_select.c).
 */
int nf_plan_select_profile(nf_plan *p, const char *name);

/* The plan as JSON (profiles with their memory once sized, dropped points
 * with reasons, stages with keys, cache state and estimates). */
int nf_plan_to_json(json_t **out, const nf_plan *p);

/* sha256 hex of a JSON value dumped canonically (sorted keys, compact). */
int nf_json_digest(char hex[NF_SHA256_HEX_LEN + 1], const json_t *j);

#endif
