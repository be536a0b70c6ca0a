/*
 * gemm_q4.c - the int4-group GEMM (backend.h gemm_q4) of every kernel
 * family: weights NF_QUANT_INT4_GROUP (docs/quantization.md), activations
 * int8 with one scale per vector.  Row r of vector b is
 *
 *   y = xs[b] * sum over groups g, in order, of
 *         scale_g * sum_c q[c] * xq[c]  +  min_g * sum_c xq[c]
 *
 * The integer sums are exact, and every family does the float part in the
 * scalar family's order, one operation at a time (no fused multiply-add),
 * so all families give bit-identical results.
 */
#include <immintrin.h>

#include "engine/cpu/cpu.h"
#include "engine/quant.h"
#include "engine/safetensors.h" /* nf_f16_to_f32 */
#include "util/banned.h"

static inline void store(float *out, float v, int accumulate)
{
	*out = accumulate ? *out + v : v;
}

/* The float part of one group, as every family computes it: acc plus the
 * group's term, each product rounded on its own (separate statements keep
 * a compiler from fusing them). */
static inline float add_group(float acc, float scale, float min, int32_t qx, int32_t x)
{
	float sq = scale * (float)qx;
	float mx = min * (float)x;
	return acc + (sq + mx);
}

/* ---- scalar ---- */

/* One row (cols / 2 bytes, its gsm) against one int8 vector. */
static float row_dot_scalar(const uint8_t *row, const uint16_t *sm, const int8_t *x, size_t cols,
			    size_t group)
{
	float acc = 0.0f;
	for (size_t c0 = 0, g = 0; c0 < cols; c0 += group, g++) {
		size_t c1 = c0 + group < cols ? c0 + group : cols;
		int32_t qx = 0, xs = 0;
		for (size_t c = c0; c < c1; c++) {
			/* block of 32 columns = 16 bytes: low nibbles columns 0-15, high 16-31 */
			uint8_t byte = row[c / 32 * 16 + c % 16];
			int32_t q = c % 32 < 16 ? byte & 0x0f : byte >> 4;
			qx += q * x[c];
			xs += x[c];
		}
		acc = add_group(acc, nf_f16_to_f32(sm[2 * g]), nf_f16_to_f32(sm[2 * g + 1]), qx, xs);
	}
	return acc;
}

void nf_cpu_gemm_q4_scalar(float *y, size_t ldy, const nf_bk_matrix *w, const int8_t *xq,
			   size_t ldx, const float *xs, size_t n, int r0, int r1, int accumulate)
{
	size_t cols = nf_quant_int4_padded_cols((size_t)w->cols), group = (size_t)w->group;
	size_t groups = nf_quant_int4_groups(cols, w->group);
	for (int r = r0; r < r1; r++) {
		const uint8_t *row = w->q4 + (size_t)r * (cols / 2);
		const uint16_t *sm = w->gsm + (size_t)r * groups * 2;
		for (size_t b = 0; b < n; b++) {
			float acc = row_dot_scalar(row, sm, xq + b * ldx, cols, group);
			store(y + b * ldy + (size_t)r, acc * xs[b], accumulate);
		}
	}
}

/* The SIMD families take 8 rows at a time (8 streams of the matrix in
 * flight, as the int8 GEMV, each prefetched into L1 Q4_PREFETCH bytes
 * ahead), and a row's groups four at a time (a "quad": the 16 bytes of
 * gsm a row holds for four groups are one load).  Per quad they sum q * x
 * and x per group in integers, then do the float part group by group in
 * order, the 8 rows in the 8 lanes of a vector.  Rows left over go
 * through the scalar row. */
#define Q4_ROWS 8
#define Q4_PREFETCH 8192
#define Q4_QUAD 4 /* groups per quad */

/* How far ahead of offset `off` of its row (rs bytes long) each of the 8
 * rows prefetches, so that the prefetches run Q4_PREFETCH bytes ahead of
 * what the 8 rows together read: short rows (8 rows within Q4_PREFETCH)
 * are one stream block after block, so straight ahead; a long row leads
 * by its share, and near its end jumps to its row of the next 8. */
static inline size_t prefetch_ahead(size_t off, size_t rs)
{
	size_t lead = Q4_PREFETCH / Q4_ROWS;
	if (rs <= lead)
		return Q4_PREFETCH;
	return off + lead < rs ? lead : lead + (Q4_ROWS - 1) * rs;
}

/* Rows [r, r1) of the scalar family, for what is left after the 8-row steps. */
static void rows_scalar(float *y, size_t ldy, const nf_bk_matrix *w, const int8_t *xq,
			size_t ldx, const float *xs, size_t n, int r, int r1, int accumulate)
{
	nf_cpu_gemm_q4_scalar(y, ldy, w, xq, ldx, xs, n, r, r1, accumulate);
}

/* The sum of x over each group of the vector x (cols columns), as a
 * float (exact: below 2^24), into tab: what the SIMD families multiply by
 * each group's min, computed once per call when the vectors' groups fit in
 * Q4_XTAB_FLOATS rather than once per 8 rows. */
#define Q4_XTAB_FLOATS 4096

