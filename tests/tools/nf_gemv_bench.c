/*
 * nf_gemv_bench - throughput of one kernel family's GEMV/GEMM on one weight
 * kind, against the memory-bandwidth ceiling of nf_membw:
 *
 *   nf_gemv_bench --kind f32|int8|f16|bf16|int4|int4-g128|fp8 [--rows R] [--cols C]
 *                 [--n N] [--kernel FAMILY] [--threads T] [--runs K] [--mb M]
 *
 * Builds a random (R, C) matrix of that kind (default 8192 x 4096) and
 * stores it in as many copies as make M MiB (default 1024, as nf_membw
 * reads), so that the passes read memory, not a last-level cache (260 MiB
 * on some of our hosts).  A pass computes y = W x for N activation vectors
 * (default 1: decode) with each copy in turn, as a decode step reads layer
 * after layer, the rows of each shared among T threads (default 2) of an
 * nf_pool as the forward pass shares them.  Times K passes (default 5,
 * after one to warm up; like nf_membw's, each reads about M MiB, so that a
 * quiet moment of a shared host flatters neither) and prints the best:
 *
 *   kind=<k> kernel=<family> rows=<R> cols=<C> n=<N> threads=<T> gb_s=<x> gflops=<y>
 *
 * gb_s is the matrix's bytes (weights and their per-row or per-group
 * scales) read per second (GB = 1e9 bytes), gflops 2*R*C*N / seconds / 1e9.
 * Each weight kind is one entry of `kinds` (its bytes, how it packs; the
 * GEMM goes through engine/gemm.h as the forward pass's do).  int4 is in
 * groups of 32 columns; fp8 activations get one static scale, their max /
 * 448.  Exit 0; 2 on bad arguments, a family this CPU lacks or one without
 * a kernel for the kind; 4 when memory or threads cannot be had.
 */
#define _GNU_SOURCE /* MADV_HUGEPAGE */
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/cpu/cpu.h"
#include "engine/forward.h"
#include "engine/gemm.h"
#include "engine/quant.h"
#include "tests/rng.h"
#include "tests/tools/long_opts.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/banned.h"

#define MAX_N 64

/* The matrix, its activations and what a pass needs; each kind fills the
 * parts it uses. */
typedef struct bench {
	const struct gemv_kind *kind;
	const nf_backend_ops *ops;
	nf_bk_matrix m; /* the copies, one under the other */
	size_t n, cols, rows, copies;
	int base;       /* first row of the copy this pass reads */
	float *x;      /* (n, cols) */
	int8_t *xq;    /* (n, ldq) int8 activations of the int8 and int4 kinds */
	size_t ldq;
	float xs[MAX_N];
	float *x8;     /* (n, cols) activations on the e4m3 grid (fp8) */
	float *y;      /* (n, copies * rows) */
	void *owned[3]; /* the matrix's buffers */
} bench;

typedef struct gemv_kind {
	const char *name;
	nf_quant_kind kind;
	/* Bytes of one packed (rows, cols) matrix: what a pass reads. */
	size_t (*bytes)(size_t rows, size_t cols);
	/* Pack the b->rows x b->cols floats w into b->copies copies of b->m;
	 * 0 or an error. */
	int (*pack)(bench *b, const float *w);
} gemv_kind;

/* Weights as the engine keeps them, on 2 MiB pages (engine.c): with 4 KiB
 * pages the TLB misses would be measured too.  NULL when out of memory. */
static void *alloc_weights(size_t bytes)
{
	void *p = NULL;
	if (bytes == 0 || posix_memalign(&p, (size_t)2 << 20, bytes) != 0)
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE);
	return p;
}

/* Copy the first of `copies` arrays of `one` bytes at buf into the others. */
static void replicate(void *buf, size_t one, size_t copies)
{
	for (size_t i = 1; i < copies; i++)
		memcpy((char *)buf + i * one, buf, one);
}

