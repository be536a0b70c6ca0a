/*
 * forward.c - the batched Llama forward pass over a backend table: embed,
 * then per layer RMSNorm -> fused QKV GEMM -> RoPE -> GQA attention over the
 * KV cache -> output GEMM (+residual) -> RMSNorm -> fused gate/up GEMM with
 * SwiGLU applied per row chunk -> down GEMM (+residual), then the final norm
 * and the classifier.
 * GEMMs and attention are split across the thread pool by output rows (by
 * (sequence, head) for attention); buffers are allocated once per batch size.
 */
#include "engine/forward.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/arch.h"
#include "engine/gemm.h"
#include "engine/layout.h"
#include "engine/quant.h"
#include "engine/wformat.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

/* Below this many multiply-adds a GEMM runs on the calling thread only. */
#define PAR_MIN_MACS (1u << 16)

struct nf_fwd {
	const nf_model_config *cfg;
	const nf_fwd_weights *w;
	const nf_backend_ops *ops;
	nf_pool *pool;
	size_t cap;        /* batch capacity of the buffers */
	size_t ldq;        /* bytes per int8 activation row */
	float *x;          /* (cap, dim) residual stream */
	float *xb;         /* (cap, dim) */
	float *xb2;        /* (cap, dim) */
	float *q;          /* (cap, dim) */
	float *k;          /* (cap, kv_dim) */
	float *v;          /* (cap, kv_dim) */
	float *h1;         /* (cap, hidden) */
	float *h3;         /* (cap, hidden) */
	float *cs;         /* (cap, head_size) cos/sin pairs for RoPE */
	float *inv_freq;   /* (head_size / 2) RoPE inverse frequencies, scaled */
	int8_t *xq;        /* (cap, ldq) quantized activations */
	float *xs;         /* (cap) their scales */
	float *x8;         /* (cap, widest) activations on the fp8 grid */
	float *att;        /* (threads, att_stride) attention scratch */
	size_t att_stride; /* n_heads * max_seq scores + head_size (backend.h) */
	nf_fwd_kv **tkv;   /* (cap) the cache of each token's sequence (ragged steps) */
	int *tpos;         /* (cap) the position of each token (ragged steps) */
	int *trow;         /* (cap) the logits row of each token, or -1 (ragged steps) */
	struct {
		int rows, cols;
		const nf_backend_ops *ops;
	} shape_ops[16];   /* per-shape GEMM family from the tactics */
	int n_shape_ops;
	nf_fwd_layer_hook layer_hook; /* NULL: the weights of every layer are bound */
	void *layer_hook_ctx;
	nf_fwd_observer observe; /* NULL: nobody observes the matrix inputs */
	void *observe_ctx;
};

/* ---- weights ---- */

/* The slot of a layer matrix or vector (NULL for another id): the one map
 * from table ids to nf_fwd_layer's fields. */
static nf_bk_matrix *layer_matrix(nf_fwd_layer *L, int id)
{
	switch (id) {
	case NF_T_WQ: return &L->wq;
	case NF_T_WK: return &L->wk;
	case NF_T_WV: return &L->wv;
	case NF_T_WO: return &L->wo;
	case NF_T_W1: return &L->w1;
	case NF_T_W2: return &L->w2;
	case NF_T_W3: return &L->w3;
	default: return NULL;
	}
}

static const float **layer_vector(nf_fwd_layer *L, int id)
{
	switch (id) {
	case NF_T_RMS_ATT: return &L->rms_att;
	case NF_T_RMS_FFN: return &L->rms_ffn;
	case NF_T_BQ: return &L->bq;
	case NF_T_BK: return &L->bk;
	case NF_T_BV: return &L->bv;
	case NF_T_BO: return &L->bo;
	default: return NULL;
	}
}

const nf_bk_matrix *nf_fwd_layer_matrix(const nf_fwd_layer *L, int id)
{
	return layer_matrix((nf_fwd_layer *)L, id);
}

/* Layer l's matrix view of (rows, cols) in s's stored form. */
static nf_bk_matrix view(const nf_fwd_src *s, uint64_t rows, uint64_t cols, size_t l)
{
	const nf_wformat *f = nf_wformat_of(s->kind);
	const char *data = (const char *)s->data + l * nf_wformat_data_bytes(f, rows, cols);
	const char *aux = s->aux ? (const char *)s->aux + l * rows *
						 nf_wformat_aux_cols(f, cols, s->group) *
						 nf_wformat_aux_size(f)
				 : NULL;
	nf_bk_matrix m = {0};
	m.kind = s->kind;
	m.rows = (int)rows;
	m.cols = (int)cols;
	m.group = s->group;
	m.act_scale = s->act_scale ? s->act_scale[l] : 0.0f;
	m.f8_normal = s->f8_normal;
	switch (s->kind) {
	case NF_QUANT_NONE:
		m.f32 = (const float *)data;
		break;
	case NF_QUANT_INT8_ROW:
		m.q8 = (const int8_t *)data;
		m.scale = (const float *)aux;
		break;
	case NF_QUANT_INT4_GROUP:
		m.q4 = (const uint8_t *)data;
		m.gsm = (const uint16_t *)aux;
		break;
	case NF_QUANT_FP8_E4M3:
		m.f8 = (const uint8_t *)data;
		m.scale = (const float *)aux;
		break;
	case NF_QUANT_F16:
	case NF_QUANT_BF16:
		m.h16 = (const uint16_t *)data;
		break;
	default:
		break;
	}
	return m;
}

