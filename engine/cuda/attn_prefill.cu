/*
 * attn_prefill.cu - causal, grouped-query attention of a chunk of new
 * tokens over the cache (their own rows already appended): a block per
 * (four query tokens, query head), a warp per token; the cache goes through
 * shared memory a tile of NF_CU_ATTN_TILE positions at a time (elements as
 * kv.cuh reads them, and each row's scale), every warp folding the
 * positions up to its own into an online softmax.  Launch:
 * nf_cu_launch_attn_prefill.
 */
#include "engine/cuda/attn.cuh"

#define TILE NF_CU_ATTN_TILE

struct prefill_tile {
	float k[TILE][NF_CU_HEAD_MAX + 1]; /* +1: lanes of a row hit distinct banks */
	float v[TILE][NF_CU_HEAD_MAX];
	float ks[TILE], vs[TILE];
};

/* Positions t0 .. t0 + TILE - 1 (those up to `last`) of KV head rows k, v. */
template <class KV>
static __device__ void prefill_load_tile(prefill_tile *tl, const char *k, const char *v, int t0,
					 int last, int hs)
{
	size_t rb = KV::row_bytes(hs);
	for (int e = threadIdx.x; e < TILE * hs; e += NF_CU_ATTN_WARPS * NF_CU_WARP) {
		int t = e / hs, i = e % hs;
		if (t0 + t > last)
			break;
		const char *kr = k + (size_t)(t0 + t) * rb, *vr = v + (size_t)(t0 + t) * rb;
		tl->k[t][i] = KV::elem(kr, i);
		tl->v[t][i] = KV::elem(vr, i);
		if (i == 0) {
			tl->ks[t] = KV::scale(kr);
			tl->vs[t] = KV::scale(vr);
		}
	}
}

template <class KV>
static __device__ void attn_prefill(float *out, const float *q, size_t ld, const char *kc,
				    const char *vc, int pos0, int n, int n_heads, int n_kv_heads,
				    int hs, size_t head_stride)
{
	__shared__ prefill_tile tl;
	int h = blockIdx.y, warp = threadIdx.x / NF_CU_WARP, lane = threadIdx.x % NF_CU_WARP;
	int b = blockIdx.x * NF_CU_ATTN_WARPS + warp, p = pos0 + b;
	int last = pos0 + min(n, (int)(blockIdx.x + 1) * NF_CU_ATTN_WARPS) - 1;
	const char *k = kc + (size_t)(h / (n_heads / n_kv_heads)) * head_stride;
	const char *v = vc + (size_t)(h / (n_heads / n_kv_heads)) * head_stride;
	nf_cu_attn_query aq = nf_cu_attn_load_query<KV>(q + (size_t)min(b, n - 1) * ld + (size_t)h * hs, hs);
	nf_cu_attn_acc acc = nf_cu_attn_acc_empty();
	for (int t0 = 0; t0 <= last; t0 += TILE) {
		__syncthreads();
		prefill_load_tile<KV>(&tl, k, v, t0, last, hs);
		__syncthreads();
		for (int t = 0; t < TILE && t0 + t <= p && b < n; t++) {
			float score = nf_cu_attn_score<KV>(aq, hs, tl.ks[t],
							   [&](int i) { return tl.k[t][i]; });
			nf_cu_attn_push(&acc, score, tl.vs[t], hs, [&](int i) { return tl.v[t][i]; });
		}
	}
	if (b >= n)
		return;
	float norm = nf_km_softmax_norm(acc.st);
	for (int e = 0; e < NF_CU_HEAD_SLOTS; e++) {
		int i = lane + NF_CU_WARP * e;
		if (i < hs)
			out[(size_t)b * ld + (size_t)h * hs + i] = acc.o[e] * norm;
	}
}

#define ATTN_PREFILL_KERNEL(kind)                                                          \
	extern "C" __global__ void __launch_bounds__(NF_CU_ATTN_WARPS * NF_CU_WARP)            \
	nf_cu_attn_prefill_##kind(float *out, const float *q, size_t ld, const char *kc,    \
				  const char *vc, int pos0, int n, int n_heads,             \
				  int n_kv_heads, int head_size, size_t head_stride)        \
	{                                                                                  \
		attn_prefill<nf_cu_kv_##kind>(out, q, ld, kc, vc, pos0, n, n_heads,         \
					      n_kv_heads, head_size, head_stride);         \
	}

ATTN_PREFILL_KERNEL(f16)
ATTN_PREFILL_KERNEL(int8)