static size_t bytes_f32(size_t rows, size_t cols)
{
	return rows * cols * sizeof(float);
}

static int pack_f32(bench *b, const float *w)
{
	size_t one = bytes_f32(b->rows, b->cols);
	float *f = alloc_weights(one * b->copies);
	b->owned[0] = f;
	if (!f)
		return nf_error_set(NF_ENOMEM, "out of memory for the float32 matrix");
	memcpy(f, w, one);
	replicate(f, one, b->copies);
	b->m.kind = NF_QUANT_NONE;
	b->m.f32 = f;
	return 0;
}

/* The int8 activations of b (rows padded to NF_BK_QPAD), as the int8 and
 * int4 kernels take them. */
static int prepare_q8(bench *b)
{
	b->ldq = (b->cols + NF_BK_QPAD - 1) / NF_BK_QPAD * NF_BK_QPAD;
	b->xq = calloc(b->n, b->ldq);
	if (!b->xq)
		return nf_error_set(NF_ENOMEM, "out of memory for the activations");
	nf_bk_prepare_q8(b->ops, b->xq, b->ldq, b->xs, b->x, b->cols, b->cols, b->n);
	return 0;
}

static size_t bytes_int8(size_t rows, size_t cols)
{
	return rows * cols + rows * (sizeof(float) + sizeof(int32_t));
}

static int pack_int8(bench *b, const float *w)
{
	size_t rows = b->rows, cols = b->cols, k = b->copies;
	int8_t *q = alloc_weights(rows * cols * k);
	float *scale = malloc(rows * k * sizeof(float));
	int32_t *rowsum = malloc(rows * k * sizeof(int32_t));
	b->owned[0] = q, b->owned[1] = scale, b->owned[2] = rowsum;
	if (!q || !scale || !rowsum)
		return nf_error_set(NF_ENOMEM, "out of memory for the int8 matrix");
	int err = prepare_q8(b);
	if (err)
		return err;
	nf_quant_int8_rows(q, scale, w, rows, cols);
	nf_quant_int8_rowsums(rowsum, q, rows, cols);
	replicate(q, rows * cols, k);
	replicate(scale, rows * sizeof(float), k);
	replicate(rowsum, rows * sizeof(int32_t), k);
	b->m.kind = NF_QUANT_INT8_ROW;
	b->m.q8 = q;
	b->m.scale = scale;
	b->m.rowsum = rowsum;
	return 0;
}

/* int4 at group 32 (int4-wo, a GGUF's Q4 blocks) and 128 (int4-awq): the
 * nibbles and the scales and mins, both read by a pass. */
static size_t bytes_int4_group(size_t rows, size_t cols, int group)
{
	return rows * cols / 2 + rows * nf_quant_int4_groups(cols, group) * 2 * sizeof(uint16_t);
}

static size_t bytes_int4(size_t rows, size_t cols) { return bytes_int4_group(rows, cols, 32); }
static size_t bytes_int4_g128(size_t rows, size_t cols) { return bytes_int4_group(rows, cols, 128); }

static int pack_int4_group(bench *b, const float *w, int group)
{
	size_t rows = b->rows, cols = b->cols, k = b->copies;
	size_t groups = nf_quant_int4_groups(cols, group);
	uint8_t *q4 = alloc_weights(rows * cols / 2 * k);
	uint16_t *gsm = malloc(rows * groups * 2 * sizeof(uint16_t) * k);
	b->owned[0] = q4, b->owned[1] = gsm;
	if (!q4 || !gsm)
		return nf_error_set(NF_ENOMEM, "out of memory for the int4 matrix");
	int err = nf_quant_int4_rows(q4, gsm, w, rows, cols, group);
	if (err || (err = prepare_q8(b)))
		return err;
	replicate(q4, rows * cols / 2, k);
	replicate(gsm, rows * groups * 2 * sizeof(uint16_t), k);
	b->m.kind = NF_QUANT_INT4_GROUP;
	b->m.q4 = q4;
	b->m.gsm = gsm;
	b->m.group = group;
	return 0;
}

