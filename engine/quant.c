/*
 * quant.c - int8 per-output-channel weight quantization and the matching
 * per-vector activation quantization (see quant.h).
 */
#include "engine/quant.h"

#include <math.h>

#include "util/banned.h"

static float absmax(const float *x, size_t n)
{
	float m = 0.0f;
	for (size_t i = 0; i < n; i++) {
		float a = fabsf(x[i]);
		if (a > m)
			m = a;
	}
	return m;
}

static void quant_row(int8_t *q, const float *x, size_t n, float scale)
{
	float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
	for (size_t i = 0; i < n; i++) {
		float v = nf_round_even(x[i] * inv);
		if (v > 127.0f)
			v = 127.0f;
		if (v < -127.0f)
			v = -127.0f;
		q[i] = (int8_t)v;
	}
}

void nf_quant_int8_rows(int8_t *q, float *scales, const float *w, size_t rows, size_t cols)
{
	for (size_t r = 0; r < rows; r++) {
		float s = absmax(w + r * cols, cols) / 127.0f;
		scales[r] = s;
		quant_row(q + r * cols, w + r * cols, cols, s);
	}
}

void nf_quant_int8_dequant_row(float *out, const int8_t *q, float scale, size_t cols)
{
	for (size_t c = 0; c < cols; c++)
		out[c] = scale * (float)q[c];
}

float nf_quant_int8_vec(int8_t *q, const float *x, size_t n)
{
	float s = absmax(x, n) / 127.0f;
	quant_row(q, x, n, s);
	return s;
}

void nf_quant_int8_rowsums(int32_t *rowsum, const int8_t *q, size_t rows, size_t cols)
{
	for (size_t r = 0; r < rows; r++) {
		int32_t s = 0;
		for (size_t c = 0; c < cols; c++)
			s += q[r * cols + c];
		rowsum[r] = s;
	}
}
