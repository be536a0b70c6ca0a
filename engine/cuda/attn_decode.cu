/*
 * attn_decode.cu - attention of one new token over the cache, split over
 * the sequence as flash-decoding does: a block per (query head, split of
 * NF_CU_DECODE_SPLIT positions), its four warps taking every fourth
 * position, each keeping an online softmax; the warps' states merge in
 * shared memory and the block writes its split's unnormalised output and
 * state; nf_cu_attn_decode_reduce then merges the splits of each head.
 * Grouped-query: head h reads KV head h / (n_heads / n_kv_heads).
 * Launch: nf_cu_launch_attn_decode, then nf_cu_launch_attn_reduce.
 */
#include "engine/cuda/attn.cuh"

/* Merge the four warps' accumulators of the block (in shared memory) and
 * write the split's output and state. */
static __device__ void decode_write_split(const nf_cu_attn_acc &acc, float *po, float *pml, int hs)
{
	__shared__ float o[NF_CU_ATTN_WARPS][NF_CU_HEAD_MAX];
	__shared__ nf_km_softmax st[NF_CU_ATTN_WARPS];
	int lane = threadIdx.x % NF_CU_WARP, warp = threadIdx.x / NF_CU_WARP;
	for (int e = 0; e < NF_CU_HEAD_SLOTS; e++)
		o[warp][lane + NF_CU_WARP * e] = acc.o[e];
	if (lane == 0)
		st[warp] = acc.st;
	__syncthreads();
	int i = threadIdx.x; /* NF_CU_HEAD_MAX threads: one element each */
	nf_km_softmax s = st[0];
	float sum = o[0][i];
	for (int w = 1; w < NF_CU_ATTN_WARPS; w++) {
		float wa, wb;
		s = nf_km_softmax_merge(s, st[w], &wa, &wb);
		sum = sum * wa + o[w][i] * wb;
	}
	if (i < hs)
		po[i] = sum;
	if (i == 0) {
		pml[0] = s.m;
		pml[1] = s.l;
	}
}

template <class KV>
static __device__ void attn_decode(float *part_o, float *part_ml, const float *q, const char *kc,
				   const char *vc, int pos, int n_heads, int n_kv_heads, int hs,
				   size_t head_stride)
{
	int h = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
	int warp = threadIdx.x / NF_CU_WARP, group = n_heads / n_kv_heads;
	size_t rb = KV::row_bytes(hs);
	const char *k = kc + (size_t)(h / group) * head_stride;
	const char *v = vc + (size_t)(h / group) * head_stride;
	nf_cu_attn_query aq = nf_cu_attn_load_query<KV>(q + (size_t)h * hs, hs);
	nf_cu_attn_acc acc = nf_cu_attn_acc_empty();
	int end = min(pos + 1, (split + 1) * NF_CU_DECODE_SPLIT);
	for (int t = split * NF_CU_DECODE_SPLIT + warp; t < end; t += NF_CU_ATTN_WARPS) {
		const char *kr = k + (size_t)t * rb, *vr = v + (size_t)t * rb;
		float score = nf_cu_attn_score<KV>(aq, hs, KV::scale(kr),
						   [&](int i) { return KV::elem(kr, i); });
		nf_cu_attn_push(&acc, score, KV::scale(vr), hs, [&](int i) { return KV::elem(vr, i); });
	}
	size_t at = (size_t)h * splits + split;
	decode_write_split(acc, part_o + at * hs, part_ml + at * 2, hs);
}

#define ATTN_DECODE_KERNEL(kind)                                                           \
	extern "C" __global__ void __launch_bounds__(NF_CU_ATTN_WARPS * NF_CU_WARP)            \
	nf_cu_attn_decode_##kind(float *part_o, float *part_ml, const float *q,            \
				 const char *kc, const char *vc, int pos, int n_heads,     \
				 int n_kv_heads, int head_size, size_t head_stride)        \
	{                                                                                  \
		attn_decode<nf_cu_kv_##kind>(part_o, part_ml, q, kc, vc, pos, n_heads,      \
					     n_kv_heads, head_size, head_stride);          \
	}

ATTN_DECODE_KERNEL(f16)
ATTN_DECODE_KERNEL(int8)

/* The final reduction: a block per head, a thread per element, merging the
 * splits' states and outputs in order, then normalising by the total. */
extern "C" __global__ void __launch_bounds__(NF_CU_HEAD_MAX)
nf_cu_attn_decode_reduce(float *out, const float *part_o, const float *part_ml, int n_heads,
			 int head_size, int splits)
{
	int h = blockIdx.x, i = threadIdx.x;
	if (i >= head_size)
		return;
	nf_km_softmax s = nf_km_softmax_empty();
	float sum = 0.0f;
	for (int sp = 0; sp < splits; sp++) {
		size_t at = (size_t)h * splits + sp;
		nf_km_softmax part = {part_ml[at * 2], part_ml[at * 2 + 1]};
		float wa, wb;
		s = nf_km_softmax_merge(s, part, &wa, &wb);
		sum = sum * wa + part_o[at * head_size + i] * wb;
	}
	out[(size_t)h * head_size + i] = sum * nf_km_softmax_norm(s);
}
