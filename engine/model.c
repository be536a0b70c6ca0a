/*
 * model.c - the in-memory float32 Llama model: config validation, parameter
 * counting and the single-block allocation every loader fills (see model.h).
 */
#include "engine/model.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/arch.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

static int check_range(const char *what, const char *field, int32_t v, int32_t max)
{
	if (v <= 0 || v > max)
		return nf_error_set(NF_EINPUT, "%s: %s %d is out of range (1..%d)", what, field,
				    (int)v, (int)max);
	return 0;
}

int nf_model_config_validate(const nf_model_config *cfg, const char *what)
{
	int err;
	if (!what)
		what = "model";
	if (!nf_arch_get(cfg->arch))
		return nf_error_set(NF_EINPUT, "%s: unknown architecture %d", what, (int)cfg->arch);
	if ((err = check_range(what, "dim", cfg->dim, NF_MODEL_MAX_DIM)) ||
	    (err = check_range(what, "hidden_dim", cfg->hidden_dim, NF_MODEL_MAX_HIDDEN)) ||
	    (err = check_range(what, "n_layers", cfg->n_layers, NF_MODEL_MAX_LAYERS)) ||
	    (err = check_range(what, "n_heads", cfg->n_heads, NF_MODEL_MAX_HEADS)) ||
	    (err = check_range(what, "n_kv_heads", cfg->n_kv_heads, NF_MODEL_MAX_HEADS)) ||
	    (err = check_range(what, "vocab_size", cfg->vocab_size, NF_MODEL_MAX_VOCAB)) ||
	    (err = check_range(what, "max_seq_len", cfg->max_seq_len, NF_MODEL_MAX_SEQ)))
		return err;
	if (cfg->dim % cfg->n_heads != 0)
		return nf_error_set(NF_EINPUT, "%s: dim %d is not divisible by n_heads %d", what,
				    (int)cfg->dim, (int)cfg->n_heads);
	if (cfg->n_heads % cfg->n_kv_heads != 0)
		return nf_error_set(NF_EINPUT, "%s: n_heads %d is not divisible by n_kv_heads %d",
				    what, (int)cfg->n_heads, (int)cfg->n_kv_heads);
	if ((cfg->dim / cfg->n_heads) % 2 != 0)
		return nf_error_set(NF_EINPUT, "%s: head size %d (dim %d / n_heads %d) is odd, "
				    "rotary embeddings need pairs", what, (int)(cfg->dim / cfg->n_heads),
				    (int)cfg->dim, (int)cfg->n_heads);
	if (!isfinite(cfg->norm_eps) || cfg->norm_eps <= 0.0f || cfg->norm_eps >= 1.0f)
		return nf_error_set(NF_EINPUT, "%s: norm_eps %g is out of range (0..1)", what,
				    (double)cfg->norm_eps);
	if (!isfinite(cfg->rope_theta) || cfg->rope_theta <= 1.0f)
		return nf_error_set(NF_EINPUT, "%s: rope_theta %g must be a finite number above 1",
				    what, (double)cfg->rope_theta);
	if (cfg->sliding_window < 0 || cfg->sliding_window > NF_MODEL_MAX_SEQ)
		return nf_error_set(NF_EINPUT, "%s: sliding_window %d is out of range (0..%d)", what,
				    (int)cfg->sliding_window, NF_MODEL_MAX_SEQ);
	return nf_arch_rope_validate(&cfg->rope_scaling, what);
}

/* The element count of every tensor of cfg's table (0 when absent). */
static bool tensor_sizes(size_t n[NF_T_COUNT], const nf_model_config *c)
{
	const nf_arch *a = nf_arch_get(c->arch);
	memset(n, 0, NF_T_COUNT * sizeof n[0]);
	for (size_t i = 0; i < a->n_tensors; i++) {
		const nf_arch_tensor *t = &a->tensors[i];
		uint64_t e;
		if (!nf_arch_present(t, c))
			continue;
		if (!nf_arch_elems(&e, t, c) || e > SIZE_MAX)
			return false;
		n[t->id] = (size_t)e;
	}
	return true;
}

int nf_model_param_count(size_t *out, const nf_model_config *cfg)
{
	size_t n[NF_T_COUNT], total = 0;
	*out = 0;
	if (cfg->dim <= 0 || cfg->n_heads <= 0 || cfg->hidden_dim <= 0 || cfg->n_layers <= 0 ||
	    cfg->n_kv_heads <= 0 || cfg->vocab_size <= 0 || !nf_arch_get(cfg->arch))
		return nf_error_set(NF_EINPUT, "model: config has a non-positive size");
	if (!tensor_sizes(n, cfg))
		goto overflow;
	for (int i = 0; i < NF_T_COUNT; i++)
		if (!nf_size_add(&total, total, n[i]))
			goto overflow;
	*out = total;
	return 0;
overflow:
	return nf_error_set(NF_EINPUT, "model: parameter count overflows");
}

