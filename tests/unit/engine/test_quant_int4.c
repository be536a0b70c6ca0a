/*
 * test_quant_int4.c - int4 groups (engine/quant_int4.c, engine/cpu/gemm_q4.c):
 * the quantizer's round-trip error (random rows, zeros, constants, values
 * at the half range, each group size and a short last group), refused
 * input, GGUF Q4_0/Q4_1 blocks taken over exactly against ggml_types.c's
 * dequantization (hand-made, random, and every Q4 matrix of the real
 * SmolLM2 GGUF through the model API), and gemm_q4 of every kernel family
 * against the scalar one, bit for bit, and the scalar one against a
 * double-precision sum over the dequantized weights.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "engine/arch.h"
#include "engine/checkpoint.h"
#include "engine/cpu/cpu.h"
#include "engine/gguf.h"
#include "engine/quant.h"
#include "engine/safetensors.h"
#include "util/error.h"
#include "tests/tap.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_u64(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}
/* uniform in [-1, 1) */
static float frand(void) { return (float)((next_u64() >> 40) & 0xffffff) / 8388608.0f - 1.0f; }

/* An int4 matrix quantized from w, and w dequantized back. */
typedef struct q4_mat {
	size_t rows, cols, groups;
	int group;
	uint8_t *q4;
	uint16_t *gsm;
	float *back;
} q4_mat;

static void q4_free(q4_mat *m)
{
	free(m->q4), free(m->gsm), free(m->back);
	memset(m, 0, sizeof *m);
}

static int q4_make(q4_mat *m, const float *w, size_t rows, size_t cols, int group)
{
	m->rows = rows, m->cols = cols, m->group = group;
	m->groups = nf_quant_int4_groups(cols, group);
	m->q4 = malloc(rows * cols / 2);
	m->gsm = malloc(rows * m->groups * 2 * sizeof(uint16_t));
	m->back = malloc(rows * cols * sizeof(float));
	int err = nf_quant_int4_rows(m->q4, m->gsm, w, rows, cols, group);
	for (size_t r = 0; !err && r < rows; r++)
		nf_quant_int4_dequant_row(m->back + r * cols, m->q4, m->gsm, r, cols, group);
	return err;
}

/* Sum of squared errors of x[0, n) on the plain min/max grid stored in
 * half, what the quantizer's search must not do worse than. */
static double minmax_sse(const float *x, size_t n)
{
	float lo = x[0], hi = x[0];
	for (size_t i = 1; i < n; i++)
		lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
	float s = nf_f16_to_f32(nf_f32_to_f16((hi - lo) / 15.0f)), m = nf_f16_to_f32(nf_f32_to_f16(lo));
	double sse = 0;
	for (size_t i = 0; i < n; i++) {
		float q = s > 0 ? nearbyintf((x[i] - m) / s) : 0;
		q = q < 0 ? 0 : q > 15 ? 15 : q;
		double d = (double)(s * q + m) - x[i];
		sse += d * d;
	}
	return sse;
}

/* Random rows at each group size (and short last groups): every weight
 * within two steps of its group's min/max grid, every group's squared error no
 * worse than min/max's, and the search clearly better overall. */
