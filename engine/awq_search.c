/*
 * awq_search.c - AWQ's grid search for one group of matrices that share an
 * input (awq.h): the scales of an exponent, and the output error of each
 * exponent on the sampled input rows, one exponent per pool chunk.
 */
#include "engine/awq.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

/* Rows quantized at a time: the fakequant sees whole rows, and a thread's
 * blocks stay small whatever the matrix. */
#define BLOCK_ROWS 64
/* A pool chunk is one alpha over a slice of this many of the group's rows
 * (its matrices one after the other): enough chunks to keep 16 threads
 * busy on a small model's group, each still mostly block products.  Fixed,
 * not from the thread count, so the partial errors add up in the same
 * order, and pick the same alpha, on any number of threads. */
#define SLICE_ROWS (4 * BLOCK_ROWS)

void nf_awq_scales(float *s, const float *mean_abs, size_t n, float alpha)
{
	float top = 0.0f;
	for (size_t c = 0; c < n; c++)
		top = fmaxf(top, mean_abs[c]);
	if (alpha == 0.0f || !(top > 0.0f)) {
		for (size_t c = 0; c < n; c++)
			s[c] = 1.0f;
		return;
	}
	/* a channel that never fired would get scale 0 (and 1/s = inf) */
	float floor = top * 1e-6f, lo = INFINITY, hi = 0.0f;
	for (size_t c = 0; c < n; c++) {
		s[c] = powf(fmaxf(mean_abs[c], floor), alpha);
		lo = fminf(lo, s[c]);
		hi = fmaxf(hi, s[c]);
	}
	/* centre the scales on 1 (geometric mean of the extremes) so W diag(s)
	 * keeps the magnitude of W */
	float norm = sqrtf(lo * hi);
	for (size_t c = 0; c < n; c++)
		s[c] /= norm;
}

/* y (nb, n_x) = q (nb, cols) xt, xt the sample's rows transposed (cols,
 * n_x).  Every output is a sum over c in order, each term a multiply then
 * an add (never a fused multiply-add), from +0: the definition below.  The
 * SIMD versions compute exactly that, several outputs of a row at once, so
 * every instruction set gives the same bits: the same calibration picks the
 * same alpha, and writes the same engine, on any host. */
static void outputs_from(float *y, const float *q, const float *xt, size_t nb, size_t cols,
			 size_t n_x, size_t b0)
{
	for (size_t r = 0; r < nb; r++)
		for (size_t b = b0; b < n_x; b++) {
			float acc = 0.0f;
			for (size_t c = 0; c < cols; c++)
				acc += q[r * cols + c] * xt[c * n_x + b];
			y[r * n_x + b] = acc;
		}
}

static void outputs_scalar(float *y, const float *q, const float *xt, size_t nb, size_t cols,
			   size_t n_x)
{
	outputs_from(y, q, xt, nb, cols, n_x, 0);
}

#define AWQ_AVX2 __attribute__((target("avx2")))
#define AWQ_AVX512 __attribute__((target("avx512f")))

/* Two rows by four vectors of outputs a step (eight independent sums keep
 * both add ports busy; each x load serves two rows), then one vector, then
 * the scalar tail. */