static void xsum_table(float *tab, const int8_t *x, size_t cols, int group)
{
	for (size_t c0 = 0, g = 0; c0 < cols; c0 += (size_t)group, g++) {
		int32_t s = 0;
		for (size_t c = c0; c < c0 + (size_t)group && c < cols; c++)
			s += x[c];
		tab[g] = (float)s;
	}
}

/* ---- AVX2 ---- */

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define INLINE __attribute__((always_inline)) static inline
#define Q4_NV2 2 /* vectors per weight load (prefill) */
#define HALF_TO_FLOAT_SCALE 0x1p112f /* see gsm8_avx2 */

/* sum of q * x over the 16 bytes of packed nibbles in each 128-bit lane of
 * w, against xl (the low nibbles' columns) and xh (the high ones'), as 8
 * int16 partial sums a lane, each of 4 products (|q x| <= 15 * 127, so
 * even two of them added stay within int16). */
AVX2 INLINE __m256i dot_nibbles16(__m256i w, __m256i xl, __m256i xh)
{
	const __m256i low = _mm256_set1_epi8(0x0f);
	__m256i lo = _mm256_and_si256(w, low), hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), low);
	return _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh));
}

/* dot_nibbles16 widened: 4 int32 partial sums a lane. */
AVX2 INLINE __m256i dot_nibbles(__m256i w, __m256i xl, __m256i xh)
{
	return _mm256_madd_epi16(dot_nibbles16(w, xl, xh), _mm256_set1_epi16(1));
}

/* 64 columns: 32 bytes at w of each of 8 rows (rs bytes apart) against nv
 * vectors (x, x + ldx, ...), prefetching `prefetch` bytes ahead (0: not).
 * Per vector: a[v], b[v] the 8 rows' sums of q * x over the first and the
 * second block of 32. */
AVX2 INLINE void chunk64_avx2(__m256i *a, __m256i *b, const uint8_t *w, size_t rs,
			      const int8_t *x, size_t ldx, int nv, size_t prefetch)
{
	__m256i xl[Q4_NV2], xh[Q4_NV2], h[Q4_NV2][4];
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++) {
		__m256i x0 = _mm256_loadu_si256((const __m256i *)(x + (size_t)v * ldx));
		__m256i x1 = _mm256_loadu_si256((const __m256i *)(x + (size_t)v * ldx + 32));
		/* byte j of a block: column j (low nibble), j + 16 (high) */
		xl[v] = _mm256_permute2x128_si256(x0, x1, 0x20);
		xh[v] = _mm256_permute2x128_si256(x0, x1, 0x31);
	}
	/* two rows at a time, folded at once (few registers live): lanes of a
	 * row's sums are [first block's 4 partials | second's] */
#pragma GCC unroll 4
	for (int i = 0; i < Q4_ROWS; i += 2) {
		const uint8_t *w0 = w + (size_t)i * rs, *w1 = w0 + rs;
		if (prefetch) {
			_mm_prefetch((const char *)w0 + prefetch, _MM_HINT_T0);
			_mm_prefetch((const char *)w1 + prefetch, _MM_HINT_T0);
		}
		__m256i v0 = _mm256_loadu_si256((const __m256i *)w0);
		__m256i v1 = _mm256_loadu_si256((const __m256i *)w1);
		/* the two rows' int16 partials added pairwise first (8 products
		 * each, within int16), then widened once */
#pragma GCC unroll 8
		for (int v = 0; v < nv; v++)
			h[v][i / 2] = _mm256_madd_epi16(_mm256_hadd_epi16(dot_nibbles16(v0, xl[v], xh[v]),
									  dot_nibbles16(v1, xl[v], xh[v])),
							_mm256_set1_epi16(1));
	}
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++) {
		/* rows 0-3 (4-7) of both blocks, then the blocks apart */
		__m256i h0 = _mm256_hadd_epi32(h[v][0], h[v][1]), h1 = _mm256_hadd_epi32(h[v][2], h[v][3]);
		a[v] = _mm256_permute2x128_si256(h0, h1, 0x20);
		b[v] = _mm256_permute2x128_si256(h0, h1, 0x31);
	}
}

/* 64 columns of one group (64 or more): 32 bytes at w of each of 8 rows
 * (rs bytes apart) against nv vectors (x, x + ldx, ...), prefetching
 * `prefetch` bytes ahead (0: not); a[v] the 8 rows' sums of q * x.  A
 * vector holds one block of rows i and i + 4 (two 16-byte loads) against
 * the block's activations broadcast to both halves; the two blocks' int16
 * sums are added before widening, so one add tree serves both and leaves
 * rows 0-7 in order with no lane crossing. */