static int pack_int4(bench *b, const float *w) { return pack_int4_group(b, w, 32); }
static int pack_int4_g128(bench *b, const float *w) { return pack_int4_group(b, w, 128); }

static size_t bytes_fp8(size_t rows, size_t cols)
{
	return rows * cols + rows * sizeof(float);
}

/* e4m3 codes with a scale per row, and the activations put on the e4m3
 * grid of one static scale (max|x| / 448, what calibration would give), as
 * the forward pass hands them to gemm_f8. */
static int pack_fp8(bench *b, const float *w)
{
	size_t rows = b->rows, cols = b->cols, k = b->copies;
	uint8_t *f8 = alloc_weights(rows * cols * k);
	float *scale = malloc(rows * k * sizeof(float));
	b->x8 = malloc(b->n * cols * sizeof(float));
	b->owned[0] = f8, b->owned[1] = scale;
	if (!f8 || !scale || !b->x8)
		return nf_error_set(NF_ENOMEM, "out of memory for the fp8 matrix");
	int err = nf_quant_fp8_rows(f8, scale, w, rows, cols);
	if (err)
		return err;
	replicate(f8, rows * cols, k);
	replicate(scale, rows * sizeof(float), k);
	float amax = 0.0f;
	for (size_t i = 0; i < b->n * cols; i++)
		amax = b->x[i] > amax ? b->x[i] : -b->x[i] > amax ? -b->x[i] : amax;
	b->m.kind = NF_QUANT_FP8_E4M3;
	b->m.f8 = f8;
	b->m.scale = scale;
	b->m.act_scale = amax > 0.0f ? amax / 448.0f : 1.0f;
	b->m.f8_normal = nf_fp8_codes_normal(f8, rows * cols); /* as an engine's open finds */
	nf_bk_prepare_f8(b->ops, b->x8, b->x, cols, cols, b->n, b->m.act_scale);
	return 0;
}

static size_t bytes_h16(size_t rows, size_t cols)
{
	return rows * cols * sizeof(uint16_t);
}

static int pack_h16(bench *b, const float *w, nf_quant_kind kind)
{
	size_t one = bytes_h16(b->rows, b->cols);
	uint16_t *h = alloc_weights(one * b->copies);
	b->owned[0] = h;
	if (!h)
		return nf_error_set(NF_ENOMEM, "out of memory for the 16-bit matrix");
	int err = nf_quant_h16(h, w, b->rows * b->cols, kind);
	if (err)
		return err;
	replicate(h, one, b->copies);
	b->m.kind = kind;
	b->m.h16 = h;
	return 0;
}

static int pack_f16(bench *b, const float *w)
{
	return pack_h16(b, w, NF_QUANT_F16);
}

static int pack_bf16(bench *b, const float *w)
{
	return pack_h16(b, w, NF_QUANT_BF16);
}

/* y = W x over rows [r0, r1), by the kind's kernel (engine/gemm.h). */
static void run_any(const bench *b, int r0, int r1)
{
	nf_bk_acts a = {.x = b->x, .ldx = b->cols, .xq = b->xq, .ldq = b->ldq,
			.xs = b->xs, .x8 = b->x8};
	nf_bk_gemm(b->ops, &b->m, b->y, (size_t)b->m.rows, &a, b->n, r0, r1, 0);
}

static const gemv_kind kinds[] = {
	{"f32", NF_QUANT_NONE, bytes_f32, pack_f32},
	{"int8", NF_QUANT_INT8_ROW, bytes_int8, pack_int8},
	{"f16", NF_QUANT_F16, bytes_h16, pack_f16},
	{"bf16", NF_QUANT_BF16, bytes_h16, pack_bf16},
	{"int4", NF_QUANT_INT4_GROUP, bytes_int4, pack_int4},
	{"int4-g128", NF_QUANT_INT4_GROUP, bytes_int4_g128, pack_int4_g128},
	{"fp8", NF_QUANT_FP8_E4M3, bytes_fp8, pack_fp8},
};

