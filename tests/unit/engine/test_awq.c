/*
 * test_awq.c - activation-aware weight scaling (engine/awq.h).
 *
 * The weight quantizer is a plain int4 one written here (asymmetric, groups
 * of 32 columns, the last one shorter), standing for the engine's.
 *   - scales: alpha 0 is exactly 1, zeros are guarded, the extremes centre on 1;
 *   - a synthetic layer with a few outlier input channels: AWQ's output
 *     error is well below plain quantization's, whose error (alpha 0) is
 *     what the test computes by hand;
 *   - the folded model computes the original's logits, on stories260K and
 *     on a synthetic grouped-query model with biases, and the same model
 *     comes out of 1 and 3 threads;
 *   - a calibration of another model and a missing quantizer are refused;
 *   - the search's output kernel gives the scalar one's bits in every
 *     instruction set this CPU runs, tails included;
 *   - the engine's int4 quantizer as the fake quantizer: within half a step
 *     of each weight, NaN for a NaN weight, and AWQ with it also beats plain.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/awq.h"
#include "engine/checkpoint.h"
#include "engine/reference.h"
#include "engine/tokenizer.h"
#include "tests/tap.h"
#include "util/error.h"

#define GROUP 32

/* int4, asymmetric, per group of GROUP columns: w ~= min + scale * q. */
static void int4_fakequant(float *out, const float *w, size_t rows, size_t cols, void *ctx)
{
	(void)ctx;
	for (size_t r = 0; r < rows; r++)
		for (size_t c0 = 0; c0 < cols; c0 += GROUP) {
			size_t n = cols - c0 < GROUP ? cols - c0 : GROUP;
			const float *g = w + r * cols + c0;
			float lo = g[0], hi = g[0];
			for (size_t i = 1; i < n; i++) {
				lo = fminf(lo, g[i]);
				hi = fmaxf(hi, g[i]);
			}
			float scale = (hi - lo) / 15.0f;
			for (size_t i = 0; i < n; i++)
				out[r * cols + c0 + i] =
					scale > 0.0f ? lo + scale * rintf((g[i] - lo) / scale) : g[i];
		}
}

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

static void test_scales(void)
{
	float mean[6] = {0.0f, 0.5f, 2.0f, 8.0f, 0.0f, 1.0f}, s[6];
	nf_awq_scales(s, mean, 6, 0.0f);
	int ones = 1;
	for (int i = 0; i < 6; i++)
		ones &= s[i] == 1.0f;
	ok(ones, "alpha 0: every scale is exactly 1");
	nf_awq_scales(s, mean, 6, 0.5f);
	float lo = INFINITY, hi = 0.0f;
	int finite = 1;
	for (int i = 0; i < 6; i++) {
		finite &= isfinite(s[i]) && s[i] > 0.0f;
		lo = fminf(lo, s[i]);
		hi = fmaxf(hi, s[i]);
	}
	ok(finite && s[0] == lo && s[3] == hi, "zero channels get the smallest finite scale (%g)",
	   (double)s[0]);
	ok(fabsf(lo * hi - 1.0f) < 1e-4f, "the extremes centre on 1 (min*max = %g)", (double)(lo * hi));
	ok(fabsf(s[3] / s[2] - 2.0f) < 1e-4f, "alpha 0.5: 4x the mean is 2x the scale");
	float zeros[3] = {0}, z[3];
	nf_awq_scales(z, zeros, 3, 1.0f);
	ok(z[0] == 1.0f && z[1] == 1.0f && z[2] == 1.0f, "an input that was always zero: scale 1");
}

enum { L_ROWS = 300, L_COLS = 128, L_X = 200 }; /* 300 rows: two slices of the search */

/* ||Q(W) X - W X||^2, the plain quantization error, by hand. */
static double plain_error(const float *w, const float *x)
{
	float *q = malloc(sizeof(float) * L_ROWS * L_COLS);
	double e = 0.0;
	int4_fakequant(q, w, L_ROWS, L_COLS, NULL);
	for (int b = 0; b < L_X; b++)
		for (int r = 0; r < L_ROWS; r++) {
			double yq = 0.0, y = 0.0;
			for (int c = 0; c < L_COLS; c++) {
				yq += (double)q[r * L_COLS + c] * x[b * L_COLS + c];
				y += (double)w[r * L_COLS + c] * x[b * L_COLS + c];
			}
			e += (yq - y) * (yq - y);
		}
	free(q);
	return e;
}

