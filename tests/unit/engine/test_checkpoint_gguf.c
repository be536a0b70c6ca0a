/*
 * test_checkpoint_gguf.c - GGUF files into float32 models
 * (engine/checkpoint_gguf.c): small synthetic llama (tied, untied) and qwen2
 * (biases, rotate-half q/k in the file) models written as GGUF here with
 * the writer load back exactly; the Hugging Face copy (rotate-half) and the
 * GGUF copy (interleaved) of the same weights give the same logits; a Q8_0
 * tensor is dequantized on the way in; every fact the metadata states that
 * disagrees with the tensors is refused with the file and, where it
 * applies, the offset; and the real SmolLM2 file has the configuration its
 * README gives.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/arch.h"
#include "engine/checkpoint.h"
#include "engine/gguf_write.h"
#include "engine/reference.h"
#include "tests/rng.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"

static char root[1024];

static nf_model_config base_cfg(nf_arch_id arch, bool tied)
{
	nf_model_config c = {0};
	c.arch = arch;
	c.dim = 64;
	c.hidden_dim = 96;
	c.n_layers = 2;
	c.n_heads = 4;
	c.n_kv_heads = 2;
	c.vocab_size = 96;
	c.max_seq_len = 64;
	c.norm_eps = 1e-5f;
	c.rope_theta = 10000.0f;
	c.shared_classifier = tied;
	return c;
}

static nf_model *synth(const nf_model_config *c, uint64_t seed)
{
	nf_model *m = NULL;
	size_t n;
	if (nf_model_alloc(&m, c) || nf_model_param_count(&n, c))
		return NULL;
	for (size_t i = 0; i < n; i++)
		((float *)m->mem)[i] = nf_test_unif(&seed, 0.2);
	return m;
}

/* What a lying file changes: each field overrides the model's fact. */
typedef struct lie {
	const char *arch;         /* general.architecture (NULL: the model's) */
	int64_t block_count;      /* 0: the model's */
	int64_t head_count_kv;    /* 0: the model's */
	float freq_base;          /* 0: the model's */
	float eps;                /* 0: the model's */
	int64_t n_tokens;         /* tokenizer.ggml.tokens count (0: none written) */
	const char *drop;         /* a tensor left out */
	const char *extra;        /* an extra 1-D tensor of 4 floats */
	int wq_q8;                /* layer 0's attn_q as Q8_0 */
	int64_t rope_dims;        /* rope.dimension_count (0: not written) */
} lie;

static int put_meta(nf_gguf_writer *w, const nf_model_config *c, const char *arch, const lie *l)
{
	char k[128];
	int err = nf_gguf_writer_add_str(w, "general.architecture", arch, strlen(arch));
#define U32(suffix, v)                                                        \
	snprintf(k, sizeof k, "%s.%s", arch, suffix);                         \
	if (!err)                                                             \
		err = nf_gguf_writer_add_u32(w, k, (uint32_t)(v));
#define F32(suffix, v)                                                        \
	snprintf(k, sizeof k, "%s.%s", arch, suffix);                         \
	if (!err)                                                             \
		err = nf_gguf_writer_add_f32(w, k, (v));
	U32("block_count", l->block_count ? l->block_count : c->n_layers);
	U32("embedding_length", c->dim);
	U32("feed_forward_length", c->hidden_dim);
	U32("attention.head_count", c->n_heads);
	U32("attention.head_count_kv", l->head_count_kv ? l->head_count_kv : c->n_kv_heads);
	U32("context_length", c->max_seq_len);
	F32("rope.freq_base", l->freq_base != 0 ? l->freq_base : c->rope_theta);
	F32("attention.layer_norm_rms_epsilon", l->eps != 0 ? l->eps : c->norm_eps);
	if (l->rope_dims) {
		U32("rope.dimension_count", l->rope_dims);
	}
#undef U32
#undef F32
	if (!err && l->n_tokens) {
		const char **toks = calloc((size_t)l->n_tokens, sizeof *toks);
		for (int64_t i = 0; toks && i < l->n_tokens; i++)
			toks[i] = "x";
		err = toks ? nf_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks,
							  (uint64_t)l->n_tokens)
			   : -1;
		free(toks);
	}
	return err;
}