static const gemv_kind *find_kind(const char *name)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(kinds[i].name, name) == 0)
			return &kinds[i];
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Units [u0, u1) of NF_FWD_UNIT_ROWS rows, as the forward pass splits them. */
static void run_range(void *ctx, int u0, int u1, int tid)
{
	const bench *b = ctx;
	int r1 = u1 * NF_FWD_UNIT_ROWS, rows = (int)b->rows;
	(void)tid;
	run_any(b, b->base + u0 * NF_FWD_UNIT_ROWS, b->base + (r1 < rows ? r1 : rows));
}

typedef struct options {
	const char *kind, *kernel;
	long rows, cols, n, threads, runs, mb;
} options;

static int usage(void)
{
	fprintf(stderr, "usage: nf_gemv_bench --kind f32|int8|f16|bf16|int4|int4-g128|fp8 [--rows R]\n"
			"                     [--cols C] [--n N] [--kernel FAMILY] [--threads T] [--runs K]\n"
			"                     [--mb M]\n");
	return NF_EXIT_INPUT;
}

/* 0, NF_EINPUT with the error set, or 1 for a usage error. */
static int parse_args(options *o, int argc, char **argv)
{
	*o = (options){NULL, NULL, 8192, 4096, 1, 2, 5, 1024};
	const long_opt nums[] = {{"--rows", &o->rows, 1L << 20}, {"--cols", &o->cols, 1L << 20},
				 {"--n", &o->n, MAX_N},           {"--threads", &o->threads, 256},
				 {"--runs", &o->runs, 100000},    {"--mb", &o->mb, 1L << 20}};
	for (int i = 1; i < argc; i++) {
		const char *name = argv[i];
		if (i + 1 >= argc)
			return 1;
		const long_opt *num = long_opt_find(nums, sizeof nums / sizeof nums[0], name);
		if (strcmp(name, "--kind") == 0)
			o->kind = argv[++i];
		else if (strcmp(name, "--kernel") == 0)
			o->kernel = argv[++i];
		else if (!num)
			return 1;
		int err;
		if (num && (err = nf_parse_long(num->dst, argv[++i], 1, num->max, name)))
			return err;
	}
	return o->kind ? 0 : 1;
}

/* How many copies of the matrix make `mb` MiB (at least 1), and the
 * matrix's shape for them; NF_EINPUT when they cannot be addressed. */
static int plan_copies(bench *b, const options *o)
{
	size_t one = b->kind->bytes(b->rows, b->cols), total;
	if (!nf_size_mul(&total, (size_t)o->mb, (size_t)1 << 20))
		return nf_error_set(NF_EINPUT, "--mb too large");
	b->copies = (total + one - 1) / one;
	if (b->copies < 1)
		b->copies = 1;
	size_t rows_all;
	if (!nf_size_mul(&rows_all, b->rows, b->copies) || rows_all > (size_t)NF_POOL_MAX_UNITS *
							    NF_FWD_UNIT_ROWS)
		return nf_error_set(NF_EINPUT, "%zu copies of %zu rows are too many rows", b->copies,
				    b->rows);
	b->m = (nf_bk_matrix){.rows = (int)rows_all, .cols = (int)b->cols, .layout = NF_BK_ROWS};
	return 0;
}

/* The random matrix w (uniform, |w| < 0.05, one copy's worth), the
 * activations and the outputs. */