static void test_round_trip_random(void)
{
	static const struct { size_t cols; int group; } shapes[] = {
		{256, 32}, {256, 64}, {256, 128}, {96, 64}, {160, 128}, {224, 128}, {32, 128},
	};
	for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
		size_t rows = 7, cols = shapes[si].cols;
		int group = shapes[si].group;
		float *w = malloc(rows * cols * sizeof(float));
		for (size_t i = 0; i < rows * cols; i++)
			w[i] = frand() * 0.05f + (i % 7 == 0 ? 0.02f : 0.0f);
		q4_mat m;
		int err = q4_make(&m, w, rows, cols, group);
		size_t step_bad = 0, worse = 0;
		double sse = 0, sse_mm = 0;
		for (size_t r = 0; r < rows && !err; r++)
			for (size_t c0 = 0; c0 < cols; c0 += (size_t)group) {
				size_t n = cols - c0 < (size_t)group ? cols - c0 : (size_t)group;
				const float *x = w + r * cols + c0, *b = m.back + r * cols + c0;
				float lo = x[0], hi = x[0];
				double g_sse = 0;
				for (size_t i = 0; i < n; i++)
					lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
				for (size_t i = 0; i < n; i++) {
					double d = (double)b[i] - x[i];
					g_sse += d * d;
					/* the least-squares grid may clip an extreme
					 * weight, but never by more than a step */
					if (fabs(d) > (hi - lo) / 15.0 * 2.0)
						step_bad++;
				}
				double mm = minmax_sse(x, n);
				worse += g_sse > mm * (1 + 1e-9);
				sse += g_sse, sse_mm += mm;
			}
		ok(!err && step_bad == 0 && worse == 0,
		   "random %zux%zu group %d: every weight within 2 grid steps (%zu not), no group worse "
		   "than min/max (%zu are)", rows, cols, group, step_bad, worse);
		ok(!err && sse < 0.9 * sse_mm, "random %zux%zu group %d: the search cuts the squared "
		   "error below min/max's (%.3g vs %.3g)", rows, cols, group, sse, sse_mm);
		q4_free(&m);
		free(w);
	}
}

/* The search on SSE2 and on AVX, its halves in software and through F16C:
 * the same bytes, on shapes with whole groups, a short last group, and
 * more or fewer groups than a set's lanes. */
static void test_paths_agree(void)
{
	static const struct { size_t rows, cols; int group; } shapes[] = {
		{9, 256, 32}, {3, 96, 64}, {5, 200, 128}, {1, 48, 32}, {17, 160, 32},
	};
	int avx = nf_cpu_has(NF_CPU_AVX2), f16c = nf_cpu_has(NF_CPU_F16C);
	for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
		size_t rows = shapes[si].rows, cols = shapes[si].cols, rb = nf_quant_int4_row_bytes(cols);
		int group = shapes[si].group;
		size_t gsm_n = rows * nf_quant_int4_groups(cols, group) * 2;
		float *w = malloc(rows * cols * sizeof(float));
		uint8_t *q[4];
		uint16_t *g[4];
		for (size_t i = 0; i < rows * cols; i++) /* spreads from near-constant to wide */
			w[i] = frand() * (0.001f + 0.05f * (float)(i % 13)) + (i % 7 == 0 ? 0.02f : 0.0f);
		int err = 0, same = 1;
		for (int p = 0; p < 4; p++) {
			q[p] = calloc(rows, rb);
			g[p] = calloc(gsm_n, sizeof(uint16_t));
			int on_avx = p & 1, on_f16c = p >> 1 & 1;
			if ((on_avx && !avx) || (on_f16c && !f16c))
				on_avx &= avx, on_f16c &= f16c; /* what this CPU runs */
			err |= nf_quant_int4_rows_on(q[p], g[p], w, rows, cols, group, on_avx, on_f16c);
			if (p)
				same &= !memcmp(q[p], q[0], rows * rb) &&
					!memcmp(g[p], g[0], gsm_n * sizeof(uint16_t));
		}
		ok(!err && same, "%zux%zu group %d: SSE2 and AVX, software and F16C halves, the same "
		   "bytes%s", rows, cols, group, avx && f16c ? "" : " (this CPU runs only some)");
		for (int p = 0; p < 4; p++)
			free(q[p]), free(g[p]);
		free(w);
	}
}

