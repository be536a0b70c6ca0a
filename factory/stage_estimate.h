/*
 * stage_estimate.h - how long a stage will take on a runner, before it runs.
 *
 * From the past first: every stage a build runs records its seconds in the
 * local cache under timings/<scale key>, where the scale key is the digest
 * of the stage's kind and the inputs that set its cost (the checkpoint's
 * digest, and for a profile's stages its device, precision, tensor
 * parallelism and KV cache): a threshold changed in the recipe gives the
 * gate a new stage key but the same scale key, so its last run's time is
 * still the estimate.  The latest record wins.
 *
 * Without a record, a cost model (marked modelled): the model's parameters
 * times the passes a stage makes over them, at table rates for the CPU
 * (NF_COST_*: rough figures of a runner core, not of this host), and for a
 * GPU profile's gates the roofline's decode step (engine/roofline.h).
 * Without the model's shapes (a source not fetched yet) and without a
 * record, the estimate is unknown (-1).
 */
#ifndef NF_FACTORY_STAGE_ESTIMATE_H
#define NF_FACTORY_STAGE_ESTIMATE_H

#include "engine/model.h"
#include "factory/cache.h"
#include "factory/plan.h"
#include "factory/recipe.h"

/* Table rates of the cost model. */
#define NF_COST_CONVERT_PARAMS_PER_S 2.0e8 /* read, convert and check a float32 parameter */
#define NF_COST_COMPILE_PARAMS_PER_S 1.0e8 /* quantize, calibrate, write one parameter */
#define NF_COST_CPU_FLOPS 2.0e10           /* a runner's batched forward pass, flop/s */
#define NF_COST_CPU_BYTES_PER_S 1.0e10     /* a runner's decode: weight bytes read per s */
#define NF_COST_PACKAGE_BYTES_PER_S 1.0e8  /* compress and hash an image's layers */

/* The scale key of stage st of plan (see above); source_digest is the
 * checkpoint's content digest. */
int nf_stage_scale_key(char key[NF_SHA256_HEX_LEN + 1], const nf_plan *plan, const nf_stage *st,
		       const char *source_digest);

/* Record seconds as the latest time of scale key `key` in c (atomic). */
int nf_stage_timing_record(const nf_cache *c, const char *key, double seconds);

/* The latest recorded time of `key`; -1 when none. */
double nf_stage_timing_latest(const nf_cache *c, const char *key);

/*
 * Fill each stage's estimate: 0 for a stage found cached, else the latest
 * record of its scale key, else the cost model for a model of cfg (NULL:
 * shapes unknown).  source_digest "" or NULL: no record can be looked up.
 */
void nf_stage_estimate(nf_plan *plan, const nf_recipe *r, const nf_cache *c,
		       const char *source_digest, const nf_model_config *cfg);

/* The sum of the known estimates, and *unknown the number of stages without one. */
double nf_stage_estimate_total(const nf_plan *plan, size_t *unknown);

#endif
