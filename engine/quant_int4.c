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
#include "engine/kmath/dequant.h"
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


static int check_shape(size_t cols, int group)
{
	if (group != 32 && group != 64 && group != 128)
		return nf_error_set(NF_EINPUT, "int4: group %d is not 32, 64 or 128", group);
	if (cols == 0)
		return nf_error_set(NF_EINPUT, "int4: a row of no columns");
	return 0;
}

/* Where a group goes: its row's packed bytes, first column and gsm pair. */
typedef struct q4_dest {
	uint8_t *row;
	size_t c0;
	uint16_t *sm;
} q4_dest;

/* The levels of 4 weights on the grid (m, inv = 1 / scale, or 0): round((x
 * - m) * inv), ties to even, clamped to [0, 15], as the search scores them. */
static inline __m128 pack_levels4(__m128 x, __m128 m, __m128 inv)
{
	const __m128 magic = _mm_set1_ps(12582912.0f); /* as nf_round_even */
	__m128 q = _mm_sub_ps(_mm_add_ps(_mm_mul_ps(_mm_sub_ps(x, m), inv), magic), magic);
	return _mm_min_ps(_mm_max_ps(q, _mm_setzero_ps()), _mm_set1_ps((float)Q4_MAX));
}

/* 16 levels (bytes) of x[0, 16). */
static inline __m128i levels16(const float *x, __m128 m, __m128 inv)
{
	__m128i a = _mm_packs_epi32(_mm_cvttps_epi32(pack_levels4(_mm_loadu_ps(x), m, inv)),
				    _mm_cvttps_epi32(pack_levels4(_mm_loadu_ps(x + 4), m, inv)));
	__m128i b = _mm_packs_epi32(_mm_cvttps_epi32(pack_levels4(_mm_loadu_ps(x + 8), m, inv)),
				    _mm_cvttps_epi32(pack_levels4(_mm_loadu_ps(x + 12), m, inv)));
	return _mm_packus_epi16(a, b);
}

/* Pack the n weights x of one group (columns c0.. of a row, c0 a multiple
 * of 32) on the grid (m, inv): per block, columns j in the low nibbles and
 * j + 16 in the high ones.  A last short block is padded with m, level 0. */
static void pack_group(uint8_t *row, size_t c0, const float *x, size_t n, float m, float inv)
{
	__m128 vm = _mm_set1_ps(m), vi = _mm_set1_ps(inv);
	for (size_t i = 0; i < n; i += Q4_BLOCK) {
		float pad[Q4_BLOCK];
		const float *b = x + i;
		if (n - i < Q4_BLOCK) {
			for (size_t j = 0; j < Q4_BLOCK; j++)
				pad[j] = j < n - i ? x[i + j] : m;
			b = pad;
		}
		__m128i lo = levels16(b, vm, vi), hi = levels16(b + 16, vm, vi);
		/* levels <= 15: the shift moves no bits across bytes */
		_mm_storeu_si128((__m128i *)(row + nf_km_q4_byte(c0 + i)),
				 _mm_or_si128(lo, _mm_slli_epi16(hi, 4)));
	}
}

/* The grid search, SSE2: 4 groups a set. */
#define QV __m128
#define QV_SET 4
#define QV_FN(name) name##_sse2
#define QV_ATTR
#define QV_ATTR_F16C __attribute__((target("f16c")))
#define QV_ADD _mm_add_ps
#define QV_SUB _mm_sub_ps
#define QV_MUL _mm_mul_ps
#define QV_DIV _mm_div_ps
#define QV_MIN _mm_min_ps
#define QV_MAX _mm_max_ps
#define QV_AND _mm_and_ps
#define QV_ANDNOT _mm_andnot_ps
#define QV_OR _mm_or_ps
#define QV_GT _mm_cmpgt_ps
#define QV_LT _mm_cmplt_ps
#define QV_SET1 _mm_set1_ps
#define QV_ZERO _mm_setzero_ps
#define QV_LOAD _mm_loadu_ps
#define QV_STORE _mm_storeu_ps
#define QV_MOVEMASK _mm_movemask_ps
#define QV_ALL_ONES() _mm_castsi128_ps(_mm_set1_epi32(-1))
#define QV_HALF_ROUND_TRIP(v) _mm_cvtph_ps(_mm_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
#define QV_STORE_INT(p, v) _mm_storeu_si128((__m128i *)(p), _mm_cvttps_epi32(v))
#define QV_TRANSPOSE_IN(x, src, n) transpose_in_sse2((x), (src), (n))

