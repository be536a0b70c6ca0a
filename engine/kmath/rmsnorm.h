/*
 * rmsnorm.h - RMSNorm's two per-element steps around the sum of squares:
 * the inverse root mean square, and the scaled, weighted element
 * (engine/cpu/scalar.c's nf_cpu_rmsnorm_ref is these).
 */
#ifndef NF_KMATH_RMSNORM_H
#define NF_KMATH_RMSNORM_H

#include "engine/kmath/kmath.h"

/* 1 / sqrt(sum_sq / n + eps). */
NF_KM float nf_km_rms_inv(float sum_sq, int n, float eps)
{
	return 1.0f / sqrtf(nf_km_add(sum_sq / (float)n, eps));
}

/* w * (inv * x): the CPU's order of the two products. */
NF_KM float nf_km_rms_apply(float x, float w, float inv) { return nf_km_mul(w, nf_km_mul(inv, x)); }

#endif
