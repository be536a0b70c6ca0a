/*
 * engine_quantize.c - the model-wide steps of quantizing an engine, and
 * each matrix's quantization (engine_quantize.h).
 */
#include "engine/engine_quantize.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/arch.h"
#include "engine/cpu/cpu.h"
#include "engine/wformat.h"
#include "util/error.h"
#include "util/banned.h"

int nf_engine_quant_prepare(nf_engine_quant *q, const nf_model *m, const nf_engine_build_opts *o)
{
	const nf_precision_info *info = nf_precision_info_of(o->precision);
	memset(q, 0, sizeof *q);
	q->model = m;
	q->n_layers = m->cfg.n_layers;
	int err = nf_pool_new(&q->pool, o->threads);
	if (err)
		return err;
	if (info->calibrated)
		return nf_error_set(NF_EUNSUPPORTED, "engine build: %s needs calibration (not yet wired)",
				    info->name);
	return 0;
}

const float *nf_engine_quant_act_scales(const nf_engine_quant *q, int id)
{
	if (!q->act_scales || id < 0 || id >= NF_T_COUNT)
		return NULL;
	return q->act_scales + (size_t)id * (size_t)(q->n_layers > 0 ? q->n_layers : 1);
}

void *nf_engine_quant_detach(nf_engine_quant *q)
{
	void *mem = NULL;
	if (q->owned) {
		mem = q->owned->mem;
		q->owned->mem = NULL;
	}
	return mem;
}

void nf_engine_quant_release(nf_engine_quant *q)
{
	nf_pool_free(q->pool);
	nf_model_free(q->owned);
	free(q->act_scales);
	memset(q, 0, sizeof *q);
}

/* Rows per unit of parallel quantization: enough work to pay for a
 * hand-off, few enough that two cores split a small matrix. */
#define QUANT_UNIT_ROWS 64

/* One matrix (all layers' rows) being quantized by the pool. */
typedef struct quant_job {
	const nf_wformat *f;
	char *data, *aux;
	const float *w;
	uint64_t rows, cols, row_aux; /* row_aux: aux bytes a row */
	int group;
	atomic_int failed; /* a unit met a weight the format cannot hold */
} quant_job;

static void quant_range(void *ctx, int u0, int u1, int tid)
{
	quant_job *j = ctx;
	uint64_t r0 = (uint64_t)u0 * QUANT_UNIT_ROWS, r1 = (uint64_t)u1 * QUANT_UNIT_ROWS;
	(void)tid;
	if (r1 > j->rows)
		r1 = j->rows;
	if (nf_wformat_quantize(j->f, j->data + nf_wformat_data_bytes(j->f, r0, j->cols),
				j->aux ? j->aux + r0 * j->row_aux : NULL, j->w + r0 * j->cols,
				(size_t)(r1 - r0), (size_t)j->cols, j->group, "quantize"))
		atomic_store(&j->failed, 1);
}

/* The first weight of layer l the format cannot hold, named (the error
 * path: run again on this thread, whose error message is the caller's). */
static int quantize_layer_serially(const quant_job *j, uint64_t layers, uint64_t l,
				   const char *what)
{
	uint64_t rows = j->rows / layers;
	char where[128];
	if (layers > 1)
		snprintf(where, sizeof where, "%s (layer %llu)", what, (unsigned long long)l);
	else
		snprintf(where, sizeof where, "%s", what);
	return nf_wformat_quantize(j->f, j->data + nf_wformat_data_bytes(j->f, l * rows, j->cols),
				   j->aux ? j->aux + l * rows * j->row_aux : NULL,
				   j->w + l * rows * j->cols, (size_t)rows, (size_t)j->cols, j->group,
				   where);
}

int nf_quantize_rows(nf_pool *pool, const nf_wformat *f, void *data, void *aux, const float *w,
		     uint64_t rows, uint64_t cols, int group)
{
	quant_job j = {.f = f, .data = data, .aux = aux, .w = w, .rows = rows, .cols = cols,
		       .group = group};
	j.row_aux = nf_wformat_aux_cols(f, cols, group) * nf_wformat_aux_size(f);
	atomic_init(&j.failed, 0);
	uint64_t units = (rows + QUANT_UNIT_ROWS - 1) / QUANT_UNIT_ROWS;
	if (units > NF_POOL_MAX_UNITS)
		return nf_error_set(NF_EINPUT, "quantize: %llu rows are too many",
				    (unsigned long long)rows);
	nf_pool_run_ranges(pool, quant_range, &j, (int)units, 1);
	return atomic_load(&j.failed) ? NF_EINPUT : 0;
}

int nf_engine_quantize_matrix(void *data, void *aux, const nf_fwd_src *s, int id, uint64_t layers,
			      uint64_t rows, uint64_t cols, const nf_model *m,
			      const nf_engine_quant *q, const char *what)
{
	quant_job j = {.f = nf_wformat_of(s->kind), .data = data, .aux = aux,
		       .w = *nf_model_slot((nf_model *)m, id), .rows = layers * rows, .cols = cols,
		       .group = s->group};
	j.row_aux = nf_wformat_aux_cols(j.f, cols, s->group) * nf_wformat_aux_size(j.f);
	if (nf_quantize_rows(q->pool, j.f, data, aux, j.w, j.rows, cols, s->group) == 0)
		return 0;
	for (uint64_t l = 0; l < layers; l++) {
		int err = quantize_layer_serially(&j, layers, l, what);
		if (err)
			return err;
	}
	return nf_error_wrap(nf_error_last_code() ? nf_error_last_code() : NF_EINTERNAL, "%s", what);
}
