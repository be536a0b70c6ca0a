/*
 * recipe_json.c - the canonical JSON of a recipe and its digest (recipe.h).
 *
 * Every key of the format appears with its default filled in; optional
 * values that are absent are null.  Paths appear as written, so the digest
 * is the same wherever the recipe is checked out, and formatting, comments
 * and key order never change it.
 */
#include "factory/recipe.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

/* A builder that remembers the first failure, so construction reads straight. */
struct jb {
	int failed;
};

static json_t *jset(struct jb *b, json_t *obj, const char *key, json_t *val)
{
	if (!obj) {
		json_decref(val);
		val = NULL;
	}
	if (!val || json_object_set_new(obj, key, val) < 0)
		b->failed = 1;
	return val;
}

static json_t *jstr(const char *s) { return s ? json_string(s) : json_null(); }

static void jpush(struct jb *b, json_t *arr, json_t *val)
{
	if (!arr) {
		json_decref(val);
		val = NULL;
	}
	if (!val || json_array_append_new(arr, val) < 0)
		b->failed = 1;
}

static json_t *source_json(struct jb *b, const nf_recipe_source *s)
{
	json_t *o, *g;

	if (s->kind == NF_SOURCE_NONE)
		return json_null();
	o = json_object();
	switch (s->kind) {
	case NF_SOURCE_URL:
		jset(b, o, "url", jstr(s->url));
		break;
	case NF_SOURCE_PATH:
		jset(b, o, "path", jstr(s->path_written));
		break;
	case NF_SOURCE_GIT:
		g = jset(b, o, "git", json_object());
		jset(b, g, "url", jstr(s->git.url));
		jset(b, g, "commit", jstr(s->git.commit));
		jset(b, g, "path", jstr(s->git.path));
		break;
	default:
		break;
	}
	jset(b, o, "sha256", jstr(s->sha256));
	jset(b, o, "format", json_string(nf_source_format_name(s->format)));
	jset(b, o, "archive", json_boolean(s->archive));
	return o;
}

/* A number, or null where the recipe leaves it to the defaults (NAN). */
static json_t *jnum(double x) { return isnan(x) ? json_null() : json_real(x); }

static json_t *tolerance_json(struct jb *b, const nf_recipe_tolerance *t)
{
	json_t *o = json_object();
	jset(b, o, "min_token_agreement", jnum(t->min_token_agreement));
	jset(b, o, "max_logit_rel_error", jnum(t->max_logit_rel_error));
	jset(b, o, "min_top1_agreement", jnum(t->min_top1_agreement));
	jset(b, o, "max_kl_mean", jnum(t->max_kl_mean));
	jset(b, o, "min_ppl_ratio", jnum(t->min_ppl_ratio));
	return o;
}

/* {precision: bound} for the precisions a ratio bound is set for. */
static json_t *ratios_json(struct jb *b, const double *v)
{
	json_t *o = json_object();
	for (int p = 0; p < NF_PREC_COUNT; p++)
		if (v[p] > 0)
			jset(b, o, nf_precision_name((nf_precision)p), json_real(v[p]));
	return o;
}

static json_t *precisions_json(struct jb *b, const nf_precision *p, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		jpush(b, a, json_string(nf_precision_name(p[i])));
	return a;
}

static json_t *ints_json(struct jb *b, const int *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		jpush(b, a, json_integer(v[i]));
	return a;
}

