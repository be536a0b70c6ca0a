/*
 * test_calibrate.c - calibration statistics (engine/calibrate.h).
 *
 * A tiny synthetic model whose activations can be written down by hand:
 * wq = wk = 0 (every score equal, so each head's output is the mean of the
 * v rows so far), wo = w2 = 0 (the residual stream stays the token's
 * embedding in every layer).  The test computes each input from those
 * formulas and compares the recorded means, maxima and rows; the sequence
 * is longer than max_seq_len, so the cut into sequences is checked too.
 * Then stories260K: the vectors the engine's forward pass shows the
 * observer equal those the float32 reference shows its observer, and the
 * shipped text calibrates it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/calibrate.h"
#include "engine/checkpoint.h"
#include "engine/tokenizer.h"
#include "tests/tap.h"
#include "util/error.h"

enum { DIM = 8, HIDDEN = 12, LAYERS = 2, HEADS = 2, KV_HEADS = 1, VOCAB = 10, SEQ = 4 };
enum { HS = DIM / HEADS, KV_DIM = KV_HEADS * HS, NTOK = 11 };

static float frand(unsigned *state)
{
	*state = *state * 1664525u + 1013904223u;
	return (float)((*state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void fill(float *p, size_t n, unsigned *state, float scale)
{
	for (size_t i = 0; i < n; i++)
		p[i] = scale * frand(state);
}

static nf_model *synthetic_model(void)
{
	nf_model_config cfg = {.dim = DIM, .hidden_dim = HIDDEN, .n_layers = LAYERS,
			       .n_heads = HEADS, .n_kv_heads = KV_HEADS, .vocab_size = VOCAB,
			       .max_seq_len = SEQ, .norm_eps = 1e-5f, .rope_theta = 10000.0f};
	nf_model *m = NULL;
	unsigned st = 7;
	if (nf_model_alloc(&m, &cfg))
		return NULL;
	fill(m->w.token_embedding, (size_t)VOCAB * DIM, &st, 1.0f);
	fill(m->w.rms_att, (size_t)LAYERS * DIM, &st, 2.0f);
	fill(m->w.rms_ffn, (size_t)LAYERS * DIM, &st, 2.0f);
	fill(m->w.rms_final, DIM, &st, 2.0f);
	fill(m->w.wv, (size_t)LAYERS * KV_DIM * DIM, &st, 0.5f);
	fill(m->w.w1, (size_t)LAYERS * HIDDEN * DIM, &st, 0.5f);
	fill(m->w.w3, (size_t)LAYERS * HIDDEN * DIM, &st, 0.5f);
	if (!m->cfg.shared_classifier)
		fill(m->w.wcls, (size_t)VOCAB * DIM, &st, 0.5f);
	return m; /* wq, wk, wo, w2 stay zero */
}

static void rmsnorm(float *o, const float *x, const float *w)
{
	float ss = 0.0f;
	for (int j = 0; j < DIM; j++)
		ss += x[j] * x[j];
	ss = 1.0f / sqrtf(ss / DIM + 1e-5f);
	for (int j = 0; j < DIM; j++)
		o[j] = w[j] * (ss * x[j]);
}

/* The inputs of token t of `tokens` in layer l, from the formulas above. */
typedef struct inputs {
	float att[DIM], wo[DIM], ffn[DIM], w2[HIDDEN], cls[DIM];
} inputs;