/* One table tensor's slice at layer l, rotate-half permuted when the
 * architecture's GGUF keeps q/k that way, as F32 or Q8_0. */
static int put_slice(nf_gguf_writer *w, const nf_model *m, const nf_arch *a,
		     const nf_arch_tensor *t, int l, const lie *li)
{
	const nf_model_config *c = &m->cfg;
	char name[128];
	uint64_t rows = nf_arch_dim_value(t->rows, c), slice;
	uint64_t cols = t->cols == NF_D_NONE ? 0 : nf_arch_dim_value(t->cols, c);
	nf_arch_slice_elems(&slice, t, c);
	nf_arch_format_name(name, sizeof name, t->gguf, l);
	if (li->drop && strcmp(li->drop, name) == 0)
		return 0;
	const float *src = *nf_model_slot((nf_model *)m, t->id) + (size_t)l * slice;
	float *buf = malloc(slice * sizeof(float));
	int heads = a->gguf_rotate_half ? nf_arch_rope_heads(t, c) : 0, err;
	if (!buf)
		return -1;
	if (heads)
		nf_arch_permute_rows(buf, src, heads, nf_model_head_size(c), cols ? (int)cols : 1, true);
	else
		memcpy(buf, src, slice * sizeof(float));
	uint64_t ne[2] = {cols ? cols : rows, rows};
	if (li->wq_q8 && t->id == NF_T_WQ && l == 0) {
		/* Q8_0: per 32 values an fp16 scale then 32 int8 (x = d * q) */
		size_t nb = slice / 32;
		uint8_t *q = malloc(nb * 34);
		for (size_t b = 0; q && b < nb; b++) {
			uint16_t d = nf_f32_to_f16(1.0f / 64);
			memcpy(q + b * 34, &d, 2);
			for (int j = 0; j < 32; j++)
				q[b * 34 + 2 + j] = (uint8_t)(int8_t)(j - 16);
		}
		err = q ? nf_gguf_writer_add_tensor(w, name, NF_GGML_Q8_0, 2, ne, q, nb * 34) : -1;
		free(q);
	} else {
		err = nf_gguf_writer_add_tensor(w, name, NF_GGML_F32, cols ? 2 : 1, ne, buf,
						slice * sizeof(float));
	}
	free(buf);
	return err;
}

/* m as a GGUF file at path, with the lies of l. */
static int write_gguf(const char *path, const nf_model *m, const lie *l)
{
	const nf_model_config *c = &m->cfg;
	const nf_arch *a = nf_arch_get(c->arch);
	nf_gguf_writer *w = NULL;
	const char *arch = l->arch ? l->arch : a->gguf_name ? a->gguf_name : "llama";
	int err = nf_gguf_writer_new(&w) || put_meta(w, c, arch, l);
	for (size_t i = 0; !err && i < a->n_tensors; i++) {
		const nf_arch_tensor *t = &a->tensors[i];
		if (!nf_arch_present(t, c))
			continue;
		for (int ly = 0; !err && ly < (t->per_layer ? c->n_layers : 1); ly++)
			err = put_slice(w, m, a, t, ly, l);
	}
	if (!err && l->extra) {
		float four[4] = {1, 2, 3, 4};
		uint64_t ne[1] = {4};
		err = nf_gguf_writer_add_tensor(w, l->extra, NF_GGML_F32, 1, ne, four, sizeof four);
	}
	if (!err)
		err = nf_gguf_writer_write(w, path);
	nf_gguf_writer_free(w);
	return err;
}

static int same_weights(const nf_model *a, const nf_model *b)
{
	size_t n;
	return a->cfg.arch == b->cfg.arch && a->cfg.dim == b->cfg.dim &&
	       a->cfg.n_layers == b->cfg.n_layers && a->cfg.n_kv_heads == b->cfg.n_kv_heads &&
	       a->cfg.vocab_size == b->cfg.vocab_size &&
	       a->cfg.shared_classifier == b->cfg.shared_classifier &&
	       a->cfg.attention_bias == b->cfg.attention_bias && !nf_model_param_count(&n, &a->cfg) &&
	       a->mem_len == b->mem_len && memcmp(a->mem, b->mem, n * sizeof(float)) == 0;
}

