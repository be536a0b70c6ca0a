/*
 * checkpoint_gguf.c - a GGUF file (llama.cpp's format) as a checkpoint
 * reader (ckpt_reader.h): the config from the architecture's metadata keys
 * (arch.c's key table), the facts the metadata states checked against the
 * tensors before anything is allocated from them, and each slice
 * dequantized from the file mapping when asked.  The file's own blocks are
 * offered as they are, for engines that take them over.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/arch.h"
#include "engine/checkpoint.h"
#include "engine/ckpt_reader.h"
#include "engine/gguf.h"
#include "util/error.h"
#include "util/banned.h"

#define KEY_MAX 160

/* The architecture named by general.architecture. */
static int read_arch(const nf_arch **out, const nf_gguf *g)
{
	const char *s;
	size_t len;
	int err = nf_gguf_get_str(g, "general.architecture", &s, &len);
	if (err)
		return err;
	*out = nf_arch_by_gguf(s, len);
	if (!*out)
		return nf_error_set(NF_EUNSUPPORTED,
				    "%s: general.architecture \"%.*s\" is not supported (llama, qwen2)",
				    nf_gguf_path(g), (int)(len > 64 ? 64 : len), s);
	return 0;
}

/* One "{arch}.<suffix>" key into the config; absent optional keys keep the
 * default. */
static int read_key(nf_model_config *c, const nf_gguf *g, const char *arch,
		    const nf_arch_gguf_key *k)
{
	char key[KEY_MAX];
	const char *what = nf_gguf_path(g);
	int err;

	snprintf(key, sizeof key, "%s.%s", arch, k->suffix);
	if (k->type == NF_V_STRING) {
		const char *s;
		size_t len;
		err = nf_gguf_get_str(g, key, &s, &len);
		return err ? err : nf_arch_gguf_rope_type(c, s, len, what);
	}
	double v;
	if (k->type == NF_V_INT) {
		int64_t i;
		err = nf_gguf_get_i64(g, key, &i);
		v = (double)i;
	} else {
		float f;
		err = nf_gguf_get_f32(g, key, &f);
		v = f;
	}
	return err ? err : nf_arch_gguf_set(c, k, v, what);
}

/* The llama.cpp keys that restate head_size must agree with dim / n_heads. */
static int check_head_size(const nf_gguf *g, const char *arch, const nf_model_config *c)
{
	static const char *const suffixes[] = {"rope.dimension_count", "attention.key_length",
					       "attention.value_length"};
	for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
		char key[KEY_MAX];
		uint64_t v;
		snprintf(key, sizeof key, "%s.%s", arch, suffixes[i]);
		int err = nf_gguf_get_u64(g, key, &v);
		if (err == NF_ENOTFOUND)
			continue;
		if (err)
			return err;
		if (v != (uint64_t)nf_model_head_size(c))
			return nf_error_set(NF_EUNSUPPORTED,
					    "%s: %s %llu differs from embedding_length / head_count = "
					    "%d (not supported)",
					    nf_gguf_path(g), key, (unsigned long long)v,
					    (int)nf_model_head_size(c));
	}
	return 0;
}

static int read_config(nf_model_config *c, const nf_gguf *g, const nf_arch *a)
{
	/* read_arch matched general.architecture to this name: the keys' prefix */
	const char *arch = a->gguf_name;
	size_t n;
	const nf_arch_gguf_key *keys = nf_arch_gguf_keys(&n);
	int err;

	*c = (nf_model_config){.arch = a->id, .norm_eps = 1e-5f, .rope_theta = 10000.0f};
	for (size_t i = 0; i < n; i++) {
		err = read_key(c, g, arch, &keys[i]);
		if (err == NF_ENOTFOUND && !keys[i].required) {
			nf_error_clear();
			continue;
		}
		if (err)
			return err;
	}
	if (c->n_kv_heads == 0)
		c->n_kv_heads = c->n_heads;
	if (c->n_heads <= 0 || c->dim % c->n_heads)
		return nf_error_set(NF_EINPUT, "%s: embedding_length %d is not a multiple of "
				    "head_count %d", nf_gguf_path(g), (int)c->dim, (int)c->n_heads);
	if (nf_gguf_tensor_find(g, "rope_freqs.weight"))
		return nf_error_set(NF_EUNSUPPORTED, "%s: tensor rope_freqs.weight (per-dimension "
				    "RoPE factors) is not supported", nf_gguf_path(g));
	return check_head_size(g, arch, c);
}

/* ---- facts against tensors ---- */