AVX2 INLINE void chunk64_group_avx2(__m256i *a, const uint8_t *w, size_t rs, const int8_t *x,
				    size_t ldx, int nv, size_t prefetch)
{
	const __m256i low = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
	__m256i xl[Q4_NV2][2], xh[Q4_NV2][2], p[Q4_NV2][4];
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++)
#pragma GCC unroll 2
		for (int k = 0; k < 2; k++) { /* byte j of block k: columns j, j + 16 */
			const int8_t *xk = x + (size_t)v * ldx + 32 * k;
			xl[v][k] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)xk));
			xh[v][k] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xk + 16)));
		}
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		const uint8_t *w0 = w + (size_t)i * rs, *w4 = w0 + 4 * rs;
		if (prefetch) {
			_mm_prefetch((const char *)w0 + prefetch, _MM_HINT_T0);
			_mm_prefetch((const char *)w4 + prefetch, _MM_HINT_T0);
		}
		__m256i wa = _mm256_loadu2_m128i((const __m128i *)w4, (const __m128i *)w0);
		__m256i wb = _mm256_loadu2_m128i((const __m128i *)(w4 + 16), (const __m128i *)(w0 + 16));
		__m256i la = _mm256_and_si256(wa, low), ha = _mm256_and_si256(_mm256_srli_epi16(wa, 4), low);
		__m256i lb = _mm256_and_si256(wb, low), hb = _mm256_and_si256(_mm256_srli_epi16(wb, 4), low);
#pragma GCC unroll 8
		for (int v = 0; v < nv; v++) {
			/* |q x| <= 15 * 127: the eight products of sa + sb stay within int16 */
			__m256i sa = _mm256_add_epi16(_mm256_maddubs_epi16(la, xl[v][0]),
						      _mm256_maddubs_epi16(ha, xh[v][0]));
			__m256i sb = _mm256_add_epi16(_mm256_maddubs_epi16(lb, xl[v][1]),
						      _mm256_maddubs_epi16(hb, xh[v][1]));
			p[v][i] = _mm256_madd_epi16(_mm256_add_epi16(sa, sb), ones);
		}
	}
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++)
		a[v] = _mm256_hadd_epi32(_mm256_hadd_epi32(p[v][0], p[v][1]),
					 _mm256_hadd_epi32(p[v][2], p[v][3]));
}

/* One block of 32 columns (16 bytes at w of each of 8 rows), what a row's
 * last group may end with: a[v] the 8 rows' sums. */
AVX2 INLINE void chunk32_avx2(__m256i *a, const uint8_t *w, size_t rs, const int8_t *x,
			      size_t ldx, int nv)
{
	__m256i xl[Q4_NV2], xh[Q4_NV2], p[Q4_NV2][4];
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++) {
		const int8_t *xv = x + (size_t)v * ldx;
		xl[v] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)xv));
		xh[v] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xv + 16)));
	}
	/* rows i and i + 4 share a vector, so that the hadds leave rows in order */
#pragma GCC unroll 8
	for (int i = 0; i < 4; i++) {
		__m256i wi = _mm256_loadu2_m128i((const __m128i *)(w + (size_t)(i + 4) * rs),
						 (const __m128i *)(w + (size_t)i * rs));
#pragma GCC unroll 8
		for (int v = 0; v < nv; v++)
			p[v][i] = dot_nibbles(wi, xl[v], xh[v]);
	}
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++)
		a[v] = _mm256_hadd_epi32(_mm256_hadd_epi32(p[v][0], p[v][1]),
					 _mm256_hadd_epi32(p[v][2], p[v][3]));
}

/* The sum of x over each group [0, ng) of a quad of span columns, times
 * 2^112 (exact: an integer below 2^15, a power of two), in every lane of
 * xf[k]: the X_g of every row, to multiply by gsm8_avx2's mins. */
AVX2 INLINE void xsums_avx2(__m256 xf[Q4_QUAD], const int8_t *x, size_t span, int group, int ng)
{
	const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
	__m256i m[Q4_QUAD];
#pragma GCC unroll 8
	for (int k = 0; k < Q4_QUAD; k++) {
		__m256i s16 = _mm256_setzero_si256(); /* <= 4 blocks of 2 bytes a lane: no overflow */
		size_t c1 = (size_t)(k + 1) * (size_t)group;
		for (size_t c = (size_t)k * (size_t)group; k < ng && c < c1 && c < span; c += 32)
			s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(ones8,
				_mm256_loadu_si256((const __m256i *)(x + c))));
		m[k] = _mm256_madd_epi16(s16, ones16);
	}
	__m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
	/* [g0 g1 g2 g3 | g0 g1 g2 g3], each half a partial sum */
	__m256 f = _mm256_cvtepi32_ps(_mm256_add_epi32(t, _mm256_permute2x128_si256(t, t, 0x01)));
	f = _mm256_mul_ps(f, _mm256_set1_ps(HALF_TO_FLOAT_SCALE));
#pragma GCC unroll 8
	for (int k = 0; k < Q4_QUAD; k++)
		xf[k] = _mm256_permutevar8x32_ps(f, _mm256_set1_epi32(k));
}

/* xsums_avx2 of every group of the vector x (cols columns) into tab, for
 * the decode steps that read it once per 8 rows. */
AVX2 INLINE void xsum_table_avx2(float *tab, const int8_t *x, size_t cols, int group)
{
	size_t qcols = (size_t)group * Q4_QUAD;
	for (size_t c0 = 0, g = 0; c0 < cols; c0 += qcols, g += Q4_QUAD) {
		size_t span = cols - c0 < qcols ? cols - c0 : qcols;
		int ng = (int)((span + (size_t)group - 1) / (size_t)group);
		__m256 xf[Q4_QUAD];
		xsums_avx2(xf, x + c0, span, group, ng);
		for (int k = 0; k < ng; k++)
			tab[g + (size_t)k] = _mm256_cvtss_f32(xf[k]);
	}
}

