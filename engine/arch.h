/*
 * arch.h - architectures as data: one table per architecture of its tensors
 * (our engine's name, the GGUF name, the Hugging Face name, per layer or
 * global, the shape in symbolic config dimensions, when it exists, whether
 * it is a matrix that quantization applies to, whether HF stores it permuted
 * for rotate-half RoPE), the architecture's names in HF config.json and GGUF,
 * the GGUF metadata keys that fill a config, and the RoPE inverse
 * frequencies (with Llama 3 scaling).
 *
 * Every user of the tensor list reads it from here: nf_model_alloc, the
 * llama2.c and HF loaders and writers, the engine file, the forward pass's
 * views, the reference.  (llama.cpp keeps its lists the same way, in
 * src/llama-arch.cpp.)
 */
#ifndef NF_ENGINE_ARCH_H
#define NF_ENGINE_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/model.h"

/* Every tensor any architecture has; a table lists the ones its
 * architecture has.  Values index nf_model_slot. */
typedef enum nf_tensor_id {
	NF_T_EMB,       /* token embedding */
	NF_T_RMS_ATT,   /* attention RMSNorm weight */
	NF_T_WQ,
	NF_T_BQ,
	NF_T_WK,
	NF_T_BK,
	NF_T_WV,
	NF_T_BV,
	NF_T_WO,
	NF_T_BO,
	NF_T_RMS_FFN,   /* feed-forward RMSNorm weight */
	NF_T_W1,        /* gate */
	NF_T_W2,        /* down */
	NF_T_W3,        /* up */
	NF_T_RMS_FINAL,
	NF_T_WCLS,      /* classifier */
	NF_T_COUNT
} nf_tensor_id;

/* A symbolic dimension, resolved against a config by nf_arch_dim_value. */
typedef enum nf_arch_dim {
	NF_D_NONE,   /* no second dimension: a vector */
	NF_D_DIM,    /* dim */
	NF_D_KV,     /* kv_dim = n_kv_heads * head_size */
	NF_D_HIDDEN, /* hidden_dim */
	NF_D_VOCAB,  /* vocab_size */
} nf_arch_dim;

/* When a tensor of a table exists. */
typedef enum nf_arch_when {
	NF_W_ALWAYS,
	NF_W_UNTIED,     /* the classifier, when not shared with the embedding */
	NF_W_ATTN_BIAS,  /* cfg.attention_bias (Llama's optional biases) */
} nf_arch_when;

/* Which heads a tensor's rows are grouped in when HF stores them permuted
 * for rotate-half RoPE (the loader un-permutes, the writer permutes). */
typedef enum nf_arch_rope_rows {
	NF_R_NONE,
	NF_R_Q,  /* n_heads heads of head_size rows */
	NF_R_KV, /* n_kv_heads heads */
} nf_arch_rope_rows;

typedef struct nf_arch_tensor {
	nf_tensor_id id;
	const char *name;      /* engine file and nf_model: "wq" */
	const char *gguf;      /* "blk.%d.attn_q.weight" (%d: the layer) */
	const char *hf;        /* "model.layers.%d.self_attn.q_proj.weight" */
	bool per_layer;        /* stacked along a leading layer axis */
	nf_arch_dim rows;      /* first dimension (after the layer axis) */
	nf_arch_dim cols;      /* NF_D_NONE: a vector */
	nf_arch_when when;
	bool matrix;           /* quantized with the engine's precision; else F32 */
	nf_arch_rope_rows rope; /* HF copy permuted for rotate-half RoPE */
} nf_arch_tensor;

typedef struct nf_arch {
	nf_arch_id id;
	const char *name;          /* ours, in engine config.json: "llama" */
	const char *hf_model_type; /* config.json "model_type" */
	const char *hf_class;      /* config.json "architectures"[0] */
	/* GGUF general.architecture, or NULL: llama.cpp converts Mistral
	 * checkpoints to "llama", so a GGUF file never names "mistral". */
	const char *gguf_name;
	/* GGUF stores q/k rows (and biases) in rotate-half order (llama.cpp
	 * runs qwen2 with NEOX RoPE; it permutes llama's to interleaved). */
	bool gguf_rotate_half;
	const nf_arch_tensor *tensors; /* in nf_model, llama2.c and engine file order */
	size_t n_tensors;
} nf_arch;

