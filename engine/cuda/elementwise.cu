/*
 * elementwise.cu - the two element-wise steps of a layer: SwiGLU
 * (h1 = silu(h1) * h3, engine/kmath/swiglu.h) and the residual add
 * (y += x).  A thread per element.  Launch: nf_cu_launch_elementwise.
 */
#include "engine/cuda/launch.h"
#include "engine/kmath/swiglu.h"

extern "C" __global__ void __launch_bounds__(NF_CU_BLOCK)
nf_cu_swiglu(float *h1, const float *h3, size_t n)
{
	size_t i = (size_t)blockIdx.x * NF_CU_BLOCK + threadIdx.x;
	if (i < n)
		h1[i] = nf_km_swiglu(h1[i], h3[i]);
}

extern "C" __global__ void __launch_bounds__(NF_CU_BLOCK)
nf_cu_add(float *y, const float *x, size_t n)
{
	size_t i = (size_t)blockIdx.x * NF_CU_BLOCK + threadIdx.x;
	if (i < n)
		y[i] = nf_km_add(y[i], x[i]);
}
