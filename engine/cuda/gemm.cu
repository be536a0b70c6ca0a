/*
 * gemm.cu - the prefill matrix product of every weight format, tiled:
 * a block computes 64 outputs x TB tokens, 4 x TB/16 per thread, stepping
 * through the columns 32 at a time; each stage dequantises a 64 x 32 weight
 * tile once into shared memory (wformat.cuh's element reader, the row
 * factor applied at the end) beside the 32 x TB activation tile, so every
 * weight is decoded once per TB tokens.  Two tile shapes, the tactics'
 * candidates (launch.h's nf_cu_variant): nf_cu_gemm_<fmt> (TB 64) and
 * nf_cu_gemm_n16_<fmt> (TB 16: a short run - a verifier's drafts, a
 * prompt's tail - without computing 48 padded tokens per tile).
 * Launch: nf_cu_launch_gemm, nf_cu_launch_gemm_n16.
 */
#include "engine/cuda/wformat.cuh"

#define GEMM_T NF_CU_GEMM_TILE
#define GEMM_K NF_CU_GEMM_K
#define GEMM_PER (GEMM_T / 16) /* outputs per thread along the rows: 4 */

/* Stage the weight tile (rows r0.., columns k0..) and activation tile
 * (tokens b0..) into shared memory as floats, zeros outside the matrix. */
template <class F, int TB>
static __device__ void gemm_stage(float (*ws)[GEMM_T + 1], float (*xs)[TB + 1],
				  const nf_cu_wmat &w, const float *x, size_t ldx, int n, int r0,
				  int b0, int k0)
{
	for (int e = threadIdx.x; e < GEMM_T * GEMM_K; e += NF_CU_BLOCK) {
		int i = e / GEMM_K, k = e % GEMM_K, c = k0 + k, r = r0 + i;
		ws[k][i] = r < w.rows && c < w.cols ? F::at(w, r, c) : 0.0f;
	}
	for (int e = threadIdx.x; e < TB * GEMM_K; e += NF_CU_BLOCK) {
		int i = e / GEMM_K, k = e % GEMM_K, c = k0 + k, b = b0 + i;
		xs[k][i] = b < n && c < w.cols ? x[(size_t)b * ldx + c] : 0.0f;
	}
}

template <class F, int TB>
static __device__ void gemm(float *y, size_t ldy, const nf_cu_wmat &w, const float *x, size_t ldx,
			    int n, int accumulate)
{
	constexpr int PB = TB / 16; /* tokens per thread */
	__shared__ float ws[GEMM_K][GEMM_T + 1], xs[GEMM_K][TB + 1];
	int r0 = blockIdx.x * GEMM_T, b0 = blockIdx.y * TB;
	int tr = threadIdx.x % 16, tb = threadIdx.x / 16; /* this thread's 4 x PB */
	float acc[GEMM_PER][PB] = {};
	for (int k0 = 0; k0 < w.cols; k0 += GEMM_K) {
		__syncthreads();
		gemm_stage<F, TB>(ws, xs, w, x, ldx, n, r0, b0, k0);
		__syncthreads();
		for (int k = 0; k < GEMM_K; k++)
			for (int i = 0; i < GEMM_PER; i++)
				for (int j = 0; j < PB; j++)
					acc[i][j] += ws[k][tr + 16 * i] * xs[k][tb + 16 * j];
	}
	for (int i = 0; i < GEMM_PER; i++) {
		int r = r0 + tr + 16 * i;
		if (r >= w.rows)
			continue;
		float post = F::post(w, r);
		for (int j = 0; j < PB; j++) {
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
		gemm<nf_cu_fmt_##fmt, NF_CU_GEMM_TILE>(y, ldy, w, x, ldx, n, accumulate);   \
	}                                                                                  \
	extern "C" __global__ void __launch_bounds__(NF_CU_BLOCK)                              \
	nf_cu_gemm_n16_##fmt(float *y, size_t ldy, nf_cu_wmat w, const float *x,           \
			     size_t ldx, int n, int accumulate)                            \
	{                                                                                  \
		gemm<nf_cu_fmt_##fmt, NF_CU_GEMM_SHORT>(y, ldy, w, x, ldx, n, accumulate);  \
	}

GEMM_KERNEL(f32)
GEMM_KERNEL(f16)
GEMM_KERNEL(bf16)
GEMM_KERNEL(q8)
GEMM_KERNEL(q4)
#if NF_CU_HAS_FP8 /* sm_89 and newer (launch.h) */
GEMM_KERNEL(f8)
#endif
