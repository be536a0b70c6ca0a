/* plan.c - the build matrix and the stage DAG (see plan.h). */
#include "factory/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sku.h"
#include "factory/plan_fit.h"
#include "util/error.h"
#include "util/banned.h"

const char *nf_stage_kind_name(nf_stage_kind k)
{
	switch (k) {
	case NF_STAGE_FETCH: return "fetch";
	case NF_STAGE_CONVERT: return "convert";
	case NF_STAGE_COMPILE: return "compile";
	case NF_STAGE_GATE: return "gate";
	case NF_STAGE_PACKAGE: return "package";
	case NF_STAGE_REFERENCE: return "reference";
	}
	return "unknown";
}

int nf_json_digest(char hex[NF_SHA256_HEX_LEN + 1], const json_t *j)
{
	char *text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII);
	int err;
	if (!text)
		return nf_error_set(NF_ENOMEM, "plan: cannot serialise JSON");
	err = nf_sha256_hex(hex, text, strlen(text));
	free(text);
	return err;
}

/* What identifies a source's bytes, independent of where the recipe lives. */
static json_t *source_identity(const nf_recipe_source *s)
{
	switch (s->kind) {
	case NF_SOURCE_URL:
		return json_pack("{s:s, s:s}", "kind", "url", "sha256", s->sha256);
	case NF_SOURCE_PATH:
		if (s->sha256)
			return json_pack("{s:s, s:s}", "kind", "path", "sha256", s->sha256);
		return json_pack("{s:s, s:s}", "kind", "path", "path", s->path_written);
	case NF_SOURCE_GIT:
		return json_pack("{s:s, s:s, s:s, s:s}", "kind", "git", "url", s->git.url, "commit",
				 s->git.commit, "path", s->git.path ? s->git.path : "");
	default:
		return json_null();
	}
}

/* Why this build cannot make the point yet (NULL when it can).  A GPU
 * profile is built on any machine (weights in its precision's format, the
 * roofline model of its SKU: factory/gpu_profile.h); its gates run only
 * where its GPU is. */
static const char *not_buildable(const nf_sku *sku, nf_precision prec, int tp)
{
	if (sku->kind == NF_SKU_GPU && tp != 1)
		return "tensor parallelism over several GPUs needs the multi-GPU runtime, which this "
		       "nimfactory does not build yet";
	if (sku->kind == NF_SKU_GPU)
		return NULL;
	if (!nf_precision_cpu_supported(prec))
		return "the CPU backend serves fp32 and int8-wo only";
	if (tp != 1)
		return "tensor parallelism applies to GPU profiles; the CPU backend is one process";
	return NULL;
}

static int add_stage(nf_plan *p, size_t *cap, nf_stage_kind kind, int profile, const char *name,
		     const size_t *deps, size_t n_deps, size_t *index)
{
	if (p->n_stages == *cap) {
		size_t n = *cap ? *cap * 2 : 16;
		nf_stage *s = realloc(p->stages, n * sizeof(*s));
		if (!s)
			return nf_error_set(NF_ENOMEM, "plan: out of memory");
		p->stages = s;
		*cap = n;
	}
	nf_stage *s = &p->stages[p->n_stages];
	memset(s, 0, sizeof(*s));
	s->estimate = -1;
	s->kind = kind;
	s->profile = profile;
	snprintf(s->name, sizeof(s->name), "%s", name);
	for (size_t i = 0; i < n_deps && i < NF_STAGE_MAX_DEPS; i++)
		s->deps[s->n_deps++] = deps[i];
	if (index)
		*index = p->n_stages;
	p->n_stages++;
	return 0;
}

/* A build point: where, what precision, how split, which KV cache. */
typedef struct point {
	const nf_sku *sku;
	nf_precision prec;
	int tp;
	nf_kv_kind kv;
} point;

