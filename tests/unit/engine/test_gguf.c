/*
 * test_gguf.c - the GGUF reader and writer: every value type round trips
 * (v2 and v3); every class of lie is refused with NF_EINPUT and the offset of
 * the field that lies; a small valid file cut at every byte is refused; the
 * dequantizers give the values computed here by hand from the block layouts;
 * the real SmolLM2 file opens with its 30 blocks of tensors.
 *
 * Offsets in the lie tests follow from the layout: a 24-byte header (magic,
 * version, two uint64 counts), then each key as uint64 length + bytes, uint32
 * type, value; tensor infos as name, uint32 n_dims, uint64 dims, uint32 type,
 * uint64 offset.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/gguf.h"
#include "engine/gguf_write.h"
#include "engine/safetensors.h" /* nf_f32_to_f16 */
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* ------------------------------------------------------------- helpers */

static void set_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put16(uint8_t *p, float f) { set_le(p, nf_f32_to_f16(f), 2); }

/* The writer's bytes (caller frees). */
static uint8_t *finish(nf_gguf_writer *w, size_t *len)
{
	uint8_t *p = NULL;
	if (nf_gguf_writer_to_mem(w, &p, len) != 0)
		diag("to_mem: %s", nf_error_last());
	nf_gguf_writer_free(w);
	return p;
}

/* Open a copy of exactly n bytes (so that ASan sees any read past them). */
static int open_copy(nf_gguf **g, const uint8_t *p, size_t n, uint8_t **copy)
{
	*copy = malloc(n ? n : 1);
	if (n)
		memcpy(*copy, p, n);
	return nf_gguf_open_mem(g, *copy, n, "t");
}

/* The bytes must be refused with code and a message starting "t: offset N: "
 * and containing what. */
static void refused(const uint8_t *p, size_t n, int code, size_t off, const char *what,
		    const char *name)
{
	nf_gguf *g = NULL;
	uint8_t *copy;
	char prefix[64];
	int err = open_copy(&g, p, n, &copy);
	snprintf(prefix, sizeof(prefix), "t: offset %zu: ", off);
	if (!ok(err == code && !g && strncmp(nf_error_last(), prefix, strlen(prefix)) == 0 &&
		strstr(nf_error_last(), what), "%s", name))
		diag("err %d (want %d), message: %s (want %s... %s)", err, code, nf_error_last(),
		     prefix, what);
	nf_gguf_free(g);
	free(copy);
}

/* One key of type u32 named key (the layout of most lie tests: the value's
 * type at 24 + 8 + strlen(key), the value 4 bytes later). */
static uint8_t *one_key(size_t *len, const char *key, nf_gguf_vtype type, const void *raw, size_t n)
{
	nf_gguf_writer *w;
	nf_gguf_writer_new(&w);
	nf_gguf_writer_add_raw(w, key, (uint32_t)type, raw, n);
	return finish(w, len);
}

/* ------------------------------------------------------------ round trip */

static uint8_t *every_type_file(size_t *len, uint32_t version, const float *t32)
{
	nf_gguf_writer *w;
	uint8_t u8 = 200, b = 1;
	int8_t i8 = -100;
	uint16_t u16 = 60000;
	int16_t i16 = -30000;
	int64_t i64 = -5000000000ll;
	double f64 = 0.1;
	int32_t ai[4] = {-1, 0, 1, 2147483647};
	uint64_t au[2] = {1, UINT64_MAX};
	float af[3] = {0.5f, -2.25f, 1e-7f};
	const char *as[3] = {"<s>", "", "\xc3\xa9t\xc3\xa9"};
	uint64_t ne[2] = {4, 2}, ne_v = 8;
	nf_gguf_writer_new(&w);
	nf_gguf_writer_set_version(w, version);
	nf_gguf_writer_add_scalar(w, "t.u8", NF_GGUF_U8, &u8);
	nf_gguf_writer_add_scalar(w, "t.i8", NF_GGUF_I8, &i8);
	nf_gguf_writer_add_scalar(w, "t.u16", NF_GGUF_U16, &u16);
	nf_gguf_writer_add_scalar(w, "t.i16", NF_GGUF_I16, &i16);
	nf_gguf_writer_add_u32(w, "t.u32", 4000000000u);
	nf_gguf_writer_add_i32(w, "t.i32", -2000000000);
	nf_gguf_writer_add_f32(w, "t.f32", 3.5f);
	nf_gguf_writer_add_scalar(w, "t.bool", NF_GGUF_BOOL, &b);
	nf_gguf_writer_add_str(w, "t.string", "hello", 5);
	nf_gguf_writer_add_u64(w, "t.u64", 18000000000000000000ull);
	nf_gguf_writer_add_scalar(w, "t.i64", NF_GGUF_I64, &i64);
	nf_gguf_writer_add_scalar(w, "t.f64", NF_GGUF_F64, &f64);
	nf_gguf_writer_add_array(w, "t.ai32", NF_GGUF_I32, ai, 4);
	nf_gguf_writer_add_array(w, "t.au64", NF_GGUF_U64, au, 2);
	nf_gguf_writer_add_array(w, "t.af32", NF_GGUF_F32, af, 3);
	nf_gguf_writer_add_str_array(w, "t.astr", as, 3);
	nf_gguf_writer_add_str_array(w, "t.empty", NULL, 0);
	nf_gguf_writer_add_bool(w, "t.false", false);
	nf_gguf_writer_add_tensor(w, "w", NF_GGML_F32, 2, ne, t32, 32);
	nf_gguf_writer_add_tensor(w, "v", NF_GGML_F32, 1, &ne_v, t32, 32); /* ends the file: no padding */
	return finish(w, len);
}

