/*
 * gemm.h - one GEMM over a weight matrix of any kind: the activations
 * prepared in the form the kind's kernels take (wformat.h), and the
 * backend's kernel for that kind.  The forward pass and the tactics timing
 * both run their GEMMs through here.
 */
#ifndef NF_ENGINE_GEMM_H
#define NF_ENGINE_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "engine/backend.h"

/* n activation vectors in every form some kernel takes; a form is filled
 * only when a matrix of the GEMM needs it. */
typedef struct nf_bk_acts {
	const float *x;    /* NF_ACT_F32: (n, ldx) floats */
	size_t ldx;
	const int8_t *xq;  /* NF_ACT_Q8: (n, ldq) int8, scales xs[n] */
	size_t ldq;
	const float *xs;
	const float *x8;   /* NF_ACT_F8: (n, ldx) floats on the e4m3 grid */
} nf_bk_acts;

/* Whether ops has a kernel for matrices of kind k. */
int nf_bk_has_kernel(const nf_backend_ops *ops, nf_quant_kind k);

/* y[b*ldy + r] (+)= (W x_b)[r] for b < n, r0 <= r < r1, by W's kind. */
void nf_bk_gemm(const nf_backend_ops *ops, const nf_bk_matrix *w, float *y, size_t ldy,
		const nf_bk_acts *a, size_t n, int r0, int r1, int accumulate);

/* xq (n rows ldq apart) and xs[n]: x (n rows ldx apart, cols each) as
 * int8 per vector, by ops' quantize_q8 when it has one, zero from cols to
 * the next multiple of NF_BK_QPAD (ldq is at least that). */
void nf_bk_prepare_q8(const nf_backend_ops *ops, int8_t *xq, size_t ldq, float *xs,
		      const float *x, size_t ldx, size_t cols, size_t n);
/* x8 (same strides as x): x / act_scale rounded to the e4m3 grid. */
void nf_bk_prepare_f8(const nf_backend_ops *ops, float *x8, const float *x, size_t ldx,
		      size_t cols, size_t n, float act_scale);

#endif
