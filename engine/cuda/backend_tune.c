/*
 * backend_tune.c - the CUDA backend's tactics timed on its device (see
 * nf_cuda_backend_tune in backend.h): for each matrix shape of the model
 * and batch, the candidate kernels are timed with CUDA events after
 * warm-up, the median of several runs wins, and the timing cache
 * (timing_cache.h) keeps it for the next build on the same GPU, driver and
 * cubin.  Where no GPU is, none of this runs: the roofline model's
 * `modelled` tactics stand (engine/roofline.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/backend_impl.h"
#include "engine/cuda/timing_cache.h"
#include "util/error.h"
#include "util/banned.h"

#define BATCH_MAX 256

/* One candidate of a shape: the variant, its kernel, its launch and what
 * it is. */
typedef struct candidate {
	nf_cu_variant v;
	nf_cuk_id id;
	nf_cu_launch l;
	nf_tc_tactic t;
} candidate;

/* The variants of w's product at batch: the GEMVs, and for more than one
 * token the GEMM tiles too. */
static int candidates(candidate *out, const nf_cuda_wmat *w, int batch)
{
	int n = 0, last = batch > 1 ? NF_CU_VAR_GEMM_N16 : NF_CU_VAR_GEMV_V32;
	memset(out, 0, NF_CU_VARIANTS * sizeof *out);
	for (int v = NF_CU_VAR_GEMV; v <= last; v++, n++) {
		nf_cu_variant_shape vs = nf_cu_variant_of((nf_cu_variant)v);
		out[n].v = (nf_cu_variant)v;
		out[n].id = nf_cuk_product(w->kind, out[n].v);
		out[n].l = nf_cu_launch_variant(out[n].v, w->m.rows, batch);
		out[n].t = (nf_tc_tactic){.tile_rows = vs.tile_rows, .tile_tokens = vs.tile_tokens,
					  .split_k = vs.split_k, .vector = vs.vector_bytes};
		snprintf(out[n].t.kernel, sizeof out[n].t.kernel, "%s", nf_cuk_info_of(out[n].id)->name);
	}
	return n;
}

/* The candidate a cached tactic names (its kernel), or -1 (a cache of
 * other kernels: timed again). */
static int cached_candidate(const candidate *c, int n, const nf_tc_tactic *t)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(c[i].t.kernel, t->kernel))
			return i;
	return -1;
}

typedef struct timer {
	nf_cuda_stopwatch sw;
	nf_cu_ptr x, y;   /* (BATCH_MAX, widest) inputs, (BATCH_MAX, tallest) outputs */
} timer;

int nf_cuda_stopwatch_check(const char *who, int warmup, int runs)
{
	if (warmup < 0 || warmup > 1000 || runs < 1 || runs > NF_CUDA_TUNE_RUNS_MAX)
		return nf_error_set(NF_EINPUT, "%s: %d warm-up and %d timed runs (0..1000, 1..%d)", who,
				    warmup, runs, NF_CUDA_TUNE_RUNS_MAX);
	return 0;
}

int nf_cuda_stopwatch_start(nf_cuda_backend *b, nf_cuda_stopwatch *sw)
{
	nf_cu_result rc;
	if ((rc = b->api->cuEventCreate(&sw->start, 0)) != 0 ||
	    (rc = b->api->cuEventCreate(&sw->stop, 0)) != 0)
		return nf_cuda_backend_fail(b, "cuEventCreate", rc);
	return 0;
}

void nf_cuda_stopwatch_release(nf_cuda_backend *b, nf_cuda_stopwatch *sw)
{
	if (sw->start)
		b->api->cuEventDestroy(sw->start);
	if (sw->stop)
		b->api->cuEventDestroy(sw->stop);
	sw->start = sw->stop = 0;
}

int nf_cuda_time_median(nf_cuda_backend *b, const nf_cuda_stopwatch *sw, int (*run)(void *arg),
			void *arg, const char *what, double *median_us)
{
	double us[NF_CUDA_TUNE_RUNS_MAX];
	nf_cu_result rc;
	int err;
	if (sw->runs < 1 || sw->runs > NF_CUDA_TUNE_RUNS_MAX)
		return nf_error_set(NF_EINPUT, "cuda tune: %d timed runs (1..%d)", sw->runs,
				    NF_CUDA_TUNE_RUNS_MAX);
	for (int i = 0; i < sw->warmup; i++)
		if ((err = run(arg)))
			return err;
	for (int r = 0; r < sw->runs; r++) {
		float ms = 0;
		err = 0;
		if ((rc = b->api->cuEventRecord(sw->start, b->stream)) != 0 || (err = run(arg)) ||
		    (rc = b->api->cuEventRecord(sw->stop, b->stream)) != 0 ||
		    (rc = b->api->cuEventSynchronize(sw->stop)) != 0 ||
		    (rc = b->api->cuEventElapsedTime(&ms, sw->start, sw->stop)) != 0)
			return rc ? nf_cuda_backend_fail(b, what, rc) : err;
		us[r] = 1000.0 * ms;
	}
	*median_us = nf_tc_median(us, sw->runs);
	return 0;
}

void nf_cuda_wmat_widest(size_t *rows, size_t *cols, const nf_cuda_wmat *const *m, size_t n)
{
	*rows = 1;
	*cols = 1;
	for (size_t i = 0; i < n; i++) {
		if ((size_t)m[i]->m.rows > *rows)
			*rows = (size_t)m[i]->m.rows;
		if ((size_t)m[i]->m.cols > *cols)
			*cols = (size_t)m[i]->m.cols;
	}
}

