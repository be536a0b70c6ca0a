/*
 * nf_gguf_tool.c - the GGUF reader and writer from the command line, for the
 * reference test against gguf-py (tests/e2e/gguf_ref.sh) and for the fuzz
 * seeds.
 *
 *   nf_gguf_tool kv FILE              every key: "KEY<TAB>TYPE<TAB>VALUE"; an
 *                                     array "KEY<TAB>array[ELEM]<TAB>N" then one
 *                                     "<TAB>VALUE" line per element (not for
 *                                     arrays of arrays or bools); strings escaped (\\ \n
 *                                     \t, other control bytes \xHH), floats %.9g
 *   nf_gguf_tool tensors FILE         "NAME<TAB>TYPE<TAB>NE0,NE1,..<TAB>OFFSET<TAB>BYTES"
 *   nf_gguf_tool dequant FILE TENSOR  the tensor as raw little-endian float32 on stdout
 *   nf_gguf_tool bench FILE           dequantize every tensor; seconds on stdout
 *   nf_gguf_tool random OUT SEED      a file with a tensor of random blocks of
 *                                     every supported type (fp16/bf16/f32 fields
 *                                     made finite) and a key of every value type
 *   nf_gguf_tool seeds DIR            the fuzz seeds of tests/fuzz/corpus/gguf
 *
 * Exit 0, 2 on bad input or arguments, 4 on I/O errors; the message on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/gguf.h"
#include "engine/gguf_write.h"
#include "tests/rng.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/parse.h"
#include "util/banned.h"

static void put_escaped(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\\')
			fputs("\\\\", stdout);
		else if (c == '\n')
			fputs("\\n", stdout);
		else if (c == '\t')
			fputs("\\t", stdout);
		else if (c < 0x20 || c == 0x7f)
			printf("\\x%02x", c);
		else
			putchar(c);
	}
}

static const char *vname(nf_gguf_vtype t)
{
	static const char *const n[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
					"bool", "string", "array", "u64", "i64", "f64"};
	return (unsigned)t < NF_GGUF_VTYPE_COUNT ? n[t] : "?";
}

static int print_scalar(const nf_gguf *g, const char *key, nf_gguf_vtype t)
{
	int err = 0;
	if (t == NF_GGUF_U64) {
		uint64_t u;
		if (!(err = nf_gguf_get_u64(g, key, &u)))
			printf("%llu", (unsigned long long)u);
	} else if (t == NF_GGUF_F32 || t == NF_GGUF_F64) {
		float f;
		if (!(err = nf_gguf_get_f32(g, key, &f)))
			printf("%.9g", (double)f);
	} else if (t == NF_GGUF_BOOL) {
		bool b;
		if (!(err = nf_gguf_get_bool(g, key, &b)))
			fputs(b ? "true" : "false", stdout);
	} else if (t == NF_GGUF_STRING) {
		const char *s;
		size_t len;
		if (!(err = nf_gguf_get_str(g, key, &s, &len)))
			put_escaped(s, len);
	} else {
		int64_t v;
		if (!(err = nf_gguf_get_i64(g, key, &v)))
			printf("%lld", (long long)v);
	}
	return err;
}

static int print_elem(const nf_gguf *g, const char *key, nf_gguf_vtype elem, uint64_t i)
{
	int err;
	putchar('\t');
	if (elem == NF_GGUF_STRING) {
		const char *s;
		size_t len;
		if (!(err = nf_gguf_array_str(g, key, i, &s, &len)))
			put_escaped(s, len);
	} else if (elem == NF_GGUF_F32 || elem == NF_GGUF_F64) {
		float f;
		if (!(err = nf_gguf_array_f32(g, key, i, &f)))
			printf("%.9g", (double)f);
	} else {
		int64_t v;
		if (!(err = nf_gguf_array_i64(g, key, i, &v)))
			printf("%lld", (long long)v);
	}
	putchar('\n');
	return err;
}

static int cmd_kv(const nf_gguf *g)
{
	int err;
	for (uint64_t i = 0; i < nf_gguf_kv_count(g); i++) {
		nf_gguf_vtype t, elem;
		uint64_t n;
		const char *key = nf_gguf_kv_key(g, i, &t);
		printf("%s\t", key);
		if (t != NF_GGUF_ARRAY) {
			printf("%s\t", vname(t));
			if ((err = print_scalar(g, key, t)))
				return err;
			putchar('\n');
			continue;
		}
		if ((err = nf_gguf_get_array(g, key, &elem, &n)))
			return err;
		printf("array[%s]\t%llu\n", vname(elem), (unsigned long long)n);
		/* the getters read one level, and no integer getter reads bools */
		for (uint64_t j = 0; elem != NF_GGUF_ARRAY && elem != NF_GGUF_BOOL && j < n; j++)
			if ((err = print_elem(g, key, elem, j)))
				return err;
	}
	return 0;
}