void nf_fwd_bind_src(nf_fwd_weights *w, const nf_model_config *cfg, int id, const nf_fwd_src *s)
{
	const nf_arch_tensor *t = nf_arch_find(nf_arch_get(cfg->arch), (nf_tensor_id)id);
	uint64_t rows = nf_arch_dim_value(t->rows, cfg), cols = nf_arch_dim_value(t->cols, cfg);
	if (id == NF_T_RMS_FINAL) {
		w->rms_final = s->data;
		return;
	}
	if (id == NF_T_EMB || id == NF_T_WCLS) {
		nf_bk_matrix m = view(s, rows, cols, 0);
		if (id == NF_T_EMB)
			w->emb = m;
		if (id == NF_T_WCLS || cfg->shared_classifier)
			w->cls = m;
		return;
	}
	for (size_t l = 0; l < (size_t)cfg->n_layers; l++) {
		nf_fwd_layer *L = &w->layers[l];
		nf_bk_matrix *m = layer_matrix(L, id);
		if (m)
			*m = view(s, rows, cols, l);
		else /* a vector: float32, (rows) a layer */
			*layer_vector(L, id) = (const float *)s->data + l * rows;
	}
}

void nf_fwd_bind(nf_fwd_weights *w, const nf_model_config *cfg, int id, nf_quant_kind kind,
		 const void *data, const float *scale)
{
	nf_fwd_src s = {.kind = kind, .data = data, .aux = scale};
	nf_fwd_bind_src(w, cfg, id, &s);
}

int nf_fwd_weights_from_model(nf_fwd_weights *w, const nf_model *m)
{
	const nf_model_config *c = &m->cfg;
	const nf_arch *a = nf_arch_get(c->arch);
	memset(w, 0, sizeof *w);
	w->layers = calloc((size_t)c->n_layers, sizeof *w->layers);
	if (!w->layers)
		return nf_error_set(NF_ENOMEM, "forward: out of memory");
	for (size_t i = 0; i < a->n_tensors; i++)
		if (nf_arch_present(&a->tensors[i], c))
			nf_fwd_bind(w, c, a->tensors[i].id, NF_QUANT_NONE,
				    *nf_model_slot((nf_model *)m, a->tensors[i].id), NULL);
	return 0;
}

/* Every matrix of w, in a fixed order, into a new array of *n (caller
 * frees *out); 0 or NF_ENOMEM. */
static int all_matrices(nf_bk_matrix ***out, size_t *n, nf_fwd_weights *w,
			const nf_model_config *cfg)
{
	const nf_arch *a = nf_arch_get(cfg->arch);
	size_t max, k = 0;
	nf_bk_matrix **m;
	if (!nf_size_mul(&max, (size_t)cfg->n_layers, a->n_tensors) || !nf_size_add(&max, max, 2) ||
	    !(m = calloc(max, sizeof *m)))
		return nf_error_set(NF_ENOMEM, "forward: out of memory");
	m[k++] = &w->emb;
	if (nf_bk_elems(&w->cls) != nf_bk_elems(&w->emb))
		m[k++] = &w->cls;
	for (int l = 0; l < cfg->n_layers; l++)
		for (size_t i = 0; i < a->n_tensors; i++) {
			nf_bk_matrix *x = layer_matrix(&w->layers[l], a->tensors[i].id);
			if (x)
				m[k++] = x;
		}
	*out = m;
	*n = k;
	return 0;
}

int nf_fwd_weights_prepare(nf_fwd_weights *w, const nf_model_config *cfg)
{
	nf_bk_matrix **mats = NULL;
	size_t total = 0, n;
	int err = all_matrices(&mats, &n, w, cfg);
	if (err)
		return err;
	for (size_t i = 0; i < n; i++)
		if (mats[i]->kind == NF_QUANT_INT8_ROW)
			total += (size_t)mats[i]->rows;
	free(w->rowsums);
	w->rowsums = NULL;
	if (total) {
		if (!(w->rowsums = calloc(total, sizeof *w->rowsums))) {
			err = nf_error_set(NF_ENOMEM, "forward: out of memory");
			goto done;
		}
		size_t at = 0;
		for (size_t i = 0; i < n; i++) {
			nf_bk_matrix *m = mats[i];
			if (m->kind != NF_QUANT_INT8_ROW)
				continue;
			nf_quant_int8_rowsums(w->rowsums + at, m->q8, (size_t)m->rows, (size_t)m->cols);
			m->rowsum = w->rowsums + at;
			at += (size_t)m->rows;
		}
		if (w->cls.kind == NF_QUANT_INT8_ROW && nf_bk_elems(&w->cls) == nf_bk_elems(&w->emb))
			w->cls.rowsum = w->emb.rowsum;
	}
done:
	free(mats);
	return err;
}

