/*
 * timing_cache.c - the timing cache's file (see timing_cache.h): JSON,
 *   {"format": "nimfactory-timing-cache", "version": 1,
 *    "sku": "h100-sxm", "driver": 12040, "cubin_sha256": "...",
 *    "entries": [{"family": "gemv_q8", "rows": 4096, "cols": 4096, "batch": 1,
 *                 "kernel": "nf_cu_gemv_q8", "tile_rows": 4, "tile_tokens": 1,
 *                 "split_k": 1, "vector": 4, "median_us": 21.5, "runs": 20,
 *                 "candidates": {"nf_cu_gemv_q8": 21.5, "nf_cu_gemv_sk_q8": 30.1}}, ...]}
 * ("candidates" optional)
 * every field checked against a bound when read.
 */
#include "engine/cuda/timing_cache.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/banned.h"

#define FILE_MAX_BYTES (64u << 20)
#define DIM_MAX (1 << 24)

typedef struct entry {
	nf_tc_shape shape;
	nf_tc_tactic tactic;
} entry;

struct nf_timing_cache {
	nf_tc_key key;
	entry *e;
	size_t n, cap;
};

int nf_timing_cache_new(nf_timing_cache **out, const nf_tc_key *key)
{
	if (!(*out = calloc(1, sizeof **out)))
		return nf_error_set(NF_ENOMEM, "timing cache: out of memory");
	(*out)->key = *key;
	return 0;
}

void nf_timing_cache_free(nf_timing_cache *c)
{
	if (!c)
		return;
	free(c->e);
	free(c);
}

size_t nf_timing_cache_count(const nf_timing_cache *c) { return c->n; }
const nf_tc_key *nf_timing_cache_key(const nf_timing_cache *c) { return &c->key; }

static int same_shape(const nf_tc_shape *a, const nf_tc_shape *b)
{
	return !strcmp(a->family, b->family) && a->rows == b->rows && a->cols == b->cols &&
	       a->batch == b->batch;
}

int nf_timing_cache_find(const nf_timing_cache *c, const nf_tc_shape *s, nf_tc_tactic *out)
{
	for (size_t i = 0; i < c->n; i++)
		if (same_shape(&c->e[i].shape, s)) {
			*out = c->e[i].tactic;
			return 1;
		}
	return 0;
}

int nf_timing_cache_put(nf_timing_cache *c, const nf_tc_shape *s, const nf_tc_tactic *t)
{
	for (size_t i = 0; i < c->n; i++)
		if (same_shape(&c->e[i].shape, s)) {
			c->e[i].tactic = *t;
			return 0;
		}
	if (c->n >= NF_TC_MAX_ENTRIES)
		return nf_error_set(NF_EINPUT, "timing cache: more than %d shapes", NF_TC_MAX_ENTRIES);
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 32;
		entry *e = realloc(c->e, cap * sizeof *e);
		if (!e)
			return nf_error_set(NF_ENOMEM, "timing cache: out of memory");
		c->e = e;
		c->cap = cap;
	}
	c->e[c->n].shape = *s;
	c->e[c->n].tactic = *t;
	c->n++;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double nf_tc_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- writing ---- */

static json_t *candidates_json(const nf_tc_tactic *t)
{
	json_t *o = json_object();
	for (int i = 0; o && i < t->n_candidates; i++)
		if (json_object_set_new(o, t->candidate[i], json_real(t->candidate_us[i]))) {
			json_decref(o);
			return NULL;
		}
	return o;
}

static json_t *entry_json(const entry *e)
{
	return json_pack("{s:s, s:i, s:i, s:i, s:s, s:i, s:i, s:i, s:i, s:f, s:i, s:o}", "family",
			 e->shape.family, "rows", e->shape.rows, "cols", e->shape.cols, "batch",
			 e->shape.batch, "kernel", e->tactic.kernel, "tile_rows", e->tactic.tile_rows,
			 "tile_tokens", e->tactic.tile_tokens, "split_k", e->tactic.split_k, "vector",
			 e->tactic.vector, "median_us", e->tactic.median_us, "runs", e->tactic.runs,
			 "candidates", candidates_json(&e->tactic));
}

int nf_timing_cache_save(const nf_timing_cache *c, const char *path)
{
	json_t *root = json_pack("{s:s, s:i, s:s, s:i, s:s, s:[]}", "format", NF_TC_FORMAT, "version",
				 NF_TC_VERSION, "sku", c->key.sku, "driver", c->key.driver,
				 "cubin_sha256", c->key.cubin_sha256, "entries");
	json_t *list = json_object_get(root, "entries");
	char *text = NULL;
	int err = 0;
	for (size_t i = 0; root && i < c->n && !err; i++)
		if (json_array_append_new(list, entry_json(&c->e[i])) != 0)
			err = nf_error_set(NF_ENOMEM, "timing cache: out of memory");
	if (!err && (!root || !(text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS))))
		err = nf_error_set(NF_ENOMEM, "timing cache: out of memory");
	if (!err)
		err = nf_fs_write_atomic(path, text, strlen(text), 0644);
	free(text);
	json_decref(root);
	return err;
}

/* ---- reading ---- */

