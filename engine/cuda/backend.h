/*
 * backend.h - the CUDA backend of the forward pass: an engine's weights in
 * device memory in their stored formats, a KV cache per sequence slot, the
 * activations of a step, one stream, and the forward pass of forward.c
 * (the same layers in the same order) as launches of the kernels of
 * launch.h through the driver table.  A decode step of each batch size is
 * captured into a CUDA graph once and, on later steps, the graph of the
 * same batch size is updated in place (cuGraphExecUpdate: the positions
 * and attention grids change, the nodes do not) and replayed, so the host
 * pays one launch per step rather than one per kernel.
 *
 * Everything the device needs lives here, behind nf_cuda_backend: the CPU
 * path (forward.c, engine.c) is unchanged and pays nothing for it.
 * docs/cuda.md, "The CUDA backend".
 *
 * Every failure - the device refusing memory, a kernel missing from the
 * cubin, a launch refused - is one line in nf_error_last(), NF_EENV, so a
 * caller says it and runs the engine on the CPU.  nf_cuda_backend_new runs
 * one decode step before it returns, so a device that cannot run the
 * engine fails there, not in the middle of serving.
 */
#ifndef NF_ENGINE_CUDA_BACKEND_H
#define NF_ENGINE_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "engine/cuda/driver.h"
#include "engine/forward.h"
#include "engine/kv_kind.h"
#include "engine/model.h"

typedef struct nf_cuda_backend_opts {
	int ordinal;            /* the device (nf_cuda_find_device's) */
	const char *engine_dir; /* the engine folder: its cuda/<arch>.cubin is loaded */
	const char *arch;       /* "sm_90": the cubin of the engine's SKU */
	int max_batch;          /* sequence slots, each with its KV cache (1..NF_CUDA_MAX_BATCH) */
	int max_prefill;        /* tokens of a prefill pass (0: NF_FWD_PASS_TOKENS) */
	nf_kv_kind kv;          /* NF_KV_F16 or NF_KV_INT8 (an fp32 engine's F32 is kept as F16:
				   the device kernels read halves and int8) */
	int no_graphs;          /* 1: launch every kernel of a decode step (no capture) */
} nf_cuda_backend_opts;

#define NF_CUDA_MAX_BATCH 64

typedef struct nf_cuda_backend nf_cuda_backend;

/* Make device o->ordinal's primary context current, load the engine's
 * cubin, upload every weight of w once (row-major: a tiled nf_fwd_weights
 * is refused), allocate the KV caches and activations, and run one decode
 * step.  d and cfg are borrowed and must outlive *out; w is read only
 * during the call.  Caller owns *out (nf_cuda_backend_free). */
int nf_cuda_backend_new(nf_cuda_backend **out, const nf_cuda_driver *d, const nf_model_config *cfg,
			const nf_fwd_weights *w, const nf_cuda_backend_opts *o);
void nf_cuda_backend_free(nf_cuda_backend *b); /* NULL is fine */

/* One decode token for each of n sequences: slot slots[i] consumes
 * tokens[i] at position pos[i] (earlier positions of that slot already
 * consumed).  logits (n * vocab floats) and next (n argmax tokens) are
 * copied back when not NULL.  NF_EINPUT for a bad count, slot, token or
 * position (nothing launched then); NF_EENV with one line when the device
 * fails. */
int nf_cuda_backend_decode(nf_cuda_backend *b, const int *slots, const int *tokens,
			   const int *pos, int n, float *logits, int *next);

/* Slot `slot` consumes tokens[0, n) at positions pos0 ... pos0 + n - 1, in
 * passes of max_prefill tokens (tiled GEMMs and the causal prefill
 * attention); the logits of the last token to logits_last (vocab floats;
 * NULL: none). */
int nf_cuda_backend_prefill(nf_cuda_backend *b, int slot, const int *tokens, int n, int pos0,
			    float *logits_last);

/* The same with the logits of the last n_rows tokens (0..n; n_rows * vocab
 * floats, row i the logits after token n - n_rows + i): a pending token
 * and its drafts verified in one step, or every prompt row (echo, prompt
 * logprobs, teacher-forced gates).  The classifier runs on max_batch rows
 * at a time, so the logits buffer stays (max_batch, vocab).  NF_EINPUT
 * for n_rows out of range or logits NULL with rows wanted. */
