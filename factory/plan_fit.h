/*
 * plan_fit.h - whether a profile's engine fits its device's memory.
 *
 * What one device of a profile holds while it serves:
 *   weights    every tensor of the engine in the profile's precision
 *              (nf_engine_weights_bytes: data, scales, the float32 tensors),
 *              split over the tensor-parallel devices;
 *   KV cache   K and V at the served context (the recipe's
 *              serving.max_context, else the model's) for serving.max_batch
 *              sequences in the profile's KV precision, split over the
 *              devices by KV heads;
 *   workspace  the activations of one batched pass (NF_FWD_PASS_TOKENS
 *              tokens), the attention scores and the logits of a batch;
 *              every device holds all of it.
 * The device's memory is the SKU table's (engine/sku.c) for a GPU and the
 * host's physical memory for the CPU.  deploy_sizing.c sizes a pod's memory
 * from the same KV figure (nf_fit_kv_bytes).
 */
#ifndef NF_FACTORY_PLAN_FIT_H
#define NF_FACTORY_PLAN_FIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/checkpoint.h"
#include "engine/engine.h"
#include "engine/model.h"
#include "engine/sku.h"
#include "factory/deploy.h"
#include "factory/plan.h"
#include "factory/recipe.h"

/* What the recipe sizes a served profile for: the int4 group (0 the
 * default), the sequences decoded together and the tokens each may hold
 * (0: the model's context). */
typedef struct nf_fit_sizes {
	int group;
	int max_batch;
	int max_context;
} nf_fit_sizes;

nf_fit_sizes nf_fit_sizes_of(const nf_recipe *r);

typedef struct nf_fit {
	uint64_t weights;   /* per device */
	uint64_t kv;        /* per device */
	uint64_t workspace; /* per device */
	uint64_t needed;    /* their sum */
	uint64_t capacity;  /* the device's memory; 0 when unknown */
	bool fits;          /* needed <= capacity (true when capacity is unknown) */
} nf_fit;

/* Bytes of K and V for max_batch sequences of cfg at its context in kind;
 * NF_EINPUT on overflow. */
int nf_fit_kv_bytes(uint64_t *out, const nf_model_config *cfg, nf_kv_kind kind, int max_batch);

/* The memory of one device of profile p (precision, KV cache, tensor
 * parallelism) served as sz says, for a model of cfg on sku.  host_memory
 * is the CPU's capacity (0: unknown).  NF_EINPUT on overflow. */
int nf_fit_profile(nf_fit *out, const nf_model_config *cfg, const nf_profile *p,
		   const nf_fit_sizes *sz, const nf_sku *sku, uint64_t host_memory);

/* "needs 19.3 GiB (weights 16.1, KV 2.9, workspace 0.3) > 16.0 GiB on t4";
 * "of" instead of ">" when it fits. */
void nf_fit_describe(char *buf, size_t size, const nf_fit *f, const char *device);

/* The loader of a recipe's source format (auto: sniffed from the file at path). */
nf_ckpt_format nf_fit_ckpt_format(nf_source_format f, const char *path);

/* The model's shapes from the header of the checkpoint at path (file or
 * folder), no weight read: the loaders' own header parsing and checks. */
int nf_fit_read_shapes(nf_model_config *cfg, const char *path, nf_source_format f);

/* The host's physical memory in bytes (0 when it cannot be read). */
uint64_t nf_fit_host_memory(void);

/*
 * Size every profile of plan for a model of cfg and drop those that do not
 * fit, with nf_fit_describe as the reason, together with their stages (the
 * rest renumbered); plan->fits then holds the size of each profile that
 * stays.  *n_dropped gets how many went.  NF_EINPUT naming
 * `what` when none is left, or when sz->max_context is more than the
 * model's context.
 */
int nf_plan_fit(nf_plan *plan, size_t *n_dropped, const nf_model_config *cfg,
		const nf_fit_sizes *sz, uint64_t host_memory, const char *what);

#endif
