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

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu.h"
#include "engine/gguf.h"
#include "engine/safetensors.h" /* nf_f16_to_f32, nf_f32_to_f16 */
#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

#define Q4_MAX 15
#define Q4_BLOCK 32          /* columns per packed block */
#define Q4_BLOCK_BYTES 16
#define HALF_MAX 65504.0f    /* the largest finite IEEE half */
#define Q4_GROUP_MAX 128  /* the largest group */
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

/* Byte of a row holding column c, and the shift of its nibble. */
static inline size_t nibble_byte(size_t c) { return c / Q4_BLOCK * Q4_BLOCK_BYTES + c % 16; }
static inline unsigned nibble_shift(size_t c) { return c % Q4_BLOCK >= 16 ? 4 : 0; }

static int check_shape(size_t cols, int group)
{
	if (group != 32 && group != 64 && group != 128)
		return nf_error_set(NF_EINPUT, "int4: group %d is not 32, 64 or 128", group);
	if (cols == 0)
		return nf_error_set(NF_EINPUT, "int4: a row of no columns");
	return 0;
}

/* The search fits Q4_SET groups side by side, one a lane of SSE2 vectors
 * (x86-64's baseline, so every host runs the same instructions and gets
 * the same bits): each candidate's sums, solve and score are a handful of
 * vector operations for four groups at once, where one group alone would
 * wait on each step's latency.  The groups of a set have the same number
 * of weights: all the matrix's whole groups in order, then the short last
 * groups of its rows. */
#define Q4_SET 4

typedef struct q4_set {
	__m128 x[Q4_GROUP_MAX]; /* x[i]: weight i of each lane's group */
	size_t n;               /* weights per group */
	__m128 lo, hi;          /* each group's range */
	int f16c;               /* the CPU converts halves (F16C) */
} q4_set;

/* A candidate grid per lane: its scale and min as the halves stored (as
 * floats), and its squared error. */
typedef struct q4_grid {
	__m128 scale, min, err;
} q4_grid;

static inline __m128 select4(__m128 mask, __m128 a, __m128 b)
{
	return _mm_or_ps(_mm_and_ps(mask, a), _mm_andnot_ps(mask, b));
}