static void expected_inputs(inputs *in, const nf_model *m, const int *tokens, int t, int l)
{
	const float *e = m->w.token_embedding + (size_t)tokens[t] * DIM;
	rmsnorm(in->att, e, m->w.rms_att + l * DIM);
	rmsnorm(in->ffn, e, m->w.rms_ffn + l * DIM);
	rmsnorm(in->cls, e, m->w.rms_final);
	/* head output: the mean of v over the positions of this sequence so far */
	int first = t - t % SEQ;
	float vsum[KV_DIM] = {0};
	for (int u = first; u <= t; u++) {
		float a[DIM];
		rmsnorm(a, m->w.token_embedding + (size_t)tokens[u] * DIM, m->w.rms_att + l * DIM);
		for (int r = 0; r < KV_DIM; r++)
			for (int c = 0; c < DIM; c++)
				vsum[r] += m->w.wv[((size_t)l * KV_DIM + r) * DIM + c] * a[c];
	}
	for (int h = 0; h < HEADS; h++)
		for (int i = 0; i < HS; i++)
			in->wo[h * HS + i] = vsum[(h / (HEADS / KV_HEADS)) * HS + i] / (float)(t - first + 1);
	for (int r = 0; r < HIDDEN; r++) {
		float g = 0.0f, u = 0.0f;
		for (int c = 0; c < DIM; c++) {
			g += m->w.w1[((size_t)l * HIDDEN + r) * DIM + c] * in->ffn[c];
			u += m->w.w3[((size_t)l * HIDDEN + r) * DIM + c] * in->ffn[c];
		}
		in->w2[r] = g / (1.0f + expf(-g)) * u;
	}
}

static const float *pick(const inputs *in, nf_ref_input which)
{
	switch (which) {
	case NF_REF_IN_ATT: return in->att;
	case NF_REF_IN_WO: return in->wo;
	case NF_REF_IN_FFN: return in->ffn;
	case NF_REF_IN_W2: return in->w2;
	default: return in->cls;
	}
}

static int close_to(float a, float b) { return fabsf(a - b) <= 1e-5f + 1e-4f * fabsf(b); }

/* Means, maxima and (all) rows of one site against the formulas. */
static int site_matches(const nf_calib_site *s, const nf_model *m, const int *tokens, int l,
			nf_ref_input which)
{
	int n = which == NF_REF_IN_W2 ? HIDDEN : DIM, good = s->n == n && s->count == NTOK &&
							      s->n_rows == NTOK;
	float sum[HIDDEN] = {0}, max[HIDDEN] = {0}, absmax = 0.0f;
	for (int t = 0; t < NTOK && good; t++) {
		inputs in;
		expected_inputs(&in, m, tokens, t, l);
		const float *x = pick(&in, which);
		for (int c = 0; c < n; c++) {
			sum[c] += fabsf(x[c]);
			max[c] = fmaxf(max[c], fabsf(x[c]));
			absmax = fmaxf(absmax, fabsf(x[c]));
			good &= close_to(s->rows[(size_t)t * (size_t)n + (size_t)c], x[c]);
		}
	}
	for (int c = 0; c < n && good; c++)
		good &= close_to(s->mean_abs[c], sum[c] / NTOK) && close_to(s->max_abs[c], max[c]);
	return good && close_to(s->absmax, absmax);
}

