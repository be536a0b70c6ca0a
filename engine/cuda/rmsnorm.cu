/*
 * rmsnorm.cu - RMSNorm of each row: a block per row sums the squares, then
 * scales every element (engine/kmath/rmsnorm.h).  Launch: nf_cu_launch_rows.
 */
#include "engine/cuda/reduce.cuh"
#include "engine/kmath/rmsnorm.h"

extern "C" __global__ void __launch_bounds__(NF_CU_BLOCK)
nf_cu_rmsnorm(float *out, const float *x, const float *w, int dim, float eps, size_t ld)
{
	const float *xr = x + (size_t)blockIdx.x * ld;
	float *outr = out + (size_t)blockIdx.x * ld;
	float ss = 0.0f;
	for (int i = threadIdx.x; i < dim; i += NF_CU_BLOCK)
		ss += xr[i] * xr[i];
	float inv = nf_km_rms_inv(nf_cu_block_sum(ss), dim, eps);
	for (int i = threadIdx.x; i < dim; i += NF_CU_BLOCK)
		outr[i] = nf_km_rms_apply(xr[i], w[i], inv);
}
