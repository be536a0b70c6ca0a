/*
 * quant_fp8.c - the OCP fp8 e4m3 format ("E4M3FN": 1 sign bit, 4 exponent
 * bits of bias 7, 3 mantissa bits, no infinities, S.1111.111 the only NaN,
 * largest finite 448, subnormals k * 2^-9) and the per-output-channel weight
 * quantizer over it (quant.h, docs/quantization.md).
 *
 * Conversions round to nearest, ties to even, and saturate at +-448: what a
 * GPU's satfinite conversion gives, so an engine built here computes what
 * the same engine computes on a GPU with native fp8.
 */
#include "engine/quant.h"

#include <math.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

#define E4M3_MAX_CODE 0x7e /* 448 = 2^8 * 1.75 */
#define E4M3_NAN_CODE 0x7f
#define E4M3_MIN_NORMAL 0.015625f /* 2^-6 */

static uint32_t f32_bits(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof u);
	return u;
}

static float f32_from_bits(uint32_t u)
{
	float x;
	memcpy(&x, &u, sizeof x);
	return x;
}

float nf_fp8_e4m3_to_f32(uint8_t code)
{
	uint32_t sign = (uint32_t)(code & 0x80) << 24;
	uint32_t e = (code >> 3) & 0xf, m = code & 7;
	if (e == 0xf && m == 7)
		return f32_from_bits(sign | 0x7fc00000u);
	if (e == 0) /* subnormal: m * 2^-9, exact in float */
		return f32_from_bits(sign | f32_bits((float)m * 0.001953125f));
	/* normal: rebias the exponent from 7 to 127, the mantissa on top */
	return f32_from_bits(sign | (e + 120) << 23 | m << 20);
}

/* |x| (as its bits a, finite, below 2^-6) on the subnormal grid k * 2^-9:
 * |x| * 512 is exact, and nf_round_even rounds ties to even.  k = 8 is the
 * code of 2^-6, the smallest normal, so k is the code either way. */
static uint8_t encode_subnormal(float ax)
{
	return (uint8_t)nf_round_even(ax * 512.0f);
}

/* A normal |x| (bits a, 2^-6 <= |x|): keep 3 of float's 23 mantissa bits,
 * rounding the 20 dropped ones to nearest even (a carry out of the mantissa
 * lands in the exponent, as it should), then rebias the exponent. */
static uint8_t encode_normal(uint32_t a)
{
	uint32_t rounded = a + 0x7ffffu + ((a >> 20) & 1);
	uint32_t code = (rounded >> 20) - (120u << 3);
	return code > E4M3_MAX_CODE ? E4M3_MAX_CODE : (uint8_t)code;
}

uint8_t nf_fp8_e4m3_from_f32(float x)
{
	uint32_t bits = f32_bits(x), a = bits & 0x7fffffffu;
	uint8_t sign = (uint8_t)(bits >> 24 & 0x80);
	if (a > 0x7f800000u)
		return sign | E4M3_NAN_CODE;
	if (a >= 0x43e00000u) /* 448 and beyond, infinity included: saturate */
		return sign | E4M3_MAX_CODE;
	float ax = f32_from_bits(a);
	return sign | (ax < E4M3_MIN_NORMAL ? encode_subnormal(ax) : encode_normal(a));
}

float nf_fp8_e4m3_round(float x)
{
	return nf_fp8_e4m3_to_f32(nf_fp8_e4m3_from_f32(x));
}

/* Max |w| over a row, or NF_EINPUT naming the first element that is not
 * finite (a NaN or infinity would make the scale meaningless). */
static int row_absmax(float *out, const float *w, size_t cols, size_t first)
{
	float m = 0.0f;
	for (size_t c = 0; c < cols; c++) {
		if (!isfinite(w[c]))
			return nf_error_set(NF_EINPUT, "fp8: weight element %zu is %s", first + c,
					    isnan(w[c]) ? "NaN" : "infinite");
		float a = fabsf(w[c]);
		if (a > m)
			m = a;
	}
	*out = m;
	return 0;
}

int nf_quant_fp8_rows(uint8_t *f8, float *scales, const float *w, size_t rows, size_t cols)
{
	for (size_t r = 0; r < rows; r++) {
		const float *row = w + r * cols;
		float m = 0.0f;
		int rc = row_absmax(&m, row, cols, r * cols);
		if (rc < 0)
			return rc;
		float s = m / 448.0f;
		scales[r] = s;
		/* a division, not a product with 1 / s: that reciprocal overflows
		 * for a row of subnormals.  The row's largest element maps to 448
		 * (or a rounding away, which saturates); a zero row (or one so
		 * small that s underflows) stays all zero codes */
		for (size_t c = 0; c < cols; c++)
			f8[r * cols + c] = s > 0.0f ? nf_fp8_e4m3_from_f32(row[c] / s) : 0;
	}
	return 0;
}