int nf_fwd_weights_tile(nf_fwd_weights *w, const nf_model_config *cfg)
{
	nf_bk_matrix **mats = NULL;
	size_t n;
	int err = all_matrices(&mats, &n, w, cfg);
	if (err)
		return err;
	for (size_t i = 0; i < n && !err; i++) {
		/* the caller owns this memory writable (nf_fwd_weights_tile's contract) */
		err = nf_bk_tile_in_place(mats[i], (void *)(uintptr_t)nf_bk_elems(mats[i]));
	}
	/* a shared classifier is the embedding's memory, tiled once above */
	if (nf_bk_elems(&w->cls) == nf_bk_elems(&w->emb))
		w->cls.layout = w->emb.layout;
	free(mats);
	return err;
}

void nf_fwd_weights_release(nf_fwd_weights *w)
{
	if (!w)
		return;
	free(w->layers);
	free(w->rowsums);
	w->layers = NULL;
	w->rowsums = NULL;
}

static uint64_t matrix_bytes(const nf_bk_matrix *m)
{
	return nf_wformat_matrix_bytes(m);
}

uint64_t nf_fwd_weights_bytes(const nf_fwd_weights *w, const nf_model_config *cfg)
{
	const nf_arch *a = nf_arch_get(cfg->arch);
	uint64_t b = matrix_bytes(&w->cls) + 4u * (uint64_t)cfg->dim; /* + rms_final */
	for (int l = 0; l < cfg->n_layers; l++)
		for (size_t i = 0; i < a->n_tensors; i++) {
			const nf_arch_tensor *t = &a->tensors[i];
			const nf_bk_matrix *m = nf_fwd_layer_matrix(&w->layers[l], t->id);
			if (m)
				b += matrix_bytes(m);
			else if (t->per_layer && nf_arch_present(t, cfg))
				b += 4u * nf_arch_dim_value(t->rows, cfg); /* norms and biases */
		}
	return b;
}

/* ---- KV cache ---- */

/* Bytes from one KV head's rows to the next's (max_seq_len rows). */
static size_t kv_head_stride(const nf_model_config *cfg, nf_kv_kind kind)
{
	return (size_t)cfg->max_seq_len * nf_kv_row_bytes(kind, (size_t)nf_model_head_size(cfg));
}

size_t nf_fwd_kv_bytes(const nf_model_config *cfg, nf_kv_kind kind)
{
	size_t n;
	if (!nf_size_mul3(&n, (size_t)cfg->n_layers, (size_t)cfg->n_kv_heads, (size_t)cfg->max_seq_len) ||
	    !nf_size_mul(&n, n, nf_kv_row_bytes(kind, (size_t)nf_model_head_size(cfg))))
		return 0;
	return n;
}

int nf_fwd_kv_init(nf_fwd_kv *kv, const nf_model_config *cfg, nf_kv_kind kind)
{
	size_t n = nf_fwd_kv_bytes(cfg, kind);
	kv->k = kv->v = NULL;
	kv->kind = kind;
	if (!n)
		return nf_error_set(NF_ENOMEM, "KV cache size overflows");
	kv->k = calloc(1, n);
	kv->v = calloc(1, n);
	if (!kv->k || !kv->v) {
		nf_fwd_kv_release(kv);
		return nf_error_set(NF_ENOMEM, "KV cache: out of memory (%zu bytes)", 2 * n);
	}
	return 0;
}

void nf_fwd_kv_release(nf_fwd_kv *kv)
{
	if (!kv)
		return;
	free(kv->k);
	free(kv->v);
	kv->k = kv->v = NULL;
}

void nf_fwd_kv_copy_prefix(nf_fwd_kv *dst, const nf_fwd_kv *src, const nf_model_config *cfg,
			   size_t n)
{
	size_t rb = nf_kv_row_bytes(src->kind, (size_t)nf_model_head_size(cfg));
	size_t run = kv_head_stride(cfg, src->kind), heads = (size_t)cfg->n_layers * (size_t)cfg->n_kv_heads;
	/* head-major: each (layer, head) holds its positions as one run */
	for (size_t h = 0; h < heads; h++) {
		memcpy((char *)dst->k + h * run, (const char *)src->k + h * run, n * rb);
		memcpy((char *)dst->v + h * run, (const char *)src->v + h * run, n * rb);
	}
}

/* ---- run state ---- */

static void free_buffers(nf_fwd *f)
{
	free(f->x);
	free(f->xb);
	free(f->xb2);
	free(f->q);
	free(f->k);
	free(f->v);
	free(f->h1);
	free(f->h3);
	free(f->cs);
	free(f->xq);
	free(f->xs);
	free(f->x8);
	free(f->tkv);
	free(f->tpos);
	free(f->trow);
	f->tkv = NULL;
	f->tpos = NULL;
	f->trow = NULL;
	f->x = f->xb = f->xb2 = f->q = f->k = f->v = f->h1 = f->h3 = f->cs = f->xs = f->x8 = NULL;
	f->xq = NULL;
	f->cap = 0;
}