/* One launch of a candidate kernel (nf_cuda_time_median's run). */
typedef struct one_launch {
	nf_cuda_backend *b;
	const candidate *c;
	void **params;
} one_launch;

static int launch_once(void *arg)
{
	one_launch *o = arg;
	return nf_cuk_launch(&o->b->k, o->b->d, o->b->stream, o->c->id, o->c->l, o->params);
}

static int time_one(nf_cuda_backend *b, const timer *tm, const candidate *c, const nf_cuda_wmat *w,
		    int batch, double *median_us)
{
	nf_cu_wmat m = w->m;
	nf_cu_ptr x = tm->x, y = tm->y;
	size_t ldy = (size_t)m.rows, ldx = (size_t)m.cols;
	int accumulate = 0;
	void *p[] = {&y, &ldy, &m, &x, &ldx, &batch, &accumulate};
	one_launch o = {b, c, p};
	return nf_cuda_time_median(b, &tm->sw, launch_once, &o,
				   "a timed run", median_us);
}

/* The fastest of the n candidates by the median of timed runs into *best,
 * every candidate's median into t's candidates. */
static int time_candidates(nf_cuda_backend *b, const timer *tm, const candidate *c, int n,
			   const nf_cuda_wmat *w, int batch, int *best, nf_tc_tactic *t)
{
	int err;
	t->n_candidates = 0;
	for (int i = 0; i < n; i++) {
		double us = 0;
		if ((err = time_one(b, tm, &c[i], w, batch, &us)))
			return err;
		if (i < NF_TC_CANDIDATES_MAX) {
			snprintf(t->candidate[i], sizeof t->candidate[i], "%s", c[i].t.kernel);
			t->candidate_us[i] = us;
			t->n_candidates = i + 1;
		}
		if (i == 0 || us < t->median_us) {
			t->median_us = us;
			*best = i;
		}
	}
	return 0;
}

/* The tactic of w at batch: the cache's, else the fastest candidate's. */
static int tune_shape(nf_cuda_backend *b, nf_timing_cache *cache, const timer *tm,
		      const nf_cuda_wmat *w, int batch, int *timed)
{
	candidate c[NF_CU_VARIANTS];
	nf_tc_shape s = {{0}, w->m.rows, w->m.cols, batch};
	nf_tc_tactic hit;
	int n = candidates(c, w, batch), best = -1, err;

	snprintf(s.family, sizeof s.family, "%s", nf_cuk_info_of(c[0].id)->name + strlen("nf_cu_"));
	if (nf_timing_cache_find(cache, &s, &hit))
		best = cached_candidate(c, n, &hit);
	if (best < 0) {
		nf_tc_tactic all;
		memset(&all, 0, sizeof all);
		if ((err = time_candidates(b, tm, c, n, w, batch, &best, &all)))
			return err;
		hit = c[best].t;
		hit.median_us = all.median_us;
		hit.runs = tm->sw.runs;
		hit.n_candidates = all.n_candidates;
		memcpy(hit.candidate, all.candidate, sizeof hit.candidate);
		memcpy(hit.candidate_us, all.candidate_us, sizeof hit.candidate_us);
		if ((err = nf_timing_cache_put(cache, &s, &hit)))
			return err;
		++*timed;
	}
	return nf_cuda_backend_choose(b, w, batch, c[best].v);
}

size_t nf_cuda_tune_distinct(const nf_cuda_wmat **out, const nf_cuda_backend *b)
{
	const nf_cuda_layer *L = &b->layers[0];
	const nf_cuda_wmat *all[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w1, &L->w2, &L->w3, &b->cls};
	size_t n = 0;
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
		size_t j = 0;
		while (j < n && !(out[j]->kind == all[i]->kind && out[j]->m.rows == all[i]->m.rows &&
				  out[j]->m.cols == all[i]->m.cols))
			j++;
		if (j == n)
			out[n++] = all[i];
	}
	return n;
}

static int make_timer(nf_cuda_backend *b, timer *tm, const nf_cuda_wmat **m, size_t n)
{
	size_t rows, cols;
	int err;
	nf_cuda_wmat_widest(&rows, &cols, m, n);
	if ((err = nf_cuda_backend_alloc(b, &tm->x, BATCH_MAX * cols * sizeof(float), "timing")) ||
	    (err = nf_cuda_backend_alloc(b, &tm->y, BATCH_MAX * rows * sizeof(float), "timing")))
		return err;
	return nf_cuda_stopwatch_start(b, &tm->sw);
}

int nf_cuda_backend_tune(nf_cuda_backend *b, nf_timing_cache *cache, int warmup, int runs,
			 int *timed)
{
	const nf_cuda_wmat *m[8];
	timer tm = {0};
	size_t n = nf_cuda_tune_distinct(m, b);
	int top = b->max_batch > b->max_prefill ? b->max_batch : b->max_prefill, err;

	*timed = 0;
	if ((err = nf_cuda_stopwatch_check("cuda", warmup, runs)))
		return err;
	tm.sw.warmup = warmup;
	tm.sw.runs = runs;
	if (top > BATCH_MAX)
		top = BATCH_MAX;
	if ((err = make_timer(b, &tm, m, n)))
		goto done;
	for (size_t i = 0; i < n && !err; i++)
		for (int batch = 1; batch <= top && !err; batch *= 2)
			err = tune_shape(b, cache, &tm, m[i], batch, timed);
done:
	nf_cuda_stopwatch_release(b, &tm.sw);
	return err;
}