static int make_profile(nf_profile *pr, const nf_recipe *r, const point *pt)
{
	const nf_sku *sku = pt->sku;
	nf_precision prec = pt->prec;
	int tp = pt->tp, kv_explicit = pt->kv != nf_kv_kind_default(prec);
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:o, s:o}", "model", r->model.name,
			      "family", "llama", "device", sku->name, "arch", sku->cuda_arch,
			      "tensor_parallel", tp, "precision", nf_precision_name(prec), "source",
			      source_identity(&r->model.source), "tokenizer",
			      source_identity(&r->model.tokenizer));
	int err;
	memset(pr, 0, sizeof(*pr));
	/* only a cache other than the default is part of the identity: the
	 * default profiles keep the ids they had before the choice existed */
	if (j && kv_explicit && json_object_set_new(j, "kv_cache", json_string(nf_kv_kind_name(pt->kv)))) {
		json_decref(j);
		j = NULL;
	}
	if (!j)
		return nf_error_set(NF_ENOMEM, "plan: out of memory");
	pr->canonical_json = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII);
	err = pr->canonical_json ? nf_sha256_hex(pr->id, pr->canonical_json, strlen(pr->canonical_json))
				 : nf_error_set(NF_ENOMEM, "plan: out of memory");
	json_decref(j);
	if (err)
		return err;
	snprintf(pr->name, sizeof(pr->name), "%s-%s-tp%d%s%s", sku->name, nf_precision_name(prec), tp,
		 kv_explicit ? "-" : "", kv_explicit ? nf_profile_kv_suffix(pt->kv) : "");
	pr->kv_cache = pt->kv;
	pr->kv_explicit = kv_explicit;
	snprintf(pr->device, sizeof(pr->device), "%s", sku->name);
	snprintf(pr->arch, sizeof(pr->arch), "%s", sku->cuda_arch);
	pr->is_gpu = sku->kind == NF_SKU_GPU;
	pr->precision = prec;
	pr->tensor_parallel = tp;
	pr->verdict = NF_VERDICT_PENDING;
	return 0;
}

/* "h100-sxm, h200" : the devices of the table that run prec natively. */
static void devices_running(char *buf, size_t size, nf_precision prec)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < nf_sku_count(); i++) {
		const nf_sku *s = nf_sku_at(i);
		if (!nf_sku_supports(s, prec))
			continue;
		int n = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", s->name);
		if (n < 0 || (size_t)n >= size - used)
			break;
		used += (size_t)n;
	}
}

/* Room for every (device, precision, tp, KV cache) point of r's targets. */
static int alloc_points(nf_plan *p, const nf_recipe *r)
{
	size_t max_points = 0;
	for (size_t t = 0; t < r->build.n_targets; t++) {
		const nf_recipe_target *tg = &r->build.targets[t];
		max_points += tg->n_precisions * tg->n_tensor_parallel *
			      (tg->n_kv_caches ? tg->n_kv_caches : 1);
	}
	p->profiles = calloc(max_points ? max_points : 1, sizeof(*p->profiles));
	p->dropped = calloc(max_points ? max_points : 1, sizeof(*p->dropped));
	if (!p->profiles || !p->dropped)
		return nf_error_set(NF_ENOMEM, "plan: out of memory");
	return 0;
}

/* Keep a point this nimfactory cannot build, with the reason. */
static void add_dropped_point(nf_plan *p, const nf_sku *sku, nf_precision prec, int tp, const char *why)
{
	nf_dropped *d = &p->dropped[p->n_dropped++];
	snprintf(d->device, sizeof(d->device), "%s", sku->name);
	snprintf(d->precision, sizeof(d->precision), "%s", nf_precision_name(prec));
	d->tensor_parallel = tp;
	snprintf(d->reason, sizeof(d->reason), "%s", why);
}

/* The profiles of target t at precision prec: one per tp and KV cache (the
 * recipe's caches, or the precision's default one), or a dropped point. */