/* The reference's logits of 12 positions must be bit-identical. */
static int same_logits(const nf_model *a, const nf_model *b)
{
	nf_ref_state *s = NULL, *t = NULL;
	int same = !nf_ref_state_new(&s, a) && !nf_ref_state_new(&t, b);
	for (int p = 0; same && p < 12; p++) {
		const float *x = nf_ref_forward(s, (7 * p + 3) % 96, p);
		const float *y = nf_ref_forward(t, (7 * p + 3) % 96, p);
		same = x && y && memcmp(x, y, 96 * sizeof(float)) == 0;
	}
	nf_ref_state_free(s);
	nf_ref_state_free(t);
	return same;
}

static void test_round_trip(const char *label, nf_arch_id arch, bool tied)
{
	nf_model_config c = base_cfg(arch, tied);
	nf_model *m = synth(&c, 7 + (uint64_t)arch * 3 + tied), *g = NULL, *h = NULL;
	char path[1200], hf[1200];
	lie none = {0};
	snprintf(path, sizeof path, "%s/%s.gguf", root, label);
	snprintf(hf, sizeof hf, "%s/%s-hf", root, label);
	ok(m && write_gguf(path, m, &none) == 0, "%s: written as GGUF", label);
	is_int(nf_ckpt_load(&g, path, NF_CKPT_AUTO), 0, "%s: loads (format sniffed) %s", label,
	       nf_error_last());
	ok(g && same_weights(m, g), "%s: every weight exact, config equal", label);
	ok(g && g->cfg.rope_theta == c.rope_theta && g->cfg.norm_eps == c.norm_eps,
	   "%s: rope base and epsilon read", label);
	is_int(nf_ckpt_write_hf(hf, m, NF_DTYPE_F32), 0, "%s: the same weights written as HF", label);
	is_int(nf_ckpt_load(&h, hf, NF_CKPT_HF), 0, "%s: HF copy loads", label);
	ok(g && h && same_logits(g, h), "%s: the HF copy (rotate-half) and the GGUF copy give the "
	   "same logits", label);
	nf_model_free(m);
	nf_model_free(g);
	nf_model_free(h);
}

static void test_q8(void)
{
	nf_model_config c = base_cfg(NF_ARCH_LLAMA, true);
	nf_model *m = synth(&c, 99), *g = NULL;
	char path[1200];
	lie q8 = {.wq_q8 = 1};
	snprintf(path, sizeof path, "%s/q8.gguf", root);
	ok(m && write_gguf(path, m, &q8) == 0, "a file with a Q8_0 attn_q written");
	is_int(nf_ckpt_load_gguf(&g, path), 0, "it loads %s", nf_error_last());
	int good = g != NULL;
	for (int i = 0; good && i < 64 * 64; i++)
		good = g->w.wq[i] == (float)((i % 32) - 16) / 64.0f;
	ok(good, "its values are d * q exactly");
	ok(g && memcmp(g->w.wq + 64 * 64, m->w.wq + 64 * 64, 64 * 64 * sizeof(float)) == 0,
	   "layer 1 (F32) untouched");
	nf_model_free(m);
	nf_model_free(g);
}

/* Writes m with lie l; the load must fail with code and a message holding want. */
static void refused(const char *label, const lie *l, int code, const char *want)
{
	nf_model_config c = base_cfg(NF_ARCH_LLAMA, true);
	nf_model *m = synth(&c, 5), *g = NULL;
	char path[1200];
	snprintf(path, sizeof path, "%s/lie.gguf", root);
	if (!m || write_gguf(path, m, l)) {
		ok(0, "%s: could not write the file", label);
		nf_model_free(m);
		return;
	}
	int err = nf_ckpt_load_gguf(&g, path);
	ok(err == code && strstr(nf_error_last(), want) && strstr(nf_error_last(), "lie.gguf"),
	   "%s refused: %s", label, nf_error_last());
	ok(g == NULL, "%s: no model", label);
	nf_model_free(m);
	nf_model_free(g);
}

