/*
 * model.h - a Llama-family model held in memory as float32, in llama2.c's
 * layout: per-layer tensors stacked along a leading layer axis, matrices
 * row-major (out, in) so that y = W x, q and k rows (and their biases) in
 * the interleaved-pair order that RoPE rotates as (2i, 2i+1) (llama2.c and
 * GGUF llama; HF checkpoints are permuted on load).  Every checkpoint loader
 * produces one of these; quantization and engine writing consume it.  Which
 * tensors exist and their shapes come from the architecture's table
 * (engine/arch.h).
 */
#ifndef NF_ENGINE_MODEL_H
#define NF_ENGINE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds every loader checks before trusting a header. */
#define NF_MODEL_MAX_DIM 65536
#define NF_MODEL_MAX_HIDDEN (4 * 65536)
#define NF_MODEL_MAX_LAYERS 1024
#define NF_MODEL_MAX_HEADS 1024
#define NF_MODEL_MAX_VOCAB (1 << 20)
#define NF_MODEL_MAX_SEQ (1 << 20)

/* The architectures (engine/arch.h has each one's tensor table and names). */
typedef enum nf_arch_id {
	NF_ARCH_LLAMA,   /* also every llama2.c checkpoint */
	NF_ARCH_MISTRAL, /* Llama's layout; sliding window (see sliding_window) */
	NF_ARCH_QWEN2,   /* q, k and v biases */
	NF_ARCH_COUNT
} nf_arch_id;

/* RoPE frequency scaling (HF config.json "rope_scaling"). */
typedef enum nf_rope_type {
	NF_ROPE_DEFAULT, /* inv_freq[i] = theta^(-2i / head_size) */
	NF_ROPE_LLAMA3,  /* Llama 3.1: long wavelengths divided by factor, smoothed between */
} nf_rope_type;

typedef struct nf_rope_scaling {
	nf_rope_type type;
	float factor;             /* llama3: > 0 */
	float low_freq_factor;    /* llama3: > 0 */
	float high_freq_factor;   /* llama3: > low_freq_factor */
	int32_t original_max_pos; /* llama3: original_max_position_embeddings, > 0 */
} nf_rope_scaling;

typedef struct nf_model_config {
	nf_arch_id arch;     /* NF_ARCH_LLAMA (0) unless a loader says otherwise */
	int32_t dim;         /* model width */
	int32_t hidden_dim;  /* SwiGLU inner width */
	int32_t n_layers;
	int32_t n_heads;     /* query heads; head_size = dim / n_heads */
	int32_t n_kv_heads;  /* key/value heads (grouped-query attention) */
	int32_t vocab_size;
	int32_t max_seq_len;
	float norm_eps;      /* RMSNorm epsilon, 1e-5 for llama2.c checkpoints */
	float rope_theta;    /* 10000 for llama2.c checkpoints */
	bool shared_classifier; /* wcls is the token embedding */
	/* Llama's attention_bias: q, k, v and o projections have biases.  Qwen2
	 * has q, k and v biases whatever this says (its table); Mistral none. */
	bool attention_bias;
	nf_rope_scaling rope_scaling;
	/* The checkpoint's sliding attention window (0: none).  Not applied:
	 * loaders cap max_seq_len to it, so full attention over the context is
	 * exactly windowed attention; kept so that writers can record it. */
	int32_t sliding_window;
	/* There is no head_size field: it is dim / n_heads (nf_model_head_size);
	 * a checkpoint whose head_dim differs is refused. */
} nf_model_config;

