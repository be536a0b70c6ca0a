/*
 * model.c - the in-memory float32 Llama model: config validation, parameter
 * counting and the single-block allocation every loader fills (see model.h).
 */
#include "engine/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
	return 0;
}

/* The element count of every tensor, in llama2.c file order. */
enum { T_EMB, T_RMS_ATT, T_WQ, T_WK, T_WV, T_WO, T_RMS_FFN, T_W1, T_W2, T_W3, T_RMS_FINAL,
       T_WCLS, T_COUNT };

static bool tensor_sizes(size_t n[T_COUNT], const nf_model_config *c)
{
	size_t dim = (size_t)c->dim, hid = (size_t)c->hidden_dim, L = (size_t)c->n_layers;
	size_t vocab = (size_t)c->vocab_size;
	size_t kv = (size_t)c->n_kv_heads * (size_t)(c->dim / c->n_heads);
	return nf_size_mul(&n[T_EMB], vocab, dim) && nf_size_mul(&n[T_RMS_ATT], L, dim) &&
	       nf_size_mul3(&n[T_WQ], L, dim, dim) && nf_size_mul3(&n[T_WK], L, kv, dim) &&
	       nf_size_mul3(&n[T_WV], L, kv, dim) && nf_size_mul3(&n[T_WO], L, dim, dim) &&
	       nf_size_mul(&n[T_RMS_FFN], L, dim) && nf_size_mul3(&n[T_W1], L, hid, dim) &&
	       nf_size_mul3(&n[T_W2], L, dim, hid) && nf_size_mul3(&n[T_W3], L, hid, dim) &&
	       (n[T_RMS_FINAL] = dim, true) &&
	       (n[T_WCLS] = c->shared_classifier ? 0 : n[T_EMB], true);
}

int nf_model_param_count(size_t *out, const nf_model_config *cfg)
{
	size_t n[T_COUNT], total = 0;
	*out = 0;
	if (cfg->dim <= 0 || cfg->n_heads <= 0 || cfg->hidden_dim <= 0 || cfg->n_layers <= 0 ||
	    cfg->n_kv_heads <= 0 || cfg->vocab_size <= 0)
		return nf_error_set(NF_EINPUT, "model: config has a non-positive size");
	if (!tensor_sizes(n, cfg))
		goto overflow;
	for (int i = 0; i < T_COUNT; i++)
		if (!nf_size_add(&total, total, n[i]))
			goto overflow;
	*out = total;
	return 0;
overflow:
	return nf_error_set(NF_EINPUT, "model: parameter count overflows");
}

int nf_model_alloc(nf_model **out, const nf_model_config *cfg)
{
	int err = 0;
	nf_model *m = NULL;
	size_t n[T_COUNT], total, bytes;
	float *p, **slot[T_COUNT];

	*out = NULL;
	if ((err = nf_model_config_validate(cfg, "model")))
		goto done;
	if ((err = nf_model_param_count(&total, cfg)))
		goto done;
	tensor_sizes(n, cfg);
	if (!nf_size_mul(&bytes, total, sizeof(float))) {
		err = nf_error_set(NF_EINPUT, "model: size overflows");
		goto done;
	}
	m = calloc(1, sizeof(*m));
	if (!m || !(m->mem = calloc(total ? total : 1, sizeof(float)))) {
		err = nf_error_set(NF_ENOMEM, "model: out of memory allocating %zu bytes", bytes);
		goto done;
	}
	m->cfg = *cfg;
	m->mem_len = bytes;
	slot[T_EMB] = &m->w.token_embedding;
	slot[T_RMS_ATT] = &m->w.rms_att;
	slot[T_WQ] = &m->w.wq;
	slot[T_WK] = &m->w.wk;
	slot[T_WV] = &m->w.wv;
	slot[T_WO] = &m->w.wo;
	slot[T_RMS_FFN] = &m->w.rms_ffn;
	slot[T_W1] = &m->w.w1;
	slot[T_W2] = &m->w.w2;
	slot[T_W3] = &m->w.w3;
	slot[T_RMS_FINAL] = &m->w.rms_final;
	slot[T_WCLS] = &m->w.wcls;
	p = m->mem;
	for (int i = 0; i < T_COUNT; i++) {
		*slot[i] = p;
		p += n[i];
	}
	if (cfg->shared_classifier)
		m->w.wcls = m->w.token_embedding;
	*out = m;
	m = NULL;
done:
	nf_model_free(m);
	return err;
}

void nf_model_free(nf_model *m)
{
	if (!m)
		return;
	free(m->mem);
	free(m);
}
