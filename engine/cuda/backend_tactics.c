/*
 * backend_tactics.c - the tactics measured on an engine's own SKU, as the
 * engine part NF_CUDA_TACTICS_FILE (backend.h): written from a tuned
 * backend's choices at build time, read back by every backend that opens
 * the engine, so that serving launches the measured winner of each shape
 * and the roofline model's choice only where nothing was measured.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/backend_impl.h"
#include "engine/cuda/timing_cache.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define TACTICS_MAX_BYTES (16u << 20)
#define TACTICS_MAX_ENTRIES 4096
#define DIM_MAX (1 << 24)

/* The timing cache's family of kind's products ("gemv_q8"), as
 * backend_tune.c names it: the kernel of the plain GEMV without "nf_cu_". */
static const char *family_of(nf_quant_kind kind)
{
	return nf_cuk_info_of(nf_cuk_product(kind, NF_CU_VAR_GEMV))->name + strlen("nf_cu_");
}

static const char *kernel_of(nf_quant_kind kind, nf_cu_variant v)
{
	return nf_cuk_info_of(nf_cuk_product(kind, v))->name;
}

/* ---- writing ---- */

static json_t *choice_json(const nf_cuda_choice *c, const nf_timing_cache *cache)
{
	nf_tc_shape s = {{0}, c->rows, c->cols, c->batch};
	nf_tc_tactic t, lt;
	json_t *o;

	snprintf(s.family, sizeof s.family, "%s", family_of(c->kind));
	/* a choice comes from the cache (timed now or before): it has the entry */
	if (!nf_timing_cache_find(cache, &s, &t))
		return NULL;
	o = json_pack("{s:s, s:s, s:i, s:i, s:i, s:s, s:f, s:i}", "source", "measured", "family",
		      s.family, "rows", s.rows, "cols", s.cols, "batch", s.batch, "kernel",
		      kernel_of(c->kind, c->variant), "median_us", t.median_us, "runs", t.runs);
	if (o && t.n_candidates > 0) {
		json_t *cand = json_object();
		for (int i = 0; cand && i < t.n_candidates; i++)
			json_object_set_new(cand, t.candidate[i], json_real(t.candidate_us[i]));
		if (json_object_set_new(o, "candidates_us", cand)) {
			json_decref(o);
			return NULL;
		}
	}
	snprintf(s.family, sizeof s.family, "cublaslt_%s",
		 nf_cuk_info_of(nf_cuk_gemm(c->kind))->name + strlen("nf_cu_gemm_"));
	if (o && nf_timing_cache_find(cache, &s, &lt) &&
	    json_object_set_new(o, "cublaslt_us", json_real(lt.median_us))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int nf_cuda_backend_tactics_json(char **text, const nf_cuda_backend *b,
				 const nf_timing_cache *cache)
{
	const nf_tc_key *k = nf_timing_cache_key(cache);
	json_t *list = json_array(), *root;
	int err = 0;

	*text = NULL;
	for (size_t i = 0; list && i < b->n_choice && !err; i++) {
		json_t *o = choice_json(&b->choice[i], cache);
		if (!o)
			err = nf_error_set(NF_EINPUT, "cuda: shape %dx%d at batch %d was chosen but "
					   "is not in the timing cache", b->choice[i].rows,
					   b->choice[i].cols, b->choice[i].batch);
		else if (json_array_append_new(list, o))
			err = nf_error_set(NF_ENOMEM, "cuda: out of memory");
	}
	if (err) {
		json_decref(list);
		return err;
	}
	root = json_pack("{s:s, s:i, s:s, s:i, s:s, s:o}", "format", NF_CUDA_TACTICS_FORMAT,
			 "version", NF_CUDA_TACTICS_VERSION, "sku", k->sku, "driver", k->driver,
			 "cubin_sha256", k->cubin_sha256, "tactics", list);
	if (!root || !(*text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS)))
		err = nf_error_set(NF_ENOMEM, "cuda: out of memory");
	json_decref(root);
	return err;
}

/* ---- reading ---- */

static int int_in(int *out, json_t *o, const char *name, int lo, int hi)
{
	json_t *v = json_object_get(o, name);
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return 0;
	*out = (int)json_integer_value(v);
	return 1;
}

/* The model's matrix of family and rows x cols, or NULL. */
static const nf_cuda_wmat *matrix_of(const nf_cuda_backend *b, const char *family, int rows,
				     int cols)
{
	const nf_cuda_wmat *m[8];
	size_t n = nf_cuda_tune_distinct(m, b);
	for (size_t i = 0; i < n; i++)
		if (m[i]->m.rows == rows && m[i]->m.cols == cols && !strcmp(family_of(m[i]->kind), family))
			return m[i];
	return NULL;
}

/* The variant whose kernel for w is `kernel`, a GEMM only for more than
 * one token; -1 when none is. */
static int variant_of(const nf_cuda_wmat *w, const char *kernel, int batch)
{
	int last = batch > 1 ? NF_CU_VAR_GEMM_N16 : NF_CU_VAR_GEMV_V32;
	for (int v = NF_CU_VAR_GEMV; v <= last; v++)
		if (!strcmp(kernel_of(w->kind, (nf_cu_variant)v), kernel))
			return v;
	return -1;
}

/* Entry i of the file: checked and chosen, or NF_EINPUT naming path. */
static int apply_entry(nf_cuda_backend *b, json_t *o, size_t i, const char *path)
{
	const char *source = json_string_value(json_object_get(o, "source"));
	const char *family = json_string_value(json_object_get(o, "family"));
	const char *kernel = json_string_value(json_object_get(o, "kernel"));
	json_t *us = json_object_get(o, "median_us");
	const nf_cuda_wmat *w;
	int rows, cols, batch, v;

	if (!source || strcmp(source, "measured") || !family || !kernel || !json_is_number(us) ||
	    !isfinite(json_number_value(us)) || json_number_value(us) <= 0 ||
	    !int_in(&rows, o, "rows", 1, DIM_MAX) || !int_in(&cols, o, "cols", 1, DIM_MAX) ||
	    !int_in(&batch, o, "batch", 1, 256) || (batch & (batch - 1)))
		return nf_error_set(NF_EINPUT, "cuda: %s: tactic %zu is damaged (source \"measured\", "
				    "family, rows, cols, a power-of-two batch, kernel, median_us)",
				    path, i);
	if (!(w = matrix_of(b, family, rows, cols)))
		return nf_error_set(NF_EINPUT, "cuda: %s: tactic %zu is for %s %dx%d, a matrix this "
				    "engine does not have", path, i, family, rows, cols);
	if ((v = variant_of(w, kernel, batch)) < 0)
		return nf_error_set(NF_EINPUT, "cuda: %s: tactic %zu names kernel %s, not a candidate "
				    "of %s at batch %d", path, i, kernel, family, batch);
	return nf_cuda_backend_choose(b, w, batch, (nf_cu_variant)v);
}

static int apply_file(nf_cuda_backend *b, json_t *root, const char *path)
{
	const char *format = json_string_value(json_object_get(root, "format"));
	json_t *list = json_object_get(root, "tactics"), *o;
	size_t i;
	int err = 0;

	if (!format || strcmp(format, NF_CUDA_TACTICS_FORMAT) ||
	    json_integer_value(json_object_get(root, "version")) != NF_CUDA_TACTICS_VERSION ||
	    !json_is_array(list) || json_array_size(list) > TACTICS_MAX_ENTRIES)
		return nf_error_set(NF_EINPUT, "cuda: %s is not a tactics file of version %d with at "
				    "most %d tactics", path, NF_CUDA_TACTICS_VERSION,
				    TACTICS_MAX_ENTRIES);
	json_array_foreach(list, i, o)
		if ((err = apply_entry(b, o, i, path)))
			break;
	return err;
}

int nf_cuda_backend_load_tactics(nf_cuda_backend *b, const char *engine_dir)
{
	char *path = nf_path_join(engine_dir, NF_CUDA_TACTICS_FILE), *text = NULL;
	json_t *root = NULL;
	json_error_t jerr;
	size_t len;
	int err = 0;

	if (!path)
		return nf_error_set(NF_ENOMEM, "cuda: out of memory");
	if (!nf_fs_exists(path))
		goto done; /* built without its GPU: the model's choices */
	if (nf_fs_read_file(&text, &len, path, TACTICS_MAX_BYTES))
		err = nf_error_set(NF_EINPUT, "cuda: %s cannot be read (at most %u bytes)", path,
				   TACTICS_MAX_BYTES);
	else if (!(root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr)))
		err = nf_error_set(NF_EINPUT, "cuda: %s: line %d: %s", path, jerr.line, jerr.text);
	else
		err = apply_file(b, root, path);
	if (err) { /* nothing half-chosen */
		free(b->choice);
		b->choice = NULL;
		b->n_choice = 0;
	}
done:
	json_decref(root);
	free(text);
	free(path);
	return err;
}