static void check_scalars(const nf_gguf *g)
{
	uint64_t u = 7;
	uint32_t u32 = 7;
	int64_t i = 7;
	float f = 7;
	bool b = false;
	const char *s;
	size_t len;

	ok(nf_gguf_get_u64(g, "t.u8", &u) == 0 && u == 200, "u8 as u64");
	ok(nf_gguf_get_i64(g, "t.i8", &i) == 0 && i == -100, "i8 as i64");
	u = 7;
	is_int(nf_gguf_get_u64(g, "t.i8", &u), NF_EINPUT, "negative i8 refused as u64");
	ok(u == 7, "out untouched on error");
	ok(nf_gguf_get_u32(g, "t.u16", &u32) == 0 && u32 == 60000, "u16 as u32");
	ok(nf_gguf_get_i64(g, "t.i16", &i) == 0 && i == -30000, "i16");
	ok(nf_gguf_get_u32(g, "t.u32", &u32) == 0 && u32 == 4000000000u, "u32");
	ok(nf_gguf_get_i64(g, "t.i32", &i) == 0 && i == -2000000000, "i32");
	ok(nf_gguf_get_f32(g, "t.f32", &f) == 0 && f == 3.5f, "f32");
	ok(nf_gguf_get_bool(g, "t.bool", &b) == 0 && b, "bool true");
	ok(nf_gguf_get_bool(g, "t.false", &b) == 0 && !b, "bool false");
	ok(nf_gguf_get_str(g, "t.string", &s, &len) == 0 && len == 5 && memcmp(s, "hello", 5) == 0,
	   "string");
	ok(nf_gguf_get_u64(g, "t.u64", &u) == 0 && u == 18000000000000000000ull, "u64");
	is_int(nf_gguf_get_i64(g, "t.u64", &i), NF_EINPUT, "u64 past int64 refused as i64");
	is_int(nf_gguf_get_u32(g, "t.u64", &u32), NF_EINPUT, "u64 past uint32 refused as u32");
	ok(nf_gguf_get_i64(g, "t.i64", &i) == 0 && i == -5000000000ll, "i64");
	ok(nf_gguf_get_f32(g, "t.f64", &f) == 0 && f == (float)0.1, "f64 as f32");
	is_int(nf_gguf_get_str(g, "t.u32", &s, &len), NF_EINPUT, "u32 is not a string");
	ok(strstr(nf_error_last(), "\"t.u32\" is u32, not string") != NULL, "message names key and types");
	is_int(nf_gguf_get_u64(g, "t.f32", &u), NF_EINPUT, "f32 is not an integer");
	is_int(nf_gguf_get_f32(g, "t.u32", &f), NF_EINPUT, "u32 is not a float");
	is_int(nf_gguf_get_bool(g, "t.u8", &b), NF_EINPUT, "u8 is not a bool");
	is_int(nf_gguf_get_u64(g, "no.such", &u), NF_ENOTFOUND, "missing key");
	ok(strstr(nf_error_last(), "no.such") != NULL, "message names the missing key");
}

static void check_arrays(const nf_gguf *g)
{
	nf_gguf_vtype elem;
	uint64_t n;
	int64_t i;
	float f;
	const char *s;
	size_t len;

	ok(nf_gguf_get_array(g, "t.ai32", &elem, &n) == 0 && elem == NF_GGUF_I32 && n == 4, "i32 array");
	ok(nf_gguf_array_i64(g, "t.ai32", 0, &i) == 0 && i == -1, "i32 array [0]");
	ok(nf_gguf_array_i64(g, "t.ai32", 3, &i) == 0 && i == 2147483647, "i32 array [3]");
	is_int(nf_gguf_array_i64(g, "t.ai32", 4, &i), NF_EINPUT, "index past the end");
	ok(nf_gguf_array_i64(g, "t.au64", 0, &i) == 0 && i == 1, "u64 array [0]");
	is_int(nf_gguf_array_i64(g, "t.au64", 1, &i), NF_EINPUT, "u64 element past int64 refused");
	ok(nf_gguf_array_f32(g, "t.af32", 1, &f) == 0 && f == -2.25f, "f32 array [1]");
	ok(nf_gguf_array_f32(g, "t.af32", 2, &f) == 0 && f == 1e-7f, "f32 array [2]");
	is_int(nf_gguf_array_f32(g, "t.ai32", 0, &f), NF_EINPUT, "int array is not floats");
	ok(nf_gguf_get_array(g, "t.astr", &elem, &n) == 0 && elem == NF_GGUF_STRING && n == 3,
	   "string array");
	ok(nf_gguf_array_str(g, "t.astr", 0, &s, &len) == 0 && len == 3 && memcmp(s, "<s>", 3) == 0,
	   "string array [0]");
	ok(nf_gguf_array_str(g, "t.astr", 1, &s, &len) == 0 && len == 0, "string array [1] empty");
	ok(nf_gguf_array_str(g, "t.astr", 2, &s, &len) == 0 && len == 5 &&
	   memcmp(s, "\xc3\xa9t\xc3\xa9", 5) == 0, "string array [2] UTF-8");
	is_int(nf_gguf_array_str(g, "t.ai32", 0, &s, &len), NF_EINPUT, "int array is not strings");
	is_int(nf_gguf_array_i64(g, "t.astr", 0, &i), NF_EINPUT, "string array is not integers");
	ok(nf_gguf_get_array(g, "t.empty", &elem, &n) == 0 && n == 0, "empty string array");
	is_int(nf_gguf_array_str(g, "t.empty", 0, &s, &len), NF_EINPUT, "index 0 of an empty array");
	is_int(nf_gguf_get_array(g, "t.u32", &elem, &n), NF_EINPUT, "scalar is not an array");
}

static void check_tensors(const nf_gguf *g, const float *t32)
{
	const nf_gguf_tensor *w = nf_gguf_tensor_find(g, "w"), *v = nf_gguf_tensor_find(g, "v");
	is_int(nf_gguf_tensor_count(g), 2, "2 tensors");
	ok(nf_gguf_tensor_at(g, 0) == w && nf_gguf_tensor_at(g, 1) == v && !nf_gguf_tensor_at(g, 2),
	   "tensors in file order");
	ok(w && w->type == NF_GGML_F32 && w->n_dims == 2 && w->ne[0] == 4 && w->ne[1] == 2 &&
	   w->ne[2] == 1 && w->ne[3] == 1 && w->n_elems == 8 && w->n_bytes == 32 &&
	   memcmp(w->data, t32, 32) == 0, "tensor w: shape, unused dims 1, bytes");
	ok(v && v->n_dims == 1 && v->n_elems == 8 && v->offset % 32 == 0 && v->offset == w->offset + 32,
	   "tensor v aligned after w");
	ok(!nf_gguf_tensor_find(g, "x"), "missing tensor gives NULL");
}

