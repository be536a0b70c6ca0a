/*
 * safetensors.c - the safetensors reader (mmap, validate every field before
 * exposing a tensor) and the deterministic, 64-byte aligned, atomic writer
 * (see safetensors.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "engine/safetensors.h"

#include <errno.h>
#include <stdarg.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define ST_ALIGN 64

static const struct {
	const char *name;
	size_t size;
} dtypes[] = {
	[NF_DTYPE_F32] = {"F32", 4},   [NF_DTYPE_F16] = {"F16", 2}, [NF_DTYPE_BF16] = {"BF16", 2},
	[NF_DTYPE_I8] = {"I8", 1},     [NF_DTYPE_U8] = {"U8", 1},   [NF_DTYPE_I32] = {"I32", 4},
	[NF_DTYPE_F8_E4M3] = {"F8_E4M3", 1},
};
#define N_DTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

const char *nf_dtype_name(nf_dtype t)
{
	return (unsigned)t < N_DTYPES ? dtypes[t].name : "?";
}

size_t nf_dtype_size(nf_dtype t)
{
	return (unsigned)t < N_DTYPES ? dtypes[t].size : 0;
}

static bool dtype_parse(nf_dtype *out, const char *s)
{
	for (size_t i = 0; i < N_DTYPES; i++) {
		if (strcmp(dtypes[i].name, s) == 0) {
			*out = (nf_dtype)i;
			return true;
		}
	}
	return false;
}

/* ---------------------------------------------------------------- reader */

struct nf_st_file {
	char *path;            /* owned */
	const unsigned char *base; /* file bytes */
	size_t size;
	bool mapped;           /* base is our mmap */
	json_t *root;          /* owned header; tensor names point into it */
	json_t *metadata;      /* borrowed from root, may be NULL */
	nf_st_tensor *tensors; /* owned, header order */
	size_t n;
	size_t *by_name;       /* owned: indices sorted by name */
};

