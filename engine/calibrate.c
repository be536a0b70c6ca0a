/*
 * calibrate.c - records the activation statistics of every matrix input of
 * a float32 model (calibrate.h) through an observer on the engine's
 * forward pass.
 */
#include "engine/calibrate.h"

#include "engine/ckpt_reader.h"

#include "engine/forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

/* One site while it records (the public nf_calib_site points into it). */
typedef struct site_rec {
	nf_calib_site pub;
	double *sum_abs;  /* (n) running sums of |x_c| (double: thousands of tokens) */
	float *mean_abs;  /* (n) */
	float *max_abs;   /* (n) */
	float *rows;      /* (cap, n) */
	uint64_t *keys;   /* (cap) hash of the token index of each kept row */
	size_t worst;     /* index of the largest key among the kept rows */
} site_rec;

struct nf_calib {
	int n_layers;
	size_t cap;         /* rows kept per site */
	size_t tokens;      /* tokens run */
	site_rec *sites;    /* (n_layers * LAYER_SITES + 1): layer-major, the classifier last */
};

/* Sites in every layer: the inputs before NF_REF_IN_CLS. */
#define LAYER_SITES ((size_t)NF_REF_IN_CLS)

static size_t site_count(int n_layers) { return (size_t)n_layers * LAYER_SITES + 1; }

static size_t site_index(int n_layers, int layer, nf_ref_input which)
{
	if (which == NF_REF_IN_CLS)
		return (size_t)n_layers * LAYER_SITES;
	return (size_t)layer * LAYER_SITES + (size_t)which;
}

/* splitmix64: a well-mixed 64-bit hash of the token index (a site sees
 * every token once, in order, so its count is the index). */
static uint64_t hash_index(uint64_t i)
{
	uint64_t z = i + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void *alloc_array(size_t n, size_t size, int *err)
{
	size_t bytes;
	void *p = NULL;
	if (*err)
		return NULL;
	if (!nf_size_mul(&bytes, n ? n : 1, size) || !(p = calloc(1, bytes)))
		*err = nf_error_set(NF_ENOMEM, "calibrate: out of memory (%zu x %zu bytes)", n, size);
	return p;
}

static int site_init(site_rec *s, int n, size_t cap)
{
	int err = 0;
	size_t cells;
	if (!nf_size_mul(&cells, cap, (size_t)n))
		return nf_error_set(NF_ENOMEM, "calibrate: %zu rows of %d channels overflow", cap, n);
	s->pub.n = n;
	s->sum_abs = alloc_array((size_t)n, sizeof(double), &err);
	s->mean_abs = alloc_array((size_t)n, sizeof(float), &err);
	s->max_abs = alloc_array((size_t)n, sizeof(float), &err);
	s->rows = alloc_array(cells, sizeof(float), &err);
	s->keys = alloc_array(cap, sizeof(uint64_t), &err);
	return err;
}

static void site_release(site_rec *s)
{
	free(s->sum_abs);
	free(s->mean_abs);
	free(s->max_abs);
	free(s->rows);
	free(s->keys);
}

/* Keep x when its token's key is among the cap lowest seen so far. */
static void site_sample(site_rec *s, size_t cap, uint64_t key, const float *x)
{
	size_t n = (size_t)s->pub.n, slot;
	if (cap == 0)
		return;
	if (s->pub.n_rows < cap) {
		slot = s->pub.n_rows++;
	} else {
		if (key >= s->keys[s->worst])
			return;
		slot = s->worst;
	}
	s->keys[slot] = key;
	memcpy(s->rows + slot * n, x, n * sizeof *x);
	if (s->pub.n_rows < cap)
		return;
	/* full: find the new largest key (rare once the sample has settled) */
	s->worst = 0;
	for (size_t i = 1; i < cap; i++)
		if (s->keys[i] > s->keys[s->worst])
			s->worst = i;
}

static void observe_one(site_rec *s, size_t cap, const float *x)
{
	for (int i = 0; i < s->pub.n; i++) {
		float a = fabsf(x[i]);
		s->sum_abs[i] += a;
		if (a > s->max_abs[i])
			s->max_abs[i] = a;
		if (a > s->pub.absmax)
			s->pub.absmax = a;
	}
	site_sample(s, cap, hash_index(s->pub.count), x);
	s->pub.count++;
}

static void observe(void *ctx, int layer, nf_ref_input which, const float *x, size_t n, int width)
{
	nf_calib *c = ctx;
	site_rec *s = &c->sites[site_index(c->n_layers, layer, which)];
	for (size_t b = 0; b < n; b++)
		observe_one(s, c->cap, x + b * (size_t)width);
}

/* Publish the means and the arrays behind each site's public view. */
static void finish(nf_calib *c)
{
	for (size_t k = 0; k < site_count(c->n_layers); k++) {
		site_rec *s = &c->sites[k];
		for (int i = 0; i < s->pub.n && s->pub.count; i++)
			s->mean_abs[i] = (float)(s->sum_abs[i] / (double)s->pub.count);
		s->pub.mean_abs = s->mean_abs;
		s->pub.max_abs = s->max_abs;
		s->pub.rows = s->rows;
	}
}

static int calib_new(nf_calib **out, const nf_model_config *cfg, size_t max_rows)
{
	int err = 0;
	nf_calib *c = calloc(1, sizeof *c);
	*out = NULL;
	if (!c)
		return nf_error_set(NF_ENOMEM, "calibrate: out of memory");
	c->n_layers = cfg->n_layers;
	c->cap = max_rows;
	c->sites = alloc_array(site_count(cfg->n_layers), sizeof *c->sites, &err);
	for (int l = 0; l < cfg->n_layers && !err; l++)
		for (int w = 0; w < NF_REF_IN_CLS && !err; w++)
			err = site_init(&c->sites[site_index(c->n_layers, l, (nf_ref_input)w)],
					w == NF_REF_IN_W2 ? cfg->hidden_dim : cfg->dim, max_rows);
	if (!err)
		err = site_init(&c->sites[site_index(c->n_layers, 0, NF_REF_IN_CLS)], cfg->dim,
				max_rows);
	if (err) {
		nf_calib_free(c);
		return err;
	}
	*out = c;
	return 0;
}

static int check_tokens(const nf_model_config *cfg, const int *tokens, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= cfg->vocab_size)
			return nf_error_set(NF_EINPUT, "calibrate: token %zu is %d, out of the vocabulary (%d)",
					    i, tokens[i], (int)cfg->vocab_size);
	return 0;
}

