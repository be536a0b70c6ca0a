/*
 * backend_kernels.c - the CUDA backend's kernel table (see
 * backend_kernels.h), generated from launch.h's list.
 */
#include "engine/cuda/backend_kernels.h"

#include <stddef.h>

#include "util/error.h"
#include "util/banned.h"

static const nf_cuk_info kernels[NF_CUK_COUNT] = {
#define NF_CUK_ROW(kname, kblock, ksm) [NF_CUK_##kname] = {/* .name = */ #kname, /* .block = */ (kblock), /* .min_sm = */ (ksm)},
	NF_CU_KERNELS(NF_CUK_ROW)
#undef NF_CUK_ROW
};

const nf_cuk_info *nf_cuk_info_of(nf_cuk_id id)
{
	return (unsigned)id < NF_CUK_COUNT ? &kernels[id] : NULL;
}

int nf_cuk_resolve(nf_cuk_table *t, const nf_cuda_driver *d, nf_cu_module mod, int sm)
{
	const nf_cuda_api *api = nf_cuda_driver_api(d);
	char text[160];
	for (int i = 0; i < NF_CUK_COUNT; i++) {
		nf_cu_result rc;
		t->fn[i] = NULL;
		if (kernels[i].min_sm > sm)
			continue;
		if ((rc = api->cuModuleGetFunction(&t->fn[i], mod, kernels[i].name)) != 0) {
			t->fn[i] = NULL;
			return nf_error_set(NF_EENV, "cuda: the engine's cubin lacks %s: %s",
					    kernels[i].name, nf_cuda_error_text(text, sizeof text, d, rc));
		}
	}
	return 0;
}

/* The weight kernels of each kind, in launch.h's order: the embedding,
 * then one per nf_cu_variant. */
static nf_cuk_id weight_kernel(nf_quant_kind k, int which)
{
	static const nf_cuk_id first[NF_QUANT_KIND_COUNT] = {
		[NF_QUANT_NONE] = NF_CUK_nf_cu_embed_f32,
		[NF_QUANT_INT8_ROW] = NF_CUK_nf_cu_embed_q8,
		[NF_QUANT_INT4_GROUP] = NF_CUK_nf_cu_embed_q4,
		[NF_QUANT_FP8_E4M3] = NF_CUK_nf_cu_embed_f8,
		[NF_QUANT_F16] = NF_CUK_nf_cu_embed_f16,
		[NF_QUANT_BF16] = NF_CUK_nf_cu_embed_bf16,
	};
	if ((unsigned)k >= NF_QUANT_KIND_COUNT)
		return NF_CUK_COUNT;
	return (nf_cuk_id)(first[k] + which);
}

nf_cuk_id nf_cuk_embed(nf_quant_kind k) { return weight_kernel(k, 0); }
nf_cuk_id nf_cuk_product(nf_quant_kind k, nf_cu_variant v)
{
	return (unsigned)v < NF_CU_VARIANTS ? weight_kernel(k, 1 + (int)v) : NF_CUK_COUNT;
}
nf_cuk_id nf_cuk_gemv(nf_quant_kind k) { return nf_cuk_product(k, NF_CU_VAR_GEMV); }
nf_cuk_id nf_cuk_gemm(nf_quant_kind k) { return nf_cuk_product(k, NF_CU_VAR_GEMM); }

int nf_cuk_launch(const nf_cuk_table *t, const nf_cuda_driver *d, nf_cu_stream s, nf_cuk_id id,
		  nf_cu_launch l, void **params)
{
	const nf_cuk_info *k = nf_cuk_info_of(id);
	char text[160];
	nf_cu_result rc;
	if (!k || !t->fn[id])
		return nf_error_set(NF_EENV, "cuda: this device has no %s", k ? k->name : "kernel");
	if (l.block[0] * l.block[1] * l.block[2] != k->block)
		return nf_error_set(NF_EINPUT, "cuda: %s launched with %u threads, compiled for %u",
				    k->name, l.block[0] * l.block[1] * l.block[2], k->block);
	if (l.grid[0] == 0 || l.grid[1] == 0 || l.grid[2] == 0)
		return 0; /* nothing to do (an empty batch) */
	rc = nf_cuda_driver_api(d)->cuLaunchKernel(t->fn[id], l.grid[0], l.grid[1], l.grid[2],
						   l.block[0], l.block[1], l.block[2], 0, s, params,
						   NULL);
	if (rc != 0)
		return nf_error_set(NF_EENV, "cuda: launch of %s failed: %s", k->name,
				    nf_cuda_error_text(text, sizeof text, d, rc));
	return 0;
}