static void test_outlier_layer(void)
{
	static float w[L_ROWS * L_COLS], x[L_X * L_COLS], mean[L_COLS], s[L_COLS];
	static const int outliers[] = {3, 40, 77, 100};
	unsigned st = 11;
	fill(w, L_ROWS * L_COLS, &st, 1.0f);
	fill(x, L_X * L_COLS, &st, 1.0f);
	for (int b = 0; b < L_X; b++)
		for (int k = 0; k < 4; k++)
			x[b * L_COLS + outliers[k]] *= 40.0f;
	for (int b = 0; b < L_X; b++)
		for (int c = 0; c < L_COLS; c++)
			mean[c] += fabsf(x[b * L_COLS + c]) / L_X;

	const float *const mats[1] = {w};
	size_t rows[1] = {L_ROWS};
	nf_awq_target t = {mats, rows, 1, L_COLS, mean, x, L_X};
	nf_awq_opts o = {.fakequant = int4_fakequant, .threads = 2};
	nf_awq_choice ch = {0};
	nf_pool *pool = NULL;
	is_int(nf_pool_new(&pool, 2), 0, "pool");
	is_int(nf_awq_search(&ch, s, &t, &o, pool), 0, "search a layer with 4 outlier channels");
	double by_hand = plain_error(w, x);
	ok(fabs(ch.err_plain - by_hand) <= 1e-4 * by_hand,
	   "alpha 0 gives the plain quantization error (%g, by hand %g)", ch.err_plain, by_hand);
	ok(ch.alpha > 0.0f && ch.err_best <= 0.5 * ch.err_plain,
	   "AWQ (alpha %.2f) at most half the plain error: %g vs %g (%.1f%%)", (double)ch.alpha,
	   ch.err_best, ch.err_plain, 100.0 * ch.err_best / ch.err_plain);
	float quiet_max = 0.0f, loud_min = INFINITY;
	for (int c = 0; c < L_COLS; c++) {
		int loud = c == outliers[0] || c == outliers[1] || c == outliers[2] || c == outliers[3];
		if (loud)
			loud_min = fminf(loud_min, s[c]);
		else
			quiet_max = fmaxf(quiet_max, s[c]);
	}
	int top = loud_min > quiet_max;
	ok(top, "the outlier channels get the largest scales");

	nf_awq_choice serial = {0};
	float s1[L_COLS];
	is_int(nf_awq_search(&serial, s1, &t, &o, NULL), 0, "search without a pool");
	ok(serial.alpha == ch.alpha && serial.err_best == ch.err_best &&
		   memcmp(s, s1, sizeof s1) == 0,
	   "the same choice without a pool");

	nf_awq_opts none = {0};
	ok(nf_awq_search(&ch, s, &t, &none, pool) != 0, "no fake quantizer is refused: %s",
	   nf_error_last());
	nf_awq_target empty = t;
	empty.n_x = 0;
	ok(nf_awq_search(&ch, s, &empty, &o, pool) != 0, "no sampled rows is refused");
	nf_pool_free(pool);
}

/* Largest |a - b| over n tokens' logits, relative to the largest |logit|. */
static double logits_gap(const nf_model *a, const nf_model *b, const int *tokens, int n)
{
	nf_ref_state *sa = NULL, *sb = NULL;
	double gap = INFINITY;
	if (nf_ref_state_new(&sa, a) || nf_ref_state_new(&sb, b))
		goto done;
	double worst = 0.0, top = 0.0;
	for (int t = 0; t < n && t < a->cfg.max_seq_len; t++) {
		const float *la = nf_ref_forward(sa, tokens[t], t), *lb = nf_ref_forward(sb, tokens[t], t);
		if (!la || !lb)
			goto done;
		for (int v = 0; v < a->cfg.vocab_size; v++) {
			worst = fmax(worst, fabs((double)la[v] - lb[v]));
			top = fmax(top, fabs((double)la[v]));
		}
	}
	gap = worst / (top > 0.0 ? top : 1.0);
done:
	nf_ref_state_free(sa);
	nf_ref_state_free(sb);
	return gap;
}

