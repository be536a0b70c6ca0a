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
#include "engine/awq.h"
#include "engine/calibrate.h"
#include "engine/ckpt_reader.h"
#include "engine/gguf.h"
#include "engine/cpu/cpu.h"
#include "engine/safetensors.h" /* nf_f16_to_f32 */
#include "engine/tokenizer.h"
#include "engine/wformat.h"
#include "util/error.h"
#include "util/banned.h"

/* Calibration tokens past this many are not run: the statistics settle
 * long before, and the float32 reference runs one token at a time. */
#define CALIB_MAX_TOKENS 512

/* Input rows AWQ measures each alpha's error on: its cost is rows x the
 * model's MACs x the alpha grid.  With 32 rows SmolLM2's int4-awq engine
 * builds in 13 s and passes its gates (docs/quantization.md); fp8 needs
 * the statistics only. */
#define AWQ_ROWS 32

/* The calibration text (o's, or the shipped default) as the model's tokens,
 * at most CALIB_MAX_TOKENS. */
static int calibration_tokens(int **tokens, size_t *n, const nf_model_config *cfg,
			      const nf_engine_build_opts *o)
{
	nf_tokenizer *own = NULL;
	const nf_tokenizer *tok = o->tokenizer;
	size_t len = 0;
	const char *text = o->calib_text ? o->calib_text : nf_calib_default_text(&len);
	int err = 0;
	if (o->calib_text)
		len = strlen(o->calib_text);
	if (!tok && o->tokenizer_path && !(err = nf_tokenizer_load(&own, o->tokenizer_path,
								    cfg->vocab_size)))
		tok = own;
	if (!err && !tok)
		err = nf_error_set(NF_EINPUT, "engine build: calibration needs the model's tokenizer");
	if (!err)
		err = nf_tokenizer_encode(tok, text, len, NF_TOK_ADD_SPECIAL, tokens, n);
	if (!err && *n > CALIB_MAX_TOKENS)
		*n = CALIB_MAX_TOKENS;
	if (!err && *n < 2)
		err = nf_error_set(NF_EINPUT, "engine build: the calibration text is %zu tokens", *n);
	nf_tokenizer_free(own);
	return err ? nf_error_wrap(err, "calibration") : 0;
}

/* Where each matrix reads its input from, for the activation scales. */
static nf_ref_input input_of(int id)
{
	switch (id) {
	case NF_T_WO:
		return NF_REF_IN_WO;
	case NF_T_W1:
	case NF_T_W3:
		return NF_REF_IN_FFN;
	case NF_T_W2:
		return NF_REF_IN_W2;
	case NF_T_WCLS:
	case NF_T_EMB:
		return NF_REF_IN_CLS;
	default:
		return NF_REF_IN_ATT;
	}
}

/* The static activation scale of every matrix of every layer (fp8):
 * calibrated max |x| of its input / 448. */
static int calibrate_act_scales(nf_engine_quant *q, const nf_calib *c)
{
	size_t layers = (size_t)(q->n_layers > 0 ? q->n_layers : 1);
	if (!(q->act_scales = calloc((size_t)NF_T_COUNT * layers, sizeof(float))))
		return nf_error_set(NF_ENOMEM, "engine build: out of memory");
	for (int id = 0; id < NF_T_COUNT; id++)
		for (size_t l = 0; l < layers; l++)
			q->act_scales[(size_t)id * layers + l] =
				nf_calib_fp8_scale(c, (int)l, input_of(id));
	return 0;
}

/* AWQ's stand-in for the int4 quantizer while it searches: each group
 * rounded to the nearest of 16 levels between its min and max (the scale
 * and min as halves, as stored), the round-to-nearest quantization of the
 * AWQ paper.  The engine's own quantizer then searches each group's scale
 * further (quant_int4.c); the scaling AWQ picks helps both. */
