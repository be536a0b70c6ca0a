/*
 * gemv.cu - the decode matrix-vector product of every weight format: one
 * warp per output row streams the row in 16-byte chunks (each lane a chunk
 * at a time, the warp a contiguous 512 bytes), decodes them with
 * wformat.cuh and dots them with the activation; a row whose chunks would
 * be misaligned (cols not a multiple of the chunk) and the columns past the
 * last whole chunk go element by element.  Launch: nf_cu_launch_gemv.
 */
#include "engine/cuda/reduce.cuh"
#include "engine/cuda/wformat.cuh"

/* Whole chunks of a row the warp can stream (int4 rows are always whole
 * blocks of 16 bytes; the other formats only when every row starts aligned). */
template <class F> static __device__ int gemv_stream_chunks(const nf_cu_wmat &w)
{
	if (F::VEC == 32)
		return w.cols / 32;
	return w.cols % F::VEC == 0 ? w.cols / F::VEC : 0;
}

template <class F> static __device__ float gemv_row_dot(const nf_cu_wmat &w, int r, const float *x)
{
	int lane = threadIdx.x % NF_CU_WARP, chunks = gemv_stream_chunks<F>(w);
	float sum = 0.0f;
	for (int k = lane; k < chunks; k += NF_CU_WARP) {
		float wv[F::VEC];
		F::chunk(w, r, k, wv);
		const float4 *xv = (const float4 *)(x + (size_t)k * F::VEC);
		for (int i = 0; i < F::VEC / 4; i++) {
			float4 a = xv[i];
			sum += wv[4 * i] * a.x + wv[4 * i + 1] * a.y + wv[4 * i + 2] * a.z +
			       wv[4 * i + 3] * a.w;
		}
	}
	for (int c = chunks * F::VEC + lane; c < w.cols; c += NF_CU_WARP)
		sum += F::at(w, r, c) * x[c];
	return nf_cu_warp_sum(sum);
}

template <class F>
static __device__ void gemv(float *y, size_t ldy, const nf_cu_wmat &w, const float *x, size_t ldx,
			    int accumulate)
{
	int r = blockIdx.x * NF_CU_GEMV_ROWS + threadIdx.x / NF_CU_WARP, b = blockIdx.y;
	if (r >= w.rows)
		return; /* a whole warp leaves: no shuffle is left waiting */
	float s = gemv_row_dot<F>(w, r, x + (size_t)b * ldx) * F::post(w, r);
	if (threadIdx.x % NF_CU_WARP == 0) {
		float *out = y + (size_t)b * ldy + r;
		*out = accumulate ? *out + s : s;
	}
}

#define GEMV_KERNEL(fmt)                                                                   \
	extern "C" __global__ void __launch_bounds__(NF_CU_GEMV_ROWS * NF_CU_WARP)             \
	nf_cu_gemv_##fmt(float *y, size_t ldy, nf_cu_wmat w, const float *x, size_t ldx,   \
			 int n, int accumulate)                                            \
	{                                                                                  \
		gemv<nf_cu_fmt_##fmt>(y, ldy, w, x, ldx, accumulate);                       \
	}

GEMV_KERNEL(f32)
GEMV_KERNEL(f16)
GEMV_KERNEL(bf16)
GEMV_KERNEL(q8)
GEMV_KERNEL(q4)
#if NF_CU_HAS_FP8 /* sm_89 and newer (launch.h) */
GEMV_KERNEL(f8)
#endif