/* The scales and mins of groups [0, ng) (ng <= 4) of a quad for 8 rows
 * (gsm rows ss halves apart) as floats, lane i = row i; the mins times
 * 2^-112 (the factor goes into the x sums instead: min * X_g is the same
 * product).  A half's bits moved to a float's (sign to bit 31, exponent
 * and mantissa to bits 13-27) are the half's value times 2^-112,
 * subnormals included; the scale is multiplied back by 2^112, exactly.
 * Shifts and masks, not F16C: the conversion would share the shuffle port
 * with the transposes and the integer sums' add trees.  A subnormal half
 * (below 2^-14) becomes a float denormal, which costs its multiply a
 * microcode assist (still the exact product); SmolLM2's int4-wo and
 * int4-awq engines hold none among 8.4 million halves. */

AVX2 INLINE void gsm8_avx2(__m256 sc[Q4_QUAD], __m256 mn[Q4_QUAD], const uint16_t *sm, size_t ss,
			   int ng)
{
	const __m128i m = _mm_cmpgt_epi32(_mm_set1_epi32(ng), _mm_setr_epi32(0, 1, 2, 3));
	__m256i y[4];
#pragma GCC unroll 8
	for (int i = 0; i < 4; i++) { /* a dword per group: scale | min << 16 */
		const int *lo = (const int *)(sm + (size_t)i * ss), *hi = (const int *)(sm + (size_t)(i + 4) * ss);
		__m128i l = ng == Q4_QUAD ? _mm_loadu_si128((const __m128i *)lo) : _mm_maskload_epi32(lo, m);
		__m128i h = ng == Q4_QUAD ? _mm_loadu_si128((const __m128i *)hi) : _mm_maskload_epi32(hi, m);
		y[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(l), h, 1);
	}
	/* transpose: y[i] = [row i | row i + 4] by group -> g[k] = group k by row */
	__m256i t0 = _mm256_unpacklo_epi32(y[0], y[1]), t1 = _mm256_unpackhi_epi32(y[0], y[1]);
	__m256i t2 = _mm256_unpacklo_epi32(y[2], y[3]), t3 = _mm256_unpackhi_epi32(y[2], y[3]);
	__m256i g[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
			_mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
	const __m256i bits = _mm256_set1_epi32((int)0x8fffe000u); /* sign, exponent, mantissa */
#pragma GCC unroll 8
	for (int k = 0; k < Q4_QUAD; k++) {
		__m256i s = _mm256_and_si256(_mm256_srai_epi32(_mm256_slli_epi32(g[k], 16), 3), bits);
		__m256i n = _mm256_and_si256(_mm256_srai_epi32(g[k], 3), bits);
		sc[k] = _mm256_mul_ps(_mm256_castsi256_ps(s), _mm256_set1_ps(HALF_TO_FLOAT_SCALE));
		mn[k] = _mm256_castsi256_ps(n);
	}
}

/* One quad of 8 rows: columns [c0, c0 + span) (span = 4 * group, or less
 * at the end of a row), groups g0.. of it, added to acc[v] in order. */
AVX2 INLINE void quad_avx2(__m256 *acc, const uint8_t *w, size_t rs, const uint16_t *sm, size_t ss,
			   const int8_t *x, size_t ldx, const float *xtab, size_t ldt, size_t c0,
			   size_t span, size_t g0, int group, int nv, int full)
{
	const int bpg = group / 32; /* blocks per group */
	__m256i qx[Q4_NV2][Q4_QUAD], a[Q4_NV2], b[Q4_NV2];
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++)
#pragma GCC unroll 8
		for (int k = 0; k < Q4_QUAD; k++)
			qx[v][k] = _mm256_setzero_si256();
	size_t chunks = span / 64;
#pragma GCC unroll 8
	for (size_t j = 0; j < chunks; j++) {
		size_t c = c0 + 64 * j;
		/* a prefetch a cache line: every other chunk (in a row's last,
		 * short quad too: the stream has no gaps) */
		size_t ahead = j % 2 == 0 ? prefetch_ahead(c / 2, rs) : 0;
		int k = (int)(2 * j) / bpg; /* the group of the first block */
		if (bpg == 1) { /* two groups */
			chunk64_avx2(a, b, w + c / 2, rs, x + c, ldx, nv, ahead);
#pragma GCC unroll 8
			for (int v = 0; v < nv; v++) {
				qx[v][k] = _mm256_add_epi32(qx[v][k], a[v]);
				qx[v][k + 1] = _mm256_add_epi32(qx[v][k + 1], b[v]);
			}
		} else {
			chunk64_group_avx2(a, w + c / 2, rs, x + c, ldx, nv, ahead);
#pragma GCC unroll 8
			for (int v = 0; v < nv; v++)
				qx[v][k] = _mm256_add_epi32(qx[v][k], a[v]);
		}
	}
	if (span % 64) { /* a last block of 32 */
		size_t c = c0 + span - 32;
		int k = (int)((span - 32) / 32) / bpg;
		chunk32_avx2(a, w + c / 2, rs, x + c, ldx, nv);
#pragma GCC unroll 8
		for (int v = 0; v < nv; v++)
			qx[v][k] = _mm256_add_epi32(qx[v][k], a[v]);
	}
	int ng = full ? Q4_QUAD : (int)((span + (size_t)group - 1) / (size_t)group);
	__m256 sc[Q4_QUAD], mn[Q4_QUAD];
	gsm8_avx2(sc, mn, sm + 2 * g0, ss, ng);
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++) {
		__m256 xf[Q4_QUAD];
		if (xtab) /* a broadcast load each, off the shuffle port */
#pragma GCC unroll 8
			for (int k = 0; k < Q4_QUAD; k++)
				xf[k] = k < ng ? _mm256_broadcast_ss(xtab + (size_t)v * ldt + g0 + (size_t)k)
					       : _mm256_setzero_ps();
		else
			xsums_avx2(xf, x + (size_t)v * ldx + c0, span, group, ng);
#pragma GCC unroll 8
		for (int k = 0; k < ng; k++) { /* add_group's operations, lane by lane */
			__m256 sq = _mm256_mul_ps(sc[k], _mm256_cvtepi32_ps(qx[v][k]));
			__m256 mx = _mm256_mul_ps(mn[k], xf[k]);
			acc[v] = _mm256_add_ps(acc[v], _mm256_add_ps(sq, mx));
		}
	}
}

