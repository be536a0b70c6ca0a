/*
 * engine_weights.c - writing and mapping an engine's weights.safetensors in
 * the format of its precision (engine_weights.h).
 */
#include "engine/engine_weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/arch.h"
#include "engine/ckpt_reader.h"
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

/* A tensor as the file stores it: one layer's slice of its data and aux in
 * bytes, and the names of what goes beside it. */
typedef struct stored {
	tensor_spec s;
	nf_fwd_src src;     /* kind and group */
	const nf_wformat *f;
	uint64_t data_bytes; /* one slice */
	uint64_t aux_bytes;  /* one slice; 0 when none */
	char aux_name[80], act_name[80];
} stored;

static stored stored_of(const tensor_spec *s, const nf_engine_build_opts *o)
{
	stored st = {.s = *s};
	st.src = (nf_fwd_src){.kind = spec_kind(s, o->precision),
			      .group = nf_precision_group(o->precision, o->group)};
	st.f = nf_wformat_of(st.src.kind);
	st.data_bytes = st.src.kind == NF_QUANT_NONE ? s->rows * s->cols * 4
						     : nf_wformat_data_bytes(st.f, s->rows, s->cols);
	if (st.src.kind != NF_QUANT_NONE && st.f->aux != NF_AUX_NONE)
		st.aux_bytes = s->rows * nf_wformat_aux_cols(st.f, s->cols, st.src.group) *
			       nf_wformat_aux_size(st.f);
	snprintf(st.aux_name, sizeof st.aux_name, "%s%s", s->t->name,
		 st.f->aux == NF_AUX_ROW_SCALE ? ".scale" : ".gsm");
	snprintf(st.act_name, sizeof st.act_name, "%s.act_scale", s->t->name);
	return st;
}

int nf_engine_weights_bytes(uint64_t *out, const nf_model_config *cfg, nf_precision p, int group)
{
	tensor_spec specs[NF_T_COUNT];
	nf_engine_build_opts o = {.precision = p, .group = group};
	uint64_t total = 0, slice, all;
	int n = tensor_specs(specs, cfg);
	for (int i = 0; i < n; i++) {
		stored st = stored_of(&specs[i], &o);
		/* act_scale: one float per layer, where the format keeps one */
		if (!nf_u64_add(&slice, st.data_bytes, st.aux_bytes) ||
		    !nf_u64_mul(&all, slice, st.s.layers) || !nf_u64_add(&total, total, all) ||
		    (st.src.kind != NF_QUANT_NONE && st.f->act_scale &&
		     !nf_u64_add(&total, total, 4 * st.s.layers)))
			return nf_error_set(NF_EINPUT, "the weights of this model overflow");
	}
	*out = total;
	return 0;
}

/* Reserve st's tensors in the file: data, aux and activation scales. */
static int reserve(nf_st_writer *wr, const stored *st)
{
	const tensor_spec *s = &st->s;
	uint64_t dshape[3], ashape[3], layers = s->layers;
	int andim, err;
	if (st->src.kind == NF_QUANT_NONE)
		return nf_st_writer_reserve(wr, s->t->name, NF_DTYPE_F32, s->ndim, s->shape,
					    layers * st->data_bytes);
	stored_shapes(s, st->f, st->src.group, dshape, ashape, &andim);
	if ((err = nf_st_writer_reserve(wr, s->t->name, st->f->dtype, s->ndim, dshape,
					layers * st->data_bytes)))
		return err;
	if (st->aux_bytes &&
	    (err = nf_st_writer_reserve(wr, st->aux_name, st->f->aux == NF_AUX_ROW_SCALE
							? NF_DTYPE_F32 : NF_DTYPE_F16,
					andim, ashape, layers * st->aux_bytes)))
		return err;
	if (st->f->act_scale)
		err = nf_st_writer_reserve(wr, st->act_name, NF_DTYPE_F32, 1, &layers, layers * 4);
	return err;
}

/* What a build holds while it streams: one layer's floats, a global
 * tensor's floats, and one quantized slice. */
typedef struct stream_bufs {
	nf_model *layer;
	float *global;
	void *data, *aux;
} stream_bufs;

static int bufs_alloc(stream_bufs *b, const stored *st, int n, const nf_model_config *cfg)
{
	uint64_t global = 0, data = 1, aux = 1;
	for (int i = 0; i < n; i++) {
		if (!st[i].s.t->per_layer && st[i].s.rows * st[i].s.cols > global)
			global = st[i].s.rows * st[i].s.cols;
		data = st[i].data_bytes > data ? st[i].data_bytes : data;
		aux = st[i].aux_bytes > aux ? st[i].aux_bytes : aux;
	}
	int err = nf_model_alloc_layer(&b->layer, cfg);
	if (err)
		return err;
	if (global > SIZE_MAX / 4 || !(b->global = malloc((size_t)global * 4)) ||
	    !(b->data = malloc((size_t)data)) || !(b->aux = malloc((size_t)aux)))
		return nf_error_set(NF_ENOMEM, "engine build: out of memory");
	return 0;
}

