/*
 * sample.cu - top-k / top-p sampling on the GPU: a block per row finds the
 * k best logits by k rounds of a block-wide best among the logits ranked
 * after the previous round's (engine/kmath/sampling.h's order: no list per
 * thread, nothing excluded to remember), then one thread turns the short
 * list into probabilities at the temperature, cuts it at top_p and draws
 * with the row's coin.  Top-p applies to the k kept (k = vocab would be the
 * CPU sampler's cut; NF_CU_TOPK_MAX bounds k).  Launch: nf_cu_launch_rows.
 */
#include "engine/cuda/reduce.cuh"

/* The best logit of row ranked after (prev_v, prev_i); index -1 when none. */
static __device__ void sample_next(float *v, int *at, const float *row, int vocab, float prev_v,
				   int prev_i)
{
	*v = -INFINITY;
	*at = -1;
	for (int i = threadIdx.x; i < vocab; i += NF_CU_BLOCK) {
		float x = row[i];
		int after = prev_i < 0 || nf_km_ranks_before(prev_v, prev_i, x, i);
		if (after && x == x && (*at < 0 || nf_km_ranks_before(x, i, *v, *at))) {
			*v = x;
			*at = i;
		}
	}
	nf_cu_block_best(v, at);
}

extern "C" __global__ void __launch_bounds__(NF_CU_BLOCK)
nf_cu_sample(int *out, const float *logits, int vocab, size_t ld, int k, float temperature,
	     float top_p, const float *coins)
{
	__shared__ float val[NF_CU_TOPK_MAX];
	__shared__ int idx[NF_CU_TOPK_MAX];
	const float *row = logits + (size_t)blockIdx.x * ld;
	float v = 0.0f;
	int at = -1, n = 0;
	k = max(1, min(k, NF_CU_TOPK_MAX));
	for (; n < k; n++) {
		sample_next(&v, &at, row, vocab, n ? val[n - 1] : 0.0f, n ? idx[n - 1] : -1);
		if (at < 0)
			break;
		if (threadIdx.x == 0) {
			val[n] = v;
			idx[n] = at;
		}
		__syncthreads();
	}
	if (threadIdx.x != 0)
		return;
	if (n == 0 || !(temperature > 0.0f)) {
		out[blockIdx.x] = n ? idx[0] : 0;
		return;
	}
	float mass;
	nf_km_sample_softmax(val, n, temperature);
	int last = nf_km_sample_topp_last(val, n, top_p, &mass);
	out[blockIdx.x] = idx[nf_km_sample_pick(val, last, mass, coins[blockIdx.x])];
}
