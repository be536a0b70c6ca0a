/*
 * checkpoint_gguf.c - a GGUF file (llama.cpp's format) into a float32
 * nf_model: the config from the architecture's metadata keys (arch.c's
 * key table), every tensor of the architecture's table dequantized from the
 * file mapping straight into the model (nothing is read twice), and the
 * facts the metadata states checked against the tensors before anything is
 * allocated from them.  The model keeps the mapping and each tensor's own
 * blocks (nf_model_source_blocks), for engines that take them over.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/arch.h"
#include "engine/checkpoint.h"
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

/* Dequantize every tensor of the table into m; q and k rows (and their
 * biases) of a rotate-half GGUF go through tmp to the interleaved order. */
static int load_tensors(nf_model *m, const nf_gguf *g, const nf_arch *a, float *tmp)
{
	const nf_model_config *c = &m->cfg;
	for (size_t i = 0; i < a->n_tensors; i++) {
		const nf_arch_tensor *t = &a->tensors[i];
		uint64_t slice;
		if (!nf_arch_present(t, c))
			continue;
		if (!nf_arch_slice_elems(&slice, t, c))
			return nf_error_set(NF_EINPUT, "%s: tensor %s is too large", nf_gguf_path(g),
					    t->name);
		int heads = a->gguf_rotate_half ? nf_arch_rope_heads(t, c) : 0;
		for (int l = 0; l < (t->per_layer ? c->n_layers : 1); l++) {
			const nf_gguf_tensor *x = NULL;
			float *dst = *nf_model_slot(m, t->id) + (size_t)l * slice;
			int err = find_tensor(&x, g, t, l, c);
			if (!err)
				err = nf_ggml_dequantize(heads ? tmp : dst, x->data, x->type, slice);
			if (err)
				return nf_error_wrap(err, "%s: tensor %s", nf_gguf_path(g), x ? x->name : t->name);
			if (heads)
				nf_arch_permute_rows(dst, tmp, heads, nf_model_head_size(c),
						     t->cols == NF_D_NONE ? 1 : (int)nf_arch_dim_value(t->cols, c),
						     false);
			else /* in the model's row order: an engine may take it over */
				nf_model_source_set(m, t->id, l, x->data, (int)x->type);
		}
	}
	return 0;
}

static void release_gguf(void *g) { nf_gguf_free(g); }

int nf_ckpt_load_gguf(nf_model **out, const char *path)
{
	nf_gguf *g = NULL;
	nf_model *m = NULL;
	nf_model_config cfg;
	const nf_gguf *mapped; /* g, once the model owns it */
	const nf_arch *a = NULL;
	float *tmp = NULL;
	int err;

	*out = NULL;
	if ((err = nf_gguf_open(&g, path)) || (err = read_and_check(&cfg, g, &a)) ||
	    (err = nf_model_alloc(&m, &cfg)))
		goto done;
	/* the largest permuted slice is wq's (dim, dim) */
	if (a->gguf_rotate_half &&
	    !(tmp = malloc((size_t)cfg.dim * (size_t)cfg.dim * sizeof(float)))) {
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", path);
		goto done;
	}
	/* the model keeps the mapping, so that an engine can take over the
	 * file's own blocks (nf_model_source_blocks) */
	if ((err = nf_model_source_init(m, g, release_gguf)))
		goto done;
	mapped = g;
	g = NULL;
	if ((err = load_tensors(m, mapped, a, tmp)))
		goto done;
	*out = m;
	m = NULL;
done:
	free(tmp);
	nf_model_free(m);
	nf_gguf_free(g);
	return err;
}
