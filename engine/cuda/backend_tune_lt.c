/*
 * backend_tune_lt.c - cuBLASLt timed as a reference candidate of the
 * prefill GEMMs (see nf_cuda_backend_tune_cublaslt in backend.h): per
 * shape and batch, the heuristic's algorithms run on zeroed buffers of the
 * shape's sizes, timed with CUDA events after warm-up, the median of each
 * and the fastest kept in the timing cache as the figure our kernels are
 * held to.  Never a choice of the backend (cublaslt.h says why).
 */
#include <stdio.h>
#include <string.h>

#include "engine/cuda/backend_impl.h"
#include "engine/cuda/cublaslt.h"
#include "engine/cuda/timing_cache.h"
#include "util/error.h"
#include "util/banned.h"

#define LT_BATCH_MAX 256
/* Workspace an algorithm may ask for: what cuBLASLt's own samples allow. */
#define LT_WORKSPACE ((size_t)32 << 20)

typedef struct lt_timer {
	nf_cuda_stopwatch sw;
	nf_cu_ptr x, y, ws; /* (batch, widest) in the weights' type, (batch, tallest) floats */
} lt_timer;

/* One run of algorithm i of a plan (nf_cuda_time_median's run). */
typedef struct one_algo {
	const nf_cuda_backend *b;
	const lt_timer *tm;
	const nf_lt_plan *p;
	int i;
	nf_cu_ptr w;
} one_algo;

static int run_algo(void *arg)
{
	const one_algo *a = arg;
	return nf_lt_plan_run(a->p, a->i, a->tm->y, a->w, a->tm->x, a->tm->ws, a->b->stream);
}

/* The median microseconds of algorithm i of p. */
static int time_algo(nf_cuda_backend *b, const lt_timer *tm, const nf_lt_plan *p, int i,
		     nf_cu_ptr w, double *median_us)
{
	one_algo a = {b, tm, p, i, w};
	return nf_cuda_time_median(b, &tm->sw, run_algo, &a,
				   "a timed cuBLASLt run", median_us);
}

/* The fastest algorithm of w at batch into the cache (unless cached). */
static int tune_shape(nf_cuda_backend *b, nf_timing_cache *cache, const lt_timer *tm,
		      const nf_cublaslt *lt, const nf_cuda_wmat *w, int batch, int *timed)
{
	const char *fmt = nf_cuk_info_of(nf_cuk_gemm(w->kind))->name + strlen("nf_cu_gemm_");
	nf_tc_shape s = {{0}, w->m.rows, w->m.cols, batch};
	nf_tc_tactic best, hit;
	nf_lt_plan p;
	int err;

	/* a library call has no tile of ours: 1 x 1, as the cache's bounds
	 * want (a 0 there would make the whole file read as damaged) */
	memset(&best, 0, sizeof best);
	best.tile_rows = best.tile_tokens = best.vector = 1;
	snprintf(s.family, sizeof s.family, "cublaslt_%s", fmt);
	if (nf_timing_cache_find(cache, &s, &hit))
		return 0;
	err = nf_lt_plan_init(&p, lt, w->kind, w->m.rows, w->m.cols, batch, LT_WORKSPACE);
	for (int i = 0; i < p.n_algos && !err; i++) {
		double us = 0;
		if ((err = time_algo(b, tm, &p, i, (nf_cu_ptr)(uintptr_t)w->m.data, &us)))
			break;
		if (i == 0 || us < best.median_us) {
			snprintf(best.kernel, sizeof best.kernel, "cublaslt:%d", i);
			best.median_us = us;
			best.runs = tm->sw.runs;
			best.split_k = 1;
		}
	}
	nf_lt_plan_release(&p);
	if (err || (err = nf_timing_cache_put(cache, &s, &best)))
		return err;
	++*timed;
	return 0;
}

static int make_timer(nf_cuda_backend *b, lt_timer *tm, const nf_cuda_wmat **m, size_t n)
{
	size_t rows, cols;
	int err;
	nf_cuda_wmat_widest(&rows, &cols, m, n);
	/* two bytes an element covers every candidate's type */
	if ((err = nf_cuda_backend_alloc(b, &tm->x, LT_BATCH_MAX * cols * 2, "cuBLASLt timing")) ||
	    (err = nf_cuda_backend_alloc(b, &tm->y, LT_BATCH_MAX * rows * sizeof(float),
					 "cuBLASLt timing")) ||
	    (err = nf_cuda_backend_alloc(b, &tm->ws, LT_WORKSPACE, "cuBLASLt workspace")))
		return err;
	return nf_cuda_stopwatch_start(b, &tm->sw);
}

int nf_cuda_backend_tune_cublaslt(nf_cuda_backend *b, nf_timing_cache *cache, const nf_cublaslt *lt,
				  int warmup, int runs, int *timed)
{
	const nf_cuda_wmat *all[8], *m[8];
	lt_timer tm = {0};
	size_t n = 0, total = nf_cuda_tune_distinct(all, b);
	int top = b->max_prefill < LT_BATCH_MAX ? b->max_prefill : LT_BATCH_MAX, err = 0;

	*timed = 0;
	if ((err = nf_cuda_stopwatch_check("cublaslt", warmup, runs)))
		return err;
	for (size_t i = 0; i < total; i++)
		if (nf_cublaslt_kind_ok(all[i]->kind, b->sm))
			m[n++] = all[i];
	if (n == 0)
		return 0; /* int8 and int4 weights: no cuBLASLt candidate */
	tm.sw.warmup = warmup;
	tm.sw.runs = runs;
	if ((err = make_timer(b, &tm, m, n)))
		goto done;
	for (size_t i = 0; i < n && !err; i++)
		for (int batch = 2; batch <= top && !err; batch *= 2)
			err = tune_shape(b, cache, &tm, lt, m[i], batch, timed);
done:
	nf_cuda_stopwatch_release(b, &tm.sw);
	return err;
}
