/*
 * attn.cuh - what decode and prefill attention share: a query head held by
 * one warp (element lane + 32 e in slot e, head_size <= NF_CU_HEAD_MAX),
 * quantised as the CPU quantises it for an int8 cache, and the running
 * softmax-weighted sum of value rows a warp accumulates over the positions
 * it visits (engine/kmath/softmax.h's online softmax).
 */
#ifndef NF_ENGINE_CUDA_ATTN_CUH
#define NF_ENGINE_CUDA_ATTN_CUH

#include "engine/cuda/kv.cuh"
#include "engine/cuda/reduce.cuh"
#include "engine/kmath/softmax.h"

#define NF_CU_HEAD_SLOTS (NF_CU_HEAD_MAX / NF_CU_WARP)

/* A query head in a warp: the elements as the dot product takes them and
 * the factor of every score (with the row's scale): f16 the floats and
 * 1/sqrt(hs); int8 their levels and scale/sqrt(hs), as nf_cpu_attention_ref. */
struct nf_cu_attn_query {
	float q[NF_CU_HEAD_SLOTS];
	float post;
};

template <class KV>
static __device__ nf_cu_attn_query nf_cu_attn_load_query(const float *qh, int hs)
{
	nf_cu_attn_query aq;
	int lane = threadIdx.x % NF_CU_WARP;
	float scale = 1.0f / sqrtf((float)hs), absmax = 0.0f;
	for (int e = 0; e < NF_CU_HEAD_SLOTS; e++) {
		int i = lane + NF_CU_WARP * e;
		aq.q[e] = i < hs ? qh[i] : 0.0f;
		absmax = fmaxf(absmax, fabsf(aq.q[e]));
	}
	aq.post = scale;
	if (KV::QUANTISED_QUERY) {
		float s = nf_cu_warp_max(absmax) / 127.0f, inv = nf_km_q8_inv(s);
		for (int e = 0; e < NF_CU_HEAD_SLOTS; e++)
			aq.q[e] = (float)nf_km_q8_quantize(aq.q[e], inv);
		aq.post = s * scale;
	}
	return aq;
}

/* The score of cache row `row` (elements read through elem). */
template <class KV, class ELEM>
static __device__ float nf_cu_attn_score(const nf_cu_attn_query &aq, int hs, float row_scale,
					 ELEM elem)
{
	int lane = threadIdx.x % NF_CU_WARP;
	float dot = 0.0f;
	for (int e = 0; e < NF_CU_HEAD_SLOTS; e++) {
		int i = lane + NF_CU_WARP * e;
		if (i < hs)
			dot += aq.q[e] * elem(i);
	}
	return nf_cu_warp_sum(dot) * (row_scale * aq.post);
}

/* A warp's softmax state and its lanes' share of the weighted value sum. */
struct nf_cu_attn_acc {
	nf_km_softmax st;
	float o[NF_CU_HEAD_SLOTS];
};

static __device__ nf_cu_attn_acc nf_cu_attn_acc_empty(void)
{
	nf_cu_attn_acc a;
	a.st = nf_km_softmax_empty();
	for (int e = 0; e < NF_CU_HEAD_SLOTS; e++)
		a.o[e] = 0.0f;
	return a;
}

/* Absorb one position: its score, and its value row's scale and elements. */
template <class ELEM>
static __device__ void nf_cu_attn_push(nf_cu_attn_acc *a, float score, float v_scale, int hs,
				       ELEM elem)
{
	int lane = threadIdx.x % NF_CU_WARP;
	float old_w, x_w;
	nf_km_softmax_push(&a->st, score, &old_w, &x_w);
	float w = x_w * v_scale;
	for (int e = 0; e < NF_CU_HEAD_SLOTS; e++) {
		int i = lane + NF_CU_WARP * e;
		a->o[e] = a->o[e] * old_w + (i < hs ? w * elem(i) : 0.0f);
	}
}

#endif
