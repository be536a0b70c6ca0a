/*
 * engine_quantize.c - the model-wide steps of quantizing an engine, and
 * each matrix's quantization (engine_quantize.h).
 */
#include "engine/engine_quantize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/arch.h"
#include "engine/wformat.h"
#include "util/error.h"
#include "util/banned.h"

int nf_engine_quant_prepare(nf_engine_quant *q, const nf_model *m, const nf_engine_build_opts *o)
{
	const nf_precision_info *info = nf_precision_info_of(o->precision);
	memset(q, 0, sizeof *q);
	q->model = m;
	q->n_layers = m->cfg.n_layers;
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
	nf_model_free(q->owned);
	free(q->act_scales);
	memset(q, 0, sizeof *q);
}

int nf_engine_quantize_matrix(void *data, void *aux, const nf_fwd_src *s, int id, uint64_t layers,
			      uint64_t rows, uint64_t cols, const nf_model *m,
			      const nf_engine_quant *q, const char *what)
{
	const nf_wformat *f = nf_wformat_of(s->kind);
	const float *w = *nf_model_slot((nf_model *)m, id);
	uint64_t dbytes = nf_wformat_data_bytes(f, rows, cols);
	uint64_t abytes = rows * nf_wformat_aux_cols(f, cols, s->group) * nf_wformat_aux_size(f);
	(void)q;
	for (uint64_t l = 0; l < layers; l++) {
		char where[96];
		if (layers > 1)
			snprintf(where, sizeof where, "%s (layer %llu)", what, (unsigned long long)l);
		else
			snprintf(where, sizeof where, "%s", what);
		int err = nf_wformat_quantize(f, (char *)data + l * dbytes,
					      aux ? (char *)aux + l * abytes : NULL,
					      w + l * rows * cols, (size_t)rows, (size_t)cols, s->group,
					      where);
		if (err)
			return err;
	}
	return 0;
}
