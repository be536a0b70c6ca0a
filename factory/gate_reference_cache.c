/*
 * gate_reference_cache.c - the float32 reference as a stage result: saved
 * into a stage folder and loaded back from one (see gate_reference.h).
 *
 * The folder holds NF_GATE_REF_META (JSON: the model dimensions the gates
 * check engines against, the windows' and prompts' tokens, the row count
 * and format) and NF_GATE_REF_LOGITS (the rows as computed).  Loading
 * checks everything it will index with against the rest before use: the
 * tokens against the vocabulary, the rows the windows and prompts name
 * against the count, the count against the logits file's size.
 */
#define _GNU_SOURCE
#include "factory/gate_reference.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* The metadata of a reference holds token lists of at most the evaluation
 * text's tokens and the prompts' continuations: far below this. */
#define META_MAX ((size_t)64 << 20)

static json_t *int_array(const int *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, json_integer(v[i]))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *meta_json(const nf_gate_ref *r)
{
	const nf_model_config *c = &r->cfg;
	json_t *windows = json_array(), *prompts = json_array();
	for (size_t i = 0; windows && i < r->n_windows; i++)
		if (json_array_append_new(windows, int_array(r->windows[i].tokens,
							    (size_t)r->windows[i].n_tokens)))
			json_decref(windows), windows = NULL;
	for (size_t i = 0; prompts && i < r->n_prompts; i++) {
		const nf_gate_ref_prompt *p = &r->prompts[i];
		if (json_array_append_new(prompts, json_pack("{s:s, s:i, s:o*}", "text", p->text,
							     "n_prompt", p->n_prompt, "tokens",
							     int_array(p->tokens, (size_t)(p->n_prompt +
											   p->n_continued)))))
			json_decref(prompts), prompts = NULL;
	}
	if (!windows || !prompts) {
		json_decref(windows);
		json_decref(prompts);
		return NULL;
	}
	return json_pack("{s:i, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}, s:b, s:I, s:I, s:f, "
			 "s:o, s:o}",
			 "version", 1, "model", "arch", (int)c->arch, "dim", c->dim, "hidden_dim",
			 c->hidden_dim, "n_layers", c->n_layers, "n_heads", c->n_heads, "n_kv_heads",
			 c->n_kv_heads, "vocab_size", c->vocab_size, "max_seq_len", c->max_seq_len,
			 "half", r->half, "rows", (json_int_t)r->n_rows, "text_tokens",
			 (json_int_t)r->text_tokens, "seconds", r->seconds, "windows", windows,
			 "prompts", prompts);
}

int nf_gate_ref_save(const nf_gate_ref *r, const char *dir)
{
	char *meta = nf_path_join(dir, NF_GATE_REF_META), *logits = nf_path_join(dir, NF_GATE_REF_LOGITS);
	json_t *j = meta_json(r);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	int err = meta && logits && text ? nf_fs_copy_file(r->path, logits)
					 : nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = nf_fs_write_atomic(meta, text, strlen(text), 0444);
	json_decref(j);
	free(text);
	free(meta);
	free(logits);
	return err;
}

/* ---- load ---- */

static int get_int(int *out, const json_t *o, const char *key, int lo, int hi)
{
	const json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return nf_error_set(NF_EINPUT, "%s: not in %d..%d", key, lo, hi);
	*out = (int)json_integer_value(v);
	return 0;
}

static int read_model(nf_model_config *c, const json_t *m)
{
	int arch = 0, err;
	if ((err = get_int(&arch, m, "arch", 0, 255)) || (err = get_int(&c->dim, m, "dim", 1, 1 << 24)) ||
	    (err = get_int(&c->hidden_dim, m, "hidden_dim", 1, 1 << 26)) ||
	    (err = get_int(&c->n_layers, m, "n_layers", 1, 1 << 16)) ||
	    (err = get_int(&c->n_heads, m, "n_heads", 1, 1 << 16)) ||
	    (err = get_int(&c->n_kv_heads, m, "n_kv_heads", 1, 1 << 16)) ||
	    (err = get_int(&c->vocab_size, m, "vocab_size", 1, 1 << 24)) ||
	    (err = get_int(&c->max_seq_len, m, "max_seq_len", 2, 1 << 24)))
		return err;
	c->arch = (nf_arch_id)arch;
	return 0;
}

/* The tokens of a, each a token of the vocabulary, into dst (room for n). */
static int read_tokens(int *dst, const json_t *a, size_t n, int vocab)
{
	for (size_t i = 0; i < n; i++) {
		const json_t *v = json_array_get(a, i);
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= vocab)
			return nf_error_set(NF_EINPUT, "a token is not in the vocabulary");
		dst[i] = (int)json_integer_value(v);
	}
	return 0;
}