int nf_recipe_to_json(json_t **out, const nf_recipe *r)
{
	struct jb b = {0};
	json_t *root = json_object(), *o, *a, *g, *x;

	*out = NULL;
	jset(&b, root, "apiVersion", json_string(NF_RECIPE_API_VERSION));
	jset(&b, root, "kind", json_string("Recipe"));

	o = jset(&b, root, "model", json_object());
	jset(&b, o, "name", jstr(r->model.name));
	jset(&b, o, "family", json_string(nf_model_family_name(r->model.family)));
	jset(&b, o, "version", jstr(r->model.version));
	jset(&b, o, "license", jstr(r->model.license));
	jset(&b, o, "source", source_json(&b, &r->model.source));
	jset(&b, o, "tokenizer", source_json(&b, &r->model.tokenizer));

	o = jset(&b, root, "build", json_object());
	a = jset(&b, o, "targets", json_array());
	for (size_t i = 0; i < r->build.n_targets; i++) {
		const nf_recipe_target *t = &r->build.targets[i];
		json_t *to = json_object();
		jset(&b, to, "device", json_string(t->sku->name));
		jset(&b, to, "precisions", precisions_json(&b, t->precisions, t->n_precisions));
		jset(&b, to, "tensor_parallel", ints_json(&b, t->tensor_parallel, t->n_tensor_parallel));
		if (t->n_kv_caches) { /* absent: the recipe's digest as before the key existed */
			json_t *kv = jset(&b, to, "kv_cache", json_array());
			for (size_t k = 0; k < t->n_kv_caches; k++)
				jpush(&b, kv, json_string(nf_kv_kind_name(t->kv_caches[k])));
		}
		jpush(&b, a, to);
	}
	jset(&b, o, "autotune", json_boolean(r->build.autotune));
	/* only when written, so that older recipes keep their digest */
	if (r->build.quant.group_size || r->build.quant.calibration_text_written) {
		x = jset(&b, o, "quantization", json_object());
		if (r->build.quant.group_size)
			jset(&b, x, "group_size", json_integer(r->build.quant.group_size));
		if (r->build.quant.calibration_text_written)
			jset(&b, x, "calibration_text", jstr(r->build.quant.calibration_text_written));
	}

	g = jset(&b, root, "gates", json_object());
	{
		const nf_recipe_correctness *cr = &r->gates.correctness;
		o = jset(&b, g, "correctness", json_object());
		a = jset(&b, o, "prompts", json_array());
		for (size_t i = 0; i < cr->n_prompts; i++)
			jpush(&b, a, json_string(cr->prompts[i]));
		jset(&b, o, "max_tokens", json_integer(cr->max_tokens));
		jset(&b, o, "eval_text", jstr(cr->eval_text_written));
		jset(&b, o, "eval_tokens", json_integer(cr->eval_tokens));
		jset(&b, o, "default", tolerance_json(&b, &cr->def));
		x = jset(&b, o, "precisions", json_object());
		for (int p = 0; p < NF_PREC_COUNT; p++)
			if (cr->overridden[p])
				jset(&b, x, nf_precision_name((nf_precision)p),
				     tolerance_json(&b, &cr->tolerance[p]));
	}
	{
		const nf_recipe_performance *pf = &r->gates.performance;
		if (!pf->present) {
			jset(&b, g, "performance", json_null());
		} else {
			o = jset(&b, g, "performance", json_object());
			jset(&b, o, "prompt", jstr(pf->prompt));
			jset(&b, o, "max_tokens", json_integer(pf->max_tokens));
			jset(&b, o, "min_decode_tokens_per_s",
			     pf->min_decode_tokens_per_s > 0 ? json_real(pf->min_decode_tokens_per_s)
							     : json_null());
			jset(&b, o, "max_peak_memory_mib",
			     pf->max_peak_memory_mib > 0 ? json_real(pf->max_peak_memory_mib) : json_null());
			jset(&b, o, "min_prefill_tokens_per_s",
			     pf->min_prefill_tokens_per_s > 0 ? json_real(pf->min_prefill_tokens_per_s)
							      : json_null());
			jset(&b, o, "max_ttft_ms", pf->max_ttft_ms > 0 ? json_real(pf->max_ttft_ms) : json_null());
			jset(&b, o, "min_decode_speedup", ratios_json(&b, pf->min_decode_speedup));
			jset(&b, o, "min_prefill_speedup", ratios_json(&b, pf->min_prefill_speedup));
			jset(&b, o, "max_ttft_ratio", ratios_json(&b, pf->max_ttft_ratio));
			jset(&b, o, "max_memory_ratio", ratios_json(&b, pf->max_memory_ratio));
			jset(&b, o, "max_size_ratio", ratios_json(&b, pf->max_size_ratio));
		}
	}

	o = jset(&b, root, "serving", json_object());
	jset(&b, o, "chat_template", json_string(nf_chat_template_name(r->serving.chat_template)));
	jset(&b, o, "precision_preference",
	     precisions_json(&b, r->serving.precision_preference, r->serving.n_precision_preference));
	jset(&b, o, "tensor_parallel_preference",
	     ints_json(&b, r->serving.tensor_parallel_preference,
		       r->serving.n_tensor_parallel_preference));
	if (r->serving.speculative.present) { /* absent: older recipes keep their digest */
		const nf_recipe_speculative *sp = &r->serving.speculative;
		x = jset(&b, o, "speculative", json_object());
		jset(&b, x, "method", json_string(nf_recipe_spec_method_name(sp->method)));
		jset(&b, x, "k", sp->k ? json_integer(sp->k) : json_null());
		jset(&b, x, "draft_profile", sp->draft_profile ? jstr(sp->draft_profile) : json_null());
	}

	o = jset(&b, root, "image", json_object());
	jset(&b, o, "repository", jstr(r->image.repository));
	jset(&b, o, "tag", jstr(r->image.tag));
	x = jset(&b, o, "labels", json_object());
	for (size_t i = 0; i < r->image.n_labels; i++)
		jset(&b, x, r->image.labels[i].key, json_string(r->image.labels[i].value));
	jset(&b, o, "compression", json_string(nf_compression_name(r->image.compression)));
	jset(&b, o, "layout", json_string(nf_image_layout_name(r->image.layout)));
	jset(&b, o, "base", json_string(r->image.base_written ? r->image.base_written : "none"));
	jset(&b, o, "created", jstr(r->image.created));

	if (b.failed || !root) {
		json_decref(root);
		return nf_error_set(NF_ENOMEM, "recipe: cannot build its JSON");
	}
	*out = root;
	return 0;
}

int nf_recipe_digest(char hex[NF_SHA256_HEX_LEN + 1], const nf_recipe *r)
{
	json_t *j = NULL;
	char *text = NULL;
	int err;

	hex[0] = '\0';
	if ((err = nf_recipe_to_json(&j, r)) < 0)
		goto done;
	text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
	if (!text) {
		err = nf_error_set(NF_ENOMEM, "recipe: cannot serialise its JSON");
		goto done;
	}
	err = nf_sha256_hex(hex, text, strlen(text));
done:
	free(text);
	json_decref(j);
	return err;
}
