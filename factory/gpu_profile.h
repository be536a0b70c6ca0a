/*
 * gpu_profile.h - a GPU profile built on a machine without its GPU: what
 * its compile adds to the engine (roofline.json, the roofline model of its
 * SKU: modelled decode tokens/s per batch bucket, the fraction of the HBM
 * roofline, GEMV tactics marked "modelled"; engine/roofline.h), and its
 * gates, skipped with the reason (where the GPU is, what the model says),
 * never passed (docs/cuda.md).
 */
#ifndef NF_FACTORY_GPU_PROFILE_H
#define NF_FACTORY_GPU_PROFILE_H

#include <jansson.h>

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

/* The gate `kind` of GPU profile p, skipped: *out's reason says whether the
 * GPU is here (through the CUDA driver loader) and, for performance, the
 * model's summary read from the engine dir's roofline.json ("no h100-sxm
 * here; modelled 412 tok/s at batch 1, 71% of HBM roofline").  Caller owns
 * *out. */
int nf_gpu_profile_gate(nf_gate_result **out, const nf_profile *p, const char *dir,
			nf_gate_kind kind);

#endif
