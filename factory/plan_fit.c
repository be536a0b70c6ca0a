/* plan_fit.c - a profile's memory on its device; the profiles that do not fit (see plan_fit.h). */
#include "factory/plan_fit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/ckpt_reader.h"
#include "engine/engine_weights.h"
#include "engine/forward.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

int nf_fit_kv_bytes(uint64_t *out, const nf_model_config *cfg, nf_kv_kind kind, int max_batch)
{
	size_t one = nf_fwd_kv_bytes(cfg, kind); /* one of K and V of one sequence */
	if (!one || max_batch < 1 || !nf_u64_mul(out, (uint64_t)one, 2 * (uint64_t)max_batch))
		return nf_error_set(NF_EINPUT, "the KV cache of this model overflows");
	return 0;
}

/* Float32 activations of one batched pass (x, xb, q, k, v, the two FFN
 * halves per token), attention scores of a batch over the context, and a
 * batch's logits.  Dimensions are bounded by NF_MODEL_MAX_*, so a double
 * holds the sum exactly enough; beyond 2^62 it is an overflow. */
static int workspace_bytes(uint64_t *out, const nf_model_config *c, int max_batch)
{
	double per_token = 3.0 * c->dim + 2.0 * nf_model_kv_dim(c) + 2.0 * c->hidden_dim;
	double floats = NF_FWD_PASS_TOKENS * per_token +
			(double)max_batch * c->n_heads * (double)c->max_seq_len +
			(double)max_batch * c->vocab_size;
	if (floats < 0 || floats * sizeof(float) > 4.6e18)
		return nf_error_set(NF_EINPUT, "the workspace of this model overflows");
	*out = (uint64_t)(floats * sizeof(float));
	return 0;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

nf_fit_sizes nf_fit_sizes_of(const nf_recipe *r)
{
	return (nf_fit_sizes){
		.group = r->build.quant.group_size,
		.max_batch = r->serving.max_batch,
		.max_context = r->serving.max_context,
	};
}

int nf_fit_profile(nf_fit *out, const nf_model_config *cfg, const nf_profile *p,
		   const nf_fit_sizes *sz, const nf_sku *sku, uint64_t host_memory)
{
	uint64_t tp = p->tensor_parallel > 1 ? (uint64_t)p->tensor_parallel : 1;
	int batch = sz->max_batch > 0 ? sz->max_batch : NF_RECIPE_MAX_BATCH;
	nf_model_config served = *cfg; /* each sequence's cache holds the served context */
	int err;
	if (sz->max_context > 0 && sz->max_context < served.max_seq_len)
		served.max_seq_len = sz->max_context;
	memset(out, 0, sizeof(*out));
	if ((err = nf_engine_weights_bytes(&out->weights, cfg, p->precision, sz->group)) ||
	    (err = nf_fit_kv_bytes(&out->kv, &served, p->kv_cache, batch)) ||
	    (err = workspace_bytes(&out->workspace, &served, batch)))
		return err;
	/* tensor parallelism splits the matrices by rows and the KV cache by heads */
	out->weights = ceil_div(out->weights, tp);
	out->kv = ceil_div(out->kv, tp);
	if (!nf_u64_add(&out->needed, out->weights, out->kv) ||
	    !nf_u64_add(&out->needed, out->needed, out->workspace))
		return nf_error_set(NF_EINPUT, "the memory of this model overflows");
	out->capacity = sku->kind == NF_SKU_GPU ? (uint64_t)sku->memory_gib << 30 : host_memory;
	out->fits = !out->capacity || out->needed <= out->capacity;
	return 0;
}

nf_ckpt_format nf_fit_ckpt_format(nf_source_format f, const char *path)
{
	switch (f) {
	case NF_FORMAT_HF: return NF_CKPT_HF;
	case NF_FORMAT_LLAMA2C: return NF_CKPT_LLAMA2C;
	case NF_FORMAT_GGUF: return NF_CKPT_GGUF;
	default: return nf_ckpt_sniff(path);
	}
}

int nf_fit_read_shapes(nf_model_config *cfg, const char *path, nf_source_format f)
{
	nf_ckpt_reader *r = NULL;
	int err = nf_ckpt_open(&r, path, nf_fit_ckpt_format(f, path));
	if (!err)
		*cfg = r->cfg;
	nf_ckpt_close(r);
	return err;
}

uint64_t nf_fit_host_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
	if (pages <= 0 || size <= 0 || (uint64_t)pages > UINT64_MAX / (uint64_t)size)
		return 0;
	return (uint64_t)pages * (uint64_t)size;
}

/* bytes in GiB from 1 GiB up, else in MiB (the small test models). */
static double in_unit(uint64_t bytes, uint64_t scale_by, const char **unit)
{
	int gib = scale_by >= ((uint64_t)1 << 30);
	*unit = gib ? "GiB" : "MiB";
	return (double)bytes / (gib ? 1073741824.0 : 1048576.0);
}