static void warn(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void warn(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	if (!buf || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* An integer field in [lo, hi]; 0 when it is not. */
static int int_field(int *out, json_t *o, const char *name, int lo, int hi)
{
	json_t *v = json_object_get(o, name);
	json_int_t x;
	if (!json_is_integer(v) || (x = json_integer_value(v)) < lo || x > hi)
		return 0;
	*out = (int)x;
	return 1;
}

static int str_field(char *out, size_t len, json_t *o, const char *name)
{
	const char *s = json_string_value(json_object_get(o, name));
	if (!s || !*s || strlen(s) >= len)
		return 0;
	memcpy(out, s, strlen(s) + 1);
	return 1;
}

/* The optional "candidates" of an entry into t: 1, or 0 when damaged. */
static int parse_candidates(nf_tc_tactic *t, json_t *o)
{
	json_t *c = json_object_get(o, "candidates"), *v;
	const char *k;
	if (!c)
		return 1;
	if (!json_is_object(c) || json_object_size(c) > NF_TC_CANDIDATES_MAX)
		return 0;
	json_object_foreach(c, k, v) {
		int i = t->n_candidates;
		if (!*k || strlen(k) >= NF_TC_NAME_MAX || !json_is_number(v) ||
		    !isfinite(json_number_value(v)) || json_number_value(v) <= 0)
			return 0;
		memcpy(t->candidate[i], k, strlen(k) + 1);
		t->candidate_us[i] = json_number_value(v);
		t->n_candidates++;
	}
	return 1;
}

static int parse_entry(entry *e, json_t *o)
{
	json_t *us = json_object_get(o, "median_us");
	memset(e, 0, sizeof *e);
	if (!str_field(e->shape.family, sizeof e->shape.family, o, "family") ||
	    !str_field(e->tactic.kernel, sizeof e->tactic.kernel, o, "kernel") ||
	    !int_field(&e->shape.rows, o, "rows", 1, DIM_MAX) ||
	    !int_field(&e->shape.cols, o, "cols", 1, DIM_MAX) ||
	    !int_field(&e->shape.batch, o, "batch", 1, 1 << 16) ||
	    !int_field(&e->tactic.tile_rows, o, "tile_rows", 1, 4096) ||
	    !int_field(&e->tactic.tile_tokens, o, "tile_tokens", 1, 4096) ||
	    !int_field(&e->tactic.split_k, o, "split_k", 1, 1024) ||
	    !int_field(&e->tactic.vector, o, "vector", 1, 64) ||
	    !int_field(&e->tactic.runs, o, "runs", 1, 1 << 20) || !json_is_number(us))
		return 0;
	e->tactic.median_us = json_number_value(us);
	return isfinite(e->tactic.median_us) && e->tactic.median_us > 0 &&
	       parse_candidates(&e->tactic, o);
}

/* Whether the file's key is key: all three must be the same. */
static int same_key(json_t *root, const nf_tc_key *key)
{
	const char *sku = json_string_value(json_object_get(root, "sku"));
	const char *sha = json_string_value(json_object_get(root, "cubin_sha256"));
	json_t *drv = json_object_get(root, "driver");
	return sku && sha && json_is_integer(drv) && !strcmp(sku, key->sku) &&
	       !strcmp(sha, key->cubin_sha256) && json_integer_value(drv) == key->driver;
}

/* The entries of root into c: 0, 1 with a reason into warning when one is
 * damaged, or a negative NF_E* (memory). */
static int read_entries(nf_timing_cache *c, json_t *root, const char *path, char *warning,
			size_t wlen)
{
	json_t *list = json_object_get(root, "entries"), *o;
	size_t i;
	int err;
	if (!json_is_array(list) || json_array_size(list) > NF_TC_MAX_ENTRIES) {
		warn(warning, wlen, "%s: no list of at most %d entries: timing again", path,
		     NF_TC_MAX_ENTRIES);
		return 1;
	}
	json_array_foreach(list, i, o) {
		entry e;
		if (!parse_entry(&e, o)) {
			warn(warning, wlen, "%s: entry %zu is damaged: timing again", path, i);
			return 1;
		}
		if ((err = nf_timing_cache_put(c, &e.shape, &e.tactic)))
			return err;
	}
	return 0;
}

int nf_timing_cache_load(nf_timing_cache **out, const char *path, const nf_tc_key *key,
			 char *warning, size_t wlen)
{
	char *text = NULL;
	json_t *root = NULL;
	const char *format;
	json_int_t version;
	size_t len;
	int err;

	warn(warning, wlen, "%s", "");
	if ((err = nf_timing_cache_new(out, key)))
		return err;
	if (nf_fs_read_file(&text, &len, path, FILE_MAX_BYTES) != 0)
		return 0; /* no cache yet: every shape a miss */
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	format = json_string_value(json_object_get(root, "format"));
	version = json_integer_value(json_object_get(root, "version"));
	if (!format || strcmp(format, NF_TC_FORMAT) != 0 || version != NF_TC_VERSION)
		warn(warning, wlen, "%s: not a timing cache of version %d: timing again", path,
		     NF_TC_VERSION);
	else if (same_key(root, key) && (err = read_entries(*out, root, path, warning, wlen)) != 0) {
		(*out)->n = 0; /* damaged: none of it is trusted */
		err = err > 0 ? 0 : err;
	}
	json_decref(root);
	free(text);
	if (err) {
		nf_timing_cache_free(*out);
		*out = NULL;
	}
	return err;
}