/* Run the tokens in sequences of max_seq_len, each from position 0 (the
 * cache rows of a position are written before they are read, so one cache
 * serves every sequence). */
static int run_sequences(nf_calib *c, nf_fwd *f, nf_fwd_kv *kv, const nf_model_config *cfg,
			 const int *tokens, size_t n)
{
	size_t seq = (size_t)cfg->max_seq_len;
	for (size_t i = 0; i < n; i += seq) {
		int len = (int)(n - i < seq ? n - i : seq), pos0 = 0, err;
		if ((err = nf_fwd_step_ragged(f, &kv, tokens + i, &len, &pos0, 1, NULL)))
			return nf_error_wrap(err, "calibrate: tokens from %zu", i);
		c->tokens += (size_t)len;
	}
	return 0;
}

/* Where the weights come from when the model is not in memory: one layer
 * at a time from a checkpoint reader, bound by the forward pass's hook. */
typedef struct streamed {
	nf_ckpt_reader *r;
	nf_model *layer;      /* the floats of the layer bound now */
	nf_fwd_weights *w;    /* the pass's views */
	nf_fwd_weights one;   /* views of `layer` */
	int bound;            /* the layer in `layer`, -1 none */
	int err;              /* the first read that failed */
} streamed;

static void bind_layer(void *ctx, int l)
{
	streamed *s = ctx;
	if (s->bound != l && !s->err) {
		s->err = nf_ckpt_read_layer(s->r, s->layer, l);
		s->bound = s->err ? -1 : l;
	}
	s->w->layers[l] = s->one.layers[0];
}

static int check_opts(size_t n, const nf_calib_opts *opts)
{
	if (n == 0)
		return nf_error_set(NF_EINPUT, "calibrate: no calibration tokens");
	if (opts->max_rows > (size_t)1 << 20)
		return nf_error_set(NF_EINPUT, "calibrate: %zu rows per input is too many",
				    opts->max_rows);
	return 0;
}

/* The calibration pass over weights w of cfg (s: bound a layer at a time). */
static int run(nf_calib **out, const nf_model_config *cfg, nf_fwd_weights *w, streamed *s,
	       const int *tokens, size_t n, const nf_calib_opts *opts)
{
	nf_calib *c = NULL;
	nf_fwd_kv kv = {0};
	nf_fwd *f = NULL;
	int err;
	if ((err = nf_fwd_weights_prepare(w, cfg)) || (err = nf_fwd_kv_init(&kv, cfg, 0)) ||
	    (err = nf_fwd_new(&f, cfg, w, nf_cpu_best(), opts->threads)) ||
	    (err = calib_new(&c, cfg, opts->max_rows)))
		goto done;
	nf_fwd_set_observer(f, observe, c);
	if (s)
		nf_fwd_set_layer_hook(f, bind_layer, s);
	err = run_sequences(c, f, &kv, cfg, tokens, n);
	if (!err && s && s->err)
		err = s->err;
	if (err)
		goto done;
	finish(c);
	*out = c;
	c = NULL;
done:
	nf_calib_free(c);
	nf_fwd_free(f);
	nf_fwd_kv_release(&kv);
	return err;
}

