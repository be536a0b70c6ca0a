/*
 * half.h - IEEE binary16 and bfloat16 to and from float32 (engine/half.c's
 * nf_f16_to_f32 and friends are these): widening is exact, narrowing rounds
 * to nearest even, NaN and infinity are kept.
 */
#ifndef NF_KMATH_HALF_H
#define NF_KMATH_HALF_H

#include "engine/kmath/kmath.h"

NF_KM float nf_km_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
	if (exp == 0x1f) /* inf or NaN */
		return nf_km_bits_f32(sign | 0x7f800000u | (man << 13));
	if (exp == 0) /* zero or subnormal: man * 2^-24, exact in float */
		return nf_km_bits_f32(sign | nf_km_f32_bits((float)man * 5.9604644775390625e-8f));
	return nf_km_bits_f32(sign | ((exp + 127 - 15) << 23) | (man << 13));
}

/* A float that is zero or subnormal in f16: its magnitude's bits (man with
 * the implicit bit, exponent e <= 0 rebiased) shifted right, ties to even. */
NF_KM uint16_t nf_km_f16_subnormal(uint16_t sign, int e, uint32_t man)
{
	if (e < -10)
		return sign;
	man |= 0x800000u; /* implicit bit */
	uint32_t shift = (uint32_t)(14 - e);
	uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
	if (rem > mid || (rem == mid && (half & 1)))
		half++;
	return (uint16_t)(sign | half);
}

NF_KM uint16_t nf_km_f32_to_f16(float f)
{
	uint32_t u = nf_km_f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t exp = (u >> 23) & 0xffu, man = u & 0x7fffffu;
	if (exp == 0xff) /* inf or NaN (keep a quiet NaN bit) */
		return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
	int e = (int)exp - 127 + 15;
	if (e >= 0x1f) /* overflow to infinity */
		return (uint16_t)(sign | 0x7c00u);
	if (e <= 0)
		return nf_km_f16_subnormal(sign, e, man);
	uint32_t half = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (half & 1)))
		half++; /* may carry into the exponent, up to infinity: correct */
	return (uint16_t)(sign | half);
}

NF_KM float nf_km_bf16_to_f32(uint16_t h) { return nf_km_bits_f32((uint32_t)h << 16); }

NF_KM uint16_t nf_km_f32_to_bf16(float f)
{
	uint32_t u = nf_km_f32_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a quiet NaN */
		return (uint16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

#endif