static void test_synthetic(void)
{
	static const int tokens[NTOK] = {1, 4, 9, 0, 3, 3, 7, 2, 8, 5, 6};
	static const char *names[] = {"attention", "wo", "ffn", "w2", "classifier"};
	nf_model *m = synthetic_model();
	nf_calib *c = NULL;
	ok(m != NULL, "synthetic model");
	if (!m)
		return;
	is_int(nf_calib_run(m, tokens, NTOK, &c), 0, "calibrate %d tokens in sequences of %d", NTOK,
	       SEQ);
	if (!c) {
		nf_model_free(m);
		return;
	}
	is_int(nf_calib_layers(c), LAYERS, "layers");
	is_int((long long)nf_calib_tokens(c), NTOK, "tokens");
	for (int l = 0; l < LAYERS; l++)
		for (int w = 0; w < NF_REF_IN_CLS; w++)
			ok(site_matches(nf_calib_get(c, l, (nf_ref_input)w), m, tokens, l,
					(nf_ref_input)w),
			   "layer %d %s input: means, maxima and rows as computed by hand", l, names[w]);
	const nf_calib_site *cls = nf_calib_get(c, 0, NF_REF_IN_CLS);
	ok(site_matches(cls, m, tokens, 0, NF_REF_IN_CLS), "classifier input as computed by hand");
	ok(nf_calib_get(c, 7, NF_REF_IN_CLS) == cls, "the classifier's site ignores the layer");
	ok(nf_calib_get(c, LAYERS, NF_REF_IN_ATT) == NULL && nf_calib_get(c, -1, NF_REF_IN_W2) == NULL &&
		   nf_calib_get(c, 0, NF_REF_IN_COUNT) == NULL,
	   "sites out of range are NULL");
	const nf_calib_site *w2 = nf_calib_get(c, 1, NF_REF_IN_W2);
	ok(w2->absmax > 0.0f && nf_calib_fp8_scale(c, 1, NF_REF_IN_W2) == w2->absmax / 448.0f,
	   "fp8 activation scale is absmax / 448 (%g)", (double)nf_calib_fp8_scale(c, 1, NF_REF_IN_W2));
	ok(nf_calib_fp8_scale(c, 9, NF_REF_IN_ATT) == 0.0f, "fp8 scale of no site is 0");
	float wo_absmax = nf_calib_get(c, 0, NF_REF_IN_WO)->absmax;
	nf_calib_free(c);
	c = NULL;

	/* a sample of 3 rows: 3 distinct tokens' rows */
	nf_calib_opts three = {.max_rows = 3, .threads = 1};
	is_int(nf_calib_run_opts(m, tokens, NTOK, &three, &c), 0, "calibrate keeping 3 rows");
	if (c) {
		const nf_calib_site *s = nf_calib_get(c, 0, NF_REF_IN_WO);
		int found[3] = {-1, -1, -1};
		for (int r = 0; r < 3 && s->n_rows == 3; r++)
			for (int t = 0; t < NTOK; t++) {
				inputs in;
				expected_inputs(&in, m, tokens, t, 0);
				int same = 1;
				for (int k = 0; k < DIM; k++)
					same &= close_to(s->rows[r * DIM + k], in.wo[k]);
				if (same)
					found[r] = t;
			}
		ok(found[0] >= 0 && found[1] >= 0 && found[2] >= 0 && found[0] != found[1] &&
			   found[1] != found[2] && found[0] != found[2],
		   "the 3 kept rows are rows of tokens %d, %d, %d", found[0], found[1], found[2]);
		ok(s->count == NTOK && s->absmax == wo_absmax,
		   "statistics still cover every token");
	}
	nf_calib_free(c);
	c = NULL;

	int bad[2] = {1, VOCAB};
	ok(nf_calib_run(m, bad, 2, &c) != 0 && c == NULL, "a token out of the vocabulary is refused: %s",
	   nf_error_last());
	ok(nf_calib_run(m, tokens, 0, &c) != 0 && c == NULL, "no tokens is refused");
	nf_model_free(m);
	nf_calib_free(NULL);
}

/* What the reference's observer saw: every site's vectors, token-major. */
typedef struct ref_seen {
	const nf_model *m;
	float *rows[NF_REF_IN_COUNT]; /* (layers or 1, tokens, width) */
	size_t tokens, token;
} ref_seen;

static void ref_observe(void *ctx, int layer, nf_ref_input which, const float *x, int n)
{
	ref_seen *r = ctx;
	size_t l = which == NF_REF_IN_CLS ? 0 : (size_t)layer;
	memcpy(r->rows[which] + (l * r->tokens + r->token) * (size_t)n, x, (size_t)n * sizeof *x);
}

/* Largest |calib row - reference vector| over every site of ntok tokens,
 * relative to the site's absmax. */
