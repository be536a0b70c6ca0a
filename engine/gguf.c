/*
 * gguf.c - the GGUF reader (see gguf.h): map the file, walk the header once
 * checking every count, length, type and offset against the bytes that are
 * really there, then answer lookups from two sorted indexes (keys, tensor
 * names) and from offsets recorded during the walk.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* qsort_r */
#endif
#include "engine/gguf.h"

#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define GGUF_DEFAULT_ALIGN 32
#define GGUF_MAX_ALIGN (1u << 20)
/* Arrays of arrays are legal; the walk recurses, so a lying file could nest
 * them deep enough to exhaust the stack: refuse past this depth. */
#define GGUF_MAX_NESTING 8
/* The smallest a key/value pair and a tensor info can be: the header counts
 * are bounded by the bytes left divided by these before anything is sized
 * from them.  kv: key length 8 + 1 byte of key + type 4 + a 1-byte value;
 * tensor: name length 8 + 1 byte + n_dims 4 + one dim 8 + type 4 + offset 8. */
#define MIN_KV_BYTES 14
#define MIN_TENSOR_BYTES 33

typedef struct gguf_tinfo {
	size_t name_at; /* file offset of the name's length field */
	size_t off_at;  /* file offset of the offset field */
} gguf_tinfo;

typedef struct gguf_kv {
	char *key;          /* owned, NUL-terminated (keys are checked NUL-free) */
	size_t at;          /* file offset of the key's length field */
	uint32_t type;
	size_t val;         /* offset of the value; arrays: of the first element */
	uint32_t elem;      /* arrays: element type */
	uint64_t n;         /* arrays: element count */
	size_t *str_at;     /* owned; arrays of strings: offset of each string */
} gguf_kv;

struct nf_gguf {
	char *path;                /* owned */
	const uint8_t *base;
	size_t size;
	bool mapped;
	uint32_t version;
	uint64_t n_kv, n_tensors;
	gguf_kv *kv;               /* owned, file order */
	size_t *kv_sorted;         /* owned: kv indexes sorted by key */
	nf_gguf_tensor *tensors;   /* owned, file order */
	gguf_tinfo *tinfo;         /* owned: where each tensor's fields are, for messages */
	size_t *tensor_sorted;     /* owned: tensor indexes sorted by name */
	uint64_t alignment;
	size_t pos;                /* the walk's cursor */
};

static const uint8_t vtype_size[NF_GGUF_VTYPE_COUNT] = {
	[NF_GGUF_U8] = 1,  [NF_GGUF_I8] = 1,  [NF_GGUF_U16] = 2, [NF_GGUF_I16] = 2,
	[NF_GGUF_U32] = 4, [NF_GGUF_I32] = 4, [NF_GGUF_F32] = 4, [NF_GGUF_BOOL] = 1,
	[NF_GGUF_U64] = 8, [NF_GGUF_I64] = 8, [NF_GGUF_F64] = 8,
	/* STRING and ARRAY have no fixed size */
};