static void int4_fakequant(float *out, const float *w, size_t rows, size_t cols, void *ctx)
{
	size_t group = (size_t)*(const int *)ctx;
	for (size_t r = 0; r < rows; r++)
		for (size_t c0 = 0; c0 < cols; c0 += group) {
			const float *x = w + r * cols + c0;
			float *y = out + r * cols + c0;
			size_t n = cols - c0 < group ? cols - c0 : group;
			float lo = x[0], hi = x[0];
			for (size_t i = 1; i < n; i++) {
				lo = x[i] < lo ? x[i] : lo;
				hi = x[i] > hi ? x[i] : hi;
			}
			float s = nf_f16_to_f32(nf_f32_to_f16((hi - lo) / 15.0f));
			float m = nf_f16_to_f32(nf_f32_to_f16(lo));
			float inv = s > 0.0f ? 1.0f / s : 0.0f;
			for (size_t i = 0; i < n; i++) {
				float q = (x[i] - m) * inv + 0.5f;
				q = q < 0.0f ? 0.0f : q > 15.0f ? 15.0f : (float)(int)q;
				y[i] = s * q + m;
			}
		}
}

int nf_engine_quant_prepare(nf_engine_quant *q, nf_ckpt_reader *r,
			    const nf_engine_build_opts *o)
{
	const nf_precision_info *info = nf_precision_info_of(o->precision);
	int *tokens = NULL;
	size_t n = 0;
	memset(q, 0, sizeof *q);
	q->reader = r;
	q->n_layers = r->cfg.n_layers;
	q->group = nf_precision_group(o->precision, o->group);
	q->threads = o->threads;
	int err = nf_pool_new(&q->pool, o->threads);
	if (err || !info->calibrated)
		return err;
	if (!(err = calibration_tokens(&tokens, &n, &r->cfg, o)))
		err = nf_calib_run_reader(r, tokens, n,
					  &(nf_calib_opts){.max_rows = info->awq ? AWQ_ROWS : 0,
							   .threads = o->threads},
					  &q->calib);
	if (!err && info->weights == NF_QUANT_FP8_E4M3)
		err = calibrate_act_scales(q, q->calib);
	q->awq = info->awq;
	free(tokens);
	return err;
}

int nf_engine_quant_layer(const nf_engine_quant *q, nf_model *layer, int l)
{
	if (!q->awq)
		return 0;
	nf_awq_choice choice[NF_AWQ_GROUP_COUNT];
	int group = q->group;
	nf_awq_opts ao = {.fakequant = int4_fakequant, .ctx = &group, .threads = q->threads};
	return nf_awq_apply_layer(layer, choice, q->calib, l, &ao, q->pool);
}

const float *nf_engine_quant_act_scales(const nf_engine_quant *q, int id)
{
	if (!q->act_scales || id < 0 || id >= NF_T_COUNT)
		return NULL;
	return q->act_scales + (size_t)id * (size_t)(q->n_layers > 0 ? q->n_layers : 1);
}

void nf_engine_quant_release(nf_engine_quant *q)
{
	nf_pool_free(q->pool);
	nf_calib_free(q->calib);
	free(q->act_scales);
	memset(q, 0, sizeof *q);
}

/* Rows per unit of parallel quantization: enough work to pay for a
 * hand-off, few enough that two cores split a small matrix. */
#define QUANT_UNIT_ROWS 64

/* Rows of a matrix in float32 (w) and where their quantized data and aux go. */
typedef struct quant_rows {
	const nf_wformat *f;
	char *data, *aux;
	const float *w;
	uint64_t rows, cols, row_aux; /* row_aux: aux bytes a row */
	int group;
} quant_rows;

static quant_rows rows_of(const nf_wformat *f, void *data, void *aux, const float *w,
			  uint64_t rows, uint64_t cols, int group)
{
	quant_rows m = {.f = f, .data = data, .aux = aux, .w = w, .rows = rows, .cols = cols,
			.group = group};
	m.row_aux = nf_wformat_aux_cols(f, cols, group) * nf_wformat_aux_size(f);
	return m;
}

/* Rows [r0, r0 + n) of m. */
static quant_rows rows_at(const quant_rows *m, uint64_t r0, uint64_t n)
{
	quant_rows s = *m;
	s.data += nf_wformat_data_bytes(m->f, r0, m->cols);
	s.aux = m->aux ? m->aux + r0 * m->row_aux : NULL;
	s.w += r0 * m->cols;
	s.rows = n;
	return s;
}