/* Zeros come back as zeros; a constant row as its nearest half. */
static void test_round_trip_special(void)
{
	size_t cols = 96;
	float w[2 * 96];
	for (size_t c = 0; c < cols; c++)
		w[c] = 0.0f, w[cols + c] = 0.3f;
	for (int group = 32; group <= 128; group *= 2) {
		q4_mat m;
		int err = q4_make(&m, w, 2, cols, group);
		int zeros = 1, consts = 1;
		for (size_t c = 0; c < cols && !err; c++) {
			zeros &= m.back[c] == 0.0f;
			consts &= m.back[cols + c] == nf_f16_to_f32(nf_f32_to_f16(0.3f));
		}
		ok(!err && zeros, "group %d: a row of zeros comes back as zeros", group);
		ok(!err && consts, "group %d: a constant row comes back as its nearest half", group);
		q4_free(&m);
	}
}

/* Values at the edge of the half range: the error stays within a grid
 * step of the group's range (scale and min must not overflow). */
static void test_round_trip_huge(void)
{
	size_t rows = 3, cols = 64;
	float w[3 * 64];
	for (size_t c = 0; c < cols; c++) {
		w[c] = c % 2 ? 65504.0f : -65504.0f;          /* the whole range */
		w[cols + c] = 60000.0f + (float)c * 70.0f;     /* up to the top */
		w[2 * cols + c] = c == 5 ? 65000.0f : frand(); /* one outlier */
	}
	q4_mat m;
	int err = q4_make(&m, w, rows, cols, 32);
	double worst = 0;
	for (size_t r = 0; r < rows && !err; r++)
		for (size_t g = 0; g < 2; g++) {
			float lo = INFINITY, hi = -INFINITY;
			for (size_t c = g * 32; c < g * 32 + 32; c++)
				lo = fminf(lo, w[r * cols + c]), hi = fmaxf(hi, w[r * cols + c]);
			for (size_t c = g * 32; c < g * 32 + 32; c++) {
				double d = fabs((double)m.back[r * cols + c] - w[r * cols + c]);
				if (!isfinite(m.back[r * cols + c]))
					d = INFINITY;
				worst = fmax(worst, d / ((hi - lo) / 15.0 + 1e-30));
			}
		}
	ok(!err && worst <= 1.01, "weights up to +-65504: each within a grid step (worst %.3f steps)",
	   worst);
	q4_free(&m);
}

/* A row of 48 columns (not whole blocks): the second block's high nibbles
 * (columns 48..63) are padding, zero; the 48 come back within a step. */
static void test_short_row(float *w, uint8_t *q4, uint16_t *gsm)
{
	float back[48];
	int pad_zero = 1, close = 1;
	for (size_t c = 0; c < 48; c++)
		w[c] = (float)c * 0.01f - 0.2f;
	ok(nf_quant_int4_rows(q4, gsm, w, 1, 48, 32) == 0, "48 columns quantize: %s", nf_error_last());
	for (size_t j = 16; j < 32; j++)
		pad_zero &= (q4[j] >> 4) == 0;
	ok(pad_zero, "48 columns: the padding of the last block is zero");
	nf_quant_int4_dequant_row(back, q4, gsm, 0, 48, 32);
	for (size_t c = 0; c < 48; c++)
		close &= fabsf(back[c] - w[c]) <= 0.02f;
	ok(close, "48 columns: every weight within a step of 0.02");
}

/* NaN, Inf and weights beyond the half range are refused with their index;
 * so are group sizes and column counts the packing has no place for. */
static void test_refused(void)
{
	float w[64];
	uint8_t q4[32];
	uint16_t gsm[8];
	const float bad[] = {NAN, INFINITY, -INFINITY, 70000.0f};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		for (size_t c = 0; c < 64; c++)
			w[c] = 0.1f;
		w[37] = bad[i];
		int err = nf_quant_int4_rows(q4, gsm, w, 1, 64, 32);
		ok(err == NF_EINPUT && strstr(nf_error_last(), "weight 37"),
		   "weight %g refused with its index: %s", (double)bad[i], nf_error_last());
	}
	w[37] = 0.1f;
	const int groups[] = {0, 16, 48, 256, -32};
	for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
		ok(nf_quant_int4_rows(q4, gsm, w, 1, 64, groups[i]) == NF_EINPUT,
		   "group %d refused", groups[i]);
	ok(nf_quant_int4_rows(q4, gsm, w, 1, 0, 32) == NF_EINPUT, "a row of no columns refused");
	test_short_row(w, q4, gsm);
	ok(nf_quant_int4_rows(q4, gsm, w, 1, 0, 32) == NF_EINPUT, "0 columns refused");
}

