/*
 * engine_quantize.h - what an engine build does to the float32 model before
 * and while its matrices are stored in the precision's format: the AWQ
 * scaling (int4-awq), the calibrated activation scales (fp8-e4m3), and the
 * quantization of each matrix, taking a GGUF's int4 blocks over as they
 * are where the format is the same.  Internal to engine/.
 */
#ifndef NF_ENGINE_ENGINE_QUANTIZE_H
#define NF_ENGINE_ENGINE_QUANTIZE_H

#include "engine/engine.h"
#include "engine/forward.h"
#include "engine/wformat.h"

typedef struct nf_pool nf_pool;

typedef struct nf_engine_quant {
	const nf_model *model; /* the model to store: the input, or its AWQ-scaled copy */
	nf_pool *pool;         /* the build's threads, which quantize rows in parallel */
	nf_model *owned;       /* that copy, when made */
	float *act_scales;     /* (NF_T_COUNT, n_layers) static activation scales, or NULL */
	int n_layers;
} nf_engine_quant;

/* Everything the precision of o needs before its matrices are quantized. */
int nf_engine_quant_prepare(nf_engine_quant *q, const nf_model *m, const nf_engine_build_opts *o);
/* The activation scales of tensor id, one per layer (NULL when none). */
const float *nf_engine_quant_act_scales(const nf_engine_quant *q, int id);
/* Hand the scaled model's memory to the caller (to free() once the views
 * into it are gone); q no longer owns it. */
void *nf_engine_quant_detach(nf_engine_quant *q);
void nf_engine_quant_release(nf_engine_quant *q);

/* Store tensor id of q's model (layers x rows x cols floats; m is q's
 * model) in s->kind's format at data and aux (wformat.h sizes), the rows
 * split across q's pool; NF_EINPUT naming `what`, the layer, row and
 * column of a weight the format cannot hold. */
int nf_engine_quantize_matrix(void *data, void *aux, const nf_fwd_src *s, int id, uint64_t layers,
			      uint64_t rows, uint64_t cols, const nf_model *m,
			      const nf_engine_quant *q, const char *what);

/* Quantize rows x cols floats at w into f's format at data and aux, the
 * rows split across pool's threads; NF_EINPUT (message unnamed: the caller
 * names the tensor) when a weight cannot be held. */
int nf_quantize_rows(nf_pool *pool, const nf_wformat *f, void *data, void *aux, const float *w,
		     uint64_t rows, uint64_t cols, int group);

#endif