/* a x b zeroed bytes on a 64-byte line: glibc's calloc puts a large block
 * 16 bytes past one, and the SIMD kernels' activation loads then straddle
 * two lines (fp8 prefill of 48 vectors measured 55 against 98 GFLOP/s). */
static void *zalloc(size_t a, size_t b, int *err)
{
	size_t n;
	void *p = NULL;
	if (*err)
		return NULL;
	if (!nf_size_mul(&n, a ? a : 1, b ? b : 1) || !nf_size_add(&n, n, 63) ||
	    !(p = aligned_alloc(64, n & ~(size_t)63)))
		*err = nf_error_set(NF_ENOMEM, "forward: out of memory");
	else
		memset(p, 0, n & ~(size_t)63);
	return p;
}

static int grow(nf_fwd *f, size_t cap)
{
	const nf_model_config *c = f->cfg;
	size_t dim = (size_t)c->dim, hid = (size_t)c->hidden_dim, kv = (size_t)nf_model_kv_dim(c);
	int err = 0;
	free_buffers(f);
	f->x = zalloc(cap, dim * sizeof(float), &err);
	f->xb = zalloc(cap, dim * sizeof(float), &err);
	f->xb2 = zalloc(cap, dim * sizeof(float), &err);
	f->q = zalloc(cap, dim * sizeof(float), &err);
	f->k = zalloc(cap, kv * sizeof(float), &err);
	f->v = zalloc(cap, kv * sizeof(float), &err);
	f->h1 = zalloc(cap, hid * sizeof(float), &err);
	f->h3 = zalloc(cap, hid * sizeof(float), &err);
	f->cs = zalloc(cap, (size_t)nf_model_head_size(c) * sizeof(float), &err);
	f->xq = zalloc(cap, f->ldq, &err);
	f->xs = zalloc(cap, sizeof(float), &err);
	f->x8 = zalloc(cap, (size_t)(c->dim > c->hidden_dim ? c->dim : c->hidden_dim) * sizeof(float),
		       &err);
	f->tkv = zalloc(cap, sizeof *f->tkv, &err);
	f->tpos = zalloc(cap, sizeof *f->tpos, &err);
	f->trow = zalloc(cap, sizeof *f->trow, &err);
	if (err) {
		free_buffers(f);
		return err;
	}
	f->cap = cap;
	return 0;
}

int nf_fwd_new(nf_fwd **out, const nf_model_config *cfg, const nf_fwd_weights *w,
	       const nf_backend_ops *ops, int threads)
{
	nf_fwd *f = NULL;
	int err = 0;
	*out = NULL;
	if (!(f = calloc(1, sizeof *f)))
		return nf_error_set(NF_ENOMEM, "forward: out of memory");
	f->cfg = cfg;
	f->w = w;
	f->ops = ops ? ops : nf_cpu_best();
	size_t widest = (size_t)(cfg->dim > cfg->hidden_dim ? cfg->dim : cfg->hidden_dim);
	f->ldq = (widest + NF_BK_QPAD - 1) / NF_BK_QPAD * NF_BK_QPAD;
	if ((err = nf_pool_new(&f->pool, threads)))
		goto done;
	/* per thread: every head's scores, and a head's quantized q (int8 caches) */
	f->att_stride = (size_t)cfg->n_heads * (size_t)cfg->max_seq_len + (size_t)nf_model_head_size(cfg);
	f->att = zalloc((size_t)nf_pool_threads(f->pool), f->att_stride * sizeof(float), &err);
	/* once here, not a powf per pair and token */
	f->inv_freq = zalloc((size_t)nf_model_head_size(cfg) / 2, sizeof(float), &err);
	if (!err)
		nf_arch_rope_inv_freq(f->inv_freq, cfg);
	if (!err)
		err = grow(f, 1);
done:
	if (err) {
		nf_fwd_free(f);
		return err;
	}
	*out = f;
	return 0;
}

void nf_fwd_free(nf_fwd *f)
{
	if (!f)
		return;
	nf_pool_free(f->pool);
	free_buffers(f);
	free(f->att);
	free(f->inv_freq);
	free(f);
}

void nf_fwd_set_observer(nf_fwd *f, nf_fwd_observer fn, void *ctx)
{
	f->observe = fn;
	f->observe_ctx = ctx;
}

static void observe(const nf_fwd *f, size_t layer, nf_ref_input site, const float *x, size_t n,
		    int width)
{
	if (f->observe)
		f->observe(f->observe_ctx, site == NF_REF_IN_CLS ? -1 : (int)layer, site, x, n, width);
}

void nf_fwd_set_ops(nf_fwd *f, const nf_backend_ops *ops)
{
	f->ops = ops;
	f->n_shape_ops = 0;
}

void nf_fwd_set_layer_hook(nf_fwd *f, nf_fwd_layer_hook fn, void *ctx)
{
	f->layer_hook = fn;
	f->layer_hook_ctx = ctx;
}

