/*
 * nf_gemv_bench - throughput of one kernel family's GEMV/GEMM on one weight
 * kind, against the memory-bandwidth ceiling of nf_membw:
 *
 *   nf_gemv_bench --kind f32|int8|f16|bf16 [--rows R] [--cols C] [--n N]
 *                 [--kernel FAMILY] [--threads T] [--runs K]
 *
 * Builds a random (R, C) matrix of that kind (default 8192 x 4096, far
 * larger than any cache), then times K passes (default 20, after one to
 * warm up) of y = W x over all rows for N activation vectors (default 1:
 * decode), rows shared among T threads (default 2) of an nf_pool as the
 * forward pass shares them.  Prints the best pass:
 *
 *   kind=<k> kernel=<family> rows=<R> cols=<C> n=<N> threads=<T> gb_s=<x> gflops=<y>
 *
 * gb_s is the matrix's bytes (weights and per-row scales) read per second
 * (GB = 1e9 bytes), gflops 2*R*C*N / seconds / 1e9.  Each weight kind is
 * one entry of `kinds` (how it packs, how it runs).  Exit 0, 2 on bad
 * arguments or a family this CPU lacks, 4 when memory or threads cannot be
 * had.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/cpu/cpu.h"
#include "engine/forward.h"
#include "engine/quant.h"
#include "tests/rng.h"
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
	nf_bk_matrix m;
	size_t n, cols;
	float *x;      /* (n, cols) */
	int8_t *xq;    /* (n, ldq) int8 activations of the int8 kinds */
	size_t ldq;
	float xs[MAX_N];
	float *y;      /* (n, rows) */
	void *owned[4]; /* what pack allocated */
} bench;

typedef struct gemv_kind {
	const char *name;
	/* Pack the (rows, cols) floats *w into b->m (a kind that reads the
	 * floats themselves takes them over: *w = NULL); returns the bytes a
	 * pass reads (0 on failure, the error set). */
	size_t (*pack)(bench *b, float **w, size_t rows, size_t cols);
	/* y = W x over rows [r0, r1). */
	void (*run)(const bench *b, int r0, int r1);
} gemv_kind;

static size_t pack_f32(bench *b, float **w, size_t rows, size_t cols)
{
	b->m.kind = NF_QUANT_NONE;
	b->m.f32 = *w;
	b->owned[0] = *w;
	*w = NULL;
	return rows * cols * sizeof(float);
}

static void run_f32(const bench *b, int r0, int r1)
{
	b->ops->gemm_f32(b->y, (size_t)b->m.rows, &b->m, b->x, b->cols, b->n, r0, r1, 0);
}

static size_t pack_int8(bench *b, float **w, size_t rows, size_t cols)
{
	int8_t *q = malloc(rows * cols);
	float *scale = malloc(rows * sizeof(float));
	int32_t *rowsum = malloc(rows * sizeof(int32_t));
	b->ldq = (cols + NF_BK_QPAD - 1) / NF_BK_QPAD * NF_BK_QPAD;
	b->xq = calloc(b->n, b->ldq);
	b->owned[0] = q, b->owned[1] = scale, b->owned[2] = rowsum, b->owned[3] = b->xq;
	if (!q || !scale || !rowsum || !b->xq) {
		nf_error_set(NF_ENOMEM, "out of memory for the int8 matrix");
		return 0;
	}
	nf_quant_int8_rows(q, scale, *w, rows, cols);
	nf_quant_int8_rowsums(rowsum, q, rows, cols);
	for (size_t i = 0; i < b->n; i++)
		b->xs[i] = nf_quant_int8_vec(b->xq + i * b->ldq, b->x + i * cols, cols);
	b->m.kind = NF_QUANT_INT8_ROW;
	b->m.q8 = q;
	b->m.scale = scale;
	b->m.rowsum = rowsum;
	return rows * cols + rows * (sizeof(float) + sizeof(int32_t));
}

static void run_int8(const bench *b, int r0, int r1)
{
	b->ops->gemm_q8(b->y, (size_t)b->m.rows, &b->m, b->xq, b->ldq, b->xs, b->n, r0, r1, 0);
}

static size_t pack_h16(bench *b, float **w, size_t rows, size_t cols, nf_quant_kind kind)
{
	uint16_t *h = malloc(rows * cols * sizeof(uint16_t));
	b->owned[0] = h;
	if (!h) {
		nf_error_set(NF_ENOMEM, "out of memory for the 16-bit matrix");
		return 0;
	}
	if (nf_quant_h16(h, *w, rows * cols, kind) != 0)
		return 0;
	b->m.kind = kind;
	b->m.h16 = h;
	return rows * cols * sizeof(uint16_t);
}

static size_t pack_f16(bench *b, float **w, size_t rows, size_t cols)
{
	return pack_h16(b, w, rows, cols, NF_QUANT_F16);
}

static size_t pack_bf16(bench *b, float **w, size_t rows, size_t cols)
{
	return pack_h16(b, w, rows, cols, NF_QUANT_BF16);
}

static void run_h16(const bench *b, int r0, int r1)
{
	b->ops->gemm_h16(b->y, (size_t)b->m.rows, &b->m, b->x, b->cols, b->n, r0, r1, 0);
}

static const gemv_kind kinds[] = {
	{"f32", pack_f32, run_f32},
	{"int8", pack_int8, run_int8},
	{"f16", pack_f16, run_h16},
	{"bf16", pack_bf16, run_h16},
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
	int r1 = u1 * NF_FWD_UNIT_ROWS;
	(void)tid;
	b->kind->run(b, u0 * NF_FWD_UNIT_ROWS, r1 < b->m.rows ? r1 : b->m.rows);
}

