/*
 * engine_weights.c - writing and mapping an engine's weights.safetensors in
 * the format of its precision (engine_weights.h).
 */
#include "engine/engine_weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/arch.h"
#include "engine/engine_quantize.h"
#include "engine/wformat.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

/* A tensor of the engine file: the table's engine name and shape, layers
 * stacked first. */
typedef struct tensor_spec {
	const nf_arch_tensor *t;
	int ndim;
	uint64_t shape[3];
	uint64_t layers; /* 1 for a tensor that is not per layer */
	uint64_t rows, cols; /* of one layer's matrix (cols 1 for a vector) */
} tensor_spec;

static int tensor_specs(tensor_spec *out, const nf_model_config *c)
{
	const nf_arch *a = nf_arch_get(c->arch);
	int n = 0;
	for (size_t i = 0; i < a->n_tensors; i++) {
		const nf_arch_tensor *t = &a->tensors[i];
		tensor_spec *s = &out[n];
		if (!nf_arch_present(t, c))
			continue;
		s->t = t;
		s->ndim = 0;
		s->layers = t->per_layer ? (uint64_t)c->n_layers : 1;
		if (t->per_layer)
			s->shape[s->ndim++] = (uint64_t)c->n_layers;
		s->rows = nf_arch_dim_value(t->rows, c);
		s->shape[s->ndim++] = s->rows;
		s->cols = 1;
		if (t->cols != NF_D_NONE)
			s->shape[s->ndim++] = s->cols = nf_arch_dim_value(t->cols, c);
		n++;
	}
	return n;
}

/* The kind a tensor is stored in: the precision's for matrices. */
static nf_quant_kind spec_kind(const tensor_spec *s, nf_precision p)
{
	return s->t->matrix ? nf_precision_info_of(p)->weights : NF_QUANT_NONE;
}

/* ---- build ---- */

static void *keep_alloc(nf_engine_wbufs *keep, uint64_t bytes, int *err)
{
	void *p;
	if (*err)
		return NULL;
	if (keep->n >= (int)(sizeof keep->p / sizeof keep->p[0]) || bytes > SIZE_MAX ||
	    !(p = malloc(bytes ? (size_t)bytes : 1))) {
		*err = nf_error_set(NF_ENOMEM, "engine build: out of memory");
		return NULL;
	}
	keep->p[keep->n++] = p;
	return p;
}

void nf_engine_weights_release(nf_engine_wbufs *keep)
{
	for (int i = 0; i < keep->n; i++)
		free(keep->p[i]);
	keep->n = 0;
}

/* The shapes of the tensors that a matrix spec s in format f is stored as:
 * data, aux (beside it) and the activation scale (one per layer). */
static void stored_shapes(const tensor_spec *s, const nf_wformat *f, int group, uint64_t *data,
			  uint64_t *aux, int *aux_ndim)
{
	int k = 0;
	if (s->t->per_layer) {
		data[k] = aux[k] = s->layers;
		k++;
	}
	data[k] = aux[k] = s->rows;
	data[k + 1] = nf_wformat_data_cols(f, s->cols);
	aux[k + 1] = nf_wformat_aux_cols(f, s->cols, group);
	/* a per-row scale drops the last axis, a per-group one keeps it */
	*aux_ndim = f->aux == NF_AUX_ROW_SCALE ? k + 1 : k + 2;
}

/* Quantize matrix spec s of m (rows of every layer at once) into f and add
 * its tensors to wr; *src gets where they are. */
