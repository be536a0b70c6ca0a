/*
 * rope.cu - rotary position embedding of every head of a row: a block per
 * row, a thread per pair (engine/kmath/rope.h picks the pair, interleaved
 * or rotate-half, and rotates it).  The cosines and sines come from the
 * host, as the CPU forward pass computes them (cosf, sinf of
 * nf_km_rope_angle with nf_arch_rope_inv_freq's scaled frequencies): a
 * table of head_size floats per row, so the GPU rotates by the very same
 * values and needs no trigonometry of its own.  Launch: nf_cu_launch_rope.
 */
#include "engine/cuda/launch.h"
#include "engine/kmath/rope.h"

extern "C" __global__ void __launch_bounds__(NF_CU_BLOCK)
nf_cu_rope(float *v, size_t ld, const float *cs, int n_heads, int head_size, int pairs)
{
	float *row = v + (size_t)blockIdx.x * ld;
	const float *rcs = cs + (size_t)blockIdx.x * head_size;
	int half = head_size / 2;
	for (int e = threadIdx.x; e < n_heads * half; e += NF_CU_BLOCK) {
		int h = e / half, j = e % half, i0, i1;
		float *head = row + (size_t)h * head_size;
		nf_km_rope_pair(&i0, &i1, (nf_km_rope_pairs)pairs, j, head_size);
		nf_km_rope_rotate(&head[i0], &head[i1], rcs[2 * j], rcs[2 * j + 1]);
	}
}