static void test_round_trip(uint32_t version)
{
	float t32[8] = {1, -2, 3.5f, 0, 1e-3f, -1e9f, 7, 8};
	size_t len;
	uint8_t *p = every_type_file(&len, version, t32), *copy;
	nf_gguf *g = NULL;
	nf_gguf_vtype t;

	diag("round trip, version %u", version);
	if (!ok(open_copy(&g, p, len, &copy) == 0, "v%u file opens", version)) {
		diag("%s", nf_error_last());
		free(p);
		free(copy);
		return;
	}
	is_int(nf_gguf_version(g), version, "version");
	is_str(nf_gguf_path(g), "t", "name in messages");
	is_int(nf_gguf_kv_count(g), 18, "18 keys");
	is_str(nf_gguf_kv_key(g, 0, &t), "t.u8", "first key in file order");
	ok(t == NF_GGUF_U8, "its type");
	is_str(nf_gguf_kv_key(g, 15, &t), "t.astr", "key 15");
	ok(t == NF_GGUF_ARRAY, "its type is array");
	ok(nf_gguf_kv_key(g, 18, &t) == NULL, "key past the end is NULL");
	check_scalars(g);
	check_arrays(g);
	check_tensors(g, t32);
	nf_gguf_free(g);
	free(copy);
	free(p);
}

/* The file API: a written file opens mapped; a lie in it is named by path;
 * a missing file and a folder are refused as such. */
static void test_files(void)
{
	char dir[] = "/tmp/nf_test_gguf_XXXXXX", path[64];
	nf_gguf_writer *w;
	nf_gguf *g = NULL;
	uint64_t ne = 32;
	uint8_t q[34] = {0};
	uint32_t v = 0;

	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/x.gguf", dir);
	nf_gguf_writer_new(&w);
	nf_gguf_writer_add_u32(w, "general.alignment", 64);
	nf_gguf_writer_add_tensor(w, "a", NF_GGML_Q8_0, 1, &ne, q, 34);
	nf_gguf_writer_add_tensor(w, "b", NF_GGML_Q8_0, 1, &ne, q, 34);
	is_int(nf_gguf_writer_write(w, path), 0, "writer writes a file");
	nf_gguf_writer_free(w);
	ok(nf_gguf_open(&g, path) == 0 && nf_gguf_get_u32(g, "general.alignment", &v) == 0 && v == 64,
	   "it opens mapped, alignment 64");
	ok(g && nf_gguf_tensor_at(g, 1)->offset % 64 == 0 &&
	   nf_gguf_tensor_at(g, 1)->offset == nf_gguf_tensor_at(g, 0)->offset + 64,
	   "tensors placed at multiples of 64");
	is_str(g ? nf_gguf_path(g) : NULL, path, "path kept for messages");
	nf_gguf_free(g);
	g = NULL;
	snprintf(path, sizeof(path), "%s/missing.gguf", dir);
	is_int(nf_gguf_open(&g, path), NF_ENOTFOUND, "missing file");
	ok(!g && strstr(nf_error_last(), "missing.gguf"), "message names it");
	is_int(nf_gguf_open(&g, dir), NF_EINPUT, "a folder is refused");
	snprintf(path, sizeof(path), "%s/x.gguf", dir);
	remove(path);
	rmdir(dir);
}

/* The writer refuses what would make a file it cannot describe honestly. */
static void test_writer_refuses(void)
{
	nf_gguf_writer *w;
	uint64_t ne[2] = {32, 2}, zero = 0;
	uint8_t q[68] = {0};
	uint32_t v = 1;

	nf_gguf_writer_new(&w);
	ok(nf_gguf_writer_add_tensor(w, "a", NF_GGML_Q8_0, 2, ne, q, 34) < 0, "bytes that do not fit the dims");
	ok(nf_gguf_writer_add_tensor(w, "a", (nf_ggml_type)10, 2, ne, q, 68) < 0, "unknown type");
	ok(nf_gguf_writer_add_tensor(w, "a", NF_GGML_Q8_0, 0, ne, q, 0) < 0, "0 dims");
	ok(nf_gguf_writer_add_tensor(w, "", NF_GGML_Q8_0, 2, ne, q, 68) < 0, "empty name");
	ok(nf_gguf_writer_add_tensor(w, "a", NF_GGML_Q8_0, 1, &zero, q, 0) < 0, "a dim of 0");
	is_int(nf_gguf_writer_add_tensor(w, "a", NF_GGML_Q8_0, 2, ne, q, 68), 0, "a good tensor");
	ok(nf_gguf_writer_add_scalar(w, "s", NF_GGUF_STRING, &v) < 0, "a string is no scalar");
	ok(nf_gguf_writer_add_array(w, "s", NF_GGUF_ARRAY, &v, 1) < 0, "no numeric array of arrays");
	nf_gguf_writer_free(w);
}

/* --------------------------------------------------------------- lies */

