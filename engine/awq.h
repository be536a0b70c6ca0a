/*
 * awq.h - activation-aware weight scaling (AWQ, Lin et al. 2023), generic
 * over the weight quantizer.
 *
 * A matrix input channel that carries large activations makes its weight
 * column matter more; scaling that column up before quantizing (and the
 * activation down by as much) gives it finer steps at the expense of the
 * quiet columns.  For every group of matrices that share an input, with
 * per-channel mean |x_c| from calibration (engine/calibrate.h):
 *
 *   s_c(alpha) = mean|x_c|^alpha, normalised by sqrt(max s * min s)
 *   err(alpha) = sum over the group's W and the sampled rows x of
 *                || Q(W diag(s)) (x / s) - W x ||^2
 *
 * over alpha in {0, 0.05, ..., 1}; the best alpha wins (alpha 0 is plain
 * quantization, s = 1 exactly, so AWQ is never worse on the sample).  The
 * 1/s is folded into the op before the matrices, so the new float model
 * computes the same function with W diag(s) in place of W:
 *
 *   wq, wk, wv (attention input)  1/s into rms_att
 *   w1, w3     (FFN input)        1/s into rms_ffn
 *   w2         (silu(w1 x) w3 x)  1/s into the rows of w3
 *   wo         (heads' outputs)   1/s into the rows of wv (and bv): with
 *              grouped-query attention the query heads that share a KV head
 *              read the same v channel, so the channel's statistic is the
 *              mean over those heads and its scale is shared
 *
 * The classifier is not scaled: its input norm could take 1/s, but with a
 * shared classifier the same matrix is the token embedding, which must stay
 * as it is.
 */
#ifndef NF_ENGINE_AWQ_H
#define NF_ENGINE_AWQ_H

#include <stddef.h>

#include "engine/calibrate.h"
#include "engine/cpu/cpu.h"
#include "engine/model.h"

/* out (rows, cols) = w (rows, cols) quantized and dequantized again.  Must
 * treat rows independently (AWQ passes blocks of rows) and be safe to call
 * from several threads at once with the same ctx. */
typedef void (*nf_awq_fakequant_fn)(float *out, const float *w, size_t rows, size_t cols,
				    void *ctx);

/* The engine's int4 groups (quant.h nf_quant_int4_rows, then
 * nf_quant_int4_dequant_row) as a fake quantizer; ctx points to the int
 * group size (32, 64 or 128).  Rows it cannot quantize (a weight that is
 * not finite) come out NaN, which AWQ never prefers to alpha 0. */
void nf_awq_int4_fakequant(float *out, const float *w, size_t rows, size_t cols, void *ctx);

/* The alpha grid: NF_AWQ_GRID points, alpha_i = i / (NF_AWQ_GRID - 1). */
#define NF_AWQ_GRID 21

/* The groups of matrices that share an input, per layer. */
typedef enum nf_awq_group {
	NF_AWQ_QKV,    /* wq, wk, wv */
	NF_AWQ_O,      /* wo */
	NF_AWQ_UPGATE, /* w1, w3 */
	NF_AWQ_DOWN,   /* w2 */
	NF_AWQ_GROUP_COUNT
} nf_awq_group;

typedef struct nf_awq_choice {
	float alpha;      /* the exponent chosen */
	double err_plain; /* output error of plain quantization (alpha 0) */
	double err_best;  /* output error at alpha (<= err_plain) */
} nf_awq_choice;

typedef struct nf_awq_opts {
	nf_awq_fakequant_fn fakequant;
	void *ctx;   /* passed to fakequant */
	int threads; /* <= 0: every online CPU */
} nf_awq_opts;

/* What AWQ chose, per layer and group. */
typedef struct nf_awq_report {
	int n_layers;
	nf_awq_choice *choice; /* (n_layers, NF_AWQ_GROUP_COUNT) */
} nf_awq_report;

/* A new float model (*out, caller owns) that computes what m computes with
 * every layer matrix's columns scaled as above, ready for the quantizer
 * the fakequant stands for; *report (caller owns, nf_awq_report_free) says
 * what was chosen.  calib must come from m's config (the same layers and
 * widths) with rows sampled.  Works one group at a time: beside the two
 * models it holds the group's reference outputs and per-thread blocks. */
int nf_awq_apply(nf_model **out, nf_awq_report **report, const nf_model *m,
		 const nf_calib *calib, const nf_awq_opts *opts);
void nf_awq_report_free(nf_awq_report *r); /* NULL is fine */

typedef struct nf_pool nf_pool;
/* The same for one layer, in place: layer is a model of one layer
 * (nf_model_alloc_layer) calibrated as layer cl of calib; choice gets
 * NF_AWQ_GROUP_COUNT entries.  What nf_awq_apply does to layer cl, the
 * same bits, for builders that hold one layer at a time. */
int nf_awq_apply_layer(nf_model *layer, nf_awq_choice *choice, const nf_calib *calib, int cl,
		       const nf_awq_opts *opts, nf_pool *pool);

/* One group for nf_awq_search: n matrices with the same input (borrowed). */
typedef struct nf_awq_target {
	const float *const *w;  /* (n) matrices of (rows[i], cols) */
	const size_t *rows;     /* (n) */
	size_t n;
	size_t cols;
	const float *mean_abs;  /* (cols) per-channel mean |x| */
	const float *x;         /* (n_x, cols) sampled input rows */
	size_t n_x;
} nf_awq_target;

/* Search the alpha grid for t on pool's threads: *choice and scales (cols)
 * of the best alpha. */
int nf_awq_search(nf_awq_choice *choice, float *scales, const nf_awq_target *t,
		  const nf_awq_opts *opts, nf_pool *pool);

/* s (n) = the scales of exponent alpha for mean_abs (n): every 1 when alpha
 * is 0 or every mean is 0; zero means count as 1e-6 of the largest. */
void nf_awq_scales(float *s, const float *mean_abs, size_t n, float alpha);

/* The search's outputs, y (nb, n_x) = q (nb, cols) xt (cols, n_x), in one
 * instruction set (the search takes the best this CPU runs).  Each output
 * is the sum over c in order of q[r, c] * xt[c, b], a multiply and an add
 * per term, in every set alike: the same bits everywhere, so a build picks
 * the same alphas on any host.  NF_EUNSUPPORTED when this CPU lacks isa. */
typedef enum nf_awq_isa {
	NF_AWQ_ISA_SCALAR,
	NF_AWQ_ISA_AVX2,
	NF_AWQ_ISA_AVX512,
	NF_AWQ_ISA_COUNT
} nf_awq_isa;
int nf_awq_outputs(nf_awq_isa isa, float *y, const float *q, const float *xt, size_t nb,
		   size_t cols, size_t n_x);

#endif