static int add_matrix(nf_st_writer *wr, nf_fwd_src *src, nf_engine_wbufs *keep,
		      const tensor_spec *s, const nf_model *m, const nf_engine_quant *q)
{
	const nf_wformat *f = nf_wformat_of(src->kind);
	const char *name = s->t->name;
	uint64_t rows = s->layers * s->rows, dshape[3], ashape[3];
	uint64_t dbytes = nf_wformat_data_bytes(f, rows, s->cols);
	uint64_t acount = rows * nf_wformat_aux_cols(f, s->cols, src->group);
	int err = 0, andim;
	char aname[80];
	void *data = keep_alloc(keep, dbytes, &err);
	void *aux = f->aux != NF_AUX_NONE ? keep_alloc(keep, acount * nf_wformat_aux_size(f), &err)
					  : NULL;
	if (err || (err = nf_engine_quantize_matrix(data, aux, src, s->t->id, s->layers, s->rows,
						    s->cols, m, q, name)))
		return err;
	stored_shapes(s, f, src->group, dshape, ashape, &andim);
	if ((err = nf_st_writer_add(wr, name, f->dtype, s->ndim, dshape, data, dbytes)))
		return err;
	if (aux) {
		snprintf(aname, sizeof aname, "%s%s", name,
			 f->aux == NF_AUX_ROW_SCALE ? ".scale" : ".gsm");
		err = nf_st_writer_add(wr, aname, f->aux == NF_AUX_ROW_SCALE ? NF_DTYPE_F32 : NF_DTYPE_F16,
				       andim, ashape, aux, acount * nf_wformat_aux_size(f));
	}
	if (!err && f->act_scale) {
		/* q's scales go with q: the writer and the views need a copy that lives on */
		uint64_t n = s->layers;
		float *copy = keep_alloc(keep, n * sizeof(float), &err);
		if (!err && !src->act_scale)
			err = nf_error_set(NF_EINTERNAL, "engine build: %s has no activation scale", name);
		if (!err) {
			memcpy(copy, src->act_scale, n * sizeof(float));
			src->act_scale = copy;
			snprintf(aname, sizeof aname, "%s.act_scale", name);
			err = nf_st_writer_add(wr, aname, NF_DTYPE_F32, 1, &n, copy, n * 4);
		}
	}
	src->data = data;
	src->aux = aux;
	return err;
}

int nf_engine_weights_add(nf_st_writer *wr, nf_fwd_weights *fw, nf_engine_wbufs *keep,
			  const nf_model *m, const nf_engine_build_opts *o)
{
	tensor_spec specs[NF_T_COUNT];
	nf_engine_quant q = {0};
	int n = tensor_specs(specs, &m->cfg), err;
	if ((err = nf_engine_quant_prepare(&q, m, o)))
		return err;
	for (int i = 0; i < n && !err; i++) {
		const tensor_spec *s = &specs[i];
		const float *w = *nf_model_slot((nf_model *)q.model, s->t->id);
		nf_fwd_src src = {.kind = spec_kind(s, o->precision),
				  .group = nf_precision_group(o->precision, o->group)};
		if (!w) {
			err = nf_error_set(NF_EINTERNAL, "engine build: model lacks %s", s->t->name);
			break;
		}
		if (src.kind == NF_QUANT_NONE) {
			src.data = w;
			err = nf_wformat_check_finite(w, (size_t)(s->layers * s->rows), (size_t)s->cols,
						      s->t->name);
			if (!err)
				err = nf_st_writer_add(wr, s->t->name, NF_DTYPE_F32, s->ndim, s->shape,
						       w, s->layers * s->rows * s->cols * 4);
		} else {
			src.act_scale = nf_engine_quant_act_scales(&q, s->t->id);
			err = add_matrix(wr, &src, keep, s, q.model, &q);
		}
		if (!err)
			nf_fwd_bind_src(fw, &m->cfg, s->t->id, &src);
	}
	/* the views keep pointing into q's model (vectors) until the caller
	 * releases keep, which now owns it */
	if (!err && q.owned && keep->n < (int)(sizeof keep->p / sizeof keep->p[0]))
		keep->p[keep->n++] = nf_engine_quant_detach(&q);
	nf_engine_quant_release(&q);
	return err;
}

json_t *nf_engine_weights_describe(nf_precision p, int group)
{
	const nf_precision_info *i = nf_precision_info_of(p);
	switch (i->weights) {
	case NF_QUANT_NONE:
		return json_pack("{s:s}", "weights", "fp32");
	case NF_QUANT_INT8_ROW:
		return json_pack("{s:s, s:s, s:s, s:s, s:s}", "weights", "int8", "granularity",
				 "per-output-channel", "scale_dtype", "F32", "scale_tensor_suffix",
				 ".scale", "activations", "int8 per-vector dynamic");
	case NF_QUANT_INT4_GROUP:
		return json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:b}", "weights", "int4",
				 "granularity", "per-group asymmetric (scale, min)", "group_size",
				 group, "scale_dtype", "F16", "scale_tensor_suffix", ".gsm",
				 "activations", "int8 per-vector dynamic", "awq", i->awq);
	case NF_QUANT_FP8_E4M3:
		return json_pack("{s:s, s:s, s:s, s:s, s:s}", "weights", "fp8-e4m3", "granularity",
				 "per-output-channel", "scale_dtype", "F32", "scale_tensor_suffix",
				 ".scale", "activations",
				 "fp8-e4m3, per-tensor static scale (.act_scale), calibrated");
	default:
		return json_pack("{s:s, s:s}", "weights", nf_wformat_of(i->weights)->name,
				 "activations", "float32");
	}
}

/* ---- open ---- */

