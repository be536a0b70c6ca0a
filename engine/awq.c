/*
 * awq.c - AWQ over a model (awq.h): for each layer and group of matrices
 * that share an input, search the exponent on the original weights and the
 * calibration sample (awq_search.c), then scale the copy's columns and fold
 * 1/s into the op before.
 */
#include "engine/awq.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

/* The shapes of one layer, in size_t for the index arithmetic. */
typedef struct layer_dims {
	size_t dim, kv_dim, hidden, head_size;
	size_t kv_mul; /* query heads per KV head */
} layer_dims;

static layer_dims dims_of(const nf_model_config *c)
{
	layer_dims d = {(size_t)c->dim, (size_t)nf_model_kv_dim(c), (size_t)c->hidden_dim,
			(size_t)nf_model_head_size(c), (size_t)(c->n_heads / c->n_kv_heads)};
	return d;
}

/* Matrix `base` (layer, rows, cols) of layer l. */
static float *layer_matrix(float *base, size_t l, size_t rows, size_t cols)
{
	return base + l * rows * cols;
}

/* The input site each group reads. */
static nf_ref_input group_site(nf_awq_group g)
{
	static const nf_ref_input site[NF_AWQ_GROUP_COUNT] = {
		[NF_AWQ_QKV] = NF_REF_IN_ATT,
		[NF_AWQ_O] = NF_REF_IN_WO,
		[NF_AWQ_UPGATE] = NF_REF_IN_FFN,
		[NF_AWQ_DOWN] = NF_REF_IN_W2,
	};
	return site[g];
}

/* A group's matrices in layer l of m: up to three, all of width cols. */
typedef struct group_mats {
	float *w[3];
	size_t rows[3];
	size_t n, cols;
} group_mats;

static group_mats group_matrices(const nf_model *m, size_t l, nf_awq_group g)
{
	const nf_model_weights *w = &m->w;
	layer_dims d = dims_of(&m->cfg);
	group_mats gm = {.cols = d.dim};
	switch (g) {
	case NF_AWQ_QKV:
		gm = (group_mats){{layer_matrix(w->wq, l, d.dim, d.dim),
				   layer_matrix(w->wk, l, d.kv_dim, d.dim),
				   layer_matrix(w->wv, l, d.kv_dim, d.dim)},
				  {d.dim, d.kv_dim, d.kv_dim}, 3, d.dim};
		break;
	case NF_AWQ_O:
		gm = (group_mats){{layer_matrix(w->wo, l, d.dim, d.dim)}, {d.dim}, 1, d.dim};
		break;
	case NF_AWQ_UPGATE:
		gm = (group_mats){{layer_matrix(w->w1, l, d.hidden, d.dim),
				   layer_matrix(w->w3, l, d.hidden, d.dim)},
				  {d.hidden, d.hidden}, 2, d.dim};
		break;
	case NF_AWQ_DOWN:
		gm = (group_mats){{layer_matrix(w->w2, l, d.dim, d.hidden)}, {d.dim}, 1, d.hidden};
		break;
	default:
		break;
	}
	return gm;
}

/* wo's input channel c = (head h, i) reads v channel (h / kv_mul, i).  Query
 * heads that share a KV head must share the scale (1/s goes into one v
 * row), so each channel gets the mean statistic of the heads sharing it. */
static void tie_to_kv_heads(float *tied, const float *mean_abs, layer_dims d)
{
	for (size_t c = 0; c < d.dim; c++) {
		size_t h = c / d.head_size, i = c % d.head_size, first = h / d.kv_mul * d.kv_mul;
		float sum = 0.0f;
		for (size_t k = first; k < first + d.kv_mul; k++)
			sum += mean_abs[k * d.head_size + i];
		tied[c] = sum / (float)d.kv_mul;
	}
}

static void scale_columns(float *w, size_t rows, size_t cols, const float *s)
{
	for (size_t r = 0; r < rows; r++)
		for (size_t c = 0; c < cols; c++)
			w[r * cols + c] *= s[c];
}

static void divide(float *v, size_t n, const float *s)
{
	for (size_t c = 0; c < n; c++)
		v[c] /= s[c];
}

static void divide_row(float *w, size_t r, size_t cols, float s)
{
	for (size_t c = 0; c < cols; c++)
		w[r * cols + c] /= s;
}

