/*
 * forward.h - the batched forward pass, written once over a backend table
 * (backend.h).  Internal to engine/: engine.c maps the weights into an
 * nf_fwd_weights and drives nf_fwd_step; tests drive it directly.
 */
#ifndef NF_ENGINE_FORWARD_H
#define NF_ENGINE_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "engine/backend.h"
#include "engine/cpu/cpu.h"
#include "engine/model.h"
#include "engine/reference.h"

typedef struct nf_fwd_layer {
	const float *rms_att;             /* (dim) */
	const float *rms_ffn;             /* (dim) */
	nf_bk_matrix wq, wk, wv, wo;      /* (dim|kv_dim, dim), (dim, dim) */
	nf_bk_matrix w1, w2, w3;          /* (hidden, dim), (dim, hidden), (hidden, dim) */
	const float *bq, *bk, *bv, *bo;   /* (dim), (kv_dim), (kv_dim), (dim); NULL when absent */
} nf_fwd_layer;

/* Borrowed weight views, except `layers` and `rowsums`, which the owner frees
 * with nf_fwd_weights_release. */
typedef struct nf_fwd_weights {
	nf_bk_matrix emb;     /* (vocab, dim) token embedding, in the engine's format */
	nf_fwd_layer *layers; /* (n_layers) owned */
	const float *rms_final; /* (dim) */
	nf_bk_matrix cls;     /* (vocab, dim) classifier */
	int32_t *rowsums;     /* owned: rowsum arrays of every int8 matrix */
} nf_fwd_weights;

/* Views of a float32 nf_model (no copies); w->layers is allocated. */
int nf_fwd_weights_from_model(nf_fwd_weights *w, const nf_model *m);
/* A tensor's stored form, layers stacked (engine/wformat.h): its data, what
 * the format keeps beside it (per-row scales as floats, or per-group
 * scale/min halves), the static activation scale of each layer (fp8), and
 * the int4 group. */
typedef struct nf_fwd_src {
	nf_quant_kind kind;
	const void *data;
	const void *aux;
	const float *act_scale;
	int group;
	int f8_normal; /* fp8: no subnormal code in data (nf_bk_matrix.f8_normal) */
} nf_fwd_src;
/* Point the views of table tensor id (an nf_tensor_id of cfg's
 * architecture, engine/arch.h) at s, stacked by layer.  Vectors (norms,
 * biases) are always float32.  w->layers must hold n_layers entries.  A
 * shared classifier is bound with the embedding. */
void nf_fwd_bind_src(nf_fwd_weights *w, const nf_model_config *cfg, int id, const nf_fwd_src *s);
/* nf_fwd_bind_src of float32 data, or int8 with per-row scales when kind
 * is NF_QUANT_INT8_ROW. */
void nf_fwd_bind(nf_fwd_weights *w, const nf_model_config *cfg, int id, nf_quant_kind kind,
		 const void *data, const float *scale);
/* The matrix view of table tensor id in layer L (NULL: not a layer matrix). */
const nf_bk_matrix *nf_fwd_layer_matrix(const nf_fwd_layer *L, int id);
/* Compute rowsums for every int8 matrix (allocates w->rowsums). */
int nf_fwd_weights_prepare(nf_fwd_weights *w, const nf_model_config *cfg);
/* Re-lay every matrix that can be tiled as NF_BK_TILE8 (engine/layout.h),
 * in place: the caller owns the weights' memory writable (engine.c's copy).
 * Call after nf_fwd_weights_prepare. */
int nf_fwd_weights_tile(nf_fwd_weights *w, const nf_model_config *cfg);
void nf_fwd_weights_release(nf_fwd_weights *w);
/* Bytes of weights one decode step reads. */
uint64_t nf_fwd_weights_bytes(const nf_fwd_weights *w, const nf_model_config *cfg);

/* A sequence's KV cache: (layer, n_kv_heads, max_seq_len) rows of
 * head_size elements each (backend.h's nf_kv_kind), head-major so that
 * attention reads each head's rows as one stream.  Decode reads the whole
 * cache every token, from memory, so fewer bytes is a faster step: halves
 * (f16) or int8 with a scale per row (int8, half the bytes again: a longer
 * context fits).  fp32 engines keep floats by default: they must match the
 * float32 reference to 1e-4. */
typedef struct nf_fwd_kv {
	void *k;
	void *v;
	nf_kv_kind kind;
} nf_fwd_kv;
int nf_fwd_kv_init(nf_fwd_kv *kv, const nf_model_config *cfg, nf_kv_kind kind);
/* Bytes of one of the two caches (K or V) of cfg in kind (0: overflow). */
size_t nf_fwd_kv_bytes(const nf_model_config *cfg, nf_kv_kind kind);
void nf_fwd_kv_release(nf_fwd_kv *kv);
/* Copy the K and V rows of positions [0, n) of every layer and head from
 * src to dst (n <= max_seq_len, checked by the caller). */
