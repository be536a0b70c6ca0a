/*
 * wformat.h - the weight formats as data: for each nf_quant_kind, how its
 * matrices are stored in an engine's weights.safetensors, what the kernels
 * take as activations, and the three things every user of a format does
 * (size it, quantize into it, read a row back).  The engine builder and
 * opener, the forward pass and the tactics all read this one table; the
 * packings themselves are docs/quantization.md's.
 *
 * A stored matrix is a data tensor `<name>` and, for the formats that have
 * them, beside it:
 *   `<name>.scale`      F32 (.., rows): per-output-channel scales
 *   `<name>.gsm`        F16 (.., rows, groups * 2): per-group scale and min
 *   `<name>.act_scale`  F32 (..): the static activation scale (fp8), one
 *                       per layer
 * where `..` is the layer axis of per-layer tensors.
 */
#ifndef NF_ENGINE_WFORMAT_H
#define NF_ENGINE_WFORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/backend.h"
#include "engine/safetensors.h"

/* What the kernels of a format take as activations (engine/backend.h). */
typedef enum nf_act_form {
	NF_ACT_F32, /* the float vectors as they are */
	NF_ACT_Q8,  /* int8 per vector, one scale each (quantize_q8) */
	NF_ACT_F8,  /* rounded to the e4m3 grid by the static activation scale (round_f8) */
} nf_act_form;

/* What is stored beside a format's data tensor. */
typedef enum nf_wformat_aux {
	NF_AUX_NONE,
	NF_AUX_ROW_SCALE, /* `.scale`: one F32 per row */
	NF_AUX_GROUP_SM,  /* `.gsm`: an F16 scale and min per (row, group) */
} nf_wformat_aux;

typedef struct nf_wformat {
	nf_quant_kind kind;
	const char *name;     /* config.json "quantization.weights", tactics.json "dtype" */
	nf_dtype dtype;       /* the data tensor's safetensors dtype */
	unsigned bits;        /* bits per weight in the data tensor */
	nf_wformat_aux aux;
	nf_act_form act;
	int act_scale;        /* 1: a static activation scale is stored (`.act_scale`) */
} nf_wformat;

/* The format of kind k (NULL for a kind out of range). */
const nf_wformat *nf_wformat_of(nf_quant_kind k);

/* Bytes of the data tensor of a (rows, cols) matrix; 0 on overflow.  The
 * 4-bit format stores 16 bytes per block of 32 columns, the last block of
 * a row zero-padded. */
uint64_t nf_wformat_data_bytes(const nf_wformat *f, uint64_t rows, uint64_t cols);
/* The data tensor's last dimension (cols, or 16 bytes a block of 32 for 4 bits). */
uint64_t nf_wformat_data_cols(const nf_wformat *f, uint64_t cols);
/* Elements of the aux tensor's last dimension for one row (0: none). */
uint64_t nf_wformat_aux_cols(const nf_wformat *f, uint64_t cols, int group);
/* Bytes of one aux element (4 for scales, 2 for halves). */
size_t nf_wformat_aux_size(const nf_wformat *f);

/* Whether a (rows, cols) matrix can be stored in f with this group (int4:
 * group 32, 64 or 128); NF_EINPUT naming `what` when not. */
int nf_wformat_check_shape(const nf_wformat *f, uint64_t rows, uint64_t cols, int group,
			   const char *what);

/* NF_EINPUT naming `what`, the row and the column of the first of the
 * rows x cols floats at w that is NaN or infinite; 0 when none is. */
int nf_wformat_check_finite(const float *w, size_t rows, size_t cols, const char *what);

/* Quantize `rows` rows of `cols` floats into data (nf_wformat_data_bytes)
 * and aux (rows * nf_wformat_aux_cols elements); NF_EINPUT for a weight the
 * format cannot hold (NaN, infinite, out of range), naming `what` and the
 * row and column. */
int nf_wformat_quantize(const nf_wformat *f, void *data, void *aux, const float *w, size_t rows,
			size_t cols, int group, const char *what);

/* Row r of m as floats, whatever its kind and layout (the embedding lookup). */
void nf_wformat_row_f32(float *out, const nf_bk_matrix *m, size_t r);

/* Bytes a decode step reads of m (data and aux). */
uint64_t nf_wformat_matrix_bytes(const nf_bk_matrix *m);

#endif
