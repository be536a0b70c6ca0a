/*
 * backend_kernels.h - the CUDA backend's table of kernels, derived from
 * launch.h's NF_CU_KERNELS (one list: the name cuModuleGetFunction finds,
 * the block the kernel is compiled for, the lowest SM that has it), and the
 * one launch call every kernel of the forward pass goes through.
 */
#ifndef NF_ENGINE_CUDA_BACKEND_KERNELS_H
#define NF_ENGINE_CUDA_BACKEND_KERNELS_H

#include "engine/cuda/driver.h"
#include "engine/cuda/launch.h"
#include "engine/quant.h"

typedef enum nf_cuk_id {
#define NF_CUK_ENUM(name, block, sm) NF_CUK_##name,
	NF_CU_KERNELS(NF_CUK_ENUM)
#undef NF_CUK_ENUM
	NF_CUK_COUNT
} nf_cuk_id;

typedef struct nf_cuk_info {
	const char *name;  /* "nf_cu_gemv_q8" */
	unsigned block;    /* threads a block (its __launch_bounds__) */
	int min_sm;        /* lowest compute capability * 10 that has it */
} nf_cuk_info;

/* The row of kernel id (NULL out of range). */
const nf_cuk_info *nf_cuk_info_of(nf_cuk_id id);

/* The kernels of one loaded module: a function handle per id, NULL for the
 * kernels the device's SM lacks (fp8 before sm_89). */
typedef struct nf_cuk_table {
	nf_cu_function fn[NF_CUK_COUNT];
} nf_cuk_table;

/* Resolve every kernel of the table the device (sm, compute capability *
 * 10) has from mod; NF_EENV naming the first the module lacks. */
int nf_cuk_resolve(nf_cuk_table *t, const nf_cuda_driver *d, nf_cu_module mod, int sm);

/* The embed, GEMV and GEMM kernels of a weight kind (engine/quant.h), and
 * the kernel of any variant of its product; NF_CUK_COUNT for a kind
 * without kernels. */
nf_cuk_id nf_cuk_embed(nf_quant_kind k);
nf_cuk_id nf_cuk_product(nf_quant_kind k, nf_cu_variant v);
nf_cuk_id nf_cuk_gemv(nf_quant_kind k);
nf_cuk_id nf_cuk_gemm(nf_quant_kind k);

/* cuLaunchKernel of kernel id on stream s with launch l (its block checked
 * against the table's: a kernel runs only at the block it is compiled
 * for) and params (a pointer to each argument, in the order of the
 * kernel's signature).  NF_EENV, one line naming the kernel, when the
 * device lacks it or the driver refuses the launch. */
int nf_cuk_launch(const nf_cuk_table *t, const nf_cuda_driver *d, nf_cu_stream s, nf_cuk_id id,
		  nf_cu_launch l, void **params);

#endif
