/*
 * gemm_h16.c - y = W x for 16-bit float weights (NF_QUANT_F16: IEEE
 * binary16, NF_QUANT_BF16: bfloat16; row-major) with float32 activations,
 * in every kernel family.  Each weight is widened exactly to float32.
 *
 * The summation order is fixed, the same in every family, so that the
 * AVX2 and AVX-512 results are bit-identical to the scalar one:
 *   - 16 lanes per (row, vector): lane j sums the columns c = j (mod 16),
 *     in increasing c, each step one fused multiply-add s = fma(w, x, s)
 *     from s = +0 (a tail shorter than 16 leaves the other lanes as they
 *     are);
 *   - the lanes are then added as a tree: j + (j+8), then + (j+4), then
 *     + (j+2), then + (j+1);
 *   - y = that sum, or y + that sum when accumulating.
 * AVX-512 holds the 16 lanes in one register, AVX2 in two (lanes 0-7 and
 * 8-15), the scalar kernel in an array and fmaf.
 */
#include <math.h>

#include "engine/cpu/cpu.h"
#include "engine/safetensors.h"
#include "util/banned.h"

#define H16_LANES 16

static float widen_scalar(uint16_t h, int bf16)
{
	return bf16 ? nf_bf16_to_f32(h) : nf_f16_to_f32(h);
}

/* The lane tree of the header comment. */
static float sum_lanes(float s[H16_LANES])
{
	for (int width = H16_LANES / 2; width >= 1; width /= 2)
		for (int j = 0; j < width; j++)
			s[j] = s[j] + s[j + width];
	return s[0];
}

static float dot_h16_scalar(const uint16_t *w, const float *x, size_t cols, int bf16)
{
	float s[H16_LANES] = {0};
	for (size_t c = 0; c < cols; c++)
		s[c % H16_LANES] = fmaf(widen_scalar(w[c], bf16), x[c], s[c % H16_LANES]);
	return sum_lanes(s);
}

void nf_cpu_gemm_h16_scalar(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
			    size_t ldx, size_t n, int r0, int r1, int accumulate)
{
	size_t cols = (size_t)w->cols;
	int bf16 = w->kind == NF_QUANT_BF16;
	for (int r = r0; r < r1; r++) {
		const uint16_t *row = w->h16 + (size_t)r * cols;
		for (size_t b = 0; b < n; b++) {
			float s = dot_h16_scalar(row, x + b * ldx, cols, bf16);
			float *out = y + b * ldy + (size_t)r;
			*out = accumulate ? *out + s : s;
		}
	}
}