__attribute__((target("f16c"))) static __m128 round_half_f16c(__m128 v)
{
	return _mm_cvtph_ps(_mm_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

/* Each lane to its nearest IEEE half (ties to even) and back, saturating
 * at +-HALF_MAX: the value stored.  F16C where the CPU has it, the same
 * bits as nf_f32_to_f16. */
static __m128 round_half(const q4_set *set, __m128 v)
{
	v = _mm_min_ps(_mm_max_ps(v, _mm_set1_ps(-HALF_MAX)), _mm_set1_ps(HALF_MAX));
	if (set->f16c)
		return round_half_f16c(v);
	float l[Q4_SET];
	_mm_storeu_ps(l, v);
	for (int k = 0; k < Q4_SET; k++)
		l[k] = nf_f16_to_f32(nf_f32_to_f16(l[k]));
	return _mm_loadu_ps(l);
}

/* The levels of one weight per lane on the grid (m, 1 / s): round((x - m)
 * * inv), ties to even (as nf_round_even), clamped to [0, 15]. */
static inline __m128 levels4(__m128 x, __m128 m, __m128 inv)
{
	const __m128 magic = _mm_set1_ps(12582912.0f);
	__m128 q = _mm_sub_ps(_mm_add_ps(_mm_mul_ps(_mm_sub_ps(x, m), inv), magic), magic);
	return _mm_min_ps(_mm_max_ps(q, _mm_setzero_ps()), _mm_set1_ps((float)Q4_MAX));
}

/* 1 / s where s > 0, else 0 (a grid of one level). */
static inline __m128 inverse(__m128 s)
{
	return _mm_and_ps(_mm_cmpgt_ps(s, _mm_setzero_ps()), _mm_div_ps(_mm_set1_ps(1.0f), s));
}

/* The squared error of each group on the grid (s, m), each weight on its
 * nearest level and dequantized as the dequantizer does (a product and a
 * sum, rounded apart); even and odd weights summed apart, then added. */
static __m128 grid_error(const q4_set *set, __m128 s, __m128 m)
{
	__m128 inv = inverse(s), e0 = _mm_setzero_ps(), e1 = e0;
	size_t i = 0;
	for (; i + 2 <= set->n; i += 2) {
		__m128 x0 = set->x[i], x1 = set->x[i + 1];
		__m128 d0 = _mm_sub_ps(_mm_add_ps(_mm_mul_ps(s, levels4(x0, m, inv)), m), x0);
		__m128 d1 = _mm_sub_ps(_mm_add_ps(_mm_mul_ps(s, levels4(x1, m, inv)), m), x1);
		e0 = _mm_add_ps(e0, _mm_mul_ps(d0, d0));
		e1 = _mm_add_ps(e1, _mm_mul_ps(d1, d1));
	}
	if (i < set->n) {
		__m128 d0 = _mm_sub_ps(_mm_add_ps(_mm_mul_ps(s, levels4(set->x[i], m, inv)), m), set->x[i]);
		e0 = _mm_add_ps(e0, _mm_mul_ps(d0, d0));
	}
	return _mm_add_ps(e0, e1);
}

/* The grid (scale, min) rounded to halves, where `valid`, replaces the
 * best of the lanes whose error it lowers. */
static void consider(q4_grid *best, const q4_set *set, __m128 scale, __m128 min, __m128 valid)
{
	__m128 s = round_half(set, scale), m = round_half(set, min);
	__m128 err = grid_error(set, s, m);
	__m128 better = _mm_and_ps(valid, _mm_cmplt_ps(err, best->err));
	best->scale = select4(better, s, best->scale);
	best->min = select4(better, m, best->min);
	best->err = select4(better, err, best->err);
}

/* Levels q = round(iscale * (x - lo)), then the least-squares scale and min
 * for those levels (the min solved again for the scale as rounded to half),
 * as a candidate where `valid`.  The sums are of x - lo, which keeps the
 * solve's differences small; those of the levels are exact integers. */
static void consider_levels(q4_grid *best, const q4_set *set, __m128 lo, __m128 iscale,
			    __m128 valid)
{
	/* each sum in two halves (even and odd weights), then added */
	__m128 z = _mm_setzero_ps(), sq[2] = {z, z}, sqq[2] = {z, z}, sqx[2] = {z, z}, sx[2] = {z, z};
	for (size_t i = 0; i < set->n; i += 2)
		for (size_t h = 0; h < 2 && i + h < set->n; h++) {
			__m128 x = set->x[i + h], q = levels4(x, lo, iscale), xc = _mm_sub_ps(x, lo);
			sq[h] = _mm_add_ps(sq[h], q);
			sqq[h] = _mm_add_ps(sqq[h], _mm_mul_ps(q, q));
			sqx[h] = _mm_add_ps(sqx[h], _mm_mul_ps(q, xc));
			sx[h] = _mm_add_ps(sx[h], xc);
		}
	sq[0] = _mm_add_ps(sq[0], sq[1]), sqq[0] = _mm_add_ps(sqq[0], sqq[1]);
	sqx[0] = _mm_add_ps(sqx[0], sqx[1]), sx[0] = _mm_add_ps(sx[0], sx[1]);
	__m128 n = _mm_set1_ps((float)set->n);
	__m128 det = _mm_sub_ps(_mm_mul_ps(n, sqq[0]), _mm_mul_ps(sq[0], sq[0]));
	__m128 scale = _mm_div_ps(_mm_sub_ps(_mm_mul_ps(n, sqx[0]), _mm_mul_ps(sq[0], sx[0])), det);
	valid = _mm_and_ps(valid, _mm_and_ps(_mm_cmpgt_ps(det, z), _mm_cmpgt_ps(scale, z)));
	if (!_mm_movemask_ps(valid))
		return;
	__m128 hs = round_half(set, scale);
	__m128 min = _mm_add_ps(lo, _mm_div_ps(_mm_sub_ps(sx[0], _mm_mul_ps(hs, sq[0])), n));
	consider(best, set, hs, min, valid);
}

/* Each lane's best stored (scale, min): plain min/max, then the levels of a
 * few candidate scales around it, each scored by its squared error with
 * the halves actually stored, then Lloyd steps from the best. */
static q4_grid fit_set(const q4_set *set)
{
	const __m128 all = _mm_castsi128_ps(_mm_set1_epi32(-1));
	__m128 lo = set->lo, range = _mm_sub_ps(set->hi, set->lo);
	q4_grid best = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_set1_ps(INFINITY)};
	consider(&best, set, _mm_div_ps(range, _mm_set1_ps((float)Q4_MAX)), lo, all);
	__m128 spread = _mm_cmpgt_ps(range, _mm_setzero_ps());
	for (int k = -SEARCH_STEPS; k <= SEARCH_STEPS; k++) {
		float levels = (float)Q4_MAX + SEARCH_SPAN * (float)k / (float)SEARCH_STEPS;
		consider_levels(&best, set, lo, _mm_div_ps(_mm_set1_ps(levels), range), spread);
	}
	/* refine as Lloyd's algorithm does: the levels of the stored grid,
	 * their least-squares grid, while the error falls */
	__m128 active = all;
	for (int it = 0; it < REFINE_STEPS; it++) {
		active = _mm_and_ps(active, _mm_cmpgt_ps(best.scale, _mm_setzero_ps()));
		if (!_mm_movemask_ps(active))
			break;
		__m128 before = best.err;
		consider_levels(&best, set, best.min, inverse(best.scale), active);
		active = _mm_and_ps(active, _mm_cmplt_ps(best.err, before));
	}
	return best;
}

/* Load the groups at src[0, Q4_SET) (n weights each) into the lanes. */
static void load_set(q4_set *set, const float *const src[Q4_SET], size_t n)
{
	size_t i = 0;
	set->n = n;
	for (; i + 4 <= n; i += 4) {
		__m128 r0 = _mm_loadu_ps(src[0] + i), r1 = _mm_loadu_ps(src[1] + i);
		__m128 r2 = _mm_loadu_ps(src[2] + i), r3 = _mm_loadu_ps(src[3] + i);
		_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
		set->x[i] = r0, set->x[i + 1] = r1, set->x[i + 2] = r2, set->x[i + 3] = r3;
	}
	for (; i < n; i++)
		set->x[i] = _mm_setr_ps(src[0][i], src[1][i], src[2][i], src[3][i]);
	set->lo = set->hi = set->x[0];
	for (i = 1; i < n; i++) {
		set->lo = _mm_min_ps(set->lo, set->x[i]);
		set->hi = _mm_max_ps(set->hi, set->x[i]);
	}
}

/* Where lane `lane` of a set goes: its row's packed bytes, first column
 * and gsm pair. */
typedef struct q4_dest {
	uint8_t *row;
	size_t c0;
	uint16_t *sm;
} q4_dest;

/* Store the lanes [0, used) of a fitted set: the halves, and the levels of
 * each weight on its grid packed by block (c0 a multiple of 32). */
static void store_set(const q4_set *set, const q4_grid *best, const q4_dest *dest, int used)
{
	uint8_t q[Q4_SET][Q4_GROUP_MAX + Q4_BLOCK] = {{0}};
	__m128 inv = inverse(best->scale);
	for (size_t i = 0; i < set->n; i++) {
		int32_t l[Q4_SET];
		_mm_storeu_si128((__m128i *)l, _mm_cvttps_epi32(levels4(set->x[i], best->min, inv)));
		for (int k = 0; k < Q4_SET; k++)
			q[k][i] = (uint8_t)l[k];
	}
	float s[Q4_SET], m[Q4_SET];
	_mm_storeu_ps(s, best->scale);
	_mm_storeu_ps(m, best->min);
	for (int k = 0; k < used; k++) {
		dest[k].sm[0] = nf_f32_to_f16(s[k]); /* halves already: exact */
		dest[k].sm[1] = nf_f32_to_f16(m[k]);
		for (size_t i = 0; i < set->n; i += Q4_BLOCK) {
			uint8_t *blk = dest[k].row + nibble_byte(dest[k].c0 + i);
			for (size_t j = 0; j < Q4_BLOCK_BYTES; j++) /* past n: level 0 */
				blk[j] = (uint8_t)(q[k][i + j] | q[k][i + j + 16] << 4);
		}
	}
}

/* The groups of columns [c0, c0 + n) of every row, Q4_SET at a time (a
 * last set short of lanes repeats its last group and stores only its
 * own). */
static void quantize_column_groups(uint8_t *q4, uint16_t *gsm, const float *w, size_t rows,
				   size_t cols, int group, size_t g_first, size_t g_count, size_t n,
				   q4_set *set)
{
	size_t groups = nf_quant_int4_groups(cols, group), rb = nf_quant_int4_row_bytes(cols);
	size_t total = rows * g_count;
	for (size_t t0 = 0; t0 < total; t0 += Q4_SET) {
		const float *src[Q4_SET];
		q4_dest dest[Q4_SET];
		int used = total - t0 < Q4_SET ? (int)(total - t0) : Q4_SET;
		for (int k = 0; k < Q4_SET; k++) {
			size_t t = t0 + (size_t)(k < used ? k : used - 1);
			size_t r = t / g_count, g = g_first + t % g_count;
			src[k] = w + r * cols + g * (size_t)group;
			dest[k] = (q4_dest){q4 + r * rb, g * (size_t)group, gsm + (r * groups + g) * 2};
		}
		load_set(set, src, n);
		q4_grid best = fit_set(set);
		store_set(set, &best, dest, used);
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
	/* the whole groups of every row, then each row's short last group */
	size_t whole = cols / (size_t)group, rest = cols % (size_t)group;
	q4_set *set = malloc(sizeof *set);
	if (!set)
		return nf_error_set(NF_ENOMEM, "int4: out of memory");
	set->f16c = nf_cpu_has(NF_CPU_F16C);
	memset(q4, 0, packed); /* the padding of a last short block stays 0 */
	if (whole)
		quantize_column_groups(q4, gsm, w, rows, cols, group, 0, whole, (size_t)group, set);
	if (rest)
		quantize_column_groups(q4, gsm, w, rows, cols, group, whole, 1, rest, set);
	free(set);
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
		float sq = s * (float)((row[nibble_byte(c)] >> nibble_shift(c)) & 0x0f);
		out[c] = sq + m;
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