int nf_fwd_set_shape_ops(nf_fwd *f, int rows, int cols, const nf_backend_ops *ops)
{
	for (int i = 0; i < f->n_shape_ops; i++)
		if (f->shape_ops[i].rows == rows && f->shape_ops[i].cols == cols) {
			f->shape_ops[i].ops = ops;
			return 0;
		}
	if (f->n_shape_ops >= (int)(sizeof f->shape_ops / sizeof f->shape_ops[0]))
		return nf_error_set(NF_EINPUT, "tactics: too many GEMM shapes");
	f->shape_ops[f->n_shape_ops].rows = rows;
	f->shape_ops[f->n_shape_ops].cols = cols;
	f->shape_ops[f->n_shape_ops].ops = ops;
	f->n_shape_ops++;
	return 0;
}

/* The family the tactics chose for m's shape; the scalar one for a kind
 * the family has no kernel for (every family has every kernel today:
 * tests/unit/engine/test_kernels.c checks it). */
static const nf_backend_ops *ops_for(const nf_fwd *f, const nf_bk_matrix *m)
{
	const nf_backend_ops *ops = f->ops;
	for (int i = 0; i < f->n_shape_ops; i++)
		if (f->shape_ops[i].rows == m->rows && f->shape_ops[i].cols == m->cols)
			ops = f->shape_ops[i].ops;
	return nf_bk_has_kernel(ops, m->kind) ? ops : &nf_cpu_scalar_ops;
}

const nf_backend_ops *nf_fwd_ops(const nf_fwd *f)
{
	return f->ops;
}

int nf_fwd_threads(const nf_fwd *f)
{
	return nf_pool_threads(f->pool);
}

/* ---- parallel jobs ---- */

typedef struct gemm_task {
	const nf_bk_matrix *w;
	const nf_backend_ops *ops;
	float *y;
	size_t ldy;
	int accumulate;
} gemm_task;

typedef struct gemm_job {
	gemm_task t[3];
	int nt;
	int swiglu;       /* t[0] (gate, w1) and t[1] (up, w3) share row ranges,
			   * then t[0].y = silu(t[0].y) * t[1].y on the range */
	int first[4];     /* first unit (NF_FWD_UNIT_ROWS rows) of each task;
			   * first[nt] = total */
	nf_bk_acts acts;  /* the shared input, in every form the tasks' kinds take */
	size_t n;
} gemm_job;

static void gemm_rows(const gemm_job *j, const gemm_task *t, int r0, int r1)
{
	nf_bk_gemm(t->ops, t->w, t->y, t->ldy, &j->acts, j->n, r0, r1, t->accumulate);
}

/* Rows [r0, r1) of task t (and of the up projection after a gate). */
static void gemm_task_rows(const gemm_job *j, const gemm_task *t, int r0, int r1)
{
	gemm_rows(j, t, r0, r1);
	if (j->swiglu) {
		gemm_rows(j, &j->t[1], r0, r1);
		for (size_t b = 0; b < j->n; b++)
			t->ops->swiglu(t->y + b * t->ldy + (size_t)r0, j->t[1].y + b * j->t[1].ldy + (size_t)r0,
				       r1 - r0);
	}
}

/* Units [u0, u1) of the job's tasks laid end to end. */
static void gemm_range(void *ctx, int u0, int u1, int tid)
{
	const gemm_job *j = ctx;
	int groups = j->swiglu ? 1 : j->nt;
	(void)tid;
	for (int i = 0; i < groups; i++) {
		int a = u0 > j->first[i] ? u0 : j->first[i];
		int b = u1 < j->first[i + 1] ? u1 : j->first[i + 1];
		if (a >= b)
			continue;
		int r1 = (b - j->first[i]) * NF_FWD_UNIT_ROWS;
		gemm_task_rows(j, &j->t[i], (a - j->first[i]) * NF_FWD_UNIT_ROWS,
			       r1 < j->t[i].w->rows ? r1 : j->t[i].w->rows);
	}
}

/* The job's input x (n vectors of cols floats) in the forms its matrices'
 * kinds take (wformat.h): int8 per vector, or the fp8 grid of the job's
 * activation scale (matrices that share an input share its calibration). */
static void prepare_acts(nf_fwd *f, gemm_job *j, const float *x, int cols, size_t n)
{
	int q8 = 0, f8 = 0;
	float act_scale = 0.0f;
	for (int i = 0; i < j->nt; i++) {
		nf_act_form form = nf_wformat_of(j->t[i].w->kind)->act;
		q8 |= form == NF_ACT_Q8;
		if (form == NF_ACT_F8) {
			f8 = 1;
			act_scale = j->t[i].w->act_scale;
		}
	}
	j->acts.x = x;
	j->acts.ldx = (size_t)cols;
	if (q8) {
		nf_bk_prepare_q8(f->ops, f->xq, f->ldq, f->xs, x, (size_t)cols, (size_t)cols, n);
		j->acts.xq = f->xq;
		j->acts.ldq = f->ldq;
		j->acts.xs = f->xs;
	}
	if (f8) {
		nf_bk_prepare_f8(f->ops, f->x8, x, (size_t)cols, (size_t)cols, n, act_scale);
		j->acts.x8 = f->x8;
	}
}