static void bufs_release(stream_bufs *b)
{
	nf_model_free(b->layer);
	free(b->global);
	free(b->data);
	free(b->aux);
}

/* Slice l of st (floats at w) into the file, in its format. */
static int put_slice(nf_st_writer *wr, const stored *st, int l, const float *w,
		     const nf_engine_quant *q, stream_bufs *b)
{
	const tensor_spec *s = &st->s;
	uint64_t at = (uint64_t)l;
	char what[112];
	if (s->t->per_layer)
		snprintf(what, sizeof what, "%s (layer %d)", s->t->name, l);
	else
		snprintf(what, sizeof what, "%s", s->t->name);
	if (st->src.kind == NF_QUANT_NONE) {
		int err = nf_wformat_check_finite(w, (size_t)s->rows, (size_t)s->cols, what);
		return err ? err : nf_st_writer_put(wr, s->t->name, at * st->data_bytes, w,
						    (size_t)st->data_bytes);
	}
	int err = nf_engine_quantize_slice(b->data, st->aux_bytes ? b->aux : NULL, &st->src,
					   s->t->id, l, s->rows, s->cols, w, q, s->t->name,
					   s->t->per_layer);
	if (!err)
		err = nf_st_writer_put(wr, s->t->name, at * st->data_bytes, b->data,
				       (size_t)st->data_bytes);
	if (!err && st->aux_bytes)
		err = nf_st_writer_put(wr, st->aux_name, at * st->aux_bytes, b->aux,
				       (size_t)st->aux_bytes);
	return err;
}

/* The tensors outside the layers, one at a time. */
static int put_globals(nf_st_writer *wr, const stored *st, int n, const nf_engine_quant *q,
		       stream_bufs *b)
{
	for (int i = 0; i < n; i++) {
		if (st[i].s.t->per_layer)
			continue;
		int err = nf_ckpt_read(q->reader, st[i].s.t->id, 0, b->global);
		if (!err)
			err = put_slice(wr, &st[i], 0, b->global, q, b);
		if (err)
			return err;
		nf_ckpt_drop(q->reader, st[i].s.t->id, 0);
	}
	return 0;
}

/* Every layer: read whole, made ready (AWQ), each tensor's slice stored. */
static int put_layers(nf_st_writer *wr, const stored *st, int n, const nf_engine_quant *q,
		      stream_bufs *b)
{
	for (int l = 0; l < q->n_layers; l++) {
		int err = nf_ckpt_read_layer(q->reader, b->layer, l);
		if (!err)
			err = nf_engine_quant_layer(q, b->layer, l);
		for (int i = 0; i < n && !err; i++)
			if (st[i].s.t->per_layer)
				err = put_slice(wr, &st[i], l, *nf_model_slot(b->layer, st[i].s.t->id),
						q, b);
		if (err)
			return err;
	}
	return 0;
}

static int put_act_scales(nf_st_writer *wr, const stored *st, int n, const nf_engine_quant *q)
{
	for (int i = 0; i < n; i++) {
		if (st[i].src.kind == NF_QUANT_NONE || !st[i].f->act_scale)
			continue;
		const float *a = nf_engine_quant_act_scales(q, st[i].s.t->id);
		if (!a)
			return nf_error_set(NF_EINTERNAL, "engine build: %s has no activation scale",
					    st[i].s.t->name);
		int err = nf_st_writer_put(wr, st[i].act_name, 0, a, (size_t)st[i].s.layers * 4);
		if (err)
			return err;
	}
	return 0;
}

int nf_engine_weights_write(nf_st_writer *wr, const char *path, nf_ckpt_reader *r,
			    const nf_engine_build_opts *o)
{
	tensor_spec specs[NF_T_COUNT];
	stored st[NF_T_COUNT];
	stream_bufs b = {0};
	nf_engine_quant q = {0};
	int n = tensor_specs(specs, &r->cfg), err = 0;
	for (int i = 0; i < n && !err; i++) {
		st[i] = stored_of(&specs[i], o);
		err = reserve(wr, &st[i]);
	}
	if (!err)
		err = nf_engine_quant_prepare(&q, r, o);
	if (!err)
		err = bufs_alloc(&b, st, n, &r->cfg);
	if (!err)
		err = nf_st_writer_begin(wr, path);
	if (!err)
		err = put_globals(wr, st, n, &q, &b);
	if (!err)
		err = put_layers(wr, st, n, &q, &b);
	if (!err)
		err = put_act_scales(wr, st, n, &q);
	if (!err)
		err = nf_st_writer_commit(wr);
	bufs_release(&b);
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
	/* read from the codes, not trusted from the file: an engine of an
	 * older nimfactory may hold subnormal codes */
	if (src->kind == NF_QUANT_FP8_E4M3)
		src->f8_normal = nf_fp8_codes_normal(src->data, (size_t)(s->layers * s->rows * s->cols));
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
