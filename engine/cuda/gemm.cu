/*
 * gemm.cu - the prefill matrix product of every weight format, tiled:
 * a block computes 64 outputs x 64 tokens, 4 x 4 per thread, stepping
 * through the columns 32 at a time; each stage dequantises a 64 x 32 weight
 * tile once into shared memory (wformat.cuh's element reader, the row
 * factor applied at the end) beside the 32 x 64 activation tile, so every
 * weight is decoded once per 64 tokens.  Launch: nf_cu_launch_gemm.
 */
#include "engine/cuda/wformat.cuh"

#define GEMM_T NF_CU_GEMM_TILE
#define GEMM_K NF_CU_GEMM_K
#define GEMM_PER (GEMM_T / 16) /* outputs per thread along each side: 4 */

/* Stage the weight tile (rows r0.., columns k0..) and activation tile
 * (tokens b0..) into shared memory as floats, zeros outside the matrix. */
template <class F>
static __device__ void gemm_stage(float (*ws)[GEMM_T + 1], float (*xs)[GEMM_T + 1],
				  const nf_cu_wmat &w, const float *x, size_t ldx, int n, int r0,
				  int b0, int k0)
{
	for (int e = threadIdx.x; e < GEMM_T * GEMM_K; e += NF_CU_BLOCK) {
		int i = e / GEMM_K, k = e % GEMM_K, c = k0 + k;
		int r = r0 + i, b = b0 + i;
		ws[k][i] = r < w.rows && c < w.cols ? F::at(w, r, c) : 0.0f;
		xs[k][i] = b < n && c < w.cols ? x[(size_t)b * ldx + c] : 0.0f;
	}
}

template <class F>
static __device__ void gemm(float *y, size_t ldy, const nf_cu_wmat &w, const float *x, size_t ldx,
			    int n, int accumulate)
{
	__shared__ float ws[GEMM_K][GEMM_T + 1], xs[GEMM_K][GEMM_T + 1];
	int r0 = blockIdx.x * GEMM_T, b0 = blockIdx.y * GEMM_T;
	int tr = threadIdx.x % 16, tb = threadIdx.x / 16; /* this thread's 4 x 4 */
	float acc[GEMM_PER][GEMM_PER] = {};
	for (int k0 = 0; k0 < w.cols; k0 += GEMM_K) {
		__syncthreads();
		gemm_stage<F>(ws, xs, w, x, ldx, n, r0, b0, k0);
		__syncthreads();
		for (int k = 0; k < GEMM_K; k++)
			for (int i = 0; i < GEMM_PER; i++)
				for (int j = 0; j < GEMM_PER; j++)
					acc[i][j] += ws[k][tr + 16 * i] * xs[k][tb + 16 * j];
	}
	for (int i = 0; i < GEMM_PER; i++) {
		int r = r0 + tr + 16 * i;
		if (r >= w.rows)
			continue;
		float post = F::post(w, r);
		for (int j = 0; j < GEMM_PER; j++) {
			int b = b0 + tb + 16 * j;
			if (b >= n)
				continue;
			float *out = y + (size_t)b * ldy + r;
			*out = accumulate ? *out + acc[i][j] * post : acc[i][j] * post;
		}
	}
}

#define GEMM_KERNEL(fmt)                                                                   \
	extern "C" __global__ void __launch_bounds__(NF_CU_BLOCK)                              \
	nf_cu_gemm_##fmt(float *y, size_t ldy, nf_cu_wmat w, const float *x, size_t ldx,   \
			 int n, int accumulate)                                            \
	{                                                                                  \
		gemm<nf_cu_fmt_##fmt>(y, ldy, w, x, ldx, n, accumulate);                    \
	}

GEMM_KERNEL(f32)
GEMM_KERNEL(f16)
GEMM_KERNEL(bf16)
GEMM_KERNEL(q8)
GEMM_KERNEL(q4)
#if NF_CU_HAS_FP8 /* sm_89 and newer (launch.h) */
GEMM_KERNEL(f8)
#endif