typedef struct options {
	const char *kind, *kernel;
	long rows, cols, n, threads, runs;
} options;

static int usage(void)
{
	fprintf(stderr, "usage: nf_gemv_bench --kind f32|int8|f16|bf16 [--rows R] [--cols C] [--n N]\n"
			"                     [--kernel FAMILY] [--threads T] [--runs K]\n");
	return NF_EXIT_INPUT;
}

/* 0, NF_EINPUT with the error set, or 1 for a usage error. */
static int parse_args(options *o, int argc, char **argv)
{
	*o = (options){NULL, NULL, 8192, 4096, 1, 2, 20};
	for (int i = 1; i < argc; i++) {
		const char *name = argv[i];
		long *dst = NULL, max = 0;
		if (i + 1 >= argc)
			return 1;
		if (strcmp(name, "--kind") == 0)
			o->kind = argv[++i];
		else if (strcmp(name, "--kernel") == 0)
			o->kernel = argv[++i];
		else if (strcmp(name, "--rows") == 0)
			dst = &o->rows, max = 1L << 20;
		else if (strcmp(name, "--cols") == 0)
			dst = &o->cols, max = 1L << 20;
		else if (strcmp(name, "--n") == 0)
			dst = &o->n, max = MAX_N;
		else if (strcmp(name, "--threads") == 0)
			dst = &o->threads, max = 256;
		else if (strcmp(name, "--runs") == 0)
			dst = &o->runs, max = 100000;
		else
			return 1;
		int err;
		if (dst && (err = nf_parse_long(dst, argv[++i], 1, max, name)))
			return err;
	}
	return o->kind ? 0 : 1;
}

/* The random matrix (uniform, |w| < 0.05) and activations of b. */
static int fill_random(float **w, bench *b, size_t rows, size_t cols)
{
	size_t nw, nx;
	if (!nf_size_mul(&nw, rows, cols) || !nf_size_mul(&nx, b->n, cols) ||
	    !nf_size_mul(&nw, nw, sizeof(float)))
		return nf_error_set(NF_EINPUT, "matrix of %zu x %zu is too large", rows, cols);
	*w = malloc(nw);
	b->x = malloc(nx * sizeof(float));
	b->y = malloc(b->n * rows * sizeof(float));
	if (!*w || !b->x || !b->y)
		return nf_error_set(NF_ENOMEM, "out of memory for a %zu x %zu matrix", rows, cols);
	uint64_t seed = 1;
	for (size_t i = 0; i < rows * cols; i++)
		(*w)[i] = nf_test_unif(&seed, 0.05);
	for (size_t i = 0; i < nx; i++)
		b->x[i] = nf_test_unif(&seed, 1.0);
	return 0;
}

/* The best of `runs` passes (after one to warm up), in seconds. */
static double best_pass(nf_pool *pool, bench *b, long runs)
{
	int units = (b->m.rows + NF_FWD_UNIT_ROWS - 1) / NF_FWD_UNIT_ROWS;
	double best = 1e30;
	for (long r = 0; r <= runs; r++) {
		double t0 = now_s();
		nf_pool_run_ranges(pool, run_range, b, units, NF_FWD_GRAIN);
		double t = now_s() - t0;
		if (r > 0 && t < best)
			best = t;
	}
	return best;
}

int main(int argc, char **argv)
{
	options o;
	bench b = {0};
	float *w = NULL;
	nf_pool *pool = NULL;
	int err = parse_args(&o, argc, argv);
	if (err == 1)
		return usage();
	if (err)
		goto done;
	if (!(b.kind = find_kind(o.kind))) {
		err = nf_error_set(NF_EINPUT, "unknown --kind %s", o.kind);
		goto done;
	}
	b.ops = o.kernel ? nf_cpu_find(o.kernel) : nf_cpu_best();
	if (!b.ops) {
		err = nf_error_set(NF_EINPUT, "kernel family %s is unknown or this CPU lacks it", o.kernel);
		goto done;
	}
	b.n = (size_t)o.n;
	b.cols = (size_t)o.cols;
	b.m = (nf_bk_matrix){.rows = (int)o.rows, .cols = (int)o.cols, .layout = NF_BK_ROWS};
	if ((err = fill_random(&w, &b, (size_t)o.rows, (size_t)o.cols)))
		goto done;
	size_t bytes = b.kind->pack(&b, &w, (size_t)o.rows, (size_t)o.cols);
	if (!bytes) {
		err = nf_error_last_code();
		goto done;
	}
	free(w); /* only the packed matrix stays in memory */
	w = NULL;
	if ((err = nf_pool_new(&pool, (int)o.threads)))
		goto done;
	double secs = best_pass(pool, &b, o.runs);
	printf("kind=%s kernel=%s rows=%ld cols=%ld n=%ld threads=%ld gb_s=%.2f gflops=%.2f\n",
	       b.kind->name, b.ops->name, o.rows, o.cols, o.n, o.threads, (double)bytes / secs / 1e9,
	       2.0 * (double)o.rows * (double)o.cols * (double)o.n / secs / 1e9);
done:
	if (err)
		fprintf(stderr, "nf_gemv_bench: %s\n", nf_error_last());
	nf_pool_free(pool);
	for (size_t i = 0; i < 4; i++)
		free(b.owned[i]);
	free(w);
	free(b.x);
	free(b.y);
	return err ? nf_error_exit_status(err) : 0;
}
