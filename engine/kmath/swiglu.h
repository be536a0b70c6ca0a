/*
 * swiglu.h - the gated activation of the feed-forward block, one element:
 * silu(g) * u = g / (1 + e^-g) * u (engine/cpu/scalar.c's nf_cpu_swiglu_ref).
 */
#ifndef NF_KMATH_SWIGLU_H
#define NF_KMATH_SWIGLU_H

#include "engine/kmath/kmath.h"

NF_KM float nf_km_swiglu(float g, float u)
{
	return nf_km_mul(g / nf_km_add(1.0f, expf(-g)), u);
}

#endif