AWQ_AVX2 static void outputs_avx2(float *y, const float *q, const float *xt, size_t nb,
				  size_t cols, size_t n_x)
{
	size_t b4 = n_x / 32 * 32, b1 = n_x / 8 * 8;
	for (size_t r = 0; r < nb; r += 2) {
		const float *w0 = q + r * cols, *w1 = r + 1 < nb ? w0 + cols : w0;
		float *y0 = y + r * n_x, *y1 = r + 1 < nb ? y0 + n_x : y0;
		for (size_t b = 0; b < b4; b += 32) {
			__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
			__m256 c0 = a0, c1 = a0, c2 = a0, c3 = a0;
			for (size_t c = 0; c < cols; c++) {
				const float *x = xt + c * n_x + b;
				__m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
				__m256 x2 = _mm256_loadu_ps(x + 16), x3 = _mm256_loadu_ps(x + 24);
				__m256 u = _mm256_set1_ps(w0[c]), v = _mm256_set1_ps(w1[c]);
				a0 = _mm256_add_ps(a0, _mm256_mul_ps(u, x0));
				a1 = _mm256_add_ps(a1, _mm256_mul_ps(u, x1));
				a2 = _mm256_add_ps(a2, _mm256_mul_ps(u, x2));
				a3 = _mm256_add_ps(a3, _mm256_mul_ps(u, x3));
				c0 = _mm256_add_ps(c0, _mm256_mul_ps(v, x0));
				c1 = _mm256_add_ps(c1, _mm256_mul_ps(v, x1));
				c2 = _mm256_add_ps(c2, _mm256_mul_ps(v, x2));
				c3 = _mm256_add_ps(c3, _mm256_mul_ps(v, x3));
			}
			/* row r + 1 first: for an odd last row y1 == y0 and row r wins */
			_mm256_storeu_ps(y1 + b, c0);
			_mm256_storeu_ps(y1 + b + 8, c1);
			_mm256_storeu_ps(y1 + b + 16, c2);
			_mm256_storeu_ps(y1 + b + 24, c3);
			_mm256_storeu_ps(y0 + b, a0);
			_mm256_storeu_ps(y0 + b + 8, a1);
			_mm256_storeu_ps(y0 + b + 16, a2);
			_mm256_storeu_ps(y0 + b + 24, a3);
		}
		for (size_t b = b4; b < b1; b += 8) {
			__m256 a0 = _mm256_setzero_ps(), c0 = a0;
			for (size_t c = 0; c < cols; c++) {
				__m256 x0 = _mm256_loadu_ps(xt + c * n_x + b);
				a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_set1_ps(w0[c]), x0));
				c0 = _mm256_add_ps(c0, _mm256_mul_ps(_mm256_set1_ps(w1[c]), x0));
			}
			_mm256_storeu_ps(y1 + b, c0);
			_mm256_storeu_ps(y0 + b, a0);
		}
	}
	outputs_from(y, q, xt, nb, cols, n_x, b1);
}

/* outputs_avx2's steps with 16-float vectors. */
AWQ_AVX512 static void outputs_avx512(float *y, const float *q, const float *xt, size_t nb,
				      size_t cols, size_t n_x)
{
	size_t b4 = n_x / 64 * 64, b1 = n_x / 16 * 16;
	for (size_t r = 0; r < nb; r += 2) {
		const float *w0 = q + r * cols, *w1 = r + 1 < nb ? w0 + cols : w0;
		float *y0 = y + r * n_x, *y1 = r + 1 < nb ? y0 + n_x : y0;
		for (size_t b = 0; b < b4; b += 64) {
			__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
			__m512 c0 = a0, c1 = a0, c2 = a0, c3 = a0;
			for (size_t c = 0; c < cols; c++) {
				const float *x = xt + c * n_x + b;
				__m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
				__m512 x2 = _mm512_loadu_ps(x + 32), x3 = _mm512_loadu_ps(x + 48);
				__m512 u = _mm512_set1_ps(w0[c]), v = _mm512_set1_ps(w1[c]);
				a0 = _mm512_add_ps(a0, _mm512_mul_ps(u, x0));
				a1 = _mm512_add_ps(a1, _mm512_mul_ps(u, x1));
				a2 = _mm512_add_ps(a2, _mm512_mul_ps(u, x2));
				a3 = _mm512_add_ps(a3, _mm512_mul_ps(u, x3));
				c0 = _mm512_add_ps(c0, _mm512_mul_ps(v, x0));
				c1 = _mm512_add_ps(c1, _mm512_mul_ps(v, x1));
				c2 = _mm512_add_ps(c2, _mm512_mul_ps(v, x2));
				c3 = _mm512_add_ps(c3, _mm512_mul_ps(v, x3));
			}
			_mm512_storeu_ps(y1 + b, c0);
			_mm512_storeu_ps(y1 + b + 16, c1);
			_mm512_storeu_ps(y1 + b + 32, c2);
			_mm512_storeu_ps(y1 + b + 48, c3);
			_mm512_storeu_ps(y0 + b, a0);
			_mm512_storeu_ps(y0 + b + 16, a1);
			_mm512_storeu_ps(y0 + b + 32, a2);
			_mm512_storeu_ps(y0 + b + 48, a3);
		}
		for (size_t b = b4; b < b1; b += 16) {
			__m512 a0 = _mm512_setzero_ps(), c0 = a0;
			for (size_t c = 0; c < cols; c++) {
				__m512 x0 = _mm512_loadu_ps(xt + c * n_x + b);
				a0 = _mm512_add_ps(a0, _mm512_mul_ps(_mm512_set1_ps(w0[c]), x0));
				c0 = _mm512_add_ps(c0, _mm512_mul_ps(_mm512_set1_ps(w1[c]), x0));
			}
			_mm512_storeu_ps(y1 + b, c0);
			_mm512_storeu_ps(y0 + b, a0);
		}
	}
	outputs_from(y, q, xt, nb, cols, n_x, b1);
}