static int quantize(const quant_rows *s, const char *what)
{
	return nf_wformat_quantize(s->f, s->data, s->aux, s->w, (size_t)s->rows, (size_t)s->cols,
				   s->group, what);
}

/* Rows being quantized by the pool. */
typedef struct quant_job {
	quant_rows m;
	atomic_int failed; /* a unit met a weight the format cannot hold */
} quant_job;

static void quant_range(void *ctx, int u0, int u1, int tid)
{
	quant_job *j = ctx;
	uint64_t r0 = (uint64_t)u0 * QUANT_UNIT_ROWS, r1 = (uint64_t)u1 * QUANT_UNIT_ROWS;
	(void)tid;
	if (r1 > j->m.rows)
		r1 = j->m.rows;
	quant_rows s = rows_at(&j->m, r0, r1 - r0);
	if (quantize(&s, "quantize"))
		atomic_store(&j->failed, 1);
}

/* Rows of m across the pool: 0, 1 when a weight could not be held (the
 * worker's message is its own thread's), or an error. */
static int quantize_parallel(nf_pool *pool, const quant_rows *m)
{
	quant_job j = {.m = *m};
	atomic_init(&j.failed, 0);
	uint64_t units = (m->rows + QUANT_UNIT_ROWS - 1) / QUANT_UNIT_ROWS;
	if (units > NF_POOL_MAX_UNITS)
		return nf_error_set(NF_EINPUT, "quantize: %llu rows are too many",
				    (unsigned long long)m->rows);
	nf_pool_run_ranges(pool, quant_range, &j, (int)units, 1);
	return atomic_load(&j.failed) ? 1 : 0;
}

int nf_quantize_rows(nf_pool *pool, const nf_wformat *f, void *data, void *aux, const float *w,
		     uint64_t rows, uint64_t cols, int group)
{
	quant_rows m = rows_of(f, data, aux, w, rows, cols, group);
	int r = quantize_parallel(pool, &m);
	return r == 1 ? NF_EINPUT : r;
}

/* Layer slice l of tensor id taken over from the checkpoint's own int4
 * blocks (GGUF Q4_0/Q4_1, group 32, weights AWQ has not scaled): 1 when
 * done, 0 when there are none to take, or the error. */
static int take_over_int4(const quant_rows *slice, const nf_engine_quant *q, int id, int l,
			  const char *what)
{
	int type = -1;
	if (slice->f->kind != NF_QUANT_INT4_GROUP || slice->group != 32 || q->awq)
		return 0;
	const void *blocks = nf_ckpt_blocks(q->reader, id, l, &type);
	if (!blocks || (type != NF_GGML_Q4_0 && type != NF_GGML_Q4_1))
		return 0;
	int err = nf_quant_int4_from_gguf((uint8_t *)slice->data, (uint16_t *)(void *)slice->aux,
					  blocks, type, (size_t)slice->rows, (size_t)slice->cols);
	return err ? nf_error_wrap(err, "%s (layer %d)", what, l) : 1;
}

int nf_engine_quantize_slice(void *data, void *aux, const nf_fwd_src *s, int id, int l,
			     uint64_t rows, uint64_t cols, const float *w,
			     const nf_engine_quant *q, const char *what, bool per_layer)
{
	quant_rows slice = rows_of(nf_wformat_of(s->kind), data, aux, w, rows, cols, s->group);
	int taken = take_over_int4(&slice, q, id, l, what);
	if (taken)
		return taken < 0 ? taken : 0;
	int r = quantize_parallel(q->pool, &slice);
	if (r <= 0)
		return r;
	/* run again on this thread, whose error message is the caller's */
	char where[128];
	if (per_layer)
		snprintf(where, sizeof where, "%s (layer %d)", what, l);
	else
		snprintf(where, sizeof where, "%s", what);
	r = quantize(&slice, where);
	return r ? r : nf_error_set(NF_EINTERNAL, "%s: quantization failed on a worker only", where);
}
