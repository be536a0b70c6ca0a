/*
 * cublaslt.h - cuBLASLt as a reference candidate of the prefill GEMMs'
 * tactics (fp16 and bf16 weights; fp8 e4m3 from sm_89): the library
 * opened with dlopen at tactic time only, when it is there (NF_LIBCUBLASLT,
 * else libcublasLt.so.13, .12, .11), its algorithms for a shape enumerated
 * by cublasLtMatmulAlgoGetHeuristic and run for timing like our kernels.
 *
 * It is never the tactic an engine runs: every engine may be packaged,
 * and the image carries no CUDA toolkit library (the driver comes from
 * the host; libcublasLt is ~540 MB, more than ten times the runtime layer
 * it would join).  Its timing is the figure our GEMM is held to
 * (docs/cuda-kernels.md, "cuBLASLt"); nf_cublaslt_may_choose says so in
 * one place and the tests hold it.
 *
 * The product is ours: y (n, rows) = x (n, cols) W^T, all row-major, which
 * in cuBLASLt's column-major terms is D (rows x n, ld rows) = op(A) B with
 * A = W as (cols x rows, ld cols) transposed ("TN", the layout fp8 needs),
 * B = x as (cols x n, ld cols) in W's type, D float32, computed in float32.
 */
#ifndef NF_ENGINE_CUDA_CUBLASLT_H
#define NF_ENGINE_CUDA_CUBLASLT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/cuda/driver.h"
#include "engine/quant.h"

typedef struct nf_cublaslt nf_cublaslt;

/* Open the library and resolve its functions; NF_EENV with one line when
 * none is there or it lacks one.  Caller owns *out (nf_cublaslt_free). */
int nf_cublaslt_open(nf_cublaslt **out);
void nf_cublaslt_free(nf_cublaslt *lt); /* NULL is fine */
/* The library opened (borrowed). */
const char *nf_cublaslt_path(const nf_cublaslt *lt);

/* Whether weights of kind k have a cuBLASLt candidate on a device of
 * compute capability sm (x 10): f16 and bf16; fp8 e4m3 from 89. */
int nf_cublaslt_kind_ok(nf_quant_kind k, int sm);
/* Whether a tactic may choose cuBLASLt for an engine: never (see above). */
int nf_cublaslt_may_choose(void);

/* One algorithm the heuristic proposed (cublasLtMatmulHeuristicResult_t's
 * algo and workspace). */
typedef struct nf_lt_algo {
	uint64_t data[8];
	size_t workspace;
} nf_lt_algo;

#define NF_LT_MAX_ALGOS 8

/* A shape's description (handle, matmul and layouts) and its algorithms. */
typedef struct nf_lt_plan {
	const nf_cublaslt *lt;
	void *handle, *desc, *a, *b, *d, *pref;
	int rows, cols, n;
	nf_lt_algo algo[NF_LT_MAX_ALGOS];
	int n_algos;
	size_t max_workspace;
} nf_lt_plan;

/* Describe the product of a (rows, cols) matrix of kind k at n tokens and
 * ask the heuristic for up to NF_LT_MAX_ALGOS algorithms needing at most
 * max_workspace bytes.  NF_EINPUT for a kind without a candidate or a bad
 * shape; NF_EENV with one line when the library refuses (or proposes
 * none).  nf_lt_plan_release after, also after a failure. */
int nf_lt_plan_init(nf_lt_plan *p, const nf_cublaslt *lt, nf_quant_kind k, int rows, int cols, int n,
		    size_t max_workspace);
void nf_lt_plan_release(nf_lt_plan *p);

/* cublasLtMatmul of algorithm i of p on stream s: y = x W^T (device
 * addresses; x in W's type, y float32; workspace of the algorithm's
 * bytes).  NF_EENV with one line when refused. */
int nf_lt_plan_run(const nf_lt_plan *p, int i, nf_cu_ptr y, nf_cu_ptr w, nf_cu_ptr x,
		   nf_cu_ptr workspace, nf_cu_stream s);

#endif
