/*
 * gemm_h16.c - y = W x for 16-bit float weights (NF_QUANT_F16: IEEE
 * binary16, NF_QUANT_BF16: bfloat16; row-major) with float32 activations,
 * in every kernel family.  Each weight is widened exactly to float32.
 *
 * The summation order is fixed, the same in every family, so that the
 * AVX2 and AVX-512 results are bit-identical to the scalar one:
 *   - 16 lanes per (row, vector): lane j sums the columns c = j (mod 16),
 *     in increasing c, each step one fused multiply-add s = fma(w, x, s)
 *     from s = +0 (a tail shorter than 16 leaves the other lanes as they
 *     are);
 *   - the lanes are then added as a tree: j + (j+8), then + (j+4), then
 *     + (j+2), then + (j+1);
 *   - y = that sum, or y + that sum when accumulating.
 * AVX-512 holds the 16 lanes in one register, AVX2 in two (lanes 0-7 and
 * 8-15), the scalar kernel in an array and fmaf.
 */
#include <immintrin.h>
#include <math.h>

#include "engine/cpu/cpu.h"
#include "engine/safetensors.h"
#include "util/banned.h"

#define H16_LANES 16

static float widen_scalar(uint16_t h, int bf16)
{
	return bf16 ? nf_bf16_to_f32(h) : nf_f16_to_f32(h);
}

/* The lane tree of the header comment. */
static float sum_lanes(float s[H16_LANES])
{
	for (int width = H16_LANES / 2; width >= 1; width /= 2)
		for (int j = 0; j < width; j++)
			s[j] = s[j] + s[j + width];
	return s[0];
}

static float dot_h16_scalar(const uint16_t *w, const float *x, size_t cols, int bf16)
{
	float s[H16_LANES] = {0};
	for (size_t c = 0; c < cols; c++)
		s[c % H16_LANES] = fmaf(widen_scalar(w[c], bf16), x[c], s[c % H16_LANES]);
	return sum_lanes(s);
}

void nf_cpu_gemm_h16_scalar(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
			    size_t ldx, size_t n, int r0, int r1, int accumulate)
{
	size_t cols = (size_t)w->cols;
	int bf16 = w->kind == NF_QUANT_BF16;
	for (int r = r0; r < r1; r++) {
		const uint16_t *row = w->h16 + (size_t)r * cols;
		for (size_t b = 0; b < n; b++) {
			float s = dot_h16_scalar(row, x + b * ldx, cols, bf16);
			float *out = y + b * ldy + (size_t)r;
			*out = accumulate ? *out + s : s;
		}
	}
}

/* The SIMD families: a tile of R rows times V activation vectors at a time
 * (R and V constants at each call, so the accumulators live in registers).
 * Decode (V = 1) reads R rows side by side, so R cache lines are in
 * flight, and prefetches the weight stream into L1 H16_PREFETCH bytes
 * ahead (a non-temporal hint starves the stream).  Prefill (V > 1)
 * widens each weight once for V vectors, which makes it compute-bound. */
#define H16_PREFETCH 8192
#define AVX2_ROWS 4     /* 4 rows x 2 halves of the lanes: 8 of the 16 ymm registers */
#define AVX2_VECS 2     /* prefill: 3 rows x 2 vectors x 2 halves = 12 accumulators */
#define AVX2_VEC_ROWS 3
#define AVX512_ROWS 8
#define AVX512_VECS 4   /* 8 rows x 4 vectors: the 32 zmm registers and a few spills, */
			/* still ahead of 3 vectors (docs/quantization.md) */

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c")))
#define INLINE __attribute__((always_inline)) static inline

/* Where row i (of a tile of `rows` rows of `cols` halves, at element c)
 * prefetches: its share of H16_PREFETCH further along the row, or, past
 * the row's end, the same place in row i of the next tile. */
static inline const char *prefetch_at(const uint16_t *wi, size_t c, size_t cols, int rows)
{
	size_t at = c + H16_PREFETCH / sizeof(uint16_t) / (size_t)rows;
	if (at >= cols)
		at += (size_t)(rows - 1) * cols;
	return (const char *)(wi + at);
}

static inline void store_tile(float *y, size_t ldy, const float *sums, int rows, int vecs,
			      int accumulate)
{
	for (int v = 0; v < vecs; v++)
		for (int i = 0; i < rows; i++) {
			float *out = y + (size_t)v * ldy + (size_t)i;
			*out = accumulate ? *out + sums[v * rows + i] : sums[v * rows + i];
		}
}

/* --- AVX2 + FMA + F16C: lanes 0-7 in lo, 8-15 in hi --- */

