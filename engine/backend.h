/*
 * backend.h - a backend is a static const table of kernels (ggml-style).
 * The forward pass (forward.c) is written once over this table; the CPU
 * backend supplies one table per kernel family (engine/cpu/), a CUDA backend
 * would supply another.  Optional slots may be NULL.
 *
 * Shapes: a matrix W is (rows, cols), y = W x; row-major or tiled
 * (engine/layout.h).  Batched kernels
 * take n activation vectors at stride ldx and write outputs at stride ldy;
 * they compute only output rows [r0, r1) so a thread pool can split rows.
 */
#ifndef NF_ENGINE_BACKEND_H
#define NF_ENGINE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "engine/kv_kind.h"
#include "engine/quant.h"

/* Padding of int8 activation rows (bytes): kernels may read this far. */
#define NF_BK_QPAD 64

/* How a matrix's elements are laid out (engine/layout.h). */
typedef enum nf_bk_layout {
	NF_BK_ROWS,  /* row-major */
	NF_BK_TILE8, /* blocks of 8 rows stored by 64-byte column chunks */
} nf_bk_layout;

/* A weight matrix as the kernels see it (borrowed pointers).  The f32 and
 * int8 kernels read both layouts; every other kind is row-major only.  The
 * packing of each kind is docs/quantization.md's. */
typedef struct nf_bk_matrix {
	nf_quant_kind kind;
	int rows, cols;
	const float *f32;      /* (rows, cols) when kind == NF_QUANT_NONE */
	const int8_t *q8;      /* (rows, cols) when kind == NF_QUANT_INT8_ROW */
	const uint16_t *h16;   /* (rows, cols) IEEE halves (NF_QUANT_F16) or bfloat16 (NF_QUANT_BF16) */
	const uint8_t *q4;     /* NF_QUANT_INT4_GROUP: (rows, cols / 2) nibbles, by blocks of 32 */
	const uint16_t *gsm;   /* NF_QUANT_INT4_GROUP: (rows, groups, 2) IEEE-half scale, min */
	int group;             /* NF_QUANT_INT4_GROUP: columns per group, 32, 64 or 128 */
	const uint8_t *f8;     /* (rows, cols) e4m3 codes when kind == NF_QUANT_FP8_E4M3 */
	const float *scale;    /* (rows) per-output-channel scales: INT8_ROW, FP8_E4M3 */
	const int32_t *rowsum; /* (rows) sum of q8 over each row (for u8 x s8 dot products) */
	float act_scale;       /* FP8_E4M3: the static per-tensor activation scale */
	int f8_normal;         /* FP8_E4M3: no subnormal code (nf_fp8_codes_normal), so a
				  code may widen by moving its bits (engine/cpu/gemm_f8.c) */
	nf_bk_layout layout;   /* NF_BK_ROWS unless tiled (nf_bk_tile_in_place) */
} nf_bk_matrix;

typedef struct nf_backend_ops {
	const char *name;
	/* Non-zero when this machine can run the family. */
	int (*available)(void);

	/* y[b*ldy + r] (+)= sum_c W[r,c] * x[b*ldx + c], b < n, r0 <= r < r1. */
	void (*gemm_f32)(float *y, size_t ldy, const nf_bk_matrix *w, const float *x, size_t ldx,
			 size_t n, int r0, int r1, int accumulate);
	/* The same for int8 W with int8 activations xq (ldx bytes apart, each row
	 * zero-padded to a multiple of NF_BK_QPAD) of scales xs[b]. */
	void (*gemm_q8)(float *y, size_t ldy, const nf_bk_matrix *w, const int8_t *xq, size_t ldx,
			const float *xs, size_t n, int r0, int r1, int accumulate);

	/* The same for a 16-bit W (w->kind NF_QUANT_F16 or NF_QUANT_BF16) with
	 * float activations, each weight widened exactly to float32. */
	void (*gemm_h16)(float *y, size_t ldy, const nf_bk_matrix *w, const float *x, size_t ldx,
			 size_t n, int r0, int r1, int accumulate);
	/* The same for int4 groups (NF_QUANT_INT4_GROUP) with int8 activations
	 * as gemm_q8's: y = xs[b] * sum over groups g of
	 *   scale_g * sum_c q[c] * xq[c]  +  min_g * sum_c xq[c]. */
	void (*gemm_q4)(float *y, size_t ldy, const nf_bk_matrix *w, const int8_t *xq, size_t ldx,
			const float *xs, size_t n, int r0, int r1, int accumulate);
	/* The same for fp8 W (NF_QUANT_FP8_E4M3) with activations x already on
	 * the e4m3 grid (round_f8's output): y = scale[r] * act_scale *
	 * sum_c e4m3(w[r,c]) * x[c], accumulated in float32. */
	void (*gemm_f8)(float *y, size_t ldy, const nf_bk_matrix *w, const float *x, size_t ldx,
			size_t n, int r0, int r1, int accumulate);
	/* out[i] = the e4m3 value nearest x[i] * inv_scale (ties to even,
	 * saturating at +-448), as a float: what a GPU's fp8 conversion of the
	 * activation gives.  Bit-identical to nf_fp8_e4m3_round. */
	void (*round_f8)(float *out, const float *x, float inv_scale, int n);

	/* out = x / rms(x) * w over n elements. */
	void (*rmsnorm)(float *out, const float *x, const float *w, int n, float eps);
	/* Rotate the pairs (2i, 2i+1) of each head of v (n floats, heads of
	 * head_size) by cos/sin cs[2*(i%(head_size/2))], cs[...+1]. */
	void (*rope)(float *v, int n, int head_size, const float *cs);
	/* In place over n floats. */
	void (*softmax)(float *x, int n);
	/* Causal attention of heads [h0, h1) of one sequence at position pos:
	 * q (n_heads*head_size); kc, vc the cache, head-major: the pos+1 rows
	 * of KV head g at byte kc + g*head_stride, nf_kv_row_bytes(kind,
	 * head_size) bytes each, one after the other (so a head's rows are one
	 * sequential stream); out (n_heads*head_size); att scratch of
	 * (h1-h0)*(pos+1) + head_size floats.  NF_KV_INT8 scores are
	 * qs*ks * (q8 . k8) with q quantized per head (nf_quant_int8_vec), the
	 * integer dot product exact, so every family's scores are the same. */
	void (*attention)(float *out, const float *q, const void *kc, const void *vc,
			  nf_kv_kind kind, int pos, int h0, int h1, int n_heads, int n_kv_heads,
			  int head_size, size_t head_stride, float *att);
	/* h1[i] = silu(h1[i]) * h3[i]. */
	void (*swiglu)(float *h1, const float *h3, int n);
	/* y[i] += x[i] (optional; NULL uses a plain loop). */
	void (*add)(float *y, const float *x, int n);
	/* q = int8 of n floats, returns the scale: bit-identical to
	 * nf_quant_int8_vec (optional; NULL uses it). */
	float (*quantize_q8)(int8_t *q, const float *x, size_t n);
	/* h = IEEE half of n floats, rounded to nearest even: bit-identical to
	 * nf_f32_to_f16 for every non-NaN value (a KV cache row). */
	void (*to_f16)(uint16_t *h, const float *x, int n);
} nf_backend_ops;

#endif
