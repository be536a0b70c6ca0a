/*
 * backend_step.c - the forward pass of forward.c as launches of the CUDA
 * kernels (launch.h): embedding, then per layer RMSNorm, the q/k/v
 * products (+ biases), RoPE, the KV append, attention, the output product
 * into the residual, RMSNorm, w1/w3, SwiGLU and w2 into the residual; then
 * the final norm, the classifier and argmax.  Decode runs GEMVs and
 * flash-decoding attention per sequence; prefill runs the tiled GEMMs and
 * the causal prefill attention of one sequence.  Nothing here waits for
 * the device: the caller synchronises (backend.c).
 */
#include <math.h>
#include <string.h>

#include "engine/arch.h"
#include "engine/cuda/backend_impl.h"
#include "engine/kmath/rope.h"
#include "util/error.h"
#include "util/banned.h"

#define F32 sizeof(float)

static int launch(nf_cuda_backend *b, nf_cuk_id id, nf_cu_launch l, void **p)
{
	return nf_cuk_launch(&b->k, b->d, b->stream, id, l, p);
}

/* ---- one helper per kernel: the argument order of launch.h ---- */

static int k_rmsnorm(nf_cuda_backend *b, nf_cu_ptr out, nf_cu_ptr x, nf_cu_ptr w, int n)
{
	int dim = b->cfg->dim;
	float eps = b->cfg->norm_eps;
	size_t ld = (size_t)dim;
	void *p[] = {&out, &x, &w, &dim, &eps, &ld};
	return launch(b, NF_CUK_nf_cu_rmsnorm, nf_cu_launch_rows(n), p);
}

static int k_elementwise(nf_cuda_backend *b, nf_cuk_id id, nf_cu_ptr y, nf_cu_ptr x, size_t n)
{
	void *p[] = {&y, &x, &n};
	return launch(b, id, nf_cu_launch_elementwise(n), p);
}

/* y (+)= W x for n vectors; fp8 weights take x rounded to the e4m3 grid. */
static int k_matmul(nf_cuda_backend *b, nf_cu_ptr y, size_t ldy, const nf_cuda_wmat *w,
		    nf_cu_ptr x, size_t ldx, int n, int accumulate, int prefill)
{
	nf_cu_wmat m = w->m;
	int err;
	if (w->kind == NF_QUANT_FP8_E4M3) {
		float inv = m.act_scale > 0 ? 1.0f / m.act_scale : 1.0f;
		size_t count = (size_t)n * ldx;
		void *p[] = {&b->a.xr, &x, &inv, &count};
		if ((err = launch(b, NF_CUK_nf_cu_round_f8, nf_cu_launch_elementwise(count), p)))
			return err;
		x = b->a.xr;
	}
	void *p[] = {&y, &ldy, &m, &x, &ldx, &n, &accumulate};
	nf_cu_variant v = nf_cuda_backend_variant(b, w, n, prefill);
	return launch(b, nf_cuk_product(w->kind, v), nf_cu_launch_variant(v, m.rows, n), p);
}

/* The bias of each of n rows (width floats, ld apart); none when absent. */
static int k_bias(nf_cuda_backend *b, nf_cu_ptr y, size_t ld, nf_cu_ptr bias, int width, int n)
{
	int err = 0;
	for (int r = 0; r < n && bias && !err; r++)
		err = k_elementwise(b, NF_CUK_nf_cu_add, y + (size_t)r * ld * F32, bias, (size_t)width);
	return err;
}

static int k_rope(nf_cuda_backend *b, nf_cu_ptr v, size_t ld, int heads, int n)
{
	int hs = nf_model_head_size(b->cfg), pairs = NF_KM_ROPE_INTERLEAVED;
	void *p[] = {&v, &ld, &b->a.cs, &heads, &hs, &pairs};
	return launch(b, NF_CUK_nf_cu_rope, nf_cu_launch_rope(n), p);
}

static nf_cuk_id kv_kernel(const nf_cuda_backend *b, nf_cuk_id f16, nf_cuk_id int8)
{
	return b->kv == NF_KV_INT8 ? int8 : f16;
}

nf_cu_ptr nf_cuda_cache_rows(const nf_cuda_backend *b, const nf_cu_ptr *c, int s, int l, int g)
{
	return c[s] + ((size_t)l * (size_t)b->cfg->n_kv_heads + (size_t)g) * b->head_stride;
}

/* Slot s's K (or V) cache of layer l. */
static nf_cu_ptr layer_cache(const nf_cuda_backend *b, const nf_cu_ptr *c, int s, int l)
{
	return nf_cuda_cache_rows(b, c, s, l, 0);
}

