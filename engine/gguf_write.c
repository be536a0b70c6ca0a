/*
 * gguf_write.c - the minimal GGUF writer (see gguf_write.h): metadata is
 * serialized as it is added; tensors are kept (copied) until the file is
 * assembled, since their offsets depend on the size of everything before.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* reallocarray */
#endif
#include "engine/gguf_write.h"

#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define DEFAULT_ALIGN 32

typedef struct wbuf {
	uint8_t *p;
	size_t n, cap;
	bool failed; /* an allocation failed: reported once, at output */
} wbuf;

typedef struct wtensor {
	char *name;
	uint32_t type;
	int n_dims;
	uint64_t ne[NF_GGUF_MAX_DIMS];
	uint8_t *data;
	size_t n_bytes;
} wtensor;

struct nf_gguf_writer {
	uint32_t version;
	uint64_t n_kv;
	wbuf kv;          /* the serialized key/value pairs */
	wtensor *t;
	size_t n_t, cap_t;
	uint32_t alignment;
};

static void put(wbuf *b, const void *d, size_t n)
{
	if (b->failed || n == 0)
		return;
	if (n > b->cap - b->n) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap - b->n < n) {
			if (!nf_size_mul(&cap, cap, 2)) {
				b->failed = true;
				return;
			}
		}
		uint8_t *np = realloc(b->p, cap);
		if (!np) {
			b->failed = true;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
}

static void put_le(wbuf *b, uint64_t v, int n)
{
	uint8_t x[8];
	for (int i = 0; i < n; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	put(b, x, (size_t)n);
}

static void put_str(wbuf *b, const char *s, size_t len)
{
	put_le(b, len, 8);
	put(b, s, len);
}

int nf_gguf_writer_new(nf_gguf_writer **out)
{
	nf_gguf_writer *w = calloc(1, sizeof(*w));
	*out = NULL;
	if (!w)
		return nf_error_set(NF_ENOMEM, "gguf writer: out of memory");
	w->version = 3;
	w->alignment = DEFAULT_ALIGN;
	*out = w;
	return 0;
}

void nf_gguf_writer_free(nf_gguf_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n_t; i++) {
		free(w->t[i].name);
		free(w->t[i].data);
	}
	free(w->t);
	free(w->kv.p);
	free(w);
}

void nf_gguf_writer_set_version(nf_gguf_writer *w, uint32_t version) { w->version = version; }

