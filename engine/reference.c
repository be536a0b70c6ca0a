/*
 * reference.c - the float32 reference forward pass (llama2.c's, with GQA,
 * the q/k/v/o biases of architectures that have them and scaled RoPE):
 * plain C, one token at a time, straight from nf_model.  Every buffer is
 * allocated in nf_ref_state_new; nf_ref_forward never allocates.
 */
#include "engine/reference.h"

#include "engine/arch.h"

#include <math.h>
#include <stdlib.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

struct nf_ref_state {
	const nf_model *m;
	float *x;      /* (dim) residual stream */
	float *xb;     /* (dim) */
	float *xb2;    /* (dim) */
	float *hb;     /* (hidden) */
	float *hb2;    /* (hidden) */
	float *q;      /* (dim) */
	float *att;    /* (seq) scores of one head */
	float *logits; /* (vocab) */
	float *kcache; /* (layer, seq, kv_dim) */
	float *vcache; /* (layer, seq, kv_dim) */
	float *inv_freq; /* (head_size / 2) RoPE inverse frequencies, scaled */
	nf_ref_observer observe; /* NULL: nobody observes (one branch per input) */
	void *observe_ctx;
};

void nf_ref_set_observer(nf_ref_state *s, nf_ref_observer fn, void *ctx)
{
	s->observe = fn;
	s->observe_ctx = ctx;
}

static void observe(const nf_ref_state *s, int layer, nf_ref_input which, const float *x, int n)
{
	if (s->observe)
		s->observe(s->observe_ctx, layer, which, x, n);
}

/* x (n) += the bias of layer l, when the model has one ((layer, n) floats). */
static void add_bias(float *x, const float *bias, size_t l, int n)
{
	if (!bias)
		return;
	for (int i = 0; i < n; i++)
		x[i] += bias[l * (size_t)n + (size_t)i];
}

static void rmsnorm(float *o, const float *x, const float *w, int n, float eps)
{
	float ss = 0.0f;
	for (int j = 0; j < n; j++)
		ss += x[j] * x[j];
	ss = 1.0f / sqrtf(ss / (float)n + eps);
	for (int j = 0; j < n; j++)
		o[j] = w[j] * (ss * x[j]);
}

