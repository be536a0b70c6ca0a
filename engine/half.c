/*
 * half.c - IEEE binary16 (f16) and bfloat16 conversions to and from float32,
 * round to nearest even, NaN and infinity preserved (see safetensors.h).
 */
#include "engine/safetensors.h"

#include <string.h>

#include "util/banned.h"

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

float nf_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;

	if (exp == 0x1f) /* inf or NaN */
		return bits_f32(sign | 0x7f800000u | (man << 13));
	if (exp == 0) {
		if (man == 0)
			return bits_f32(sign);
		/* subnormal: normalise */
		exp = 1;
		while (!(man & 0x400u)) {
			man <<= 1;
			exp--;
		}
		man &= 0x3ffu;
		return bits_f32(sign | ((exp + 127 - 15) << 23) | (man << 13));
	}
	return bits_f32(sign | ((exp + 127 - 15) << 23) | (man << 13));
}

uint16_t nf_f32_to_f16(float f)
{
	uint32_t u = f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t exp = (u >> 23) & 0xffu;
	uint32_t man = u & 0x7fffffu;

	if (exp == 0xff) /* inf or NaN (keep a quiet NaN bit) */
		return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
	int e = (int)exp - 127 + 15;
	if (e >= 0x1f) /* overflow to infinity */
		return (uint16_t)(sign | 0x7c00u);
	if (e <= 0) {
		/* subnormal or zero in f16 */
		if (e < -10)
			return sign;
		man |= 0x800000u; /* implicit bit */
		uint32_t shift = (uint32_t)(14 - e);
		uint32_t half = man >> shift;
		uint32_t rem = man & ((1u << shift) - 1);
		uint32_t mid = 1u << (shift - 1);
		if (rem > mid || (rem == mid && (half & 1)))
			half++;
		return (uint16_t)(sign | half);
	}
	uint32_t half = ((uint32_t)e << 10) | (man >> 13);
	uint32_t rem = man & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (half & 1)))
		half++; /* may carry into the exponent, up to infinity: correct */
	return (uint16_t)(sign | half);
}

float nf_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t nf_f32_to_bf16(float f)
{
	uint32_t u = f32_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a quiet NaN */
		return (uint16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}
