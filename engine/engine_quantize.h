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
typedef struct nf_calib nf_calib;
typedef struct nf_ckpt_reader nf_ckpt_reader;

typedef struct nf_engine_quant {
	nf_ckpt_reader *reader; /* the model's weights, a slice at a time (borrowed) */
	nf_pool *pool;          /* the build's threads, which quantize rows in parallel */
	nf_calib *calib;        /* activation statistics, when the precision is calibrated */
	float *act_scales;      /* (NF_T_COUNT, n_layers) static activation scales, or NULL */
	int n_layers;
	int group;              /* int4 group */
	int threads;
	bool awq;               /* each layer is scaled before it is quantized */
} nf_engine_quant;

/* Everything the precision of o needs before its matrices are quantized:
 * the calibration pass over r (a layer at a time) for AWQ and fp8. */
int nf_engine_quant_prepare(nf_engine_quant *q, nf_ckpt_reader *r,
			    const nf_engine_build_opts *o);
/* Layer l of the model, read into layer (nf_model_alloc_layer), made
 * ready to quantize: AWQ's scaling, in place, for int4-awq. */
int nf_engine_quant_layer(const nf_engine_quant *q, nf_model *layer, int l);
/* The activation scales of tensor id, one per layer (NULL when none). */
const float *nf_engine_quant_act_scales(const nf_engine_quant *q, int id);
void nf_engine_quant_release(nf_engine_quant *q);

/* Store slice l of tensor id (rows x cols floats at w) in s->kind's format
 * at data and aux (wformat.h sizes), the rows split across q's pool, or
 * taken over from the checkpoint's own blocks where they are the same
 * format; NF_EINPUT naming `what` (and the layer when per_layer) and the
 * row and column of a weight the format cannot hold. */
int nf_engine_quantize_slice(void *data, void *aux, const nf_fwd_src *s, int id, int l,
			     uint64_t rows, uint64_t cols, const float *w,
			     const nf_engine_quant *q, const char *what, bool per_layer);

/* Quantize rows x cols floats at w into f's format at data and aux, the
 * rows split across pool's threads; NF_EINPUT (message unnamed: the caller
 * names the tensor) when a weight cannot be held. */
int nf_quantize_rows(nf_pool *pool, const nf_wformat *f, void *data, void *aux, const float *w,
		     uint64_t rows, uint64_t cols, int group);

#endif