/* ---- GGUF takeover ---- */

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }

/* Take over `rows` x `cols` of blocks and compare our dequantization with
 * ggml_types.c's, element by element (== : equal values; the only bit
 * difference == allows is a zero's sign, which no sum sees). */
static int takeover_equal(const uint8_t *blocks, int type, size_t rows, size_t cols,
			  size_t *mismatch)
{
	size_t groups = cols / 32;
	uint8_t *q4 = malloc(rows * cols / 2);
	uint16_t *gsm = malloc(rows * groups * 2 * sizeof(uint16_t));
	float *ref = malloc(rows * cols * sizeof(float)), *ours = malloc(cols * sizeof(float));
	int err = nf_quant_int4_from_gguf(q4, gsm, blocks, type, rows, cols);
	if (!err)
		err = nf_ggml_dequantize(ref, blocks, (uint32_t)type, rows * cols);
	*mismatch = 0;
	for (size_t r = 0; r < rows && !err; r++) {
		nf_quant_int4_dequant_row(ours, q4, gsm, r, cols, 32);
		for (size_t c = 0; c < cols; c++)
			*mismatch += !(ours[c] == ref[r * cols + c]);
	}
	free(q4), free(gsm), free(ref), free(ours);
	return err;
}

/* One block of each type with known values. */
static void test_gguf_known(void)
{
	uint8_t b0[18], b1[20];
	put16(b0, nf_f32_to_f16(0.5f));
	put16(b1, nf_f32_to_f16(0.25f));
	put16(b1 + 2, nf_f32_to_f16(-1.5f));
	for (int j = 0; j < 16; j++)
		b0[2 + j] = b1[4 + j] = (uint8_t)(j | (15 - j) << 4);
	uint8_t q4[16];
	uint16_t gsm[2];
	float out[32];
	int ok0 = !nf_quant_int4_from_gguf(q4, gsm, b0, NF_GGML_Q4_0, 1, 32), ok1 = ok0;
	nf_quant_int4_dequant_row(out, q4, gsm, 0, 32, 32);
	for (int j = 0; j < 16; j++)
		ok0 &= out[j] == (float)(j - 8) * 0.5f && out[j + 16] == (float)(7 - j) * 0.5f;
	ok(ok0 && nf_f16_to_f32(gsm[1]) == -4.0f, "Q4_0 block: w = (q - 8) * 0.5, min -4");
	ok1 &= !nf_quant_int4_from_gguf(q4, gsm, b1, NF_GGML_Q4_1, 1, 32);
	nf_quant_int4_dequant_row(out, q4, gsm, 0, 32, 32);
	for (int j = 0; j < 16; j++)
		ok1 &= out[j] == 0.25f * (float)j - 1.5f && out[j + 16] == 0.25f * (float)(15 - j) - 1.5f;
	ok(ok1, "Q4_1 block: w = 0.25 q - 1.5");
}

/* A random half: any finite one, or one of the small magnitudes real
 * scales have. */
static uint16_t random_half(void)
{
	for (;;) {
		uint16_t h = (uint16_t)next_u64();
		if (next_u64() % 2)
			h = (uint16_t)((h & 0x83ff) | (uint16_t)(0x1800 + (next_u64() % 0x1400)));
		if ((h & 0x7c00) != 0x7c00)
			return h;
	}
}