void nf_fwd_kv_copy_prefix(nf_fwd_kv *dst, const nf_fwd_kv *src, const nf_model_config *cfg,
			   size_t n);

typedef struct nf_fwd nf_fwd;

/* Run state for cfg and w (both borrowed; must outlive it). */
int nf_fwd_new(nf_fwd **out, const nf_model_config *cfg, const nf_fwd_weights *w,
	       const nf_backend_ops *ops, int threads);
void nf_fwd_free(nf_fwd *f); /* NULL is fine */
void nf_fwd_set_ops(nf_fwd *f, const nf_backend_ops *ops);
const nf_backend_ops *nf_fwd_ops(const nf_fwd *f);
/* Use ops for the GEMMs of shape (rows, cols) (tactics); cleared by set_ops. */
int nf_fwd_set_shape_ops(nf_fwd *f, int rows, int cols, const nf_backend_ops *ops);
int nf_fwd_threads(const nf_fwd *f);
/* The matrix inputs of a pass (named as the reference names them): n
 * vectors of width floats, one after the other, in the order of the pass's
 * tokens (valid only during the call); layer is -1 for NF_REF_IN_CLS. */
typedef void (*nf_fwd_observer)(void *ctx, int layer, nf_ref_input which, const float *x,
				size_t n, int width);
/* Show every later step's matrix inputs to fn (NULL: stop); unset, a pass
 * pays one branch per input.  With an observer a pass also computes the
 * classifier's input of every token, not only of those it returns logits
 * for. */
void nf_fwd_set_observer(nf_fwd *f, nf_fwd_observer fn, void *ctx);
/* Called before a pass reads layer `layer`'s weights, to bind them (a
 * builder that holds one layer at a time).  It cannot fail the pass: it
 * keeps its error for its caller to check after the step. */
typedef void (*nf_fwd_layer_hook)(void *ctx, int layer);
void nf_fwd_set_layer_hook(nf_fwd *f, nf_fwd_layer_hook fn, void *ctx);
/* How a GEMM's output rows are shared among the threads
 * (nf_pool_run_ranges): units of NF_FWD_UNIT_ROWS rows (two 8-row tiles),
 * at most NF_FWD_GRAIN units per call; the autotuner times GEMVs split
 * alike.  Measured on synth110M int8 decode (interleaved per token): grains
 * of 8-32 units within 2%, 1 unit 5-14% slower (short streams), 64 and up
 * 7-22% slower (too little left to steal). */
#define NF_FWD_UNIT_ROWS 16
#define NF_FWD_GRAIN 16

/* One token for each of n sequences (tokens and positions already checked
 * in range); vocab logits per sequence at logits + i*vocab.  Allocates only
 * when n exceeds every earlier batch. */
int nf_fwd_step(nf_fwd *f, nf_fwd_kv *const *kv, const int *tokens, const int *pos, size_t n,
		float *logits);

/* Tokens per pass of a ragged step: the activations of at most this many
 * tokens are live at once (the weights are read once per pass). */
#define NF_FWD_PASS_TOKENS 256

/* A ragged step (all checked by the caller): sequence i (cache kv[i])
 * consumes n_tokens[i] >= 1 consecutive tokens, the next ones of `tokens`
 * (sequence 0's first), at positions pos0[i], pos0[i] + 1, ...; vocab logits
 * of each sequence's LAST token at logits + i*vocab (logits NULL: none).
 * Runs in passes of NF_FWD_PASS_TOKENS tokens; every token's results equal
 * those of nf_fwd_step one token at a time. */
int nf_fwd_step_ragged(nf_fwd *f, nf_fwd_kv *const *kv, const int *tokens, const int *n_tokens,
		       const int *pos0, size_t n_seqs, float *logits);
/* The same with logits for the last n_rows[i] tokens of sequence i (each
 * 1..n_tokens[i]; NULL: 1 each), rows one after the other in the order of
 * the tokens (sequence 0's first): what verifies drafted tokens. */
int nf_fwd_step_ragged_rows(nf_fwd *f, nf_fwd_kv *const *kv, const int *tokens,
			    const int *n_tokens, const int *pos0, const int *n_rows, size_t n_seqs,
			    float *logits);

/* One sequence (cache kv) consumes tokens[0, n) at positions pos0, pos0 + 1,
 * ... (checked by the caller), like a ragged step of one sequence, and the
 * classifier runs on EVERY token: vocab logits of token i at
 * logits + i*vocab, (n, vocab) in all.  Teacher-forced evaluation in one
 * prefill.  Each token's logits equal nf_fwd_step's for it. */
int nf_fwd_prefill_logits(nf_fwd *f, nf_fwd_kv *kv, const int *tokens, size_t n, int pos0,
			  float *logits);

#endif