/* The architecture of id; NULL when out of range. */
const nf_arch *nf_arch_get(nf_arch_id id);
/* Lookups by name; NULL when none matches (name may be NULL). */
const nf_arch *nf_arch_by_name(const char *name);        /* "llama", "mistral", "qwen2" */
const nf_arch *nf_arch_by_hf_model_type(const char *model_type);
const nf_arch *nf_arch_by_hf_class(const char *cls);     /* "Qwen2ForCausalLM" */
const nf_arch *nf_arch_by_gguf(const char *name, size_t len); /* not NUL-terminated */

/* The table entry of tensor id in arch a; NULL when a has none. */
const nf_arch_tensor *nf_arch_find(const nf_arch *a, nf_tensor_id id);
/* Whether t exists in a model of config c. */
bool nf_arch_present(const nf_arch_tensor *t, const nf_model_config *c);
/* The value of a symbolic dimension (1 for NF_D_NONE). */
uint64_t nf_arch_dim_value(nf_arch_dim d, const nf_model_config *c);
/* Elements of one layer's slice (rows * cols), and of the whole tensor
 * (times n_layers when per layer); false on overflow. */
bool nf_arch_slice_elems(uint64_t *out, const nf_arch_tensor *t, const nf_model_config *c);
bool nf_arch_elems(uint64_t *out, const nf_arch_tensor *t, const nf_model_config *c);
/* Format a GGUF or HF name pattern for `layer` into buf (cap bytes);
 * NF_EINTERNAL if it does not fit. */
int nf_arch_format_name(char *buf, size_t cap, const char *pattern, int layer);

/* Check rope scaling parameters (what names the source in messages):
 * NF_EINPUT for a factor <= 0 or not finite, high_freq_factor <=
 * low_freq_factor (the smoothing divides by their difference), a
 * non-positive original context. */
int nf_arch_rope_validate(const nf_rope_scaling *s, const char *what);
/* The RoPE inverse frequency of each pair of a head, head_size / 2 floats:
 * theta^(-2i/head_size), scaled as c->rope_scaling says (Llama 3: the
 * formula of transformers' _compute_llama3_parameters). */
void nf_arch_rope_inv_freq(float *out, const nf_model_config *c);

/* ---- GGUF metadata: "{arch}.<suffix>" keys to config fields, as data ---- */

typedef enum nf_arch_field {
	NF_F_N_LAYERS,
	NF_F_DIM,
	NF_F_HIDDEN,
	NF_F_N_HEADS,
	NF_F_N_KV_HEADS,   /* absent: n_heads */
	NF_F_ROPE_THETA,
	NF_F_ROPE_TYPE,    /* a string: "none" | "linear" | "yarn" | ... */
	NF_F_ROPE_FACTOR,
	NF_F_ROPE_ORIG_CTX,
	NF_F_NORM_EPS,
	NF_F_MAX_SEQ,
	NF_F_VOCAB,        /* absent: the token embedding's rows */
} nf_arch_field;

typedef enum nf_arch_vtype { NF_V_INT, NF_V_FLOAT, NF_V_STRING } nf_arch_vtype;

typedef struct nf_arch_gguf_key {
	const char *suffix;  /* after "{general.architecture}." */
	nf_arch_field field;
	nf_arch_vtype type;
	bool required;
	double min, max;     /* bounds of a number (inclusive) */
} nf_arch_gguf_key;

/* The table of keys (*n entries). */
const nf_arch_gguf_key *nf_arch_gguf_keys(size_t *n);
/* Set k's field of c from number v (INT or FLOAT keys): NF_EINPUT with
 * "what: key v is out of range (min..max)" when v is outside k's bounds or
 * not an integer for an INT key. */
int nf_arch_gguf_set(nf_model_config *c, const nf_arch_gguf_key *k, double v, const char *what);
/* Set c's rope type from a GGUF rope.scaling.type string (len bytes):
 * "none" is the default; another known type is NF_EUNSUPPORTED (llama.cpp
 * stores Llama 3 scaling as a rope_freqs tensor, not as a type). */
int nf_arch_gguf_rope_type(nf_model_config *c, const char *s, size_t len, const char *what);

/* The heads whose rows a rotate-half copy permutes in tensor t (0: none). */
int nf_arch_rope_heads(const nf_arch_tensor *t, const nf_model_config *c);
/* Rotate-half (HF; GGUF for qwen2) rows -> interleaved rows, per head of hs
 * rows of cols floats; or back when to_hf.  dst and src must not overlap. */
void nf_arch_permute_rows(float *dst, const float *src, int heads, int hs, int cols, bool to_hf);

#endif