AVX2 INLINE __m256 widen8_avx2(const uint16_t *p, int bf16)
{
	__m128i h = _mm_loadu_si128((const __m128i *)p);
	if (bf16)
		return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
	return _mm256_cvtph_ps(h);
}

/* The rest of the lane tree from f[0..4) and f[4..8) (lanes j + (j+8)). */
AVX2 INLINE float sum_halves_avx2(__m128 f03, __m128 f47)
{
	__m128 s = _mm_add_ps(f03, f47);
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* lane j + lane j+8, then the tree of the header comment. */
AVX2 INLINE float sum_lanes_avx2(__m256 lo, __m256 hi)
{
	__m256 v = _mm256_add_ps(lo, hi);
	return sum_halves_avx2(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
}

/* Columns [c, c + 16) of the tile: lanes' next fma. */
AVX2 INLINE void step16_avx2(__m256 lo[][AVX2_ROWS], __m256 hi[][AVX2_ROWS], const uint16_t *w,
			     size_t cols, const float *x, size_t ldx, size_t c, int rows, int vecs,
			     int bf16)
{
#pragma GCC unroll 8
	for (int i = 0; i < rows; i++) {
		const uint16_t *wi = w + (size_t)i * cols + c;
		__m256 w0 = widen8_avx2(wi, bf16), w1 = widen8_avx2(wi + 8, bf16);
#pragma GCC unroll 8
		for (int v = 0; v < vecs; v++) {
			const float *xv = x + (size_t)v * ldx + c;
			lo[v][i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xv), lo[v][i]);
			hi[v][i] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xv + 8), hi[v][i]);
		}
	}
}

/* The last cols - c (< 16) columns, through zero-padded copies; lanes
 * past the end keep their sums (blend), as the scalar kernel's do. */
AVX2 INLINE void tail_avx2(__m256 lo[][AVX2_ROWS], __m256 hi[][AVX2_ROWS], const uint16_t *w,
			   size_t cols, const float *x, size_t ldx, size_t c, int rows, int vecs,
			   int bf16)
{
	size_t left = cols - c;
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	__m256 m0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)left), lane));
	__m256 m1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)left - 8), lane));
	for (int i = 0; i < rows; i++) {
		uint16_t wt[16] = {0};
		for (size_t k = 0; k < left; k++)
			wt[k] = w[(size_t)i * cols + c + k];
		__m256 w0 = widen8_avx2(wt, bf16), w1 = widen8_avx2(wt + 8, bf16);
		for (int v = 0; v < vecs; v++) {
			float xt[16] = {0};
			for (size_t k = 0; k < left; k++)
				xt[k] = x[(size_t)v * ldx + c + k];
			lo[v][i] = _mm256_blendv_ps(
				lo[v][i], _mm256_fmadd_ps(w0, _mm256_loadu_ps(xt), lo[v][i]), m0);
			hi[v][i] = _mm256_blendv_ps(
				hi[v][i], _mm256_fmadd_ps(w1, _mm256_loadu_ps(xt + 8), hi[v][i]), m1);
		}
	}
}

/* sums[v * rows + i] = row i of w . vector v of x, for the tile. */
AVX2 INLINE void tile_avx2(float *sums, const uint16_t *w, size_t cols, const float *x, size_t ldx,
			   int rows, int vecs, int bf16, int prefetch)
{
	__m256 lo[AVX2_VECS][AVX2_ROWS], hi[AVX2_VECS][AVX2_ROWS];
#pragma GCC unroll 8
	for (int v = 0; v < vecs; v++)
#pragma GCC unroll 8
		for (int i = 0; i < rows; i++)
			lo[v][i] = hi[v][i] = _mm256_setzero_ps();
	size_t c = 0;
	for (; c + 32 <= cols; c += 32) { /* one 64-byte line of each row */
		if (prefetch)
#pragma GCC unroll 8
			for (int i = 0; i < rows; i++)
				_mm_prefetch(prefetch_at(w + (size_t)i * cols, c, cols, rows),
					     _MM_HINT_T0);
		step16_avx2(lo, hi, w, cols, x, ldx, c, rows, vecs, bf16);
		step16_avx2(lo, hi, w, cols, x, ldx, c + 16, rows, vecs, bf16);
	}
	if (c + 16 <= cols) {
		step16_avx2(lo, hi, w, cols, x, ldx, c, rows, vecs, bf16);
		c += 16;
	}
	if (c < cols)
		tail_avx2(lo, hi, w, cols, x, ldx, c, rows, vecs, bf16);
#pragma GCC unroll 8
	for (int v = 0; v < vecs; v++)
#pragma GCC unroll 8
		for (int i = 0; i < rows; i++)
			sums[v * rows + i] = sum_lanes_avx2(lo[v][i], hi[v][i]);
}

