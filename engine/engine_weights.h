/*
 * engine_weights.h - an engine's weights.safetensors: every tensor of the
 * architecture's table, the matrices in the format of the engine's
 * precision (engine/wformat.h) with what the format keeps beside them,
 * norms and biases in float32.  Written by the builder, checked and bound
 * to the forward pass's views by the opener.  Internal to engine/.
 */
#ifndef NF_ENGINE_ENGINE_WEIGHTS_H
#define NF_ENGINE_ENGINE_WEIGHTS_H

#include <jansson.h>

#include "engine/arch.h"
#include "engine/engine.h"
#include "engine/forward.h"
#include "engine/safetensors.h"

typedef struct nf_ckpt_reader nf_ckpt_reader;

/* Write every tensor of r's model, in o's precision, to path through wr
 * (its metadata set): the tensors reserved, then the file written a layer
 * at a time (read, scaled for AWQ, quantized), so that memory holds one
 * layer and the largest tensor outside the layers, never the model.
 * NF_EINPUT for a weight the format cannot hold, naming the tensor and
 * layer.  path appears complete or not at all. */
int nf_engine_weights_write(nf_st_writer *wr, const char *path, nf_ckpt_reader *r,
			    const nf_engine_build_opts *o);

/* config.json's "quantization" object for precision p with this group. */
json_t *nf_engine_weights_describe(nf_precision p, int group);

/* Bytes of every tensor an engine of cfg in precision p (int4 group; 0 the
 * default) stores: the data and what its format keeps beside it (scales,
 * group scale/min, activation scales), the unquantized tensors as float32.
 * What the weights take in memory once mapped; plan's fit and the build's
 * memory budget size engines with it.  NF_EINPUT on overflow. */
int nf_engine_weights_bytes(uint64_t *out, const nf_model_config *cfg, nf_precision p, int group);

/* Where a tensor of the file lives now (the opener may have copied the
 * tensors elsewhere). */
typedef const void *(*nf_engine_rebase_fn)(const void *ctx, const void *data);

/* Check every tensor of st against cfg and precision p (dtype, shape,
 * alignment, what the format keeps beside it) and bind w's views to them
 * (w->layers allocated by the caller).  NF_EINPUT naming path and the
 * tensor. */
int nf_engine_weights_map(nf_fwd_weights *w, const nf_model_config *cfg, const nf_st_file *st,
			  nf_precision p, int group, const char *path, nf_engine_rebase_fn rebase,
			  const void *ctx);

#endif