/* Scale the group's columns in q and fold 1/s into the op before them. */
static void fold(nf_model *q, size_t l, nf_awq_group g, const float *s)
{
	layer_dims d = dims_of(&q->cfg);
	nf_model_weights *w = &q->w;
	group_mats gm = group_matrices(q, l, g);
	for (size_t k = 0; k < gm.n; k++)
		scale_columns(gm.w[k], gm.rows[k], gm.cols, s);
	if (g == NF_AWQ_QKV) {
		divide(w->rms_att + l * d.dim, d.dim, s);
	} else if (g == NF_AWQ_UPGATE) {
		divide(w->rms_ffn + l * d.dim, d.dim, s);
	} else if (g == NF_AWQ_DOWN) {
		float *w3 = layer_matrix(w->w3, l, d.hidden, d.dim);
		for (size_t h = 0; h < d.hidden; h++)
			divide_row(w3, h, d.dim, s[h]);
	} else if (g == NF_AWQ_O) {
		/* v channel j = (KV head j / head_size, i): the scale of the first
		 * query head reading it (tied: every such head has the same) */
		float *wv = layer_matrix(w->wv, l, d.kv_dim, d.dim);
		for (size_t j = 0; j < d.kv_dim; j++) {
			float sv = s[j / d.head_size * d.kv_mul * d.head_size + j % d.head_size];
			divide_row(wv, j, d.dim, sv);
			if (w->bv)
				w->bv[l * d.kv_dim + j] /= sv;
		}
	}
}

/* The calibration must be of this model: same layers and widths, rows kept. */
static int check_calib(const nf_model *m, const nf_calib *calib)
{
	if (nf_calib_layers(calib) != m->cfg.n_layers)
		return nf_error_set(NF_EINPUT, "awq: calibration has %d layers, the model %d",
				    nf_calib_layers(calib), (int)m->cfg.n_layers);
	for (int l = 0; l < m->cfg.n_layers; l++)
		for (int g = 0; g < NF_AWQ_GROUP_COUNT; g++) {
			const nf_calib_site *s = nf_calib_get(calib, l, group_site((nf_awq_group)g));
			group_mats gm = group_matrices(m, (size_t)l, (nf_awq_group)g);
			if ((size_t)s->n != gm.cols || s->n_rows == 0)
				return nf_error_set(NF_EINPUT,
						    "awq: layer %d: calibration input of %d channels "
						    "and %zu rows for matrices of %zu columns",
						    l, s->n, s->n_rows, gm.cols);
		}
	return 0;
}

/* Search group g of layer l of m, calibrated as layer cl of calib, for
 * its scales (scales and tied: the group's width each). */
static int search_group(nf_awq_choice *choice, float *scales, float *tied, const nf_model *m,
			size_t l, const nf_calib *calib, int cl, nf_awq_group g,
			const nf_awq_opts *opts, nf_pool *pool)
{
	const nf_calib_site *site = nf_calib_get(calib, cl, group_site(g));
	group_mats gm = group_matrices(m, l, g);
	const float *mean_abs = site->mean_abs;
	if (g == NF_AWQ_O) {
		tie_to_kv_heads(tied, site->mean_abs, dims_of(&m->cfg));
		mean_abs = tied;
	}
	const float *const w[3] = {gm.w[0], gm.w[1], gm.w[2]};
	nf_awq_target t = {w, gm.rows, gm.n, gm.cols, mean_abs, site->rows, site->n_rows};
	int err = nf_awq_search(choice, scales, &t, opts, pool);
	return err ? nf_error_wrap(err, "awq: layer %d", cl) : 0;
}

/* Search group g of layer l on m and fold the result into q. */
static int scale_group(nf_model *q, nf_awq_choice *choice, const nf_model *m,
		       const nf_calib *calib, size_t l, nf_awq_group g, float *buf,
		       const nf_awq_opts *opts, nf_pool *pool)
{
	group_mats gm = group_matrices(m, l, g);
	int err = search_group(choice, buf, buf + gm.cols, m, l, calib, (int)l, g, opts, pool);
	if (!err)
		fold(q, l, g, buf);
	return err;
}