/* The tensor `name` + suffix of st if its dtype, dims and shape are these. */
static const nf_st_tensor *find_as(const nf_st_file *st, const char *name, const char *suffix,
				   nf_dtype dtype, int ndim, const uint64_t *shape)
{
	char full[80];
	snprintf(full, sizeof full, "%s%s", name, suffix);
	const nf_st_tensor *t = nf_st_find(st, full);
	int ok = t && t->dtype == dtype && t->ndim == ndim;
	for (int d = 0; ok && d < ndim; d++)
		ok = t->shape[d] == shape[d];
	return ok ? t : NULL;
}

static int shape_error(const char *path, const char *name, const char *suffix, nf_dtype dtype,
		       int ndim, const uint64_t *shape)
{
	return nf_error_set(NF_EINPUT,
			    "%s: tensor %s%s is missing or not %s with shape [%llu, %llu%s%llu] (%d dims)",
			    path, name, suffix, nf_dtype_name(dtype), (unsigned long long)shape[0],
			    (unsigned long long)shape[1], ndim > 2 ? ", " : "",
			    ndim > 2 ? (unsigned long long)shape[2] : 0ull, ndim);
}

/* Map matrix spec s stored in format f: its data, aux and activation scale. */
static int map_matrix(nf_fwd_src *src, const nf_st_file *st, const tensor_spec *s,
		      const char *path, nf_engine_rebase_fn rebase, const void *ctx)
{
	const nf_wformat *f = nf_wformat_of(src->kind);
	const char *name = s->t->name;
	uint64_t dshape[3], ashape[3];
	int andim, err;
	if ((err = nf_wformat_check_shape(f, s->rows, s->cols, src->group, path)))
		return err;
	stored_shapes(s, f, src->group, dshape, ashape, &andim);
	const nf_st_tensor *t = find_as(st, name, "", f->dtype, s->ndim, dshape);
	if (!t)
		return shape_error(path, name, "", f->dtype, s->ndim, dshape);
	src->data = rebase(ctx, t->data);
	if (f->aux != NF_AUX_NONE) {
		int rs = f->aux == NF_AUX_ROW_SCALE;
		nf_dtype dt = rs ? NF_DTYPE_F32 : NF_DTYPE_F16;
		const nf_st_tensor *a = find_as(st, name, rs ? ".scale" : ".gsm", dt, andim, ashape);
		if (!a || (uintptr_t)a->data % nf_dtype_size(dt))
			return shape_error(path, name, rs ? ".scale" : ".gsm", dt, andim, ashape);
		src->aux = rebase(ctx, a->data);
	}
	if (f->act_scale) {
		const nf_st_tensor *a = find_as(st, name, ".act_scale", NF_DTYPE_F32, 1, &s->layers);
		if (!a || (uintptr_t)a->data % 4)
			return shape_error(path, name, ".act_scale", NF_DTYPE_F32, 1, &s->layers);
		src->act_scale = rebase(ctx, a->data);
	}
	if ((uintptr_t)t->data % (f->bits >= 8 ? f->bits / 8 : 1))
		return nf_error_set(NF_EINPUT, "%s: tensor %s is not aligned", path, name);
	return 0;
}

int nf_engine_weights_map(nf_fwd_weights *w, const nf_model_config *cfg, const nf_st_file *st,
			  nf_precision p, int group, const char *path, nf_engine_rebase_fn rebase,
			  const void *ctx)
{
	tensor_spec specs[NF_T_COUNT];
	int n = tensor_specs(specs, cfg), err = 0;
	const char *meta = nf_st_metadata(st, "precision");
	if (!meta || strcmp(meta, nf_precision_name(p)) != 0)
		return nf_error_set(NF_EINPUT, "%s: precision metadata %s does not match config %s",
				    path, meta ? meta : "(none)", nf_precision_name(p));
	for (int i = 0; i < n && !err; i++) {
		const tensor_spec *s = &specs[i];
		nf_fwd_src src = {.kind = spec_kind(s, p), .group = group};
		if (src.kind != NF_QUANT_NONE) {
			err = map_matrix(&src, st, s, path, rebase, ctx);
		} else {
			const nf_st_tensor *t =
				find_as(st, s->t->name, "", NF_DTYPE_F32, s->ndim, s->shape);
			if (!t)
				err = shape_error(path, s->t->name, "", NF_DTYPE_F32, s->ndim, s->shape);
			else if ((uintptr_t)t->data % 4)
				err = nf_error_set(NF_EINPUT, "%s: tensor %s is not 4-byte aligned",
						   path, s->t->name);
			else
				src.data = rebase(ctx, t->data);
		}
		if (!err)
			nf_fwd_bind_src(w, cfg, s->t->id, &src);
	}
	return err;
}
