/* stage_keys.c - the key of each stage, from exactly what it reads (see stage_keys.h). */
#include "factory/stage_keys.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "factory/gpu_profile.h"
#include "util/error.h"
#include "util/version.h"
#include "util/banned.h"

int nf_stage_key(char key[NF_SHA256_HEX_LEN + 1], const char *stage, json_t *inputs)
{
	json_t *k = inputs ? json_pack("{s:s, s:s, s:o}", "stage", stage, "tool",
				       "nimfactory " NF_VERSION, "inputs", inputs)
			   : NULL;
	int err = k ? nf_json_digest(key, k) : nf_error_set(NF_ENOMEM, "out of memory");
	json_decref(k);
	return err;
}

/* A threshold as JSON: NaN (not set) as null, so every value has one form. */
static json_t *jnum(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

int nf_stage_key_convert(char key[NF_SHA256_HEX_LEN + 1], const nf_recipe *r,
			 const char *source_digest, const char *tok_digest)
{
	return nf_stage_key(key, "convert",
			    json_pack("{s:s, s:s, s:s, s:s}", "source_sha256", source_digest,
				      "tokenizer_sha256", tok_digest, "format",
				      nf_source_format_name(r->model.source.format), "chat_template",
				      nf_chat_template_name(r->serving.chat_template)));
}

/* What of build.quantization the engine of p depends on (its int4 group,
 * its calibration text), added to its provenance; -1 out of memory. */
static int quantization_provenance(const nf_recipe *r, const nf_profile *p,
				   const char *calib_digest, json_t *prov)
{
	const nf_precision_info *info = nf_precision_info_of(p->precision);
	int group = nf_precision_group(p->precision, r->build.quant.group_size);
	if (group && json_object_set_new(prov, "group_size", json_integer(group)))
		return -1;
	if (info->calibrated &&
	    json_object_set_new(prov, "calibration_sha256",
				json_string(calib_digest ? calib_digest : "default")))
		return -1;
	return 0;
}

int nf_stage_key_compile(char key[NF_SHA256_HEX_LEN + 1], char **provenance, const nf_recipe *r,
			 const nf_profile *p, const char *source_digest, const char *tok_digest,
			 const char *calib_digest)
{
	json_t *prov = json_pack("{s:s, s:s, s:s, s:s, s:s}", "tool", "nimfactory " NF_VERSION,
				 "source_sha256", source_digest, "tokenizer_sha256",
				 tok_digest, "profile_id", p->id, "precision",
				 nf_precision_name(p->precision));
	json_t *keyj = NULL;
	int err = 0;

	*provenance = NULL;
	if (!prov)
		return nf_error_set(NF_ENOMEM, "out of memory");
	if (quantization_provenance(r, p, calib_digest, prov)) {
		json_decref(prov);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	if (p->is_gpu && (err = nf_gpu_profile_provenance(prov, p))) {
		json_decref(prov);
		return err;
	}
	keyj = json_pack("{s:s, s:O, s:b}", "stage", "compile", "provenance", prov, "autotune",
			 r->build.autotune);
	*provenance = json_dumps(prov, JSON_SORT_KEYS | JSON_COMPACT);
	if (!keyj || !*provenance)
		err = nf_error_set(NF_ENOMEM, "out of memory");
	else
		err = nf_json_digest(key, keyj);
	json_decref(prov);
	json_decref(keyj);
	return err;
}

int nf_stage_key_reference(char key[NF_SHA256_HEX_LEN + 1], const nf_recipe *r,
			   const char *convert_key, const char *eval_digest)
{
	const nf_recipe_correctness *c = &r->gates.correctness;
	json_t *prompts = json_array();
	for (size_t i = 0; prompts && i < c->n_prompts; i++)
		if (json_array_append_new(prompts, json_string(c->prompts[i]))) {
			json_decref(prompts);
			prompts = NULL;
		}
	if (!prompts)
		return nf_error_set(NF_ENOMEM, "out of memory");
	return nf_stage_key(key, "reference",
			    json_pack("{s:s, s:s, s:o, s:i, s:i}", "convert", convert_key,
				      "eval_text_sha256", eval_digest, "prompts", prompts,
				      "max_tokens", c->max_tokens, "eval_tokens", c->eval_tokens));
}

static json_t *tolerance_json(const nf_recipe_tolerance *t)
{
	return json_pack("{s:o, s:o, s:o, s:o, s:o}", "min_token_agreement",
			 jnum(t->min_token_agreement), "max_logit_rel_error",
			 jnum(t->max_logit_rel_error), "min_top1_agreement", jnum(t->min_top1_agreement),
			 "max_kl_mean", jnum(t->max_kl_mean), "min_ppl_ratio", jnum(t->min_ppl_ratio));
}

/* gates.performance as it applies to precision p; null when absent. */
static json_t *performance_json(const nf_recipe_performance *pf, nf_precision p)
{
	if (!pf->present)
		return json_null();
	return json_pack("{s:s, s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "prompt",
			 pf->prompt ? pf->prompt : "", "max_tokens", pf->max_tokens,
			 "min_decode_tokens_per_s", jnum(pf->min_decode_tokens_per_s),
			 "max_peak_memory_mib", jnum(pf->max_peak_memory_mib),
			 "min_prefill_tokens_per_s", jnum(pf->min_prefill_tokens_per_s), "max_ttft_ms",
			 jnum(pf->max_ttft_ms), "min_decode_speedup", jnum(pf->min_decode_speedup[p]),
			 "min_prefill_speedup", jnum(pf->min_prefill_speedup[p]), "max_ttft_ratio",
			 jnum(pf->max_ttft_ratio[p]), "max_memory_ratio", jnum(pf->max_memory_ratio[p]),
			 "max_size_ratio", jnum(pf->max_size_ratio[p]));
}

int nf_stage_key_gate(char key[NF_SHA256_HEX_LEN + 1], const nf_recipe *r, const nf_profile *p,
		      const char *compile_key, const char *reference_key, int threads)
{
	const nf_recipe_gates *g = &r->gates;
	return nf_stage_key(key, "gate",
			    json_pack("{s:s, s:s, s:s, s:o, s:o, s:i}", "compile", compile_key,
				      "reference", reference_key, "device", p->device, "tolerance",
				      tolerance_json(&g->correctness.tolerance[p->precision]),
				      "performance", performance_json(&g->performance, p->precision),
				      "threads", threads));
}

int nf_stage_key_package(char key[NF_SHA256_HEX_LEN + 1], const nf_recipe *r, const nf_plan *plan,
			 const char *runtime_digest)
{
	json_t *stages = json_array();
	for (size_t i = 0; stages && i < plan->n_stages; i++) {
		const nf_stage *st = &plan->stages[i];
		if (st->kind != NF_STAGE_COMPILE && st->kind != NF_STAGE_GATE)
			continue;
		if (json_array_append_new(stages, json_string(st->key))) {
			json_decref(stages);
			stages = NULL;
		}
	}
	if (!stages)
		return nf_error_set(NF_ENOMEM, "out of memory");
	return nf_stage_key(key, "package",
			    json_pack("{s:s, s:s, s:o, s:s, s:I}", "recipe", plan->recipe_digest,
				      "chat_template",
				      plan->chat_template ? plan->chat_template
							  : nf_chat_template_name(r->serving.chat_template),
				      "stages", stages, "runtime_sha256", runtime_digest, "created",
				      (json_int_t)r->image.created_epoch));
}
