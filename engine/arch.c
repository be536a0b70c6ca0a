/*
 * arch.c - the tensor table of each architecture and the GGUF metadata key
 * table (see arch.h), and the RoPE inverse frequencies.
 */
#include "engine/arch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/kmath/rope.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

/* The rows every table shares, by tensor (one line each, so that the three
 * tables below differ only where the architectures do). */
#define LAYER "model.layers.%d."
#define T_EMB {NF_T_EMB, "token_embedding", "token_embd.weight", "model.embed_tokens.weight", \
	       false, NF_D_VOCAB, NF_D_DIM, NF_W_ALWAYS, true, NF_R_NONE}
#define T_RMS_ATT {NF_T_RMS_ATT, "rms_att", "blk.%d.attn_norm.weight", LAYER "input_layernorm.weight", \
		   true, NF_D_DIM, NF_D_NONE, NF_W_ALWAYS, false, NF_R_NONE}
#define T_WQ {NF_T_WQ, "wq", "blk.%d.attn_q.weight", LAYER "self_attn.q_proj.weight", \
	      true, NF_D_DIM, NF_D_DIM, NF_W_ALWAYS, true, NF_R_Q}
#define T_WK {NF_T_WK, "wk", "blk.%d.attn_k.weight", LAYER "self_attn.k_proj.weight", \
	      true, NF_D_KV, NF_D_DIM, NF_W_ALWAYS, true, NF_R_KV}
#define T_WV {NF_T_WV, "wv", "blk.%d.attn_v.weight", LAYER "self_attn.v_proj.weight", \
	      true, NF_D_KV, NF_D_DIM, NF_W_ALWAYS, true, NF_R_NONE}
#define T_WO {NF_T_WO, "wo", "blk.%d.attn_output.weight", LAYER "self_attn.o_proj.weight", \
	      true, NF_D_DIM, NF_D_DIM, NF_W_ALWAYS, true, NF_R_NONE}
#define T_BQ(w) {NF_T_BQ, "bq", "blk.%d.attn_q.bias", LAYER "self_attn.q_proj.bias", \
		 true, NF_D_DIM, NF_D_NONE, w, false, NF_R_Q}
#define T_BK(w) {NF_T_BK, "bk", "blk.%d.attn_k.bias", LAYER "self_attn.k_proj.bias", \
		 true, NF_D_KV, NF_D_NONE, w, false, NF_R_KV}
#define T_BV(w) {NF_T_BV, "bv", "blk.%d.attn_v.bias", LAYER "self_attn.v_proj.bias", \
		 true, NF_D_KV, NF_D_NONE, w, false, NF_R_NONE}
#define T_BO(w) {NF_T_BO, "bo", "blk.%d.attn_output.bias", LAYER "self_attn.o_proj.bias", \
		 true, NF_D_DIM, NF_D_NONE, w, false, NF_R_NONE}
#define T_RMS_FFN {NF_T_RMS_FFN, "rms_ffn", "blk.%d.ffn_norm.weight", \
		   LAYER "post_attention_layernorm.weight", true, NF_D_DIM, NF_D_NONE, NF_W_ALWAYS, \
		   false, NF_R_NONE}
#define T_W1 {NF_T_W1, "w1", "blk.%d.ffn_gate.weight", LAYER "mlp.gate_proj.weight", \
	      true, NF_D_HIDDEN, NF_D_DIM, NF_W_ALWAYS, true, NF_R_NONE}
#define T_W2 {NF_T_W2, "w2", "blk.%d.ffn_down.weight", LAYER "mlp.down_proj.weight", \
	      true, NF_D_DIM, NF_D_HIDDEN, NF_W_ALWAYS, true, NF_R_NONE}
#define T_W3 {NF_T_W3, "w3", "blk.%d.ffn_up.weight", LAYER "mlp.up_proj.weight", \
	      true, NF_D_HIDDEN, NF_D_DIM, NF_W_ALWAYS, true, NF_R_NONE}
#define T_RMS_FINAL {NF_T_RMS_FINAL, "rms_final", "output_norm.weight", "model.norm.weight", \
		     false, NF_D_DIM, NF_D_NONE, NF_W_ALWAYS, false, NF_R_NONE}