typedef void (*block_outputs_fn)(float *y, const float *q, const float *xt, size_t nb,
				 size_t cols, size_t n_x);

static block_outputs_fn block_outputs_for_cpu(void)
{
	if (nf_cpu_has(NF_CPU_AVX512F))
		return outputs_avx512;
	if (nf_cpu_has(NF_CPU_AVX2))
		return outputs_avx2;
	return outputs_scalar;
}

int nf_awq_outputs(nf_awq_isa isa, float *y, const float *q, const float *xt, size_t nb,
		   size_t cols, size_t n_x)
{
	static const struct {
		unsigned needs;
		block_outputs_fn fn;
	} isas[NF_AWQ_ISA_COUNT] = {
		[NF_AWQ_ISA_SCALAR] = {0, outputs_scalar},
		[NF_AWQ_ISA_AVX2] = {NF_CPU_AVX2, outputs_avx2},
		[NF_AWQ_ISA_AVX512] = {NF_CPU_AVX512F, outputs_avx512},
	};
	if ((unsigned)isa >= NF_AWQ_ISA_COUNT || !nf_cpu_has(isas[isa].needs))
		return nf_error_set(NF_EUNSUPPORTED, "awq: instruction set %d does not run here",
				    (int)isa);
	isas[isa].fn(y, q, xt, nb, cols, n_x);
	return 0;
}

/* One thread's blocks. */
typedef struct scratch {
	float *xt;   /* (cols, n_x) the rows divided by the scales, transposed */
	float *wblk; /* (BLOCK_ROWS, cols) W diag(s) */
	float *qblk; /* (BLOCK_ROWS, cols) its fake quantization */
	float *yblk; /* (BLOCK_ROWS, n_x) */
} scratch;

typedef struct search_job {
	const nf_awq_target *t;
	const nf_awq_opts *o;
	block_outputs_fn outputs;
	float **yref;         /* (n) W x of each matrix: (rows[i], n_x) */
	scratch *scr;         /* (threads) */
	float *scales;        /* (NF_AWQ_GRID, cols) */
	size_t slices;        /* of SLICE_ROWS rows of the group */
	double *err;          /* (NF_AWQ_GRID, slices) */
} search_job;

static float alpha_of(int i) { return (float)i / (float)(NF_AWQ_GRID - 1); }

static double squared_error(const float *y, const float *ref, size_t n)
{
	double e = 0.0;
	for (size_t i = 0; i < n; i++) {
		double d = (double)y[i] - (double)ref[i];
		e += d * d;
	}
	return e;
}

/* xt (cols, n_x) = x (n_x, cols) transposed, each column c divided by s[c]
 * (s NULL: as it is). */
