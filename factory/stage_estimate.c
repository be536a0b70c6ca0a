/* stage_estimate.c - a stage's runner time, recorded or modelled (see stage_estimate.h). */
#define _GNU_SOURCE
#include "factory/stage_estimate.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_weights.h"
#include "engine/roofline.h"
#include "engine/sku.h"
#include "factory/stage_graph.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* The records live beside the stage results: <root>/timings/<scale key>/stage.json. */
#define TIMINGS_DIR "timings"

int nf_stage_scale_key(char key[NF_SHA256_HEX_LEN + 1], const nf_plan *plan, const nf_stage *st,
		       const char *source_digest)
{
	json_t *j = json_pack("{s:s, s:s}", "kind", nf_stage_kind_name(st->kind), "source",
			      source_digest ? source_digest : "");
	/* (the reference scales with the model alone: its key is the kind and source) */
	int err = 0;
	if (j && st->profile >= 0) {
		const nf_profile *p = &plan->profiles[st->profile];
		err = json_object_update_new(
			j, json_pack("{s:s, s:s, s:i, s:s}", "device", p->device, "precision",
				     nf_precision_name(p->precision), "tensor_parallel",
				     p->tensor_parallel, "kv_cache", nf_kv_kind_name(p->kv_cache)));
	} else if (j && st->kind == NF_STAGE_PACKAGE) {
		err = json_object_set_new(j, "profiles", json_integer((json_int_t)plan->n_profiles));
	} else if (j && st->kind == NF_STAGE_FETCH) {
		err = json_object_set_new(j, "name", json_string(st->name));
	}
	if (!j || err) {
		json_decref(j);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	err = nf_json_digest(key, j);
	json_decref(j);
	return err;
}

static char *timing_dir(const nf_cache *c, const char *key)
{
	return nf_strdup_printf("%s/" TIMINGS_DIR "/%s", nf_cache_root(c), key);
}

int nf_stage_timing_record(const nf_cache *c, const char *key, double seconds)
{
	char *dir = timing_dir(c, key);
	int err = dir ? nf_fs_mkdir_p(dir, 0755) : nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = nf_stage_timing_write(dir, seconds);
	free(dir);
	return err;
}

double nf_stage_timing_latest(const nf_cache *c, const char *key)
{
	char *dir = timing_dir(c, key);
	double s = dir ? nf_stage_timing_read(dir) : -1;
	free(dir);
	return s;
}

/* Tokens the correctness gate runs the engine over: the evaluation text and
 * each prompt's continuation. */
static double gate_tokens(const nf_recipe *r)
{
	const nf_recipe_correctness *cr = &r->gates.correctness;
	return (double)cr->eval_tokens + (double)cr->n_prompts * cr->max_tokens;
}

/* Decode tokens the performance gate times (three runs). */
static double perf_tokens(const nf_recipe *r)
{
	return r->gates.performance.present ? 3.0 * r->gates.performance.max_tokens : 0;
}

/* The gates of profile p: on the CPU the batched pass's flops and the
 * decode's weight reads at table rates; on a GPU the roofline's step. */
static double modelled_gate(const nf_recipe *r, const nf_profile *p, const nf_model_config *cfg,
			    double params)
{
	const nf_sku *sku = nf_sku_find(p->device);
	uint64_t wbytes = 0;
	nf_roofline rl;
	if (nf_engine_weights_bytes(&wbytes, cfg, p->precision, r->build.quant.group_size)) {
		nf_error_clear();
		return -1;
	}
	if (sku && sku->kind == NF_SKU_GPU &&
	    !nf_roofline_model(&rl, cfg, p->precision, p->kv_cache, sku, cfg->max_seq_len, 1.0))
		return (gate_tokens(r) + perf_tokens(r)) * rl.buckets[0].step_seconds;
	nf_error_clear();
	return gate_tokens(r) * 2.0 * params / NF_COST_CPU_FLOPS +
	       perf_tokens(r) * (double)wbytes / NF_COST_CPU_BYTES_PER_S;
}

/* The cost model's seconds for st, -1 when it has none (a fetch). */
static double modelled(const nf_plan *plan, const nf_stage *st, const nf_recipe *r,
		       const nf_model_config *cfg)
{
	size_t params = 0;
	uint64_t wbytes, all = 0;
	if (nf_model_param_count(&params, cfg)) {
		nf_error_clear();
		return -1;
	}
	switch (st->kind) {
	case NF_STAGE_CONVERT: return (double)params / NF_COST_CONVERT_PARAMS_PER_S;
	case NF_STAGE_COMPILE: return (double)params / NF_COST_COMPILE_PARAMS_PER_S;
	case NF_STAGE_GATE: return modelled_gate(r, &plan->profiles[st->profile], cfg, (double)params);
	case NF_STAGE_REFERENCE: return gate_tokens(r) * 2.0 * (double)params / NF_COST_CPU_FLOPS;
	case NF_STAGE_PACKAGE:
		for (size_t i = 0; i < plan->n_profiles; i++)
			if (!nf_engine_weights_bytes(&wbytes, cfg, plan->profiles[i].precision,
						     r->build.quant.group_size))
				all += wbytes;
		nf_error_clear();
		return (double)all / NF_COST_PACKAGE_BYTES_PER_S;
	default: return -1;
	}
}

void nf_stage_estimate(nf_plan *plan, const nf_recipe *r, const nf_cache *c,
		       const char *source_digest, const nf_model_config *cfg)
{
	for (size_t i = 0; i < plan->n_stages; i++) {
		nf_stage *st = &plan->stages[i];
		char key[NF_SHA256_HEX_LEN + 1];
		st->estimate = -1;
		st->estimate_modelled = 0;
		if (st->cached || st->skipped || st->remote) { /* nothing runs (a pull at most) */
			st->estimate = 0;
			continue;
		}
		if (source_digest && source_digest[0] &&
		    !nf_stage_scale_key(key, plan, st, source_digest) &&
		    (st->estimate = nf_stage_timing_latest(c, key)) >= 0)
			continue;
		nf_error_clear();
		if (cfg && (st->estimate = modelled(plan, st, r, cfg)) >= 0)
			st->estimate_modelled = 1;
	}
}

double nf_stage_estimate_total(const nf_plan *plan, size_t *unknown)
{
	double total = 0;
	*unknown = 0;
	for (size_t i = 0; i < plan->n_stages; i++) {
		if (plan->stages[i].estimate >= 0)
			total += plan->stages[i].estimate;
		else
			(*unknown)++;
	}
	return total;
}
