/*
 * gemm.c - dispatch of a GEMM to the kernel of its weight kind, and the
 * activation forms those kernels take (gemm.h).
 */
#include "engine/gemm.h"

#include <string.h>

#include "engine/quant.h"
#include "util/banned.h"

int nf_bk_has_kernel(const nf_backend_ops *ops, nf_quant_kind k)
{
	switch (k) {
	case NF_QUANT_NONE:
		return ops->gemm_f32 != NULL;
	case NF_QUANT_INT8_ROW:
		return ops->gemm_q8 != NULL;
	case NF_QUANT_INT4_GROUP:
		return ops->gemm_q4 != NULL;
	case NF_QUANT_FP8_E4M3:
		return ops->gemm_f8 != NULL;
	case NF_QUANT_F16:
	case NF_QUANT_BF16:
		return ops->gemm_h16 != NULL;
	default:
		return 0;
	}
}

void nf_bk_gemm(const nf_backend_ops *ops, const nf_bk_matrix *w, float *y, size_t ldy,
		const nf_bk_acts *a, size_t n, int r0, int r1, int accumulate)
{
	switch (w->kind) {
	case NF_QUANT_NONE:
		ops->gemm_f32(y, ldy, w, a->x, a->ldx, n, r0, r1, accumulate);
		return;
	case NF_QUANT_INT8_ROW:
		ops->gemm_q8(y, ldy, w, a->xq, a->ldq, a->xs, n, r0, r1, accumulate);
		return;
	case NF_QUANT_INT4_GROUP:
		ops->gemm_q4(y, ldy, w, a->xq, a->ldq, a->xs, n, r0, r1, accumulate);
		return;
	case NF_QUANT_FP8_E4M3:
		ops->gemm_f8(y, ldy, w, a->x8, a->ldx, n, r0, r1, accumulate);
		return;
	case NF_QUANT_F16:
	case NF_QUANT_BF16:
		ops->gemm_h16(y, ldy, w, a->x, a->ldx, n, r0, r1, accumulate);
		return;
	default:
		return; /* nf_bk_has_kernel refused it when the engine opened */
	}
}

void nf_bk_prepare_q8(const nf_backend_ops *ops, int8_t *xq, size_t ldq, float *xs,
		      const float *x, size_t ldx, size_t cols, size_t n)
{
	size_t padded = (cols + NF_BK_QPAD - 1) / NF_BK_QPAD * NF_BK_QPAD;
	for (size_t b = 0; b < n; b++) {
		xs[b] = ops->quantize_q8 ? ops->quantize_q8(xq + b * ldq, x + b * ldx, cols)
					 : nf_quant_int8_vec(xq + b * ldq, x + b * ldx, cols);
		/* a longer vector may have been here: the kernels read zeros */
		memset(xq + b * ldq + cols, 0, padded - cols);
	}
}

void nf_bk_prepare_f8(const nf_backend_ops *ops, float *x8, const float *x, size_t ldx,
		      size_t cols, size_t n, float act_scale)
{
	float inv = act_scale > 0.0f ? 1.0f / act_scale : 0.0f;
	for (size_t b = 0; b < n; b++) {
		if (ops->round_f8) {
			ops->round_f8(x8 + b * ldx, x + b * ldx, inv, (int)cols);
			continue;
		}
		for (size_t c = 0; c < cols; c++)
			x8[b * ldx + c] = nf_fp8_e4m3_round(x[b * ldx + c] * inv);
	}
}