/* Rows r0 .. r0 + n - 1 of k and v into slot s at positions pos0 ... */
static int k_kv_append(nf_cuda_backend *b, int s, int l, int r0, int pos0, int n)
{
	nf_cu_ptr kc = layer_cache(b, b->kc, s, l), vc = layer_cache(b, b->vc, s, l);
	size_t kvd = (size_t)nf_model_kv_dim(b->cfg), ld = kvd;
	nf_cu_ptr k = b->a.k + (size_t)r0 * kvd * F32, v = b->a.v + (size_t)r0 * kvd * F32;
	int heads = b->cfg->n_kv_heads, hs = nf_model_head_size(b->cfg);
	void *p[] = {&kc, &vc, &k, &v, &ld, &pos0, &heads, &hs, &b->head_stride};
	return launch(b, kv_kernel(b, NF_CUK_nf_cu_kv_append_f16, NF_CUK_nf_cu_kv_append_int8),
		      nf_cu_launch_kv_append(n, heads), p);
}

/* Row r's attention at position pos over slot s: the splits, then their merge. */
static int k_attn_decode(nf_cuda_backend *b, int s, int l, int r, int pos)
{
	const nf_model_config *c = b->cfg;
	nf_cu_ptr kc = layer_cache(b, b->kc, s, l), vc = layer_cache(b, b->vc, s, l);
	nf_cu_ptr q = b->a.q + (size_t)r * (size_t)c->dim * F32;
	nf_cu_ptr out = b->a.xb2 + (size_t)r * (size_t)c->dim * F32;
	int heads = c->n_heads, kv_heads = c->n_kv_heads, hs = nf_model_head_size(c);
	int splits = nf_cu_decode_splits(pos), err;
	void *p[] = {&b->a.part_o, &b->a.part_ml, &q, &kc, &vc, &pos, &heads, &kv_heads, &hs,
		     &b->head_stride};
	if ((err = launch(b, kv_kernel(b, NF_CUK_nf_cu_attn_decode_f16, NF_CUK_nf_cu_attn_decode_int8),
			  nf_cu_launch_attn_decode(pos, heads), p)))
		return err;
	void *pr[] = {&out, &b->a.part_o, &b->a.part_ml, &heads, &hs, &splits};
	return launch(b, NF_CUK_nf_cu_attn_decode_reduce, nf_cu_launch_attn_reduce(heads), pr);
}

static int k_attn_prefill(nf_cuda_backend *b, int s, int l, int pos0, int n)
{
	const nf_model_config *c = b->cfg;
	nf_cu_ptr kc = layer_cache(b, b->kc, s, l), vc = layer_cache(b, b->vc, s, l);
	size_t ld = (size_t)c->dim;
	int heads = c->n_heads, kv_heads = c->n_kv_heads, hs = nf_model_head_size(c);
	void *p[] = {&b->a.xb2, &b->a.q, &ld, &kc, &vc, &pos0, &n, &heads, &kv_heads, &hs,
		     &b->head_stride};
	return launch(b, kv_kernel(b, NF_CUK_nf_cu_attn_prefill_f16, NF_CUK_nf_cu_attn_prefill_int8),
		      nf_cu_launch_attn_prefill(n, heads), p);
}

/* ---- the pass ---- */

/* Where a pass's rows go: decode, row r is slot slots[r] at pos[r];
 * prefill, every row is slot slots[0], at pos[0] + r. */
typedef struct pass {
	const int *slots, *pos;
	int n, prefill;
} pass;

static int attention(nf_cuda_backend *b, const pass *ps, int l)
{
	int err = 0;
	if (ps->prefill)
		return (err = k_kv_append(b, ps->slots[0], l, 0, ps->pos[0], ps->n)) ? err :
			k_attn_prefill(b, ps->slots[0], l, ps->pos[0], ps->n);
	for (int r = 0; r < ps->n && !err; r++)
		if (!(err = k_kv_append(b, ps->slots[r], l, r, ps->pos[r], 1)))
			err = k_attn_decode(b, ps->slots[r], l, r, ps->pos[r]);
	return err;
}

