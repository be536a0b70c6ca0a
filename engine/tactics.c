/*
 * tactics.c - the CPU autotuner (see tactics.h).  Measuring times one GEMV
 * over the whole matrix per available family as decode runs it: on the
 * engine's threads, with the matrix coming from memory (best of a few
 * rounds that interleave the families; a family listed later must be 10%
 * faster than an earlier one to be chosen).  The cost model charges weight
 * bytes at a nominal memory bandwidth plus multiply-adds at a nominal
 * per-family rate.
 */
#define _GNU_SOURCE /* MADV_HUGEPAGE, _SC_LEVEL3_CACHE_SIZE */
#include "engine/tactics.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "engine/arch.h"
#include "engine/cpu/cpu.h"
#include "engine/gemm.h"
#include "engine/layout.h"
#include "engine/quant.h"
#include "engine/wformat.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define MAX_SHAPES 16
#define MAX_FAMILIES 8

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Nominal multiply-adds per microsecond of one core, by family (the
 * scalar one's for a family not listed). */
static const struct {
	const char *family;
	double rate;
} family_rates[] = {
	{"avx512-bf16", 32000.0},
	{"avx512-vnni", 32000.0},
	{"avx2", 16000.0},
};

static double family_rate(const char *name)
{
	for (size_t i = 0; i < sizeof family_rates / sizeof family_rates[0]; i++)
		if (strcmp(name, family_rates[i].family) == 0)
			return family_rates[i].rate;
	return 2000.0;
}

static double model_us(const nf_bk_matrix *m, const nf_backend_ops *ops, int threads)
{
	double macs = (double)m->rows * (double)m->cols;
	double bytes = macs * nf_wformat_of(m->kind)->bits / 8.0;
	double bw = 20000.0; /* bytes per microsecond (20 GB/s) */
	double t = threads > 0 ? threads : 1;
	double compute = macs / (family_rate(ops->name) * t);
	double memory = bytes / bw;
	return compute > memory ? compute : memory;
}

/* Bytes read between timed runs so that the matrix comes from memory, as
 * it does in a decode step (where the other weights have evicted it): twice
 * the last-level cache, at least 64 MiB.  Timing a matrix that stays in
 * cache (the classifier of a 110M model fits in a 32 MiB L3) ranks the
 * families by cache bandwidth, which decode never sees: it once picked avx2
 * for that classifier, and decode with avx512 everywhere was ~8-13% faster. */
#define EVICT_CHUNK ((size_t)1 << 20)

static size_t evict_bytes(void)
{
	size_t want = (size_t)64 << 20;
#ifdef _SC_LEVEL3_CACHE_SIZE
	long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
	if (llc > 0 && (size_t)llc <= ((size_t)1 << 30) && 2 * (size_t)llc > want)
		want = 2 * (size_t)llc;
#endif
	return (want + EVICT_CHUNK - 1) / EVICT_CHUNK * EVICT_CHUNK;
}

/* Eviction as a pool job, so that the workers are spinning, not asleep,
 * when the timed job is posted (as between the jobs of a decode step):
 * each chunk touches one word of every cache line of its 1 MiB. */
typedef struct evict_job {
	const uint64_t *buf;
	_Atomic uint64_t sink;
} evict_job;

static void evict_chunk(void *ctx, int chunk, int tid)
{
	evict_job *j = ctx;
	const uint64_t *p = j->buf + (size_t)chunk * (EVICT_CHUNK / sizeof *p);
	uint64_t sum = 0;
	(void)tid;
	for (size_t i = 0; i < EVICT_CHUNK / sizeof *p; i += 64 / sizeof *p)
		sum += p[i];
	atomic_fetch_add_explicit(&j->sink, sum, memory_order_relaxed);
}

/* Memory for the timed copy of a matrix: 2 MiB-aligned and advised to be
 * backed by huge pages, as the loaded engine's weights are (engine.c); the
 * TLB misses of 4 KiB pages would be timed otherwise.  Freed with free(). */
static void *huge_alloc(size_t n)
{
	const size_t huge = (size_t)2 << 20;
	size_t len = (n + huge - 1) / huge * huge;
	void *p = len >= n ? aligned_alloc(huge, len) : NULL;
#ifdef MADV_HUGEPAGE
	if (p)
		(void)madvise(p, len, MADV_HUGEPAGE); /* best effort */
#endif
	return p;
}

/* One GEMV of a tactics timing, split across a pool as the forward pass
 * splits it (NF_FWD_UNIT_ROWS units, forward.h). */
typedef struct gemv_job {
	const nf_backend_ops *ops;
	const nf_bk_matrix *m;
	const nf_bk_acts *acts;
	float *y;
} gemv_job;

static void gemv_range(void *ctx, int u0, int u1, int tid)
{
	const gemv_job *j = ctx;
	int r0 = u0 * NF_FWD_UNIT_ROWS, r1 = u1 * NF_FWD_UNIT_ROWS;
	(void)tid;
	if (r1 > j->m->rows)
		r1 = j->m->rows;
	nf_bk_gemm(j->ops, j->m, j->y, 0, j->acts, 1, r0, r1, 0);
}

/* What timing needs once per table: the engine's thread count as a pool,
 * and the buffer read between runs. */
typedef struct timer {
	nf_pool *pool;
	uint64_t *ebuf;
	size_t ebytes;
} timer;

static void timer_free(timer *t)
{
	nf_pool_free(t->pool);
	free(t->ebuf);
	memset(t, 0, sizeof *t);
}

/* 0, or the error of the buffer or the pool. */
static int timer_init(timer *t, int threads)
{
	int err;
	memset(t, 0, sizeof *t);
	t->ebytes = evict_bytes();
	if (!(t->ebuf = malloc(t->ebytes)))
		return nf_error_set(NF_ENOMEM, "tactics: out of memory for the timer");
	if ((err = nf_pool_new(&t->pool, threads > 0 ? threads : 1))) {
		timer_free(t);
		return err;
	}
	memset(t->ebuf, 1, t->ebytes);
	return 0;
}

/* What one timed GEMV reads: an input vector in every activation form
 * (gemm.h) and the output; freed with probe_release. */
typedef struct probe {
	float *x, *x8, *y, xs;
	int8_t *xq;
	nf_bk_acts acts;
} probe;

static void probe_release(probe *p)
{
	free(p->x);
	free(p->x8);
	free(p->y);
	free(p->xq);
}

static int probe_init(probe *p, const nf_bk_matrix *m)
{
	size_t cols = (size_t)m->cols, ldq = (cols + NF_BK_QPAD - 1) / NF_BK_QPAD * NF_BK_QPAD;
	p->x = calloc(cols, sizeof(float));
	p->x8 = calloc(cols, sizeof(float));
	p->y = calloc((size_t)m->rows, sizeof(float));
	p->xq = calloc(ldq, 1);
	if (!p->x || !p->x8 || !p->y || !p->xq) {
		probe_release(p);
		return -1;
	}
	for (size_t i = 0; i < cols; i++)
		p->x[i] = (float)((i * 7919) % 13) * 0.01f - 0.06f;
	p->xs = nf_quant_int8_vec(p->xq, p->x, cols);
	nf_bk_prepare_f8(&nf_cpu_scalar_ops, p->x8, p->x, cols, cols, 1, 0.06f / 448.0f);
	p->acts = (nf_bk_acts){.x = p->x, .ldx = cols, .xq = p->xq, .ldq = ldq, .xs = &p->xs,
			       .x8 = p->x8};
	return 0;
}

/* A tiled copy of src in huge pages (*copy, freed by the caller); 0 when
 * src cannot be tiled or there is no memory for the copy. */
static int tiled_copy(nf_bk_matrix *out, void **copy, const nf_bk_matrix *src)
{
	size_t nbytes = (size_t)src->rows * (size_t)src->cols * nf_bk_elem_size(src);
	*out = *src;
	if (!nf_bk_can_tile(src) || !(*copy = huge_alloc(nbytes)))
		return 0;
	memcpy(*copy, nf_bk_elems(src), nbytes);
	if (src->kind == NF_QUANT_INT8_ROW)
		out->q8 = *copy;
	else
		out->f32 = *copy;
	return nf_bk_tile_in_place(out, *copy) == 0;
}

/* One GEMV of m by ops on the timer's threads, the matrix evicted from the
 * caches first; microseconds. */
static double time_gemv(timer *tm, const nf_backend_ops *ops, const nf_bk_matrix *m, probe *p)
{
	evict_job ej = {tm->ebuf, 0};
	gemv_job job = {ops, m, &p->acts, p->y};
	int units = (m->rows + NF_FWD_UNIT_ROWS - 1) / NF_FWD_UNIT_ROWS;
	nf_pool_run_chunks(tm->pool, evict_chunk, &ej, (int)(tm->ebytes / EVICT_CHUNK));
	double t0 = now_s();
	nf_pool_run_ranges(tm->pool, gemv_range, &job, units, NF_FWD_GRAIN);
	return (now_s() - t0) * 1e6;
}

/* Best time of one GEMV (one vector, as in decode) over the whole matrix
 * for each of the nf families (us[k] < 0 when not measured), on the
 * timer's threads, each run starting with the matrix evicted from the
 * caches.  Rounds interleave the families, so a noisy neighbour slows them
 * alike.  The matrix is timed in the layout a loaded engine gives it (tiled
 * when it can be: layout.h), on a copy. */
static void measure_us(double *us, timer *tm, const nf_bk_matrix *src,
		       const nf_backend_ops *const *fam, size_t nf)
{
	nf_bk_matrix tiled;
	void *copy = NULL;
	probe p = {0};
	for (size_t k = 0; k < nf; k++)
		us[k] = -1.0;
	if (probe_init(&p, src))
		return;
	const nf_bk_matrix *m = tiled_copy(&tiled, &copy, src) ? &tiled : src;
	double budget = now_s() + 0.2;
	for (int rep = 0; rep < 20 && (rep < 3 || now_s() < budget); rep++)
		for (size_t k = 0; k < nf; k++) {
			if (!fam[k]->available() || !nf_bk_has_kernel(fam[k], m->kind))
				continue;
			double t = time_gemv(tm, fam[k], m, &p);
			if (us[k] < 0 || t < us[k])
				us[k] = t;
		}
	probe_release(&p);
	free(copy);
}

int nf_tactics_prefer_tiles(const nf_bk_matrix *m, const nf_backend_ops *ops, int threads)
{
	nf_bk_matrix tiled;
	void *copy = NULL;
	probe p = {0};
	timer tm;
	double rows_us = -1, tiles_us = -1;
	if (!tiled_copy(&tiled, &copy, m) || probe_init(&p, m) || timer_init(&tm, threads)) {
		nf_error_clear();
		probe_release(&p);
		free(copy);
		return 1;
	}
	/* interleaved rounds, so that a noisy neighbour slows both alike */
	for (int rep = 0; rep < 3; rep++) {
		double a = time_gemv(&tm, ops, m, &p), b = time_gemv(&tm, ops, &tiled, &p);
		rows_us = rows_us < 0 || a < rows_us ? a : rows_us;
		tiles_us = tiles_us < 0 || b < tiles_us ? b : tiles_us;
	}
	timer_free(&tm);
	probe_release(&p);
	free(copy);
	return tiles_us <= rows_us;
}

int nf_tactics_write(const char *path, const nf_fwd_weights *w, const nf_model_config *cfg,
		     int autotune, int threads)
{
	const nf_bk_matrix *shapes[MAX_SHAPES];
	int n = 0, err = 0;
	json_t *root = NULL, *list = NULL;
	char *text = NULL;
	timer tm = {0};

	/* distinct (rows, cols, kind) in model order: the classifier, then the
	 * layers' matrices in their table's order */
	const nf_arch *a = nf_arch_get(cfg->arch);
	for (int l = -1; l < cfg->n_layers; l++) {
		for (size_t i = 0; i < (l < 0 ? 1 : a->n_tensors); i++) {
			const nf_bk_matrix *m = l < 0 ? &w->cls
						      : nf_fwd_layer_matrix(&w->layers[l], a->tensors[i].id);
			int seen = 0;
			if (!m)
				continue;
			for (int j = 0; j < n; j++)
				seen |= shapes[j]->rows == m->rows && shapes[j]->cols == m->cols &&
					shapes[j]->kind == m->kind;
			if (!seen && n < MAX_SHAPES)
				shapes[n++] = m;
		}
	}

	if (autotune && (err = timer_init(&tm, threads)))
		return err;
	root = json_object();
	list = json_array();
	if (!root || !list) {
		err = nf_error_set(NF_ENOMEM, "tactics: out of memory");
		goto done;
	}
	json_object_set_new(root, "method", json_string(autotune ? "measured" : "modelled"));
	json_object_set_new(root, "threads", json_integer(threads));
	/* The modelled table must not depend on the build host (reproducible
	 * engines): it ranks every family; the runtime falls back to what its
	 * CPU runs.  Only a measured table names this host's best family. */
	if (autotune)
		json_object_set_new(root, "cpu_best", json_string(nf_cpu_best()->name));
	const nf_backend_ops *const *fam = nf_cpu_families();
	for (int i = 0; i < n; i++) {
		const nf_bk_matrix *m = shapes[i];
		json_t *e = json_object(), *tim = json_object();
		const char *chosen = NULL;
		double best = -1.0, us[MAX_FAMILIES];
		size_t nfam = 0;
		while (fam[nfam] && nfam < MAX_FAMILIES)
			nfam++;
		if (autotune)
			measure_us(us, &tm, m, fam, nfam);
		for (size_t k = 0; k < nfam; k++) {
			if (!autotune)
				us[k] = nf_bk_has_kernel(fam[k], m->kind) ? model_us(m, fam[k], threads)
									  : -1.0;
			if (us[k] < 0)
				continue;
			json_object_set_new(tim, fam[k]->name, json_real(us[k]));
			/* families come best first: a later one must be clearly faster
			 * (10%), so that timing noise does not pick a weaker family */
			if (best < 0 || us[k] < best * (autotune ? 0.9 : 1.0)) {
				best = us[k];
				chosen = fam[k]->name;
			}
		}
		json_object_set_new(e, "shape", json_pack("[ii]", m->rows, m->cols));
		json_object_set_new(e, "dtype", json_string(nf_wformat_of(m->kind)->name));
		json_object_set_new(e, "kernel", json_string(chosen ? chosen : "scalar"));
		json_object_set_new(e, "method", json_string(autotune ? "measured" : "modelled"));
		json_object_set_new(e, "timings_us", tim);
		json_array_append_new(list, e);
	}
	json_object_set_new(root, "tactics", list);
	list = NULL;
	text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!text) {
		err = nf_error_set(NF_ENOMEM, "tactics: out of memory");
		goto done;
	}
	if ((err = nf_fs_write_atomic(path, text, strlen(text), 0644)))
		goto done;
done:
	timer_free(&tm);
	free(text);
	json_decref(list);
	json_decref(root);
	return err;
}

