/*
 * quant.h - weight quantization for the engine builder and the int8 kernels.
 *
 * int8 weight-only (NF_PREC_INT8_WO): each output row r of a (rows, cols)
 * matrix gets one float scale s[r] = max|W[r,:]| / 127 and int8 values
 * q[r,c] = round(W[r,c] / s[r]) in [-127, 127]; W ~= s[r] * q[r,c].
 * Activations are quantized on the fly per vector the same way (symmetric,
 * one scale per vector) so the kernels can use integer dot products.
 *
 * The other kinds (nf_quant_kind) have their quantizers in quant_*.c.
 */
#ifndef NF_ENGINE_QUANT_H
#define NF_ENGINE_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* How a weight matrix is stored (docs/quantization.md has each packing). */
typedef enum nf_quant_kind {
	NF_QUANT_NONE,       /* float32 */
	NF_QUANT_INT8_ROW,   /* int8, per-output-channel scale */
	NF_QUANT_INT4_GROUP, /* int4 in groups of 32/64/128 columns, IEEE-half scale and min each */
	NF_QUANT_FP8_E4M3,   /* fp8 e4m3 codes, per-output-channel scale */
	NF_QUANT_F16,        /* IEEE binary16 */
	NF_QUANT_BF16,       /* bfloat16 */
	NF_QUANT_KIND_COUNT
} nf_quant_kind;

/* x rounded to the nearest integer, ties to even, for |x| < 2^22: adding
 * and removing 1.5 * 2^23 leaves no fraction bits, in the default rounding
 * mode.  The same as nearbyintf there, without a libm call per weight
 * (x86-64's baseline has no SSE4.1 round instruction); C does not
 * reassociate floats, so the sum is not folded away. */
static inline float nf_round_even(float x)
{
	const float magic = 12582912.0f;
	return (x + magic) - magic;
}

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

/* f16 / bf16 (kind NF_QUANT_F16 or NF_QUANT_BF16): h[i] = the half of w[i],
 * rounded to nearest even (quant_half.c).  NF_EINPUT, naming the element's
 * index, for a NaN or infinite w[i] or one that rounds past the format's
 * largest finite value (fp16: 65504); h is then partly written. */
int nf_quant_h16(uint16_t *h, const float *w, size_t n, nf_quant_kind kind);

/* int4 groups (quant_int4.c): rows of cols floats into q4 (rows *
 * nf_quant_int4_row_bytes(cols) bytes) and gsm (rows * groups * 2 halves),
 * groups of `group` columns (32, 64 or 128; the last group of a row may be
 * shorter).  Asymmetric: w ~= scale * q + min, q in
 * [0, 15]; per group the scale and min with the least squared error
 * among a few candidates, as stored in half.  NF_EINPUT for a bad group or
 * cols, or a weight that is not finite or beyond +-65504 (the message
 * names its index). */
int nf_quant_int4_rows(uint8_t *q4, uint16_t *gsm, const float *w, size_t rows, size_t cols,
		       int group);
/* nf_quant_int4_rows with its search on SSE2 (avx 0) or AVX (avx 1, the
 * CPU must have AVX2) and its half rounding in software (f16c 0) or F16C
 * (1, the CPU must have it): every choice gives the same bytes (the tests
 * hold them to it); nf_quant_int4_rows takes the fastest. */
int nf_quant_int4_rows_on(uint8_t *q4, uint16_t *gsm, const float *w, size_t rows, size_t cols,
			  int group, int avx, int f16c);
/* Groups per row of cols columns. */
size_t nf_quant_int4_groups(size_t cols, int group);
/* Bytes of a packed row of cols columns: 16 a block of 32, the last block
 * zero-padded when cols is not a multiple of 32 (its padding meets zero
 * activations in the kernels, which read whole blocks). */
static inline size_t nf_quant_int4_row_bytes(size_t cols) { return (cols + 31) / 32 * 16; }
/* The columns the kernels run over: cols rounded up to whole blocks. */
static inline size_t nf_quant_int4_padded_cols(size_t cols) { return (cols + 31) / 32 * 32; }
/* out[c] = row r of an int4 matrix, dequantized. */
void nf_quant_int4_dequant_row(float *out, const uint8_t *q4, const uint16_t *gsm, size_t r,
			       size_t cols, int group);
/* A GGUF Q4_0 or Q4_1 tensor (ggml_type NF_GGML_Q4_0 / NF_GGML_Q4_1; rows
 * of cols elements, cols a multiple of 32, blocks as the file holds them)
 * into int4 groups of 32 without a round trip through float: the nibbles
 * are copied, scale = d and min = -8 d (Q4_0) or m (Q4_1), so that
 * nf_quant_int4_dequant_row equals ggml's dequantization of every block
 * (ggml_types.c).  NF_EUNSUPPORTED for another type or a Q4_0 scale whose
 * -8 d is beyond half range; NF_EINPUT for a non-finite scale or min. */
int nf_quant_int4_from_gguf(uint8_t *q4, uint16_t *gsm, const void *blocks, int ggml_type,
			    size_t rows, size_t cols);

/* fp8 e4m3 (quant_fp8.c): per-row scale max|W[r,:]| / 448, codes the
 * nearest e4m3 of W / scale (ties to even) that is zero or normal (no
 * subnormal code: see quant_fp8.c) into f8 (rows * cols bytes) and scales
 * (rows floats), both caller-owned.  NF_EINPUT, naming the element, for a
 * NaN or infinite weight. */
int nf_quant_fp8_rows(uint8_t *f8, float *scales, const float *w, size_t rows, size_t cols);
/* 1 when none of the n codes is subnormal (every one zero, normal or NaN):
 * what nf_quant_fp8_rows writes, and what lets the SIMD kernels widen a
 * code by moving its bits (nf_bk_matrix.f8_normal). */
int nf_fp8_codes_normal(const uint8_t *codes, size_t n);
float nf_fp8_e4m3_to_f32(uint8_t code);   /* exact; the NaN codes 0x7f, 0xff give NaN */
/* Nearest, ties to even, saturating at +-448 (infinities too); NaN gives
 * 0x7f | its sign. */
uint8_t nf_fp8_e4m3_from_f32(float x);
float nf_fp8_e4m3_round(float x);          /* nf_fp8_e4m3_to_f32(nf_fp8_e4m3_from_f32(x)) */

#endif