/* Decode of an AVX2_ROWS-row bf16 tile, cols a multiple of 16: a bf16 is
 * the top half of its float, so one 32-byte load and an unpack with zero
 * of each 128-bit lane (the shuffle port) widen 16 weights, against the
 * zero-extension and shift (a uop on the FMAs' ports) of tile_avx2.  The
 * unpacks leave columns 0-3 and 8-11 of each 16 in one register and 4-7,
 * 12-15 in the other, so the activations are read in that order and the
 * accumulators hold the same lanes in another place: each lane's sum and
 * the tree are those of the header comment, the bits the same. */
AVX2 INLINE void tile_bf16_decode_avx2(float *sums, const uint16_t *w, size_t cols, const float *x)
{
	const __m256i zero = _mm256_setzero_si256();
	__m256 lo[AVX2_ROWS], hi[AVX2_ROWS]; /* lanes 0-3, 8-11; 4-7, 12-15 */
#pragma GCC unroll 8
	for (int i = 0; i < AVX2_ROWS; i++)
		lo[i] = hi[i] = _mm256_setzero_ps();
	for (size_t c = 0; c < cols; c += 16) {
		if (c % 32 == 0)
#pragma GCC unroll 8
			for (int i = 0; i < AVX2_ROWS; i++)
				_mm_prefetch(prefetch_at(w + (size_t)i * cols, c, cols, AVX2_ROWS),
					     _MM_HINT_T0);
		__m256 x0 = _mm256_loadu2_m128(x + c + 8, x + c);
		__m256 x1 = _mm256_loadu2_m128(x + c + 12, x + c + 4);
#pragma GCC unroll 8
		for (int i = 0; i < AVX2_ROWS; i++) {
			__m256i h = _mm256_loadu_si256((const __m256i *)(w + (size_t)i * cols + c));
			lo[i] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, h)), x0, lo[i]);
			hi[i] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, h)), x1, hi[i]);
		}
	}
#pragma GCC unroll 8
	for (int i = 0; i < AVX2_ROWS; i++)
		sums[i] = sum_halves_avx2(
			_mm_add_ps(_mm256_castps256_ps128(lo[i]), _mm256_extractf128_ps(lo[i], 1)),
			_mm_add_ps(_mm256_castps256_ps128(hi[i]), _mm256_extractf128_ps(hi[i], 1)));
}

/* Output rows [r, r + rows) for every vector, AVX2_VECS at a time: the
 * prefill tiles, and the rows a decode's tiles leave over. */
AVX2 INLINE void rows_avx2(float *y, size_t ldy, const uint16_t *w, size_t cols, const float *x,
			   size_t ldx, size_t n, int rows, int accumulate, int bf16, int prefetch)
{
	float sums[AVX2_VECS * AVX2_ROWS];
	size_t b = 0;
	for (; b + AVX2_VECS <= n; b += AVX2_VECS) {
		tile_avx2(sums, w, cols, x + b * ldx, ldx, rows, AVX2_VECS, bf16, prefetch && b == 0);
		store_tile(y + b * ldy, ldy, sums, rows, AVX2_VECS, accumulate);
	}
	for (; b < n; b++) {
		tile_avx2(sums, w, cols, x + b * ldx, ldx, rows, 1, bf16, prefetch && b == 0);
		store_tile(y + b * ldy, ldy, sums, rows, 1, accumulate);
	}
}

AVX2 INLINE void gemm_h16_avx2(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
			       size_t ldx, size_t n, int r0, int r1, int accumulate, int bf16)
{
	_Static_assert(AVX2_VEC_ROWS <= AVX2_ROWS, "tile arrays hold AVX2_ROWS rows");
	size_t cols = (size_t)w->cols;
	int r = r0;
	if (n == 1) /* decode: wide tiles, the weights streamed with prefetch */
		for (; r + AVX2_ROWS <= r1; r += AVX2_ROWS) {
			float sums[AVX2_ROWS];
			if (bf16 && cols % 16 == 0)
				tile_bf16_decode_avx2(sums, w->h16 + (size_t)r * cols, cols, x);
			else
				tile_avx2(sums, w->h16 + (size_t)r * cols, cols, x, ldx, AVX2_ROWS, 1,
					  bf16, 1);
			store_tile(y + r, ldy, sums, AVX2_ROWS, 1, accumulate);
		}
	for (; r + AVX2_VEC_ROWS <= r1; r += AVX2_VEC_ROWS)
		rows_avx2(y + r, ldy, w->h16 + (size_t)r * cols, cols, x, ldx, n, AVX2_VEC_ROWS,
			  accumulate, bf16, 1);
	for (; r < r1; r++)
		rows_avx2(y + r, ldy, w->h16 + (size_t)r * cols, cols, x, ldx, n, 1, accumulate,
			  bf16, 0);
}