int nf_tactics_apply(nf_fwd *f, const char *path)
{
	json_error_t je;
	json_t *root = NULL;
	int err = 0;
	if (!nf_fs_exists(path))
		return 0;
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return nf_error_set(NF_EINPUT, "%s: line %d: %s", path, je.line, je.text);
	json_t *list = json_object_get(root, "tactics");
	if (!json_is_array(list)) {
		err = nf_error_set(NF_EINPUT, "%s: \"tactics\" is not an array", path);
		goto done;
	}
	size_t i;
	json_t *e;
	json_array_foreach(list, i, e) {
		json_int_t rows, cols;
		const char *kernel;
		if (json_unpack(e, "{s:[II], s:s}", "shape", &rows, &cols, "kernel", &kernel) != 0 ||
		    rows <= 0 || cols <= 0 || rows > NF_MODEL_MAX_VOCAB || cols > NF_MODEL_MAX_HIDDEN) {
			err = nf_error_set(NF_EINPUT, "%s: tactic %zu: needs \"shape\": [rows, cols] and \"kernel\"",
					   path, i);
			goto done;
		}
		const nf_backend_ops *ops = nf_cpu_find(kernel);
		if (ops && (err = nf_fwd_set_shape_ops(f, (int)rows, (int)cols, ops)))
			goto done;
	}
done:
	json_decref(root);
	return err;
}
