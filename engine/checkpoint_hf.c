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

int nf_ckpt_hf_config_parse(nf_model_config *out, const char *json, size_t len, const char *what)
{
	int err = 0;
	json_error_t jerr;
	json_t *root = NULL, *v;
	int32_t vocab = 0, head_dim;
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
	v = json_object_get(root, "architectures");
	if (v && !json_is_null(v)) {
		size_t i;
		json_t *a;
		bool llama = false;
		if (!json_is_array(v)) {
			err = nf_error_set(NF_EINPUT, "%s: \"architectures\" is not an array", what);
			goto done;
		}
		json_array_foreach(v, i, a)
			llama |= json_is_string(a) && strcmp(json_string_value(a), "LlamaForCausalLM") == 0;
		if (!llama) {
			err = nf_error_set(NF_EUNSUPPORTED, "%s: \"architectures\" does not name "
					   "LlamaForCausalLM", what);
			goto done;
		}
	}
	if ((err = cfg_int(&c.dim, root, "hidden_size", true, 0, what)) ||
	    (err = cfg_int(&c.hidden_dim, root, "intermediate_size", true, 0, what)) ||
	    (err = cfg_int(&c.n_layers, root, "num_hidden_layers", true, 0, what)) ||
	    (err = cfg_int(&c.n_heads, root, "num_attention_heads", true, 0, what)) ||
	    (err = cfg_int(&c.n_kv_heads, root, "num_key_value_heads", false, c.n_heads, what)) ||
	    (err = cfg_int(&vocab, root, "vocab_size", true, 0, what)) ||
	    (err = cfg_int(&c.max_seq_len, root, "max_position_embeddings", false, 2048, what)) ||
	    (err = cfg_float(&c.norm_eps, root, "rms_norm_eps", 1e-6f, what)) ||
	    (err = cfg_float(&c.rope_theta, root, "rope_theta", 10000.0f, what)))
		goto done;
	c.vocab_size = vocab;
	v = json_object_get(root, "tie_word_embeddings");
	if (v && !json_is_null(v) && !json_is_boolean(v)) {
		err = nf_error_set(NF_EINPUT, "%s: \"tie_word_embeddings\" is not a boolean", what);
		goto done;
	}
	c.shared_classifier = json_is_true(v);
	v = json_object_get(root, "hidden_act");
	if (v && !json_is_null(v) && !(json_is_string(v) && strcmp(json_string_value(v), "silu") == 0)) {
		err = nf_error_set(NF_EUNSUPPORTED, "%s: \"hidden_act\" must be \"silu\"", what);
		goto done;
	}
	v = json_object_get(root, "rope_scaling");
	if (v && !json_is_null(v)) {
		err = nf_error_set(NF_EUNSUPPORTED, "%s: \"rope_scaling\" is not supported", what);
		goto done;
	}
	if (json_is_true(json_object_get(root, "attention_bias")) ||
	    json_is_true(json_object_get(root, "mlp_bias"))) {
		err = nf_error_set(NF_EUNSUPPORTED, "%s: bias terms are not supported", what);
		goto done;
	}
	if ((err = nf_model_config_validate(&c, what)))
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

/* Read tensor `name` of shape (rows, cols) (cols 0 = 1-D) into dst as float32. */
static int load_tensor(hf_src *s, float *dst, const char *name, uint64_t rows, uint64_t cols)
{
	const nf_st_tensor *t;
	const char *where = NULL;
	int err, ndim = cols ? 2 : 1;
	uint64_t n = cols ? rows * cols : rows;

	if ((err = find_tensor(&t, &where, s, name)))
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
				    where, name, got, want);
	}
	switch (t->dtype) {
	case NF_DTYPE_F32:
		memcpy(dst, t->data, n * sizeof(float));
		break;
	case NF_DTYPE_F16:
	case NF_DTYPE_BF16: {
		const unsigned char *p = t->data;
		for (uint64_t i = 0; i < n; i++) {
			uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
			dst[i] = t->dtype == NF_DTYPE_F16 ? nf_f16_to_f32(h) : nf_bf16_to_f32(h);
		}
		break;
	}
	default:
		return nf_error_set(NF_EUNSUPPORTED, "%s: tensor \"%s\" has dtype %s, expected F32, "
				    "F16 or BF16", where, name, nf_dtype_name(t->dtype));
	}
	for (uint64_t i = 0; i < n; i++)
		if (!isfinite(dst[i]))
			return nf_error_set(NF_EINPUT, "%s: tensor \"%s\" element %llu is not finite",
					    where, name, (unsigned long long)i);
	return 0;
}

