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
#include <stddef.h>
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

/* A double member of a struct, by its key in the JSON. */
struct num_key {
	const char *key;
	size_t off;
};

static const double *nums_at(const void *obj, const struct num_key *k)
{
	return (const double *)(const void *)((const char *)obj + k->off);
}

static double num_at(const void *obj, const struct num_key *k)
{
	return *nums_at(obj, k);
}

#define TOL(k) {#k, offsetof(nf_recipe_tolerance, k)}
static const struct num_key tolerance_keys[] = {
	TOL(min_token_agreement), TOL(max_logit_rel_error), TOL(min_top1_agreement),
	TOL(max_kl_mean),         TOL(min_ppl_ratio),
};
#undef TOL

/* gates.performance: the absolute bounds (a number, or null when not gated)
 * and the per-precision ratio bounds (arrays of NF_PREC_COUNT). */
#define PERF(k) {#k, offsetof(nf_recipe_performance, k)}
static const struct num_key performance_bounds[] = {
	PERF(min_decode_tokens_per_s), PERF(max_peak_memory_mib),
	PERF(min_prefill_tokens_per_s), PERF(max_ttft_ms),
};
static const struct num_key performance_ratios[] = {
	PERF(min_decode_speedup), PERF(min_prefill_speedup), PERF(max_ttft_ratio),
	PERF(max_memory_ratio),   PERF(max_size_ratio),
};
#undef PERF

#define N_KEYS(a) (sizeof(a) / sizeof((a)[0]))

