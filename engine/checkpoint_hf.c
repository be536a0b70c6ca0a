/*
 * checkpoint_hf.c - Hugging Face Llama checkpoints: config.json (jansson)
 * plus model.safetensors or shards listed in model.safetensors.index.json,
 * F32/F16/BF16 tensors with the HF names.  q_proj and k_proj are stored in
 * HF's rotate-half order: within each head, row j*(hs/2)+i of HF is row
 * 2i+j of llama2.c (j = 0, 1).  The loader undoes it, the writer applies it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "engine/checkpoint.h"
#include "engine/ckpt_reader.h"

#include "engine/arch.h"
#include "engine/tokenizer.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define HF_MAX_CONFIG (1u << 20)
#define HF_MAX_INDEX (64u << 20)
#define HF_MAX_SHARDS 4096

/* ------------------------------------------------------------ config.json */

static int cfg_int(int32_t *out, json_t *root, const char *key, bool required, int32_t dflt,
		   const char *what)
{
	json_t *v = json_object_get(root, key);
	json_int_t x;
	if (!v || json_is_null(v)) {
		if (required)
			return nf_error_set(NF_EINPUT, "%s: missing \"%s\"", what, key);
		*out = dflt;
		return 0;
	}
	if (!json_is_integer(v))
		return nf_error_set(NF_EINPUT, "%s: \"%s\" is not an integer", what, key);
	x = json_integer_value(v);
	if (x <= 0 || x > INT32_MAX)
		return nf_error_set(NF_EINPUT, "%s: \"%s\" %lld is out of range", what, key,
				    (long long)x);
	*out = (int32_t)x;
	return 0;
}

static int cfg_float(float *out, json_t *root, const char *key, float dflt, const char *what)
{
	json_t *v = json_object_get(root, key);
	double x;
	if (!v || json_is_null(v)) {
		*out = dflt;
		return 0;
	}
	if (!json_is_number(v))
		return nf_error_set(NF_EINPUT, "%s: \"%s\" is not a number", what, key);
	x = json_number_value(v);
	if (!(x > 0) || x > 1e30)
		return nf_error_set(NF_EINPUT, "%s: \"%s\" %g is out of range", what, key, x);
	*out = (float)x;
	return 0;
}

/* A number (NF_EINPUT when absent or not a number; the range is checked
 * by the caller). */
static int rope_number(double *out, json_t *obj, const char *key, const char *what)
{
	json_t *v = json_object_get(obj, key);
	if (!json_is_number(v))
		return nf_error_set(NF_EINPUT, "%s: rope_scaling \"%s\" is %s", what, key,
				    v ? "not a number" : "missing");
	*out = json_number_value(v);
	return 0;
}

/* The architecture config.json names: "model_type" and "architectures"
 * must agree when both are given; neither is a Llama (older exports). */
static int parse_arch(const nf_arch **out, json_t *root, const char *what)
{
	json_t *mt = json_object_get(root, "model_type"), *v = json_object_get(root, "architectures");
	const nf_arch *by_type = NULL, *by_class = NULL;
	size_t i;
	json_t *a;

	*out = nf_arch_get(NF_ARCH_LLAMA);
	if (mt && !json_is_null(mt)) {
		if (!json_is_string(mt))
			return nf_error_set(NF_EINPUT, "%s: \"model_type\" is not a string", what);
		if (!(by_type = nf_arch_by_hf_model_type(json_string_value(mt))))
			return nf_error_set(NF_EUNSUPPORTED, "%s: model_type \"%s\" is not supported "
					    "(llama, mistral, qwen2)", what, json_string_value(mt));
	}
	if (v && !json_is_null(v)) {
		if (!json_is_array(v))
			return nf_error_set(NF_EINPUT, "%s: \"architectures\" is not an array", what);
		json_array_foreach(v, i, a)
			if (!by_class && json_is_string(a))
				by_class = nf_arch_by_hf_class(json_string_value(a));
		if (!by_class)
			return nf_error_set(NF_EUNSUPPORTED, "%s: \"architectures\" names none of "
					    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM",
					    what);
	}
	if (by_type && by_class && by_type != by_class)
		return nf_error_set(NF_EINPUT, "%s: model_type \"%s\" disagrees with architectures "
				    "\"%s\"", what, by_type->hf_model_type, by_class->hf_class);
	if (by_type || by_class)
		*out = by_type ? by_type : by_class;
	return 0;
}

/* "rope_scaling": null, {"rope_type" (or older "type"): "default"}, or
 * Llama 3's {"rope_type": "llama3", factor, low_freq_factor,
 * high_freq_factor, original_max_position_embeddings}. */