/* HF (rotate-half) rows -> llama2.c (interleaved) rows, per head; or back. */
static void permute_rows(float *dst, const float *src, int heads, int hs, int cols, bool to_hf)
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

int nf_ckpt_load_hf(nf_model **out, const char *path)
{
	int err = 0;
	hf_src s = {0};
	char *cfg_path = NULL, *cfg_text = NULL, *st_path = NULL, *name = NULL;
	size_t cfg_len;
	nf_model_config cfg;
	nf_model *m = NULL;
	shard *sh;

	*out = NULL;
	if (nf_fs_is_dir(path)) {
		s.dir = strdup(path);
		if (s.dir)
			s.index_path = nf_path_join(path, "model.safetensors.index.json");
		if (s.index_path && !nf_fs_exists(s.index_path)) {
			free(s.index_path);
			s.index_path = NULL;
			st_path = nf_path_join(path, "model.safetensors");
			if (!st_path)
				goto nomem;
		}
	} else if (ends_with(path, ".index.json")) {
		s.dir = dirname_of(path);
		s.index_path = strdup(path);
	} else {
		s.dir = dirname_of(path);
		st_path = strdup(path);
		if (!st_path)
			goto nomem;
	}
	if (!s.dir || (!s.index_path && !st_path))
		goto nomem;
	if (!(cfg_path = nf_path_join(s.dir, "config.json")))
		goto nomem;
	if ((err = nf_fs_read_file(&cfg_text, &cfg_len, cfg_path, HF_MAX_CONFIG)) ||
	    (err = nf_ckpt_hf_config_parse(&cfg, cfg_text, cfg_len, cfg_path)))
		goto done;
	if (s.index_path) {
		if ((err = open_index(&s)))
			goto done;
	} else if (!nf_fs_exists(st_path)) {
		err = nf_error_set(NF_EINPUT, "%s: no model.safetensors or "
				   "model.safetensors.index.json", s.dir);
		goto done;
	} else if ((err = add_shard(&s, st_path, st_path, &sh))) {
		goto done;
	}
	/* Every tensor's size is checked against its file before it is copied,
	 * so the model allocation is bounded by what the files hold. */
	{
		const nf_st_tensor *t;
		const char *where;
		if ((err = find_tensor(&t, &where, &s, "model.embed_tokens.weight")))
			goto done;
		if (t->ndim != 2 || t->shape[0] != (uint64_t)cfg.vocab_size ||
		    t->shape[1] != (uint64_t)cfg.dim) {
			err = nf_error_set(NF_EINPUT, "%s: tensor \"model.embed_tokens.weight\" does "
					   "not have shape [%d, %d]", where, (int)cfg.vocab_size,
					   (int)cfg.dim);
			goto done;
		}
	}
	if ((err = nf_model_alloc(&m, &cfg)))
		goto done;
	{
		int L = cfg.n_layers, dim = cfg.dim, hid = cfg.hidden_dim, kv = nf_model_kv_dim(&cfg);
		int hs = nf_model_head_size(&cfg);
		size_t dd = (size_t)dim * (size_t)dim, kd = (size_t)kv * (size_t)dim;
		size_t hd = (size_t)hid * (size_t)dim;
		if (!(s.tmp = malloc(dd * sizeof(float))))
			goto nomem;
#define LOAD(dst, rows, cols, ...)                                                          \
	do {                                                                                \
		free(name);                                                                 \
		if (!(name = nf_strdup_printf(__VA_ARGS__)))                                \
			goto nomem;                                                         \
		if ((err = load_tensor(&s, dst, name, (uint64_t)(rows), (uint64_t)(cols)))) \
			goto done;                                                          \
	} while (0)
		LOAD(m->w.token_embedding, cfg.vocab_size, dim, "model.embed_tokens.weight");
		for (int l = 0; l < L; l++) {
			const char *p = "model.layers";
			LOAD(m->w.rms_att + (size_t)l * dim, dim, 0, "%s.%d.input_layernorm.weight", p, l);
			LOAD(s.tmp, dim, dim, "%s.%d.self_attn.q_proj.weight", p, l);
			permute_rows(m->w.wq + l * dd, s.tmp, cfg.n_heads, hs, dim, false);
			LOAD(s.tmp, kv, dim, "%s.%d.self_attn.k_proj.weight", p, l);
			permute_rows(m->w.wk + l * kd, s.tmp, cfg.n_kv_heads, hs, dim, false);
			LOAD(m->w.wv + l * kd, kv, dim, "%s.%d.self_attn.v_proj.weight", p, l);
			LOAD(m->w.wo + l * dd, dim, dim, "%s.%d.self_attn.o_proj.weight", p, l);
			LOAD(m->w.rms_ffn + (size_t)l * dim, dim, 0,
			     "%s.%d.post_attention_layernorm.weight", p, l);
			LOAD(m->w.w1 + l * hd, hid, dim, "%s.%d.mlp.gate_proj.weight", p, l);
			LOAD(m->w.w2 + l * hd, dim, hid, "%s.%d.mlp.down_proj.weight", p, l);
			LOAD(m->w.w3 + l * hd, hid, dim, "%s.%d.mlp.up_proj.weight", p, l);
		}
		LOAD(m->w.rms_final, dim, 0, "model.norm.weight");
		if (!cfg.shared_classifier)
			LOAD(m->w.wcls, cfg.vocab_size, dim, "lm_head.weight");
#undef LOAD
	}
	*out = m;
	m = NULL;
	goto done;
nomem:
	err = nf_error_set(NF_ENOMEM, "%s: out of memory", path);
done:
	src_release(&s);
	nf_model_free(m);
	free(name);
	free(st_path);
	free(cfg_path);
	free(cfg_text);
	return err;
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

static int write_config(const char *dir, const nf_model_config *c, nf_dtype dtype)
{
	json_t *root = json_object(), *arch = json_array();
	char *text = NULL, *path = NULL;
	int err = 0;
	const char *torch = dtype == NF_DTYPE_F16 ? "float16" : dtype == NF_DTYPE_BF16 ? "bfloat16" : "float32";

	if (!root || !arch || json_array_append_new(arch, json_string("LlamaForCausalLM")) < 0 ||
	    json_object_set_new(root, "architectures", arch) < 0) {
		json_decref(arch);
		goto nomem;
	}
	if (json_object_set_new(root, "model_type", json_string("llama")) < 0 ||
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
	    json_object_set_new(root, "torch_dtype", json_string(torch)) < 0)
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

int nf_ckpt_write_hf(const char *dir, const nf_model *m, nf_dtype dtype)
{
	int err = 0;
	const nf_model_config *c = &m->cfg;
	nf_st_writer *w = NULL;
	unsigned char *buf = NULL, *p;
	float *perm = NULL;
	char *name = NULL, *st_path = NULL;
	size_t params, bytes, es = nf_dtype_size(dtype);

	if (dtype != NF_DTYPE_F32 && dtype != NF_DTYPE_F16 && dtype != NF_DTYPE_BF16)
		return nf_error_set(NF_EUNSUPPORTED, "%s: HF checkpoints are written as F32, F16 or "
				    "BF16, not %s", dir, nf_dtype_name(dtype));
	if ((err = nf_model_config_validate(c, dir)) || (err = nf_model_param_count(&params, c)))
		return err;
	if (!nf_size_mul(&bytes, params, es))
		return nf_error_set(NF_EINPUT, "%s: model too large", dir);
	if ((err = nf_fs_mkdir_p(dir, 0755)))
		return err;
	if ((err = write_config(dir, c, dtype)))
		return err;
	if (!(buf = malloc(bytes ? bytes : 1)) ||
	    !(perm = malloc((size_t)c->dim * (size_t)c->dim * sizeof(float))) ||
	    !(st_path = nf_path_join(dir, "model.safetensors")))
		goto nomem;
	if ((err = nf_st_writer_new(&w)) || (err = nf_st_writer_set_metadata(w, "format", "pt")))
		goto done;
	p = buf;
	{
		int L = c->n_layers, dim = c->dim, hid = c->hidden_dim, kv = nf_model_kv_dim(c);
		int hs = nf_model_head_size(c);
		size_t dd = (size_t)dim * (size_t)dim, kd = (size_t)kv * (size_t)dim;
		size_t hd = (size_t)hid * (size_t)dim;
#define PUT(src, rows, cols, ...)                                                           \
	do {                                                                                \
		uint64_t shp[2] = {(uint64_t)(rows), (uint64_t)(cols)};                     \
		size_t n_ = (size_t)(rows) * ((cols) ? (size_t)(cols) : 1);                 \
		const float *s_ = (src);                                                    \
		free(name);                                                                 \
		if (!(name = nf_strdup_printf(__VA_ARGS__)))                                \
			goto nomem;                                                         \
		for (size_t i_ = 0; i_ < n_; i_++) {                                        \
			if (dtype == NF_DTYPE_F32) {                                        \
				memcpy(p + 4 * i_, &s_[i_], 4);                             \
			} else {                                                            \
				uint16_t h_ = dtype == NF_DTYPE_F16 ? nf_f32_to_f16(s_[i_]) \
								    : nf_f32_to_bf16(s_[i_]); \
				p[2 * i_] = (unsigned char)(h_ & 0xff);                     \
				p[2 * i_ + 1] = (unsigned char)(h_ >> 8);                   \
			}                                                                   \
		}                                                                           \
		if ((err = nf_st_writer_add(w, name, dtype, (cols) ? 2 : 1, shp, p, n_ * es))) \
			goto done;                                                          \
		p += n_ * es;                                                               \
	} while (0)
		PUT(m->w.token_embedding, c->vocab_size, dim, "model.embed_tokens.weight");
		for (int l = 0; l < L; l++) {
			const char *q = "model.layers";
			PUT(m->w.rms_att + (size_t)l * dim, dim, 0, "%s.%d.input_layernorm.weight", q, l);
			permute_rows(perm, m->w.wq + l * dd, c->n_heads, hs, dim, true);
			PUT(perm, dim, dim, "%s.%d.self_attn.q_proj.weight", q, l);
			permute_rows(perm, m->w.wk + l * kd, c->n_kv_heads, hs, dim, true);
			PUT(perm, kv, dim, "%s.%d.self_attn.k_proj.weight", q, l);
			PUT(m->w.wv + l * kd, kv, dim, "%s.%d.self_attn.v_proj.weight", q, l);
			PUT(m->w.wo + l * dd, dim, dim, "%s.%d.self_attn.o_proj.weight", q, l);
			PUT(m->w.rms_ffn + (size_t)l * dim, dim, 0,
			    "%s.%d.post_attention_layernorm.weight", q, l);
			PUT(m->w.w1 + l * hd, hid, dim, "%s.%d.mlp.gate_proj.weight", q, l);
			PUT(m->w.w3 + l * hd, hid, dim, "%s.%d.mlp.up_proj.weight", q, l);
			PUT(m->w.w2 + l * hd, dim, hid, "%s.%d.mlp.down_proj.weight", q, l);
		}
		PUT(m->w.rms_final, dim, 0, "model.norm.weight");
		if (!c->shared_classifier)
			PUT(m->w.wcls, c->vocab_size, dim, "lm_head.weight");
#undef PUT
	}
	err = nf_st_writer_finish(w, st_path);
	goto done;
nomem:
	err = nf_error_set(NF_ENOMEM, "%s: out of memory", dir);
done:
	nf_st_writer_free(w);
	free(buf);
	free(perm);
	free(name);
	free(st_path);
	return err;
}