static int expand_precision(nf_plan *p, const nf_recipe *r, size_t t, nf_precision prec)
{
	const nf_recipe_target *tg = &r->build.targets[t];
	int err;
	if (!nf_sku_supports(tg->sku, prec)) {
		char list[512];
		devices_running(list, sizeof(list), prec);
		return nf_error_set(NF_EINPUT,
				    "%s: build.targets[%zu]: device '%s' cannot run %s; devices that can: %s",
				    r->file, t, tg->sku->name, nf_precision_name(prec), list[0] ? list : "none");
	}
	for (size_t k = 0; k < tg->n_tensor_parallel; k++) {
		int tp = tg->tensor_parallel[k];
		const char *why = not_buildable(tg->sku, prec, tp);
		if (why) {
			add_dropped_point(p, tg->sku, prec, tp, why);
			continue;
		}
		for (size_t v = 0; v < (tg->n_kv_caches ? tg->n_kv_caches : 1); v++) {
			point pt = {tg->sku, prec, tp,
				    tg->n_kv_caches ? tg->kv_caches[v] : nf_kv_kind_default(prec)};
			if ((err = make_profile(&p->profiles[p->n_profiles], r, &pt)))
				return err;
			p->n_profiles++;
		}
	}
	return 0;
}

/* Every target's profiles; NF_EINPUT when none is left to build. */
static int expand_targets(nf_plan *p, const nf_recipe *r)
{
	int err;
	for (size_t t = 0; t < r->build.n_targets; t++)
		for (size_t i = 0; i < r->build.targets[t].n_precisions; i++)
			if ((err = expand_precision(p, r, t, r->build.targets[t].precisions[i])))
				return err;
	if (p->n_profiles == 0)
		return nf_error_set(NF_EINPUT,
				    "%s: nothing to build: every target was dropped (first: %s %s: %s)",
				    r->file, p->dropped[0].device, p->dropped[0].precision,
				    p->dropped[0].reason);
	return 0;
}

/* The DAG: fetch -> convert -> compile(profile) -> gate(profile) -> package,
 * and convert -> reference -> every gate. */
static int lay_out_stages(nf_plan *p, int has_tokenizer)
{
	size_t cap_stages = 0, fetch_model, fetch_tok = 0, convert, reference;
	int err;
	if ((err = add_stage(p, &cap_stages, NF_STAGE_FETCH, -1, "fetch model", NULL, 0, &fetch_model)))
		return err;
	if (has_tokenizer &&
	    (err = add_stage(p, &cap_stages, NF_STAGE_FETCH, -1, "fetch tokenizer", NULL, 0, &fetch_tok)))
		return err;
	size_t fetched[2] = {fetch_model, fetch_tok};
	if ((err = add_stage(p, &cap_stages, NF_STAGE_CONVERT, -1, "convert checkpoint", fetched,
			     has_tokenizer ? 2 : 1, &convert)) ||
	    (err = add_stage(p, &cap_stages, NF_STAGE_REFERENCE, -1, "float32 reference", &convert, 1,
			     &reference)))
		return err;
	size_t *gates = calloc(p->n_profiles, sizeof(*gates));
	if (!gates)
		return nf_error_set(NF_ENOMEM, "plan: out of memory");
	for (size_t i = 0; i < p->n_profiles && !err; i++) {
		char name[128];
		size_t deps[2];
		snprintf(name, sizeof(name), "compile %s", p->profiles[i].name);
		err = add_stage(p, &cap_stages, NF_STAGE_COMPILE, (int)i, name, &convert, 1, &deps[0]);
		snprintf(name, sizeof(name), "gate %s", p->profiles[i].name);
		deps[1] = reference;
		if (!err)
			err = add_stage(p, &cap_stages, NF_STAGE_GATE, (int)i, name, deps, 2, &gates[i]);
	}
	/* package depends on every gate; deps[] holds the first few, the rest is implied by order. */
	if (!err)
		err = add_stage(p, &cap_stages, NF_STAGE_PACKAGE, -1, "package image", gates,
				p->n_profiles < NF_STAGE_MAX_DEPS ? p->n_profiles : NF_STAGE_MAX_DEPS, NULL);
	free(gates);
	return err;
}

int nf_plan_make(nf_plan **out, const nf_recipe *r)
{
	nf_plan *p = calloc(1, sizeof(*p));
	int err;

	*out = NULL;
	if (!p)
		return nf_error_set(NF_ENOMEM, "plan: out of memory");
	if ((err = nf_recipe_digest(p->recipe_digest, r)) || (err = alloc_points(p, r)) ||
	    (err = expand_targets(p, r)) ||
	    (err = lay_out_stages(p, r->model.tokenizer.kind != NF_SOURCE_NONE))) {
		nf_plan_free(p);
		return err;
	}
	*out = p;
	return 0;
}