#define T_WCLS {NF_T_WCLS, "wcls", "output.weight", "lm_head.weight", \
		false, NF_D_VOCAB, NF_D_DIM, NF_W_UNTIED, true, NF_R_NONE}

/* Order: llama2.c's file order (the classifier last), biases after their
 * matrices.  A Llama without biases keeps the engine file of before. */
static const nf_arch_tensor llama_tensors[] = {
	T_EMB, T_RMS_ATT, T_WQ, T_BQ(NF_W_ATTN_BIAS), T_WK, T_BK(NF_W_ATTN_BIAS), T_WV,
	T_BV(NF_W_ATTN_BIAS), T_WO, T_BO(NF_W_ATTN_BIAS), T_RMS_FFN, T_W1, T_W2, T_W3,
	T_RMS_FINAL, T_WCLS,
};
/* transformers' Mistral has no biases (attention_bias is not read). */
static const nf_arch_tensor mistral_tensors[] = {
	T_EMB, T_RMS_ATT, T_WQ, T_WK, T_WV, T_WO, T_RMS_FFN, T_W1, T_W2, T_W3, T_RMS_FINAL, T_WCLS,
};
/* Qwen2: q, k and v biases always, none on o. */
static const nf_arch_tensor qwen2_tensors[] = {
	T_EMB, T_RMS_ATT, T_WQ, T_BQ(NF_W_ALWAYS), T_WK, T_BK(NF_W_ALWAYS), T_WV,
	T_BV(NF_W_ALWAYS), T_WO, T_RMS_FFN, T_W1, T_W2, T_W3, T_RMS_FINAL, T_WCLS,
};

#define TABLE(t) t, sizeof(t) / sizeof((t)[0])
static const nf_arch archs[NF_ARCH_COUNT] = {
	{NF_ARCH_LLAMA, "llama", "llama", "LlamaForCausalLM", "llama", false, TABLE(llama_tensors)},
	{NF_ARCH_MISTRAL, "mistral", "mistral", "MistralForCausalLM", NULL, false,
	 TABLE(mistral_tensors)},
	{NF_ARCH_QWEN2, "qwen2", "qwen2", "Qwen2ForCausalLM", "qwen2", true, TABLE(qwen2_tensors)},
};

const nf_arch *nf_arch_get(nf_arch_id id)
{
	return (unsigned)id < NF_ARCH_COUNT ? &archs[id] : NULL;
}

/* The arch whose string at byte offset `field` equals s (len bytes). */
static const nf_arch *by_field(size_t field, const char *s, size_t len)
{
	for (int i = 0; s && i < NF_ARCH_COUNT; i++) {
		const char *v = *(const char *const *)((const char *)&archs[i] + field);
		if (v && strlen(v) == len && memcmp(v, s, len) == 0)
			return &archs[i];
	}
	return NULL;
}

const nf_arch *nf_arch_by_name(const char *name)
{
	return by_field(offsetof(nf_arch, name), name, name ? strlen(name) : 0);
}

const nf_arch *nf_arch_by_hf_model_type(const char *t)
{
	return by_field(offsetof(nf_arch, hf_model_type), t, t ? strlen(t) : 0);
}

const nf_arch *nf_arch_by_hf_class(const char *cls)
{
	return by_field(offsetof(nf_arch, hf_class), cls, cls ? strlen(cls) : 0);
}

const nf_arch *nf_arch_by_gguf(const char *name, size_t len)
{
	return by_field(offsetof(nf_arch, gguf_name), name, len);
}

const nf_arch_tensor *nf_arch_find(const nf_arch *a, nf_tensor_id id)
{
	for (size_t i = 0; i < a->n_tensors; i++)
		if (a->tensors[i].id == id)
			return &a->tensors[i];
	return NULL;
}

bool nf_arch_present(const nf_arch_tensor *t, const nf_model_config *c)
{
	switch (t->when) {
	case NF_W_UNTIED: return !c->shared_classifier;
	case NF_W_ATTN_BIAS: return c->attention_bias;
	default: return true;
	}
}

uint64_t nf_arch_dim_value(nf_arch_dim d, const nf_model_config *c)
{
	switch (d) {
	case NF_D_DIM: return (uint64_t)c->dim;
	case NF_D_KV: return (uint64_t)nf_model_kv_dim(c);
	case NF_D_HIDDEN: return (uint64_t)c->hidden_dim;
	case NF_D_VOCAB: return (uint64_t)c->vocab_size;
	default: return 1;
	}
}

