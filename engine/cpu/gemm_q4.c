/*
 * gemm_q4.c - the int4-group GEMM (backend.h gemm_q4) of every kernel
 * family: weights NF_QUANT_INT4_GROUP (docs/quantization.md), activations
 * int8 with one scale per vector.  Row r of vector b is
 *
 *   y = xs[b] * sum over groups g, in order, of
 *         scale_g * sum_c q[c] * xq[c]  +  min_g * sum_c xq[c]
 *
 * The integer sums are exact, and every family does the float part in the
 * scalar family's order, one operation at a time (no fused multiply-add),
 * so all families give bit-identical results.
 */
#include "engine/cpu/cpu.h"
#include "engine/quant.h"
#include "engine/safetensors.h" /* nf_f16_to_f32 */
#include "util/banned.h"

static inline void store(float *out, float v, int accumulate)
{
	*out = accumulate ? *out + v : v;
}

/* The float part of one group, as every family computes it: acc plus the
 * group's term, each product rounded on its own (separate statements keep
 * a compiler from fusing them). */
static inline float add_group(float acc, float scale, float min, int32_t qx, int32_t x)
{
	float sq = scale * (float)qx;
	float mx = min * (float)x;
	return acc + (sq + mx);
}

/* ---- scalar ---- */

/* One row (cols / 2 bytes, its gsm) against one int8 vector. */
static float row_dot_scalar(const uint8_t *row, const uint16_t *sm, const int8_t *x, size_t cols,
			    size_t group)
{
	float acc = 0.0f;
	for (size_t c0 = 0, g = 0; c0 < cols; c0 += group, g++) {
		size_t c1 = c0 + group < cols ? c0 + group : cols;
		int32_t qx = 0, xs = 0;
		for (size_t c = c0; c < c1; c++) {
			/* block of 32 columns = 16 bytes: low nibbles columns 0-15, high 16-31 */
			uint8_t byte = row[c / 32 * 16 + c % 16];
			int32_t q = c % 32 < 16 ? byte & 0x0f : byte >> 4;
			qx += q * x[c];
			xs += x[c];
		}
		acc = add_group(acc, nf_f16_to_f32(sm[2 * g]), nf_f16_to_f32(sm[2 * g + 1]), qx, xs);
	}
	return acc;
}

void nf_cpu_gemm_q4_scalar(float *y, size_t ldy, const nf_bk_matrix *w, const int8_t *xq,
			   size_t ldx, const float *xs, size_t n, int r0, int r1, int accumulate)
{
	size_t cols = (size_t)w->cols, group = (size_t)w->group;
	size_t groups = nf_quant_int4_groups(cols, w->group);
	for (int r = r0; r < r1; r++) {
		const uint8_t *row = w->q4 + (size_t)r * (cols / 2);
		const uint16_t *sm = w->gsm + (size_t)r * groups * 2;
		for (size_t b = 0; b < n; b++) {
			float acc = row_dot_scalar(row, sm, xq + b * ldx, cols, group);
			store(y + b * ldy + (size_t)r, acc * xs[b], accumulate);
		}
	}
}