static void test_gguf_random(void)
{
	size_t rows = 9, cols = 96, nb = rows * cols / 32;
	for (int type = NF_GGML_Q4_0; type <= NF_GGML_Q4_1; type++) {
		size_t bsz = type == NF_GGML_Q4_0 ? 18 : 20, mismatch = 0;
		uint8_t *blocks = malloc(nb * bsz);
		for (size_t b = 0; b < nb; b++) {
			uint8_t *p = blocks + b * bsz;
			uint16_t d = random_half();
			if (type == NF_GGML_Q4_0) /* -8 d must fit in half */
				d = (uint16_t)(d & 0x83ff) | (uint16_t)((d & 0x7c00) % 0x6c00);
			put16(p, d);
			if (type == NF_GGML_Q4_1)
				put16(p + 2, random_half());
			for (size_t j = bsz - 16; j < bsz; j++)
				p[j] = (uint8_t)next_u64();
		}
		int err = takeover_equal(blocks, type, rows, cols, &mismatch);
		ok(!err && mismatch == 0, "%s: %zu random blocks taken over exactly (%zu differ)",
		   type == NF_GGML_Q4_0 ? "Q4_0" : "Q4_1", nb, mismatch);
		free(blocks);
	}
}

static void test_gguf_refused(void)
{
	uint8_t b0[18] = {0}, b1[20] = {0}, q4[16];
	uint16_t gsm[2];
	put16(b0, nf_f32_to_f16(10000.0f)); /* -8 d = -80000: no half */
	ok(nf_quant_int4_from_gguf(q4, gsm, b0, NF_GGML_Q4_0, 1, 32) == NF_EUNSUPPORTED,
	   "Q4_0 scale 10000 refused: %s", nf_error_last());
	put16(b1 + 2, 0x7c00); /* min +Inf */
	ok(nf_quant_int4_from_gguf(q4, gsm, b1, NF_GGML_Q4_1, 1, 32) == NF_EINPUT,
	   "Q4_1 infinite min refused: %s", nf_error_last());
	ok(nf_quant_int4_from_gguf(q4, gsm, b1, NF_GGML_Q8_0, 1, 32) == NF_EUNSUPPORTED,
	   "Q8_0 is not taken over");
	ok(nf_quant_int4_from_gguf(q4, gsm, b1, NF_GGML_Q4_1, 1, 48) == NF_EINPUT,
	   "48 columns refused");
}

/* Every matrix of one table entry of a GGUF model, through the model API:
 * each Q4_0/Q4_1 one taken over equals the loader's float copy. */
typedef struct source_tally {
	size_t q4, other, missing, mismatch;
} source_tally;

static void tally_tensor(source_tally *t, const nf_model *m, const nf_arch_tensor *at)
{
	size_t rows = nf_arch_dim_value(at->rows, &m->cfg), cols = nf_arch_dim_value(at->cols, &m->cfg);
	float *back = malloc(cols * sizeof(float));
	uint8_t *q4 = malloc(rows * cols / 2);
	uint16_t *gsm = malloc(rows * (cols / 32) * 2 * sizeof(uint16_t));
	for (int l = 0; l < (at->per_layer ? m->cfg.n_layers : 1); l++) {
		int type;
		const void *blocks = nf_model_source_blocks(m, at->id, l, &type);
		const float *w = *nf_model_slot((nf_model *)m, at->id) + (size_t)l * rows * cols;
		if (!blocks) {
			t->missing++;
			continue;
		}
		if (type != NF_GGML_Q4_0 && type != NF_GGML_Q4_1) {
			t->other++;
			continue;
		}
		t->q4++;
		if (nf_quant_int4_from_gguf(q4, gsm, blocks, type, rows, cols)) {
			t->mismatch += rows * cols;
			continue;
		}
		for (size_t r = 0; r < rows; r++) {
			nf_quant_int4_dequant_row(back, q4, gsm, r, cols, 32);
			for (size_t c = 0; c < cols; c++)
				t->mismatch += !(back[c] == w[r * cols + c]);
		}
	}
	free(back), free(q4), free(gsm);
}