bool nf_arch_slice_elems(uint64_t *out, const nf_arch_tensor *t, const nf_model_config *c)
{
	return nf_u64_mul(out, nf_arch_dim_value(t->rows, c), nf_arch_dim_value(t->cols, c));
}

bool nf_arch_elems(uint64_t *out, const nf_arch_tensor *t, const nf_model_config *c)
{
	return nf_arch_slice_elems(out, t, c) &&
	       (!t->per_layer || nf_u64_mul(out, *out, (uint64_t)c->n_layers));
}

int nf_arch_format_name(char *buf, size_t cap, const char *pattern, int layer)
{
	/* the patterns are this file's literals with at most one %d */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	int n = snprintf(buf, cap, pattern, layer);
#pragma GCC diagnostic pop
	if (n < 0 || (size_t)n >= cap)
		return nf_error_set(NF_EINTERNAL, "tensor name \"%s\" too long", pattern);
	return 0;
}

/* ---- RoPE ---- */

int nf_arch_rope_validate(const nf_rope_scaling *s, const char *what)
{
	if (s->type == NF_ROPE_DEFAULT)
		return 0;
	if (s->type != NF_ROPE_LLAMA3)
		return nf_error_set(NF_EINPUT, "%s: unknown rope scaling type %d", what, (int)s->type);
	if (!isfinite(s->factor) || s->factor <= 0.0f || s->factor > 1e6f)
		return nf_error_set(NF_EINPUT, "%s: rope_scaling factor %g must be a finite number "
				    "above 0", what, (double)s->factor);
	if (!isfinite(s->low_freq_factor) || s->low_freq_factor <= 0.0f ||
	    !isfinite(s->high_freq_factor) || s->high_freq_factor <= s->low_freq_factor ||
	    s->high_freq_factor > 1e6f)
		return nf_error_set(NF_EINPUT, "%s: rope_scaling low_freq_factor %g and "
				    "high_freq_factor %g must be finite with 0 < low < high", what,
				    (double)s->low_freq_factor, (double)s->high_freq_factor);
	if (s->original_max_pos <= 0 || s->original_max_pos > NF_MODEL_MAX_SEQ)
		return nf_error_set(NF_EINPUT, "%s: rope_scaling original_max_position_embeddings %d "
				    "is out of range (1..%d)", what, (int)s->original_max_pos,
				    NF_MODEL_MAX_SEQ);
	return 0;
}

void nf_arch_rope_inv_freq(float *out, const nf_model_config *c)
{
	/* the per-pair math is engine/kmath/rope.h's, shared with the CUDA kernels */
	const nf_rope_scaling *s = &c->rope_scaling;
	int hs = nf_model_head_size(c);
	for (int i = 0; i < hs / 2; i++) {
		out[i] = nf_km_rope_inv_freq(i, hs, c->rope_theta);
		if (c->rope_scaling.type == NF_ROPE_LLAMA3)
			out[i] = nf_km_rope_llama3(out[i], s->factor, s->low_freq_factor,
						   s->high_freq_factor, s->original_max_pos);
	}
}

/* ---- GGUF metadata keys ---- */

static const nf_arch_gguf_key gguf_keys[] = {
	{"block_count", NF_F_N_LAYERS, NF_V_INT, true, 1, NF_MODEL_MAX_LAYERS},
	{"embedding_length", NF_F_DIM, NF_V_INT, true, 1, NF_MODEL_MAX_DIM},
	{"feed_forward_length", NF_F_HIDDEN, NF_V_INT, true, 1, NF_MODEL_MAX_HIDDEN},
	{"attention.head_count", NF_F_N_HEADS, NF_V_INT, true, 1, NF_MODEL_MAX_HEADS},
	{"attention.head_count_kv", NF_F_N_KV_HEADS, NF_V_INT, false, 1, NF_MODEL_MAX_HEADS},
	{"rope.freq_base", NF_F_ROPE_THETA, NF_V_FLOAT, false, 1.0000001, 1e12},
	{"rope.scaling.type", NF_F_ROPE_TYPE, NF_V_STRING, false, 0, 0},
	{"rope.scaling.factor", NF_F_ROPE_FACTOR, NF_V_FLOAT, false, 1e-6, 1e6},
	{"rope.scaling.original_context_length", NF_F_ROPE_ORIG_CTX, NF_V_INT, false, 1,
	 NF_MODEL_MAX_SEQ},
	{"attention.layer_norm_rms_epsilon", NF_F_NORM_EPS, NF_V_FLOAT, true, 1e-12, 0.5},
	{"context_length", NF_F_MAX_SEQ, NF_V_INT, true, 1, 1e12},
	{"vocab_size", NF_F_VOCAB, NF_V_INT, false, 1, NF_MODEL_MAX_VOCAB},
};