/* The GGUF tensor of table entry t at layer l, with the shape the config
 * gives: (rows, cols) is ne = [cols, rows]; a vector ne = [rows]. */
static int find_tensor(const nf_gguf_tensor **out, const nf_gguf *g, const nf_arch_tensor *t,
		       int l, const nf_model_config *c)
{
	char name[256];
	uint64_t rows = nf_arch_dim_value(t->rows, c);
	uint64_t cols = t->cols == NF_D_NONE ? 0 : nf_arch_dim_value(t->cols, c);
	int err = nf_arch_format_name(name, sizeof name, t->gguf, l);
	if (err)
		return err;
	const nf_gguf_tensor *x = nf_gguf_tensor_find(g, name);
	if (!x)
		return nf_error_set(NF_EINPUT, "%s: tensor %s is missing", nf_gguf_path(g), name);
	bool ok = cols ? x->n_dims == 2 && x->ne[0] == cols && x->ne[1] == rows
		       : x->n_dims == 1 && x->ne[0] == rows;
	if (!ok)
		return nf_error_set(NF_EINPUT,
				    "%s: offset %llu: tensor %s has shape [%llu, %llu], the metadata "
				    "says [%llu, %llu]",
				    nf_gguf_path(g), (unsigned long long)x->offset, name,
				    (unsigned long long)x->ne[0], (unsigned long long)x->ne[1],
				    (unsigned long long)(cols ? cols : rows),
				    (unsigned long long)(cols ? rows : 1));
	*out = x;
	return 0;
}

/* A "blk.N." tensor with N >= block_count means the metadata lies about
 * the depth (the loader would silently drop layers). */
static int check_block_count(const nf_gguf *g, const nf_model_config *c)
{
	for (uint64_t i = 0; i < nf_gguf_tensor_count(g); i++) {
		const nf_gguf_tensor *t = nf_gguf_tensor_at(g, i);
		const char *p = t->name;
		long long n = 0;
		if (strncmp(p, "blk.", 4) != 0)
			continue;
		p += 4;
		if (*p < '0' || *p > '9')
			continue;
		while (*p >= '0' && *p <= '9' && n <= NF_MODEL_MAX_LAYERS)
			n = n * 10 + (*p++ - '0');
		if (n >= c->n_layers)
			return nf_error_set(NF_EINPUT,
					    "%s: offset %llu: tensor %s is past block_count %d",
					    nf_gguf_path(g), (unsigned long long)t->offset, t->name,
					    (int)c->n_layers);
	}
	return 0;
}

/* vocab_size from the embedding when the metadata has none, and the
 * tokenizer's token count must agree with it. */
static int check_vocab(nf_model_config *c, const nf_gguf *g, const nf_arch *a)
{
	const nf_arch_tensor *emb = nf_arch_find(a, NF_T_EMB);
	const nf_gguf_tensor *x = nf_gguf_tensor_find(g, emb->gguf);
	nf_gguf_vtype et;
	uint64_t n;
	if (!x)
		return nf_error_set(NF_EINPUT, "%s: tensor %s is missing", nf_gguf_path(g), emb->gguf);
	if (c->vocab_size == 0) {
		if (x->n_dims != 2 || x->ne[1] > NF_MODEL_MAX_VOCAB)
			return nf_error_set(NF_EINPUT, "%s: offset %llu: tensor %s is not a "
					    "[dim, vocab] matrix", nf_gguf_path(g),
					    (unsigned long long)x->offset, emb->gguf);
		c->vocab_size = (int32_t)x->ne[1];
	}
	int err = nf_gguf_get_array(g, "tokenizer.ggml.tokens", &et, &n);
	if (err == NF_ENOTFOUND) {
		nf_error_clear();
		return 0;
	}
	if (err)
		return err;
	if (n != (uint64_t)c->vocab_size)
		return nf_error_set(NF_EINPUT, "%s: tokenizer.ggml.tokens has %llu tokens, the model "
				    "%d", nf_gguf_path(g), (unsigned long long)n, (int)c->vocab_size);
	return 0;
}

