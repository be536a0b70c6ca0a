/*
 * awq_int4.c - the engine's int4 group quantizer as AWQ's fake quantizer
 * (awq.h nf_awq_int4_fakequant): quantize, then dequantize, exactly as the
 * engine will store the weights.  The search should measure the quantizer
 * that is used: the engine's also searches each group's scale and min, so
 * round-to-nearest misjudges which columns lose most (docs/quantization.md
 * has the comparison on stories260K).
 */
#include "engine/awq.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine/quant.h"
#include "util/checked.h"
#include "util/banned.h"

/* A block AWQ could not quantize (bad weights, no memory) reads as NaN: its
 * error is NaN, no alpha beats alpha 0, and the engine's own quantizer
 * reports the weights when it meets them. */
static void poison(float *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = NAN;
}

void nf_awq_int4_fakequant(float *out, const float *w, size_t rows, size_t cols, void *ctx)
{
	int group = *(const int *)ctx;
	size_t q4_bytes, gsm_bytes, n;
	uint8_t *q4 = NULL;
	uint16_t *gsm = NULL;
	if (!nf_size_mul(&n, rows, cols))
		return; /* a block of a matrix already in memory: cannot happen */
	if (nf_size_mul(&q4_bytes, rows, nf_quant_int4_row_bytes(cols)) &&
	    nf_size_mul3(&gsm_bytes, rows, nf_quant_int4_groups(cols, group), 2 * sizeof *gsm)) {
		q4 = malloc(q4_bytes ? q4_bytes : 1);
		gsm = malloc(gsm_bytes ? gsm_bytes : 1);
	}
	if (!q4 || !gsm || nf_quant_int4_rows(q4, gsm, w, rows, cols, group)) {
		poison(out, n);
	} else {
		for (size_t r = 0; r < rows; r++)
			nf_quant_int4_dequant_row(out + r * cols, q4, gsm, r, cols, group);
	}
	free(q4);
	free(gsm);
}