static void test_gguf_model(void)
{
	const char *shared = getenv("NF_SHARED");
	char path[1024];
	snprintf(path, sizeof path, "%s/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf",
		 shared ? shared : ".");
	if (!shared || access(path, R_OK) != 0) {
		skip("no SmolLM2 GGUF at %s", path);
		return;
	}
	nf_model *m = NULL;
	int err = nf_ckpt_load_gguf(&m, path);
	ok(!err, "SmolLM2 Q4_1 GGUF loads: %s", err ? nf_error_last() : "");
	if (err)
		return;
	const nf_arch *a = nf_arch_get(m->cfg.arch);
	source_tally t = {0};
	for (size_t i = 0; i < a->n_tensors; i++)
		if (nf_arch_present(&a->tensors[i], &m->cfg) && a->tensors[i].cols != NF_D_NONE)
			tally_tensor(&t, m, &a->tensors[i]);
	int type = 0;
	ok(t.q4 >= 7 * (size_t)m->cfg.n_layers && t.missing == 0 && t.mismatch == 0,
	   "SmolLM2: %zu Q4_0/Q4_1 matrices taken over exactly through nf_model_source_blocks "
	   "(%zu weights differ; %zu matrices of other types, %zu without blocks)", t.q4,
	   t.mismatch, t.other, t.missing);
	ok(nf_model_source_blocks(m, NF_T_WQ, m->cfg.n_layers, &type) == NULL && type == -1 &&
	   nf_model_source_blocks(m, NF_T_COUNT, 0, &type) == NULL,
	   "no blocks for a layer or tensor id out of range");
	nf_model_free(m);
}

/* ---- gemm_q4 ---- */

/* n int8 vectors of cols (rows of ldx bytes, zero-padded) and their scales. */
static int8_t *random_activations(float *xs, size_t n, size_t cols, size_t ldx)
{
	int8_t *xq = calloc(n, ldx);
	float *x = malloc(cols * sizeof(float));
	for (size_t b = 0; b < n; b++) {
		for (size_t c = 0; c < cols; c++)
			x[c] = frand() * (1.0f + (float)b);
		xs[b] = nf_quant_int8_vec(xq + b * ldx, x, cols);
	}
	free(x);
	return xq;
}

/* The scalar kernel against a double-precision sum over the dequantized
 * weights, accumulating over a sub-range. */
static void test_gemm_scalar(void)
{
	size_t rows = 13, cols = 224, n = 3, ldx = 256, ldy = 17;
	for (int group = 32; group <= 128; group *= 2) {
		float *w = malloc(rows * cols * sizeof(float)), xs[3];
		for (size_t i = 0; i < rows * cols; i++)
			w[i] = frand() * 0.1f;
		q4_mat m;
		int err = q4_make(&m, w, rows, cols, group);
		int8_t *xq = random_activations(xs, n, cols, ldx);
		float *y = calloc(n * ldy, sizeof(float));
		nf_bk_matrix mat = {.kind = NF_QUANT_INT4_GROUP, .rows = (int)rows, .cols = (int)cols,
				    .q4 = m.q4, .gsm = m.gsm, .group = group, .layout = NF_BK_ROWS};
		nf_cpu_gemm_q4_scalar(y, ldy, &mat, xq, ldx, xs, n, 0, (int)rows, 0);
		nf_cpu_gemm_q4_scalar(y, ldy, &mat, xq, ldx, xs, n, 4, 9, 1);
		double num = 0, den = 1e-30;
		for (size_t b = 0; b < n; b++)
			for (size_t r = 0; r < rows; r++) {
				double s = 0;
				for (size_t c = 0; c < cols; c++)
					s += (double)m.back[r * cols + c] * xq[b * ldx + c];
				s *= xs[b] * (r >= 4 && r < 9 ? 2.0 : 1.0);
				num = fmax(num, fabs(s - y[b * ldy + r]));
				den = fmax(den, fabs(s));
			}
		ok(!err && num / den < 1e-5, "scalar gemm_q4 group %d matches a double sum (rel err "
		   "%.2e)", group, num / den);
		free(w), free(xq), free(y);
		q4_free(&m);
	}
}