/* Run the job's GEMMs (all sharing input x of `cols` floats per vector);
 * below PAR_MIN_MACS on the calling thread only. */
static void run_gemm(nf_fwd *f, gemm_job *j, const float *x, int cols, size_t n)
{
	size_t macs = 0;
	int groups = j->swiglu ? 1 : j->nt, units = 0;
	j->n = n;
	for (int i = 0; i < j->nt; i++) {
		j->t[i].ops = ops_for(f, j->t[i].w);
		macs += (size_t)j->t[i].w->rows * (size_t)cols * n;
	}
	prepare_acts(f, j, x, cols, n);
	for (int i = 0; i < groups; i++) {
		j->first[i] = units;
		units += (j->t[i].w->rows + NF_FWD_UNIT_ROWS - 1) / NF_FWD_UNIT_ROWS;
	}
	j->first[groups] = units;
	if (macs < PAR_MIN_MACS)
		gemm_range(j, 0, units, 0);
	else
		nf_pool_run_ranges(f->pool, gemm_range, j, units, NF_FWD_GRAIN);
}

static void gemm1(nf_fwd *f, const nf_bk_matrix *w, float *y, size_t ldy, int accumulate,
		  const float *x, size_t n)
{
	gemm_job j = {0};
	j.t[0] = (gemm_task){w, NULL, y, ldy, accumulate};
	j.nt = 1;
	run_gemm(f, &j, x, w->cols, n);
}

typedef struct attn_job {
	nf_fwd *f;
	nf_fwd_kv *const *kv;
	const int *pos;
	size_t n;
	size_t layer;
	int hc;  /* head chunks per sequence */
	int hpc; /* heads per chunk */
} attn_job;

/* Chunk k: sequence k / hc, heads [(k % hc) * hpc, ... + hpc). */
int nf_exp_variant;
static void attn_chunk(void *ctx, int chunk, int tid)
{
	const attn_job *j = ctx;
	const nf_model_config *c = j->f->cfg;
	size_t dim = (size_t)c->dim;
	size_t s = (size_t)chunk / (size_t)j->hc;
	int h0 = (chunk % j->hc) * j->hpc, h1 = h0 + j->hpc;
	if (h1 > c->n_heads)
		h1 = c->n_heads;
	if (h0 >= h1)
		return;
	float *att = j->f->att + (size_t)tid * j->f->att_stride;
	const nf_fwd_kv *kv = j->kv[s];
	size_t hstride = kv_head_stride(c, kv->kind);
	size_t at = j->layer * (size_t)c->n_kv_heads * hstride; /* bytes */
	j->f->ops->attention(j->f->xb2 + s * dim, j->f->q + s * dim, (const char *)kv->k + at,
			     (const char *)kv->v + at, kv->kind, j->pos[s], h0, h1, c->n_heads,
			     c->n_kv_heads, nf_model_head_size(c), hstride, att);
}

/* y += bias over n floats (no bias: nothing), with the backend's add when it has one. */
static void add_bias(const nf_backend_ops *ops, float *y, const float *bias, int n)
{
	if (!bias)
		return;
	if (ops->add) {
		ops->add(y, bias, n);
		return;
	}
	for (int i = 0; i < n; i++)
		y[i] += bias[i];
}

/* One cache row from the floats x (hs of them) at row, in the cache's kind. */
static void store_row(const nf_backend_ops *ops, nf_kv_kind kind, char *row, const float *x,
		      size_t hs)
{
	switch (kind) {
	case NF_KV_F16:
		ops->to_f16((uint16_t *)row, x, (int)hs);
		break;
	case NF_KV_INT8: {
		int8_t *q = (int8_t *)(row + sizeof(float));
		float scale = ops->quantize_q8 ? ops->quantize_q8(q, x, hs) : nf_quant_int8_vec(q, x, hs);
		memcpy(row, &scale, sizeof scale); /* 4-aligned only when head_size is */
		break;
	}
	default:
		memcpy(row, x, hs * sizeof(float));
	}
}

/* Store a token's K and V rows of one head at byte `at` of the caches. */
static void store_kv_row(const nf_backend_ops *ops, nf_fwd_kv *kv, size_t at, const float *k,
			 const float *v, size_t hs)
{
	store_row(ops, kv->kind, (char *)kv->k + at, k, hs);
	store_row(ops, kv->kind, (char *)kv->v + at, v, hs);
}

/* Run the n tokens of one pass through every layer: token b of sequence
 * cache kv[b] at position pos[b]; leaves the residual stream in f->x.  The
 * K and V rows of all n tokens are written to the caches before any of
 * them attends, so a sequence's consecutive tokens in one pass attend to
 * each other causally (token at pos reads cache rows 0..pos). */
