/*
 * awq_search.c - AWQ's grid search for one group of matrices that share an
 * input (awq.h): the scales of an exponent, and the output error of each
 * exponent on the sampled input rows, one exponent per pool chunk.
 */
#include "engine/awq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

/* Rows quantized at a time: the fakequant sees whole rows, and a thread's
 * blocks stay small whatever the matrix. */
#define BLOCK_ROWS 64

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

/* One thread's blocks. */
typedef struct scratch {
	float *xs;   /* (n_x, cols) the rows divided by the scales */
	float *wblk; /* (BLOCK_ROWS, cols) W diag(s) */
	float *qblk; /* (BLOCK_ROWS, cols) its fake quantization */
	float *yblk; /* (n_x, BLOCK_ROWS) */
} scratch;

typedef struct search_job {
	const nf_awq_target *t;
	const nf_awq_opts *o;
	const nf_backend_ops *ops;
	float **yref;         /* (n) W x of each matrix: (n_x, rows[i]) */
	scratch *scr;         /* (threads) */
	float *scales;        /* (NF_AWQ_GRID, cols) */
	double err[NF_AWQ_GRID];
} search_job;

static float alpha_of(int i) { return (float)i / (float)(NF_AWQ_GRID - 1); }

static nf_bk_matrix f32_matrix(const float *w, size_t rows, size_t cols)
{
	nf_bk_matrix m = {.kind = NF_QUANT_NONE, .rows = (int)rows, .cols = (int)cols, .f32 = w,
			  .layout = NF_BK_ROWS};
	return m;
}

/* sum over b < n_x, r < nb of (y[b, r] - ref[b, r])^2; y at stride nb, ref
 * at stride ldr. */
static double squared_error(const float *y, size_t nb, const float *ref, size_t ldr, size_t n_x)
{
	double e = 0.0;
	for (size_t b = 0; b < n_x; b++)
		for (size_t r = 0; r < nb; r++) {
			double d = (double)y[b * nb + r] - (double)ref[b * ldr + r];
			e += d * d;
		}
	return e;
}

/* Error of matrix k of the group with scales s, rows BLOCK_ROWS at a time. */
static double matrix_error(const search_job *j, scratch *sc, size_t k, const float *s)
{
	const nf_awq_target *t = j->t;
	size_t cols = t->cols, rows = t->rows[k];
	double e = 0.0;
	for (size_t r0 = 0; r0 < rows; r0 += BLOCK_ROWS) {
		size_t nb = rows - r0 < BLOCK_ROWS ? rows - r0 : BLOCK_ROWS;
		const float *w = t->w[k] + r0 * cols;
		for (size_t r = 0; r < nb; r++)
			for (size_t c = 0; c < cols; c++)
				sc->wblk[r * cols + c] = w[r * cols + c] * s[c];
		j->o->fakequant(sc->qblk, sc->wblk, nb, cols, j->o->ctx);
		nf_bk_matrix q = f32_matrix(sc->qblk, nb, cols);
		j->ops->gemm_f32(sc->yblk, nb, &q, sc->xs, cols, t->n_x, 0, (int)nb, 0);
		e += squared_error(sc->yblk, nb, j->yref[k] + r0, rows, t->n_x);
	}
	return e;
}

/* Pool chunk i: the error of alpha_i over the whole group. */
static void eval_alpha(void *ctx, int i, int tid)
{
	search_job *j = ctx;
	const nf_awq_target *t = j->t;
	scratch *sc = &j->scr[tid];
	float *s = j->scales + (size_t)i * t->cols;
	nf_awq_scales(s, t->mean_abs, t->cols, alpha_of(i));
	for (size_t b = 0; b < t->n_x; b++)
		for (size_t c = 0; c < t->cols; c++)
			sc->xs[b * t->cols + c] = t->x[b * t->cols + c] / s[c];
	double e = 0.0;
	for (size_t k = 0; k < t->n; k++)
		e += matrix_error(j, sc, k, s);
	j->err[i] = e;
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
		free(j->scr[i].xs);
		free(j->scr[i].wblk);
		free(j->scr[i].qblk);
		free(j->scr[i].yblk);
	}
	free(j->scr);
	free(j->scales);
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
	j->scales = alloc_floats2(NF_AWQ_GRID, t->cols, &err);
	for (int i = 0; i < threads && !err; i++) {
		j->scr[i].xs = alloc_floats2(t->n_x, t->cols, &err);
		j->scr[i].wblk = alloc_floats2(BLOCK_ROWS, t->cols, &err);
		j->scr[i].qblk = alloc_floats2(BLOCK_ROWS, t->cols, &err);
		j->scr[i].yblk = alloc_floats2(t->n_x, BLOCK_ROWS, &err);
	}
	for (size_t k = 0; k < t->n && !err; k++) {
		j->yref[k] = alloc_floats2(t->n_x, t->rows[k], &err);
		if (err)
			break;
		nf_bk_matrix w = f32_matrix(t->w[k], t->rows[k], t->cols);
		j->ops->gemm_f32(j->yref[k], t->rows[k], &w, t->x, t->cols, t->n_x, 0,
				 (int)t->rows[k], 0);
	}
	return err;
}

int nf_awq_search(nf_awq_choice *choice, float *scales, const nf_awq_target *t,
		  const nf_awq_opts *opts, nf_pool *pool)
{
	search_job j = {.t = t, .o = opts, .ops = nf_cpu_best()};
	int threads = pool ? nf_pool_threads(pool) : 1, err;
	if (!opts->fakequant)
		return nf_error_set(NF_EINPUT, "awq: no fake quantizer");
	if ((err = check_target(t)) || (err = job_init(&j, threads)))
		goto done;
	if (pool) {
		nf_pool_run_chunks(pool, eval_alpha, &j, NF_AWQ_GRID);
	} else {
		for (int i = 0; i < NF_AWQ_GRID; i++)
			eval_alpha(&j, i, 0);
	}
	/* strictly lower wins: on a tie the smaller alpha (the milder change) stays */
	int best = 0;
	for (int i = 1; i < NF_AWQ_GRID; i++)
		if (j.err[i] < j.err[best])
			best = i;
	choice->alpha = alpha_of(best);
	choice->err_plain = j.err[0];
	choice->err_best = j.err[best];
	memcpy(scales, j.scales + (size_t)best * t->cols, t->cols * sizeof *scales);
done:
	job_release(&j, threads);
	return err;
}