static void test_lies(void)
{
	refused("more blocks than tensors", &(lie){.block_count = 3}, NF_EINPUT,
		"blk.2.attn_norm.weight is missing");
	refused("fewer blocks than tensors", &(lie){.block_count = 1}, NF_EINPUT,
		"past block_count 1");
	refused("head_count_kv against attn_k's shape", &(lie){.head_count_kv = 4}, NF_EINPUT,
		"blk.0.attn_k.weight has shape [64, 32], the metadata says [64, 64]");
	refused("head_count_kv not dividing head_count", &(lie){.head_count_kv = 3}, NF_EINPUT,
		"n_kv_heads");
	refused("vocabulary against the tokens", &(lie){.n_tokens = 95}, NF_EINPUT,
		"tokenizer.ggml.tokens has 95 tokens, the model 96");
	refused("a NaN RoPE base", &(lie){.freq_base = NAN}, NF_EINPUT, "rope.freq_base");
	refused("a negative RoPE base", &(lie){.freq_base = -10000}, NF_EINPUT, "rope.freq_base");
	refused("a negative epsilon", &(lie){.eps = -1e-5f}, NF_EINPUT,
		"attention.layer_norm_rms_epsilon");
	refused("a missing tensor", &(lie){.drop = "blk.1.ffn_down.weight"}, NF_EINPUT,
		"blk.1.ffn_down.weight is missing");
	refused("another architecture", &(lie){.arch = "gpt2"}, NF_EUNSUPPORTED,
		"\"gpt2\" is not supported");
	refused("per-dimension RoPE factors", &(lie){.extra = "rope_freqs.weight"},
		NF_EUNSUPPORTED, "rope_freqs.weight");
	refused("a head size other than dim / heads", &(lie){.rope_dims = 8}, NF_EUNSUPPORTED,
		"rope.dimension_count 8");
	refused("a layer past the count", &(lie){.extra = "blk.7.attn_q.bias"}, NF_EINPUT,
		"blk.7.attn_q.bias is past block_count 2");
}

static void test_smollm2(void)
{
	char path[1024];
	nf_model *m = NULL;
	snprintf(path, sizeof path, "%s/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf",
		 tap_env("NF_SHARED", "../shared"));
	if (!nf_fs_exists(path)) {
		skip("no %s", path);
		return;
	}
	is_int(nf_ckpt_load(&m, path, NF_CKPT_AUTO), 0, "SmolLM2 loads %s", nf_error_last());
	if (!m)
		return;
	const nf_model_config *c = &m->cfg;
	ok(c->arch == NF_ARCH_LLAMA && c->n_layers == 30 && c->dim == 576 && c->hidden_dim == 1536 &&
	   c->n_heads == 9 && c->n_kv_heads == 3 && c->vocab_size == 49152 &&
	   c->max_seq_len == 8192 && c->shared_classifier,
	   "SmolLM2: llama, 30 blocks, 576 wide, 1536 feed-forward, 9 heads over 3 KV heads, "
	   "49,152 tokens, 8192 context, tied classifier");
	ok(c->rope_theta == 100000.0f && fabsf(c->norm_eps - 1e-5f) < 1e-12f,
	   "SmolLM2: RoPE base 100000, epsilon 1e-5");
	int finite = 1;
	size_t n;
	nf_model_param_count(&n, c);
	for (size_t i = 0; i < n && finite; i++)
		finite = isfinite(((float *)m->mem)[i]);
	ok(finite, "SmolLM2: all %zu dequantized weights finite", n);
	nf_model_free(m);
}

int main(void)
{
	snprintf(root, sizeof root, "%s/tmp/test_ckpt_gguf.%d", tap_env("NF_BUILD", "build"),
		 (int)getpid());
	if (nf_fs_mkdir_p(root, 0755))
		return 1;
	test_round_trip("llama-tied", NF_ARCH_LLAMA, true);
	test_round_trip("llama-untied", NF_ARCH_LLAMA, false);
	test_round_trip("qwen2", NF_ARCH_QWEN2, true);
	test_q8();
	test_lies();
	test_smollm2();
	nf_fs_remove_tree(root);
	return done_testing();
}
