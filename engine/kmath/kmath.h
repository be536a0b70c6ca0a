/*
 * kmath.h - the ground every per-element math header stands on: one set of
 * `static inline` functions that both the C compiler (the CPU engine and its
 * tests) and nvcc (engine/cuda/, as __host__ __device__) compile, so that a
 * CUDA kernel adds only the thread decomposition to math the CPU tests
 * already hold.
 *
 * Exactness: the C build (-std=c11) never contracts a * b + c into a fused
 * multiply-add, nvcc does by default.  Where a result must equal the CPU's
 * bit for bit (a dequantised weight, a rotated pair), the headers round each
 * operation with nf_km_mul / nf_km_add, which are __fmul_rn / __fadd_rn on
 * the device (never fused) and plain operators on the host.
 */
#ifndef NF_KMATH_KMATH_H
#define NF_KMATH_KMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define NF_HD __host__ __device__
#else
#define NF_HD
#endif

/* Every kmath function: inlined into its caller on either side. */
#define NF_KM static inline NF_HD

NF_KM float nf_km_bits_f32(uint32_t u)
{
#ifdef __CUDA_ARCH__
	return __uint_as_float(u);
#else
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
#endif
}

NF_KM uint32_t nf_km_f32_bits(float f)
{
#ifdef __CUDA_ARCH__
	return __float_as_uint(f);
#else
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
#endif
}

/* a * b and a + b, each rounded once (never fused into an FMA). */
NF_KM float nf_km_mul(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fmul_rn(a, b);
#else
	return a * b;
#endif
}

NF_KM float nf_km_add(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fadd_rn(a, b);
#else
	return a + b;
#endif
}

NF_KM float nf_km_sub(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fsub_rn(a, b);
#else
	return a - b;
#endif
}

/* x rounded to the nearest integer, ties to even, for |x| < 2^22 (quant.h's
 * nf_round_even: adding and removing 1.5 * 2^23 leaves no fraction bits). */
NF_KM float nf_km_round_even(float x)
{
	const float magic = 12582912.0f;
	return nf_km_sub(nf_km_add(x, magic), magic);
}

#endif
