/*
 * quant.h - weight quantization for the engine builder and the int8 kernels.
 *
 * int8 weight-only (NF_PREC_INT8_WO): each output row r of a (rows, cols)
 * matrix gets one float scale s[r] = max|W[r,:]| / 127 and int8 values
 * q[r,c] = round(W[r,c] / s[r]) in [-127, 127]; W ~= s[r] * q[r,c].
 * Activations are quantized on the fly per vector the same way (symmetric,
 * one scale per vector) so the kernels can use integer dot products.
 *
 * Room is left for int4 groups (NF_QUANT_GROUP_INT4: per-group scales along
 * the input axis) and fp8-e4m3 (one scale per tensor): see nf_quant_kind.
 */
#ifndef NF_ENGINE_QUANT_H
#define NF_ENGINE_QUANT_H

#include <stddef.h>
#include <stdint.h>

typedef enum nf_quant_kind {
	NF_QUANT_NONE,       /* float32 */
	NF_QUANT_INT8_ROW,   /* int8, per-output-channel scale */
	NF_QUANT_INT4_GROUP, /* reserved: int4, per-(row, group) scale */
	NF_QUANT_FP8_E4M3,   /* reserved: fp8, per-tensor scale */
} nf_quant_kind;

/* Quantize `rows` rows of `cols` floats (row-major) into q (rows*cols int8,
 * caller-owned) and scales (rows floats).  An all-zero row gets scale 0. */
void nf_quant_int8_rows(int8_t *q, float *scales, const float *w, size_t rows, size_t cols);

/* Dequantize one row: out[c] = scale * q[c]. */
void nf_quant_int8_dequant_row(float *out, const int8_t *q, float scale, size_t cols);

/* Quantize one activation vector of n floats to int8 q (n entries) and
 * return its scale (max|x| / 127, 0 for a zero vector). */
float nf_quant_int8_vec(int8_t *q, const float *x, size_t n);

/* rowsum[r] = sum over c of q[r, c] (what u8 x s8 dot-product kernels subtract). */
void nf_quant_int8_rowsums(int32_t *rowsum, const int8_t *q, size_t rows, size_t cols);

#endif
