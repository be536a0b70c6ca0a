/*
 * reduce.cuh - warp and block reductions the kernels share (sum, maximum,
 * and the best (value, index) pair in engine/kmath/sampling.h's ranking).
 */
#ifndef NF_ENGINE_CUDA_REDUCE_CUH
#define NF_ENGINE_CUDA_REDUCE_CUH

#include "engine/cuda/launch.h"
#include "engine/kmath/sampling.h"

#define NF_CU_FULL_MASK 0xffffffffu

static __device__ __forceinline__ float nf_cu_warp_sum(float v)
{
	for (int o = NF_CU_WARP / 2; o > 0; o /= 2)
		v += __shfl_xor_sync(NF_CU_FULL_MASK, v, o);
	return v;
}

static __device__ __forceinline__ float nf_cu_warp_max(float v)
{
	for (int o = NF_CU_WARP / 2; o > 0; o /= 2)
		v = fmaxf(v, __shfl_xor_sync(NF_CU_FULL_MASK, v, o));
	return v;
}

/* The sum (MAX: the maximum) over a block of THREADS threads, returned to
 * every thread. */
template <int THREADS, bool MAX> static __device__ float nf_cu_block_reduce(float v)
{
	__shared__ float part[THREADS / NF_CU_WARP];
	int lane = threadIdx.x % NF_CU_WARP, warp = threadIdx.x / NF_CU_WARP;
	v = MAX ? nf_cu_warp_max(v) : nf_cu_warp_sum(v);
	__syncthreads(); /* part may still be read by a previous call */
	if (lane == 0)
		part[warp] = v;
	__syncthreads();
	v = lane < THREADS / NF_CU_WARP ? part[lane] : (MAX ? -INFINITY : 0.0f);
	return MAX ? nf_cu_warp_max(v) : nf_cu_warp_sum(v);
}

static __device__ float nf_cu_block_sum(float v) { return nf_cu_block_reduce<NF_CU_BLOCK, false>(v); }

/* The best (value, index) over a warp (every lane gets it). */
static __device__ __forceinline__ void nf_cu_warp_best(float *v, int *i)
{
	for (int o = NF_CU_WARP / 2; o > 0; o /= 2) {
		float ov = __shfl_xor_sync(NF_CU_FULL_MASK, *v, o);
		int oi = __shfl_xor_sync(NF_CU_FULL_MASK, *i, o);
		/* index -1: no candidate, never ranked before one */
		if (oi >= 0 && (*i < 0 || nf_km_ranks_before(ov, oi, *v, *i))) {
			*v = ov;
			*i = oi;
		}
	}
}

/* The best (value, index) over a block of NF_CU_BLOCK threads (every thread
 * gets it); index -1 with value -inf when no thread had a candidate. */
static __device__ void nf_cu_block_best(float *v, int *i)
{
	__shared__ float pv[NF_CU_BLOCK / NF_CU_WARP];
	__shared__ int pi[NF_CU_BLOCK / NF_CU_WARP];
	int lane = threadIdx.x % NF_CU_WARP, warp = threadIdx.x / NF_CU_WARP;
	nf_cu_warp_best(v, i);
	__syncthreads();
	if (lane == 0) {
		pv[warp] = *v;
		pi[warp] = *i;
	}
	__syncthreads();
	*v = lane < NF_CU_BLOCK / NF_CU_WARP ? pv[lane] : -INFINITY;
	*i = lane < NF_CU_BLOCK / NF_CU_WARP ? pi[lane] : -1;
	nf_cu_warp_best(v, i);
}

#endif