static int st_error(const nf_st_file *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int st_error(const nf_st_file *f, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return nf_error_set(NF_EINPUT, "%s: %s", f->path, msg);
}

/* A non-negative JSON integer as uint64. */
static bool json_u64(uint64_t *out, const json_t *v)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

static int cmp_begin(const void *a, const void *b, void *ctx)
{
	const nf_st_file *f = ctx;
	const nf_st_tensor *x = &f->tensors[*(const size_t *)a], *y = &f->tensors[*(const size_t *)b];
	const unsigned char *px = x->data, *py = y->data;
	if (px != py)
		return px < py ? -1 : 1;
	if (x->nbytes != y->nbytes)
		return x->nbytes < y->nbytes ? -1 : 1;
	return 0;
}

static int cmp_name(const void *a, const void *b, void *ctx)
{
	const nf_st_file *f = ctx;
	return strcmp(f->tensors[*(const size_t *)a].name, f->tensors[*(const size_t *)b].name);
}

static int parse_tensor(nf_st_file *f, nf_st_tensor *t, const char *name, json_t *v,
			size_t data_off, size_t data_size)
{
	json_t *jd, *js, *jo;
	uint64_t begin, end, count = 1, nbytes;

	if (!json_is_object(v))
		return st_error(f, "tensor \"%s\": entry is not a JSON object", name);
	jd = json_object_get(v, "dtype");
	js = json_object_get(v, "shape");
	jo = json_object_get(v, "data_offsets");
	if (!json_is_string(jd))
		return st_error(f, "tensor \"%s\": missing or non-string \"dtype\"", name);
	if (!dtype_parse(&t->dtype, json_string_value(jd)))
		return st_error(f, "tensor \"%s\": unknown dtype \"%.32s\"", name,
				json_string_value(jd));
	if (!json_is_array(js))
		return st_error(f, "tensor \"%s\": missing or non-array \"shape\"", name);
	if (json_array_size(js) > NF_ST_MAX_DIMS)
		return st_error(f, "tensor \"%s\": %zu dimensions, more than %d", name,
				json_array_size(js), NF_ST_MAX_DIMS);
	t->ndim = (int)json_array_size(js);
	for (int i = 0; i < t->ndim; i++) {
		if (!json_u64(&t->shape[i], json_array_get(js, (size_t)i)))
			return st_error(f, "tensor \"%s\": shape[%d] is not a non-negative integer",
					name, i);
		if (!nf_u64_mul(&count, count, t->shape[i]))
			return st_error(f, "tensor \"%s\": shape product overflows", name);
	}
	if (!json_is_array(jo) || json_array_size(jo) != 2 ||
	    !json_u64(&begin, json_array_get(jo, 0)) || !json_u64(&end, json_array_get(jo, 1)))
		return st_error(f, "tensor \"%s\": \"data_offsets\" is not two non-negative integers",
				name);
	if (begin > end || end > data_size)
		return st_error(f, "tensor \"%s\": data_offsets [%llu, %llu] outside the data "
				"section of %zu bytes", name, (unsigned long long)begin,
				(unsigned long long)end, data_size);
	if (!nf_u64_mul(&nbytes, count, nf_dtype_size(t->dtype)) || nbytes != end - begin)
		return st_error(f, "tensor \"%s\": shape needs %llu elements of %s but "
				"data_offsets span %llu bytes", name, (unsigned long long)count,
				nf_dtype_name(t->dtype), (unsigned long long)(end - begin));
	t->name = name;
	t->nbytes = nbytes;
	t->data = f->base + data_off + begin;
	return 0;
}

static int st_parse(nf_st_file *f)
{
	int err = 0;
	uint64_t hlen = 0;
	size_t data_off, data_size, i;
	json_error_t jerr;
	const char *key;
	json_t *v;
	size_t *order = NULL;

	if (f->size < 8)
		return st_error(f, "file is %zu bytes, too small for a safetensors header", f->size);
	for (i = 0; i < 8; i++)
		hlen |= (uint64_t)f->base[i] << (8 * i);
	if (hlen > NF_ST_MAX_HEADER)
		return st_error(f, "header length %llu is more than the limit of %u bytes",
				(unsigned long long)hlen, NF_ST_MAX_HEADER);
	if (hlen > f->size - 8)
		return st_error(f, "header length %llu runs past the end of the file (%zu bytes)",
				(unsigned long long)hlen, f->size);
	data_off = 8 + (size_t)hlen;
	data_size = f->size - data_off;
	f->root = json_loadb((const char *)f->base + 8, (size_t)hlen,
			     JSON_REJECT_DUPLICATES, &jerr);
	if (!f->root)
		return st_error(f, "offset %d: header is not valid JSON: %s",
				jerr.position + 8, jerr.text);
	if (!json_is_object(f->root))
		return st_error(f, "header is not a JSON object");
	f->n = json_object_size(f->root);
	f->metadata = json_object_get(f->root, "__metadata__");
	if (f->metadata) {
		if (!json_is_object(f->metadata))
			return st_error(f, "\"__metadata__\" is not a JSON object");
		json_object_foreach(f->metadata, key, v)
			if (!json_is_string(v))
				return st_error(f, "\"__metadata__\" value \"%s\" is not a string", key);
		f->n--;
	}
	f->tensors = calloc(f->n ? f->n : 1, sizeof(*f->tensors));
	f->by_name = calloc(f->n ? f->n : 1, sizeof(*f->by_name));
	order = calloc(f->n ? f->n : 1, sizeof(*order));
	if (!f->tensors || !f->by_name || !order) {
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", f->path);
		goto done;
	}
	i = 0;
	json_object_foreach(f->root, key, v) {
		if (strcmp(key, "__metadata__") == 0)
			continue;
		if ((err = parse_tensor(f, &f->tensors[i], key, v, data_off, data_size)))
			goto done;
		f->by_name[i] = order[i] = i;
		i++;
	}
	/* No two tensors may share bytes: sort by start and compare neighbours. */
	qsort_r(order, f->n, sizeof(*order), cmp_begin, f);
	for (i = 1; i < f->n; i++) {
		const nf_st_tensor *a = &f->tensors[order[i - 1]], *b = &f->tensors[order[i]];
		const unsigned char *a_end = (const unsigned char *)a->data + a->nbytes;
		if (a->nbytes && b->nbytes && a_end > (const unsigned char *)b->data) {
			err = st_error(f, "tensors \"%s\" and \"%s\" overlap in the data section",
				       a->name, b->name);
			goto done;
		}
	}
	/* json_loadb already rejected duplicate keys; sort names for lookup. */
	qsort_r(f->by_name, f->n, sizeof(*f->by_name), cmp_name, f);
done:
	free(order);
	return err;
}

static int st_open_buf(nf_st_file **out, nf_st_file *f)
{
	int err = st_parse(f);
	if (err) {
		nf_st_close(f);
		return err;
	}
	*out = f;
	return 0;
}

int nf_st_open(nf_st_file **out, const char *path)
{
	nf_st_file *f = NULL;
	const void *map;
	int err;

	*out = NULL;
	f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(path))) {
		free(f);
		return nf_error_set(NF_ENOMEM, "%s: out of memory", path);
	}
	if ((err = nf_fs_map_file(&map, &f->size, path))) {
		nf_st_close(f);
		return err;
	}
	f->base = map;
	f->mapped = map != NULL;
	return st_open_buf(out, f);
}