static void test_header_lies(void)
{
	size_t len;
	uint32_t v = 7;
	uint8_t *p = one_key(&len, "a", NF_GGUF_U32, &v, 4);

	p[0] = 'X';
	refused(p, len, NF_EINPUT, 0, "bad magic", "bad magic");
	p[0] = 'G';
	set_le(p + 4, 1, 4);
	refused(p, len, NF_EUNSUPPORTED, 4, "version 1 is not supported", "version 1 unsupported");
	set_le(p + 4, 4, 4);
	refused(p, len, NF_EINPUT, 4, "unknown GGUF version 4", "version 4 refused");
	set_le(p + 4, 0x03000000, 4);
	refused(p, len, NF_EINPUT, 4, "unknown GGUF version", "big-endian version refused");
	set_le(p + 4, 3, 4);
	set_le(p + 8, 1000000, 8);
	refused(p, len, NF_EINPUT, 8, "tensor count 1000000 is more than the file can hold",
		"tensor count larger than the file");
	set_le(p + 8, 0, 8);
	set_le(p + 16, UINT64_MAX, 8);
	refused(p, len, NF_EINPUT, 16, "metadata count", "metadata count larger than the file");
	set_le(p + 16, 1, 8);
	set_le(p + 24, 1000, 8);
	refused(p, len, NF_EINPUT, 24, "key length 1000 runs past the end", "key length past the end");
	set_le(p + 24, 0, 8);
	refused(p, len, NF_EINPUT, 24, "key is empty", "empty key");
	set_le(p + 24, 1, 8);
	p[32] = 0;
	refused(p, len, NF_EINPUT, 24, "key contains a NUL", "NUL in a key");
	p[32] = 'a';
	set_le(p + 33, 13, 4);
	refused(p, len, NF_EINPUT, 33, "unknown value type 13", "unknown value type");
	set_le(p + 33, NF_GGUF_U64, 4);
	refused(p, len, NF_EINPUT, 37, "u64 value runs past the end", "scalar past the end");
	free(p);
	/* a long key leaves room for a second by the count's bound, but there is none */
	p = one_key(&len, "abcdefghijklmnopqrstuvwxyz", NF_GGUF_U32, &v, 4);
	set_le(p + 16, 2, 8);
	refused(p, len, NF_EINPUT, 66, "key runs past the end", "one key fewer than counted");
	free(p);
	refused((const uint8_t *)"GGUF", 4, NF_EINPUT, 4, "version runs past the end", "4-byte file");
	refused((const uint8_t *)"", 0, NF_EINPUT, 0, "bad magic", "empty file");
}