void nf_fit_describe(char *buf, size_t size, const nf_fit *f, const char *device)
{
	const char *u, *cu;
	double needed = in_unit(f->needed, f->needed, &u);
	double w = in_unit(f->weights, f->needed, &u), kv = in_unit(f->kv, f->needed, &u);
	double ws = in_unit(f->workspace, f->needed, &u), cap = in_unit(f->capacity, f->capacity, &cu);
	if (!f->capacity)
		snprintf(buf, size, "needs %.1f %s (weights %.1f, KV %.1f, workspace %.1f) of an "
			 "unknown memory on %s", needed, u, w, kv, ws, device);
	else
		snprintf(buf, size, "needs %.1f %s (weights %.1f, KV %.1f, workspace %.1f) %s %.1f %s on %s",
			 needed, u, w, kv, ws, f->fits ? "of" : ">", cap, cu, device);
}

/* Remove the profiles marked in gone and their stages, renumbering the
 * stages that stay (deps always name earlier stages, so one pass does). */
static void remove_profiles(nf_plan *p, nf_fit *fits, const bool *gone, size_t *new_profile,
			    size_t *new_stage)
{
	size_t n = 0;
	for (size_t i = 0; i < p->n_profiles; i++) {
		new_profile[i] = SIZE_MAX;
		if (gone[i]) {
			nf_profile_release(&p->profiles[i]);
			continue;
		}
		new_profile[i] = n;
		fits[n] = fits[i];
		p->profiles[n++] = p->profiles[i];
	}
	p->n_profiles = n;
	n = 0;
	for (size_t i = 0; i < p->n_stages; i++) {
		nf_stage s = p->stages[i];
		new_stage[i] = SIZE_MAX;
		if (s.profile >= 0 && new_profile[s.profile] == SIZE_MAX)
			continue;
		size_t nd = 0;
		for (size_t d = 0; d < s.n_deps; d++)
			if (new_stage[s.deps[d]] != SIZE_MAX)
				s.deps[nd++] = new_stage[s.deps[d]];
		s.n_deps = nd;
		if (s.profile >= 0)
			s.profile = (int)new_profile[s.profile];
		new_stage[i] = n;
		p->stages[n++] = s;
	}
	p->n_stages = n;
}

/* Record profile i as dropped because of f. */
static int add_dropped(nf_plan *p, const nf_profile *pr, const nf_fit *f)
{
	nf_dropped *d = realloc(p->dropped, (p->n_dropped + 1) * sizeof(*d));
	if (!d)
		return nf_error_set(NF_ENOMEM, "plan: out of memory");
	p->dropped = d;
	d = &p->dropped[p->n_dropped++];
	memset(d, 0, sizeof(*d));
	snprintf(d->device, sizeof(d->device), "%s", pr->device);
	snprintf(d->precision, sizeof(d->precision), "%s", nf_precision_name(pr->precision));
	d->tensor_parallel = pr->tensor_parallel;
	nf_fit_describe(d->reason, sizeof(d->reason), f, pr->device);
	return 0;
}

int nf_plan_fit(nf_plan *plan, size_t *n_dropped, const nf_model_config *cfg,
		const nf_fit_sizes *sz, uint64_t host_memory, const char *what)
{
	if (sz->max_context > cfg->max_seq_len)
		return nf_error_set(NF_EINPUT, "%s: serving.max_context %d is more than the model's "
				    "context (%d tokens)", what, sz->max_context, (int)cfg->max_seq_len);
	size_t n = plan->n_profiles;
	nf_fit *fits = calloc(n ? n : 1, sizeof(*fits));
	bool *gone = calloc(n ? n : 1, sizeof(*gone));
	size_t *new_profile = calloc(n ? n : 1, sizeof(*new_profile));
	size_t *new_stage = calloc(plan->n_stages ? plan->n_stages : 1, sizeof(*new_stage));
	int err = fits && gone && new_profile && new_stage ? 0
							   : nf_error_set(NF_ENOMEM, "plan: out of memory");

	*n_dropped = 0;
	for (size_t i = 0; !err && i < n; i++) {
		const nf_profile *pr = &plan->profiles[i];
		const nf_sku *sku = nf_sku_find(pr->device);
		if (!sku) {
			err = nf_error_set(NF_EINPUT, "%s: unknown device '%s'", what, pr->device);
			break;
		}
		if (!(err = nf_fit_profile(&fits[i], cfg, pr, sz, sku, host_memory)) && !fits[i].fits) {
			gone[i] = true;
			(*n_dropped)++;
			err = add_dropped(plan, pr, &fits[i]);
		}
	}
	if (!err && *n_dropped == n)
		err = nf_error_set(NF_EINPUT, "%s: nothing to build: no profile fits its device "
				   "(first: %s: %s)", what, plan->profiles[0].name,
				   plan->dropped[plan->n_dropped - n].reason);
	if (!err && *n_dropped)
		remove_profiles(plan, fits, gone, new_profile, new_stage);
	if (!err) {
		free(plan->fits);
		plan->fits = fits;
		fits = NULL;
	}
	free(fits);
	free(gone);
	free(new_profile);
	free(new_stage);
	return err;
}
