/*
 * quant_int4.c - int4 weights in groups (NF_QUANT_INT4_GROUP, quant.h):
 * the quantizer, the dequantizer, and the takeover of GGUF Q4_0/Q4_1 blocks.
 *
 * Packing (docs/quantization.md): a row is blocks of 32 columns, 16 bytes
 * each; byte j of a block holds column j in its low nibble and column j+16
 * in its high nibble (GGUF's order, so Q4_0/Q4_1 nibbles are copied as they
 * are).  Each group of `group` columns has an IEEE-half scale and min,
 * gsm[(r * groups + g) * 2 + 0 / 1], and w = scale * q + min, q in [0, 15].
 */
#include "engine/quant.h"

#include <math.h>
#include <string.h>

#include "engine/gguf.h"
#include "engine/kmath/dequant.h"
#include "engine/safetensors.h" /* nf_f16_to_f32, nf_f32_to_f16 */
#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

#define Q4_MAX 15
#define Q4_BLOCK 32          /* columns per packed block */
#define Q4_BLOCK_BYTES 16
#define HALF_MAX 65504.0f    /* the largest finite IEEE half */
/* The grid search: candidate levels (Q4_MAX - SPAN) .. (Q4_MAX + SPAN) in
 * STEPS steps spread the group's range over, as llama.cpp's make_qkx2 does
 * (it searches 14..16), then up to REFINE_STEPS Lloyd steps from the best.
 * On Gaussian weights 2 steps and the refinement reach the relative RMS
 * error of 10 steps alone (0.0675 at group 32) in under half the time. */
#define SEARCH_STEPS 2
#define SEARCH_SPAN 1.0f
#define REFINE_STEPS 3

size_t nf_quant_int4_groups(size_t cols, int group)
{
	return group > 0 ? (cols + (size_t)group - 1) / (size_t)group : 0;
}


static int check_shape(size_t cols, int group)
{
	if (group != 32 && group != 64 && group != 128)
		return nf_error_set(NF_EINPUT, "int4: group %d is not 32, 64 or 128", group);
	if (cols == 0)
		return nf_error_set(NF_EINPUT, "int4: a row of no columns");
	return 0;
}

/* The nearest half of x, saturating at +-HALF_MAX instead of overflowing. */
static uint16_t half_sat(float x)
{
	return nf_f32_to_f16(fminf(fmaxf(x, -HALF_MAX), HALF_MAX));
}

/* A candidate grid for one group, as it is stored. */
typedef struct q4_fit {
	uint16_t scale, min; /* halves */
	double err;          /* sum of squared errors with each q the nearest level */
} q4_fit;

/* Level of x on the grid (s, m): the nearest of 0..15. */
static inline float level(float x, float m, float inv_s)
{
	float q = nf_round_even((x - m) * inv_s);
	return q < 0.0f ? 0.0f : q > (float)Q4_MAX ? (float)Q4_MAX : q;
}

/* The squared error of x[0, n) on the stored grid (hs, hm), computed as
 * the dequantizer will compute each weight; it stops early once the error
 * reaches `bound` (the candidate has lost). */
static double grid_error(const float *x, size_t n, uint16_t hs, uint16_t hm, double bound)
{
	float s = nf_f16_to_f32(hs), m = nf_f16_to_f32(hm);
	float inv = s > 0.0f ? 1.0f / s : 0.0f;
	double err = 0.0;
	for (size_t i = 0; i < n && err < bound; i += 8)
		for (size_t j = i; j < i + 8 && j < n; j++) {
			float sq = s * level(x[j], m, inv); /* two statements: no fused multiply-add */
			double d = (double)(sq + m) - (double)x[j];
			err += d * d;
		}
	return err;
}

static void consider(q4_fit *best, const float *x, size_t n, float scale, float min)
{
	q4_fit f = {half_sat(scale), half_sat(min), 0.0};
	f.err = grid_error(x, n, f.scale, f.min, best->err);
	if (f.err < best->err)
		*best = f;
}

