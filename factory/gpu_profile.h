/*
 * gpu_profile.h - what a GPU profile's compile adds to the engine and how
 * its gates run (docs/cuda.md).  Everywhere: roofline.json, the roofline
 * model of its SKU (modelled decode tokens/s per batch bucket, the
 * fraction of the HBM roofline, GEMV tactics marked "modelled";
 * engine/roofline.h), and the cubin of its architecture.  Where its very
 * SKU is here: the tactics measured on it (cuda_tactics.json), and both
 * gates run on it.  Elsewhere the gates are skipped with the reason (where
 * the GPU is, what the model says), never passed.
 */
#ifndef NF_FACTORY_GPU_PROFILE_H
#define NF_FACTORY_GPU_PROFILE_H

#include <jansson.h>

#include "engine/cuda/driver.h"
#include "engine/model.h"
#include "factory/gates.h"
#include "factory/profile.h"

/* The engine part holding the model. */
#define NF_GPU_ROOFLINE_FILE "roofline.json"

/* Model p's decode on its SKU at cfg's whole context, with the static
 * occupancy of the table NF_CUDA_KERNELS_TABLE names (docs/cuda-kernels.md;
 * full occupancy without one), and add it to the engine folder dir as
 * roofline.json (listed with its sha256 in config.json). */
int nf_gpu_profile_model(const char *dir, const nf_model_config *cfg, const nf_profile *p);

/* The kernels a GPU profile's engine carries: the folder NF_CUDA_KERNELS_DIR
 * names is the Makefile's build/cuda (`make cuda`), holding
 * <arch>/nf_kernels.cubin (sm_90a's for an sm_90 SKU) and
 * compute_NN/nf_kernels.ptx; the cubin of p's arch and the lowest PTX go
 * into the engine's cuda/ part.  Without the variable an engine has no
 * cuda/ part; with it, a profile whose arch has no cubin there is NF_EENV. */
int nf_gpu_profile_kernels(const char *dir, const nf_profile *p);

/* Into prov (the engine's provenance, the compile stage's key): the sha256
 * of the cubin and PTX nf_gpu_profile_kernels stores and of the occupancy
 * table, so the engine is rebuilt when they change. */
int nf_gpu_profile_provenance(json_t *prov, const nf_profile *p);

/* Whether p's very SKU is here (nf_cuda_find_device, exact): 1 and dev
 * filled, with "its GPU 0 (NVIDIA H100 80GB HBM3) is here" in why; 0 with
 * why not ("no h100-sxm here", "a compatible GPU 0 (...) is here, not a
 * h100-sxm") in why. */
int nf_gpu_profile_device(nf_cuda_device *dev, const nf_profile *p, char *why, size_t len);

/* Whether the CUDA driver NF_LIBCUDA names is the tests' fake
 * (tests/fakes/libcuda.c exports nf_fake_cuda_driver): it runs no
 * kernel, so no gate may run on it. */
int nf_gpu_driver_is_fake(void);

/* What nf_gpu_profile_tune did. */
typedef struct nf_gpu_tune {
	int measured;        /* 1: cuda_tactics.json was written */
	int timed;           /* shapes timed now (the others from the timing cache) */
	int timed_cublaslt;  /* cuBLASLt reference shapes timed now */
	char why[256];       /* not measured: why ("no h100-sxm here") */
	char warning[512];   /* a damaged timing cache, timed again ("" when none) */
} nf_gpu_tune;

/* Measured tactics for the engine in dir (docs/cuda.md, "Measured
 * tactics"): when p's very SKU is here (nf_gpu_profile_device), open the
 * engine on it, time every matrix product and batch bucket
 * (nf_cuda_backend_tune; cuBLASLt's reference figures too when the library
 * loads) through the timing cache <cache_root>/cuda-timing/<sku>-<driver>-
 * <cubin sha256>.json, which a later build reuses without timing, and add
 * the winners to the engine as NF_CUDA_TACTICS_FILE.  Otherwise nothing is
 * timed and the roofline model's choices stand.  Either way config.json's
 * "cuda_tactics" says which ({"source": "measured"|"modelled", ...}).
 * An engine without the cubin of its SKU (NF_CUDA_KERNELS_DIR unset) is
 * not timed either, and the reason says so.  NF_EENV when the device
 * fails. */
int nf_gpu_profile_tune(nf_gpu_tune *out, const char *dir, const nf_profile *p,
			const char *cache_root);

/* Whether p's gates run on its GPU here: its very SKU is here and the
 * driver is not the tests' fake.  why as nf_gpu_profile_device's (or the
 * fake's). */
int nf_gpu_profile_gates_here(const nf_profile *p, char *why, size_t len);

/* After a performance gate of p ran on its GPU: r's decode tokens/s as a
 * fraction of the SKU's HBM roofline (its weight bytes a step over the
 * SKU's bandwidth, from the engine's roofline.json) and the model's
 * figures beside it, as metrics "hbm_fraction", "modelled_decode_tokens_per_s"
 * and "modelled_hbm_fraction" (informational). */
int nf_gpu_profile_perf_roofline(nf_gate_result *r, const char *dir);

/* The gate `kind` of GPU profile p, skipped: *out's reason says whether the
 * GPU is here (through the CUDA driver loader) and, for performance, the
 * model's summary read from the engine dir's roofline.json ("no h100-sxm
 * here; modelled 412 tok/s at batch 1, 71% of HBM roofline").  Caller owns
 * *out. */
int nf_gpu_profile_gate(nf_gate_result **out, const nf_profile *p, const char *dir,
			nf_gate_kind kind);

#endif