/* Groups whose chosen alpha is not 0, and whether every choice is sound. */
static int count_scaled(const nf_awq_report *r, int *sound)
{
	int scaled = 0;
	*sound = 1;
	for (int i = 0; i < r->n_layers * NF_AWQ_GROUP_COUNT; i++) {
		const nf_awq_choice *c = &r->choice[i];
		float steps = c->alpha * (NF_AWQ_GRID - 1);
		*sound &= c->alpha >= 0.0f && c->alpha <= 1.0f && fabsf(steps - rintf(steps)) < 1e-4f &&
			  c->err_best <= c->err_plain && (c->alpha > 0.0f || c->err_best == c->err_plain);
		scaled += c->alpha > 0.0f;
	}
	return scaled;
}

/* Calibrate m on tokens, apply AWQ, and hold the folded model to m. */
static void check_folded(const char *name, const nf_model *m, const int *tokens, size_t n,
			 int logit_tokens, int threads, nf_model **folded)
{
	nf_calib *c = NULL;
	nf_model *q = NULL;
	nf_awq_report *r = NULL;
	nf_awq_opts o = {.fakequant = int4_fakequant, .threads = threads};
	*folded = NULL;
	is_int(nf_calib_run(m, tokens, n, &c), 0, "%s: calibrate on %zu tokens", name, n);
	if (!c)
		return;
	int rc = nf_awq_apply(&q, &r, m, c, &o);
	is_int(rc, 0, "%s: AWQ with %d threads", name, threads);
	if (rc)
		diag("%s", nf_error_last());
	if (q && r) {
		int sound, scaled = count_scaled(r, &sound);
		ok(sound, "%s: every choice on the grid, no worse than plain", name);
		ok(scaled >= r->n_layers, "%s: %d of %d groups scaled (alpha > 0)", name, scaled,
		   r->n_layers * NF_AWQ_GROUP_COUNT);
		ok(memcmp(q->w.wq, m->w.wq, sizeof(float) * (size_t)m->cfg.dim * (size_t)m->cfg.dim) != 0,
		   "%s: the weights were changed", name);
		double gap = logits_gap(m, q, tokens, logit_tokens);
		ok(gap < 2e-5, "%s: folded model's logits equal the original's (max gap %.2e of the "
			       "largest logit, %d tokens)",
		   name, gap, logit_tokens);
		double plain = 0.0, best = 0.0;
		for (int i = 0; i < r->n_layers * NF_AWQ_GROUP_COUNT; i++) {
			plain += r->choice[i].err_plain;
			best += r->choice[i].err_best;
		}
		diag("%s: layer output error, AWQ / plain int4 = %.3f", name, best / plain);
	}
	*folded = q;
	nf_awq_report_free(r);
	nf_calib_free(c);
}

static void test_stories(void)
{
	char mpath[1024], tpath[1024];
	const char *shared = tap_env("NF_SHARED", "../shared");
	snprintf(mpath, sizeof mpath, "%s/models/stories260K/stories260K.bin", shared);
	snprintf(tpath, sizeof tpath, "%s/models/stories260K/tok512.bin", shared);
	nf_model *m = NULL, *q = NULL;
	nf_tokenizer *tok = NULL;
	int *ids = NULL;
	size_t n = 0, len = 0;
	const char *text = nf_calib_default_text(&len);
	if (nf_ckpt_load(&m, mpath, NF_CKPT_LLAMA2C) || nf_tokenizer_load(&tok, tpath, m->cfg.vocab_size) ||
	    nf_tokenizer_encode(tok, text, len, NF_TOK_ADD_BOS, &ids, &n)) {
		skip("stories260K not found under %s", shared);
		goto done;
	}
	check_folded("stories260K", m, ids, n < 600 ? n : 600, 48, 0, &q);
done:
	nf_model_free(q);
	free(ids);
	nf_tokenizer_free(tok);
	nf_model_free(m);
}