int nf_st_open_mem(nf_st_file **out, const void *data, size_t len, const char *what)
{
	nf_st_file *f = calloc(1, sizeof(*f));
	*out = NULL;
	if (!f || !(f->path = strdup(what ? what : "safetensors"))) {
		free(f);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	f->base = data;
	f->size = len;
	return st_open_buf(out, f);
}

void nf_st_close(nf_st_file *f)
{
	if (!f)
		return;
	if (f->mapped)
		nf_fs_unmap_file(f->base, f->size);
	json_decref(f->root);
	free(f->tensors);
	free(f->by_name);
	free(f->path);
	free(f);
}

size_t nf_st_count(const nf_st_file *f) { return f->n; }

const nf_st_tensor *nf_st_at(const nf_st_file *f, size_t i)
{
	return i < f->n ? &f->tensors[i] : NULL;
}

const nf_st_tensor *nf_st_find(const nf_st_file *f, const char *name)
{
	size_t lo = 0, hi = f->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const nf_st_tensor *t = &f->tensors[f->by_name[mid]];
		int c = strcmp(name, t->name);
		if (c == 0)
			return t;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

const char *nf_st_metadata(const nf_st_file *f, const char *key)
{
	return f->metadata ? json_string_value(json_object_get(f->metadata, key)) : NULL;
}

/* ---------------------------------------------------------------- writer */

typedef struct st_entry {
	char *name;
	nf_dtype dtype;
	int ndim;
	uint64_t shape[NF_ST_MAX_DIMS];
	const void *data;
	uint64_t nbytes;
} st_entry;

struct nf_st_writer {
	st_entry *e;
	size_t n, cap;
	json_t *metadata; /* insertion-ordered object */
	/* between begin and commit */
	nf_atomic_file af;
	bool begun;
	uint64_t *begins;     /* (n) each tensor's offset in the data section */
	uint64_t data_start;  /* file offset of the data section */
};

int nf_st_writer_new(nf_st_writer **out)
{
	nf_st_writer *w = calloc(1, sizeof(*w));
	*out = NULL;
	if (!w)
		return nf_error_set(NF_ENOMEM, "safetensors writer: out of memory");
	w->af.fd = -1;
	*out = w;
	return 0;
}

void nf_st_writer_free(nf_st_writer *w)
{
	if (!w)
		return;
	if (w->begun)
		nf_atomic_abort(&w->af);
	for (size_t i = 0; i < w->n; i++)
		free(w->e[i].name);
	free(w->e);
	free(w->begins);
	json_decref(w->metadata);
	free(w);
}

/* A new entry; data NULL means reserved (written later with put). */
static int add_entry(nf_st_writer *w, const char *name, nf_dtype dtype, int ndim,
		     const uint64_t *shape, const void *data, uint64_t nbytes)
{
	uint64_t count = 1, want;
	st_entry *e;

	if (w->begun)
		return nf_error_set(NF_EINTERNAL, "safetensors writer: %s added after begin", name);
	if (!name || !*name || strcmp(name, "__metadata__") == 0)
		return nf_error_set(NF_EINTERNAL, "safetensors writer: invalid tensor name");
	if ((unsigned)dtype >= N_DTYPES)
		return nf_error_set(NF_EINTERNAL, "safetensors writer: %s: invalid dtype", name);
	if (ndim < 0 || ndim > NF_ST_MAX_DIMS)
		return nf_error_set(NF_EINTERNAL, "safetensors writer: %s: %d dimensions", name, ndim);
	for (int i = 0; i < ndim; i++)
		if (!nf_u64_mul(&count, count, shape[i]))
			return nf_error_set(NF_EINTERNAL, "safetensors writer: %s: shape overflows",
					    name);
	if (!nf_u64_mul(&want, count, nf_dtype_size(dtype)) || want != nbytes)
		return nf_error_set(NF_EINTERNAL,
				    "safetensors writer: %s: %llu bytes given, shape needs %llu",
				    name, (unsigned long long)nbytes, (unsigned long long)want);
	for (size_t i = 0; i < w->n; i++)
		if (strcmp(w->e[i].name, name) == 0)
			return nf_error_set(NF_EINTERNAL, "safetensors writer: duplicate tensor %s",
					    name);
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 16;
		st_entry *ne = reallocarray(w->e, cap, sizeof(*ne));
		if (!ne)
			return nf_error_set(NF_ENOMEM, "safetensors writer: out of memory");
		w->e = ne;
		w->cap = cap;
	}
	e = &w->e[w->n];
	memset(e, 0, sizeof(*e));
	if (!(e->name = strdup(name)))
		return nf_error_set(NF_ENOMEM, "safetensors writer: out of memory");
	e->dtype = dtype;
	e->ndim = ndim;
	for (int i = 0; i < ndim; i++)
		e->shape[i] = shape[i];
	e->data = data;
	e->nbytes = nbytes;
	w->n++;
	return 0;
}

int nf_st_writer_add(nf_st_writer *w, const char *name, nf_dtype dtype, int ndim,
		     const uint64_t *shape, const void *data, uint64_t nbytes)
{
	if (nbytes && !data)
		return nf_error_set(NF_EINTERNAL, "safetensors writer: %s: no data",
				    name ? name : "");
	return add_entry(w, name, dtype, ndim, shape, data, nbytes);
}

int nf_st_writer_reserve(nf_st_writer *w, const char *name, nf_dtype dtype, int ndim,
			 const uint64_t *shape, uint64_t nbytes)
{
	return add_entry(w, name, dtype, ndim, shape, NULL, nbytes);
}

int nf_st_writer_set_metadata(nf_st_writer *w, const char *key, const char *value)
{
	json_t *s;
	if (!w->metadata && !(w->metadata = json_object()))
		return nf_error_set(NF_ENOMEM, "safetensors writer: out of memory");
	if (!(s = json_string(value)) || json_object_set_new(w->metadata, key, s) < 0)
		return nf_error_set(NF_EINTERNAL, "safetensors writer: bad metadata %s", key);
	return 0;
}

static uint64_t align_up(uint64_t x) { return (x + ST_ALIGN - 1) / ST_ALIGN * ST_ALIGN; }

/* One tensor's header entry at data offsets [off, off + nbytes). */
static int header_entry(json_t *root, const st_entry *e, uint64_t off)
{
	json_t *t = json_object(), *shape = json_array(), *offs = json_array();
	if (!t || json_object_set_new(root, e->name, t) < 0 || !shape || !offs) {
		json_decref(shape);
		json_decref(offs);
		return -1;
	}
	if (json_object_set_new(t, "dtype", json_string(nf_dtype_name(e->dtype))) < 0 ||
	    json_object_set_new(t, "shape", shape) < 0) {
		json_decref(offs);
		return -1;
	}
	for (int d = 0; d < e->ndim; d++)
		if (json_array_append_new(shape, json_integer((json_int_t)e->shape[d])) < 0) {
			json_decref(offs);
			return -1;
		}
	if (json_object_set_new(t, "data_offsets", offs) < 0 ||
	    json_array_append_new(offs, json_integer((json_int_t)off)) < 0 ||
	    json_array_append_new(offs, json_integer((json_int_t)(off + e->nbytes))) < 0)
		return -1;
	return 0;
}

/* The header (8-byte length, JSON, spaces to a 64-byte boundary) into
 * *buf, with every tensor's offset in w->begins and the data section's
 * end in *end. */
static int layout(nf_st_writer *w, char **buf, size_t *len, uint64_t *end)
{
	json_t *root = json_object();
	char *hdr = NULL;
	uint64_t off = 0;
	int ok = root && (w->begins = calloc(w->n ? w->n : 1, sizeof *w->begins)) &&
		 (!w->metadata || json_object_set(root, "__metadata__", w->metadata) == 0);
	for (size_t i = 0; ok && i < w->n; i++) {
		off = align_up(off);
		w->begins[i] = off;
		ok = header_entry(root, &w->e[i], off) == 0;
		off += w->e[i].nbytes;
	}
	if (ok && (hdr = json_dumps(root, JSON_COMPACT))) {
		size_t hlen = strlen(hdr);
		size_t padded = (size_t)align_up(8 + hlen) - 8; /* data starts on a 64-byte boundary */
		if ((*buf = malloc(8 + padded))) {
			for (int i = 0; i < 8; i++)
				(*buf)[i] = (char)(((uint64_t)padded >> (8 * i)) & 0xff);
			memcpy(*buf + 8, hdr, hlen);
			memset(*buf + 8 + hlen, ' ', padded - hlen);
			*len = 8 + padded;
			*end = off;
		}
	}
	json_decref(root);
	free(hdr);
	return *buf ? 0 : nf_error_set(NF_ENOMEM, "safetensors writer: out of memory building "
				       "the header");
}

int nf_st_writer_begin(nf_st_writer *w, const char *path)
{
	char *buf = NULL;
	size_t hlen = 0;
	uint64_t end = 0;
	int err;
	if (w->begun)
		return nf_error_set(NF_EINTERNAL, "safetensors writer: begun twice");
	if ((err = layout(w, &buf, &hlen, &end)) || (err = nf_atomic_open(&w->af, path, 0644))) {
		free(buf);
		return err;
	}
	w->begun = true;
	w->data_start = hlen;
	err = nf_atomic_pwrite(&w->af, buf, hlen, 0);
	free(buf);
	for (size_t i = 0; !err && i < w->n; i++)
		if (w->e[i].data && w->e[i].nbytes)
			err = nf_atomic_pwrite(&w->af, w->e[i].data, (size_t)w->e[i].nbytes,
					       w->data_start + w->begins[i]);
	/* reserved tensors and the padding read as zeros until written */
	if (!err && ftruncate(w->af.fd, (off_t)(w->data_start + end)) < 0)
		err = nf_fs_write_error(path, errno);
	return err;
}

int nf_st_writer_put(nf_st_writer *w, const char *name, uint64_t off, const void *data,
		     size_t len)
{
	for (size_t i = 0; w->begun && i < w->n; i++) {
		const st_entry *e = &w->e[i];
		if (strcmp(e->name, name) != 0)
			continue;
		if (e->data || off > e->nbytes || len > e->nbytes - off)
			return nf_error_set(NF_EINTERNAL, "safetensors writer: %s: bytes [%llu, +%zu) "
					    "are not reserved", name, (unsigned long long)off, len);
		return nf_atomic_pwrite(&w->af, data, len, w->data_start + w->begins[i] + off);
	}
	return nf_error_set(NF_EINTERNAL, "safetensors writer: no reserved tensor %s", name);
}

int nf_st_writer_commit(nf_st_writer *w)
{
	if (!w->begun)
		return nf_error_set(NF_EINTERNAL, "safetensors writer: commit before begin");
	w->begun = false;
	return nf_atomic_commit(&w->af);
}

int nf_st_writer_finish(nf_st_writer *w, const char *path)
{
	int err = nf_st_writer_begin(w, path);
	return err ? err : nf_st_writer_commit(w);
}