static int parse_rope_scaling(nf_rope_scaling *out, json_t *v, const char *what)
{
	static const char *const unsupported[] = {"linear", "dynamic", "yarn", "longrope", "su",
						  "mrope"};
	const char *t = json_string_value(json_object_get(v, "rope_type"));
	const char *t2 = json_string_value(json_object_get(v, "type"));
	double f, lo, hi, orig;
	int err;

	memset(out, 0, sizeof *out);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return nf_error_set(NF_EINPUT, "%s: \"rope_scaling\" is not an object", what);
	if (t && t2 && strcmp(t, t2) != 0)
		return nf_error_set(NF_EINPUT, "%s: rope_scaling \"rope_type\" \"%s\" and \"type\" "
				    "\"%s\" disagree", what, t, t2);
	if (!t && !(t = t2))
		return nf_error_set(NF_EINPUT, "%s: rope_scaling has no \"rope_type\"", what);
	if (strcmp(t, "default") == 0)
		return 0;
	for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
		if (strcmp(t, unsupported[i]) == 0)
			return nf_error_set(NF_EUNSUPPORTED, "%s: rope_scaling \"%s\" is not supported "
					    "(default, llama3)", what, t);
	if (strcmp(t, "llama3") != 0)
		return nf_error_set(NF_EINPUT, "%s: unknown rope_scaling rope_type \"%s\"", what, t);
	if ((err = rope_number(&f, v, "factor", what)) ||
	    (err = rope_number(&lo, v, "low_freq_factor", what)) ||
	    (err = rope_number(&hi, v, "high_freq_factor", what)) ||
	    (err = rope_number(&orig, v, "original_max_position_embeddings", what)))
		return err;
	if (!(orig >= 1 && orig <= NF_MODEL_MAX_SEQ && orig == floor(orig)))
		return nf_error_set(NF_EINPUT, "%s: rope_scaling original_max_position_embeddings %g "
				    "is not an integer in 1..%d", what, orig, NF_MODEL_MAX_SEQ);
	*out = (nf_rope_scaling){NF_ROPE_LLAMA3, (float)f, (float)lo, (float)hi, (int32_t)orig};
	return nf_arch_rope_validate(out, what);
}

/* Mistral's "sliding_window" (null: none); Qwen2's only with
 * "use_sliding_window".  A window shorter than the context caps the
 * context to it: within it, full attention is windowed attention. */
static int parse_window(nf_model_config *c, json_t *root, const char *what)
{
	json_t *use = json_object_get(root, "use_sliding_window");
	int32_t w = 0;
	int err;
	if (c->arch == NF_ARCH_LLAMA || (c->arch == NF_ARCH_QWEN2 && !json_is_true(use)))
		return 0;
	if ((err = cfg_int(&w, root, "sliding_window", false, 0, what)))
		return err;
	if (w > NF_MODEL_MAX_SEQ)
		return nf_error_set(NF_EINPUT, "%s: \"sliding_window\" %d is out of range (1..%d)",
				    what, (int)w, NF_MODEL_MAX_SEQ);
	c->sliding_window = w;
	if (w > 0 && w < c->max_seq_len)
		c->max_seq_len = w;
	return 0;
}

/* Sizes, norms and RoPE base: the keys every architecture shares. */
static int parse_sizes(nf_model_config *c, json_t *root, const char *what)
{
	int err;
	if ((err = cfg_int(&c->dim, root, "hidden_size", true, 0, what)) ||
	    (err = cfg_int(&c->hidden_dim, root, "intermediate_size", true, 0, what)) ||
	    (err = cfg_int(&c->n_layers, root, "num_hidden_layers", true, 0, what)) ||
	    (err = cfg_int(&c->n_heads, root, "num_attention_heads", true, 0, what)) ||
	    (err = cfg_int(&c->n_kv_heads, root, "num_key_value_heads", false, c->n_heads, what)) ||
	    (err = cfg_int(&c->vocab_size, root, "vocab_size", true, 0, what)) ||
	    /* real configs state it; 2048 is LlamaConfig's default */
	    (err = cfg_int(&c->max_seq_len, root, "max_position_embeddings", false, 2048, what)) ||
	    (err = cfg_float(&c->norm_eps, root, "rms_norm_eps", 1e-6f, what)) ||
	    (err = cfg_float(&c->rope_theta, root, "rope_theta", 10000.0f, what)))
		return err;
	return 0;
}