/* GQA (4 query heads on 2 KV heads) with q/k/v/o biases, and a few
 * channels that the norms make loud, so AWQ has something to do. */
static nf_model *synthetic_gqa(void)
{
	nf_model_config cfg = {.dim = 64, .hidden_dim = 80, .n_layers = 2, .n_heads = 4,
			       .n_kv_heads = 2, .vocab_size = 40, .max_seq_len = 32,
			       .norm_eps = 1e-5f, .rope_theta = 10000.0f, .attention_bias = true};
	nf_model *m = NULL;
	unsigned st = 5;
	if (nf_model_alloc(&m, &cfg))
		return NULL;
	size_t params = m->mem_len / sizeof(float);
	fill((float *)m->mem, params, &st, 0.3f);
	for (int i = 0; i < cfg.n_layers * cfg.dim; i++) {
		m->w.rms_att[i] = 1.0f + 0.2f * frand(&st) + (i % 17 == 3 ? 12.0f : 0.0f);
		m->w.rms_ffn[i] = 1.0f + 0.2f * frand(&st) + (i % 23 == 5 ? 12.0f : 0.0f);
	}
	for (int i = 0; i < cfg.dim; i++)
		m->w.rms_final[i] = 1.0f;
	return m;
}

static void test_gqa(void)
{
	nf_model *m = synthetic_gqa(), *q1 = NULL, *q3 = NULL;
	int tokens[64];
	unsigned st = 3;
	ok(m && m->w.bv && m->cfg.n_kv_heads < m->cfg.n_heads, "synthetic GQA model with biases");
	if (!m)
		return;
	for (int i = 0; i < 64; i++)
		tokens[i] = (int)((frand(&st) + 1.0f) * 19.99f);
	check_folded("GQA", m, tokens, 64, 32, 1, &q1);
	check_folded("GQA", m, tokens, 64, 32, 3, &q3);
	ok(q1 && q3 && memcmp(q1->mem, q3->mem, q1->mem_len) == 0,
	   "GQA: 1 and 3 threads give the same model");

	/* a calibration of another model is refused */
	nf_model_config other = m->cfg;
	other.n_layers = 1;
	nf_model *o = NULL;
	nf_calib *c = NULL;
	nf_model *q = NULL;
	nf_awq_report *r = NULL;
	nf_awq_opts opts = {.fakequant = int4_fakequant, .threads = 1};
	if (!nf_model_alloc(&o, &other) && !nf_calib_run(o, tokens, 8, &c))
		ok(nf_awq_apply(&q, &r, m, c, &opts) != 0 && !q && !r,
		   "a calibration of another model is refused: %s", nf_error_last());
	nf_calib_free(c);
	nf_model_free(o);
	nf_model_free(q1);
	nf_model_free(q3);
	nf_model_free(m);
	nf_awq_report_free(NULL);
}

static void test_outputs_kernels(void)
{
	static const size_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {64, 128, 256}, {5, 33, 200},
					   {2, 576, 17}, {7, 40, 79}};
	unsigned st = 17;
	for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
		size_t nb = shapes[k][0], cols = shapes[k][1], n_x = shapes[k][2];
		float *q = malloc(sizeof(float) * nb * cols), *xt = malloc(sizeof(float) * cols * n_x);
		float *want = malloc(sizeof(float) * nb * n_x), *got = malloc(sizeof(float) * nb * n_x);
		fill(q, nb * cols, &st, 1.0f);
		fill(xt, cols * n_x, &st, 3.0f);
		is_int(nf_awq_outputs(NF_AWQ_ISA_SCALAR, want, q, xt, nb, cols, n_x), 0, "scalar runs");
		double worst = 0.0; /* the scalar kernel against double sums */
		for (size_t r = 0; r < nb; r++)
			for (size_t b = 0; b < n_x; b++) {
				double sum = 0.0;
				for (size_t c = 0; c < cols; c++)
					sum += (double)q[r * cols + c] * xt[c * n_x + b];
				worst = fmax(worst, fabs(sum - want[r * n_x + b]));
			}
		ok(worst < 1e-4 * (double)cols, "%zux%zu by %zu: scalar outputs are the products (%.1e)",
		   nb, cols, n_x, worst);
		for (int isa = NF_AWQ_ISA_AVX2; isa < NF_AWQ_ISA_COUNT; isa++) {
			memset(got, 0xff, sizeof(float) * nb * n_x);
			if (nf_awq_outputs((nf_awq_isa)isa, got, q, xt, nb, cols, n_x)) {
				skip("instruction set %d does not run here", isa);
				continue;
			}
			ok(memcmp(got, want, sizeof(float) * nb * n_x) == 0,
			   "%zux%zu by %zu: instruction set %d gives the scalar bits", nb, cols, n_x, isa);
		}
		free(q);
		free(xt);
		free(want);
		free(got);
	}
	float y;
	ok(nf_awq_outputs(NF_AWQ_ISA_COUNT, &y, &y, &y, 1, 1, 1) != 0, "an unknown instruction set is refused");
}