/* Sizes of the fixed-size value types, as the format numbers them (0: not fixed). */
static size_t fixed_size(uint32_t t)
{
	static const uint8_t size[NF_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
	return t < NF_GGUF_VTYPE_COUNT ? size[t] : 0;
}

/* Values are given as host C values; the file is little-endian. */
static void put_values(wbuf *b, uint32_t type, const void *values, uint64_t n)
{
	size_t sz = fixed_size(type);
	const uint8_t *p = values;
	for (uint64_t i = 0; i < n; i++, p += sz) {
		uint64_t v = 0;
		switch (sz) {
		case 1: v = *p; break;
		case 2: { uint16_t x; memcpy(&x, p, 2); v = x; break; }
		case 4: { uint32_t x; memcpy(&x, p, 4); v = x; break; }
		default: memcpy(&v, p, 8); break;
		}
		put_le(b, v, (int)sz);
	}
}

static int key_head(nf_gguf_writer *w, const char *key, uint32_t type)
{
	if (!key)
		return nf_error_set(NF_EINTERNAL, "gguf writer: no key");
	put_str(&w->kv, key, strlen(key));
	put_le(&w->kv, type, 4);
	w->n_kv++;
	return 0;
}

/* general.alignment decides the layout when it is an honest u32 power of two. */
static void note_alignment(nf_gguf_writer *w, const char *key, uint32_t type, uint32_t v)
{
	if (strcmp(key, "general.alignment") == 0 && type == NF_GGUF_U32 && v && !(v & (v - 1)) &&
	    v <= (1u << 20))
		w->alignment = v;
}

int nf_gguf_writer_add_scalar(nf_gguf_writer *w, const char *key, nf_gguf_vtype type,
			      const void *value)
{
	int err;
	if (!fixed_size((uint32_t)type) || !value)
		return nf_error_set(NF_EINTERNAL, "gguf writer: %s: type %d is not a fixed-size scalar",
				    key ? key : "?", (int)type);
	if ((err = key_head(w, key, (uint32_t)type)))
		return err;
	put_values(&w->kv, (uint32_t)type, value, 1);
	if (type == NF_GGUF_U32) {
		uint32_t v;
		memcpy(&v, value, 4);
		note_alignment(w, key, NF_GGUF_U32, v);
	}
	return 0;
}

int nf_gguf_writer_add_u32(nf_gguf_writer *w, const char *key, uint32_t v)
{
	return nf_gguf_writer_add_scalar(w, key, NF_GGUF_U32, &v);
}

int nf_gguf_writer_add_u64(nf_gguf_writer *w, const char *key, uint64_t v)
{
	return nf_gguf_writer_add_scalar(w, key, NF_GGUF_U64, &v);
}

int nf_gguf_writer_add_i32(nf_gguf_writer *w, const char *key, int32_t v)
{
	return nf_gguf_writer_add_scalar(w, key, NF_GGUF_I32, &v);
}

int nf_gguf_writer_add_f32(nf_gguf_writer *w, const char *key, float v)
{
	return nf_gguf_writer_add_scalar(w, key, NF_GGUF_F32, &v);
}

int nf_gguf_writer_add_bool(nf_gguf_writer *w, const char *key, bool v)
{
	uint8_t b = v ? 1 : 0;
	return nf_gguf_writer_add_scalar(w, key, NF_GGUF_BOOL, &b);
}

int nf_gguf_writer_add_str(nf_gguf_writer *w, const char *key, const char *s, size_t len)
{
	int err;
	if (len && !s)
		return nf_error_set(NF_EINTERNAL, "gguf writer: %s: no string", key ? key : "?");
	if ((err = key_head(w, key, NF_GGUF_STRING)))
		return err;
	put_str(&w->kv, s, len);
	return 0;
}

int nf_gguf_writer_add_array(nf_gguf_writer *w, const char *key, nf_gguf_vtype elem,
			     const void *values, uint64_t n)
{
	int err;
	if (!fixed_size((uint32_t)elem) || (n && !values))
		return nf_error_set(NF_EINTERNAL, "gguf writer: %s: bad numeric array",
				    key ? key : "?");
	if ((err = key_head(w, key, NF_GGUF_ARRAY)))
		return err;
	put_le(&w->kv, (uint32_t)elem, 4);
	put_le(&w->kv, n, 8);
	put_values(&w->kv, (uint32_t)elem, values, n);
	return 0;
}

int nf_gguf_writer_add_str_array(nf_gguf_writer *w, const char *key, const char *const *s,
				 uint64_t n)
{
	int err;
	if (n && !s)
		return nf_error_set(NF_EINTERNAL, "gguf writer: %s: no strings", key ? key : "?");
	if ((err = key_head(w, key, NF_GGUF_ARRAY)))
		return err;
	put_le(&w->kv, NF_GGUF_STRING, 4);
	put_le(&w->kv, n, 8);
	for (uint64_t i = 0; i < n; i++)
		put_str(&w->kv, s[i], strlen(s[i]));
	return 0;
}

int nf_gguf_writer_add_raw(nf_gguf_writer *w, const char *key, uint32_t type, const void *bytes,
			   size_t len)
{
	int err;
	if (len && !bytes)
		return nf_error_set(NF_EINTERNAL, "gguf writer: %s: no bytes", key ? key : "?");
	if ((err = key_head(w, key, type)))
		return err;
	put(&w->kv, bytes, len);
	if (type == NF_GGUF_U32 && len == 4) {
		const uint8_t *b = bytes;
		note_alignment(w, key, type, (uint32_t)b[0] | (uint32_t)b[1] << 8 |
						     (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
	}
	return 0;
}

/* n_bytes is what n_dims dims of type need. */
static int check_tensor(const char *name, uint32_t type, int n_dims, const uint64_t *ne,
			uint64_t n_bytes)
{
	uint64_t n = 1, want;
	if (!name || !*name)
		return nf_error_set(NF_EINTERNAL, "gguf writer: tensor without a name");
	if (n_dims < 1 || n_dims > NF_GGUF_MAX_DIMS)
		return nf_error_set(NF_EINTERNAL, "gguf writer: %s: %d dims", name, n_dims);
	for (int d = 0; d < n_dims; d++)
		if (ne[d] == 0 || !nf_u64_mul(&n, n, ne[d]))
			return nf_error_set(NF_EINTERNAL, "gguf writer: %s: dim %d is 0 or overflows",
					    name, d);
	if (nf_ggml_row_bytes(&want, type, n) || want != n_bytes || n_bytes > SIZE_MAX / 2)
		return nf_error_set(NF_EINTERNAL, "gguf writer: %s: %llu bytes do not fit its type "
				    "and dims", name, (unsigned long long)n_bytes);
	return 0;
}

int nf_gguf_writer_add_tensor(nf_gguf_writer *w, const char *name, nf_ggml_type type, int n_dims,
			      const uint64_t *ne, const void *data, uint64_t n_bytes)
{
	wtensor *t;
	int err = check_tensor(name, (uint32_t)type, n_dims, ne, n_bytes);
	if (err)
		return err;
	if (w->n_t == w->cap_t) {
		size_t cap = w->cap_t ? 2 * w->cap_t : 8;
		wtensor *nt = reallocarray(w->t, cap, sizeof(*nt));
		if (!nt)
			return nf_error_set(NF_ENOMEM, "gguf writer: out of memory");
		w->t = nt;
		w->cap_t = cap;
	}
	t = &w->t[w->n_t];
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	t->data = malloc(n_bytes ? (size_t)n_bytes : 1);
	if (!t->name || !t->data) {
		free(t->name);
		free(t->data);
		return nf_error_set(NF_ENOMEM, "gguf writer: out of memory");
	}
	if (n_bytes)
		memcpy(t->data, data, (size_t)n_bytes);
	t->type = (uint32_t)type;
	t->n_dims = n_dims;
	for (int d = 0; d < n_dims; d++)
		t->ne[d] = ne[d];
	t->n_bytes = (size_t)n_bytes;
	w->n_t++;
	return 0;
}

static void pad_to(wbuf *b, size_t align)
{
	static const uint8_t zeros[64];
	while (b->n % align && !b->failed)
		put(b, zeros, align - b->n % align < sizeof(zeros) ? align - b->n % align : sizeof(zeros));
}

int nf_gguf_writer_to_mem(nf_gguf_writer *w, uint8_t **out, size_t *len)
{
	wbuf b = {0};
	size_t off = 0;

	*out = NULL;
	put(&b, "GGUF", 4);
	put_le(&b, w->version, 4);
	put_le(&b, w->n_t, 8);
	put_le(&b, w->n_kv, 8);
	put(&b, w->kv.p, w->kv.n);
	for (size_t i = 0; i < w->n_t; i++) {
		const wtensor *t = &w->t[i];
		put_str(&b, t->name, strlen(t->name));
		put_le(&b, (uint64_t)t->n_dims, 4);
		for (int d = 0; d < t->n_dims; d++)
			put_le(&b, t->ne[d], 8);
		put_le(&b, t->type, 4);
		put_le(&b, off, 8);
		off += (t->n_bytes + w->alignment - 1) / w->alignment * w->alignment;
	}
	if (w->n_t)
		pad_to(&b, w->alignment);
	for (size_t i = 0; i < w->n_t; i++) {
		put(&b, w->t[i].data, w->t[i].n_bytes);
		pad_to(&b, w->alignment);
	}
	if (b.failed || w->kv.failed) {
		free(b.p);
		return nf_error_set(NF_ENOMEM, "gguf writer: out of memory");
	}
	*out = b.p;
	*len = b.n;
	return 0;
}

int nf_gguf_writer_write(nf_gguf_writer *w, const char *path)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int err = nf_gguf_writer_to_mem(w, &buf, &len);
	if (!err)
		err = nf_fs_write_atomic(path, buf, len, 0644);
	free(buf);
	return err;
}