int nf_awq_apply_layer(nf_model *layer, nf_awq_choice *choice, const nf_calib *calib, int cl,
		       const nf_awq_opts *opts, nf_pool *pool)
{
	size_t width = (size_t)(layer->cfg.hidden_dim > layer->cfg.dim ? layer->cfg.hidden_dim
									 : layer->cfg.dim);
	float *buf = calloc((NF_AWQ_GROUP_COUNT + 1) * width, sizeof *buf);
	int err = 0;
	if (!buf)
		return nf_error_set(NF_ENOMEM, "awq: out of memory");
	if (layer->cfg.n_layers != 1 || cl < 0 || cl >= nf_calib_layers(calib))
		err = nf_error_set(NF_EINTERNAL, "awq: layer %d of %d calibrated", cl,
				   nf_calib_layers(calib));
	for (int g = 0; g < NF_AWQ_GROUP_COUNT && !err; g++) {
		const nf_calib_site *site = nf_calib_get(calib, cl, group_site((nf_awq_group)g));
		if ((size_t)site->n != group_matrices(layer, 0, (nf_awq_group)g).cols || !site->n_rows)
			err = nf_error_set(NF_EINPUT, "awq: layer %d: calibration input of %d "
					   "channels and %zu rows does not fit", cl, site->n,
					   site->n_rows);
	}
	/* every search reads the layer as given, then every fold changes it */
	for (int g = 0; g < NF_AWQ_GROUP_COUNT && !err; g++)
		err = search_group(&choice[g], buf + (size_t)g * width,
				   buf + NF_AWQ_GROUP_COUNT * width, layer, 0, calib, cl,
				   (nf_awq_group)g, opts, pool);
	for (int g = 0; g < NF_AWQ_GROUP_COUNT && !err; g++)
		fold(layer, 0, (nf_awq_group)g, buf + (size_t)g * width);
	free(buf);
	return err;
}

static int copy_model(nf_model **out, const nf_model *m)
{
	int err = nf_model_alloc(out, &m->cfg);
	if (err)
		return err;
	if ((*out)->mem_len != m->mem_len) {
		err = nf_error_set(NF_EINTERNAL, "awq: model copy of %zu bytes, not %zu",
				   (*out)->mem_len, m->mem_len);
		nf_model_free(*out);
		*out = NULL;
		return err;
	}
	memcpy((*out)->mem, m->mem, m->mem_len);
	return 0;
}

int nf_awq_apply(nf_model **out, nf_awq_report **report, const nf_model *m,
		 const nf_calib *calib, const nf_awq_opts *opts)
{
	nf_model *q = NULL;
	nf_awq_report *r = NULL;
	nf_pool *pool = NULL;
	float *buf = NULL; /* scales and the tied statistic, (2, max width) */
	size_t width = (size_t)(m->cfg.hidden_dim > m->cfg.dim ? m->cfg.hidden_dim : m->cfg.dim);
	int err;
	*out = NULL;
	*report = NULL;
	if ((err = nf_model_config_validate(&m->cfg, "awq")) || (err = check_calib(m, calib)))
		return err;
	if ((err = copy_model(&q, m)) || (err = nf_pool_new(&pool, opts->threads)))
		goto done;
	r = calloc(1, sizeof *r);
	buf = calloc(2 * width, sizeof *buf);
	if (r)
		r->choice = calloc((size_t)m->cfg.n_layers * NF_AWQ_GROUP_COUNT, sizeof *r->choice);
	if (!r || !buf || !r->choice) {
		err = nf_error_set(NF_ENOMEM, "awq: out of memory");
		goto done;
	}
	r->n_layers = m->cfg.n_layers;
	for (size_t l = 0; l < (size_t)m->cfg.n_layers && !err; l++)
		for (int g = 0; g < NF_AWQ_GROUP_COUNT && !err; g++)
			err = scale_group(q, &r->choice[l * NF_AWQ_GROUP_COUNT + (size_t)g], m, calib,
					  l, (nf_awq_group)g, buf, opts, pool);
	if (err)
		goto done;
	*out = q;
	*report = r;
	q = NULL;
	r = NULL;
done:
	free(buf);
	nf_pool_free(pool);
	nf_awq_report_free(r);
	nf_model_free(q);
	return err;
}

void nf_awq_report_free(nf_awq_report *r)
{
	if (!r)
		return;
	free(r->choice);
	free(r);
}