static void softmax(float *x, int n)
{
	float max = x[0];
	for (int i = 1; i < n; i++)
		if (x[i] > max)
			max = x[i];
	float sum = 0.0f;
	for (int i = 0; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	for (int i = 0; i < n; i++)
		x[i] /= sum;
}

/* xout (d) = W (d, n) @ x (n) */
static void matmul(float *xout, const float *x, const float *w, int n, int d)
{
	for (int i = 0; i < d; i++) {
		float v = 0.0f;
		const float *row = w + (size_t)i * (size_t)n;
		for (int j = 0; j < n; j++)
			v += row[j] * x[j];
		xout[i] = v;
	}
}

void nf_ref_state_free(nf_ref_state *s)
{
	if (!s)
		return;
	free(s->x);
	free(s->xb);
	free(s->xb2);
	free(s->hb);
	free(s->hb2);
	free(s->q);
	free(s->att);
	free(s->logits);
	free(s->kcache);
	free(s->vcache);
	free(s->inv_freq);
	free(s);
}

static float *alloc_floats(size_t n, int *err)
{
	float *p = NULL;
	size_t bytes;
	if (*err)
		return NULL;
	if (!nf_size_mul(&bytes, n ? n : 1, sizeof(float)) || !(p = calloc(1, bytes)))
		*err = nf_error_set(NF_ENOMEM, "reference: out of memory (%zu floats)", n);
	return p;
}

int nf_ref_state_new(nf_ref_state **out, const nf_model *m)
{
	nf_ref_state *s = NULL;
	int err = 0;
	size_t cache;
	*out = NULL;
	if ((err = nf_model_config_validate(&m->cfg, "reference")))
		return err;
	const nf_model_config *c = &m->cfg;
	if (!nf_size_mul3(&cache, (size_t)c->n_layers, (size_t)c->max_seq_len,
			  (size_t)nf_model_kv_dim(c)))
		return nf_error_set(NF_ENOMEM, "reference: KV cache size overflows");
	if (!(s = calloc(1, sizeof *s)))
		return nf_error_set(NF_ENOMEM, "reference: out of memory");
	s->m = m;
	s->x = alloc_floats((size_t)c->dim, &err);
	s->xb = alloc_floats((size_t)c->dim, &err);
	s->xb2 = alloc_floats((size_t)c->dim, &err);
	s->hb = alloc_floats((size_t)c->hidden_dim, &err);
	s->hb2 = alloc_floats((size_t)c->hidden_dim, &err);
	s->q = alloc_floats((size_t)c->dim, &err);
	s->att = alloc_floats((size_t)c->max_seq_len, &err);
	s->logits = alloc_floats((size_t)c->vocab_size, &err);
	s->kcache = alloc_floats(cache, &err);
	s->vcache = alloc_floats(cache, &err);
	s->inv_freq = alloc_floats((size_t)nf_model_head_size(c) / 2, &err);
	if (!err)
		nf_arch_rope_inv_freq(s->inv_freq, c);
	if (err) {
		nf_ref_state_free(s);
		return err;
	}
	*out = s;
	return 0;
}

const float *nf_ref_forward(nf_ref_state *s, int token, int pos)
{
	const nf_model_config *p = &s->m->cfg;
	const nf_model_weights *w = &s->m->w;
	if (token < 0 || token >= p->vocab_size) {
		nf_error_set(NF_EINPUT, "reference: token %d out of range (vocab %d)", token,
			     (int)p->vocab_size);
		return NULL;
	}
	if (pos < 0 || pos >= p->max_seq_len) {
		nf_error_set(NF_EINPUT, "reference: position %d out of range (max_seq_len %d)", pos,
			     (int)p->max_seq_len);
		return NULL;
	}
	int dim = p->dim, hidden = p->hidden_dim, head_size = nf_model_head_size(p);
	int kv_dim = nf_model_kv_dim(p), kv_mul = p->n_heads / p->n_kv_heads;
	size_t seq = (size_t)p->max_seq_len;
	float *x = s->x;

	for (int i = 0; i < dim; i++)
		x[i] = w->token_embedding[(size_t)token * (size_t)dim + (size_t)i];

	for (int l = 0; l < p->n_layers; l++) {
		size_t L = (size_t)l;
		rmsnorm(s->xb, x, w->rms_att + L * (size_t)dim, dim, p->norm_eps);
		observe(s, l, NF_REF_IN_ATT, s->xb, dim);

		/* q (dim), k and v (kv_dim) written straight into the cache at pos */
		float *k = s->kcache + L * seq * (size_t)kv_dim + (size_t)pos * (size_t)kv_dim;
		float *v = s->vcache + L * seq * (size_t)kv_dim + (size_t)pos * (size_t)kv_dim;
		matmul(s->q, s->xb, w->wq + L * (size_t)dim * (size_t)dim, dim, dim);
		matmul(k, s->xb, w->wk + L * (size_t)kv_dim * (size_t)dim, dim, kv_dim);
		matmul(v, s->xb, w->wv + L * (size_t)kv_dim * (size_t)dim, dim, kv_dim);
		add_bias(s->q, w->bq, L, dim);
		add_bias(k, w->bk, L, kv_dim);
		add_bias(v, w->bv, L, kv_dim);

		/* RoPE on interleaved pairs within each head */
		for (int i = 0; i < dim; i += 2) {
			int hd = i % head_size;
			float val = (float)pos * s->inv_freq[hd / 2];
			float fcr = cosf(val), fci = sinf(val);
			int rotn = i < kv_dim ? 2 : 1;
			for (int r = 0; r < rotn; r++) {
				float *vec = r == 0 ? s->q : k;
				float v0 = vec[i], v1 = vec[i + 1];
				vec[i] = v0 * fcr - v1 * fci;
				vec[i + 1] = v0 * fci + v1 * fcr;
			}
		}

		/* multi-head attention; query head h reads KV head h / kv_mul */
		for (int h = 0; h < p->n_heads; h++) {
			const float *q = s->q + (size_t)h * (size_t)head_size;
			size_t off = (size_t)(h / kv_mul) * (size_t)head_size;
			for (int t = 0; t <= pos; t++) {
				const float *kt = s->kcache + L * seq * (size_t)kv_dim +
						  (size_t)t * (size_t)kv_dim + off;
				float score = 0.0f;
				for (int i = 0; i < head_size; i++)
					score += q[i] * kt[i];
				s->att[t] = score / sqrtf((float)head_size);
			}
			softmax(s->att, pos + 1);
			float *xb = s->xb + (size_t)h * (size_t)head_size;
			for (int i = 0; i < head_size; i++)
				xb[i] = 0.0f;
			for (int t = 0; t <= pos; t++) {
				const float *vt = s->vcache + L * seq * (size_t)kv_dim +
						  (size_t)t * (size_t)kv_dim + off;
				for (int i = 0; i < head_size; i++)
					xb[i] += s->att[t] * vt[i];
			}
		}

		observe(s, l, NF_REF_IN_WO, s->xb, dim);
		matmul(s->xb2, s->xb, w->wo + L * (size_t)dim * (size_t)dim, dim, dim);
		for (int i = 0; i < dim; i++)
			x[i] += s->xb2[i];
		add_bias(x, w->bo, L, dim); /* after, as the engine adds it */

		/* SwiGLU feed-forward: w2 (silu(w1 x) * w3 x) */
		rmsnorm(s->xb, x, w->rms_ffn + L * (size_t)dim, dim, p->norm_eps);
		observe(s, l, NF_REF_IN_FFN, s->xb, dim);
		matmul(s->hb, s->xb, w->w1 + L * (size_t)hidden * (size_t)dim, dim, hidden);
		matmul(s->hb2, s->xb, w->w3 + L * (size_t)hidden * (size_t)dim, dim, hidden);
		for (int i = 0; i < hidden; i++) {
			float g = s->hb[i];
			s->hb[i] = g * (1.0f / (1.0f + expf(-g))) * s->hb2[i];
		}
		observe(s, l, NF_REF_IN_W2, s->hb, hidden);
		matmul(s->xb, s->hb, w->w2 + L * (size_t)dim * (size_t)hidden, hidden, dim);
		for (int i = 0; i < dim; i++)
			x[i] += s->xb[i];
	}

	rmsnorm(x, x, w->rms_final, dim, p->norm_eps);
	observe(s, -1, NF_REF_IN_CLS, x, dim);
	matmul(s->logits, x, w->wcls, dim, p->vocab_size);
	return s->logits;
}