/* The windows, their rows counted from 0. */
static int read_windows(nf_gate_ref *r, const json_t *ws, size_t *rows)
{
	size_t total = 0, at = 0, n = json_array_size(ws);
	const json_t *w;
	size_t i;
	json_array_foreach(ws, i, w) {
		if (!json_is_array(w) || json_array_size(w) < 2 ||
		    json_array_size(w) > (size_t)r->cfg.max_seq_len)
			return nf_error_set(NF_EINPUT, "window %zu: not 2..context tokens", i);
		total += json_array_size(w);
	}
	if (!n || !(r->eval_tokens = calloc(total, sizeof(int))) ||
	    !(r->windows = calloc(n, sizeof(*r->windows))))
		return n ? nf_error_set(NF_ENOMEM, "out of memory") : nf_error_set(NF_EINPUT, "no window");
	json_array_foreach(ws, i, w) {
		nf_gate_ref_window *win = &r->windows[i];
		int err = read_tokens(r->eval_tokens + at, w, json_array_size(w), r->cfg.vocab_size);
		if (err)
			return err;
		win->tokens = r->eval_tokens + at;
		win->n_tokens = (int)json_array_size(w);
		win->first_row = *rows;
		*rows += (size_t)win->n_tokens - 1;
		at += json_array_size(w);
		r->n_windows++;
	}
	return 0;
}

static int read_prompts(nf_gate_ref *r, const json_t *ps, size_t *rows)
{
	const json_t *p;
	size_t i;
	if (json_array_size(ps) && !(r->prompts = calloc(json_array_size(ps), sizeof(*r->prompts))))
		return nf_error_set(NF_ENOMEM, "out of memory");
	json_array_foreach(ps, i, p) {
		nf_gate_ref_prompt *g = &r->prompts[i];
		const json_t *toks = json_object_get(p, "tokens");
		const char *text = json_string_value(json_object_get(p, "text"));
		size_t n = json_array_size(toks);
		int err;
		r->n_prompts = i + 1;
		if (!text || (err = get_int(&g->n_prompt, p, "n_prompt", 1, r->cfg.max_seq_len - 1)) ||
		    n <= (size_t)g->n_prompt || n > (size_t)r->cfg.max_seq_len + 1)
			return nf_error_set(NF_EINPUT, "prompt %zu: malformed", i);
		if (!(g->text = strdup(text)) || !(g->tokens = calloc(n, sizeof(int))))
			return nf_error_set(NF_ENOMEM, "out of memory");
		if ((err = read_tokens(g->tokens, toks, n, r->cfg.vocab_size)))
			return err;
		g->n_continued = (int)n - g->n_prompt;
		g->first_row = *rows;
		*rows += (size_t)g->n_continued;
	}
	return 0;
}

/* Every field of the metadata into r, checked against each other. */
static int read_meta(nf_gate_ref *r, const json_t *j)
{
	const json_t *rows_j = json_object_get(j, "rows"), *tt = json_object_get(j, "text_tokens");
	size_t rows = 0;
	int version = 0, err;
	if ((err = get_int(&version, j, "version", 1, 1)) ||
	    (err = read_model(&r->cfg, json_object_get(j, "model"))))
		return err;
	if (!json_is_boolean(json_object_get(j, "half")) || !json_is_integer(rows_j) ||
	    !json_is_integer(tt) || json_integer_value(tt) < 0 ||
	    !json_is_array(json_object_get(j, "windows")) || !json_is_array(json_object_get(j, "prompts")))
		return nf_error_set(NF_EINPUT, "missing or malformed fields");
	r->half = json_is_true(json_object_get(j, "half"));
	r->text_tokens = (size_t)json_integer_value(tt);
	r->seconds = json_number_value(json_object_get(j, "seconds"));
	if ((err = read_windows(r, json_object_get(j, "windows"), &rows)) ||
	    (err = read_prompts(r, json_object_get(j, "prompts"), &rows)))
		return err;
	if (json_integer_value(rows_j) < 0 || (uint64_t)json_integer_value(rows_j) != rows)
		return nf_error_set(NF_EINPUT, "%zu rows named, %lld stored", rows,
				    (long long)json_integer_value(rows_j));
	r->n_rows = rows;
	return 0;
}

/* Map the logits, whose size must be exactly the rows'. */
static int map_logits(nf_gate_ref *r, const char *dir)
{
	uint64_t want;
	if (!(r->path = nf_path_join(dir, NF_GATE_REF_LOGITS)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	int err = nf_fs_map_file(&r->map, &r->map_size, r->path);
	if (err)
		return err;
	if (!nf_u64_mul(&want, r->n_rows, (uint64_t)r->cfg.vocab_size * (r->half ? 2 : 4)) ||
	    want != r->map_size)
		return nf_error_set(NF_EINPUT, "%s: %zu bytes, not the %zu rows' size", r->path,
				    r->map_size, r->n_rows);
	return 0;
}

int nf_gate_ref_load(nf_gate_ref **out, const char *dir)
{
	char *meta = nf_path_join(dir, NF_GATE_REF_META), *text = NULL;
	size_t len = 0;
	json_t *j = NULL;
	nf_gate_ref *r = calloc(1, sizeof(*r));
	int err = meta && r ? nf_fs_read_file(&text, &len, meta, META_MAX)
			    : nf_error_set(NF_ENOMEM, "out of memory");

	*out = NULL;
	if (r)
		r->keep_file = true; /* the cache's: never removed by free */
	if (!err && !(j = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL)))
		err = nf_error_set(NF_EINPUT, "not JSON");
	if (!err)
		err = read_meta(r, j);
	if (!err)
		err = map_logits(r, dir);
	if (err) {
		nf_error_wrap(err, "%s: gate reference", dir);
		nf_gate_ref_free(r);
	} else {
		*out = r;
	}
	json_decref(j);
	free(text);
	free(meta);
	return err;
}