void nf_plan_free(nf_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_profiles; i++)
		nf_profile_release(&p->profiles[i]);
	free(p->profiles);
	free(p->dropped);
	free(p->stages);
	free(p->fits);
	free(p);
}

nf_stage *nf_plan_stage(nf_plan *p, nf_stage_kind kind, int profile)
{
	for (size_t i = 0; i < p->n_stages; i++)
		if (p->stages[i].kind == kind && p->stages[i].profile == profile)
			return &p->stages[i];
	return NULL;
}

/* A profile's memory on its device, in bytes. */
static json_t *fit_json(const nf_fit *f)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:b}", "weights", (json_int_t)f->weights, "kv",
			 (json_int_t)f->kv, "workspace", (json_int_t)f->workspace, "needed",
			 (json_int_t)f->needed, "capacity", (json_int_t)f->capacity, "fits", f->fits);
}

/* {"seconds": s, "source": "recorded"|"modelled"}, or null when unknown. */
static json_t *estimate_json(const nf_stage *s)
{
	if (s->estimate < 0)
		return json_null();
	return json_pack("{s:f, s:s}", "seconds", s->estimate, "source",
			 s->estimate_modelled ? "modelled" : "recorded");
}

int nf_plan_to_json(json_t **out, const nf_plan *p)
{
	json_t *root = json_object(), *profiles = json_array(), *dropped = json_array(),
	       *stages = json_array();
	int bad = !root || !profiles || !dropped || !stages;

	for (size_t i = 0; !bad && i < p->n_profiles; i++) {
		const nf_profile *pr = &p->profiles[i];
		json_t *canon = json_loads(pr->canonical_json, 0, NULL);
		bad |= json_array_append_new(
			profiles,
			json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:o, s:s?}", "id", pr->id,
				  "name", pr->name, "device", pr->device, "arch", pr->arch, "precision",
				  nf_precision_name(pr->precision), "tensor_parallel",
				  pr->tensor_parallel, "kv_cache", nf_kv_kind_name(pr->kv_cache), "gate",
				  nf_verdict_name(pr->verdict), "canonical", canon ? canon : json_null(),
				  "engine", pr->engine_dir));
	}
	for (size_t i = 0; !bad && p->fits && i < p->n_profiles; i++)
		bad |= json_object_set_new(json_array_get(profiles, i), "memory",
					   fit_json(&p->fits[i]));
	for (size_t i = 0; !bad && i < p->n_dropped; i++) {
		const nf_dropped *d = &p->dropped[i];
		bad |= json_array_append_new(dropped,
					     json_pack("{s:s, s:s, s:i, s:s}", "device", d->device,
						       "precision", d->precision, "tensor_parallel",
						       d->tensor_parallel, "reason", d->reason));
	}
	for (size_t i = 0; !bad && i < p->n_stages; i++) {
		const nf_stage *s = &p->stages[i];
		json_t *deps = json_array();
		for (size_t k = 0; deps && k < s->n_deps; k++)
			json_array_append_new(deps, json_integer((json_int_t)s->deps[k]));
		bad |= json_array_append_new(
			stages, json_pack("{s:s, s:s, s:o, s:s?, s:b, s:b, s:b, s:f, s:o}", "kind",
					  nf_stage_kind_name(s->kind), "name", s->name, "deps",
					  deps ? deps : json_null(), "key", s->key[0] ? s->key : NULL,
					  "cached", s->cached, "remote", s->remote, "skipped", s->skipped,
					  "seconds", s->seconds,
					  "estimate", estimate_json(s)));
	}
	if (bad || json_object_set_new(root, "recipe_digest", json_string(p->recipe_digest)) ||
	    json_object_set(root, "profiles", profiles) || json_object_set(root, "dropped", dropped) ||
	    json_object_set(root, "stages", stages)) {
		json_decref(root);
		root = NULL;
	}
	json_decref(profiles);
	json_decref(dropped);
	json_decref(stages);
	if (!root)
		return nf_error_set(NF_ENOMEM, "plan: cannot build JSON");
	*out = root;
	return 0;
}