static void transpose_scaled(float *xt, const float *x, const float *s, size_t n_x, size_t cols)
{
	for (size_t b = 0; b < n_x; b++)
		for (size_t c = 0; c < cols; c++)
			xt[c * n_x + b] = s ? x[b * cols + c] / s[c] : x[b * cols + c];
}

/* Error of rows [r0, r1) of matrix k with scales s, BLOCK_ROWS at a time. */
static double rows_error(const search_job *j, scratch *sc, size_t k, size_t r0, size_t r1,
			 const float *s)
{
	const nf_awq_target *t = j->t;
	size_t cols = t->cols;
	double e = 0.0;
	for (; r0 < r1; r0 += BLOCK_ROWS) {
		size_t nb = r1 - r0 < BLOCK_ROWS ? r1 - r0 : BLOCK_ROWS;
		const float *w = t->w[k] + r0 * cols;
		for (size_t r = 0; r < nb; r++)
			for (size_t c = 0; c < cols; c++)
				sc->wblk[r * cols + c] = w[r * cols + c] * s[c];
		j->o->fakequant(sc->qblk, sc->wblk, nb, cols, j->o->ctx);
		j->outputs(sc->yblk, sc->qblk, sc->xt, nb, cols, t->n_x);
		e += squared_error(sc->yblk, j->yref[k] + r0 * t->n_x, nb * t->n_x);
	}
	return e;
}

/* Pool chunk: the error of one alpha over one slice of the group's rows. */
static void eval_chunk(void *ctx, int chunk, int tid)
{
	search_job *j = ctx;
	const nf_awq_target *t = j->t;
	scratch *sc = &j->scr[tid];
	size_t i = (size_t)chunk / j->slices, slice = (size_t)chunk % j->slices;
	size_t g0 = slice * SLICE_ROWS, g1 = g0 + SLICE_ROWS, off = 0;
	const float *s = j->scales + i * t->cols;
	transpose_scaled(sc->xt, t->x, s, t->n_x, t->cols);
	double e = 0.0;
	for (size_t k = 0; k < t->n; off += t->rows[k], k++) {
		/* the slice's rows within matrix k */
		size_t r0 = g0 > off ? g0 - off : 0, r1 = g1 - off < t->rows[k] ? g1 - off : t->rows[k];
		if (g1 > off && r0 < r1)
			e += rows_error(j, sc, k, r0, r1, s);
	}
	j->err[i * j->slices + slice] = e;
}

/* The error of alpha i: its slices' errors, added in order. */
static double alpha_error(const search_job *j, size_t i)
{
	double e = 0.0;
	for (size_t slice = 0; slice < j->slices; slice++)
		e += j->err[i * j->slices + slice];
	return e;
}

static float *alloc_floats2(size_t a, size_t b, int *err)
{
	size_t n, bytes;
	float *p = NULL;
	if (*err)
		return NULL;
	if (!nf_size_mul(&n, a, b) || !nf_size_mul(&bytes, n ? n : 1, sizeof(float)) ||
	    !(p = malloc(bytes)))
		*err = nf_error_set(NF_ENOMEM, "awq: out of memory (%zu x %zu floats)", a, b);
	return p;
}

static int check_target(const nf_awq_target *t)
{
	if (t->n == 0 || t->n_x == 0 || t->cols == 0 || t->cols > NF_MODEL_MAX_HIDDEN)
		return nf_error_set(NF_EINPUT, "awq: empty group (%zu matrices, %zu rows, %zu columns)",
				    t->n, t->n_x, t->cols);
	if (t->n_x > (size_t)1 << 20)
		return nf_error_set(NF_EINPUT, "awq: %zu sampled rows are too many", t->n_x);
	for (size_t k = 0; k < t->n; k++)
		if (t->rows[k] == 0 || t->rows[k] > NF_MODEL_MAX_VOCAB)
			return nf_error_set(NF_EINPUT, "awq: matrix %zu has %zu rows", k, t->rows[k]);
	return 0;
}