int nf_cuda_backend_prefill_rows(nf_cuda_backend *b, int slot, const int *tokens, int n, int pos0,
				 int n_rows, float *logits);

/* Positions [0, n) of slot src's K and V caches into slot dst, every layer
 * and KV head (device to device on the stream, then synchronised): a
 * prefix shared by a new sequence.  dst == src does nothing.  NF_EINPUT
 * for a slot or n out of range (nothing copied); NF_EENV when the driver
 * refuses a copy. */
int nf_cuda_backend_copy_prefix(nf_cuda_backend *b, int dst, int src, int n);

/* Time the matrix products of the model on this device (engine/cuda/
 * backend_tune.c): for every distinct (kind, rows, cols) of its weights and
 * every batch of nf_roofline_batches up to max_batch (decode) and
 * max_prefill (prefill), each candidate kernel (the GEMV; for more than one
 * token also the tiled GEMM) is launched `warmup` times, then timed `runs`
 * times between CUDA events; the median wins.  A shape already in cache
 * (its key the device's SKU, driver and cubin) is not timed again; new
 * ones are added.  The backend then launches each shape's winner.
 * *timed counts the shapes timed (not found in the cache). */
struct nf_timing_cache;
int nf_cuda_backend_tune(nf_cuda_backend *b, struct nf_timing_cache *cache, int warmup, int runs,
			 int *timed);

/* cuBLASLt as a reference candidate (engine/cuda/cublaslt.h,
 * backend_tune_lt.c): for every distinct matrix with a cuBLASLt candidate
 * (f16, bf16; fp8 from sm_89) and every prefill batch of 2, 4, ... up to
 * max_prefill, each algorithm its heuristic proposes is run `warmup` times
 * and timed `runs` times between CUDA events; the fastest median goes into
 * cache under the family "cublaslt_<fmt>" (kernel "cublaslt:<algorithm>").
 * It is never chosen: the backend keeps launching its own kernels
 * (nf_cublaslt_may_choose).  A shape already in cache is not timed again;
 * *timed counts those timed. */
struct nf_cublaslt;
int nf_cuda_backend_tune_cublaslt(nf_cuda_backend *b, struct nf_timing_cache *cache,
				  const struct nf_cublaslt *lt, int warmup, int runs, int *timed);

/* The engine part holding the tactics measured on the engine's own SKU
 * when it was built (factory/gpu_profile.c, docs/cuda.md "Measured
 * tactics"):
 *   {"format": "nimfactory-cuda-tactics", "version": 1, "sku", "driver",
 *    "cubin_sha256", "tactics": [{"source": "measured", "family": "gemv_q8",
 *    "rows", "cols", "batch", "kernel": "nf_cu_gemm_q8", "median_us", "runs",
 *    "cublaslt_us" (when cuBLASLt was timed there)}, ...]}
 * nf_cuda_backend_new reads it when the engine has it, and each shape
 * listed launches its measured winner; the others keep the roofline
 * model's choice. */
#define NF_CUDA_TACTICS_FILE "cuda_tactics.json"
#define NF_CUDA_TACTICS_FORMAT "nimfactory-cuda-tactics"
#define NF_CUDA_TACTICS_VERSION 1

/* The tactics file of b's tuned choices (after nf_cuda_backend_tune with
 * cache): each shape's winner with its median and runs, and cuBLASLt's
 * fastest median beside it when cache has one.  Caller frees *text. */
int nf_cuda_backend_tactics_json(char **text, const nf_cuda_backend *b,
				 const struct nf_timing_cache *cache);

/* Read engine_dir's NF_CUDA_TACTICS_FILE, when there is one, and make b
 * launch each listed shape's kernel.  A damaged file, or one naming a
 * shape or kernel this model and backend do not have, is NF_EINPUT with
 * one line naming the file (nothing chosen). */
int nf_cuda_backend_load_tactics(nf_cuda_backend *b, const char *engine_dir);

/* Bytes of weights uploaded (each tensor once; a tied classifier is the
 * embedding's). */
uint64_t nf_cuda_backend_weight_bytes(const nf_cuda_backend *b);
/* Decode graphs instantiated so far (one per batch size, updated after). */
int nf_cuda_backend_graphs(const nf_cuda_backend *b);

#endif