const nf_arch_gguf_key *nf_arch_gguf_keys(size_t *n)
{
	*n = sizeof gguf_keys / sizeof gguf_keys[0];
	return gguf_keys;
}

int nf_arch_gguf_set(nf_model_config *c, const nf_arch_gguf_key *k, double v, const char *what)
{
	if (k->type == NF_V_STRING || !(v >= k->min && v <= k->max) ||
	    (k->type == NF_V_INT && v != floor(v)))
		return nf_error_set(NF_EINPUT, "%s: %s %g is out of range (%g..%g)", what, k->suffix, v,
				    k->min, k->max);
	/* a long context is capped, not refused: the engine allocates per its
	 * max_seq_len, and positions past the cap are refused at run time */
	if (k->field == NF_F_MAX_SEQ && v > NF_MODEL_MAX_SEQ)
		v = NF_MODEL_MAX_SEQ;
	switch (k->field) {
	case NF_F_N_LAYERS: c->n_layers = (int32_t)v; break;
	case NF_F_DIM: c->dim = (int32_t)v; break;
	case NF_F_HIDDEN: c->hidden_dim = (int32_t)v; break;
	case NF_F_N_HEADS: c->n_heads = (int32_t)v; break;
	case NF_F_N_KV_HEADS: c->n_kv_heads = (int32_t)v; break;
	case NF_F_ROPE_THETA: c->rope_theta = (float)v; break;
	case NF_F_ROPE_FACTOR: c->rope_scaling.factor = (float)v; break;
	case NF_F_ROPE_ORIG_CTX: c->rope_scaling.original_max_pos = (int32_t)v; break;
	case NF_F_NORM_EPS: c->norm_eps = (float)v; break;
	case NF_F_MAX_SEQ: c->max_seq_len = (int32_t)v; break;
	case NF_F_VOCAB: c->vocab_size = (int32_t)v; break;
	default: return nf_error_set(NF_EINTERNAL, "%s: %s is not a number", what, k->suffix);
	}
	return 0;
}

int nf_arch_gguf_rope_type(nf_model_config *c, const char *s, size_t len, const char *what)
{
	static const char *const known[] = {"linear", "yarn", "longrope"};
	if (len == 4 && memcmp(s, "none", 4) == 0) {
		c->rope_scaling.type = NF_ROPE_DEFAULT;
		return 0;
	}
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		if (strlen(known[i]) == len && memcmp(s, known[i], len) == 0)
			return nf_error_set(NF_EUNSUPPORTED, "%s: rope scaling \"%s\" is not supported",
					    what, known[i]);
	return nf_error_set(NF_EINPUT, "%s: unknown rope scaling type \"%.*s\"", what,
			    (int)(len > 64 ? 64 : len), s);
}

int nf_arch_rope_heads(const nf_arch_tensor *t, const nf_model_config *c)
{
	return t->rope == NF_R_Q ? c->n_heads : t->rope == NF_R_KV ? c->n_kv_heads : 0;
}

void nf_arch_permute_rows(float *dst, const float *src, int heads, int hs, int cols, bool to_hf)
{
	int half = hs / 2;
	for (int h = 0; h < heads; h++)
		for (int j = 0; j < 2; j++)
			for (int i = 0; i < half; i++) {
				size_t hf = (size_t)(h * hs + j * half + i) * (size_t)cols;
				size_t l2 = (size_t)(h * hs + 2 * i + j) * (size_t)cols;
				if (to_hf)
					memcpy(dst + hf, src + l2, (size_t)cols * sizeof(float));
				else
					memcpy(dst + l2, src + hf, (size_t)cols * sizeof(float));
			}
}
