/*
 * gemm_f8.c - the fp8 e4m3 kernels of every family (backend.h gemm_f8,
 * round_f8): weights stored as e4m3 codes with a scale per output row,
 * activations rounded to the e4m3 grid by a static per-tensor scale, the
 * products summed in float32, as a GPU's fp8 GEMM does.
 *
 * One summation order for every family, so that all give the same bits:
 * a row's products go to 16 lanes, lane j summing the columns c = j mod 16
 * in increasing c; then f[i] = lane[i] + lane[i + 8] and the row's sum is
 * ((f0 + f1) + (f2 + f3)) + ((f4 + f5) + (f6 + f7)); y = sum * (scale[r] *
 * act_scale).  A product of an e4m3 weight (4 significant bits) and an
 * activation on the e4m3 grid (4 more) is exact in float32, so a fused
 * multiply-add rounds exactly as a multiply and an add: only the order of
 * the additions matters, and it is the one above.
 *
 * The SIMD families widen a code to float through IEEE half: moving the
 * code's 7 magnitude bits up by 7 and its sign to bit 15 gives the half of
 * value e4m3 * 2^-8, normals and subnormals alike (half has 5 exponent bits
 * to e4m3's 4, the same place for the mantissa's top), which the F16C
 * conversion widens exactly; the 2^8 is folded into the row scale.  Scaling
 * by a power of two is exact here, so the sums are the same bits.
 */
#include <math.h>
#include <string.h>

#include "engine/cpu/cpu.h"
#include "engine/quant.h"
#include "util/banned.h"

#define F8_LANES 16

/* The value of a weight code as every family widens it.  The NaN codes
 * never occur in weights (the quantizer refuses NaN) and widen to 480, as
 * the IEEE-half path of the SIMD families widens them. */
static inline float widen_e4m3(uint8_t b)
{
	uint32_t sign = (uint32_t)(b & 0x80) << 24, e = (uint32_t)b >> 3 & 0xf, m = b & 7;
	uint32_t u;
	if (e == 0) {
		float v = (float)m * 0.001953125f; /* m * 2^-9 */
		memcpy(&u, &v, sizeof u);
	} else {
		u = (e + 120) << 23 | m << 20;
	}
	u |= sign;
	float v;
	memcpy(&v, &u, sizeof v);
	return v;
}

/* The row sum of 16 lanes in the order of the file comment. */
static float reduce_lanes(const float lane[F8_LANES])
{
	float f[8];
	for (int i = 0; i < 8; i++)
		f[i] = lane[i] + lane[i + 8];
	return ((f[0] + f[1]) + (f[2] + f[3])) + ((f[4] + f[5]) + (f[6] + f[7]));
}

static float dot_f8(const uint8_t *w, const float *x, size_t cols)
{
	float lane[F8_LANES] = {0};
	for (size_t c = 0; c < cols; c++)
		lane[c % F8_LANES] += widen_e4m3(w[c]) * x[c];
	return reduce_lanes(lane);
}

void nf_cpu_gemm_f8_scalar(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
			   size_t ldx, size_t n, int r0, int r1, int accumulate)
{
	size_t cols = (size_t)w->cols;
	for (int r = r0; r < r1; r++) {
		const uint8_t *row = w->f8 + (size_t)r * cols;
		float k = w->scale[r] * w->act_scale;
		for (size_t b = 0; b < n; b++) {
			float s = dot_f8(row, x + b * ldx, cols) * k;
			float *out = y + b * ldy + (size_t)r;
			*out = accumulate ? *out + s : s;
		}
	}
}

void nf_cpu_round_f8_scalar(float *out, const float *x, float inv_scale, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = nf_fp8_e4m3_round(x[i] * inv_scale);
}