static json_t *tolerance_json(struct jb *b, const nf_recipe_tolerance *t)
{
	json_t *o = json_object();
	for (size_t i = 0; i < N_KEYS(tolerance_keys); i++)
		jset(b, o, tolerance_keys[i].key, jnum(num_at(t, &tolerance_keys[i])));
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

static json_t *strings_json(struct jb *b, char *const *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		jpush(b, a, json_string(v[i]));
	return a;
}

static json_t *model_json(struct jb *b, const nf_recipe_model *m)
{
	json_t *o = json_object();
	jset(b, o, "name", jstr(m->name));
	jset(b, o, "family", json_string(nf_model_family_name(m->family)));
	jset(b, o, "version", jstr(m->version));
	jset(b, o, "license", jstr(m->license));
	jset(b, o, "source", source_json(b, &m->source));
	jset(b, o, "tokenizer", source_json(b, &m->tokenizer));
	return o;
}

static json_t *target_json(struct jb *b, const nf_recipe_target *t)
{
	json_t *o = json_object();
	jset(b, o, "device", json_string(t->sku->name));
	jset(b, o, "precisions", precisions_json(b, t->precisions, t->n_precisions));
	jset(b, o, "tensor_parallel", ints_json(b, t->tensor_parallel, t->n_tensor_parallel));
	if (t->n_kv_caches) { /* absent: the recipe's digest as before the key existed */
		json_t *kv = jset(b, o, "kv_cache", json_array());
		for (size_t k = 0; k < t->n_kv_caches; k++)
			jpush(b, kv, json_string(nf_kv_kind_name(t->kv_caches[k])));
	}
	return o;
}

static json_t *build_json(struct jb *b, const nf_recipe_build *bd)
{
	json_t *o = json_object(), *a, *x;
	a = jset(b, o, "targets", json_array());
	for (size_t i = 0; i < bd->n_targets; i++)
		jpush(b, a, target_json(b, &bd->targets[i]));
	jset(b, o, "autotune", json_boolean(bd->autotune));
	/* only when written, so that older recipes keep their digest */
	if (bd->quant.group_size || bd->quant.calibration_text_written) {
		x = jset(b, o, "quantization", json_object());
		if (bd->quant.group_size)
			jset(b, x, "group_size", json_integer(bd->quant.group_size));
		if (bd->quant.calibration_text_written)
			jset(b, x, "calibration_text", jstr(bd->quant.calibration_text_written));
	}
	return o;
}

static json_t *correctness_json(struct jb *b, const nf_recipe_correctness *cr)
{
	json_t *o = json_object(), *x;
	jset(b, o, "prompts", strings_json(b, cr->prompts, cr->n_prompts));
	jset(b, o, "max_tokens", json_integer(cr->max_tokens));
	jset(b, o, "eval_text", jstr(cr->eval_text_written));
	jset(b, o, "eval_tokens", json_integer(cr->eval_tokens));
	jset(b, o, "default", tolerance_json(b, &cr->def));
	x = jset(b, o, "precisions", json_object());
	for (int p = 0; p < NF_PREC_COUNT; p++)
		if (cr->overridden[p])
			jset(b, x, nf_precision_name((nf_precision)p), tolerance_json(b, &cr->tolerance[p]));
	return o;
}

/* null when the recipe has no gates.performance */
static json_t *performance_json(struct jb *b, const nf_recipe_performance *pf)
{
	json_t *o;
	if (!pf->present)
		return json_null();
	o = json_object();
	jset(b, o, "prompt", jstr(pf->prompt));
	jset(b, o, "max_tokens", json_integer(pf->max_tokens));
	for (size_t i = 0; i < N_KEYS(performance_bounds); i++) {
		double x = num_at(pf, &performance_bounds[i]);
		jset(b, o, performance_bounds[i].key, x > 0 ? json_real(x) : json_null());
	}
	for (size_t i = 0; i < N_KEYS(performance_ratios); i++)
		jset(b, o, performance_ratios[i].key, ratios_json(b, nums_at(pf, &performance_ratios[i])));
	return o;
}

static json_t *gates_json(struct jb *b, const nf_recipe_gates *g)
{
	json_t *o = json_object();
	jset(b, o, "correctness", correctness_json(b, &g->correctness));
	jset(b, o, "performance", performance_json(b, &g->performance));
	return o;
}

static json_t *serving_json(struct jb *b, const nf_recipe_serving *s)
{
	json_t *o = json_object(), *x;
	jset(b, o, "chat_template", json_string(nf_chat_template_name(s->chat_template)));
	jset(b, o, "precision_preference",
	     precisions_json(b, s->precision_preference, s->n_precision_preference));
	jset(b, o, "tensor_parallel_preference",
	     ints_json(b, s->tensor_parallel_preference, s->n_tensor_parallel_preference));
	if (s->speculative.present) { /* absent: older recipes keep their digest */
		const nf_recipe_speculative *sp = &s->speculative;
		x = jset(b, o, "speculative", json_object());
		jset(b, x, "method", json_string(nf_recipe_spec_method_name(sp->method)));
		jset(b, x, "k", sp->k ? json_integer(sp->k) : json_null());
		jset(b, x, "draft_profile", sp->draft_profile ? jstr(sp->draft_profile) : json_null());
	}
	/* at their defaults they are left out, so older recipes keep their digest */
	if (s->max_batch != NF_RECIPE_MAX_BATCH)
		jset(b, o, "max_batch", json_integer(s->max_batch));
	if (s->max_context)
		jset(b, o, "max_context", json_integer(s->max_context));
	return o;
}

static json_t *image_json(struct jb *b, const nf_recipe_image *im)
{
	json_t *o = json_object(), *x;
	jset(b, o, "repository", jstr(im->repository));
	jset(b, o, "tag", jstr(im->tag));
	x = jset(b, o, "labels", json_object());
	for (size_t i = 0; i < im->n_labels; i++)
		jset(b, x, im->labels[i].key, json_string(im->labels[i].value));
	jset(b, o, "compression", json_string(nf_compression_name(im->compression)));
	jset(b, o, "layout", json_string(nf_image_layout_name(im->layout)));
	jset(b, o, "base", json_string(im->base_written ? im->base_written : "none"));
	jset(b, o, "created", jstr(im->created));
	return o;
}

int nf_recipe_to_json(json_t **out, const nf_recipe *r)
{
	struct jb b = {0};
	json_t *root = json_object();

	*out = NULL;
	jset(&b, root, "apiVersion", json_string(NF_RECIPE_API_VERSION));
	jset(&b, root, "kind", json_string("Recipe"));
	jset(&b, root, "model", model_json(&b, &r->model));
	jset(&b, root, "build", build_json(&b, &r->build));
	jset(&b, root, "gates", gates_json(&b, &r->gates));
	jset(&b, root, "serving", serving_json(&b, &r->serving));
	jset(&b, root, "image", image_json(&b, &r->image));
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