/* 8 rows at w (gsm at sm) against nv vectors: y[v * ldy + i] (+)= row i. */
AVX2 INLINE void rows8_avx2(float *y, size_t ldy, const uint8_t *w, const uint16_t *sm,
			    size_t cols, int group, const int8_t *x, size_t ldx, const float *xtab,
			    size_t ldt, const float *xs, int nv, int accumulate)
{
	size_t rs = cols / 2, groups = nf_quant_int4_groups(cols, group), ss = 2 * groups;
	size_t qcols = (size_t)group * Q4_QUAD, full = cols / qcols;
	__m256 acc[Q4_NV2];
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++)
		acc[v] = _mm256_setzero_ps();
	for (size_t q = 0; q < full; q++)
		quad_avx2(acc, w, rs, sm, ss, x, ldx, xtab, ldt, q * qcols, qcols, q * Q4_QUAD, group,
			  nv, 1);
	if (full * qcols < cols)
		quad_avx2(acc, w, rs, sm, ss, x, ldx, xtab, ldt, full * qcols, cols - full * qcols,
			  full * Q4_QUAD, group, nv, 0);
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++) {
		__m256 out = _mm256_mul_ps(acc[v], _mm256_set1_ps(xs[v]));
		float *o = y + (size_t)v * ldy;
		if (accumulate)
			out = _mm256_add_ps(_mm256_loadu_ps(o), out);
		_mm256_storeu_ps(o, out);
	}
}

AVX2 INLINE void gemm_q4_avx2_group(float *y, size_t ldy, const nf_bk_matrix *w, const int8_t *xq,
				    size_t ldx, const float *xs, size_t n, int r0, int r1,
				    int accumulate, int group)
{
	size_t cols = nf_quant_int4_padded_cols((size_t)w->cols);
	size_t groups = nf_quant_int4_groups(cols, group), ss = 2 * groups;
	float xtab[Q4_XTAB_FLOATS];
	const float *tab = NULL;
	if (n * groups <= Q4_XTAB_FLOATS && r1 - r0 >= Q4_ROWS) {
		for (size_t b = 0; b < n; b++)
			xsum_table_avx2(xtab + b * groups, xq + b * ldx, cols, group);
		tab = xtab;
	}
	int r = r0;
	for (; r + Q4_ROWS <= r1; r += Q4_ROWS) {
		const uint8_t *wr = w->q4 + (size_t)r * (cols / 2);
		const uint16_t *sm = w->gsm + (size_t)r * ss;
		size_t b = 0;
		for (; b + Q4_NV2 <= n; b += Q4_NV2)
			rows8_avx2(y + b * ldy + (size_t)r, ldy, wr, sm, cols, group, xq + b * ldx, ldx,
				   tab ? tab + b * groups : NULL, groups, xs + b, Q4_NV2, accumulate);
		for (; b < n; b++)
			rows8_avx2(y + b * ldy + (size_t)r, ldy, wr, sm, cols, group, xq + b * ldx, ldx,
				   tab ? tab + b * groups : NULL, groups, xs + b, 1, accumulate);
	}
	rows_scalar(y, ldy, w, xq, ldx, xs, n, r, r1, accumulate);
}

AVX2 void nf_cpu_gemm_q4_avx2(float *y, size_t ldy, const nf_bk_matrix *w, const int8_t *xq,
			      size_t ldx, const float *xs, size_t n, int r0, int r1, int accumulate)
{
	/* one instance per group size: the quad's loops unroll to constants */
	if (w->group == 32)
		gemm_q4_avx2_group(y, ldy, w, xq, ldx, xs, n, r0, r1, accumulate, 32);
	else if (w->group == 64)
		gemm_q4_avx2_group(y, ldy, w, xq, ldx, xs, n, r0, r1, accumulate, 64);
	else
		gemm_q4_avx2_group(y, ldy, w, xq, ldx, xs, n, r0, r1, accumulate, 128);
}