/* Levels q = round(iscale * (x - lo)), then the least-squares scale and min
 * for those levels (the min solved again for the scale as rounded to half),
 * as a candidate. */
static void consider_levels(q4_fit *best, const float *x, size_t n, float lo, float iscale)
{
	double sq = 0, sqq = 0, sx = 0, sqx = 0;
	for (size_t i = 0; i < n; i++) {
		float q = nf_round_even(iscale * (x[i] - lo));
		q = q < 0.0f ? 0.0f : q > (float)Q4_MAX ? (float)Q4_MAX : q;
		sq += q, sqq += (double)q * q, sx += x[i], sqx += (double)q * x[i];
	}
	double det = (double)n * sqq - sq * sq;
	if (det <= 0.0)
		return;
	double scale = ((double)n * sqx - sq * sx) / det;
	if (!(scale > 0.0))
		return;
	float hs = nf_f16_to_f32(half_sat((float)scale));
	consider(best, x, n, hs, (float)((sx - (double)hs * sq) / (double)n));
}

/* The best stored (scale, min) for one group: plain min/max, then the
 * levels of a few candidate scales around it, each scored by its squared
 * error with the halves actually stored. */
static q4_fit fit_group(const float *x, size_t n)
{
	float lo = x[0], hi = x[0];
	for (size_t i = 1; i < n; i++) {
		lo = fminf(lo, x[i]);
		hi = fmaxf(hi, x[i]);
	}
	q4_fit best = {0, 0, INFINITY};
	consider(&best, x, n, (hi - lo) / (float)Q4_MAX, lo);
	if (hi > lo)
		for (int k = -SEARCH_STEPS; k <= SEARCH_STEPS; k++) {
			float levels = (float)Q4_MAX + SEARCH_SPAN * (float)k / (float)SEARCH_STEPS;
			consider_levels(&best, x, n, lo, levels / (hi - lo));
		}
	/* then refine the best as Lloyd's algorithm does: the levels of the
	 * stored grid, their least-squares grid, while the error falls */
	for (int it = 0; it < REFINE_STEPS; it++) {
		float s = nf_f16_to_f32(best.scale), m = nf_f16_to_f32(best.min);
		double before = best.err;
		if (!(s > 0.0f))
			break;
		consider_levels(&best, x, n, m, 1.0f / s);
		if (!(best.err < before))
			break;
	}
	return best;
}

/* Pack the levels of x[0, n) (columns c0.. of a row) on the grid f. */
static void pack_group(uint8_t *row, size_t c0, const float *x, size_t n, q4_fit f)
{
	float s = nf_f16_to_f32(f.scale), m = nf_f16_to_f32(f.min);
	float inv = s > 0.0f ? 1.0f / s : 0.0f;
	for (size_t i = 0; i < n; i++) {
		size_t c = c0 + i;
		uint8_t q = (uint8_t)level(x[i], m, inv);
		row[nf_km_q4_byte(c)] |= (uint8_t)(q << nf_km_q4_shift(c));
	}
}

/* Weights the halves can frame: finite, within +-HALF_MAX (a min beyond it
 * cannot be stored). */
static int check_values(const float *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!(fabsf(w[i]) <= HALF_MAX))
			return nf_error_set(NF_EINPUT, "int4: weight %zu is %g (int4 takes finite "
					    "weights within +-65504, the IEEE-half range)", i,
					    (double)w[i]);
	return 0;
}

int nf_quant_int4_rows(uint8_t *q4, uint16_t *gsm, const float *w, size_t rows, size_t cols,
		       int group)
{
	size_t total, packed, rb = nf_quant_int4_row_bytes(cols);
	int err = check_shape(cols, group);
	if (err)
		return err;
	if (!nf_size_mul(&total, rows, cols) || !nf_size_mul(&packed, rows, rb))
		return nf_error_set(NF_EINPUT, "int4: %zu x %zu weights overflow", rows, cols);
	if ((err = check_values(w, total)))
		return err;
	size_t groups = nf_quant_int4_groups(cols, group), g_cols = (size_t)group;
	memset(q4, 0, packed); /* the padding of a last short block stays 0 */
	for (size_t r = 0; r < rows; r++) {
		const float *x = w + r * cols;
		uint8_t *row = q4 + r * rb;
		for (size_t g = 0; g < groups; g++) {
			size_t c0 = g * g_cols, n = cols - c0 < g_cols ? cols - c0 : g_cols;
			q4_fit f = fit_group(x + c0, n);
			pack_group(row, c0, x + c0, n, f);
			gsm[(r * groups + g) * 2] = f.scale;
			gsm[(r * groups + g) * 2 + 1] = f.min;
		}
	}
	return 0;
}

