/*
 * gemv.cu - the decode matrix-vector product of every weight format: a
 * warp streams a row in 16-byte chunks (each lane a chunk at a time, the
 * warp a contiguous 512 bytes), decodes them with wformat.cuh and dots
 * them with the activation; a row whose chunks would be misaligned (cols
 * not a multiple of the chunk) and the columns past the last whole chunk
 * go element by element.  Three variants, the tactics' candidates
 * (launch.h's nf_cu_variant):
 *   nf_cu_gemv_<fmt>     NF_CU_GEMV_ROWS rows a block, a warp a row;
 *   nf_cu_gemv_v32_<fmt> the same with two chunks a lane loaded before
 *                        either is used (32 bytes a lane in flight: more
 *                        loads outstanding where few warps stream);
 *   nf_cu_gemv_sk_<fmt>  split-K: a row a block, its NF_CU_GEMV_SPLIT warps
 *                        each every SPLIT-th chunk, the parts added in
 *                        shared memory in a fixed order (no atomics: the
 *                        result does not depend on timing).  For the few
 *                        rows and long columns of decode's narrow matrices,
 *                        whose rows alone leave most SMs' warps idle.
 * Launch: nf_cu_launch_gemv (both), nf_cu_launch_gemv_sk.
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

/* The dot product of one decoded chunk with x at chunk k. */
template <class F> static __device__ float gemv_chunk_dot(const float *wv, const float *x, int k)
{
	const float4 *xv = (const float4 *)(x + (size_t)k * F::VEC);
	float sum = 0.0f;
	for (int i = 0; i < F::VEC / 4; i++) {
		float4 a = xv[i];
		sum += wv[4 * i] * a.x + wv[4 * i + 1] * a.y + wv[4 * i + 2] * a.z + wv[4 * i + 3] * a.w;
	}
	return sum;
}

/* Part `part` of SPLIT of row r's dot product with x: chunks part,
 * part + SPLIT, ... of each lane's stride, INFLIGHT of them loaded before
 * any is used (INFLIGHT x 16 bytes a lane in flight), summed over the warp. */
template <class F, int SPLIT, int INFLIGHT>
static __device__ float gemv_row_dot(const nf_cu_wmat &w, int r, const float *x, int part)
{
	const int step = NF_CU_WARP * SPLIT;
	int lane = threadIdx.x % NF_CU_WARP, chunks = gemv_stream_chunks<F>(w);
	int k = lane + NF_CU_WARP * part;
	float sum = 0.0f;
	for (; k + (INFLIGHT - 1) * step < chunks; k += INFLIGHT * step) {
		/* constant trip counts: nvcc unrolls them, wv stays in registers (the
		 * static checks hold it to no stack), no pragma the CPU emulation lacks */
		float wv[INFLIGHT][F::VEC];
		for (int u = 0; u < INFLIGHT; u++)
			F::chunk(w, r, k + u * step, wv[u]);
		for (int u = 0; u < INFLIGHT; u++)
			sum += gemv_chunk_dot<F>(wv[u], x, k + u * step);
	}
	for (; k < chunks; k += step) { /* the last chunks, fewer than INFLIGHT */
		float wv[F::VEC];
		F::chunk(w, r, k, wv);
		sum += gemv_chunk_dot<F>(wv, x, k);
	}
	for (int c = chunks * F::VEC + lane + NF_CU_WARP * part; c < w.cols; c += step)
		sum += F::at(w, r, c) * x[c];
	return nf_cu_warp_sum(sum);
}

/* ROWS rows a block, a warp a row, INFLIGHT chunks a lane at once. */
template <class F, int ROWS, int INFLIGHT>
static __device__ void gemv(float *y, size_t ldy, const nf_cu_wmat &w, const float *x, size_t ldx,
			    int accumulate)
{
	int r = blockIdx.x * ROWS + threadIdx.x / NF_CU_WARP, b = blockIdx.y;
	if (r >= w.rows)
		return; /* a whole warp leaves: no shuffle is left waiting */
	float s = gemv_row_dot<F, 1, INFLIGHT>(w, r, x + (size_t)b * ldx, 0) * F::post(w, r);
	if (threadIdx.x % NF_CU_WARP == 0) {
		float *out = y + (size_t)b * ldy + r;
		*out = accumulate ? *out + s : s;
	}
}

/* A row a block, SPLIT warps on it. */
template <class F, int SPLIT>
static __device__ void gemv_split(float *y, size_t ldy, const nf_cu_wmat &w, const float *x,
				  size_t ldx, int accumulate)
{
	__shared__ float part[SPLIT];
	int r = blockIdx.x, b = blockIdx.y, warp = threadIdx.x / NF_CU_WARP;
	float s = gemv_row_dot<F, SPLIT, 1>(w, r, x + (size_t)b * ldx, warp);
	if (threadIdx.x % NF_CU_WARP == 0)
		part[warp] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		float sum = 0.0f, *out = y + (size_t)b * ldy + r;
		for (int i = 0; i < SPLIT; i++)
			sum += part[i];
		sum *= F::post(w, r);
		*out = accumulate ? *out + sum : sum;
	}
}

#define GEMV_KERNEL(fmt)                                                                   \
	extern "C" __global__ void __launch_bounds__(NF_CU_GEMV_ROWS * NF_CU_WARP)             \
	nf_cu_gemv_##fmt(float *y, size_t ldy, nf_cu_wmat w, const float *x, size_t ldx,   \
			 int n, int accumulate)                                            \
	{                                                                                  \
		gemv<nf_cu_fmt_##fmt, NF_CU_GEMV_ROWS, 1>(y, ldy, w, x, ldx, accumulate);   \
	}                                                                                  \
	extern "C" __global__ void __launch_bounds__(NF_CU_GEMV_ROWS * NF_CU_WARP)             \
	nf_cu_gemv_v32_##fmt(float *y, size_t ldy, nf_cu_wmat w, const float *x,           \
			     size_t ldx, int n, int accumulate)                            \
	{                                                                                  \
		gemv<nf_cu_fmt_##fmt, NF_CU_GEMV_ROWS, 2>(y, ldy, w, x, ldx, accumulate);   \
	}                                                                                  \
	extern "C" __global__ void __launch_bounds__(NF_CU_GEMV_SPLIT * NF_CU_WARP)            \
	nf_cu_gemv_sk_##fmt(float *y, size_t ldy, nf_cu_wmat w, const float *x, size_t ldx, \
			    int n, int accumulate)                                         \
	{                                                                                  \
		gemv_split<nf_cu_fmt_##fmt, NF_CU_GEMV_SPLIT>(y, ldy, w, x, ldx, accumulate); \
	}

GEMV_KERNEL(f32)
GEMV_KERNEL(f16)
GEMV_KERNEL(bf16)
GEMV_KERNEL(q8)
GEMV_KERNEL(q4)
#if NF_CU_HAS_FP8 /* sm_89 and newer (launch.h) */
GEMV_KERNEL(f8)
#endif
