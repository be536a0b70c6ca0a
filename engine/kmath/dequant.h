/*
 * dequant.h - one weight (or cache element) of each stored format as a
 * float, and the per-element quantizers the kernels need on the device: the
 * packings are docs/quantization.md's (engine/wformat.h's table), and the
 * CPU's quant_fp8.c and quant_int4.c are these functions.
 */
#ifndef NF_KMATH_DEQUANT_H
#define NF_KMATH_DEQUANT_H

#include "engine/kmath/half.h"

/* ---- int8 per row (NF_QUANT_INT8_ROW) and int8 vectors ---- */

/* w = scale * q. */
NF_KM float nf_km_q8_dequant(int8_t q, float scale) { return nf_km_mul(scale, (float)q); }

/* x times 1/scale (inv; 0 for a zero vector), rounded ties to even and
 * clamped to [-127, 127]: engine/quant.c's quant_row, one element. */
NF_KM int8_t nf_km_q8_quantize(float x, float inv)
{
	float v = nf_km_round_even(nf_km_mul(x, inv));
	if (v > 127.0f)
		v = 127.0f;
	if (v < -127.0f)
		v = -127.0f;
	return (int8_t)v;
}

/* The inverse scale quant_row multiplies by: 1/scale, 0 for scale 0. */
NF_KM float nf_km_q8_inv(float scale) { return scale > 0.0f ? 1.0f / scale : 0.0f; }

/* ---- int4 groups (NF_QUANT_INT4_GROUP) ---- */

#define NF_KM_Q4_BLOCK 32       /* columns per packed block */
#define NF_KM_Q4_BLOCK_BYTES 16 /* byte j: column j low nibble, column j + 16 high */

/* Byte of a packed row holding column c, and the shift of its nibble. */
NF_KM size_t nf_km_q4_byte(size_t c)
{
	return c / NF_KM_Q4_BLOCK * NF_KM_Q4_BLOCK_BYTES + c % 16;
}
NF_KM unsigned nf_km_q4_shift(size_t c) { return c % NF_KM_Q4_BLOCK >= 16 ? 4 : 0; }

/* The level q in [0, 15] of column c of a packed row. */
NF_KM unsigned nf_km_q4_level(const uint8_t *row, size_t c)
{
	return (row[nf_km_q4_byte(c)] >> nf_km_q4_shift(c)) & 0x0fu;
}

/* w = scale * q + min, the group's scale and min already widened from half
 * (two roundings, as the CPU computes it). */
NF_KM float nf_km_q4_dequant(unsigned q, float scale, float min)
{
	return nf_km_add(nf_km_mul(scale, (float)q), min);
}

/* ---- fp8 e4m3 ("E4M3FN": bias 7, no infinities, S.1111.111 NaN, max 448) ---- */

#define NF_KM_E4M3_MAX_CODE 0x7e /* 448 = 2^8 * 1.75 */
#define NF_KM_E4M3_NAN_CODE 0x7f

/* Exact: subnormals m * 2^-9, normals rebiased, the NaN codes give NaN. */
NF_KM float nf_km_e4m3_to_f32(uint8_t code)
{
	uint32_t sign = (uint32_t)(code & 0x80) << 24;
	uint32_t e = (code >> 3) & 0xfu, m = code & 7u;
	if (e == 0xf && m == 7)
		return nf_km_bits_f32(sign | 0x7fc00000u);
	if (e == 0)
		return nf_km_bits_f32(sign | nf_km_f32_bits((float)m * 0.001953125f));
	return nf_km_bits_f32(sign | (e + 120) << 23 | m << 20);
}

/* The code of a normal magnitude (bits a, 2^-6 <= |x| < 448): keep 3 of
 * float's 23 mantissa bits, rounding the 20 dropped ones to nearest even (a
 * carry lands in the exponent, as it should), then rebias the exponent. */
NF_KM uint8_t nf_km_e4m3_encode_normal(uint32_t a)
{
	uint32_t rounded = a + 0x7ffffu + ((a >> 20) & 1);
	uint32_t code = (rounded >> 20) - (120u << 3);
	return code > NF_KM_E4M3_MAX_CODE ? NF_KM_E4M3_MAX_CODE : (uint8_t)code;
}

/* Nearest, ties to even, saturating at +-448 (infinities too); NaN gives
 * 0x7f with its sign.  Below 2^-6 the grid is k * 2^-9, and k = 8 is the
 * code of 2^-6 itself, so the rounded k is the code either way. */
NF_KM uint8_t nf_km_e4m3_from_f32(float x)
{
	uint32_t bits = nf_km_f32_bits(x), a = bits & 0x7fffffffu;
	uint8_t sign = (uint8_t)(bits >> 24 & 0x80);
	if (a > 0x7f800000u)
		return (uint8_t)(sign | NF_KM_E4M3_NAN_CODE);
	if (a >= 0x43e00000u) /* 448 and beyond, infinity included */
		return (uint8_t)(sign | NF_KM_E4M3_MAX_CODE);
	float ax = nf_km_bits_f32(a);
	if (ax < 0.015625f)
		return (uint8_t)(sign | (uint8_t)nf_km_round_even(nf_km_mul(ax, 512.0f)));
	return (uint8_t)(sign | nf_km_e4m3_encode_normal(a));
}

#endif