/* ---- AVX-512 (the avx512-vnni family) ---- */

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma")))
#define Q4_NV512 4 /* vectors per weight load (prefill): 4 measured 12% above 2 */

/* sum of q * x over the 16 bytes of packed nibbles in each 128-bit lane of
 * w (unsigned: vpdpbusd takes them as they are) against xl (the low
 * nibbles' columns) and xh (the high ones'), as 4 partial sums a lane. */
AVX512 INLINE __m512i dot_nibbles512(__m512i w, __m512i xl, __m512i xh)
{
	const __m512i low = _mm512_set1_epi8(0x0f);
	__m512i lo = _mm512_and_si512(w, low), hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), low);
	return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xl), hi, xh);
}

/* The 8 rows' sums of each of 4 blocks from the rows' partial sums p[i]
 * (4 a lane, lane k = block k): z01 = [block 0 | block 1], z23 = [block 2 |
 * block 3], 8 rows each. */
AVX512 INLINE void blocks8_512(__m512i *z01, __m512i *z23, const __m512i p[Q4_ROWS])
{
	__m512i t[4];
#pragma GCC unroll 8
	for (int i = 0; i < 4; i++) /* lane: [r 0+2, r' 0+2, r 1+3, r' 1+3] of rows 2i, 2i + 1 */
		t[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2 * i], p[2 * i + 1]),
					_mm512_unpackhi_epi32(p[2 * i], p[2 * i + 1]));
	/* lane k: rows 0-3 (4-7) of block k */
	__m512i s0 = _mm512_add_epi32(_mm512_unpacklo_epi64(t[0], t[1]), _mm512_unpackhi_epi64(t[0], t[1]));
	__m512i s1 = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2], t[3]), _mm512_unpackhi_epi64(t[2], t[3]));
	*z01 = _mm512_permutex2var_epi32(s0, _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7,
							       20, 21, 22, 23), s1);
	*z23 = _mm512_permutex2var_epi32(s0, _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13,
							       14, 15, 28, 29, 30, 31), s1);
}

/* 128 columns (64 bytes at w of each of 8 rows, rs bytes apart; only the
 * first `left` columns when left < 128) against nv vectors, prefetching
 * `prefetch` bytes ahead (0: not).  Per vector: z01[v], z23[v] as
 * blocks8_512's, and (with_xsums) x01[v], x23[v] the vector's sum over
 * each block in the same layout. */
AVX512 INLINE void chunk128_512(__m512i *z01, __m512i *z23, __m512i *x01, __m512i *x23,
				const uint8_t *w, size_t rs, const int8_t *x, size_t ldx, int nv,
				size_t prefetch, size_t left, int with_xsums)
{
	const __m512i ilo = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13);
	const __m512i ihi = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
	const __m512i ones = _mm512_set1_epi8(0x11); /* q = 1 in both nibbles */
	int full = left >= 128;
	/* x is padded to 64 bytes, the weights not at all: mask both in a tail */
	__mmask64 all = ~(__mmask64)0;
	__mmask64 wm = full ? all : ((__mmask64)1 << (left / 2)) - 1;
	__mmask64 xm0 = left >= 64 ? all : ((__mmask64)1 << left) - 1;
	__mmask64 xm1 = full ? all : left > 64 ? ((__mmask64)1 << (left - 64)) - 1 : 0;
	__m512i xl[Q4_NV512], xh[Q4_NV512], p[Q4_NV512][Q4_ROWS];
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++) {
		const int8_t *xv = x + (size_t)v * ldx;
		__m512i x0 = full ? _mm512_loadu_si512(xv) : _mm512_maskz_loadu_epi8(xm0, xv);
		__m512i x1 = full ? _mm512_loadu_si512(xv + 64) : _mm512_maskz_loadu_epi8(xm1, xv + 64);
		/* lane k: columns 32k + 0..15 (low nibbles), 32k + 16..31 (high) */
		xl[v] = _mm512_permutex2var_epi64(x0, ilo, x1);
		xh[v] = _mm512_permutex2var_epi64(x0, ihi, x1);
		if (!with_xsums) { /* the caller has them from a table */
			x01[v] = x23[v] = _mm512_setzero_si512();
			continue;
		}
		__m512i t = dot_nibbles512(ones, xl[v], xh[v]);
		t = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, (_MM_PERM_ENUM)0x4e));
		t = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, (_MM_PERM_ENUM)0xb1));
		x01[v] = _mm512_shuffle_i32x4(t, t, 0x50); /* lanes 0, 0, 1, 1 */
		x23[v] = _mm512_shuffle_i32x4(t, t, 0xfa); /* lanes 2, 2, 3, 3 */
	}
#pragma GCC unroll 8
	for (int i = 0; i < Q4_ROWS; i++) {
		const uint8_t *wi = w + (size_t)i * rs;
		if (prefetch)
			_mm_prefetch((const char *)wi + prefetch, _MM_HINT_T0);
		__m512i wv = full ? _mm512_loadu_si512(wi) : _mm512_maskz_loadu_epi8(wm, wi);
#pragma GCC unroll 8
		for (int v = 0; v < nv; v++)
			p[v][i] = dot_nibbles512(wv, xl[v], xh[v]);
	}
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++)
		blocks8_512(&z01[v], &z23[v], p[v]);
}