static void test_value_lies(void)
{
	size_t len;
	uint8_t s[8 + 3] = {3, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c'};
	uint8_t arr[12 + 8] = {4, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0};
	uint8_t sarr[12 + 9] = {8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 'x'};
	uint8_t bools[12 + 3] = {7, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1};
	uint8_t *p = one_key(&len, "a", NF_GGUF_STRING, s, sizeof(s));

	set_le(p + 37, 4, 8);
	refused(p, len, NF_EINPUT, 37, "string length 4 runs past the end", "string length past the end");
	free(p);
	p = one_key(&len, "a", NF_GGUF_ARRAY, arr, sizeof(arr));
	set_le(p + 41, 3, 8);
	refused(p, len, NF_EINPUT, 41, "array of 3 u32 runs past the end", "array count lie");
	set_le(p + 41, UINT64_MAX / 2, 8);
	refused(p, len, NF_EINPUT, 41, "runs past the end", "array count lie, huge");
	set_le(p + 37, 13, 4);
	refused(p, len, NF_EINPUT, 37, "unknown array element type 13", "unknown element type");
	free(p);
	p = one_key(&len, "a", NF_GGUF_ARRAY, sarr, sizeof(sarr));
	set_le(p + 41, 3, 8);
	refused(p, len, NF_EINPUT, 41, "array of 3 string runs past the end", "string array count lie");
	set_le(p + 41, 1, 8);
	set_le(p + 49, 2, 8);
	refused(p, len, NF_EINPUT, 49, "string length 2 runs past", "string element length lie");
	free(p);
	p = one_key(&len, "a", NF_GGUF_ARRAY, bools, sizeof(bools));
	p[50] = 2;
	refused(p, len, NF_EINPUT, 50, "bool value 2 is not 0 or 1", "bool array element 2");
	free(p);
	p = one_key(&len, "a", NF_GGUF_BOOL, (const uint8_t[]){9}, 1);
	refused(p, len, NF_EINPUT, 37, "bool value 9", "bool value 9");
	free(p);
}

/* Arrays of arrays parse (bounded), and nesting past the limit is refused. */
static void test_nested(void)
{
	uint8_t buf[12 * 12 + 16];
	size_t n = 0, len;
	nf_gguf *g = NULL;
	nf_gguf_vtype elem;
	uint64_t cnt;
	uint8_t *p, *copy;

	/* [[7], []]: an array of two arrays of u32 */
	static const uint8_t two[] = {9, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0,
				      0, 0, 0, 0, 7, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	p = one_key(&len, "a", NF_GGUF_ARRAY, two, sizeof(two));
	ok(open_copy(&g, p, len, &copy) == 0 && nf_gguf_get_array(g, "a", &elem, &cnt) == 0 &&
	   elem == NF_GGUF_ARRAY && cnt == 2, "array of arrays opens: 2 arrays");
	nf_gguf_free(g);
	free(copy);
	set_le(p + 53, 5, 8); /* the first inner array claims 5 u32: 16 bytes are left */
	refused(p, len, NF_EINPUT, 53, "array of 5 u32 runs past the end", "inner array count lie");
	free(p);
	/* 10 levels: each an array of one array, the innermost empty */
	for (int d = 0; d < 10; d++, n += 12) {
		set_le(buf + n, NF_GGUF_ARRAY, 4);
		set_le(buf + n + 4, 1, 8);
	}
	set_le(buf + n, NF_GGUF_U8, 4);
	set_le(buf + n + 4, 0, 8);
	n += 12;
	p = one_key(&len, "a", NF_GGUF_ARRAY, buf, n);
	refused(p, len, NF_EINPUT, 37 + 8 * 12, "arrays nested more than 8 deep", "nesting too deep");
	free(p);
}

static void test_duplicates_and_alignment(void)
{
	nf_gguf_writer *w;
	size_t len;
	uint8_t *p;
	uint64_t a64 = 64;

	nf_gguf_writer_new(&w);
	nf_gguf_writer_add_u32(w, "a", 1);
	nf_gguf_writer_add_u32(w, "b", 2);
	nf_gguf_writer_add_u32(w, "a", 3);
	p = finish(w, &len);
	refused(p, len, NF_EINPUT, 24 + 2 * 17, "duplicate key \"a\" (first at offset 24)",
		"duplicate key");
	free(p);
	uint32_t bad_aligns[3] = {48, 0, 1u << 21};
	for (int i = 0; i < 3; i++) {
		nf_gguf_writer_new(&w);
		nf_gguf_writer_add_u32(w, "general.alignment", bad_aligns[i]);
		p = finish(w, &len);
		refused(p, len, NF_EINPUT, 24 + 8 + 17 + 4, "is not a power of two",
			bad_aligns[i] == 48 ? "alignment 48" : bad_aligns[i] ? "alignment 2^21" : "alignment 0");
		free(p);
	}
	p = one_key(&len, "general.alignment", NF_GGUF_U64, &a64, 8);
	refused(p, len, NF_EINPUT, 53, "general.alignment is u64, not u32", "alignment of type u64");
	free(p);
}

/* A file with tensor "a", Q8_0 ne {32} (34 bytes), no keys: its name length
 * at 24, n_dims 33, ne[0] 37, type 45, offset 49; infos end at 57. */
static uint8_t *one_tensor(size_t *len, nf_ggml_type type, uint64_t ne0, uint64_t bytes)
{
	nf_gguf_writer *w;
	uint8_t data[256] = {0};
	nf_gguf_writer_new(&w);
	nf_gguf_writer_add_tensor(w, "a", type, 1, &ne0, data, bytes);
	return finish(w, len);
}

static void test_tensor_lies(void)
{
	size_t len;
	uint8_t *p = one_tensor(&len, NF_GGML_Q8_0, 32, 34);

	set_le(p + 33, 0, 4);
	refused(p, len, NF_EINPUT, 33, "n_dims 0 is not 1 to 4", "n_dims 0");
	set_le(p + 33, 5, 4);
	refused(p, len, NF_EINPUT, 33, "n_dims 5 is not 1 to 4", "n_dims 5");
	set_le(p + 33, 1, 4);
	set_le(p + 37, 0, 8);
	refused(p, len, NF_EINPUT, 37, "dimension 0 is 0", "dim 0");
	set_le(p + 37, 33, 8);
	refused(p, len, NF_EINPUT, 37, "ne[0] 33 is not a multiple of the Q8_0 block of 32",
		"ne[0] not a multiple of the block");
	set_le(p + 37, UINT64_MAX - 31, 8); /* 2^59 - 1 blocks of 34 bytes overflow */
	refused(p, len, NF_EINPUT, 45, "byte size overflows", "byte size overflow");
	set_le(p + 37, 32, 8);
	set_le(p + 45, 1000, 4);
	refused(p, len, NF_EINPUT, 45, "unknown tensor type 1000", "unknown tensor type");
	set_le(p + 45, 10, 4);
	refused(p, len, NF_EUNSUPPORTED, 45, "type Q2_K is not supported", "unsupported ggml type");
	set_le(p + 45, NF_GGML_Q8_0, 4);
	set_le(p + 49, 16, 8);
	refused(p, len, NF_EINPUT, 49, "offset 16 is not a multiple of the alignment 32",
		"misaligned offset");
	set_le(p + 49, 32, 8);
	refused(p, len, NF_EINPUT, 49, "34 bytes at data offset 32 run past the end of the data "
		"section (64 bytes)", "tensor past the end of the data section");
	set_le(p + 49, UINT64_MAX - 31, 8);
	refused(p, len, NF_EINPUT, 49, "run past the end", "offset near 2^64");
	set_le(p + 49, 0, 8);
	p[32] = 0;
	refused(p, len, NF_EINPUT, 24, "tensor name contains a NUL", "NUL in a tensor name");
	free(p);

	/* two dims whose product overflows: ne[1] at 45 */
	nf_gguf_writer *w;
	uint64_t ne[2] = {32, 1};
	uint8_t q[34] = {0};
	nf_gguf_writer_new(&w);
	nf_gguf_writer_add_tensor(w, "a", NF_GGML_Q8_0, 2, ne, q, 34);
	p = finish(w, &len);
	set_le(p + 37, 1ull << 32, 8);
	set_le(p + 45, 1ull << 32, 8);
	refused(p, len, NF_EINPUT, 45, "element count overflows", "element count overflow");
	free(p);
}

/* Tensors "a" and "b" (F32 ne {8}, 32 bytes each): a's infos at 24..57, b's
 * name length at 57, its offset field at 82. */
static void test_overlap_and_names(void)
{
	nf_gguf_writer *w;
	float f[8] = {0};
	uint64_t ne = 8;
	size_t len;
	uint8_t *p;

	nf_gguf_writer_new(&w);
	nf_gguf_writer_add_tensor(w, "a", NF_GGML_F32, 1, &ne, f, 32);
	nf_gguf_writer_add_tensor(w, "b", NF_GGML_F32, 1, &ne, f, 32);
	p = finish(w, &len);
	ok(p && p[65] == 'b' && p[82] == 32, "layout as the test assumes");
	set_le(p + 82, 0, 8);
	refused(p, len, NF_EINPUT, 82, "tensor \"b\" overlaps tensor \"a\"", "overlapping tensors");
	set_le(p + 82, 32, 8);
	set_le(p + 49, 32, 8);
	refused(p, len, NF_EINPUT, 82, "overlaps", "same offset, the later one named");
	set_le(p + 49, 0, 8);
	p[65] = 'a';
	refused(p, len, NF_EINPUT, 57, "duplicate tensor name \"a\"", "duplicate tensor names");
	free(p);
}

/* Every prefix of a small valid file (keys of every type, two tensors that
 * end the file exactly) must be refused, never read past. */
static void test_truncation(void)
{
	float t32[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	size_t len, refused_n = 0;
	uint8_t *p = every_type_file(&len, 3, t32), *copy;
	nf_gguf *g = NULL;

	ok(open_copy(&g, p, len, &copy) == 0, "the whole file opens (%zu bytes)", len);
	nf_gguf_free(g);
	free(copy);
	for (size_t n = 0; n < len; n++) {
		int err = open_copy(&g, p, n, &copy);
		if (err == NF_EINPUT && !g && strncmp(nf_error_last(), "t: offset ", 10) == 0)
			refused_n++;
		else
			diag("prefix of %zu bytes: err %d: %s", n, err, nf_error_last());
		nf_gguf_free(g);
		g = NULL;
		free(copy);
	}
	is_int(refused_n, len, "every one of the %zu prefixes refused with an offset", len);
	free(p);
}

/* A file with 200,000 keys opens in well under a second (lookups are
 * indexed, not quadratic), and a duplicate at the very end is found. */
static void test_many_keys(void)
{
	nf_gguf_writer *w;
	size_t len;
	uint8_t *p, *copy;
	char key[32];
	nf_gguf *g = NULL;
	uint32_t v = 0;
	clock_t t0;
	double secs;

	nf_gguf_writer_new(&w);
	for (int i = 0; i < 200000; i++) {
		snprintf(key, sizeof(key), "k%d", (i * 7919) % 200000);
		nf_gguf_writer_add_u32(w, key, (uint32_t)i);
	}
	p = finish(w, &len);
	t0 = clock();
	ok(open_copy(&g, p, len, &copy) == 0, "200,000 keys open");
	secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
	ok(secs < 2.0, "in %.3f s", secs);
	ok(g && nf_gguf_get_u32(g, "k7919", &v) == 0 && v == 1, "lookup among them");
	nf_gguf_free(g);
	free(copy);
	free(p);
}

/* --------------------------------------------------------- dequantize */

static int same_floats(const float *got, const float *want, int n, const char *name)
{
	for (int i = 0; i < n; i++) {
		if (memcmp(&got[i], &want[i], 4) != 0) {
			diag("%s: element %d: got %.9g, want %.9g", name, i, (double)got[i], (double)want[i]);
			return 0;
		}
	}
	return 1;
}

static void test_dequant_simple(void)
{
	uint8_t b[256];
	float got[256], want[256];

	/* F16: 1, -2, the smallest subnormal 2^-24, the largest 65504, inf; NaN stays NaN */
	static const uint16_t h[6] = {0x3c00, 0xc000, 0x0001, 0x7bff, 0x7c00, 0x7e00};
	for (int i = 0; i < 6; i++)
		set_le(b + 2 * i, h[i], 2);
	is_int(nf_ggml_dequantize(got, b, NF_GGML_F16, 6), 0, "F16 dequantizes");
	ok(got[0] == 1.0f && got[1] == -2.0f && got[2] == ldexpf(1, -24) && got[3] == 65504.0f &&
	   isinf(got[4]) && isnan(got[5]), "F16 exact: 1 -2 2^-24 65504 inf nan");
	/* BF16: the top half of a float32 */
	static const uint16_t bf[3] = {0x3f80, 0xc040, 0x0001};
	for (int i = 0; i < 3; i++)
		set_le(b + 2 * i, bf[i], 2);
	nf_ggml_dequantize(got, b, NF_GGML_BF16, 3);
	ok(got[0] == 1.0f && got[1] == -3.0f && got[2] == ldexpf(1, -133), "BF16 exact: 1 -3 2^-133");
	float f[3] = {1.5f, -0.0f, 1e30f};
	nf_ggml_dequantize(got, f, NF_GGML_F32, 3);
	ok(same_floats(got, f, 3, "F32"), "F32 copied bit for bit");

	/* Q8_0: d = 0.25, q = j - 16 */
	put16(b, 0.25f);
	for (int j = 0; j < 32; j++) {
		b[2 + j] = (uint8_t)(int8_t)(j - 16);
		want[j] = (float)(j - 16) * 0.25f;
	}
	nf_ggml_dequantize(got, b, NF_GGML_Q8_0, 32);
	ok(same_floats(got, want, 32, "Q8_0") && got[0] == -4.0f && got[31] == 3.75f,
	   "Q8_0: d 0.25, q -16..15 gives -4..3.75");

	/* Q4_0: d = 0.5, byte j = j | (15 - j) << 4: weight j = (j - 8) / 2, weight j+16 = (7 - j) / 2 */
	put16(b, 0.5f);
	for (int j = 0; j < 16; j++) {
		b[2 + j] = (uint8_t)(j | (15 - j) << 4);
		want[j] = (float)(j - 8) * 0.5f;
		want[j + 16] = (float)(7 - j) * 0.5f;
	}
	nf_ggml_dequantize(got, b, NF_GGML_Q4_0, 32);
	ok(same_floats(got, want, 32, "Q4_0") && got[0] == -4.0f && got[16] == 3.5f, "Q4_0");

	/* Q4_1: d = 0.5, m = -1, nibbles 0..15 (low) and 15..0 (high): x = q/2 - 1 */
	put16(b, 0.5f);
	put16(b + 2, -1.0f);
	for (int j = 0; j < 16; j++) {
		b[4 + j] = (uint8_t)(j | (15 - j) << 4);
		want[j] = (float)j * 0.5f - 1.0f;
		want[j + 16] = (float)(15 - j) * 0.5f - 1.0f;
	}
	nf_ggml_dequantize(got, b, NF_GGML_Q4_1, 32);
	ok(same_floats(got, want, 32, "Q4_1") && got[0] == -1.0f && got[15] == 6.5f &&
	   got[16] == 6.5f && got[31] == -1.0f, "Q4_1: d 0.5, m -1, nibbles 0..15 give -1..6.5");
}

/* Q5_0 and Q5_1: bit j of qh is the fifth bit of weight j. */
static void test_dequant_q5(void)
{
	uint8_t b[24];
	float got[32], want[32];
	uint32_t qh = 0xA5A50F0Fu;

	put16(b, 0.25f);
	set_le(b + 2, qh, 4);
	for (int j = 0; j < 16; j++)
		b[6 + j] = (uint8_t)(j | (15 - j) << 4);
	for (int j = 0; j < 32; j++) {
		int lo = j < 16 ? j : 15 - (j - 16);
		want[j] = (float)((lo | (int)((qh >> j) & 1) << 4) - 16) * 0.25f;
	}
	nf_ggml_dequantize(got, b, NF_GGML_Q5_0, 32);
	/* weight 0: nibble 0, qh bit 1 -> 16 - 16 = 0; weight 4: nibble 4, bit 0 -> (4-16)/4 = -3 */
	ok(same_floats(got, want, 32, "Q5_0") && got[0] == 0.0f && got[4] == -3.0f, "Q5_0");

	put16(b, 1.0f);
	put16(b + 2, 0.5f);
	set_le(b + 4, qh, 4);
	for (int j = 0; j < 16; j++)
		b[8 + j] = (uint8_t)(j | (15 - j) << 4);
	for (int j = 0; j < 32; j++) {
		int lo = j < 16 ? j : 15 - (j - 16);
		want[j] = (float)(lo | (int)((qh >> j) & 1) << 4) + 0.5f;
	}
	nf_ggml_dequantize(got, b, NF_GGML_Q5_1, 32);
	/* weight 31: nibble 0, qh bit 31 set -> 16 + 0.5 */
	ok(same_floats(got, want, 32, "Q5_1") && got[31] == 16.5f && got[1] == 17.5f, "Q5_1");
}

/* Pack 8 six-bit scales and mins the Q4_K/Q5_K way (the encoder, written
 * from the layout, independent of the decoder). */
static void pack_k4(uint8_t q[12], const int sc[8], const int m[8])
{
	for (int j = 0; j < 4; j++) {
		q[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
		q[j + 4] = (uint8_t)((m[j] & 63) | (m[j + 4] >> 4) << 6);
		q[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
	}
}

static void test_dequant_k(void)
{
	static const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63}, mn[8] = {0, 1, 2, 3, 20, 40, 63, 16};
	uint8_t b[210];
	float got[256], want[256];

	/* Q4_K: d 1, dmin 0.5; 64 weights per 32 bytes, low nibbles sub-block 2i, high 2i+1 */
	put16(b, 1.0f);
	put16(b + 2, 0.5f);
	pack_k4(b + 4, sc, mn);
	for (int i = 0; i < 128; i++)
		b[16 + i] = (uint8_t)((i % 16) | (15 - i % 16) << 4);
	for (int e = 0; e < 256; e++) {
		int s = e / 32, byte = 32 * (s / 2) + e % 32;
		int q = s % 2 ? b[16 + byte] >> 4 : b[16 + byte] & 15;
		want[e] = (float)sc[s] * (float)q - 0.5f * (float)mn[s];
	}
	nf_ggml_dequantize(got, b, NF_GGML_Q4_K, 256);
	/* e 33: sub-block 1 (scale 2, min 1), high nibble of byte 1 = 14: 28 - 0.5;
	 * e 255: sub-block 7 (63, 16), high nibble of byte 127 = 0: -8;
	 * e 192: sub-block 6 (50, 63), low nibble of byte 96 = 0: -31.5 */
	ok(same_floats(got, want, 256, "Q4_K") && got[33] == 27.5f && got[255] == -8.0f &&
	   got[192] == -31.5f, "Q4_K: 6-bit packed scales and mins");

	/* Q5_K: as Q4_K with qh (32 bytes) before the nibbles; bit s of qh[l] */
	put16(b, 0.5f);
	put16(b + 2, 0.25f);
	pack_k4(b + 4, sc, mn);
	for (int l = 0; l < 32; l++)
		b[16 + l] = (uint8_t)(l * 37 + 11);
	for (int i = 0; i < 128; i++)
		b[48 + i] = (uint8_t)((i % 16) | (15 - i % 16) << 4);
	for (int e = 0; e < 256; e++) {
		int s = e / 32, l = e % 32, byte = 32 * (s / 2) + l;
		int q = (s % 2 ? b[48 + byte] >> 4 : b[48 + byte] & 15) | ((b[16 + l] >> s) & 1) << 4;
		want[e] = 0.5f * (float)sc[s] * (float)q - 0.25f * (float)mn[s];
	}
	nf_ggml_dequantize(got, b, NF_GGML_Q5_K, 256);
	/* e 0: qh[0] = 11 (bit 0 set), nibble 0 -> q 16, 0.5 * 1 * 16 - 0 = 8 */
	ok(same_floats(got, want, 256, "Q5_K") && got[0] == 8.0f, "Q5_K: fifth bits from qh");

	/* Q6_K: ql 128, qh 64, 16 int8 scales, fp16 d at 208 */
	for (int i = 0; i < 128; i++)
		b[i] = (uint8_t)(i * 13 + 5);
	for (int i = 0; i < 64; i++)
		b[128 + i] = (uint8_t)(i * 29 + 3);
	for (int i = 0; i < 16; i++)
		b[192 + i] = (uint8_t)(int8_t)(i % 2 ? -(i + 1) : i + 1);
	put16(b + 208, 0.5f);
	for (int e = 0; e < 256; e++) {
		int h = e / 128, r = e % 128, k = r / 32, c = r % 32;
		int lb = b[64 * h + c + 32 * (k & 1)];
		int nib = k < 2 ? lb & 15 : lb >> 4;
		int hi = (b[128 + 32 * h + c] >> (2 * k)) & 3;
		want[e] = 0.5f * (float)(int8_t)b[192 + e / 16] * (float)((nib | hi << 4) - 32);
	}
	nf_ggml_dequantize(got, b, NF_GGML_Q6_K, 256);
	/* e 0: ql[0] = 5, qh[0] = 3 -> q = 5 | 3 << 4 = 53 - 32 = 21; scale 1; 0.5 * 21 */
	ok(same_floats(got, want, 256, "Q6_K") && got[0] == 10.5f, "Q6_K");
}

static void test_type_table(void)
{
	uint64_t bytes;
	float out[32];
	is_str(nf_ggml_type_name(NF_GGML_Q4_K), "Q4_K", "type name");
	ok(nf_ggml_type_name(10) == NULL && nf_ggml_block_elems(10) == 0 && nf_ggml_block_bytes(99) == 0,
	   "unknown types: NULL and 0");
	ok(nf_ggml_block_elems(NF_GGML_F32) == 1 && nf_ggml_block_bytes(NF_GGML_F32) == 4 &&
	   nf_ggml_block_bytes(NF_GGML_Q6_K) == 210 && nf_ggml_block_bytes(NF_GGML_Q5_K) == 176 &&
	   nf_ggml_block_bytes(NF_GGML_Q4_K) == 144 && nf_ggml_block_bytes(NF_GGML_BF16) == 2,
	   "block sizes");
	ok(nf_ggml_row_bytes(&bytes, NF_GGML_Q4_1, 576) == 0 && bytes == 18 * 20, "row bytes Q4_1 576");
	is_int(nf_ggml_row_bytes(&bytes, NF_GGML_Q4_1, 33), NF_EINPUT, "partial block refused");
	is_int(nf_ggml_row_bytes(&bytes, NF_GGML_F32, UINT64_MAX / 2), NF_EINPUT, "row bytes overflow");
	is_int(nf_ggml_dequantize(out, out, NF_GGML_Q8_0, 16), NF_EINPUT, "dequantize partial block");
	is_int(nf_ggml_dequantize(out, out, 10, 32), NF_EUNSUPPORTED, "dequantize unknown type");
}

/* ------------------------------------------------------------- SmolLM2 */

static void check_smollm2_blocks(const nf_gguf *g)
{
	static const struct { const char *name; nf_ggml_type type; uint64_t ne0, ne1; } per_block[] = {
		{"attn_norm", NF_GGML_F32, 576, 1},    {"ffn_norm", NF_GGML_F32, 576, 1},
		{"attn_q", NF_GGML_Q4_1, 576, 576},    {"attn_k", NF_GGML_Q4_1, 576, 192},
		{"attn_v", NF_GGML_Q4_1, 576, 192},    {"attn_output", NF_GGML_Q4_1, 576, 576},
		{"ffn_gate", NF_GGML_Q4_1, 576, 1536}, {"ffn_up", NF_GGML_Q4_1, 576, 1536},
		{"ffn_down", NF_GGML_Q4_1, 1536, 576},
	};
	int good = 0;
	char name[64];
	for (int b = 0; b < 30; b++) {
		for (size_t i = 0; i < sizeof(per_block) / sizeof(per_block[0]); i++) {
			snprintf(name, sizeof(name), "blk.%d.%s.weight", b, per_block[i].name);
			const nf_gguf_tensor *t = nf_gguf_tensor_find(g, name);
			if (t && t->type == per_block[i].type && t->ne[0] == per_block[i].ne0 &&
			    t->ne[1] == per_block[i].ne1 && t->n_dims == (per_block[i].ne1 > 1 ? 2 : 1))
				good++;
			else
				diag("%s: missing or wrong shape", name);
		}
	}
	is_int(good, 30 * 9, "30 blocks of 9 tensors with the expected types and shapes");
	snprintf(name, sizeof(name), "blk.30.attn_q.weight");
	ok(!nf_gguf_tensor_find(g, name), "no block 30");
}

static void test_smollm2(void)
{
	const char *shared = tap_env("NF_SHARED", "../shared");
	char path[1024];
	nf_gguf *g = NULL;
	uint32_t blocks = 0;
	const char *s;
	size_t len;
	float eps = 0;

	snprintf(path, sizeof(path), "%s/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf",
		 shared);
	if (!nf_fs_exists(path)) {
		skip("%s is absent", path);
		return;
	}
	if (!ok(nf_gguf_open(&g, path) == 0, "SmolLM2 GGUF opens")) {
		diag("%s", nf_error_last());
		return;
	}
	is_int(nf_gguf_version(g), 3, "version 3");
	is_int(nf_gguf_tensor_count(g), 272, "272 tensors");
	ok(nf_gguf_get_u32(g, "llama.block_count", &blocks) == 0 && blocks == 30, "block_count 30");
	ok(nf_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps) == 0 && eps == 1e-5f,
	   "rms eps 1e-5");
	ok(nf_gguf_get_str(g, "tokenizer.ggml.model", &s, &len) == 0 && len == 4 &&
	   memcmp(s, "gpt2", 4) == 0, "tokenizer model gpt2");
	ok(nf_gguf_array_str(g, "tokenizer.ggml.tokens", 1, &s, &len) == 0 && len == 12 &&
	   memcmp(s, "<|im_start|>", 12) == 0, "token 1 is <|im_start|>");
	ok(nf_gguf_array_str(g, "tokenizer.ggml.tokens", 49151, &s, &len) == 0, "token 49151");
	const nf_gguf_tensor *e = nf_gguf_tensor_find(g, "token_embd.weight");
	ok(e && e->type == NF_GGML_Q8_0 && e->ne[0] == 576 && e->ne[1] == 49152, "token_embd Q8_0 576x49152");
	ok(!nf_gguf_tensor_find(g, "output.weight"), "no output.weight (tied classifier)");
	check_smollm2_blocks(g);

	/* every tensor dequantizes; the whole file in well under a second */
	clock_t t0 = clock();
	int all = 1;
	double sum = 0;
	for (uint64_t i = 0; i < nf_gguf_tensor_count(g); i++) {
		const nf_gguf_tensor *t = nf_gguf_tensor_at(g, i);
		float *f = malloc((size_t)t->n_elems * sizeof(float));
		all &= f && nf_ggml_dequantize(f, t->data, t->type, t->n_elems) == 0;
		for (uint64_t j = 0; f && j < t->n_elems; j += 4099)
			sum += fabsf(f[j]);
		free(f);
	}
	double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
	ok(all && isfinite(sum) && sum > 0, "all 272 tensors dequantize to finite values");
	diag("dequantized 134.5M weights in %.3f s", secs);
	if (strcmp(tap_env("NF_SAN", ""), "1") == 0)
		skip("timing under the sanitizers says nothing");
	else
		ok(secs < 1.0, "whole file dequantized in under a second (%.3f s)", secs);
	nf_gguf_free(g);
}

int main(void)
{
	test_round_trip(3);
	test_round_trip(2);
	test_files();
	test_writer_refuses();
	test_header_lies();
	test_value_lies();
	test_nested();
	test_duplicates_and_alignment();
	test_tensor_lies();
	test_overlap_and_names();
	test_truncation();
	test_many_keys();
	test_type_table();
	test_dequant_simple();
	test_dequant_q5();
	test_dequant_k();
	test_smollm2();
	nf_gguf_free(NULL);
	nf_gguf_writer_free(NULL);
	return done_testing();
}