int nf_calib_run_opts(const nf_model *m, const int *tokens, size_t n, const nf_calib_opts *opts,
		      nf_calib **out)
{
	nf_fwd_weights w = {0};
	int err;
	*out = NULL;
	if ((err = check_opts(n, opts)) || (err = nf_model_config_validate(&m->cfg, "calibrate")) ||
	    (err = check_tokens(&m->cfg, tokens, n)))
		return err;
	if (!(err = nf_fwd_weights_from_model(&w, m)))
		err = run(out, &m->cfg, &w, NULL, tokens, n, opts);
	nf_fwd_weights_release(&w);
	return err;
}

/* The embedding and final norm of r (the tensors outside the layers that
 * a pass without logits reads) into *globals, bound to w with every layer
 * bound to s's layer buffer. */
static int bind_streamed(nf_fwd_weights *w, streamed *s, float **globals)
{
	const nf_model_config *cfg = &s->r->cfg;
	size_t emb = (size_t)cfg->vocab_size * (size_t)cfg->dim; /* bounded by the validated config */
	int err;
	if (!(*globals = malloc((emb + (size_t)cfg->dim) * sizeof(float))) ||
	    !(w->layers = calloc((size_t)cfg->n_layers, sizeof *w->layers)))
		return nf_error_set(NF_ENOMEM, "calibrate: out of memory");
	if ((err = nf_ckpt_read(s->r, NF_T_EMB, 0, *globals)) ||
	    (err = nf_ckpt_read(s->r, NF_T_RMS_FINAL, 0, *globals + emb)) ||
	    (err = nf_model_alloc_layer(&s->layer, cfg)) ||
	    (err = nf_fwd_weights_from_model(&s->one, s->layer)))
		return err;
	nf_fwd_bind(w, cfg, NF_T_EMB, NF_QUANT_NONE, *globals, NULL);
	w->rms_final = *globals + emb;
	for (int l = 0; l < cfg->n_layers; l++)
		w->layers[l] = s->one.layers[0];
	return 0;
}

int nf_calib_run_reader(nf_ckpt_reader *r, const int *tokens, size_t n,
			const nf_calib_opts *opts, nf_calib **out)
{
	nf_fwd_weights w = {0};
	streamed s = {.r = r, .w = &w, .bound = -1};
	float *globals = NULL;
	int err;
	*out = NULL;
	if ((err = check_opts(n, opts)) || (err = check_tokens(&r->cfg, tokens, n)))
		return err;
	if (!(err = bind_streamed(&w, &s, &globals)))
		err = run(out, &r->cfg, &w, &s, tokens, n, opts);
	nf_fwd_weights_release(&w);
	nf_fwd_weights_release(&s.one);
	nf_model_free(s.layer);
	free(globals);
	return err;
}

int nf_calib_run(const nf_model *m, const int *tokens, size_t n, nf_calib **out)
{
	nf_calib_opts opts = {.max_rows = NF_CALIB_MAX_ROWS, .threads = 0};
	return nf_calib_run_opts(m, tokens, n, &opts, out);
}

void nf_calib_free(nf_calib *c)
{
	if (!c)
		return;
	for (size_t k = 0; c->sites && k < site_count(c->n_layers); k++)
		site_release(&c->sites[k]);
	free(c->sites);
	free(c);
}

int nf_calib_layers(const nf_calib *c) { return c->n_layers; }

size_t nf_calib_tokens(const nf_calib *c) { return c->tokens; }

const nf_calib_site *nf_calib_get(const nf_calib *c, int layer, nf_ref_input which)
{
	if ((unsigned)which >= NF_REF_IN_COUNT)
		return NULL;
	if (which != NF_REF_IN_CLS && (layer < 0 || layer >= c->n_layers))
		return NULL;
	return &c->sites[site_index(c->n_layers, layer, which)].pub;
}

float nf_calib_fp8_scale(const nf_calib *c, int layer, nf_ref_input which)
{
	const nf_calib_site *s = nf_calib_get(c, layer, which);
	if (!s)
		return 0.0f;
	return s->absmax > 0.0f ? s->absmax / 448.0f : 1.0f;
}