/* [a's two 256-bit halves summed | b's]: two groups of 64 from 4 blocks. */
AVX512 INLINE __m512i pair_sums(__m512i a, __m512i b)
{
	return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, 0x44), _mm512_shuffle_i64x2(a, b, 0xee));
}

/* Both halves: the sum of the four 8-lane blocks of a and b (a group of 128). */
AVX512 INLINE __m512i quad_sum(__m512i a, __m512i b)
{
	__m512i s = _mm512_add_epi32(a, b);
	return _mm512_add_epi32(s, _mm512_shuffle_i64x2(s, s, 0x4e));
}

/* The scales and mins of groups [0, ng) of a quad for 8 rows (gsm rows ss
 * halves apart): sc[0] = [group 0 | group 1], sc[1] = [group 2 | group 3],
 * 8 rows each, as the quad's sums. */
AVX512 INLINE void gsm8_512(__m512 sc[2], __m512 mn[2], const uint16_t *sm, size_t ss, int ng)
{
	__mmask8 m = (__mmask8)((1u << ng) - 1);
	__m128i r[Q4_ROWS];
#pragma GCC unroll 8
	for (int i = 0; i < Q4_ROWS; i++) { /* a dword per group: scale | min << 16 */
		const uint16_t *p = sm + (size_t)i * ss;
		r[i] = ng == Q4_QUAD ? _mm_loadu_si128((const __m128i *)p) : _mm_maskz_loadu_epi32(m, p);
	}
	__m512i a = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(
			_mm512_castsi128_si512(r[0]), r[1], 1), r[2], 2), r[3], 3);
	__m512i b = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(
			_mm512_castsi128_si512(r[4]), r[5], 1), r[6], 2), r[7], 3);
	/* transpose: dword 4i + k of a (b) is row i (i + 4) of group k */
	const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
	for (int h = 0; h < 2; h++) {
		__m512i z = _mm512_permutex2var_epi32(a, _mm512_add_epi32(idx, _mm512_set1_epi32(2 * h)), b);
		sc[h] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(z));
		mn[h] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(z, 16)));
	}
}

/* One quad of 8 rows, as quad_avx2: columns [c0, c0 + span), groups g0.. */
AVX512 INLINE void quad_512(__m256 *acc, const uint8_t *w, size_t rs, const uint16_t *sm,
			    size_t ss, const int8_t *x, size_t ldx, const float *xtab, size_t ldt,
			    size_t c0, size_t span, size_t g0, int group, int nv, int full)
{
	/* per vector, groups [0 | 1] and [2 | 3]: sum q * x by row, and x's sum */
	__m512i qx[Q4_NV512][2], xsum[Q4_NV512][2];
	__m512i z01[Q4_NV512], z23[Q4_NV512], x01[Q4_NV512], x23[Q4_NV512];
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++)
		qx[v][0] = qx[v][1] = xsum[v][0] = xsum[v][1] = _mm512_setzero_si512();
	size_t chunks = (span + 127) / 128;
#pragma GCC unroll 4
	for (size_t j = 0; j < chunks; j++) {
		size_t c = c0 + 128 * j, left = full ? 128 : c0 + span - c;
		chunk128_512(z01, z23, x01, x23, w + c / 2, rs, x + c, ldx, nv,
			     full ? prefetch_ahead(c / 2, rs) : 0, left, xtab == NULL);
#pragma GCC unroll 8
		for (int v = 0; v < nv; v++) {
			if (xtab) { /* only the q * x sums */
				if (group == 32)
					qx[v][0] = z01[v], qx[v][1] = z23[v];
				else if (group == 64)
					qx[v][j] = pair_sums(z01[v], z23[v]);
				else
					qx[v][j / 2] = _mm512_mask_add_epi32(qx[v][j / 2], j % 2 ? 0xff00 : 0x00ff,
									     qx[v][j / 2], quad_sum(z01[v], z23[v]));
				continue;
			}
			if (group == 32) { /* the quad is this chunk */
				qx[v][0] = z01[v], qx[v][1] = z23[v];
				xsum[v][0] = x01[v], xsum[v][1] = x23[v];
			} else if (group == 64) { /* groups 2j, 2j + 1 */
				qx[v][j] = pair_sums(z01[v], z23[v]);
				xsum[v][j] = pair_sums(x01[v], x23[v]);
			} else { /* group j: the half j % 2 of pair j / 2 */
				__mmask16 h = j % 2 ? 0xff00 : 0x00ff;
				qx[v][j / 2] = _mm512_mask_add_epi32(qx[v][j / 2], h, qx[v][j / 2],
								     quad_sum(z01[v], z23[v]));
				xsum[v][j / 2] = _mm512_mask_add_epi32(xsum[v][j / 2], h, xsum[v][j / 2],
								       quad_sum(x01[v], x23[v]));
			}
		}
	}
	int ng = full ? Q4_QUAD : (int)((span + (size_t)group - 1) / (size_t)group);
	__m512 sc[2], mn[2];
	gsm8_512(sc, mn, sm + 2 * g0, ss, ng);
#pragma GCC unroll 8
	for (int h = 0; 2 * h < ng; h++)
