/*
 * model.h - a Llama-family model held in memory as float32, in llama2.c's
 * layout: per-layer tensors stacked along a leading layer axis, matrices
 * row-major (out, in) so that y = W x.  Every checkpoint loader produces one
 * of these; quantization and engine writing consume it.
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

typedef struct nf_model_config {
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
} nf_model_weights;

typedef struct nf_model {
	nf_model_config cfg;
	nf_model_weights w;
	void *mem;      /* owned: one allocation holding every tensor */
	size_t mem_len; /* bytes of mem */
} nf_model;

/* Check a config for consistency and bounds (dim % n_heads == 0, n_heads %
 * n_kv_heads == 0, all within the NF_MODEL_MAX_* limits).  NF_EINPUT with a
 * message naming the offending field; `what` (file name) prefixes it. */
int nf_model_config_validate(const nf_model_config *cfg, const char *what);

static inline int32_t nf_model_head_size(const nf_model_config *c) { return c->dim / c->n_heads; }
static inline int32_t nf_model_kv_dim(const nf_model_config *c)
{
	return c->n_kv_heads * (c->dim / c->n_heads);
}

/* Number of float32 parameters (wcls counted once when shared); overflow-checked. */
int nf_model_param_count(size_t *out, const nf_model_config *cfg);

/* Allocate a zeroed model for cfg with every tensor pointer carved from one
 * block (wcls aliases token_embedding when shared).  Caller owns *out. */
int nf_model_alloc(nf_model **out, const nf_model_config *cfg);

/* Free a model; NULL is fine. */
void nf_model_free(nf_model *m);

#endif
