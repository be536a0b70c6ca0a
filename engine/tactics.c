/*
 * tactics.c - the CPU autotuner (see tactics.h).  Measuring times one
 * single-threaded GEMV over the whole matrix per available family (best of
 * a few rounds that interleave the families; a family listed later must be
 * 10% faster than an earlier one to be chosen); the cost model charges weight bytes at a nominal memory
 * bandwidth plus multiply-adds at a nominal per-family rate.
 */
#define _POSIX_C_SOURCE 200809L
#include "engine/tactics.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/layout.h"
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

/* Nominal multiply-adds per microsecond of one core, by family. */
static double family_rate(const char *name)
{
	if (strcmp(name, "avx512-vnni") == 0)
		return 32000.0;
	if (strcmp(name, "avx2") == 0)
		return 16000.0;
	return 2000.0;
}

static double model_us(const nf_bk_matrix *m, const nf_backend_ops *ops, int threads)
{
	double macs = (double)m->rows * (double)m->cols;
	double bytes = macs * (m->kind == NF_QUANT_INT8_ROW ? 1.0 : 4.0);
	double bw = 20000.0; /* bytes per microsecond (20 GB/s) */
	double t = threads > 0 ? threads : 1;
	double compute = macs / (family_rate(ops->name) * t);
	double memory = bytes / bw;
	return compute > memory ? compute : memory;
}

/* Best time of one single-threaded GEMV over the whole matrix for each of
 * the nf families (us[k] < 0 when not measured): rounds interleave the
 * families, so a noisy neighbour slows them alike.  The matrix is timed in
 * the layout a loaded engine gives it (tiled when it can be: layout.h), on
 * a copy. */
static void measure_us(double *us, const nf_bk_matrix *src, const nf_backend_ops *const *fam,
		       size_t nf)
{
	nf_bk_matrix tiled = *src;
	const nf_bk_matrix *m = src;
	size_t cols = (size_t)src->cols, nbytes = (size_t)src->rows * cols * nf_bk_elem_size(src);
	size_t ldq = (cols + NF_BK_QPAD - 1) / NF_BK_QPAD * NF_BK_QPAD;
	float *x = calloc(cols, sizeof(float)), *y = calloc((size_t)src->rows, sizeof(float));
	int8_t *xq = calloc(ldq, 1);
	void *copy = NULL;
	for (size_t k = 0; k < nf; k++)
		us[k] = -1.0;
	if (!x || !y || !xq)
		goto done;
	if (nf_bk_can_tile(src) && (copy = malloc(nbytes))) {
		memcpy(copy, nf_bk_elems(src), nbytes);
		if (src->kind == NF_QUANT_INT8_ROW)
			tiled.q8 = copy;
		else
			tiled.f32 = copy;
		if (nf_bk_tile_in_place(&tiled, copy) == 0)
			m = &tiled;
	}
	for (size_t i = 0; i < cols; i++)
		x[i] = (float)((i * 7919) % 13) * 0.01f - 0.06f;
	float xs = nf_quant_int8_vec(xq, x, cols);
	double budget = now_s() + 0.1;
	for (int rep = 0; rep < 20 && (rep < 3 || now_s() < budget); rep++)
		for (size_t k = 0; k < nf; k++) {
			if (!fam[k]->available())
				continue;
			double t0 = now_s();
			if (m->kind == NF_QUANT_INT8_ROW)
				fam[k]->gemm_q8(y, 0, m, xq, ldq, &xs, 1, 0, m->rows, 0);
			else
				fam[k]->gemm_f32(y, 0, m, x, cols, 1, 0, m->rows, 0);
			double t = (now_s() - t0) * 1e6;
			if (us[k] < 0 || t < us[k])
				us[k] = t;
		}
done:
	free(x);
	free(y);
	free(xq);
	free(copy);
}

int nf_tactics_write(const char *path, const nf_fwd_weights *w, const nf_model_config *cfg,
		     int autotune, int threads)
{
	const nf_bk_matrix *shapes[MAX_SHAPES];
	int n = 0, err = 0;
	json_t *root = NULL, *list = NULL;
	char *text = NULL;

	/* distinct (rows, cols, kind) in model order */
	for (int l = -1; l < cfg->n_layers; l++) {
		const nf_bk_matrix *cand[7];
		int nc = 0;
		if (l < 0) {
			cand[nc++] = &w->cls;
		} else {
			const nf_fwd_layer *L = &w->layers[l];
			cand[nc++] = &L->wq, cand[nc++] = &L->wk, cand[nc++] = &L->wv;
			cand[nc++] = &L->wo, cand[nc++] = &L->w1, cand[nc++] = &L->w2;
			cand[nc++] = &L->w3;
		}
		for (int i = 0; i < nc; i++) {
			int seen = 0;
			for (int j = 0; j < n; j++)
				seen |= shapes[j]->rows == cand[i]->rows &&
					shapes[j]->cols == cand[i]->cols && shapes[j]->kind == cand[i]->kind;
			if (!seen && n < MAX_SHAPES)
				shapes[n++] = cand[i];
		}
	}

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
			measure_us(us, m, fam, nfam);
		for (size_t k = 0; k < nfam; k++) {
			if (!autotune)
				us[k] = model_us(m, fam[k], threads);
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
		json_object_set_new(e, "dtype",
				    json_string(m->kind == NF_QUANT_INT8_ROW ? "int8" : "fp32"));
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
