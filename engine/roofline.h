/*
 * roofline.h - the roofline cost model of a decode step on a GPU SKU of the
 * device table, for the engines built where that GPU is not (docs/cuda.md).
 *
 * A decode step at batch b reads every matrix of the model once (in the
 * precision's format, with its scales: engine/wformat.h) and each
 * sequence's KV cache up to the context; it does 2 * rows * cols * b flops
 * per matrix and 4 * context * dim per layer and sequence in attention.
 * Each kernel takes
 *     max(bytes / bandwidth, flops / peak of the precision) / occupancy
 * plus the launch of a node of a captured CUDA graph, where occupancy is the
 * kernel's static occupancy (docs/cuda-kernels.md, 1 when unknown).  The
 * step's time is the sum; tokens/s = b / step; the fraction of the HBM
 * roofline is (all bytes / bandwidth) / step, 1 when the step is purely
 * bandwidth-bound at the peak.
 *
 * Tactics: for each shape, the variants of the kernels (launch.h's
 * nf_cu_variant: the GEMV and its split-K form for decode, the 64- and
 * 16-token GEMM tiles for prefill) are costed by the same model with the
 * SMs a grid of that many blocks keeps busy (and the lanes a split part
 * leaves idle, the padding a token tile computes), and the fastest is
 * kept, marked "modelled" (no GPU timed it).  The CUDA backend launches
 * the same choice where it has no timing (engine/cuda/backend.c).
 */
#ifndef NF_ENGINE_ROOFLINE_H
#define NF_ENGINE_ROOFLINE_H

#include <stdint.h>

#include "engine/cuda/launch.h"
#include "engine/engine.h"
#include "engine/kv_kind.h"
#include "engine/model.h"
#include "engine/sku.h"

/* The batch buckets of the model: 1, 2, 4, ..., 64. */
#define NF_ROOFLINE_BUCKETS 7
extern const int nf_roofline_batches[NF_ROOFLINE_BUCKETS];

/* Time of one launch in a captured CUDA graph (a graph node costs about
 * 2 us where a stream launch costs 4-5 us). */
#define NF_ROOFLINE_LAUNCH_S 2e-6

typedef struct nf_roofline_bucket {
	int batch;
	double bytes;          /* read and written in one decode step */
	double flops;
	double step_seconds;
	double tokens_per_s;   /* batch / step_seconds */
	double hbm_fraction;   /* (bytes / bandwidth) / step_seconds, in (0, 1] */
	int compute_bound;     /* 1: some kernel of the step is limited by flops */
} nf_roofline_bucket;

/* The modelled candidate for one GEMV shape at batch 1. */
typedef struct nf_roofline_tactic {
	int rows, cols, count;      /* shape, and how many of it a step runs */
	const char *kernel;         /* the variant's name: "gemv", "gemv_sk" */
	int batch;                  /* tokens: 1 (decode), NF_ROOFLINE_PREFILL (prefill) */
	int rows_per_block, split_k;
	double seconds;             /* modelled time of one */
} nf_roofline_tactic;

#define NF_ROOFLINE_MAX_SHAPES 8

typedef struct nf_roofline {
	const nf_sku *sku;         /* borrowed from the table */
	nf_precision precision;
	int context;               /* KV positions each sequence reads */
	double occupancy;          /* the derating applied, (0, 1] */
	double weight_bytes;       /* every matrix, in the precision's format */
	nf_roofline_bucket buckets[NF_ROOFLINE_BUCKETS];
	nf_roofline_tactic tactics[NF_ROOFLINE_MAX_SHAPES];
	int n_tactics;
	/* the same shapes in a prefill pass; for fp16, bf16 and fp8 weights
	 * the JSON lists cuBLASLt beside each, skipped (engine/cuda/cublaslt.h) */
	nf_roofline_tactic prefill[NF_ROOFLINE_MAX_SHAPES];
} nf_roofline;

/* The tokens of the prefill pass the tactics model (the engine's pass). */
#define NF_ROOFLINE_PREFILL 256

/* Model cfg's decode on sku at every batch bucket, each sequence at
 * `context` positions (1 .. cfg->max_seq_len), KV cache of kind kv,
 * occupancy in (0, 1] (1: unknown).  NF_EINPUT when sku is not a GPU, does
 * not run p, or an argument is out of range. */
int nf_roofline_model(nf_roofline *out, const nf_model_config *cfg, nf_precision p, nf_kv_kind kv,
		      const nf_sku *sku, int context, double occupancy);

/* What the variants' costs need of a GPU. */
typedef struct nf_roofline_gpu {
	int sm_count;
	double bw;         /* bytes/s */
	double peak;       /* flops/s of the precision */
	double occupancy;  /* (0, 1] */
} nf_roofline_gpu;

/* Modelled seconds of variant v of the product of a (rows, cols) matrix of
 * `bytes` bytes at n tokens on g. */
double nf_roofline_variant_seconds(nf_cu_variant v, const nf_roofline_gpu *g, int rows, int cols,
				   double bytes, int n);
/* The fastest variant by that model: among the GEMVs for decode (prefill
 * 0, or one token), among the GEMM tiles for a prefill of several; its
 * seconds to *seconds when not NULL.  Split-K wins the few-row, long-row
 * shapes (k, v, w2 of a small model), the plain GEMV the tall ones (the
 * classifier), the 16-token tile a short run. */
nf_cu_variant nf_roofline_variant(const nf_roofline_gpu *g, int rows, int cols, double bytes, int n,
				  int prefill, double *seconds);

/* The bucket of batch b, or NULL. */
const nf_roofline_bucket *nf_roofline_at(const nf_roofline *r, int batch);

/* "modelled 412 tok/s at batch 1, 71% of HBM roofline" (two decimals
 * under 1%: "0.11%") */
void nf_roofline_summary(char *buf, size_t len, const nf_roofline *r);

/* The static occupancy of `kernel` ("nf_cu_gemv_q8") on `arch` ("sm_90"),
 * read from docs/cuda-kernels.md's tables at `path`: the lowest among the
 * rows naming that kernel under a heading (or in an arch column) naming
 * arch or arch with a suffix ("sm_90a").  A cell "62.5%" or "0.625".
 * *out = 1 (full) when the file is missing or no row matches; NF_EINPUT for
 * a matching row without a number.  Returns 1 when found, 0 when not. */
int nf_roofline_occupancy(double *out, const char *path, const char *kernel, const char *arch);

/* The name of the CUDA GEMV kernel of precision p's weight format
 * ("nf_cu_gemv_q8" for int8-wo; engine/cuda/gemv.cu), "" for none. */
const char *nf_roofline_gemv_kernel(nf_precision p);

/* r as JSON: sku, precision, context, occupancy, "method": "modelled", the
 * summary, the buckets ("decode"), the tactics and the prefill tactics
 * ("prefill_tactics": each with its "candidates" not modelled: cuBLASLt,
 * "method": "skipped" with the reason, for the weights it takes; never
 * the "kernel" chosen).  Caller frees *out. */
int nf_roofline_json(char **out, const nf_roofline *r);
/* The same, written atomically at path. */
int nf_roofline_write(const char *path, const nf_roofline *r);

#endif