/* Classifier tying, activation and biases. */
static int parse_flags(nf_model_config *c, json_t *root, const char *what)
{
	json_t *v = json_object_get(root, "tie_word_embeddings");
	json_t *ab = json_object_get(root, "attention_bias");
	if (v && !json_is_null(v) && !json_is_boolean(v))
		return nf_error_set(NF_EINPUT, "%s: \"tie_word_embeddings\" is not a boolean", what);
	c->shared_classifier = json_is_true(v);
	v = json_object_get(root, "hidden_act");
	if (v && !json_is_null(v) && !(json_is_string(v) && strcmp(json_string_value(v), "silu") == 0))
		return nf_error_set(NF_EUNSUPPORTED, "%s: \"hidden_act\" must be \"silu\"", what);
	if (json_is_true(json_object_get(root, "mlp_bias")))
		return nf_error_set(NF_EUNSUPPORTED, "%s: \"mlp_bias\" is not supported", what);
	if (ab && !json_is_null(ab) && !json_is_boolean(ab))
		return nf_error_set(NF_EINPUT, "%s: \"attention_bias\" is not a boolean", what);
	/* only Llama reads it; Qwen2's biases are fixed, Mistral has none */
	c->attention_bias = c->arch == NF_ARCH_LLAMA && json_is_true(ab);
	return 0;
}

int nf_ckpt_hf_config_parse(nf_model_config *out, const char *json, size_t len, const char *what)
{
	int err = 0;
	json_error_t jerr;
	json_t *root = NULL;
	int32_t head_dim;
	const nf_arch *arch;
	nf_model_config c = {0};

	memset(out, 0, sizeof(*out));
	if (!what)
		what = "config.json";
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		err = nf_error_set(NF_EINPUT, "%s: line %d column %d: %s", what, jerr.line,
				   jerr.column, jerr.text);
		goto done;
	}
	if (!json_is_object(root)) {
		err = nf_error_set(NF_EINPUT, "%s: not a JSON object", what);
		goto done;
	}
	if ((err = parse_arch(&arch, root, what)))
		goto done;
	c.arch = arch->id;
	if ((err = parse_sizes(&c, root, what)) || (err = parse_flags(&c, root, what)) ||
	    (err = parse_rope_scaling(&c.rope_scaling, json_object_get(root, "rope_scaling"), what)) ||
	    (err = parse_window(&c, root, what)) || (err = nf_model_config_validate(&c, what)))
		goto done;
	if ((err = cfg_int(&head_dim, root, "head_dim", false, c.dim / c.n_heads, what)))
		goto done;
	if (head_dim != c.dim / c.n_heads) {
		err = nf_error_set(NF_EUNSUPPORTED, "%s: \"head_dim\" %d differs from hidden_size / "
				   "num_attention_heads (%d)", what, (int)head_dim,
				   (int)(c.dim / c.n_heads));
		goto done;
	}
	*out = c;
done:
	json_decref(root);
	return err;
}

/* ---------------------------------------------------------------- loading */

typedef struct shard {
	char *file; /* name in the index */
	nf_st_file *st;
} shard;

typedef struct hf_src {
	char *dir;          /* owned */
	char *index_path;   /* owned; NULL when single-file */
	json_t *index;      /* owned; weight_map object borrowed from it */
	json_t *weight_map;
	shard *shards;      /* owned; single file = one shard */
	size_t n_shards;
	float *tmp;         /* owned scratch for permuted tensors */
} hf_src;

static void src_release(hf_src *s)
{
	for (size_t i = 0; i < s->n_shards; i++) {
		free(s->shards[i].file);
		nf_st_close(s->shards[i].st);
	}
	free(s->shards);
	json_decref(s->index);
	free(s->index_path);
	free(s->dir);
	free(s->tmp);
}