static void layers_pass(nf_fwd *f, nf_fwd_kv *const *kv, const int *tokens, const int *pos,
			size_t n)
{
	const nf_model_config *c = f->cfg;
	const nf_fwd_weights *w = f->w;
	const nf_backend_ops *ops = f->ops;
	size_t dim = (size_t)c->dim, hid = (size_t)c->hidden_dim, kvd = (size_t)nf_model_kv_dim(c);
	size_t hs = (size_t)nf_model_head_size(c), seq = (size_t)c->max_seq_len;
	/* embeddings and the RoPE angles of each sequence's position */
	for (size_t b = 0; b < n; b++) {
		size_t tok = (size_t)tokens[b];
		nf_wformat_row_f32(f->x + b * dim, &w->emb, tok);
		float *cs = f->cs + b * hs;
		for (size_t i = 0; i < hs; i += 2) {
			float val = (float)pos[b] * f->inv_freq[i / 2];
			cs[i] = cosf(val);
			cs[i + 1] = sinf(val);
		}
	}

	for (size_t l = 0; l < (size_t)c->n_layers; l++) {
		if (f->layer_hook)
			f->layer_hook(f->layer_hook_ctx, (int)l);
		const nf_fwd_layer *L = &w->layers[l];
		for (size_t b = 0; b < n; b++)
			ops->rmsnorm(f->xb + b * dim, f->x + b * dim, L->rms_att, c->dim, c->norm_eps);
		observe(f, l, NF_REF_IN_ATT, f->xb, n, c->dim);

		gemm_job qkv = {0};
		qkv.t[0] = (gemm_task){&L->wq, NULL, f->q, dim, 0};
		qkv.t[1] = (gemm_task){&L->wk, NULL, f->k, kvd, 0};
		qkv.t[2] = (gemm_task){&L->wv, NULL, f->v, kvd, 0};
		qkv.nt = 3;
		run_gemm(f, &qkv, f->xb, c->dim, n);

		for (size_t b = 0; b < n; b++) {
			add_bias(ops, f->q + b * dim, L->bq, c->dim);
			add_bias(ops, f->k + b * kvd, L->bk, (int)kvd);
			add_bias(ops, f->v + b * kvd, L->bv, (int)kvd);
			ops->rope(f->q + b * dim, c->dim, (int)hs, f->cs + b * hs);
			ops->rope(f->k + b * kvd, (int)kvd, (int)hs, f->cs + b * hs);
			/* head-major cache (backend.h): head g's row at pos */
			size_t rb = nf_kv_row_bytes(kv[b]->kind, hs);
			for (size_t g = 0; g < kvd / hs; g++) {
				size_t at = ((l * (kvd / hs) + g) * seq + (size_t)pos[b]) * rb; /* bytes */
				store_kv_row(ops, kv[b], at, f->k + b * kvd + g * hs, f->v + b * kvd + g * hs, hs);
			}
		}

		attn_job aj = {f, kv, pos, n, l, 1, c->n_heads};
		size_t ctx = 0;
		for (size_t b = 0; b < n; b++)
			ctx += (size_t)pos[b] + 1;
		if (ctx * dim >= PAR_MIN_MACS / 2 && nf_pool_threads(f->pool) > 1) {
			/* split heads so there are about 4 chunks per thread */
			size_t want = (size_t)(4 * nf_pool_threads(f->pool));
			aj.hc = n >= want ? 1 : (int)((want + n - 1) / n);
			if (aj.hc > c->n_heads)
				aj.hc = c->n_heads;
			aj.hpc = (c->n_heads + aj.hc - 1) / aj.hc;
		}
		nf_pool_run_chunks(f->pool, attn_chunk, &aj, (int)n * aj.hc);

		observe(f, l, NF_REF_IN_WO, f->xb2, n, c->dim);
		gemm1(f, &L->wo, f->x, dim, 1, f->xb2, n); /* x += wo @ att */
		for (size_t b = 0; b < n; b++)
			add_bias(ops, f->x + b * dim, L->bo, c->dim); /* (+ bo) */

		for (size_t b = 0; b < n; b++)
			ops->rmsnorm(f->xb + b * dim, f->x + b * dim, L->rms_ffn, c->dim, c->norm_eps);
		observe(f, l, NF_REF_IN_FFN, f->xb, n, c->dim);
		gemm_job up = {0};
		up.t[0] = (gemm_task){&L->w1, NULL, f->h1, hid, 0};
		up.t[1] = (gemm_task){&L->w3, NULL, f->h3, hid, 0};
		up.nt = 2;
		up.swiglu = 1; /* h1 = silu(h1) * h3 */
		run_gemm(f, &up, f->xb, c->dim, n);
		observe(f, l, NF_REF_IN_W2, f->h1, n, c->hidden_dim);
		gemm1(f, &L->w2, f->x, dim, 1, f->h1, n); /* x += w2 @ h */
	}
	if (f->observe) {
		for (size_t b = 0; b < n; b++)
			ops->rmsnorm(f->xb + b * dim, f->x + b * dim, w->rms_final, c->dim, c->norm_eps);
		observe(f, 0, NF_REF_IN_CLS, f->xb, n, c->dim);
	}

}