static void test_int4_fakequant(void)
{
	enum { R = 3, C = 72 }; /* 72: a group of 64 and a short one of 8 */
	static float w[R * C], q[R * C], x[L_X * L_COLS], mean[L_COLS], s[L_COLS];
	static float big[L_ROWS * L_COLS];
	int group = 64;
	unsigned st = 23;
	fill(w, R * C, &st, 2.0f);
	nf_awq_int4_fakequant(q, w, R, C, &group);
	int near = 1;
	for (int r = 0; r < R; r++)
		for (int c0 = 0; c0 < C; c0 += group) {
			int n = C - c0 < group ? C - c0 : group;
			float lo = INFINITY, hi = -INFINITY;
			for (int i = 0; i < n; i++) {
				lo = fminf(lo, w[r * C + c0 + i]);
				hi = fmaxf(hi, w[r * C + c0 + i]);
			}
			/* half a step, and a little for the half-precision scale and min */
			float tol = 0.5f * (hi - lo) / 15.0f * 1.05f + 1e-3f;
			for (int i = 0; i < n; i++)
				near &= fabsf(q[r * C + c0 + i] - w[r * C + c0 + i]) <= tol;
		}
	ok(near, "int4 fake quantization: every weight within half a step of its group");
	w[5] = NAN;
	nf_awq_int4_fakequant(q, w, R, C, &group);
	ok(isnan(q[0]) && isnan(q[R * C - 1]), "a NaN weight makes the block NaN (alpha 0 wins)");

	/* the outlier layer again, with the engine's quantizer */
	fill(big, L_ROWS * L_COLS, &st, 1.0f);
	fill(x, L_X * L_COLS, &st, 1.0f);
	for (int b = 0; b < L_X; b++)
		for (int c = 5; c < L_COLS; c += 31)
			x[b * L_COLS + c] *= 40.0f;
	for (int b = 0; b < L_X; b++)
		for (int c = 0; c < L_COLS; c++)
			mean[c] += fabsf(x[b * L_COLS + c]) / L_X;
	const float *const mats[1] = {big};
	size_t rows[1] = {L_ROWS};
	nf_awq_target t = {mats, rows, 1, L_COLS, mean, x, L_X};
	nf_awq_opts o = {.fakequant = nf_awq_int4_fakequant, .ctx = &group, .threads = 1};
	nf_awq_choice ch = {0};
	is_int(nf_awq_search(&ch, s, &t, &o, NULL), 0, "search with the engine's int4 quantizer");
	/* measured 0.55: the engine's quantizer already fits each group better */
	ok(ch.alpha > 0.0f && ch.err_best <= 0.7 * ch.err_plain,
	   "AWQ (alpha %.2f) at most 0.7 of the plain error: %g vs %g", (double)ch.alpha,
	   ch.err_best, ch.err_plain);
}

int main(void)
{
	test_int4_fakequant();
	test_outputs_kernels();
	test_scales();
	test_outlier_layer();
	test_gqa();
	test_stories();
	return done_testing();
}