static int cmd_tensors(const nf_gguf *g)
{
	for (uint64_t i = 0; i < nf_gguf_tensor_count(g); i++) {
		const nf_gguf_tensor *t = nf_gguf_tensor_at(g, i);
		printf("%s\t%s\t", t->name, nf_ggml_type_name(t->type));
		for (int d = 0; d < t->n_dims; d++)
			printf("%s%llu", d ? "," : "", (unsigned long long)t->ne[d]);
		printf("\t%llu\t%llu\n", (unsigned long long)t->offset, (unsigned long long)t->n_bytes);
	}
	return 0;
}

static int dequant(const nf_gguf_tensor *t, float **out)
{
	float *f = malloc((size_t)t->n_elems * sizeof(float));
	if (!f)
		return nf_error_set(NF_ENOMEM, "%s: out of memory", t->name);
	int err = nf_ggml_dequantize(f, t->data, t->type, t->n_elems);
	if (err)
		free(f);
	else
		*out = f;
	return err;
}

static int cmd_dequant(const nf_gguf *g, const char *name)
{
	const nf_gguf_tensor *t = nf_gguf_tensor_find(g, name);
	float *f = NULL;
	int err;
	if (!t)
		return nf_error_set(NF_ENOTFOUND, "%s: no tensor \"%s\"", nf_gguf_path(g), name);
	if ((err = dequant(t, &f)))
		return err;
	if (fwrite(f, sizeof(float), (size_t)t->n_elems, stdout) != t->n_elems)
		err = nf_error_set(NF_EIO, "stdout: write failed");
	free(f);
	return err;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmd_bench(const nf_gguf *g)
{
	double t0 = now(), sum = 0;
	uint64_t n = 0;
	for (uint64_t i = 0; i < nf_gguf_tensor_count(g); i++) {
		const nf_gguf_tensor *t = nf_gguf_tensor_at(g, i);
		float *f = NULL;
		int err = dequant(t, &f);
		if (err)
			return err;
		sum += f[0] + f[t->n_elems - 1]; /* keep the work observable */
		n += t->n_elems;
		free(f);
	}
	printf("%.3f s for %llu weights (checksum %g)\n", now() - t0, (unsigned long long)n, sum);
	return 0;
}

/* ---------------------------------------------------------- random file */

/* Clear the top exponent bit of a 16-bit float field whose exponent is all
 * ones (mask), so that it is finite: random scales must not make inf or NaN,
 * which would compare by accident rather than by value. */
static void finite16(uint8_t *p, uint16_t exp_mask)
{
	uint16_t h = (uint16_t)(p[0] | p[1] << 8);
	if ((h & exp_mask) == exp_mask)
		h &= (uint16_t)~0x4000;
	p[0] = (uint8_t)h;
	p[1] = (uint8_t)(h >> 8);
}

/* The fp16 fields of each block (byte offsets), per type. */
static void make_finite(uint8_t *p, uint32_t type, size_t n_bytes)
{
	size_t bb = nf_ggml_block_bytes(type);
	for (size_t b = 0; b < n_bytes; b += bb) {
		switch (type) {
		case NF_GGML_F32:
			if ((p[b + 3] & 0x7f) == 0x7f && (p[b + 2] & 0x80))
				p[b + 3] &= 0xbf;
			break;
		case NF_GGML_F16: finite16(p + b, 0x7c00); break;
		case NF_GGML_BF16: finite16(p + b, 0x7f80); break;
		case NF_GGML_Q6_K: finite16(p + b + 208, 0x7c00); break;
		case NF_GGML_Q4_0: case NF_GGML_Q5_0: case NF_GGML_Q8_0:
			finite16(p + b, 0x7c00);
			break;
		default: /* Q4_1 Q5_1 Q4_K Q5_K: d and m (dmin) */
			finite16(p + b, 0x7c00);
			finite16(p + b + 2, 0x7c00);
			break;
		}
	}
}

static int add_random_tensors(nf_gguf_writer *w, uint64_t seed)
{
	for (uint32_t type = 0; type < 64; type++) {
		const char *name = nf_ggml_type_name(type);
		uint64_t ne[2] = {512, 3}, n_bytes;
		uint8_t *p;
		int err;
		if (!name)
			continue;
		if ((err = nf_ggml_row_bytes(&n_bytes, type, ne[0] * ne[1])))
			return err;
		if (!(p = malloc((size_t)n_bytes)))
			return nf_error_set(NF_ENOMEM, "out of memory");
		for (size_t i = 0; i < n_bytes; i++)
			p[i] = (uint8_t)(nf_test_rng(&seed) >> 56);
		make_finite(p, type, (size_t)n_bytes);
		err = nf_gguf_writer_add_tensor(w, name, (nf_ggml_type)type, 2, ne, p, n_bytes);
		free(p);
		if (err)
			return err;
	}
	return 0;
}

/* One key of every value type, and arrays of numbers and strings. */
static int add_every_key(nf_gguf_writer *w)
{
	uint8_t u8 = 200;
	int8_t i8 = -100;
	uint16_t u16 = 60000;
	int16_t i16 = -30000;
	int64_t i64 = -5000000000ll;
	double f64 = 0.1;
	int32_t ai[4] = {-1, 0, 1, 2147483647};
	float af[3] = {0.5f, -2.25f, 1e-7f};
	const char *as[4] = {"a", "tab\there", "new\nline", "\xc3\xa9t\xc3\xa9"};
	int err = 0;
	if (!err) err = nf_gguf_writer_add_scalar(w, "t.u8", NF_GGUF_U8, &u8);
	if (!err) err = nf_gguf_writer_add_scalar(w, "t.i8", NF_GGUF_I8, &i8);
	if (!err) err = nf_gguf_writer_add_scalar(w, "t.u16", NF_GGUF_U16, &u16);
	if (!err) err = nf_gguf_writer_add_scalar(w, "t.i16", NF_GGUF_I16, &i16);
	if (!err) err = nf_gguf_writer_add_u32(w, "t.u32", 4000000000u);
	if (!err) err = nf_gguf_writer_add_i32(w, "t.i32", -2000000000);
	if (!err) err = nf_gguf_writer_add_f32(w, "t.f32", 3.14159265f);
	if (!err) err = nf_gguf_writer_add_bool(w, "t.bool", true);
	if (!err) err = nf_gguf_writer_add_str(w, "t.string", "h\\ello", 6);
	if (!err) err = nf_gguf_writer_add_u64(w, "t.u64", 18000000000000000000ull);
	if (!err) err = nf_gguf_writer_add_scalar(w, "t.i64", NF_GGUF_I64, &i64);
	if (!err) err = nf_gguf_writer_add_scalar(w, "t.f64", NF_GGUF_F64, &f64);
	if (!err) err = nf_gguf_writer_add_array(w, "t.ai32", NF_GGUF_I32, ai, 4);
	if (!err) err = nf_gguf_writer_add_array(w, "t.af32", NF_GGUF_F32, af, 3);
	if (!err) err = nf_gguf_writer_add_str_array(w, "t.astr", as, 4);
	return err;
}

static int cmd_random(const char *out, const char *seed_s)
{
	uint64_t seed;
	nf_gguf_writer *w = NULL;
	int err = nf_parse_u64(&seed, seed_s, UINT64_MAX, "seed");
	if (!err)
		err = nf_gguf_writer_new(&w);
	if (!err)
		err = nf_gguf_writer_add_str(w, "general.architecture", "random", 6);
	if (!err)
		err = add_every_key(w);
	if (!err)
		err = add_random_tensors(w, seed);
	if (!err)
		err = nf_gguf_writer_write(w, out);
	nf_gguf_writer_free(w);
	return err;
}

/* ----------------------------------------------------------- fuzz seeds */

static int write_seed(nf_gguf_writer *w, const char *dir, const char *name)
{
	char *path = nf_path_join(dir, name);
	int err = path ? nf_gguf_writer_write(w, path) : nf_error_set(NF_ENOMEM, "out of memory");
	free(path);
	return err;
}

/* Small files that reach each part of the reader: keys of every type, one
 * tensor of each type, nested arrays, v2, and a 64-byte alignment. */
static int cmd_seeds(const char *dir)
{
	nf_gguf_writer *w = NULL;
	static const uint8_t nested[] = {9, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, /* array of 2 arrays */
					 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0,
					 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 'x'};
	uint64_t seed = 1;
	int err = nf_fs_mkdir_p(dir, 0755);
	if (!err && !(err = nf_gguf_writer_new(&w)) && !(err = add_every_key(w)) &&
	    !(err = nf_gguf_writer_add_raw(w, "t.nested", NF_GGUF_ARRAY, nested, sizeof(nested))))
		err = write_seed(w, dir, "keys.gguf");
	nf_gguf_writer_free(w);
	w = NULL;
	if (!err && !(err = nf_gguf_writer_new(&w))) {
		for (uint32_t type = 0; !err && type < 64; type++) {
			uint64_t ne[1] = {nf_ggml_block_elems(type)}, n_bytes = nf_ggml_block_bytes(type);
			uint8_t block[256];
			if (!ne[0])
				continue;
			for (size_t i = 0; i < n_bytes; i++)
				block[i] = (uint8_t)(nf_test_rng(&seed) >> 56);
			make_finite(block, type, (size_t)n_bytes);
			err = nf_gguf_writer_add_tensor(w, nf_ggml_type_name(type), (nf_ggml_type)type, 1,
							ne, block, n_bytes);
		}
		if (!err)
			err = write_seed(w, dir, "tensors.gguf");
	}
	nf_gguf_writer_free(w);
	w = NULL;
	if (!err && !(err = nf_gguf_writer_new(&w))) {
		uint64_t ne[2] = {32, 2};
		uint8_t q[68] = {0};
		nf_gguf_writer_set_version(w, 2);
		err = nf_gguf_writer_add_u32(w, "general.alignment", 64);
		if (!err)
			err = nf_gguf_writer_add_tensor(w, "a", NF_GGML_Q8_0, 2, ne, q, sizeof(q));
		if (!err)
			err = nf_gguf_writer_add_tensor(w, "b", NF_GGML_Q8_0, 2, ne, q, sizeof(q));
		if (!err)
			err = write_seed(w, dir, "v2_align64.gguf");
	}
	nf_gguf_writer_free(w);
	return err;
}

static int usage(void)
{
	fputs("usage: nf_gguf_tool kv|tensors|bench FILE | dequant FILE TENSOR | "
	      "random OUT SEED | seeds DIR\n", stderr);
	return 2;
}

static int run_on_file(const char *cmd, const char *path, const char *arg)
{
	nf_gguf *g = NULL;
	int err = nf_gguf_open(&g, path);
	if (err)
		return err;
	if (strcmp(cmd, "kv") == 0)
		err = cmd_kv(g);
	else if (strcmp(cmd, "tensors") == 0)
		err = cmd_tensors(g);
	else if (strcmp(cmd, "bench") == 0)
		err = cmd_bench(g);
	else
		err = cmd_dequant(g, arg);
	nf_gguf_free(g);
	return err;
}

int main(int argc, char **argv)
{
	int err;
	if (argc == 3 && strcmp(argv[1], "seeds") == 0)
		err = cmd_seeds(argv[2]);
	else if (argc == 4 && strcmp(argv[1], "random") == 0)
		err = cmd_random(argv[2], argv[3]);
	else if ((argc == 3 && (strcmp(argv[1], "kv") == 0 || strcmp(argv[1], "tensors") == 0 ||
				strcmp(argv[1], "bench") == 0)) ||
		 (argc == 4 && strcmp(argv[1], "dequant") == 0))
		err = run_on_file(argv[1], argv[2], argc == 4 ? argv[3] : NULL);
	else
		return usage();
	if (fflush(stdout) != 0 && !err)
		err = nf_error_set(NF_EIO, "stdout: write failed");
	if (err) {
		fprintf(stderr, "nf_gguf_tool: %s\n", nf_error_last());
		return nf_error_exit_status(err);
	}
	return 0;
}
