/*
 * round_f8.cu - activations onto the e4m3 grid for the fp8 products
 * (engine/backend.h's round_f8): out = e4m3(x * inv_scale) as a float, ties
 * to even, saturating at +-448.  Launch: nf_cu_launch_elementwise.
 */
#include "engine/cuda/launch.h"
#include "engine/kmath/dequant.h"

#if NF_CU_HAS_FP8 /* sm_89 and newer (launch.h) */
extern "C" __global__ void __launch_bounds__(NF_CU_BLOCK)
nf_cu_round_f8(float *out, const float *x, float inv_scale, size_t n)
{
	size_t i = (size_t)blockIdx.x * NF_CU_BLOCK + threadIdx.x;
	if (i < n)
		out[i] = nf_km_e4m3_to_f32(nf_km_e4m3_from_f32(nf_km_mul(x[i], inv_scale)));
}
#endif