void nf_quant_int4_dequant_row(float *out, const uint8_t *q4, const uint16_t *gsm, size_t r,
			       size_t cols, int group)
{
	size_t groups = nf_quant_int4_groups(cols, group);
	const uint8_t *row = q4 + r * nf_quant_int4_row_bytes(cols);
	const uint16_t *sm = gsm + r * groups * 2;
	for (size_t c = 0; c < cols; c++) {
		size_t g = c / (size_t)group;
		float s = nf_f16_to_f32(sm[2 * g]), m = nf_f16_to_f32(sm[2 * g + 1]);
		out[c] = nf_km_q4_dequant(nf_km_q4_level(row, c), s, m);
	}
}

/* ---- GGUF Q4_0 / Q4_1 taken over ---- */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static int half_finite(uint16_t h) { return (h & 0x7c00) != 0x7c00; }

/* The min of a Q4_0 block of scale d: w = (q - 8) d = d q + (-8 d), and -8 d
 * is a half exactly (a power of two times a half) unless it overflows. */
static int q4_0_min(uint16_t *min, uint16_t d, size_t block)
{
	float m = -8.0f * nf_f16_to_f32(d);
	if (!(fabsf(m) <= HALF_MAX))
		return nf_error_set(NF_EUNSUPPORTED, "Q4_0 block %zu: scale %g: its min -8 * scale "
				    "is beyond the IEEE-half range", block,
				    (double)nf_f16_to_f32(d));
	*min = nf_f32_to_f16(m);
	return 0;
}

int nf_quant_int4_from_gguf(uint8_t *q4, uint16_t *gsm, const void *blocks, int ggml_type,
			    size_t rows, size_t cols)
{
	size_t n_blocks;
	int err = check_shape(cols, Q4_BLOCK);
	if (err)
		return err;
	if (cols % Q4_BLOCK)
		return nf_error_set(NF_EINPUT, "int4: a GGUF row of %zu columns is not whole blocks",
				    cols);
	if (ggml_type != NF_GGML_Q4_0 && ggml_type != NF_GGML_Q4_1)
		return nf_error_set(NF_EUNSUPPORTED, "int4: ggml type %d is not Q4_0 or Q4_1",
				    ggml_type);
	if (!nf_size_mul(&n_blocks, rows, cols / Q4_BLOCK))
		return nf_error_set(NF_EINPUT, "int4: %zu x %zu weights overflow", rows, cols);
	/* Q4_0: fp16 d, 16 bytes of nibbles; Q4_1: fp16 d, fp16 m, 16 bytes.
	 * Group 32 is one block, so block b is group b of the row-major gsm. */
	size_t head = ggml_type == NF_GGML_Q4_0 ? 2 : 4;
	const uint8_t *p = blocks;
	for (size_t b = 0; b < n_blocks; b++, p += head + Q4_BLOCK_BYTES) {
		uint16_t d = rd16(p), m = head == 4 ? rd16(p + 2) : 0;
		if (!half_finite(d) || !half_finite(m))
			return nf_error_set(NF_EINPUT, "%s block %zu: scale or min is not finite",
					    head == 2 ? "Q4_0" : "Q4_1", b);
		if (head == 2 && (err = q4_0_min(&m, d, b)))
			return err;
		gsm[2 * b] = d;
		gsm[2 * b + 1] = m;
		memcpy(q4 + b * Q4_BLOCK_BYTES, p + head, Q4_BLOCK_BYTES); /* already our order */
	}
	return 0;
}
