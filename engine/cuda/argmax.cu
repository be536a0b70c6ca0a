/*
 * argmax.cu - greedy decoding: the first index of the largest logit of each
 * row (a NaN never wins), as nf_argmax.  A block per row.
 * Launch: nf_cu_launch_rows.
 */
#include "engine/cuda/reduce.cuh"

extern "C" __global__ void __launch_bounds__(NF_CU_BLOCK)
nf_cu_argmax(int *out, const float *logits, int vocab, size_t ld)
{
	const float *row = logits + (size_t)blockIdx.x * ld;
	float best = -INFINITY;
	int at = -1;
	for (int i = threadIdx.x; i < vocab; i += NF_CU_BLOCK)
		if (at < 0 ? row[i] == row[i] : nf_km_ranks_before(row[i], i, best, at)) {
			best = row[i];
			at = i;
		}
	nf_cu_block_best(&best, &at);
	if (threadIdx.x == 0)
		out[blockIdx.x] = at < 0 ? 0 : at;
}