#pragma GCC unroll 8
		for (int v = 0; v < nv; v++) { /* add_group's operations, two groups at once */
			__m512 sq = _mm512_mul_ps(sc[h], _mm512_cvtepi32_ps(qx[v][h]));
			__m512 xf = _mm512_cvtepi32_ps(xsum[v][h]);
			if (xtab) { /* [X of group 2h | of 2h + 1], 8 rows each */
				const float *t = xtab + (size_t)v * ldt + g0 + 2 * (size_t)h;
				__m256d hi = _mm256_castps_pd(_mm256_set1_ps(2 * h + 1 < ng ? t[1] : 0.0f));
				xf = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(t[0])),
									 hi, 1));
			}
			__m512 mx = _mm512_mul_ps(mn[h], xf);
			__m512 t = _mm512_add_ps(sq, mx);
			acc[v] = _mm256_add_ps(acc[v], _mm512_castps512_ps256(t));
			if (2 * h + 1 < ng)
				acc[v] = _mm256_add_ps(acc[v], _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t), 1)));
		}
}

/* 8 rows at w (gsm at sm) against nv vectors, as rows8_avx2. */
AVX512 INLINE void rows8_512(float *y, size_t ldy, const uint8_t *w, const uint16_t *sm,
			     size_t cols, int group, const int8_t *x, size_t ldx, const float *xtab,
			     size_t ldt, const float *xs, int nv, int accumulate)
{
	size_t rs = cols / 2, groups = nf_quant_int4_groups(cols, group), ss = 2 * groups;
	size_t qcols = (size_t)group * Q4_QUAD, full = cols / qcols;
	__m256 acc[Q4_NV512];
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++)
		acc[v] = _mm256_setzero_ps();
	for (size_t q = 0; q < full; q++)
		quad_512(acc, w, rs, sm, ss, x, ldx, xtab, ldt, q * qcols, qcols, q * Q4_QUAD, group,
			 nv, 1);
	if (full * qcols < cols)
		quad_512(acc, w, rs, sm, ss, x, ldx, xtab, ldt, full * qcols, cols - full * qcols,
			 full * Q4_QUAD, group, nv, 0);
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++) {
		__m256 out = _mm256_mul_ps(acc[v], _mm256_set1_ps(xs[v]));
		float *o = y + (size_t)v * ldy;
		if (accumulate)
			out = _mm256_add_ps(_mm256_loadu_ps(o), out);
		_mm256_storeu_ps(o, out);
	}
}

AVX512 INLINE void gemm_q4_512_group(float *y, size_t ldy, const nf_bk_matrix *w,
				     const int8_t *xq, size_t ldx, const float *xs, size_t n, int r0,
				     int r1, int accumulate, int group)
{
	size_t cols = nf_quant_int4_padded_cols((size_t)w->cols);
	size_t groups = nf_quant_int4_groups(cols, group), ss = 2 * groups;
	float xtab[Q4_XTAB_FLOATS];
	const float *tab = NULL;
	if (n * groups <= Q4_XTAB_FLOATS && r1 - r0 >= Q4_ROWS) {
		for (size_t b = 0; b < n; b++)
			xsum_table(xtab + b * groups, xq + b * ldx, cols, group);
		tab = xtab;
	}
#define Q4_TAB(b) (tab ? tab + (b) * groups : NULL), groups
	int r = r0;
	for (; r + Q4_ROWS <= r1; r += Q4_ROWS) {
		const uint8_t *wr = w->q4 + (size_t)r * (cols / 2);
		const uint16_t *sm = w->gsm + (size_t)r * ss;
		size_t b = 0;
		for (; b + Q4_NV512 <= n; b += Q4_NV512)
			rows8_512(y + b * ldy + (size_t)r, ldy, wr, sm, cols, group, xq + b * ldx, ldx,
				  Q4_TAB(b), xs + b, Q4_NV512, accumulate);
		if (b + 2 <= n) { /* a small batch of decode steps: 2 at once still */
			rows8_512(y + b * ldy + (size_t)r, ldy, wr, sm, cols, group, xq + b * ldx, ldx,
				  Q4_TAB(b), xs + b, 2, accumulate);
			b += 2;
		}
		for (; b < n; b++)
			rows8_512(y + b * ldy + (size_t)r, ldy, wr, sm, cols, group, xq + b * ldx, ldx,
				  Q4_TAB(b), xs + b, 1, accumulate);
	}
#undef Q4_TAB
	rows_scalar(y, ldy, w, xq, ldx, xs, n, r, r1, accumulate);
}

AVX512 void nf_cpu_gemm_q4_avx512(float *y, size_t ldy, const nf_bk_matrix *w, const int8_t *xq,
				  size_t ldx, const float *xs, size_t n, int r0, int r1,
				  int accumulate)
{
	if (w->group == 32)
		gemm_q4_512_group(y, ldy, w, xq, ldx, xs, n, r0, r1, accumulate, 32);
	else if (w->group == 64)
		gemm_q4_512_group(y, ldy, w, xq, ldx, xs, n, r0, r1, accumulate, 64);
	else
		gemm_q4_512_group(y, ldy, w, xq, ldx, xs, n, r0, r1, accumulate, 128);
}