static int add_shard(hf_src *s, const char *file, const char *path, shard **out)
{
	shard *n = reallocarray(s->shards, s->n_shards + 1, sizeof(*n));
	int err;
	if (!n)
		return nf_error_set(NF_ENOMEM, "out of memory");
	s->shards = n;
	n = &s->shards[s->n_shards];
	n->st = NULL;
	if (!(n->file = strdup(file)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	s->n_shards++;
	if ((err = nf_st_open(&n->st, path)))
		return err;
	*out = n;
	return 0;
}

/* The safetensors tensor `name` and the file path for messages, or an error. */
static int find_tensor(const nf_st_tensor **out, const char **where, hf_src *s, const char *name)
{
	shard *sh = NULL;
	const char *file;
	char *path = NULL;
	int err;

	*out = NULL;
	if (!s->weight_map) {
		sh = &s->shards[0];
		*where = s->shards[0].file;
	} else {
		json_t *v = json_object_get(s->weight_map, name);
		*where = s->index_path;
		if (!v)
			return nf_error_set(NF_EINPUT, "%s: missing tensor \"%s\"", s->index_path, name);
		file = json_string_value(v);
		for (size_t i = 0; i < s->n_shards; i++)
			if (strcmp(s->shards[i].file, file) == 0)
				sh = &s->shards[i];
		if (!sh) {
			if (s->n_shards >= HF_MAX_SHARDS)
				return nf_error_set(NF_EINPUT, "%s: more than %d shards",
						    s->index_path, HF_MAX_SHARDS);
			if (!(path = nf_path_join(s->dir, file)))
				return nf_error_set(NF_ENOMEM, "out of memory");
			err = add_shard(s, file, path, &sh);
			free(path);
			if (err)
				return err;
		}
		*where = sh->file;
	}
	*out = nf_st_find(sh->st, name);
	if (!*out)
		return nf_error_set(NF_EINPUT, "%s: missing tensor \"%s\"", *where, name);
	return 0;
}

/* Tensor `name` with shape (rows, cols) (cols 0 = 1-D) and the file
 * that holds it, for messages. */
static int find_shaped(const nf_st_tensor **out, const char **where, hf_src *s, const char *name,
		       uint64_t rows, uint64_t cols)
{
	const nf_st_tensor *t;
	int err, ndim = cols ? 2 : 1;
	if ((err = find_tensor(&t, where, s, name)))
		return err;
	if (t->ndim != ndim || t->shape[0] != rows || (cols && t->shape[1] != cols)) {
		char got[96] = "", want[64];
		size_t l = 0;
		for (int i = 0; i < t->ndim && l < sizeof(got) - 24; i++)
			l += (size_t)snprintf(got + l, sizeof(got) - l, "%s%llu", i ? ", " : "",
					      (unsigned long long)t->shape[i]);
		if (cols)
			snprintf(want, sizeof(want), "%llu, %llu", (unsigned long long)rows,
				 (unsigned long long)cols);
		else
			snprintf(want, sizeof(want), "%llu", (unsigned long long)rows);
		return nf_error_set(NF_EINPUT, "%s: tensor \"%s\" has shape [%s], expected [%s]",
				    *where, name, got, want);
	}
	if (t->dtype != NF_DTYPE_F32 && t->dtype != NF_DTYPE_F16 && t->dtype != NF_DTYPE_BF16)
		return nf_error_set(NF_EUNSUPPORTED, "%s: tensor \"%s\" has dtype %s, expected F32, "
				    "F16 or BF16", *where, name, nf_dtype_name(t->dtype));
	*out = t;
	return 0;
}

/* Read tensor `name` of shape (rows, cols) (cols 0 = 1-D) into dst as float32. */
static int load_tensor(hf_src *s, float *dst, const char *name, uint64_t rows, uint64_t cols)
{
	const nf_st_tensor *t;
	const char *where = NULL;
	uint64_t n = cols ? rows * cols : rows;
	int err = find_shaped(&t, &where, s, name, rows, cols);
	if (err)
		return err;
	if (t->dtype == NF_DTYPE_F32) {
		memcpy(dst, t->data, n * sizeof(float));
	} else {
		const unsigned char *p = t->data;
		for (uint64_t i = 0; i < n; i++) {
			uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
			dst[i] = t->dtype == NF_DTYPE_F16 ? nf_f16_to_f32(h) : nf_bf16_to_f32(h);
		}
	}
	for (uint64_t i = 0; i < n; i++)
		if (!isfinite(dst[i]))
			return nf_error_set(NF_EINPUT, "%s: tensor \"%s\" element %llu is not finite",
					    where, name, (unsigned long long)i);
	return 0;
}

static char *dirname_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

static int open_index(hf_src *s)
{
	char *text = NULL;
	size_t len;
	json_error_t jerr;
	const char *key;
	json_t *v;
	int err;

	if ((err = nf_fs_read_file(&text, &len, s->index_path, HF_MAX_INDEX)))
		return err;
	s->index = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	free(text);
	if (!s->index)
		return nf_error_set(NF_EINPUT, "%s: line %d column %d: %s", s->index_path,
				    jerr.line, jerr.column, jerr.text);
	s->weight_map = json_object_get(s->index, "weight_map");
	if (!json_is_object(s->weight_map))
		return nf_error_set(NF_EINPUT, "%s: no \"weight_map\" object", s->index_path);
	json_object_foreach(s->weight_map, key, v) {
		const char *f = json_string_value(v);
		/* shard names stay inside the checkpoint folder */
		if (!f || !*f || strchr(f, '/') || f[0] == '.')
			return nf_error_set(NF_EINPUT, "%s: tensor \"%s\": bad shard file name",
					    s->index_path, key);
	}
	return 0;
}

/* The second dimension of one slice of t, 0 for a vector (load_tensor's
 * and put_tensor's convention). */
static uint64_t hf_cols(const nf_arch_tensor *t, const nf_model_config *c)
{
	return t->cols == NF_D_NONE ? 0 : nf_arch_dim_value(t->cols, c);
}

typedef struct hf_reader {
	nf_ckpt_reader base;
	hf_src s;
} hf_reader;

/* Slice (t, l) of the checkpoint, q and k rows (and biases) un-permuted to
 * the interleaved order. */
static int hf_read(nf_ckpt_reader *base, const nf_arch_tensor *t, int l, float *dst)
{
	hf_src *s = &((hf_reader *)base)->s;
	const nf_model_config *c = &base->cfg;
	uint64_t rows = nf_arch_dim_value(t->rows, c), cols = hf_cols(t, c);
	int heads = nf_arch_rope_heads(t, c), err;
	char name[256];
	if ((err = nf_arch_format_name(name, sizeof name, t->hf, l)) ||
	    (err = load_tensor(s, heads ? s->tmp : dst, name, rows, cols)))
		return err;
	if (heads)
		nf_arch_permute_rows(dst, s->tmp, heads, nf_model_head_size(c), cols ? (int)cols : 1,
				     false);
	return 0;
}

static void hf_drop(nf_ckpt_reader *base, const nf_arch_tensor *t, int l)
{
	hf_src *s = &((hf_reader *)base)->s;
	const nf_st_tensor *x;
	const char *where;
	char name[256];
	if (!nf_arch_format_name(name, sizeof name, t->hf, l) && !find_tensor(&x, &where, s, name))
		nf_ckpt_drop_pages(x->data, (size_t)x->nbytes);
	nf_error_clear();
}

static void hf_close(nf_ckpt_reader *base)
{
	src_release(&((hf_reader *)base)->s);
	free(base);
}

static const nf_ckpt_reader_ops hf_ops = {
	.read = hf_read,
	.drop = hf_drop,
	.close = hf_close,
};

/* Every slice of the table is in the checkpoint with its shape and a
 * dtype we read, before a weight is read. */
static int check_tensors(hf_src *s, const nf_model_config *c)
{
	const nf_arch *a = nf_arch_get(c->arch);
	char name[256];
	for (size_t i = 0; i < a->n_tensors; i++) {
		const nf_arch_tensor *t = &a->tensors[i];
		if (!nf_arch_present(t, c))
			continue;
		for (int l = 0; l < (t->per_layer ? c->n_layers : 1); l++) {
			const nf_st_tensor *x;
			const char *where;
			int err = nf_arch_format_name(name, sizeof name, t->hf, l);
			if (err || (err = find_shaped(&x, &where, s, name, nf_arch_dim_value(t->rows, c),
						      hf_cols(t, c))))
				return err;
		}
	}
	return 0;
}

/* Whether the checkpoint holds tensor `name` (no error set). */
static bool has_tensor(hf_src *s, const char *name)
{
	if (s->weight_map)
		return json_object_get(s->weight_map, name) != NULL;
	return nf_st_find(s->shards[0].st, name) != NULL;
}

/* A bias in the file that config.json does not enable would be silently
 * dropped, changing every logit: refuse it.  (Other extra tensors, such as
 * older exports' rotary_emb.inv_freq or a tied lm_head copy, are ignored.) */
static int check_no_stray_bias(hf_src *s, const nf_model_config *c)
{
	const nf_arch *a = nf_arch_get(c->arch);
	char name[256];
	int err;
	for (size_t i = 0; i < a->n_tensors; i++) {
		const nf_arch_tensor *t = &a->tensors[i];
		if (t->when != NF_W_ATTN_BIAS || nf_arch_present(t, c))
			continue;
		if ((err = nf_arch_format_name(name, sizeof name, t->hf, 0)))
			return err;
		if (has_tensor(s, name))
			return nf_error_set(NF_EINPUT, "%s: tensor \"%s\" is present but config.json "
					    "does not set \"attention_bias\"", s->dir, name);
	}
	return 0;
}

/* Where the checkpoint's files are: s->dir, and s->index_path (sharded)
 * or *st_path (one file). */
static int locate(hf_src *s, char **st_path, const char *path)
{
	if (nf_fs_is_dir(path)) {
		s->dir = strdup(path);
		if (s->dir)
			s->index_path = nf_path_join(path, "model.safetensors.index.json");
		if (s->index_path && !nf_fs_exists(s->index_path)) {
			free(s->index_path);
			s->index_path = NULL;
			*st_path = nf_path_join(path, "model.safetensors");
		}
	} else if (ends_with(path, ".index.json")) {
		s->dir = dirname_of(path);
		s->index_path = strdup(path);
	} else {
		s->dir = dirname_of(path);
		*st_path = strdup(path);
	}
	if (!s->dir || (!s->index_path && !*st_path))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", path);
	return 0;
}

/* The index of a sharded checkpoint, or its one file. */
static int open_files(hf_src *s, const char *st_path)
{
	shard *sh;
	if (s->index_path)
		return open_index(s);
	if (!nf_fs_exists(st_path))
		return nf_error_set(NF_EINPUT, "%s: no model.safetensors or "
				    "model.safetensors.index.json", s->dir);
	return add_shard(s, st_path, st_path, &sh);
}

/* config.json, the index or the one file, and every tensor checked. */
static int open_checked(hf_reader *r, const char *path)
{
	hf_src *s = &r->s;
	nf_model_config *cfg = &r->base.cfg;
	char *cfg_path = NULL, *cfg_text = NULL, *st_path = NULL;
	size_t cfg_len;
	int err = locate(s, &st_path, path);
	if (!err && !(cfg_path = nf_path_join(s->dir, "config.json")))
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", path);
	if (!err && !(err = nf_fs_read_file(&cfg_text, &cfg_len, cfg_path, HF_MAX_CONFIG)))
		err = nf_ckpt_hf_config_parse(cfg, cfg_text, cfg_len, cfg_path);
	if (!err)
		err = open_files(s, st_path);
	/* shapes against the files first: what is allocated from them is bounded */
	if (!err && !(err = check_tensors(s, cfg)) && !(err = check_no_stray_bias(s, cfg)) &&
	    !(s->tmp = malloc((size_t)cfg->dim * (size_t)cfg->dim * sizeof(float))))
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", path); /* wq's slice is the largest permuted */
	free(st_path);
	free(cfg_path);
	free(cfg_text);
	return err;
}

int nf_ckpt_open_hf(nf_ckpt_reader **out, const char *path)
{
	hf_reader *r = calloc(1, sizeof *r);
	*out = NULL;
	if (!r)
		return nf_error_set(NF_ENOMEM, "%s: out of memory", path);
	r->base.ops = &hf_ops;
	int err = open_checked(r, path);
	if (err) {
		hf_close(&r->base);
		return err;
	}
	*out = &r->base;
	return 0;
}

/* ---------------------------------------------------------------- writing */

/* The shortest decimal that reads back as f, as a JSON real. */
static json_t *float_json(float f)
{
	char buf[32];
	for (int d = 1; d <= 9; d++) {
		snprintf(buf, sizeof(buf), "%.*g", d, (double)f);
		double v = strtod(buf, NULL);
		if ((float)v == f)
			return json_real(v);
	}
	return json_real((double)f);
}

/* The keys only some architectures or models have: Llama's attention_bias
 * and rope scaling, Mistral's and Qwen2's window. */
static int config_extras(json_t *root, const nf_model_config *c)
{
	const nf_rope_scaling *r = &c->rope_scaling;
	json_t *w = c->sliding_window ? json_integer(c->sliding_window) : json_null();
	int err = 0;
	if (c->attention_bias)
		err |= json_object_set_new(root, "attention_bias", json_true());
	if (r->type == NF_ROPE_LLAMA3)
		err |= json_object_set_new(root, "rope_scaling",
					   json_pack("{s:s, s:o, s:o, s:o, s:i}", "rope_type", "llama3",
						     "factor", float_json(r->factor), "low_freq_factor",
						     float_json(r->low_freq_factor), "high_freq_factor",
						     float_json(r->high_freq_factor),
						     "original_max_position_embeddings",
						     (int)r->original_max_pos));
	if (c->arch == NF_ARCH_QWEN2) {
		err |= json_object_set_new(root, "use_sliding_window", json_boolean(c->sliding_window));
		/* 0: every layer windowed (as the capped context makes them) */
		err |= json_object_set_new(root, "max_window_layers", json_integer(0));
	}
	if (c->arch == NF_ARCH_MISTRAL || c->arch == NF_ARCH_QWEN2)
		err |= json_object_set(root, "sliding_window", w);
	json_decref(w);
	return err ? -1 : 0;
}

static int write_config(const char *dir, const nf_model_config *c, nf_dtype dtype)
{
	json_t *root = json_object(), *arch = json_array();
	char *text = NULL, *path = NULL;
	int err = 0;
	const char *torch = dtype == NF_DTYPE_F16 ? "float16" : dtype == NF_DTYPE_BF16 ? "bfloat16" : "float32";

	const nf_arch *a = nf_arch_get(c->arch);
	if (!root || !arch || json_array_append_new(arch, json_string(a->hf_class)) < 0 ||
	    json_object_set_new(root, "architectures", arch) < 0) {
		json_decref(arch);
		goto nomem;
	}
	if (json_object_set_new(root, "model_type", json_string(a->hf_model_type)) < 0 ||
	    json_object_set_new(root, "hidden_size", json_integer(c->dim)) < 0 ||
	    json_object_set_new(root, "intermediate_size", json_integer(c->hidden_dim)) < 0 ||
	    json_object_set_new(root, "num_hidden_layers", json_integer(c->n_layers)) < 0 ||
	    json_object_set_new(root, "num_attention_heads", json_integer(c->n_heads)) < 0 ||
	    json_object_set_new(root, "num_key_value_heads", json_integer(c->n_kv_heads)) < 0 ||
	    json_object_set_new(root, "vocab_size", json_integer(c->vocab_size)) < 0 ||
	    json_object_set_new(root, "max_position_embeddings", json_integer(c->max_seq_len)) < 0 ||
	    json_object_set_new(root, "rms_norm_eps", float_json(c->norm_eps)) < 0 ||
	    json_object_set_new(root, "rope_theta", float_json(c->rope_theta)) < 0 ||
	    json_object_set_new(root, "hidden_act", json_string("silu")) < 0 ||
	    json_object_set_new(root, "tie_word_embeddings", json_boolean(c->shared_classifier)) < 0 ||
	    json_object_set_new(root, "bos_token_id", json_integer(1)) < 0 ||
	    json_object_set_new(root, "eos_token_id", json_integer(2)) < 0 ||
	    json_object_set_new(root, "torch_dtype", json_string(torch)) < 0 ||
	    config_extras(root, c) < 0)
		goto nomem;
	if (!(text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(9))) ||
	    !(path = nf_path_join(dir, "config.json")))
		goto nomem;
	{
		size_t l = strlen(text);
		char *t2 = realloc(text, l + 2);
		if (!t2)
			goto nomem;
		text = t2;
		text[l] = '\n';
		text[l + 1] = '\0';
	}
	err = nf_fs_write_atomic(path, text, strlen(text), 0644);
	goto done;
nomem:
	err = nf_error_set(NF_ENOMEM, "%s: out of memory", dir);
done:
	free(text);
	free(path);
	json_decref(root);
	return err;
}

/* What writing one tensor needs: the writer, the dtype and the buffer that
 * holds every converted tensor until nf_st_writer_finish. */
typedef struct hf_out {
	nf_st_writer *w;
	nf_dtype dtype;
	unsigned char *p; /* next free byte of the buffer */
	float *perm;      /* (dim, dim) scratch for permuted rows */
} hf_out;

/* Add tensor `name` of shape (rows, cols) (cols 0: 1-D) converted from src. */
static int put_tensor(hf_out *o, const char *name, const float *src, uint64_t rows, uint64_t cols)
{
	uint64_t shp[2] = {rows, cols};
	size_t n = (size_t)rows * (cols ? (size_t)cols : 1), es = nf_dtype_size(o->dtype);
	for (size_t i = 0; i < n; i++) {
		if (o->dtype == NF_DTYPE_F32) {
			memcpy(o->p + 4 * i, &src[i], 4);
		} else {
			uint16_t h = o->dtype == NF_DTYPE_F16 ? nf_f32_to_f16(src[i])
							      : nf_f32_to_bf16(src[i]);
			o->p[2 * i] = (unsigned char)(h & 0xff);
			o->p[2 * i + 1] = (unsigned char)(h >> 8);
		}
	}
	int err = nf_st_writer_add(o->w, name, o->dtype, cols ? 2 : 1, shp, o->p, n * es);
	o->p += n * es;
	return err;
}

/* Layer l's slice of table tensor t (l 0 for a global one), permuted to
 * rotate-half order where HF stores it so. */
static int put_slice(hf_out *o, const nf_model *m, const nf_arch_tensor *t, int l)
{
	const nf_model_config *c = &m->cfg;
	uint64_t rows = nf_arch_dim_value(t->rows, c), cols = hf_cols(t, c);
	const float *src = *nf_model_slot((nf_model *)m, t->id) + (size_t)l * rows * (cols ? cols : 1);
	int heads = nf_arch_rope_heads(t, c), err;
	char name[256];
	if ((err = nf_arch_format_name(name, sizeof name, t->hf, l)))
		return err;
	if (heads) {
		nf_arch_permute_rows(o->perm, src, heads, nf_model_head_size(c), cols ? (int)cols : 1, true);
		src = o->perm;
	}
	return put_tensor(o, name, src, rows, cols);
}

/* Every tensor of m in HF's order: the globals before the first layer
 * tensor of the table, then layer by layer, then the other globals. */
static int put_all(hf_out *o, const nf_model *m)
{
	const nf_arch *a = nf_arch_get(m->cfg.arch);
	size_t first = 0;
	int err;
	while (first < a->n_tensors && !a->tensors[first].per_layer)
		first++;
	for (size_t i = 0; i < first; i++)
		if (nf_arch_present(&a->tensors[i], &m->cfg) &&
		    (err = put_slice(o, m, &a->tensors[i], 0)))
			return err;
	for (int l = 0; l < m->cfg.n_layers; l++)
		for (size_t i = first; i < a->n_tensors; i++)
			if (a->tensors[i].per_layer && nf_arch_present(&a->tensors[i], &m->cfg) &&
			    (err = put_slice(o, m, &a->tensors[i], l)))
				return err;
	for (size_t i = first; i < a->n_tensors; i++)
		if (!a->tensors[i].per_layer && nf_arch_present(&a->tensors[i], &m->cfg) &&
		    (err = put_slice(o, m, &a->tensors[i], 0)))
			return err;
	return 0;
}

int nf_ckpt_write_hf(const char *dir, const nf_model *m, nf_dtype dtype)
{
	int err = 0;
	const nf_model_config *c = &m->cfg;
	hf_out o = {NULL, dtype, NULL, NULL};
	unsigned char *buf = NULL;
	char *st_path = NULL;
	size_t params, bytes;

	if (dtype != NF_DTYPE_F32 && dtype != NF_DTYPE_F16 && dtype != NF_DTYPE_BF16)
		return nf_error_set(NF_EUNSUPPORTED, "%s: HF checkpoints are written as F32, F16 or "
				    "BF16, not %s", dir, nf_dtype_name(dtype));
	if ((err = nf_model_config_validate(c, dir)) || (err = nf_model_param_count(&params, c)))
		return err;
	if (!nf_size_mul(&bytes, params, nf_dtype_size(dtype)))
		return nf_error_set(NF_EINPUT, "%s: model too large", dir);
	if ((err = nf_fs_mkdir_p(dir, 0755)) || (err = write_config(dir, c, dtype)))
		return err;
	if (!(buf = malloc(bytes ? bytes : 1)) ||
	    !(o.perm = malloc((size_t)c->dim * (size_t)c->dim * sizeof(float))) ||
	    !(st_path = nf_path_join(dir, "model.safetensors"))) {
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", dir);
		goto done;
	}
	o.p = buf;
	if ((err = nf_st_writer_new(&o.w)) || (err = nf_st_writer_set_metadata(o.w, "format", "pt")) ||
	    (err = put_all(&o, m)))
		goto done;
	err = nf_st_writer_finish(o.w, st_path);
done:
	nf_st_writer_free(o.w);
	free(buf);
	free(o.perm);
	free(st_path);
	return err;
}

/* ------------------------------------------------------- the tokenizer */

/* generation_config.json: the ids generation starts and stops with. */
static int write_generation_config(const char *dir, const nf_tokenizer *t)
{
	json_t *root = json_object();
	char *text = NULL, *path = nf_path_join(dir, "generation_config.json");
	int err = 0;
	if (root && nf_tokenizer_bos(t) >= 0)
		json_object_set_new(root, "bos_token_id", json_integer(nf_tokenizer_bos(t)));
	if (root && nf_tokenizer_eos(t) >= 0)
		json_object_set_new(root, "eos_token_id", json_integer(nf_tokenizer_eos(t)));
	if (root)
		json_object_set_new(root, "transformers_version", json_string("4.44.0"));
	text = root ? json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	if (!text || !path)
		err = nf_error_set(NF_ENOMEM, "out of memory");
	else
		err = nf_fs_write_atomic(path, text, strlen(text), 0644);
	json_decref(root);
	free(text);
	free(path);
	return err;
}

int nf_ckpt_write_hf_tokenizer(const char *dir, const nf_tokenizer *t)
{
	int err = nf_tokenizer_write_hf(t, dir);
	return err ? err : write_generation_config(dir, t);
}
