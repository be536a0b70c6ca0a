/*
 * half.c - IEEE binary16 (f16) and bfloat16 conversions to and from float32,
 * round to nearest even, NaN and infinity preserved (see safetensors.h): the
 * shared per-element math of engine/kmath/half.h, which the CUDA kernels use too.
 */
#include "engine/safetensors.h"

#include "engine/kmath/half.h"

#include "util/banned.h"

float nf_f16_to_f32(uint16_t h) { return nf_km_f16_to_f32(h); }

uint16_t nf_f32_to_f16(float f) { return nf_km_f32_to_f16(f); }

float nf_bf16_to_f32(uint16_t h) { return nf_km_bf16_to_f32(h); }

uint16_t nf_f32_to_bf16(float f) { return nf_km_f32_to_bf16(f); }