static const char *const vtype_names[NF_GGUF_VTYPE_COUNT] = {
	"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

static const char *vtype_name(uint32_t t)
{
	return t < NF_GGUF_VTYPE_COUNT ? vtype_names[t] : "?";
}

/* "PATH: offset N: message", NF_EINPUT (or code). */
static int bad_code(const nf_gguf *g, int code, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int bad_code(const nf_gguf *g, int code, uint64_t off, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return nf_error_set(code, "%s: offset %llu: %s", g->path, (unsigned long long)off, msg);
}
#define bad(g, off, ...) bad_code((g), NF_EINPUT, (off), __VA_ARGS__)

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static size_t left(const nf_gguf *g) { return g->size - g->pos; }

static int rd_u32(nf_gguf *g, uint32_t *v, const char *what)
{
	if (left(g) < 4)
		return bad(g, g->pos, "%s runs past the end of the file", what);
	*v = (uint32_t)le(g->base + g->pos, 4);
	g->pos += 4;
	return 0;
}

static int rd_u64(nf_gguf *g, uint64_t *v, const char *what)
{
	if (left(g) < 8)
		return bad(g, g->pos, "%s runs past the end of the file", what);
	*v = le(g->base + g->pos, 8);
	g->pos += 8;
	return 0;
}

/* A string: uint64 length + bytes.  *off is where the bytes start. */
static int rd_str(nf_gguf *g, size_t *off, size_t *len, const char *what)
{
	size_t at = g->pos;
	uint64_t n;
	int err = rd_u64(g, &n, what);
	if (err)
		return err;
	if (n > left(g))
		return bad(g, at, "%s length %llu runs past the end of the file (%zu bytes left)",
			   what, (unsigned long long)n, left(g));
	*off = g->pos;
	*len = (size_t)n;
	g->pos += (size_t)n;
	return 0;
}

/* A key or tensor name: non-empty, no NUL; a NUL-terminated copy. */
static int rd_name(nf_gguf *g, char **out, const char *what)
{
	size_t at = g->pos, off, len;
	int err = rd_str(g, &off, &len, what);
	if (err)
		return err;
	if (len == 0)
		return bad(g, at, "%s is empty", what);
	if (memchr(g->base + off, 0, len))
		return bad(g, at, "%s contains a NUL byte", what);
	if (!(*out = malloc(len + 1)))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", g->path);
	memcpy(*out, g->base + off, len);
	(*out)[len] = 0;
	return 0;
}

/* n fixed-size values (count already bounded); bools must be 0 or 1. */
static int walk_fixed(nf_gguf *g, uint32_t type, uint64_t n)
{
	size_t bytes = (size_t)n * vtype_size[type];
	if (type == NF_GGUF_BOOL)
		for (size_t i = 0; i < bytes; i++)
			if (g->base[g->pos + i] > 1)
				return bad(g, g->pos + i, "bool value %u is not 0 or 1",
					   g->base[g->pos + i]);
	g->pos += bytes;
	return 0;
}

static int walk_array(nf_gguf *g, gguf_kv *kv, int depth);

/* One top-level value of type (already checked < COUNT); kv receives the
 * array details. */
static int walk_value(nf_gguf *g, uint32_t type, gguf_kv *kv)
{
	size_t off, len;
	if (type == NF_GGUF_STRING)
		return rd_str(g, &off, &len, "string");
	if (type == NF_GGUF_ARRAY)
		return walk_array(g, kv, 1);
	if (left(g) < vtype_size[type])
		return bad(g, g->pos, "%s value runs past the end of the file", vtype_name(type));
	return walk_fixed(g, type, 1);
}

/* Strings of an array (count bounded): their offsets go to kv->str_at. */
static int walk_strings(nf_gguf *g, gguf_kv *kv, uint64_t n)
{
	size_t off, len;
	int err;
	if (kv && !(kv->str_at = malloc((n ? n : 1) * sizeof(*kv->str_at))))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", g->path);
	for (uint64_t i = 0; i < n; i++) {
		if (kv)
			kv->str_at[i] = g->pos;
		if ((err = rd_str(g, &off, &len, "string")))
			return err;
	}
	return 0;
}

static int walk_array(nf_gguf *g, gguf_kv *kv, int depth)
{
	size_t at_type = g->pos, at_n, min;
	uint32_t elem;
	uint64_t n;
	int err;

	if (depth > GGUF_MAX_NESTING)
		return bad(g, at_type, "arrays nested more than %d deep", GGUF_MAX_NESTING);
	if ((err = rd_u32(g, &elem, "array element type")))
		return err;
	if (elem >= NF_GGUF_VTYPE_COUNT)
		return bad(g, at_type, "unknown array element type %u", elem);
	at_n = g->pos;
	if ((err = rd_u64(g, &n, "array count")))
		return err;
	/* the least bytes one element takes: a string its length, an array its header */
	min = elem == NF_GGUF_STRING ? 8 : elem == NF_GGUF_ARRAY ? 12 : vtype_size[elem];
	if (n > left(g) / min)
		return bad(g, at_n, "array of %llu %s runs past the end of the file (%zu bytes left)",
			   (unsigned long long)n, vtype_name(elem), left(g));
	if (kv) {
		kv->elem = elem;
		kv->n = n;
		kv->val = g->pos;
	}
	if (elem == NF_GGUF_STRING)
		return walk_strings(g, kv, n);
	if (elem == NF_GGUF_ARRAY) {
		for (uint64_t i = 0; i < n; i++)
			if ((err = walk_array(g, NULL, depth + 1)))
				return err;
		return 0;
	}
	return walk_fixed(g, elem, n);
}

static int cmp_kv(const void *a, const void *b, void *ctx)
{
	const nf_gguf *g = ctx;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int c = strcmp(g->kv[i].key, g->kv[j].key);
	return c ? c : (i > j) - (i < j); /* file order breaks ties: the later one is the duplicate */
}

static int cmp_tensor_name(const void *a, const void *b, void *ctx)
{
	const nf_gguf *g = ctx;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int c = strcmp(g->tensors[i].name, g->tensors[j].name);
	return c ? c : (i > j) - (i < j);
}

static int cmp_tensor_offset(const void *a, const void *b, void *ctx)
{
	const nf_gguf *g = ctx;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	uint64_t x = g->tensors[i].offset, y = g->tensors[j].offset;
	return x != y ? (x > y) - (x < y) : (i > j) - (i < j);
}

static int walk_kvs(nf_gguf *g)
{
	int err;
	for (uint64_t i = 0; i < g->n_kv; i++) {
		gguf_kv *kv = &g->kv[i];
		size_t at_type;
		kv->at = g->pos;
		if ((err = rd_name(g, &kv->key, "key")))
			return err;
		at_type = g->pos;
		if ((err = rd_u32(g, &kv->type, "value type")))
			return err;
		if (kv->type >= NF_GGUF_VTYPE_COUNT)
			return bad(g, at_type, "key \"%s\": unknown value type %u", kv->key, kv->type);
		kv->val = g->pos;
		if ((err = walk_value(g, kv->type, kv)))
			return err;
	}
	/* sort once (O(n log n), whatever the keys) for lookups; neighbours reveal duplicates */
	for (uint64_t i = 0; i < g->n_kv; i++)
		g->kv_sorted[i] = (size_t)i;
	qsort_r(g->kv_sorted, g->n_kv, sizeof(size_t), cmp_kv, g);
	for (uint64_t i = 1; i < g->n_kv; i++) {
		const gguf_kv *a = &g->kv[g->kv_sorted[i - 1]], *b = &g->kv[g->kv_sorted[i]];
		if (strcmp(a->key, b->key) == 0)
			return bad(g, b->at, "duplicate key \"%s\" (first at offset %zu)", b->key, a->at);
	}
	return 0;
}

static const gguf_kv *find_kv(const nf_gguf *g, const char *key)
{
	size_t lo = 0, hi = (size_t)g->n_kv;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const gguf_kv *kv = &g->kv[g->kv_sorted[mid]];
		int c = strcmp(key, kv->key);
		if (c == 0)
			return kv;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

static int read_alignment(nf_gguf *g)
{
	const gguf_kv *kv = find_kv(g, "general.alignment");
	uint32_t a;
	g->alignment = GGUF_DEFAULT_ALIGN;
	if (!kv)
		return 0;
	if (kv->type != NF_GGUF_U32)
		return bad(g, kv->val, "general.alignment is %s, not u32", vtype_name(kv->type));
	a = (uint32_t)le(g->base + kv->val, 4);
	if (a == 0 || (a & (a - 1)) || a > GGUF_MAX_ALIGN)
		return bad(g, kv->val, "general.alignment %u is not a power of two up to %u", a,
			   GGUF_MAX_ALIGN);
	g->alignment = a;
	return 0;
}

/* Names of ggml types this reader does not dequantize: a file using one is
 * valid but unsupported, which is a different answer from a made-up type. */
static const char *other_ggml_type(uint32_t t)
{
	static const struct { uint32_t id; const char *name; } other[] = {
		{9, "Q8_1"},     {10, "Q2_K"},    {11, "Q3_K"},   {15, "Q8_K"},   {16, "IQ2_XXS"},
		{17, "IQ2_XS"},  {18, "IQ3_XXS"}, {19, "IQ1_S"},  {20, "IQ4_NL"}, {21, "IQ3_S"},
		{22, "IQ2_S"},   {23, "IQ4_XS"},  {24, "I8"},     {25, "I16"},    {26, "I32"},
		{27, "I64"},     {28, "F64"},     {29, "IQ1_M"},  {34, "TQ1_0"},  {35, "TQ2_0"},
		{39, "MXFP4"},
	};
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		if (other[i].id == t)
			return other[i].name;
	return NULL;
}

/* n_dims, the dims, their product and the byte size. */
static int walk_shape(nf_gguf *g, nf_gguf_tensor *t, size_t *at_ne0)
{
	size_t at = g->pos;
	uint32_t nd;
	int err;
	if ((err = rd_u32(g, &nd, "tensor n_dims")))
		return err;
	if (nd == 0 || nd > NF_GGUF_MAX_DIMS)
		return bad(g, at, "tensor \"%s\": n_dims %u is not 1 to %d", t->name, nd,
			   NF_GGUF_MAX_DIMS);
	t->n_dims = (int)nd;
	t->n_elems = 1;
	*at_ne0 = g->pos;
	for (int d = 0; d < NF_GGUF_MAX_DIMS; d++)
		t->ne[d] = 1;
	for (int d = 0; d < t->n_dims; d++) {
		at = g->pos;
		if ((err = rd_u64(g, &t->ne[d], "tensor dimension")))
			return err;
		if (t->ne[d] == 0)
			return bad(g, at, "tensor \"%s\": dimension %d is 0", t->name, d);
		if (!nf_u64_mul(&t->n_elems, t->n_elems, t->ne[d]))
			return bad(g, at, "tensor \"%s\": element count overflows", t->name);
	}
	return 0;
}

static int walk_tensor_type(nf_gguf *g, nf_gguf_tensor *t, size_t at_ne0)
{
	size_t at = g->pos;
	uint32_t type, blk;
	int err;
	if ((err = rd_u32(g, &type, "tensor type")))
		return err;
	if (!nf_ggml_type_name(type)) {
		if (other_ggml_type(type))
			return bad_code(g, NF_EUNSUPPORTED, at, "tensor \"%s\": type %s is not supported",
					t->name, other_ggml_type(type));
		return bad(g, at, "tensor \"%s\": unknown tensor type %u", t->name, type);
	}
	t->type = (nf_ggml_type)type;
	blk = nf_ggml_block_elems(type);
	if (t->ne[0] % blk)
		return bad(g, at_ne0, "tensor \"%s\": ne[0] %llu is not a multiple of the %s block of %u",
			   t->name, (unsigned long long)t->ne[0], nf_ggml_type_name(type), blk);
	if (!nf_u64_mul(&t->n_bytes, t->n_elems / blk, nf_ggml_block_bytes(type)))
		return bad(g, at, "tensor \"%s\": byte size overflows", t->name);
	return 0;
}

static int walk_tensor_infos(nf_gguf *g)
{
	int err;
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		nf_gguf_tensor *t = &g->tensors[i];
		char *name = NULL;
		size_t at_ne0 = 0;
		g->tinfo[i].name_at = g->pos;
		if ((err = rd_name(g, &name, "tensor name")))
			return err;
		t->name = name;
		if ((err = walk_shape(g, t, &at_ne0)) || (err = walk_tensor_type(g, t, at_ne0)))
			return err;
		g->tinfo[i].off_at = g->pos;
		if ((err = rd_u64(g, &t->offset, "tensor offset")))
			return err;
		if (t->offset % g->alignment)
			return bad(g, g->tinfo[i].off_at, "tensor \"%s\": offset %llu is not a multiple "
				   "of the alignment %llu", t->name, (unsigned long long)t->offset,
				   (unsigned long long)g->alignment);
	}
	return 0;
}

/* Place every tensor in the data section; refuse overlaps and duplicate names. */
static int place_tensors(nf_gguf *g)
{
	size_t start = g->pos, data, n = (size_t)g->n_tensors;
	uint64_t size;

	/* the data section starts at the next multiple of the alignment (from the file's start) */
	data = start + (size_t)((g->alignment - start % g->alignment) % g->alignment);
	if (n && data > g->size)
		return bad(g, start, "the data section (at offset %zu) starts past the end of the file",
			   data);
	size = data <= g->size ? g->size - data : 0;
	for (size_t i = 0; i < n; i++) {
		nf_gguf_tensor *t = &g->tensors[i];
		if (t->offset > size || t->n_bytes > size - t->offset)
			return bad(g, g->tinfo[i].off_at, "tensor \"%s\": %llu bytes at data offset %llu "
				   "run past the end of the data section (%llu bytes)", t->name,
				   (unsigned long long)t->n_bytes, (unsigned long long)t->offset,
				   (unsigned long long)size);
		t->offset += data;
		t->data = g->base + t->offset;
	}
	for (size_t i = 0; i < n; i++)
		g->tensor_sorted[i] = i;
	qsort_r(g->tensor_sorted, n, sizeof(size_t), cmp_tensor_offset, g);
	for (size_t i = 1; i < n; i++) {
		size_t a = g->tensor_sorted[i - 1], b = g->tensor_sorted[i];
		if (g->tensors[a].offset + g->tensors[a].n_bytes > g->tensors[b].offset)
			return bad(g, g->tinfo[b].off_at, "tensor \"%s\" overlaps tensor \"%s\"",
				   g->tensors[b].name, g->tensors[a].name);
	}
	qsort_r(g->tensor_sorted, n, sizeof(size_t), cmp_tensor_name, g);
	for (size_t i = 1; i < n; i++) {
		size_t a = g->tensor_sorted[i - 1], b = g->tensor_sorted[i];
		if (strcmp(g->tensors[a].name, g->tensors[b].name) == 0)
			return bad(g, g->tinfo[b].name_at, "duplicate tensor name \"%s\"",
				   g->tensors[b].name);
	}
	return 0;
}

static int walk_header(nf_gguf *g)
{
	int err;
	if (g->size < 4 || memcmp(g->base, "GGUF", 4) != 0)
		return bad(g, 0, "not a GGUF file (bad magic)");
	g->pos = 4;
	if ((err = rd_u32(g, &g->version, "version")))
		return err;
	if (g->version == 1)
		return bad_code(g, NF_EUNSUPPORTED, 4, "GGUF version 1 is not supported (only 2 and 3)");
	if (g->version != 2 && g->version != 3)
		return bad(g, 4, "unknown GGUF version %u (only 2 and 3)", g->version);
	if ((err = rd_u64(g, &g->n_tensors, "tensor count")) ||
	    (err = rd_u64(g, &g->n_kv, "metadata count")))
		return err;
	if (g->n_tensors > left(g) / MIN_TENSOR_BYTES)
		return bad(g, 8, "tensor count %llu is more than the file can hold",
			   (unsigned long long)g->n_tensors);
	if (g->n_kv > left(g) / MIN_KV_BYTES)
		return bad(g, 16, "metadata count %llu is more than the file can hold",
			   (unsigned long long)g->n_kv);
	return 0;
}

static int gguf_parse(nf_gguf *g)
{
	int err;
	size_t nk, nt;
	if ((err = walk_header(g)))
		return err;
	/* both counts are now bounded by the file's size */
	nk = (size_t)g->n_kv ? (size_t)g->n_kv : 1;
	nt = (size_t)g->n_tensors ? (size_t)g->n_tensors : 1;
	g->kv = calloc(nk, sizeof(*g->kv));
	g->kv_sorted = calloc(nk, sizeof(size_t));
	g->tensors = calloc(nt, sizeof(*g->tensors));
	g->tinfo = calloc(nt, sizeof(*g->tinfo));
	g->tensor_sorted = calloc(nt, sizeof(size_t));
	if (!g->kv || !g->kv_sorted || !g->tensors || !g->tinfo || !g->tensor_sorted)
		return nf_error_set(NF_ENOMEM, "%s: out of memory", g->path);
	if ((err = walk_kvs(g)) || (err = read_alignment(g)) || (err = walk_tensor_infos(g)))
		return err;
	return place_tensors(g);
}

static int gguf_open_parsed(nf_gguf **out, nf_gguf *g)
{
	int err = gguf_parse(g);
	if (err) {
		nf_gguf_free(g);
		return err;
	}
	*out = g;
	return 0;
}

static nf_gguf *gguf_new(const char *what)
{
	nf_gguf *g = calloc(1, sizeof(*g));
	if (g && !(g->path = strdup(what))) {
		free(g);
		g = NULL;
	}
	return g;
}

int nf_gguf_open(nf_gguf **out, const char *path)
{
	const void *map;
	nf_gguf *g;
	int err;

	*out = NULL;
	if (!(g = gguf_new(path)))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", path);
	if ((err = nf_fs_map_file(&map, &g->size, path))) {
		nf_gguf_free(g);
		return err;
	}
	g->base = map;
	g->mapped = map != NULL;
	return gguf_open_parsed(out, g);
}

int nf_gguf_open_mem(nf_gguf **out, const void *data, size_t len, const char *what)
{
	nf_gguf *g = gguf_new(what ? what : "gguf");
	*out = NULL;
	if (!g)
		return nf_error_set(NF_ENOMEM, "out of memory");
	g->base = data;
	g->size = data ? len : 0;
	return gguf_open_parsed(out, g);
}

void nf_gguf_free(nf_gguf *g)
{
	if (!g)
		return;
	if (g->mapped)
		nf_fs_unmap_file(g->base, g->size);
	for (uint64_t i = 0; g->kv && i < g->n_kv; i++) {
		free(g->kv[i].key);
		free(g->kv[i].str_at);
	}
	for (uint64_t i = 0; g->tensors && i < g->n_tensors; i++)
		free((char *)g->tensors[i].name);
	free(g->kv);
	free(g->kv_sorted);
	free(g->tensors);
	free(g->tinfo);
	free(g->tensor_sorted);
	free(g->path);
	free(g);
}

const char *nf_gguf_path(const nf_gguf *g) { return g->path; }
uint32_t nf_gguf_version(const nf_gguf *g) { return g->version; }

/* ------------------------------------------------------------ metadata */

/* The key, or NF_ENOTFOUND naming it. */
static int lookup(const nf_gguf *g, const char *key, const gguf_kv **out)
{
	if (!(*out = find_kv(g, key)))
		return nf_error_set(NF_ENOTFOUND, "%s: no key \"%s\"", g->path, key);
	return 0;
}

static int wrong_type(const nf_gguf *g, const gguf_kv *kv, const char *want)
{
	return nf_error_set(NF_EINPUT, "%s: key \"%s\" is %s, not %s", g->path, kv->key,
			    vtype_name(kv->type), want);
}

static bool is_int_type(uint32_t t)
{
	return t <= NF_GGUF_I32 || t == NF_GGUF_U64 || t == NF_GGUF_I64;
}

/* An integer value of type t at p as sign and magnitude (i64's minimum fits). */
static void load_int(const uint8_t *p, uint32_t t, bool *neg, uint64_t *mag)
{
	int n = vtype_size[t];
	uint64_t u = le(p, n);
	bool is_signed = t == NF_GGUF_I8 || t == NF_GGUF_I16 || t == NF_GGUF_I32 || t == NF_GGUF_I64;
	*neg = is_signed && (u >> (8 * n - 1)) & 1;
	if (*neg) /* two's complement magnitude within n bytes */
		u = (n == 8 ? 0 : (uint64_t)1 << (8 * n)) - u;
	*mag = u;
}

/* The integer at p as int64 when it fits. */
static bool int_as_i64(const uint8_t *p, uint32_t t, int64_t *out)
{
	bool neg;
	uint64_t mag;
	load_int(p, t, &neg, &mag);
	if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX)
		return false;
	*out = !neg ? (int64_t)mag : mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
	return true;
}

static int get_uint(const nf_gguf *g, const char *key, uint64_t max, uint64_t *out)
{
	const gguf_kv *kv;
	bool neg;
	uint64_t mag;
	int err = lookup(g, key, &kv);
	if (err)
		return err;
	if (!is_int_type(kv->type))
		return wrong_type(g, kv, "an integer");
	load_int(g->base + kv->val, kv->type, &neg, &mag);
	if (neg || mag > max)
		return nf_error_set(NF_EINPUT, "%s: key \"%s\": value %s%llu is out of range 0..%llu",
				    g->path, key, neg ? "-" : "", (unsigned long long)mag,
				    (unsigned long long)max);
	*out = mag;
	return 0;
}

int nf_gguf_get_u64(const nf_gguf *g, const char *key, uint64_t *out)
{
	return get_uint(g, key, UINT64_MAX, out);
}

int nf_gguf_get_u32(const nf_gguf *g, const char *key, uint32_t *out)
{
	uint64_t v;
	int err = get_uint(g, key, UINT32_MAX, &v);
	if (!err)
		*out = (uint32_t)v;
	return err;
}

int nf_gguf_get_i64(const nf_gguf *g, const char *key, int64_t *out)
{
	const gguf_kv *kv;
	int err = lookup(g, key, &kv);
	if (err)
		return err;
	if (!is_int_type(kv->type))
		return wrong_type(g, kv, "an integer");
	if (!int_as_i64(g->base + kv->val, kv->type, out))
		return nf_error_set(NF_EINPUT, "%s: key \"%s\": value does not fit in int64", g->path,
				    key);
	return 0;
}

/* An F32 or F64 value at p as float; false when a finite f64 is out of float's range. */
static bool float_at(const uint8_t *p, uint32_t t, float *out)
{
	if (t == NF_GGUF_F32) {
		uint32_t u = (uint32_t)le(p, 4);
		memcpy(out, &u, 4);
		return true;
	}
	uint64_t u = le(p, 8);
	double d;
	memcpy(&d, &u, 8);
	if (d == d && d - d == 0 && (d > FLT_MAX || d < -FLT_MAX))
		return false;
	*out = (float)d;
	return true;
}

int nf_gguf_get_f32(const nf_gguf *g, const char *key, float *out)
{
	const gguf_kv *kv;
	int err = lookup(g, key, &kv);
	if (err)
		return err;
	if (kv->type != NF_GGUF_F32 && kv->type != NF_GGUF_F64)
		return wrong_type(g, kv, "f32 or f64");
	if (!float_at(g->base + kv->val, kv->type, out))
		return nf_error_set(NF_EINPUT, "%s: key \"%s\": value does not fit in a float",
				    g->path, key);
	return 0;
}

int nf_gguf_get_bool(const nf_gguf *g, const char *key, bool *out)
{
	const gguf_kv *kv;
	int err = lookup(g, key, &kv);
	if (err)
		return err;
	if (kv->type != NF_GGUF_BOOL)
		return wrong_type(g, kv, "bool");
	*out = g->base[kv->val] != 0; /* checked 0 or 1 at open */
	return 0;
}

/* The string whose length field is at off (checked at open). */
static void str_at(const nf_gguf *g, size_t off, const char **s, size_t *len)
{
	*len = (size_t)le(g->base + off, 8);
	*s = (const char *)g->base + off + 8;
}

int nf_gguf_get_str(const nf_gguf *g, const char *key, const char **s, size_t *len)
{
	const gguf_kv *kv;
	int err = lookup(g, key, &kv);
	if (err)
		return err;
	if (kv->type != NF_GGUF_STRING)
		return wrong_type(g, kv, "string");
	str_at(g, kv->val, s, len);
	return 0;
}

int nf_gguf_get_array(const nf_gguf *g, const char *key, nf_gguf_vtype *elem, uint64_t *n)
{
	const gguf_kv *kv;
	int err = lookup(g, key, &kv);
	if (err)
		return err;
	if (kv->type != NF_GGUF_ARRAY)
		return wrong_type(g, kv, "array");
	*elem = (nf_gguf_vtype)kv->elem;
	*n = kv->n;
	return 0;
}

/* Array key with element i in range; want says what the caller needs. */
static int array_elem(const nf_gguf *g, const char *key, uint64_t i, const gguf_kv **out)
{
	int err = lookup(g, key, out);
	if (err)
		return err;
	if ((*out)->type != NF_GGUF_ARRAY)
		return wrong_type(g, *out, "array");
	if (i >= (*out)->n)
		return nf_error_set(NF_EINPUT, "%s: key \"%s\": index %llu past the %llu elements",
				    g->path, key, (unsigned long long)i,
				    (unsigned long long)(*out)->n);
	return 0;
}

static int wrong_elem(const nf_gguf *g, const gguf_kv *kv, const char *want)
{
	return nf_error_set(NF_EINPUT, "%s: key \"%s\" is an array of %s, not of %s", g->path,
			    kv->key, vtype_name(kv->elem), want);
}

int nf_gguf_array_str(const nf_gguf *g, const char *key, uint64_t i, const char **s, size_t *len)
{
	const gguf_kv *kv;
	int err = array_elem(g, key, i, &kv);
	if (err)
		return err;
	if (kv->elem != NF_GGUF_STRING)
		return wrong_elem(g, kv, "string");
	str_at(g, kv->str_at[i], s, len);
	return 0;
}

int nf_gguf_array_i64(const nf_gguf *g, const char *key, uint64_t i, int64_t *out)
{
	const gguf_kv *kv;
	int err = array_elem(g, key, i, &kv);
	if (err)
		return err;
	if (!is_int_type(kv->elem))
		return wrong_elem(g, kv, "integers");
	if (!int_as_i64(g->base + kv->val + i * vtype_size[kv->elem], kv->elem, out))
		return nf_error_set(NF_EINPUT, "%s: key \"%s\"[%llu] does not fit in int64", g->path,
				    key, (unsigned long long)i);
	return 0;
}

int nf_gguf_array_f32(const nf_gguf *g, const char *key, uint64_t i, float *out)
{
	const gguf_kv *kv;
	int err = array_elem(g, key, i, &kv);
	if (err)
		return err;
	if (kv->elem != NF_GGUF_F32 && kv->elem != NF_GGUF_F64)
		return wrong_elem(g, kv, "floats");
	if (!float_at(g->base + kv->val + i * vtype_size[kv->elem], kv->elem, out))
		return nf_error_set(NF_EINPUT, "%s: key \"%s\"[%llu] does not fit in a float",
				    g->path, key, (unsigned long long)i);
	return 0;
}

uint64_t nf_gguf_kv_count(const nf_gguf *g) { return g->n_kv; }

const char *nf_gguf_kv_key(const nf_gguf *g, uint64_t i, nf_gguf_vtype *type)
{
	if (i >= g->n_kv)
		return NULL;
	if (type)
		*type = (nf_gguf_vtype)g->kv[i].type;
	return g->kv[i].key;
}

/* ------------------------------------------------------------- tensors */

uint64_t nf_gguf_tensor_count(const nf_gguf *g) { return g->n_tensors; }

const nf_gguf_tensor *nf_gguf_tensor_at(const nf_gguf *g, uint64_t i)
{
	return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const nf_gguf_tensor *nf_gguf_tensor_find(const nf_gguf *g, const char *name)
{
	size_t lo = 0, hi = (size_t)g->n_tensors;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const nf_gguf_tensor *t = &g->tensors[g->tensor_sorted[mid]];
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