/* The config plus every fact checked; sets shared_classifier. */
static int read_and_check(nf_model_config *c, const nf_gguf *g, const nf_arch **arch)
{
	const nf_arch *a;
	int err;
	if ((err = read_arch(&a, g)) || (err = read_config(c, g, a)) ||
	    (err = check_vocab(c, g, a)))
		return err;
	const nf_arch_tensor *cls = nf_arch_find(a, NF_T_WCLS);
	c->shared_classifier = !cls || !nf_gguf_tensor_find(g, cls->gguf);
	if ((err = nf_model_config_validate(c, nf_gguf_path(g))) ||
	    (err = check_block_count(g, c)))
		return err;
	for (size_t i = 0; i < a->n_tensors; i++) {
		const nf_arch_tensor *t = &a->tensors[i];
		const nf_gguf_tensor *x;
		if (!nf_arch_present(t, c))
			continue;
		for (int l = 0; l < (t->per_layer ? c->n_layers : 1); l++)
			if ((err = find_tensor(&x, g, t, l, c)))
				return err;
	}
	*arch = a;
	return 0;
}

/* ---- weights ---- */

typedef struct gguf_reader {
	nf_ckpt_reader base;
	nf_gguf *g;
	const nf_arch *a;
	float *tmp; /* a rotate-half architecture's q or k slice before re-ordering */
} gguf_reader;

/* Slice (t, l) dequantized; q and k rows (and their biases) of a
 * rotate-half GGUF through tmp to the interleaved order. */
static int gguf_read(nf_ckpt_reader *base, const nf_arch_tensor *t, int l, float *dst)
{
	gguf_reader *r = (gguf_reader *)base;
	const nf_model_config *c = &base->cfg;
	const nf_gguf_tensor *x = NULL;
	uint64_t slice;
	int heads = r->a->gguf_rotate_half ? nf_arch_rope_heads(t, c) : 0;
	if (!nf_arch_slice_elems(&slice, t, c))
		return nf_error_set(NF_EINPUT, "%s: tensor %s is too large", nf_gguf_path(r->g),
				    t->name);
	int err = find_tensor(&x, r->g, t, l, c);
	if (!err)
		err = nf_ggml_dequantize(heads ? r->tmp : dst, x->data, x->type, slice);
	if (err)
		return nf_error_wrap(err, "%s: tensor %s", nf_gguf_path(r->g), x ? x->name : t->name);
	if (heads)
		nf_arch_permute_rows(dst, r->tmp, heads, nf_model_head_size(c),
				     t->cols == NF_D_NONE ? 1 : (int)nf_arch_dim_value(t->cols, c),
				     false);
	return 0;
}

/* The file's blocks of a slice in the model's row order: every slice but
 * a rotate-half architecture's q and k. */
static const void *gguf_blocks(nf_ckpt_reader *base, const nf_arch_tensor *t, int l,
			       int *ggml_type)
{
	gguf_reader *r = (gguf_reader *)base;
	const nf_gguf_tensor *x = NULL;
	*ggml_type = -1;
	if ((r->a->gguf_rotate_half && nf_arch_rope_heads(t, &base->cfg)) ||
	    find_tensor(&x, r->g, t, l, &base->cfg)) {
		nf_error_clear();
		return NULL;
	}
	*ggml_type = (int)x->type;
	return x->data;
}

static void gguf_drop(nf_ckpt_reader *base, const nf_arch_tensor *t, int l)
{
	gguf_reader *r = (gguf_reader *)base;
	const nf_gguf_tensor *x = NULL;
	if (!find_tensor(&x, r->g, t, l, &base->cfg))
		nf_ckpt_drop_pages(x->data, (size_t)x->n_bytes);
	nf_error_clear();
}

static void gguf_close(nf_ckpt_reader *base)
{
	gguf_reader *r = (gguf_reader *)base;
	nf_gguf_free(r->g);
	free(r->tmp);
	free(r);
}

static const nf_ckpt_reader_ops gguf_ops = {
	.read = gguf_read,
	.blocks = gguf_blocks,
	.drop = gguf_drop,
	.close = gguf_close,
};

int nf_ckpt_open_gguf(nf_ckpt_reader **out, const char *path)
{
	gguf_reader *r = calloc(1, sizeof *r);
	int err;
	*out = NULL;
	if (!r)
		return nf_error_set(NF_ENOMEM, "%s: out of memory", path);
	r->base.ops = &gguf_ops;
	if (!(err = nf_gguf_open(&r->g, path)) && !(err = read_and_check(&r->base.cfg, r->g, &r->a)) &&
	    r->a->gguf_rotate_half) {
		/* the largest permuted slice is wq's (dim, dim) */
		size_t d = (size_t)r->base.cfg.dim;
		if (!(r->tmp = malloc(d * d * sizeof(float))))
			err = nf_error_set(NF_ENOMEM, "%s: out of memory", path);
	}
	if (err) {
		gguf_close(&r->base);
		return err;
	}
	*out = &r->base;
	return 0;
}