static int fill_random(float **w, bench *b)
{
	size_t nw, nx, ny;
	if (!nf_size_mul3(&nw, b->rows, b->cols, sizeof(float)) ||
	    !nf_size_mul3(&nx, b->n, b->cols, sizeof(float)) ||
	    !nf_size_mul3(&ny, b->n, (size_t)b->m.rows, sizeof(float)))
		return nf_error_set(NF_EINPUT, "matrix of %zu x %zu is too large", b->rows, b->cols);
	*w = malloc(nw);
	b->x = malloc(nx);
	b->y = malloc(ny);
	if (!*w || !b->x || !b->y)
		return nf_error_set(NF_ENOMEM, "out of memory for a %zu x %zu matrix", b->rows,
				    b->cols);
	uint64_t seed = 1;
	for (size_t i = 0; i < b->rows * b->cols; i++)
		(*w)[i] = nf_test_unif(&seed, 0.05);
	for (size_t i = 0; i < b->n * b->cols; i++)
		b->x[i] = nf_test_unif(&seed, 1.0);
	return 0;
}

/* The best of `runs` passes over every copy (after one to warm up), in
 * seconds. */
static double best_pass(nf_pool *pool, bench *b, long runs)
{
	int units = (int)((b->rows + NF_FWD_UNIT_ROWS - 1) / NF_FWD_UNIT_ROWS);
	double best = 1e30;
	for (long r = 0; r <= runs; r++) {
		double t0 = now_s();
		for (size_t c = 0; c < b->copies; c++) {
			b->base = (int)(c * b->rows);
			nf_pool_run_ranges(pool, run_range, b, units, NF_FWD_GRAIN);
		}
		double t = now_s() - t0;
		if (r > 0 && t < best)
			best = t;
	}
	return best;
}

/* Everything up to the timing: the kind, the family, the packed copies. */
static int setup(bench *b, const options *o)
{
	float *w = NULL;
	int err;
	if (!(b->kind = find_kind(o->kind)))
		return nf_error_set(NF_EINPUT, "unknown --kind %s", o->kind);
	b->ops = o->kernel ? nf_cpu_find(o->kernel) : nf_cpu_best();
	if (!b->ops)
		return nf_error_set(NF_EINPUT, "kernel family %s is unknown or this CPU lacks it",
				    o->kernel);
	if (!nf_bk_has_kernel(b->ops, b->kind->kind))
		return nf_error_set(NF_EUNSUPPORTED, "kernel family %s has no %s kernel",
				    b->ops->name, b->kind->name);
	b->n = (size_t)o->n;
	b->rows = (size_t)o->rows;
	b->cols = (size_t)o->cols;
	if (!(err = plan_copies(b, o)) && !(err = fill_random(&w, b)))
		err = b->kind->pack(b, w);
	free(w); /* only the packed copies stay in memory */
	return err;
}

int main(int argc, char **argv)
{
	options o;
	bench b = {0};
	nf_pool *pool = NULL;
	int err = parse_args(&o, argc, argv);
	if (err == 1)
		return usage();
	if (err || (err = setup(&b, &o)) || (err = nf_pool_new(&pool, (int)o.threads)))
		goto done;
	double secs = best_pass(pool, &b, o.runs) / (double)b.copies; /* per matrix */
	size_t bytes = b.kind->bytes(b.rows, b.cols);
	printf("kind=%s kernel=%s rows=%ld cols=%ld n=%ld threads=%ld gb_s=%.2f gflops=%.2f\n",
	       b.kind->name, b.ops->name, o.rows, o.cols, o.n, o.threads, (double)bytes / secs / 1e9,
	       2.0 * (double)o.rows * (double)o.cols * (double)o.n / secs / 1e9);
done:
	if (err)
		fprintf(stderr, "nf_gemv_bench: %s\n", nf_error_last());
	nf_pool_free(pool);
	for (size_t i = 0; i < 3; i++)
		free(b.owned[i]);
	free(b.xq);
	free(b.x8);
	free(b.x);
	free(b.y);
	return err ? nf_error_exit_status(err) : 0;
}