/* x[i] = weight i of src[0..3], 4 weights of each at a time. */
static void transpose_in_sse2(__m128 *x, const float *const src[4], size_t n)
{
	size_t i = 0;
	for (; i + 4 <= n; i += 4) {
		__m128 r0 = _mm_loadu_ps(src[0] + i), r1 = _mm_loadu_ps(src[1] + i);
		__m128 r2 = _mm_loadu_ps(src[2] + i), r3 = _mm_loadu_ps(src[3] + i);
		_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
		x[i] = r0, x[i + 1] = r1, x[i + 2] = r2, x[i + 3] = r3;
	}
	for (; i < n; i++)
		x[i] = _mm_setr_ps(src[0][i], src[1][i], src[2][i], src[3][i]);
}

#include "engine/quant_int4_search.h"

#undef QV
#undef QV_SET
#undef QV_FN
#undef QV_ATTR
#undef QV_ATTR_F16C
#undef QV_ADD
#undef QV_SUB
#undef QV_MUL
#undef QV_DIV
#undef QV_MIN
#undef QV_MAX
#undef QV_AND
#undef QV_ANDNOT
#undef QV_OR
#undef QV_GT
#undef QV_LT
#undef QV_SET1
#undef QV_ZERO
#undef QV_LOAD
#undef QV_STORE
#undef QV_MOVEMASK
#undef QV_ALL_ONES
#undef QV_HALF_ROUND_TRIP
#undef QV_STORE_INT
#undef QV_TRANSPOSE_IN

/* The grid search, AVX: 8 groups a set, the same bits. */
#define AVX __attribute__((target("avx")))
#define QV __m256
#define QV_SET 8
#define QV_FN(name) name##_avx
#define QV_ATTR AVX
#define QV_ATTR_F16C __attribute__((target("avx,f16c")))
#define QV_ADD _mm256_add_ps
#define QV_SUB _mm256_sub_ps
#define QV_MUL _mm256_mul_ps
#define QV_DIV _mm256_div_ps
#define QV_MIN _mm256_min_ps
#define QV_MAX _mm256_max_ps
#define QV_AND _mm256_and_ps
#define QV_ANDNOT _mm256_andnot_ps
#define QV_OR _mm256_or_ps
#define QV_GT(a, b) _mm256_cmp_ps((a), (b), _CMP_GT_OS)
#define QV_LT(a, b) _mm256_cmp_ps((a), (b), _CMP_LT_OS)
#define QV_SET1 _mm256_set1_ps
#define QV_ZERO _mm256_setzero_ps
#define QV_LOAD _mm256_loadu_ps
#define QV_STORE _mm256_storeu_ps
#define QV_MOVEMASK _mm256_movemask_ps
#define QV_ALL_ONES() _mm256_castsi256_ps(_mm256_set1_epi32(-1))
#define QV_HALF_ROUND_TRIP(v) _mm256_cvtph_ps(_mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
#define QV_STORE_INT(p, v) _mm256_storeu_si256((__m256i *)(p), _mm256_cvttps_epi32(v))
#define QV_TRANSPOSE_IN(x, src, n) transpose_in_avx((x), (src), (n))

/* x[i] = weight i of src[0..7]: two halves of 4, as transpose_in_sse2. */
AVX static void transpose_in_avx(__m256 *x, const float *const src[8], size_t n)
{
	size_t i = 0;
	for (; i + 4 <= n; i += 4) {
		__m128 r[8];
		for (int k = 0; k < 8; k++)
			r[k] = _mm_loadu_ps(src[k] + i);
		_MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]);
		_MM_TRANSPOSE4_PS(r[4], r[5], r[6], r[7]);
		for (int k = 0; k < 4; k++)
			x[i + (size_t)k] = _mm256_set_m128(r[4 + k], r[k]);
	}
	for (; i < n; i++)
		x[i] = _mm256_setr_ps(src[0][i], src[1][i], src[2][i], src[3][i], src[4][i],
				      src[5][i], src[6][i], src[7][i]);
}

#include "engine/quant_int4_search.h"

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

int nf_quant_int4_rows_on(uint8_t *q4, uint16_t *gsm, const float *w, size_t rows, size_t cols,
			  int group, int avx, int f16c)
{
	size_t total, packed, rb = nf_quant_int4_row_bytes(cols);
	int err = check_shape(cols, group);
	if (err)
		return err;
	if (!nf_size_mul(&total, rows, cols) || !nf_size_mul(&packed, rows, rb))
		return nf_error_set(NF_EINPUT, "int4: %zu x %zu weights overflow", rows, cols);
	if ((err = check_values(w, total)))
		return err;
	memset(q4, 0, packed); /* the padding of a last short block stays 0 */
	if (avx)
		return quantize_matrix_avx(q4, gsm, w, rows, cols, group, f16c);
	return quantize_matrix_sse2(q4, gsm, w, rows, cols, group, f16c);
}

int nf_quant_int4_rows(uint8_t *q4, uint16_t *gsm, const float *w, size_t rows, size_t cols,
		       int group)
{
	return nf_quant_int4_rows_on(q4, gsm, w, rows, cols, group, nf_cpu_has(NF_CPU_AVX2),
				     nf_cpu_has(NF_CPU_F16C));
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