float **nf_model_slot(nf_model *m, int id)
{
	/* the one map from a table's tensor ids to nf_model_weights' fields */
	static const size_t off[NF_T_COUNT] = {
		[NF_T_EMB] = offsetof(nf_model_weights, token_embedding),
		[NF_T_RMS_ATT] = offsetof(nf_model_weights, rms_att),
		[NF_T_WQ] = offsetof(nf_model_weights, wq),
		[NF_T_BQ] = offsetof(nf_model_weights, bq),
		[NF_T_WK] = offsetof(nf_model_weights, wk),
		[NF_T_BK] = offsetof(nf_model_weights, bk),
		[NF_T_WV] = offsetof(nf_model_weights, wv),
		[NF_T_BV] = offsetof(nf_model_weights, bv),
		[NF_T_WO] = offsetof(nf_model_weights, wo),
		[NF_T_BO] = offsetof(nf_model_weights, bo),
		[NF_T_RMS_FFN] = offsetof(nf_model_weights, rms_ffn),
		[NF_T_W1] = offsetof(nf_model_weights, w1),
		[NF_T_W2] = offsetof(nf_model_weights, w2),
		[NF_T_W3] = offsetof(nf_model_weights, w3),
		[NF_T_RMS_FINAL] = offsetof(nf_model_weights, rms_final),
		[NF_T_WCLS] = offsetof(nf_model_weights, wcls),
	};
	if (id < 0 || id >= NF_T_COUNT)
		return NULL;
	return (float **)((char *)&m->w + off[id]);
}

/* A zeroed model of cfg's tensors, or of its per-layer ones only. */
static int alloc_tensors(nf_model **out, const nf_model_config *cfg, bool layers_only)
{
	int err = 0;
	nf_model *m = NULL;
	size_t n[NF_T_COUNT], total = 0, bytes;
	const nf_arch *a;
	float *p;

	*out = NULL;
	if ((err = nf_model_config_validate(cfg, "model")) ||
	    (err = nf_model_param_count(&total, cfg)))
		return err;
	tensor_sizes(n, cfg);
	a = nf_arch_get(cfg->arch);
	if (layers_only) {
		total = 0;
		for (size_t i = 0; i < a->n_tensors; i++)
			if (a->tensors[i].per_layer)
				total += n[a->tensors[i].id]; /* part of the checked count */
	}
	if (!nf_size_mul(&bytes, total, sizeof(float)))
		return nf_error_set(NF_EINPUT, "model: size overflows");
	m = calloc(1, sizeof(*m));
	if (!m || !(m->mem = calloc(total ? total : 1, sizeof(float)))) {
		nf_model_free(m);
		return nf_error_set(NF_ENOMEM, "model: out of memory allocating %zu bytes", bytes);
	}
	m->cfg = *cfg;
	m->mem_len = bytes;
	p = m->mem;
	for (size_t i = 0; i < a->n_tensors; i++) {
		const nf_arch_tensor *t = &a->tensors[i];
		if (!nf_arch_present(t, cfg) || (layers_only && !t->per_layer))
			continue;
		*nf_model_slot(m, t->id) = p;
		p += n[t->id];
	}
	if (cfg->shared_classifier)
		m->w.wcls = m->w.token_embedding;
	*out = m;
	return 0;
}

int nf_model_alloc(nf_model **out, const nf_model_config *cfg)
{
	return alloc_tensors(out, cfg, false);
}

int nf_model_alloc_layer(nf_model **out, const nf_model_config *cfg)
{
	nf_model_config one = *cfg;
	one.n_layers = 1;
	return alloc_tensors(out, &one, true);
}

/* ---- the checkpoint's own blocks ---- */

typedef struct source_entry {
	const void *blocks; /* NULL: none kept */
	int ggml_type;
} source_entry;

struct nf_model_source {
	void *owner;                  /* keeps the blocks mapped */
	void (*release)(void *owner);
	source_entry *at;             /* (NF_T_COUNT, n_layers) */
};

int nf_model_source_init(nf_model *m, void *owner, void (*release)(void *owner))
{
	nf_model_source *s = calloc(1, sizeof *s);
	size_t n = (size_t)NF_T_COUNT * (size_t)m->cfg.n_layers; /* layers <= NF_MODEL_MAX_LAYERS */
	if (!s || !(s->at = calloc(n, sizeof *s->at))) {
		free(s);
		return nf_error_set(NF_ENOMEM, "model: out of memory");
	}
	s->owner = owner;
	s->release = release;
	m->source = s;
	return 0;
}

static source_entry *source_at(const nf_model *m, int tensor_id, int layer)
{
	if (!m->source || tensor_id < 0 || tensor_id >= NF_T_COUNT || layer < 0 ||
	    layer >= m->cfg.n_layers)
		return NULL;
	return &m->source->at[(size_t)tensor_id * (size_t)m->cfg.n_layers + (size_t)layer];
}

void nf_model_source_set(nf_model *m, int tensor_id, int layer, const void *blocks,
			 int ggml_type)
{
	source_entry *e = source_at(m, tensor_id, layer);
	if (e)
		*e = (source_entry){blocks, ggml_type};
}

const void *nf_model_source_blocks(const nf_model *m, int tensor_id, int layer, int *ggml_type)
{
	const source_entry *e = source_at(m, tensor_id, layer);
	*ggml_type = e && e->blocks ? e->ggml_type : -1;
	return e ? e->blocks : NULL;
}

void nf_model_free(nf_model *m)
{
	if (!m)
		return;
	if (m->source) {
		m->source->release(m->source->owner);
		free(m->source->at);
		free(m->source);
	}
	free(m->mem);
	free(m);
}
