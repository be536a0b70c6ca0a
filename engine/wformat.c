/*
 * wformat.c - the weight-format table and what every user of a format does
 * with it (wformat.h).
 */
#include "engine/wformat.h"

#include <math.h>
#include <string.h>

#include "engine/layout.h"
#include "engine/quant.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

static const nf_wformat formats[NF_QUANT_KIND_COUNT] = {
	[NF_QUANT_NONE] = {NF_QUANT_NONE, "fp32", NF_DTYPE_F32, 32, NF_AUX_NONE, NF_ACT_F32, 0},
	[NF_QUANT_INT8_ROW] = {NF_QUANT_INT8_ROW, "int8", NF_DTYPE_I8, 8, NF_AUX_ROW_SCALE, NF_ACT_Q8, 0},
	[NF_QUANT_INT4_GROUP] = {NF_QUANT_INT4_GROUP, "int4", NF_DTYPE_U8, 4, NF_AUX_GROUP_SM, NF_ACT_Q8, 0},
	[NF_QUANT_FP8_E4M3] = {NF_QUANT_FP8_E4M3, "fp8-e4m3", NF_DTYPE_F8_E4M3, 8, NF_AUX_ROW_SCALE,
			       NF_ACT_F8, 1},
	[NF_QUANT_F16] = {NF_QUANT_F16, "fp16", NF_DTYPE_F16, 16, NF_AUX_NONE, NF_ACT_F32, 0},
	[NF_QUANT_BF16] = {NF_QUANT_BF16, "bf16", NF_DTYPE_BF16, 16, NF_AUX_NONE, NF_ACT_F32, 0},
};

const nf_wformat *nf_wformat_of(nf_quant_kind k)
{
	if ((int)k < 0 || k >= NF_QUANT_KIND_COUNT)
		return NULL;
	return &formats[k];
}

uint64_t nf_wformat_data_cols(const nf_wformat *f, uint64_t cols)
{
	return f->bits == 4 ? nf_quant_int4_row_bytes(cols) : cols;
}

uint64_t nf_wformat_data_bytes(const nf_wformat *f, uint64_t rows, uint64_t cols)
{
	uint64_t n;
	if (!nf_u64_mul(&n, rows, nf_wformat_data_cols(f, cols)) ||
	    (f->bits > 8 && !nf_u64_mul(&n, n, f->bits / 8)))
		return 0;
	return n;
}

uint64_t nf_wformat_aux_cols(const nf_wformat *f, uint64_t cols, int group)
{
	switch (f->aux) {
	case NF_AUX_ROW_SCALE:
		return 1;
	case NF_AUX_GROUP_SM:
		return 2 * (uint64_t)nf_quant_int4_groups((size_t)cols, group);
	case NF_AUX_NONE:
		break;
	}
	return 0;
}

size_t nf_wformat_aux_size(const nf_wformat *f)
{
	return f->aux == NF_AUX_GROUP_SM ? sizeof(uint16_t) : sizeof(float);
}

int nf_wformat_check_shape(const nf_wformat *f, uint64_t rows, uint64_t cols, int group,
			   const char *what)
{
	if (f->kind != NF_QUANT_INT4_GROUP)
		return 0;
	if (group != 32 && group != 64 && group != 128)
		return nf_error_set(NF_EINPUT, "%s: int4 group size %d (expected 32, 64 or 128)", what,
				    group);
	(void)rows;
	(void)cols;
	return 0;
}

int nf_wformat_check_finite(const float *w, size_t rows, size_t cols, const char *what)
{
	for (size_t r = 0; r < rows; r++)
		for (size_t c = 0; c < cols; c++)
			if (!isfinite(w[r * cols + c]))
				return nf_error_set(NF_EINPUT, "%s: weight [%zu, %zu] is %s", what, r, c,
						    isnan(w[r * cols + c]) ? "NaN" : "infinite");
	return 0;
}

int nf_wformat_quantize(const nf_wformat *f, void *data, void *aux, const float *w, size_t rows,
			size_t cols, int group, const char *what)
{
	int err = nf_wformat_check_finite(w, rows, cols, what);
	if (err || (err = nf_wformat_check_shape(f, rows, cols, group, what)))
		return err;
	switch (f->kind) {
	case NF_QUANT_NONE:
		memcpy(data, w, rows * cols * sizeof(float));
		return 0;
	case NF_QUANT_INT8_ROW:
		nf_quant_int8_rows(data, aux, w, rows, cols);
		return 0;
	case NF_QUANT_INT4_GROUP:
		err = nf_quant_int4_rows(data, aux, w, rows, cols, group);
		break;
	case NF_QUANT_FP8_E4M3:
		err = nf_quant_fp8_rows(data, aux, w, rows, cols);
		break;
	case NF_QUANT_F16:
	case NF_QUANT_BF16:
		err = nf_quant_h16(data, w, rows * cols, f->kind);
		break;
	default:
		return nf_error_set(NF_EINTERNAL, "%s: no quantizer for kind %d", what, (int)f->kind);
	}
	return err ? nf_error_wrap(err, "%s", what) : 0;
}

void nf_wformat_row_f32(float *out, const nf_bk_matrix *m, size_t r)
{
	size_t cols = (size_t)m->cols;
	switch (m->kind) {
	case NF_QUANT_NONE:
	case NF_QUANT_INT8_ROW:
		nf_bk_row_f32(out, m, r); /* the two tileable kinds */
		return;
	case NF_QUANT_INT4_GROUP:
		nf_quant_int4_dequant_row(out, m->q4, m->gsm, r, cols, m->group);
		return;
	case NF_QUANT_FP8_E4M3:
		for (size_t c = 0; c < cols; c++)
			out[c] = m->scale[r] * nf_fp8_e4m3_to_f32(m->f8[r * cols + c]);
		return;
	case NF_QUANT_F16:
		for (size_t c = 0; c < cols; c++)
			out[c] = nf_f16_to_f32(m->h16[r * cols + c]);
		return;
	case NF_QUANT_BF16:
		for (size_t c = 0; c < cols; c++)
			out[c] = nf_bf16_to_f32(m->h16[r * cols + c]);
		return;
	default:
		memset(out, 0, cols * sizeof(float));
	}
}

uint64_t nf_wformat_matrix_bytes(const nf_bk_matrix *m)
{
	const nf_wformat *f = nf_wformat_of(m->kind);
	if (!f)
		return 0;
	uint64_t rows = (uint64_t)m->rows, cols = (uint64_t)m->cols;
	return nf_wformat_data_bytes(f, rows, cols) +
	       rows * nf_wformat_aux_cols(f, cols, m->group) * nf_wformat_aux_size(f);
}