static void job_release(search_job *j, int threads)
{
	for (size_t k = 0; j->yref && k < j->t->n; k++)
		free(j->yref[k]);
	free(j->yref);
	for (int i = 0; j->scr && i < threads; i++) {
		free(j->scr[i].xt);
		free(j->scr[i].wblk);
		free(j->scr[i].qblk);
		free(j->scr[i].yblk);
	}
	free(j->scr);
	free(j->scales);
	free(j->err);
}

/* The blocks of every thread and the reference outputs W x of the group. */
static int job_init(search_job *j, int threads)
{
	const nf_awq_target *t = j->t;
	int err = 0;
	j->yref = calloc(t->n, sizeof *j->yref);
	j->scr = calloc((size_t)threads, sizeof *j->scr);
	if (!j->yref || !j->scr)
		return nf_error_set(NF_ENOMEM, "awq: out of memory");
	size_t total = 0;
	for (size_t k = 0; k < t->n; k++)
		total += t->rows[k]; /* each at most NF_MODEL_MAX_VOCAB (check_target) */
	j->slices = (total + SLICE_ROWS - 1) / SLICE_ROWS;
	j->err = calloc(NF_AWQ_GRID * j->slices, sizeof *j->err);
	if (!j->err)
		return nf_error_set(NF_ENOMEM, "awq: out of memory");
	j->scales = alloc_floats2(NF_AWQ_GRID, t->cols, &err);
	for (int i = 0; i < NF_AWQ_GRID && !err; i++)
		nf_awq_scales(j->scales + (size_t)i * t->cols, t->mean_abs, t->cols, alpha_of(i));
	for (int i = 0; i < threads && !err; i++) {
		j->scr[i].xt = alloc_floats2(t->cols, t->n_x, &err);
		j->scr[i].wblk = alloc_floats2(BLOCK_ROWS, t->cols, &err);
		j->scr[i].qblk = alloc_floats2(BLOCK_ROWS, t->cols, &err);
		j->scr[i].yblk = alloc_floats2(BLOCK_ROWS, t->n_x, &err);
	}
	if (err)
		return err;
	/* the unscaled rows in thread 0's block, for the reference outputs */
	transpose_scaled(j->scr[0].xt, t->x, NULL, t->n_x, t->cols);
	for (size_t k = 0; k < t->n && !err; k++)
		if ((j->yref[k] = alloc_floats2(t->rows[k], t->n_x, &err)))
			j->outputs(j->yref[k], t->w[k], j->scr[0].xt, t->rows[k], t->cols, t->n_x);
	return err;
}

int nf_awq_search(nf_awq_choice *choice, float *scales, const nf_awq_target *t,
		  const nf_awq_opts *opts, nf_pool *pool)
{
	search_job j = {.t = t, .o = opts, .outputs = block_outputs_for_cpu()};
	int threads = pool ? nf_pool_threads(pool) : 1, err;
	if (!opts->fakequant)
		return nf_error_set(NF_EINPUT, "awq: no fake quantizer");
	if ((err = check_target(t)) || (err = job_init(&j, threads)))
		goto done;
	int chunks = (int)(NF_AWQ_GRID * j.slices);
	if (pool) {
		nf_pool_run_chunks(pool, eval_chunk, &j, chunks);
	} else {
		for (int c = 0; c < chunks; c++)
			eval_chunk(&j, c, 0);
	}
	/* strictly lower wins: on a tie the smaller alpha (the milder change) stays */
	int best = 0;
	double best_err = alpha_error(&j, 0);
	for (int i = 1; i < NF_AWQ_GRID; i++) {
		double e = alpha_error(&j, (size_t)i);
		if (e < best_err) {
			best = i;
			best_err = e;
		}
	}
	choice->alpha = alpha_of(best);
	choice->err_plain = alpha_error(&j, 0);
	choice->err_best = best_err;
	memcpy(scales, j.scales + (size_t)best * t->cols, t->cols * sizeof *scales);
done:
	job_release(&j, threads);
	return err;
}
