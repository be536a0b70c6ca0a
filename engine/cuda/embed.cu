/*
 * embed.cu - the embedding gather: row tokens[b] of the token table, in
 * whatever format it is stored, as floats (a thread per column, a grid row
 * per token).  Launch: nf_cu_launch_embed.
 */
#include "engine/cuda/wformat.cuh"

template <class F>
static __device__ void embed(float *out, const nf_cu_wmat &table, const int *tokens, int n,
			     size_t ldo)
{
	int c = blockIdx.x * NF_CU_BLOCK + threadIdx.x, b = blockIdx.y;
	int tok = tokens[b];
	if (c >= table.cols)
		return;
	/* a token out of the table reads nothing: its row is zeros */
	float v = tok >= 0 && tok < table.rows ? nf_km_mul(F::row_scale(table, tok), F::at(table, tok, c)) : 0.0f;
	out[(size_t)b * ldo + c] = v;
}

#define EMBED_KERNEL(fmt)                                                                  \
	extern "C" __global__ void __launch_bounds__(NF_CU_BLOCK)                              \
	nf_cu_embed_##fmt(float *out, nf_cu_wmat table, const int *tokens, int n, size_t ldo) \
	{                                                                                  \
		embed<nf_cu_fmt_##fmt>(out, table, tokens, n, ldo);                         \
	}

EMBED_KERNEL(f32)
EMBED_KERNEL(f16)
EMBED_KERNEL(bf16)
EMBED_KERNEL(q8)
EMBED_KERNEL(q4)
#if NF_CU_HAS_FP8 /* sm_89 and newer (launch.h) */
EMBED_KERNEL(f8)
#endif