/* gemm_q4 of family `ops` against the scalar kernel on one shape: every
 * n of 1..5, the whole range, then accumulated over a sub-range that
 * starts and ends off the 8-row steps; bit for bit.  Returns the number
 * of differing outputs. */
static size_t family_diffs(const nf_backend_ops *ops, size_t rows, size_t cols, int group)
{
	size_t ldx = (cols + NF_BK_QPAD - 1) / NF_BK_QPAD * NF_BK_QPAD, ldy = rows + 3, diffs = 0;
	float *w = malloc(rows * cols * sizeof(float)), xs[5];
	for (size_t i = 0; i < rows * cols; i++)
		w[i] = frand() * 0.1f + (i % 5 == 0 ? 0.03f : 0.0f);
	q4_mat m;
	if (q4_make(&m, w, rows, cols, group)) {
		free(w);
		return rows * cols;
	}
	nf_bk_matrix mat = {.kind = NF_QUANT_INT4_GROUP, .rows = (int)rows, .cols = (int)cols,
			    .q4 = m.q4, .gsm = m.gsm, .group = group, .layout = NF_BK_ROWS};
	int8_t *xq = random_activations(xs, 5, cols, ldx);
	float *y0 = malloc(5 * ldy * sizeof(float)), *y1 = malloc(5 * ldy * sizeof(float));
	for (size_t n = 1; n <= 5; n++) {
		for (size_t i = 0; i < 5 * ldy; i++)
			y0[i] = y1[i] = frand();
		int r0 = (int)rows / 3, r1 = (int)rows - (int)rows / 5;
		nf_cpu_gemm_q4_scalar(y0, ldy, &mat, xq, ldx, xs, n, 0, (int)rows, 0);
		ops->gemm_q4(y1, ldy, &mat, xq, ldx, xs, n, 0, (int)rows, 0);
		nf_cpu_gemm_q4_scalar(y0, ldy, &mat, xq, ldx, xs, n, r0, r1, 1);
		ops->gemm_q4(y1, ldy, &mat, xq, ldx, xs, n, r0, r1, 1);
		for (size_t i = 0; i < 5 * ldy; i++)
			diffs += memcmp(&y0[i], &y1[i], sizeof(float)) != 0;
	}
	free(w), free(xq), free(y0), free(y1);
	q4_free(&m);
	return diffs;
}

/* Every family this CPU runs, at every group size, on rows that are and
 * are not multiples of 8 and rows that end with a short quad (a short
 * last group, a lone block of 32). */
static void test_gemm_families(void)
{
	/* 9 x 26240 at group 32: 820 groups, so that n = 5 vectors overflow
	 * the AVX2 kernel's table of x sums and take its per-step path */
	static const size_t shapes[][2] = {{8, 32},   {13, 96},   {16, 160}, {37, 224},
					   {24, 512}, {19, 576},  {8, 1536}, {3, 64}, {9, 26240}};
	for (const nf_backend_ops *const *f = nf_cpu_families(); *f; f++) {
		const nf_backend_ops *ops = *f;
		if (!ops->gemm_q4 || ops->gemm_q4 == nf_cpu_gemm_q4_scalar)
			continue;
		if (!ops->available()) {
			skip("%s: this CPU lacks the family", ops->name);
			continue;
		}
		for (int group = 32; group <= 128; group *= 2) {
			size_t diffs = 0;
			for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
				diffs += family_diffs(ops, shapes[i][0], shapes[i][1], group);
			ok(diffs == 0, "%s gemm_q4 group %d: bit-identical to scalar, n = 1..5, "
			   "accumulate 0/1 (%zu outputs differ)", ops->name, group, diffs);
		}
	}
}

int main(void)
{
	test_round_trip_random();
	test_paths_agree();
	test_round_trip_special();
	test_round_trip_huge();
	test_refused();
	test_gguf_known();
	test_gguf_random();
	test_gguf_refused();
	test_gguf_model();
	test_gemm_scalar();
	test_gemm_families();
	return done_testing();
}