static int attention_block(nf_cuda_backend *b, const pass *ps, const nf_cuda_layer *L, int l)
{
	const nf_model_config *c = b->cfg;
	size_t dim = (size_t)c->dim, kvd = (size_t)nf_model_kv_dim(c);
	int n = ps->n, pf = ps->prefill, err;
	if ((err = k_rmsnorm(b, b->a.xb, b->a.x, L->rms_att, n)) ||
	    (err = k_matmul(b, b->a.q, dim, &L->wq, b->a.xb, dim, n, 0, pf)) ||
	    (err = k_matmul(b, b->a.k, kvd, &L->wk, b->a.xb, dim, n, 0, pf)) ||
	    (err = k_matmul(b, b->a.v, kvd, &L->wv, b->a.xb, dim, n, 0, pf)) ||
	    (err = k_bias(b, b->a.q, dim, L->bq, c->dim, n)) ||
	    (err = k_bias(b, b->a.k, kvd, L->bk, (int)kvd, n)) ||
	    (err = k_bias(b, b->a.v, kvd, L->bv, (int)kvd, n)) ||
	    (err = k_rope(b, b->a.q, dim, c->n_heads, n)) ||
	    (err = k_rope(b, b->a.k, kvd, c->n_kv_heads, n)) || (err = attention(b, ps, l)))
		return err;
	/* x += wo @ att (+ bo) */
	if ((err = k_matmul(b, b->a.x, dim, &L->wo, b->a.xb2, dim, n, 1, pf)))
		return err;
	return k_bias(b, b->a.x, dim, L->bo, c->dim, n);
}

static int ffn_block(nf_cuda_backend *b, const pass *ps, const nf_cuda_layer *L)
{
	const nf_model_config *c = b->cfg;
	size_t dim = (size_t)c->dim, hid = (size_t)c->hidden_dim;
	int n = ps->n, pf = ps->prefill, err;
	if ((err = k_rmsnorm(b, b->a.xb, b->a.x, L->rms_ffn, n)) ||
	    (err = k_matmul(b, b->a.h1, hid, &L->w1, b->a.xb, dim, n, 0, pf)) ||
	    (err = k_matmul(b, b->a.h3, hid, &L->w3, b->a.xb, dim, n, 0, pf)) ||
	    (err = k_elementwise(b, NF_CUK_nf_cu_swiglu, b->a.h1, b->a.h3, (size_t)n * hid)))
		return err;
	return k_matmul(b, b->a.x, dim, &L->w2, b->a.h1, hid, n, 1, pf); /* x += w2 @ h */
}

static int layers(nf_cuda_backend *b, const pass *ps)
{
	const nf_model_config *c = b->cfg;
	size_t ldo = (size_t)c->dim;
	nf_cu_wmat table = b->emb.m;
	int n = ps->n, err;
	void *p[] = {&b->a.x, &table, &b->a.tokens, &n, &ldo};
	if ((err = launch(b, nf_cuk_embed(b->emb.kind), nf_cu_launch_embed(n, c->dim), p)))
		return err;
	for (int l = 0; l < c->n_layers; l++)
		if ((err = attention_block(b, ps, &b->layers[l], l)) ||
		    (err = ffn_block(b, ps, &b->layers[l])))
			return err;
	return 0;
}

int nf_cuda_step_head(nf_cuda_backend *b, int r0, int n)
{
	const nf_model_config *c = b->cfg;
	size_t dim = (size_t)c->dim, ld = (size_t)c->vocab_size;
	nf_cu_ptr x = b->a.x + (size_t)r0 * dim * F32, xb = b->a.xb + (size_t)r0 * dim * F32;
	int vocab = c->vocab_size, err;
	void *p[] = {&b->a.next, &b->a.logits, &vocab, &ld};
	if ((err = k_rmsnorm(b, xb, x, b->rms_final, n)) ||
	    (err = k_matmul(b, b->a.logits, ld, &b->cls, xb, dim, n, 0, 0)))
		return err;
	return launch(b, NF_CUK_nf_cu_argmax, nf_cu_launch_rows(n), p);
}

int nf_cuda_step_upload(nf_cuda_backend *b, const int *tokens, const int *pos, int n)
{
	size_t hs = (size_t)nf_model_head_size(b->cfg);
	nf_cu_result rc;
	for (int r = 0; r < n; r++)
		for (size_t i = 0; i < hs; i += 2) {
			float angle = (float)pos[r] * b->inv_freq[i / 2];
			b->cs[(size_t)r * hs + i] = cosf(angle);
			b->cs[(size_t)r * hs + i + 1] = sinf(angle);
		}
	if ((rc = b->api->cuMemcpyHtoDAsync(b->a.cs, b->cs, (size_t)n * hs * F32, b->stream)))
		return nf_cuda_backend_fail(b, "the RoPE table's copy", rc);
	if ((rc = b->api->cuMemcpyHtoDAsync(b->a.tokens, tokens, (size_t)n * sizeof(int), b->stream)))
		return nf_cuda_backend_fail(b, "the tokens' copy", rc);
	return 0;
}

int nf_cuda_step_decode(nf_cuda_backend *b, const int *slots, const int *pos, int n)
{
	pass ps = {slots, pos, n, 0};
	int err = layers(b, &ps);
	return err ? err : nf_cuda_step_head(b, 0, n);
}

int nf_cuda_step_prefill(nf_cuda_backend *b, int slot, int pos0, int n)
{
	pass ps = {&slot, &pos0, n, 1};
	return layers(b, &ps);
}