AVX2 void nf_cpu_gemm_h16_avx2(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
			       size_t ldx, size_t n, int r0, int r1, int accumulate)
{
	if (w->kind == NF_QUANT_BF16)
		gemm_h16_avx2(y, ldy, w, x, ldx, n, r0, r1, accumulate, 1);
	else
		gemm_h16_avx2(y, ldy, w, x, ldx, n, r0, r1, accumulate, 0);
}

/* --- AVX-512F/BW/VL: the 16 lanes in one register --- */

/* Where a tile's weights come from: halves widened on the way (the kind),
 * or floats widened before (prefill of many vectors: rows_avx512). */
enum { SRC_F16, SRC_BF16, SRC_WIDE };

/* Prefill of at least AVX512_WIDE_MIN_N vectors widens each 8-row tile once
 * into AVX512_ROWS x cols floats on the stack (up to 64 KiB), so that its
 * vector groups run at float32's pace (docs/quantization.md). */
#define AVX512_WIDE_MIN_N (2 * AVX512_VECS)
#define AVX512_WIDE_MAX_COLS 2048

AVX512 INLINE __m512 widen16_avx512(__m256i h, int bf16)
{
	if (bf16)
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
	return _mm512_cvtph_ps(h);
}

/* lane j + lane j+8, then the tree of the header comment. */
AVX512 INLINE float sum_lanes_avx512(__m512 a)
{
	__m256 v = _mm256_add_ps(_mm512_castps512_ps256(a),
				 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* Lanes m of row i's weights at column c, as floats. */
AVX512 INLINE __m512 weights16_avx512(const void *w, size_t cols, int i, size_t c, __mmask16 m,
				      int src)
{
	size_t at = (size_t)i * cols + c;
	if (src == SRC_WIDE)
		return _mm512_maskz_loadu_ps(m, (const float *)w + at);
	return widen16_avx512(_mm256_maskz_loadu_epi16(m, (const uint16_t *)w + at), src == SRC_BF16);
}

/* Columns [c, c + 16) of the tile, the lanes past `m` left as they are
 * (mask3: the addend is kept where the mask is 0). */
AVX512 INLINE void step16_avx512(__m512 acc[][AVX512_ROWS], const void *w, size_t cols,
				 const float *x, size_t ldx, size_t c, __mmask16 m, int rows,
				 int vecs, int src)
{
	__m512 xv[AVX512_VECS];
#pragma GCC unroll 8
	for (int v = 0; v < vecs; v++)
		xv[v] = _mm512_maskz_loadu_ps(m, x + (size_t)v * ldx + c);
#pragma GCC unroll 8
	for (int i = 0; i < rows; i++) {
		__m512 wv = weights16_avx512(w, cols, i, c, m, src);
#pragma GCC unroll 8
		for (int v = 0; v < vecs; v++)
			acc[v][i] = _mm512_mask3_fmadd_ps(wv, xv[v], acc[v][i], m);
	}
}

AVX512 INLINE void tile_avx512(float *sums, const void *w, size_t cols, const float *x,
			       size_t ldx, int rows, int vecs, int src, int prefetch)
{
	__m512 acc[AVX512_VECS][AVX512_ROWS];
#pragma GCC unroll 8
	for (int v = 0; v < vecs; v++)
#pragma GCC unroll 8
		for (int i = 0; i < rows; i++)
			acc[v][i] = _mm512_setzero_ps();
	const __mmask16 all = 0xffff;
	size_t c = 0;
	for (; c + 32 <= cols; c += 32) { /* one 64-byte line of each row */
		if (prefetch)
#pragma GCC unroll 8
			for (int i = 0; i < rows; i++)
				_mm_prefetch(prefetch_at((const uint16_t *)w + (size_t)i * cols, c,
							 cols, rows),
					     _MM_HINT_T0);
		step16_avx512(acc, w, cols, x, ldx, c, all, rows, vecs, src);
		step16_avx512(acc, w, cols, x, ldx, c + 16, all, rows, vecs, src);
	}
	for (; c < cols; c += 16) {
		size_t left = cols - c;
		__mmask16 m = left >= 16 ? all : (__mmask16)((1u << left) - 1);
		step16_avx512(acc, w, cols, x, ldx, c, m, rows, vecs, src);
	}
#pragma GCC unroll 8
	for (int v = 0; v < vecs; v++)
#pragma GCC unroll 8
		for (int i = 0; i < rows; i++)
			sums[v * rows + i] = sum_lanes_avx512(acc[v][i]);
}

/* tile_avx512 of vectors [b, b + vecs), stored. */
AVX512 INLINE void vecs_avx512(float *y, size_t ldy, const void *w, size_t cols, const float *x,
			       size_t ldx, size_t b, int rows, int vecs, int accumulate, int src,
			       int prefetch)
{
	float sums[AVX512_VECS * AVX512_ROWS];
	tile_avx512(sums, w, cols, x + b * ldx, ldx, rows, vecs, src, prefetch && b == 0);
	store_tile(y + b * ldy, ldy, sums, rows, vecs, accumulate);
}

/* Output rows [r, r + rows) for every vector, AVX512_VECS at a time. */
AVX512 INLINE void groups_avx512(float *y, size_t ldy, const void *w, size_t cols,
				 const float *x, size_t ldx, size_t n, int rows, int accumulate,
				 int src, int prefetch)
{
	size_t b = 0;
	for (; b + AVX512_VECS <= n; b += AVX512_VECS)
		vecs_avx512(y, ldy, w, cols, x, ldx, b, rows, AVX512_VECS, accumulate, src,
			    prefetch);
	_Static_assert(AVX512_VECS <= 4, "the vectors left over are 1 to 3");
	switch (n - b) {
	case 3:
		vecs_avx512(y, ldy, w, cols, x, ldx, b, rows, 3, accumulate, src, prefetch);
		break;
	case 2:
		vecs_avx512(y, ldy, w, cols, x, ldx, b, rows, 2, accumulate, src, prefetch);
		break;
	case 1:
		vecs_avx512(y, ldy, w, cols, x, ldx, b, rows, 1, accumulate, src, prefetch);
		break;
	}
}

/* wide = the AVX512_ROWS rows at w as floats (exact). */
AVX512 INLINE void widen_tile_avx512(float *wide, const uint16_t *w, size_t cols, int src)
{
	size_t all = (size_t)AVX512_ROWS * cols, c = 0; /* the rows are contiguous */
	for (; c + 16 <= all; c += 16)
		_mm512_storeu_ps(wide + c, weights16_avx512(w, all, 0, c, 0xffff, src));
	if (c < all) {
		__mmask16 m = (__mmask16)((1u << (all - c)) - 1);
		_mm512_mask_storeu_ps(wide + c, m, weights16_avx512(w, all, 0, c, m, src));
	}
}

/* Output rows [r, r + rows), widening a full tile first for many vectors. */
AVX512 INLINE void rows_avx512(float *y, size_t ldy, const uint16_t *w, size_t cols,
			       const float *x, size_t ldx, size_t n, int rows, int accumulate,
			       int src, int prefetch)
{
	if (rows == AVX512_ROWS && n >= AVX512_WIDE_MIN_N && cols <= AVX512_WIDE_MAX_COLS) {
		float wide[AVX512_ROWS * AVX512_WIDE_MAX_COLS];
		widen_tile_avx512(wide, w, cols, src);
		groups_avx512(y, ldy, wide, cols, x, ldx, n, rows, accumulate, SRC_WIDE, 0);
		return;
	}
	groups_avx512(y, ldy, w, cols, x, ldx, n, rows, accumulate, src, prefetch);
}

AVX512 INLINE void gemm_h16_avx512(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
				   size_t ldx, size_t n, int r0, int r1, int accumulate, int src)
{
	size_t cols = (size_t)w->cols;
	int r = r0;
	for (; r + AVX512_ROWS <= r1; r += AVX512_ROWS)
		rows_avx512(y + r, ldy, w->h16 + (size_t)r * cols, cols, x, ldx, n, AVX512_ROWS,
			    accumulate, src, 1);
	for (; r < r1; r++)
		rows_avx512(y + r, ldy, w->h16 + (size_t)r * cols, cols, x, ldx, n, 1, accumulate,
			    src, 0);
}

AVX512 void nf_cpu_gemm_h16_avx512(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
				   size_t ldx, size_t n, int r0, int r1, int accumulate)
{
	if (w->kind == NF_QUANT_BF16)
		gemm_h16_avx512(y, ldy, w, x, ldx, n, r0, r1, accumulate, SRC_BF16);
	else
		gemm_h16_avx512(y, ldy, w, x, ldx, n, r0, r1, accumulate, SRC_F16);
}