int nf_fwd_step(nf_fwd *f, nf_fwd_kv *const *kv, const int *tokens, const int *pos, size_t n,
		float *logits)
{
	const nf_model_config *c = f->cfg;
	size_t dim = (size_t)c->dim;
	int err;
	if (n == 0)
		return 0;
	if (n > f->cap && (err = grow(f, n)))
		return err;
	layers_pass(f, kv, tokens, pos, n);
	for (size_t b = 0; b < n; b++)
		f->ops->rmsnorm(f->xb + b * dim, f->x + b * dim, f->w->rms_final, c->dim, c->norm_eps);
	gemm1(f, &f->w->cls, logits, (size_t)c->vocab_size, 0, f->xb, n);
	return 0;
}

/* The classifier over the tokens of a pass that want logits: rows[b] is
 * the output row of pass token b, or -1.  A pass's rows are consecutive
 * (tokens are in sequence order, each sequence's rows its last tokens). */
static void pass_logits(nf_fwd *f, const int *rows, size_t n, float *logits)
{
	const nf_model_config *c = f->cfg;
	size_t dim = (size_t)c->dim, k = 0;
	int first = -1;
	for (size_t b = 0; b < n; b++) {
		if (rows[b] < 0)
			continue;
		if (first < 0)
			first = rows[b];
		f->ops->rmsnorm(f->xb + k * dim, f->x + b * dim, f->w->rms_final, c->dim, c->norm_eps);
		k++;
	}
	if (k)
		gemm1(f, &f->w->cls, logits + (size_t)first * (size_t)c->vocab_size,
		      (size_t)c->vocab_size, 0, f->xb, k);
}

int nf_fwd_step_ragged_rows(nf_fwd *f, nf_fwd_kv *const *kv, const int *tokens,
			    const int *n_tokens, const int *pos0, const int *n_rows, size_t n_seqs,
			    float *logits)
{
	size_t total = 0;
	size_t s = 0; /* sequence of the pass's next token */
	int done = 0; /* tokens of sequence s consumed by earlier passes */
	int row = 0;  /* output rows given so far */
	int err;
	for (size_t i = 0; i < n_seqs; i++)
		total += (size_t)n_tokens[i];
	if (total == 0)
		return 0;
	size_t want = total < NF_FWD_PASS_TOKENS ? total : NF_FWD_PASS_TOKENS;
	if (want > f->cap && (err = grow(f, want)))
		return err;
	while (s < n_seqs) {
		/* fill a pass: tokens of sequences s, s+1, ... (the last one maybe in part) */
		size_t n = 0;
		const int *ptok = tokens;
		while (s < n_seqs && n < NF_FWD_PASS_TOKENS) {
			int take = n_tokens[s] - done, rows = n_rows ? n_rows[s] : 1;
			if ((size_t)take > NF_FWD_PASS_TOKENS - n)
				take = (int)(NF_FWD_PASS_TOKENS - n);
			for (int k = 0; k < take; k++, n++) {
				f->tkv[n] = kv[s];
				f->tpos[n] = pos0[s] + done + k;
				/* the last `rows` tokens of the sequence give logits */
				f->trow[n] = done + k >= n_tokens[s] - rows ? row++ : -1;
			}
			done += take;
			if (done == n_tokens[s]) {
				s++;
				done = 0;
			}
		}
		layers_pass(f, f->tkv, ptok, f->tpos, n);
		tokens += n;
		if (logits)
			pass_logits(f, f->trow, n, logits);
	}
	return 0;
}

int nf_fwd_step_ragged(nf_fwd *f, nf_fwd_kv *const *kv, const int *tokens, const int *n_tokens,
		       const int *pos0, size_t n_seqs, float *logits)
{
	return nf_fwd_step_ragged_rows(f, kv, tokens, n_tokens, pos0, NULL, n_seqs, logits);
}

int nf_fwd_prefill_logits(nf_fwd *f, nf_fwd_kv *kv, const int *tokens, size_t n, int pos0,
			  float *logits)
{
	const nf_model_config *c = f->cfg;
	size_t dim = (size_t)c->dim, vocab = (size_t)c->vocab_size;
	size_t want = n < NF_FWD_PASS_TOKENS ? n : NF_FWD_PASS_TOKENS;
	int err;
	if (want > f->cap && (err = grow(f, want)))
		return err;
	/* passes of NF_FWD_PASS_TOKENS tokens, as a ragged step runs them, but
	 * the classifier is applied to every token's final hidden state */
	for (size_t at = 0; at < n; at += want) {
		size_t k = n - at < want ? n - at : want;
		for (size_t b = 0; b < k; b++) {
			f->tkv[b] = kv;
			f->tpos[b] = pos0 + (int)(at + b);
		}
		layers_pass(f, f->tkv, tokens + at, f->tpos, k);
		for (size_t b = 0; b < k; b++)
			f->ops->rmsnorm(f->xb + b * dim, f->x + b * dim, f->w->rms_final, c->dim,
					c->norm_eps);
		gemm1(f, &f->w->cls, logits + at * vocab, vocab, 0, f->xb, k); /* (k, vocab) */
	}
	return 0;
}
