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

#include "engine/kmath/dequant.h"

#include "util/error.h"
#include "util/banned.h"

/* The conversions are engine/kmath/dequant.h's, shared with the CUDA kernels. */
float nf_fp8_e4m3_to_f32(uint8_t code) { return nf_km_e4m3_to_f32(code); }

uint8_t nf_fp8_e4m3_from_f32(float x) { return nf_km_e4m3_from_f32(x); }

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

/* A weight's code: v (the weight over its row's scale) to the nearest
 * e4m3 value that is zero or normal.  Below 2^-6 the format's subnormals
 * k * 2^-9 are left out: under 2^-7 a weight becomes zero (its sign kept),
 * from 2^-7 to 2^-6 it becomes +-2^-6.  They are weights under 2^-6 / 448
 * of the row's largest, where this adds at most 2^-7 (a quarter of the
 * step between codes around 2^-4) to the error; in exchange every code
 * widens to a normal float32 by moving its bits (gemm_f8.c), which a
 * subnormal would make a float denormal, many times slower to multiply on
 * Intel cores.  The codes are still e4m3 and mean the same everywhere. */
static uint8_t weight_code(float v)
{
	uint8_t code = nf_fp8_e4m3_from_f32(v), sign = code & 0x80;
	if ((code & 0x78) || !(code & 0x07)) /* a normal exponent, or zero */
		return code;
	return fabsf(v) < 0x1p-7f ? sign : (uint8_t)(sign | 0x08);
}

int nf_fp8_codes_normal(const uint8_t *codes, size_t n)
{
	unsigned subnormal = 0;
	for (size_t i = 0; i < n; i++) /* no branch: the compiler vectorizes it */
		subnormal |= !(codes[i] & 0x78) & !!(codes[i] & 0x07);
	return !subnormal;
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
			f8[r * cols + c] = s > 0.0f ? weight_code(row[c] / s) : 0;
	}
	return 0;
}