static double forward_vs_reference(const nf_model *m, const nf_calib *c, const int *ids, size_t ntok)
{
	ref_seen r = {.m = m, .tokens = ntok};
	nf_ref_state *s = NULL;
	size_t layers = (size_t)m->cfg.n_layers, hidden = (size_t)m->cfg.hidden_dim;
	double worst = INFINITY;
	for (int w = 0; w < NF_REF_IN_COUNT; w++)
		r.rows[w] = calloc(layers * ntok * hidden, sizeof(float));
	if (nf_ref_state_new(&s, m))
		goto done;
	nf_ref_set_observer(s, ref_observe, &r);
	for (r.token = 0; r.token < ntok; r.token++)
		if (!nf_ref_forward(s, ids[r.token], (int)r.token))
			goto done;
	worst = 0.0;
	for (int w = 0; w < NF_REF_IN_COUNT; w++)
		for (size_t l = 0; l < (w == NF_REF_IN_CLS ? 1 : layers); l++) {
			const nf_calib_site *site = nf_calib_get(c, (int)l, (nf_ref_input)w);
			const float *want = r.rows[w] + l * ntok * (size_t)site->n;
			for (size_t i = 0; i < ntok * (size_t)site->n; i++)
				worst = fmax(worst, fabs((double)site->rows[i] - want[i]) / site->absmax);
		}
done:
	for (int w = 0; w < NF_REF_IN_COUNT; w++)
		free(r.rows[w]);
	nf_ref_state_free(s);
	return worst;
}

static void test_default_text_on_stories(void)
{
	char mpath[1024], tpath[1024];
	const char *shared = tap_env("NF_SHARED", "../shared");
	snprintf(mpath, sizeof mpath, "%s/models/stories260K/stories260K.bin", shared);
	snprintf(tpath, sizeof tpath, "%s/models/stories260K/tok512.bin", shared);
	nf_model *m = NULL;
	nf_tokenizer *tok = NULL;
	nf_calib *c = NULL;
	int *ids = NULL;
	size_t len = 0;
	const char *text = nf_calib_default_text(&len);
	ok(len > 8000 && strlen(text) == len && strstr(text, "Four score and seven years ago"),
	   "shipped text: %zu bytes, the Declaration then the Gettysburg Address", len);
	if (nf_ckpt_load(&m, mpath, NF_CKPT_LLAMA2C) || nf_tokenizer_load(&tok, tpath, m->cfg.vocab_size)) {
		skip("stories260K not found under %s", shared);
		goto done;
	}
	size_t n = 0;
	is_int(nf_tokenizer_encode(tok, text, len, NF_TOK_ADD_BOS, &ids, &n), 0, "encode");
	diag("shipped text: %zu stories260K tokens", n);
	nf_calib_opts all_rows = {.max_rows = 40, .threads = 2};
	if (n >= 40 && !nf_calib_run_opts(m, ids, 40, &all_rows, &c)) {
		double gap = forward_vs_reference(m, c, ids, 40);
		ok(gap < 1e-4, "40 tokens: every input the forward pass shows equals the reference's "
			       "(max gap %.2e of the site's absmax)", gap);
	} else {
		ok(0, "calibrate the first 40 tokens: %s", nf_error_last());
	}
	nf_calib_free(c);
	c = NULL;
	is_int(nf_calib_run(m, ids, n, &c), 0, "calibrate stories260K on the shipped text");
	if (c) {
		const nf_calib_site *s = nf_calib_get(c, 4, NF_REF_IN_W2);
		ok(s->count == n && s->n_rows == NF_CALIB_MAX_ROWS && s->n == m->cfg.hidden_dim,
		   "w2 input of the last layer: %zu vectors, %zu rows of %d", s->count, s->n_rows, s->n);
		float top = 0.0f, mean = 0.0f;
		for (int i = 0; i < s->n; i++) {
			top = fmaxf(top, s->max_abs[i]);
			mean += s->mean_abs[i] / (float)s->n;
		}
		ok(top == s->absmax && mean > 0.0f && mean < s->absmax,
		   "absmax %g is the largest channel max, mean |x| %g below it", (double)s->absmax,
		   (double)mean);
	}
done:
	free(ids);
	nf_calib_free(c);
	nf_tokenizer_free(tok);
	nf_model_free(m);
}

int main(void)
{
	test_synthetic();
	test_default_text_on_stories();
	return done_testing();
}