typedef struct nf_model_weights {
	float *token_embedding; /* (vocab, dim) */
	float *rms_att;         /* (layer, dim) */
	float *wq;              /* (layer, dim, dim) */
	float *wk;              /* (layer, kv_dim, dim) */
	float *wv;              /* (layer, kv_dim, dim) */
	float *wo;              /* (layer, dim, dim) */
	float *rms_ffn;         /* (layer, dim) */
	float *w1;              /* (layer, hidden, dim) gate */
	float *w2;              /* (layer, dim, hidden) down */
	float *w3;              /* (layer, hidden, dim) up */
	float *rms_final;       /* (dim) */
	float *wcls;            /* (vocab, dim); == token_embedding when shared */
	float *bq;              /* (layer, dim) or NULL: q bias, interleaved like wq's rows */
	float *bk;              /* (layer, kv_dim) or NULL */
	float *bv;              /* (layer, kv_dim) or NULL */
	float *bo;              /* (layer, dim) or NULL */
} nf_model_weights;

/* What a loader kept of its checkpoint (model.c): per (tensor, layer) the
 * original blocks and their ggml type, and the mapping they live in. */
typedef struct nf_model_source nf_model_source;

typedef struct nf_model {
	nf_model_config cfg;
	nf_model_weights w;
	void *mem;      /* owned: one allocation holding every tensor */
	size_t mem_len; /* bytes of mem */
	nf_model_source *source; /* owned; NULL unless the loader keeps its file (GGUF) */
} nf_model;

/* Check a config for consistency and bounds (dim % n_heads == 0, n_heads %
 * n_kv_heads == 0, all within the NF_MODEL_MAX_* limits, a known arch, rope
 * scaling parameters the formula can use).  NF_EINPUT with a
 * message naming the offending field; `what` (file name) prefixes it. */
int nf_model_config_validate(const nf_model_config *cfg, const char *what);

static inline int32_t nf_model_head_size(const nf_model_config *c) { return c->dim / c->n_heads; }
static inline int32_t nf_model_kv_dim(const nf_model_config *c)
{
	return c->n_kv_heads * (c->dim / c->n_heads);
}

/* Number of float32 parameters (wcls counted once when shared, biases only
 * where the architecture has them); overflow-checked. */
int nf_model_param_count(size_t *out, const nf_model_config *cfg);

/* Allocate a zeroed model for cfg with every tensor pointer carved from one
 * block, in the order of the architecture's table (wcls aliases
 * token_embedding when shared; absent tensors are NULL).  Caller owns *out. */
int nf_model_alloc(nf_model **out, const nf_model_config *cfg);

/* A zeroed model of one layer of cfg: its config with n_layers 1, the
 * per-layer tensors only (the embedding, final norm and classifier NULL),
 * for the builders that work a layer at a time. */
int nf_model_alloc_layer(nf_model **out, const nf_model_config *cfg);
/* The slot of tensor `id` (an nf_arch_tensor id) in m->w, or NULL for an id
 * out of range. */
float **nf_model_slot(nf_model *m, int id);

/* The checkpoint's own blocks of tensor `tensor_id` (an nf_arch_tensor id)
 * at `layer` (0 for a global tensor), in the model's row order, and their
 * ggml type (engine/gguf.h nf_ggml_type) in *ggml_type: what an engine
 * builder takes over instead of re-quantizing the float copy (GGUF
 * Q4_0/Q4_1 into int4, nf_quant_int4_from_gguf).  NULL (and *ggml_type
 * -1) when the loader kept none: every loader but GGUF's, a tensor the
 * GGUF loader re-ordered (q and k rows of a rotate-half architecture), or
 * an id or layer out of range.  Borrowed: valid until nf_model_free. */
const void *nf_model_source_blocks(const nf_model *m, int tensor_id, int layer, int *ggml_type);

/* For loaders: keep `owner` (what maps the blocks) with the model, released
 * by release(owner) in nf_model_free; on error the caller still owns it. */
int nf_model_source_init(nf_model *m, void *owner, void (*release)(void *owner));
/* For loaders, after nf_model_source_init: record the blocks of a tensor. */
void nf_model_source_set(nf_model *m, int tensor_id, int layer, const void *blocks,
			 int ggml_type);

/* Free a model (and release what its source keeps); NULL is fine. */
void nf_model_free(nf_model *m);

#endif
