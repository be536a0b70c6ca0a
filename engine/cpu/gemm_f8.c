/*
 * gemm_f8.c - the fp8 e4m3 kernels of every family (backend.h gemm_f8,
 * round_f8): weights stored as e4m3 codes with a scale per output row,
 * activations rounded to the e4m3 grid by a static per-tensor scale, the
 * products summed in float32, as a GPU's fp8 GEMM does.
 *
 * The contract is an error bound, not one set of bits.  A product of an
 * e4m3 weight (4 significant bits) and an activation on the e4m3 grid (4
 * more) is exact in float32, so a fused multiply-add rounds exactly as a
 * multiply and an add, and a row's sum of its n products in any order is
 * within gamma_n * sum |w * x| of the exact sum, gamma_n = n u / (1 - n u),
 * u = 2^-24 (tests/unit/engine/test_quant_fp8.c asserts it, and that it is
 * tight enough to catch a dropped column or a wrong sign).  Each path takes
 * the order that is fastest for it:
 *
 * - scalar prefill, and AVX2 and AVX-512 prefill of the matrices the next
 *   item leaves: 16 lanes, lane j summing the columns c = j mod 16 in
 *   increasing c; then f[i] = lane[i] + lane[i + 8] and the row's sum is
 *   ((f0 + f1) + (f2 + f3)) + ((f4 + f5) + (f6 + f7)).  These give the
 *   scalar kernel's bits, and the tests keep asserting it.
 * - AVX2 and AVX-512 decode of a matrix without subnormal codes (all the
 *   quantizer writes) and whole blocks of 32 (AVX2) or 64 (AVX-512)
 *   columns, and their prefill of such a matrix of at most 2048 columns:
 *   the direct widening (gemv_direct_avx2, dot8_direct_avx512,
 *   prefill_direct), columns c + 4j + k of
 *   each block in lane j of class k, two accumulators a row (and vector).
 * - the avx512-bf16 family's decode of such a matrix, whole lines of 64
 *   columns: vdpbf16ps (dot8_bf16_avx512), the products added in pairs,
 *   in the hardware's order, into 16 lanes; two accumulators a row.
 * - other AVX-512 decode: per 64 columns, the even columns and the odd ones
 *   in separate lanes (vpmaddubsw picks a word's byte, so no byte shuffle),
 *   into two accumulators a row (dot8_split_avx512); other AVX2 decode: the
 *   scalar order.
 *
 * y = sum * (scale[r] * act_scale) in every path.
 *
 * Apart from the direct decode, the SIMD families widen a code to float
 * through IEEE half: moving the
 * code's 7 magnitude bits up by 7 and its sign to bit 15 gives the half of
 * value e4m3 * 2^-8, normals and subnormals alike (half has 5 exponent bits
 * to e4m3's 4, the same place for the mantissa's top), which the F16C
 * conversion widens exactly; the 2^8 is folded into the row scale.  Scaling
 * by a power of two is exact here, so the sums are the same bits.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "engine/cpu/cpu.h"
#include "engine/quant.h"
#include "util/banned.h"

#define F8_LANES 16

/* The value of a weight code as every family widens it.  The NaN codes
 * never occur in weights (the quantizer refuses NaN) and widen to 480, as
 * the IEEE-half path of the SIMD families widens them. */
static inline float widen_e4m3(uint8_t b)
{
	uint32_t sign = (uint32_t)(b & 0x80) << 24, e = (uint32_t)b >> 3 & 0xf, m = b & 7;
	uint32_t u;
	if (e == 0) {
		float v = (float)m * 0.001953125f; /* m * 2^-9 */
		memcpy(&u, &v, sizeof u);
	} else {
		u = (e + 120) << 23 | m << 20;
	}
	u |= sign;
	float v;
	memcpy(&v, &u, sizeof v);
	return v;
}

/* The row sum of 16 lanes in the order of the file comment. */
static float reduce_lanes(const float lane[F8_LANES])
{
	float f[8];
	for (int i = 0; i < 8; i++)
		f[i] = lane[i] + lane[i + 8];
	return ((f[0] + f[1]) + (f[2] + f[3])) + ((f[4] + f[5]) + (f[6] + f[7]));
}

static float dot_f8(const uint8_t *w, const float *x, size_t cols)
{
	float lane[F8_LANES] = {0};
	for (size_t c = 0; c < cols; c++)
		lane[c % F8_LANES] += widen_e4m3(w[c]) * x[c];
	return reduce_lanes(lane);
}

void nf_cpu_gemm_f8_scalar(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
			   size_t ldx, size_t n, int r0, int r1, int accumulate)
{
	size_t cols = (size_t)w->cols;
	for (int r = r0; r < r1; r++) {
		const uint8_t *row = w->f8 + (size_t)r * cols;
		float k = w->scale[r] * w->act_scale;
		for (size_t b = 0; b < n; b++) {
			float s = dot_f8(row, x + b * ldx, cols) * k;
			float *out = y + b * ldy + (size_t)r;
			*out = accumulate ? *out + s : s;
		}
	}
}

void nf_cpu_round_f8_scalar(float *out, const float *x, float inv_scale, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = nf_fp8_e4m3_round(x[i] * inv_scale);
}

/* ---- the SIMD families ------------------------------------------------ */

#define AVX2_F8 __attribute__((target("avx2,fma,f16c")))
#define AVX512_F8 __attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma")))

/* How far ahead (bytes) the GEMV prefetches each row into L1: decode reads
 * the matrix once, from memory, and the hardware prefetchers lose short
 * rows read side by side (as the int8 kernels of avx2.c and avx512.c). */
#define F8_PREFETCH 8192

/* AVX2 reads 16 codes (8 words) per load and widens the even and the odd
 * columns apart, with shifts and a mask and no byte shuffle (the shuffle
 * port is what the IEEE-half conversion also needs): the accumulator of
 * the even columns holds lanes 0, 2, .., 14 of the 16 of the file
 * comment, that of the odd ones 1, 3, .., 15, each lane in column order,
 * so the sums are those of the other families.  The activations are
 * split the same way once per block of rows. */
#define AVX2_F8_ROWS 4 /* decode: 4 rows of 2 accumulators */
#define AVX2_F8_NV 2   /* prefill: 2 rows for 2 vectors (8 accumulators) */

/* The halves (e4m3 * 2^-8) of one byte of each word of w: vpmaddubsw of
 * the codes (signed) with 128 in the byte's place and 0 in the other's
 * gives the code sign-extended and moved up by 7, its magnitude in the
 * half's exponent and mantissa and its sign in bits 15 and 14; bit 14 is
 * masked off.  A multiply-add rather than shifts: it is one instruction for
 * either byte, where the low byte needed two shifts. */
#define F8_PICK_ODD 0x8000  /* per word: 128 in the high byte (u8), 0 in the low */
#define F8_PICK_EVEN 0x0080 /* 128 in the low byte */
AVX2_F8 static inline __m128i halves_of_bytes(__m128i w, int pick)
{
	return _mm_and_si128(_mm_maddubs_epi16(_mm_set1_epi16((short)pick), w),
			     _mm_set1_epi16((short)0xbf80));
}

/* The codes of columns [c, c + 16) of a row: even columns to *even, odd
 * columns to *odd, each as 8 floats e4m3 * 2^-8. */
AVX2_F8 static inline void widen16_avx2(__m256 *even, __m256 *odd, const uint8_t *p)
{
	__m128i w = _mm_loadu_si128((const __m128i *)p);
	*odd = _mm256_cvtph_ps(halves_of_bytes(w, F8_PICK_ODD));
	*even = _mm256_cvtph_ps(halves_of_bytes(w, F8_PICK_EVEN));
}

/* x[c, c + 16) split as widen16_avx2 splits the codes. */
AVX2_F8 static inline void split16_avx2(__m256 *even, __m256 *odd, const float *x)
{
	__m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
	/* shuffle_ps works within 128-bit halves: 0 2 8 10 | 4 6 12 14 */
	__m256d e = _mm256_castps_pd(_mm256_shuffle_ps(x0, x1, 0x88));
	__m256d o = _mm256_castps_pd(_mm256_shuffle_ps(x0, x1, 0xdd));
	*even = _mm256_castpd_ps(_mm256_permute4x64_pd(e, 0xd8));
	*odd = _mm256_castpd_ps(_mm256_permute4x64_pd(o, 0xd8));
}

/* One row's sum of the even-lane and odd-lane accumulators, in the order
 * of the file comment: f = lanes [0, 8) + lanes [8, 16), taken as
 * fe = (f0 f2 f4 f6) and fo = (f1 f3 f5 f7); then p = fe + fo =
 * (f0+f1, f2+f3, f4+f5, f6+f7) and (p0 + p1) + (p2 + p3). */
AVX2_F8 static inline float reduce16_avx2(__m256 even, __m256 odd)
{
	__m128 fe = _mm_add_ps(_mm256_castps256_ps128(even), _mm256_extractf128_ps(even, 1));
	__m128 fo = _mm_add_ps(_mm256_castps256_ps128(odd), _mm256_extractf128_ps(odd, 1));
	__m128 p = _mm_add_ps(fe, fo);
	__m128 q = _mm_hadd_ps(p, p); /* p0 + p1, p2 + p3 */
	return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}

/* Columns [c, c + 16) of `nr` rows with `nv` vectors into the even (a) and
 * odd (b) accumulators; nr, nv constants at each call. */
AVX2_F8 __attribute__((always_inline)) static inline void
step16_avx2(__m256 a[AVX2_F8_NV][AVX2_F8_ROWS], __m256 b[AVX2_F8_NV][AVX2_F8_ROWS],
	    const uint8_t *const row[AVX2_F8_ROWS], size_t c, const float *x, size_t ldx, int nr,
	    int nv)
{
	__m256 we[AVX2_F8_ROWS], wo[AVX2_F8_ROWS];
#pragma GCC unroll 4
	for (int i = 0; i < nr; i++)
		widen16_avx2(&we[i], &wo[i], row[i] + c);
#pragma GCC unroll 2
	for (int v = 0; v < nv; v++) {
		__m256 xe, xo;
		split16_avx2(&xe, &xo, x + (size_t)v * ldx + c);
#pragma GCC unroll 4
		for (int i = 0; i < nr; i++) {
			a[v][i] = _mm256_fmadd_ps(we[i], xe, a[v][i]);
			b[v][i] = _mm256_fmadd_ps(wo[i], xo, b[v][i]);
		}
	}
}

/* vcvtph2ps from memory: the register form spends a shuffle-port uop
 * widening the lanes, the memory form lets the load unit do it, and the
 * shuffle port is what bounds this kernel.  Written as asm because the
 * compiler would forward a store it sees into the register form.  The
 * halves go through a small stack buffer (a store, then loads that the
 * store forwards). */
AVX2_F8 static inline __m256 cvtph_mem_avx2(const void *p)
{
	__m256 r;
	__asm__("vcvtph2ps %1, %0" : "=x"(r) : "m"(*(const __m128i *)p));
	return r;
}

/* Columns [c, c + 32) of `nr` rows with one vector: widen16_avx2 on 32
 * codes at once (the multiply-adds and masks on 16 words; each 128-bit
 * half then widened from memory, cvtph_mem_avx2), the sums added group
 * after group as step16_avx2 adds them.  xsplit: the vector already split (split_vector_avx2), or NULL. */
AVX2_F8 __attribute__((always_inline)) static inline void
step32_avx2(__m256 a[AVX2_F8_NV][AVX2_F8_ROWS], __m256 b[AVX2_F8_NV][AVX2_F8_ROWS],
	    const uint8_t *const row[AVX2_F8_ROWS], size_t c, const float *x, const float *xsplit,
	    int nr)
{
	const __m256i mask = _mm256_set1_epi16((short)0xbf80);
	const __m256i to_odd = _mm256_set1_epi16((short)F8_PICK_ODD), to_even = _mm256_set1_epi16(F8_PICK_EVEN);
	__m256 xe0, xo0, xe1, xo1;
	if (xsplit) { /* plain loads, off the shuffle port the widening needs */
		xe0 = _mm256_load_ps(xsplit + c), xo0 = _mm256_load_ps(xsplit + c + 8);
		xe1 = _mm256_load_ps(xsplit + c + 16), xo1 = _mm256_load_ps(xsplit + c + 24);
	} else {
		split16_avx2(&xe0, &xo0, x + c);
		split16_avx2(&xe1, &xo1, x + c + 16);
	}
#pragma GCC unroll 4
	for (int i = 0; i < nr; i++) { /* halves_of_bytes on 16 words */
		__m256i w = _mm256_loadu_si256((const __m256i *)(row[i] + c));
		_Alignas(32) uint16_t h[2][16];
		_mm256_store_si256((__m256i *)h[0], _mm256_and_si256(_mm256_maddubs_epi16(to_even, w), mask));
		_mm256_store_si256((__m256i *)h[1], _mm256_and_si256(_mm256_maddubs_epi16(to_odd, w), mask));
		a[0][i] = _mm256_fmadd_ps(cvtph_mem_avx2(h[0]), xe0, a[0][i]);
		b[0][i] = _mm256_fmadd_ps(cvtph_mem_avx2(h[1]), xo0, b[0][i]);
		a[0][i] = _mm256_fmadd_ps(cvtph_mem_avx2(h[0] + 8), xe1, a[0][i]);
		b[0][i] = _mm256_fmadd_ps(cvtph_mem_avx2(h[1] + 8), xo1, b[0][i]);
	}
}

/* out[v * AVX2_F8_ROWS + i] = the row sum (times 2^-8) of row i with
 * vector v, for nr rows and nv vectors (constants at each call).  The last
 * columns short of 16 go through zero-padded copies, which add only zero
 * products. */
AVX2_F8 __attribute__((always_inline)) static inline void
dot_rows_avx2(float *out, const uint8_t *const row[AVX2_F8_ROWS], size_t cols, const float *x,
	      const float *xsplit, size_t ldx, int nr, int nv)
{
	__m256 a[AVX2_F8_NV][AVX2_F8_ROWS], b[AVX2_F8_NV][AVX2_F8_ROWS];
#pragma GCC unroll 2
	for (int v = 0; v < nv; v++)
#pragma GCC unroll 4
		for (int i = 0; i < nr; i++)
			a[v][i] = b[v][i] = _mm256_setzero_ps();
	size_t c = 0;
	for (; c + 64 <= cols; c += 64) {
#pragma GCC unroll 4
		for (int i = 0; i < nr; i++)
			_mm_prefetch((const char *)row[i] + c + F8_PREFETCH, _MM_HINT_T0);
		if (nv == 1) {
			step32_avx2(a, b, row, c, x, xsplit, nr);
			step32_avx2(a, b, row, c + 32, x, xsplit, nr);
			continue;
		}
#pragma GCC unroll 4
		for (int g = 0; g < 64; g += 16)
			step16_avx2(a, b, row, c + (size_t)g, x, ldx, nr, nv);
	}
	for (; c + 16 <= cols; c += 16)
		step16_avx2(a, b, row, c, x, ldx, nr, nv);
	if (c < cols) {
		uint8_t wt[AVX2_F8_ROWS][16] = {{0}};
		float xt[AVX2_F8_NV][16] = {{0}};
		const uint8_t *tail[AVX2_F8_ROWS];
		for (int i = 0; i < nr; i++) {
			memcpy(wt[i], row[i] + c, cols - c);
			tail[i] = wt[i];
		}
		for (int v = 0; v < nv; v++)
			memcpy(xt[v], x + (size_t)v * ldx + c, (cols - c) * sizeof(float));
		step16_avx2(a, b, tail, 0, &xt[0][0], 16, nr, nv);
	}
#pragma GCC unroll 2
	for (int v = 0; v < nv; v++)
#pragma GCC unroll 4
		for (int i = 0; i < nr; i++)
			out[v * AVX2_F8_ROWS + i] = reduce16_avx2(a[v][i], b[v][i]);
}

/* The power of two the half-based widenings' sums lack (e4m3 * 2^-8). */
#define F8_HALF_UNIT 256.0f

/* Rows [r, r + valid) of y for vectors [b, b + nv): the sums times unit
 * (a power of two: exact) times scale[r] * act_scale. */
static inline void store_rows(float *y, size_t ldy, const nf_bk_matrix *w, const float *sums,
			      size_t stride, int r, int valid, size_t b, int nv, int accumulate,
			      float unit)
{
	for (int v = 0; v < nv; v++)
		for (int i = 0; i < valid; i++) {
			float s = sums[(size_t)v * stride + (size_t)i] * unit *
				  (w->scale[r + i] * w->act_scale);
			float *o = y + (b + (size_t)v) * ldy + (size_t)(r + i);
			*o = accumulate ? *o + s : s;
		}
}

/* Row pointers of rows [r, r + nr) capped at r1 - 1: a block past the last
 * row recomputes the last row rather than read past the matrix. */
static inline int block_rows(const uint8_t **row, const nf_bk_matrix *w, int r, int r1, int nr)
{
	int valid = r1 - r < nr ? r1 - r : nr;
	for (int i = 0; i < nr; i++)
		row[i] = w->f8 + (size_t)(r + (i < valid ? i : valid - 1)) * (size_t)w->cols;
	return valid;
}

/* One block of nr rows times all n vectors: decode (n = 1) 4 rows for 1
 * vector, prefill 2 rows for AVX2_F8_NV vectors at a time. */
AVX2_F8 __attribute__((always_inline)) static inline void
gemm_block_avx2(float *y, size_t ldy, const nf_bk_matrix *w, const float *x, const float *xsplit,
		size_t ldx, size_t n, int r, int r1, int nr, int accumulate)
{
	const uint8_t *row[AVX2_F8_ROWS];
	int valid = block_rows(row, w, r, r1, nr);
	size_t cols = (size_t)w->cols, b = 0;
	float sums[AVX2_F8_NV * AVX2_F8_ROWS];
	if (nr == AVX2_F8_ROWS) {
		for (; b < n; b++) {
			dot_rows_avx2(sums, row, cols, x + b * ldx, xsplit, ldx, AVX2_F8_ROWS, 1);
			store_rows(y, ldy, w, sums, AVX2_F8_ROWS, r, valid, b, 1, accumulate, F8_HALF_UNIT);
		}
		return;
	}
	for (; b + AVX2_F8_NV <= n; b += AVX2_F8_NV) {
		dot_rows_avx2(sums, row, cols, x + b * ldx, NULL, ldx, 2, AVX2_F8_NV);
		store_rows(y, ldy, w, sums, AVX2_F8_ROWS, r, valid, b, AVX2_F8_NV, accumulate, F8_HALF_UNIT);
	}
	for (; b < n; b++) {
		dot_rows_avx2(sums, row, cols, x + b * ldx, NULL, ldx, 2, 1);
		store_rows(y, ldy, w, sums, AVX2_F8_ROWS, r, valid, b, 1, accumulate, F8_HALF_UNIT);
	}
}

/* Decode's vector split once per call as split16_avx2 splits each 16
 * columns (the even ones, then the odd ones), for the 4-row blocks that
 * would split it again each; up to this many columns (a stack table). */
#define F8_XSPLIT_MAX 8192

AVX2_F8 static void split_vector_avx2(float *xsplit, const float *x, size_t cols)
{
	for (size_t c = 0; c + 16 <= cols; c += 16) {
		__m256 e, o;
		split16_avx2(&e, &o, x + c);
		_mm256_store_ps(xsplit + c, e);
		_mm256_store_ps(xsplit + c + 8, o);
	}
}

/*
 * AVX2 decode straight to float32, without the half conversion (which
 * shares the two 256-bit multiply ports with the FMAs).  vpmaddubsw of 32
 * codes (signed) with 16 in one byte of each word and 0 in the other gives
 * a code times 16: its magnitude's 7 bits at bits 4..10 of the word, its
 * sign above.  Such a word as the high half of a dword, masked to the sign
 * and those 7 bits, is the float32 of the code times 2^-120: the code's 4
 * exponent bits land in the float's exponent and its 3 mantissa bits on top
 * of the float's mantissa.  Codes of exponent 0 other than zero would
 * become float denormals (exact, but many times slower on Intel cores):
 * the quantizer never writes them (quant_fp8.c), and a matrix that holds
 * one (an engine of an older nimfactory) takes the half-based path
 * (w->f8_normal, read from the codes when the engine opens).  The even words of a dword give columns 4j and 4j + 2 (j the dword),
 * the odd ones 4j + 1 and 4j + 3: the activations are laid out once per
 * call in those four classes, times 2^100 (exact; a product is then the
 * true one times 2^-20, folded into the row scale).  Per 32 codes: 2
 * vpmaddubsw and 2 shifts on the multiply ports beside the 4 FMAs, the 4
 * masks on the third vector port.  The sums' order is not the scalar
 * kernel's: within the error bound of the file comment.
 */
#define F8_DIRECT_UNIT 1048576.0f /* 2^20: what the products lack */
#define F8_DIRECT_BIAS 0x1p100f

/* x times 2^100 in the classes of the direct decode, per block of 4 *
 * lanes columns (a vector's dwords): [x(c + 4j)], [x(c + 4j + 1)],
 * [x(c + 4j + 2)], [x(c + 4j + 3)], j < lanes (8 or 16), each block
 * `step` floats after the one before (4 * lanes: one after the other; the
 * prefill interleaves its vectors' blocks).  cols a multiple of the block.  It runs once per call, that is per claim of the pool, so
 * it is a transpose in registers (as a scalar loop it was much of a small
 * matrix's time: docs/benchmarks.md, session 11).  Each 32 columns are a
 * 4 x 8 transpose: columns 4j .. 4j + 3 for j < 4 in the low 128-bit
 * lanes, j >= 4 in the high ones, then the 4 x 4 transpose of each lane. */
AVX2_F8 static void split_direct(float *xq, const float *x, size_t cols, size_t lanes, size_t step)
{
	const __m256 bias = _mm256_set1_ps(F8_DIRECT_BIAS);
	for (size_t c = 0; c < cols; c += 32) {
		const float *p = x + c;
		__m256 v0 = _mm256_loadu2_m128(p + 16, p), v1 = _mm256_loadu2_m128(p + 20, p + 4);
		__m256 v2 = _mm256_loadu2_m128(p + 24, p + 8), v3 = _mm256_loadu2_m128(p + 28, p + 12);
		__m256 t0 = _mm256_unpacklo_ps(v0, v1), t1 = _mm256_unpackhi_ps(v0, v1);
		__m256 t2 = _mm256_unpacklo_ps(v2, v3), t3 = _mm256_unpackhi_ps(v2, v3);
		/* the 32 columns' place in their block of 4 * lanes */
		size_t block = c / (4 * lanes), half = c % (4 * lanes);
		float *q = xq + block * step + half / 4;
		_mm256_storeu_ps(q, _mm256_mul_ps(_mm256_shuffle_ps(t0, t2, 0x44), bias));
		_mm256_storeu_ps(q + lanes, _mm256_mul_ps(_mm256_shuffle_ps(t0, t2, 0xee), bias));
		_mm256_storeu_ps(q + 2 * lanes, _mm256_mul_ps(_mm256_shuffle_ps(t1, t3, 0x44), bias));
		_mm256_storeu_ps(q + 3 * lanes, _mm256_mul_ps(_mm256_shuffle_ps(t1, t3, 0xee), bias));
	}
}

/* An empty asm that makes the compiler forget what p points at, so that
 * each use of it loads again: AVX2 has 16 vector registers, and with 8
 * accumulators and 3 constants live, a value loaded once into a register
 * and used twice was spilled to the stack and reloaded; a load folded into
 * its instruction costs a load-port uop, which this loop has to spare. */
#define F8_RELOAD(p) __asm__ volatile("" : "+r"(p))

/* acc[v] += f * the 8 floats at xq + 32 v, v < nv. */
AVX2_F8 __attribute__((always_inline)) static inline void
fma_vectors_avx2(__m256 *acc, __m256 f, const float *xq, int nv)
{
#pragma GCC unroll 4
	for (int v = 0; v < nv; v++)
		acc[v] = _mm256_fmadd_ps(f, _mm256_load_ps(xq + 32 * v), acc[v]);
}

/* 32 columns of the row at p against nv (a constant at each call) vectors
 * laid out from xq, their blocks of those columns 32 floats apart, into
 * two accumulators per vector, a[v] and b[v]: the decode's (nv = 1) and
 * the prefill's step. */
AVX2_F8 __attribute__((always_inline)) static inline void
step32_direct_avx2(__m256 *a, __m256 *b, const uint8_t *p, const float *xq, int nv)
{
	const __m256i to_even = _mm256_set1_epi16(0x0010), to_odd = _mm256_set1_epi16(0x1000);
	const __m256i mask = _mm256_set1_epi32((int)0x87f00000u);
	__m256i e = _mm256_maddubs_epi16(to_even, _mm256_loadu_si256((const __m256i *)p));
	F8_RELOAD(p);
	__m256i o = _mm256_maddubs_epi16(to_odd, _mm256_loadu_si256((const __m256i *)p));
	/* the low words moved up by a byte shift of each 128-bit lane (the
	 * shuffle port: the shifts by 16 shared the two ports of the FMAs and
	 * vpmaddubsw); what comes into the low words is masked off.  Each
	 * class is widened once for every vector. */
	fma_vectors_avx2(a, _mm256_castsi256_ps(_mm256_and_si256(_mm256_bslli_epi128(e, 2), mask)), xq, nv);
	fma_vectors_avx2(b, _mm256_castsi256_ps(_mm256_and_si256(_mm256_bslli_epi128(o, 2), mask)), xq + 8, nv);
	fma_vectors_avx2(a, _mm256_castsi256_ps(_mm256_and_si256(e, mask)), xq + 16, nv);
	fma_vectors_avx2(b, _mm256_castsi256_ps(_mm256_and_si256(o, mask)), xq + 24, nv);
}

/* Columns [c, c + 32) of the 4 rows at w, w + s, w + 2 s, w + 3 s (s the
 * row length: one base pointer and a stride in registers, so that the
 * loop's only scalar work is one pointer step) against the decode's one
 * vector, into their two accumulators each. */
AVX2_F8 __attribute__((always_inline)) static inline void
step32_rows_direct_avx2(__m256 a[AVX2_F8_ROWS], __m256 b[AVX2_F8_ROWS], const uint8_t *w, size_t s,
			const float *xq)
{
#pragma GCC unroll 4
	for (int i = 0; i < AVX2_F8_ROWS; i++) {
		const float *x = xq;
		F8_RELOAD(x);
		step32_direct_avx2(&a[i], &b[i], w + (size_t)i * s, x, 1);
	}
}

/* The 4 sums of a[i] + b[i], lane i: the pairs added, then one tree of
 * horizontal adds for the 4 together, which costs a fraction of a
 * reduction each. */
AVX2_F8 static inline __m128 sum4_pairs_avx2(const __m256 a[4], const __m256 b[4])
{
	__m256 h01 = _mm256_hadd_ps(_mm256_add_ps(a[0], b[0]), _mm256_add_ps(a[1], b[1]));
	__m256 h23 = _mm256_hadd_ps(_mm256_add_ps(a[2], b[2]), _mm256_add_ps(a[3], b[3]));
	__m256 h = _mm256_hadd_ps(h01, h23); /* per 128-bit lane: 0-3 */
	return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* The sums (times 2^-20) of the 4 rows from w on (row length cols) against
 * the laid-out xq, lane i row i. */
AVX2_F8 static __m128 dot_rows_direct_avx2(const uint8_t *w, size_t cols, const float *xq)
{
	__m256 a[AVX2_F8_ROWS], b[AVX2_F8_ROWS];
	for (int i = 0; i < AVX2_F8_ROWS; i++)
		a[i] = b[i] = _mm256_setzero_ps();
	const uint8_t *end = w + cols - cols % 64;
	for (; w < end; w += 64, xq += 64) {
#pragma GCC unroll 4
		for (int i = 0; i < AVX2_F8_ROWS; i++)
			_mm_prefetch((const char *)w + (size_t)i * cols + F8_PREFETCH, _MM_HINT_T0);
		step32_rows_direct_avx2(a, b, w, cols, xq);
		step32_rows_direct_avx2(a, b, w + 32, cols, xq + 32);
	}
	if (cols % 64) /* the last 32 */
		step32_rows_direct_avx2(a, b, w, cols, xq);
	return sum4_pairs_avx2(a, b);
}

/* Decode of rows [r0, r1) by the direct widening; cols a multiple of 32,
 * r1 - r0 at least AVX2_F8_ROWS.  A last block of fewer rows is taken
 * from r1 - AVX2_F8_ROWS on, and only its new rows stored. */
AVX2_F8 static void gemv_direct_avx2(float *y, const nf_bk_matrix *w, const float *x, int r0, int r1,
				     int accumulate)
{
	_Alignas(32) float xq[F8_XSPLIT_MAX];
	size_t cols = (size_t)w->cols;
	split_direct(xq, x, cols, 8, 32);
	const __m128 unit = _mm_set1_ps(F8_DIRECT_UNIT), act = _mm_set1_ps(w->act_scale);
	for (int r = r0; r < r1; r += AVX2_F8_ROWS) {
		if (r1 - r < AVX2_F8_ROWS) {
			_Alignas(16) float sums[AVX2_F8_ROWS];
			int first = r1 - AVX2_F8_ROWS, skip = r - first;
			_mm_store_ps(sums, dot_rows_direct_avx2(w->f8 + (size_t)first * cols, cols, xq));
			store_rows(y, 0, w, sums + skip, AVX2_F8_ROWS, r, AVX2_F8_ROWS - skip, 0, 1,
				   accumulate, F8_DIRECT_UNIT);
			break;
		}
		/* store_rows' arithmetic, 4 rows at a time */
		__m128 d = dot_rows_direct_avx2(w->f8 + (size_t)r * cols, cols, xq);
		__m128 v = _mm_mul_ps(_mm_mul_ps(d, unit), _mm_mul_ps(_mm_loadu_ps(w->scale + r), act));
		if (accumulate)
			v = _mm_add_ps(_mm_loadu_ps(y + r), v);
		_mm_storeu_ps(y + r, v);
	}
}

/*
 * AVX2 prefill by the direct widening, for a matrix without subnormal
 * codes, rows of whole blocks of 32 columns and at most
 * F8_PREFILL_DIRECT_MAX_COLS of them: a row's 32 codes widened once (8
 * uops) feed F8_PREFILL_NV vectors (4 FMAs each), against the half-based
 * widening's 2 conversions on the FMAs' ports per 16 codes.  The
 * activations are laid out as for the decode, each vector once per call,
 * up to F8_PREFILL_XQ_FLOATS at a time on the stack, the vectors' blocks
 * of 32 columns interleaved: a step's 4 vectors are 512 contiguous bytes,
 * read at constant offsets from one pointer.  Each (row, vector) sums in
 * the decode's order, within the error bound, not the scalar kernel's
 * bits.
 */
#define F8_PREFILL_NV 4 /* vectors per row: 8 accumulators, 3 constants, 3 temporaries */
#define F8_PREFILL_DIRECT_MAX_COLS 2048
#define F8_PREFILL_XQ_FLOATS 16384 /* 64 KiB */

/* The sums (times 2^-20) of one row against nv (a constant at each call)
 * vectors laid out from xq, nb vectors interleaved; lane v vector v (lanes
 * past nv: 0). */
AVX2_F8 __attribute__((always_inline)) static inline __m128
dot_row_prefill_direct_avx2(const uint8_t *row, size_t cols, const float *xq, size_t nb, int nv)
{
	__m256 a[F8_PREFILL_NV], b[F8_PREFILL_NV];
	for (int v = 0; v < F8_PREFILL_NV; v++)
		a[v] = b[v] = _mm256_setzero_ps();
	for (const uint8_t *end = row + cols; row < end; row += 32, xq += 32 * nb)
		step32_direct_avx2(a, b, row, xq, nv);
	return sum4_pairs_avx2(a, b);
}

/* Rows [r0, r1) against the nb vectors laid out in xq (vectors b0 on):
 * F8_PREFILL_NV vectors at a time against every row, so that their
 * activations stay in L1 while the rows come again from L2. */
AVX2_F8 static void prefill_rows_direct_avx2(float *y, size_t ldy, const nf_bk_matrix *w,
					     const float *xq, size_t nb, size_t b0, int r0, int r1,
					     int accumulate)
{
	size_t cols = (size_t)w->cols;
	for (size_t v = 0; v < nb; v += F8_PREFILL_NV)
		for (int r = r0; r < r1; r++) {
			const uint8_t *row = w->f8 + (size_t)r * cols;
			_Alignas(16) float sums[F8_PREFILL_NV];
			const float *xv = xq + 32 * v;
			size_t nv = nb - v < F8_PREFILL_NV ? nb - v : F8_PREFILL_NV;
			__m128 d = nv == 4   ? dot_row_prefill_direct_avx2(row, cols, xv, nb, 4)
				   : nv == 3 ? dot_row_prefill_direct_avx2(row, cols, xv, nb, 3)
				   : nv == 2 ? dot_row_prefill_direct_avx2(row, cols, xv, nb, 2)
					     : dot_row_prefill_direct_avx2(row, cols, xv, nb, 1);
			_mm_store_ps(sums, d);
			store_rows(y, ldy, w, sums, 1, r, 1, b0 + v, (int)nv, accumulate, F8_DIRECT_UNIT);
		}
}

/* A family's rows part of the direct prefill (prefill_rows_direct_avx2,
 * prefill_rows_direct_avx512). */
typedef void (*prefill_rows_fn)(float *y, size_t ldy, const nf_bk_matrix *w, const float *xq,
				size_t nb, size_t b0, int r0, int r1, int accumulate);

/* Prefill by the direct widening for a family whose blocks are 4 * lanes
 * columns and whose rows function takes `group` vectors at a time: the
 * vectors laid out F8_PREFILL_XQ_FLOATS floats at a time, in whole groups
 * (a short group widens as much), their blocks interleaved. */
static void prefill_direct(float *y, size_t ldy, const nf_bk_matrix *w, const float *x, size_t ldx,
			   size_t n, int r0, int r1, int accumulate, size_t lanes, size_t group,
			   prefill_rows_fn rows)
{
	_Alignas(64) float xq[F8_PREFILL_XQ_FLOATS];
	size_t cols = (size_t)w->cols, block = 4 * lanes, chunk = F8_PREFILL_XQ_FLOATS / cols / group * group;
	for (size_t b0 = 0; b0 < n; b0 += chunk) {
		size_t nb = n - b0 < chunk ? n - b0 : chunk;
		for (size_t v = 0; v < nb; v++)
			split_direct(xq + block * v, x + (b0 + v) * ldx, cols, lanes, block * nb);
		rows(y, ldy, w, xq, nb, b0, r0, r1, accumulate);
	}
}

AVX2_F8 void nf_cpu_gemm_f8_avx2(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
				 size_t ldx, size_t n, int r0, int r1, int accumulate)
{
	if (n == 1 && w->f8_normal && (size_t)w->cols % 32 == 0 && (size_t)w->cols <= F8_XSPLIT_MAX &&
	    r1 - r0 >= AVX2_F8_ROWS) {
		gemv_direct_avx2(y, w, x, r0, r1, accumulate);
	} else if (n == 1) {
		_Alignas(32) float table[F8_XSPLIT_MAX];
		const float *xsplit = NULL;
		if ((size_t)w->cols <= F8_XSPLIT_MAX && r1 - r0 > AVX2_F8_ROWS) {
			split_vector_avx2(table, x, (size_t)w->cols);
			xsplit = table;
		}
		for (int r = r0; r < r1; r += AVX2_F8_ROWS)
			gemm_block_avx2(y, ldy, w, x, xsplit, ldx, n, r, r1, AVX2_F8_ROWS, accumulate);
	} else if (w->f8_normal && (size_t)w->cols % 32 == 0 &&
		   (size_t)w->cols <= F8_PREFILL_DIRECT_MAX_COLS) {
		prefill_direct(y, ldy, w, x, ldx, n, r0, r1, accumulate, 8, F8_PREFILL_NV,
			       prefill_rows_direct_avx2);
	} else {
		for (int r = r0; r < r1; r += 2)
			gemm_block_avx2(y, ldy, w, x, NULL, ldx, n, r, r1, 2, accumulate);
	}
}

/* nf_fp8_e4m3_round of 8 floats, without leaving floats: normals keep 3
 * mantissa bits, rounded to nearest even by adding 0x7ffff plus the last
 * kept bit (a carry moves up the exponent, as it should); below 2^-6,
 * adding and subtracting 2^14 rounds to the subnormal step 2^-9 (the ulp
 * of 2^14), ties to even; then saturation at 448 (infinity included), NaN
 * as the canonical NaN, and the sign put back. */
AVX2_F8 static inline __m256 round8_avx2(__m256 y)
{
	const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
	__m256i bits = _mm256_castps_si256(y), a = _mm256_and_si256(bits, absmask);
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, 20), _mm256_set1_epi32(1));
	__m256i norm = _mm256_add_epi32(a, _mm256_add_epi32(_mm256_set1_epi32(0x7ffff), lsb));
	norm = _mm256_and_si256(norm, _mm256_set1_epi32((int)0xfff00000u));
	const __m256 magic = _mm256_set1_ps(16384.0f);
	__m256 sub = _mm256_sub_ps(_mm256_add_ps(_mm256_castsi256_ps(a), magic), magic);
	__m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x3c800000), a); /* a < 2^-6 */
	__m256 r = _mm256_blendv_ps(_mm256_castsi256_ps(norm), sub, _mm256_castsi256_ps(is_sub));
	r = _mm256_min_ps(r, _mm256_set1_ps(448.0f));
	__m256i is_nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000));
	r = _mm256_blendv_ps(r, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)),
			     _mm256_castsi256_ps(is_nan));
	return _mm256_or_ps(r, _mm256_castsi256_ps(_mm256_andnot_si256(absmask, bits)));
}

AVX2_F8 void nf_cpu_round_f8_avx2(float *out, const float *x, float inv_scale, int n)
{
	__m256 vi = _mm256_set1_ps(inv_scale);
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i, round8_avx2(_mm256_mul_ps(_mm256_loadu_ps(x + i), vi)));
	for (; i < n; i++)
		out[i] = nf_fp8_e4m3_round(x[i] * inv_scale);
}

/* AVX-512 decode: 8 rows of one 16-lane accumulator each, a 64-byte line
 * of every row per step (as avx512.c's int8 GEMV).  Prefill is bound by
 * the widening, not by memory: 4 rows give each widened weight to up to 6
 * vectors (24 accumulators; of 2 x 12, 3 x 8, 4 x 6 and 8 x 3, 4 x 6 was
 * the fastest from 12 vectors up, docs/quantization.md). */
#define AVX512_F8_ROWS 8
#define AVX512_F8_PREFILL_ROWS 4
#define AVX512_F8_NV 6

/* The 8 row sums of a0..a7 as one vector, in the order of the file
 * comment (the fold-and-hadd tree of avx512.c). */
AVX512_F8 static inline __m256 reduce8x16_avx512(const __m512 *a)
{
#define FOLD(v) _mm256_add_ps(_mm512_castps512_ps256(v), \
			      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)))
	__m256 h01 = _mm256_hadd_ps(FOLD(a[0]), FOLD(a[1])), h23 = _mm256_hadd_ps(FOLD(a[2]), FOLD(a[3]));
	__m256 h45 = _mm256_hadd_ps(FOLD(a[4]), FOLD(a[5])), h67 = _mm256_hadd_ps(FOLD(a[6]), FOLD(a[7]));
#undef FOLD
	__m256 h0123 = _mm256_hadd_ps(h01, h23), h4567 = _mm256_hadd_ps(h45, h67);
	return _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20),
			     _mm256_permute2f128_ps(h0123, h4567, 0x31));
}

/* 32 codes as the floats e4m3 * 2^-8, columns [0, 16) to *lo and
 * [16, 32) to *hi: sign-extended to 16 bits and moved up by 7, a code has
 * its magnitude in the half's exponent and mantissa and its sign in bits
 * 15 and 14; bit 14 is masked off.  The shift and the mask run once on all
 * 32 words. */
/* cvtph_mem_avx2 for 16 halves: off the shuffle port, which the sign
 * extension of the codes also needs. */
AVX512_F8 static inline __m512 cvtph_mem_avx512(const void *p)
{
	__m512 r;
	__asm__("vcvtph2ps %1, %0" : "=v"(r) : "m"(*(const __m256i *)p));
	return r;
}

AVX512_F8 static inline void widen32_avx512(__m512 *lo, __m512 *hi, const uint8_t *p)
{
	_Alignas(64) uint16_t buf[32];
	__m512i h = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p));
	h = _mm512_and_si512(_mm512_slli_epi16(h, 7), _mm512_set1_epi16((short)0xbf80));
	_mm512_store_si512(buf, h);
	*lo = cvtph_mem_avx512(buf);
	*hi = cvtph_mem_avx512(buf + 16);
}

/* The 16 codes of the lanes in m (the others read as zero), widened as
 * widen32_avx512 widens them. */
AVX512_F8 static inline __m512 widen16_masked_avx512(const uint8_t *p, __mmask16 m)
{
	__m256i h = _mm256_cvtepi8_epi16(_mm_maskz_loadu_epi8(m, p));
	return _mm512_cvtph_ps(_mm256_and_si256(_mm256_slli_epi16(h, 7), _mm256_set1_epi16((short)0xbf80)));
}

/* The 8 row sums (times 2^-8) with x.  The last columns short of 16 are
 * masked loads: zero weights and activations, zero products. */
AVX512_F8 static __m256 dot8_avx512(const uint8_t *const row[AVX512_F8_ROWS], size_t cols,
				    const float *x)
{
	__m512 a[AVX512_F8_ROWS];
#pragma GCC unroll 8
	for (int i = 0; i < AVX512_F8_ROWS; i++)
		a[i] = _mm512_setzero_ps();
	size_t c = 0;
	for (; c + 64 <= cols; c += 64) {
#pragma GCC unroll 8
		for (int i = 0; i < AVX512_F8_ROWS; i++)
			_mm_prefetch((const char *)row[i] + c + F8_PREFETCH, _MM_HINT_T0);
#pragma GCC unroll 2
		for (size_t g = c; g < c + 64; g += 32) {
			__m512 x0 = _mm512_loadu_ps(x + g), x1 = _mm512_loadu_ps(x + g + 16);
#pragma GCC unroll 8
			for (int i = 0; i < AVX512_F8_ROWS; i++) {
				__m512 w0, w1;
				widen32_avx512(&w0, &w1, row[i] + g);
				a[i] = _mm512_fmadd_ps(w1, x1, _mm512_fmadd_ps(w0, x0, a[i]));
			}
		}
	}
	for (; c < cols; c += 16) {
		__mmask16 m = cols - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (cols - c)) - 1);
		__m512 xv = _mm512_maskz_loadu_ps(m, x + c);
#pragma GCC unroll 8
		for (int i = 0; i < AVX512_F8_ROWS; i++)
			a[i] = _mm512_fmadd_ps(widen16_masked_avx512(row[i] + c, m), xv, a[i]);
	}
	return reduce8x16_avx512(a);
}

/* One row's 16 lanes summed in the order of the file comment. */
AVX512_F8 static inline float reduce16_avx512(__m512 a)
{
	__m256 f = _mm256_add_ps(_mm512_castps512_ps256(a),
				 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
	__m256 h = _mm256_hadd_ps(f, f); /* f0+f1, f2+f3, .. | f4+f5, f6+f7, .. */
	h = _mm256_hadd_ps(h, h);
	return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

/* Columns [c, c + 16) (the lanes in m) of the prefill rows into the
 * accumulators of nv vectors (a constant at each call). */
AVX512_F8 __attribute__((always_inline)) static inline void
step16_prefill_avx512(__m512 a[AVX512_F8_PREFILL_ROWS][AVX512_F8_NV],
		      const uint8_t *const row[AVX512_F8_PREFILL_ROWS], size_t c, __mmask16 m,
		      const float *x, size_t ldx, int nv)
{
	__m512 wv[AVX512_F8_PREFILL_ROWS];
#pragma GCC unroll 8
	for (int i = 0; i < AVX512_F8_PREFILL_ROWS; i++)
		wv[i] = widen16_masked_avx512(row[i] + c, m);
#pragma GCC unroll 12
	for (int v = 0; v < nv; v++) {
		__m512 xv = _mm512_maskz_loadu_ps(m, x + (size_t)v * ldx + c);
#pragma GCC unroll 8
		for (int i = 0; i < AVX512_F8_PREFILL_ROWS; i++)
			a[i][v] = _mm512_fmadd_ps(wv[i], xv, a[i][v]);
	}
}

/* out[i * AVX512_F8_NV + v] = the sum (times 2^-8) of prefill row i with
 * vector v, v < nv. */
AVX512_F8 __attribute__((always_inline)) static inline void
dotrxn_avx512(float *out, const uint8_t *const row[AVX512_F8_PREFILL_ROWS], size_t cols,
	      const float *x, size_t ldx, int nv)
{
	__m512 a[AVX512_F8_PREFILL_ROWS][AVX512_F8_NV];
#pragma GCC unroll 12
	for (int v = 0; v < nv; v++)
#pragma GCC unroll 8
		for (int i = 0; i < AVX512_F8_PREFILL_ROWS; i++)
			a[i][v] = _mm512_setzero_ps();
	size_t c = 0;
	for (; c + 16 <= cols; c += 16)
		step16_prefill_avx512(a, row, c, (__mmask16)0xffff, x, ldx, nv);
	if (c < cols)
		step16_prefill_avx512(a, row, c, (__mmask16)((1u << (cols - c)) - 1), x, ldx, nv);
#pragma GCC unroll 12
	for (int v = 0; v < nv; v++)
#pragma GCC unroll 8
		for (int i = 0; i < AVX512_F8_PREFILL_ROWS; i++)
			out[i * AVX512_F8_NV + v] = reduce16_avx512(a[i][v]);
}

/* Prefill rows [r, r + AVX512_F8_PREFILL_ROWS) (valid of them) times all
 * n vectors: AVX512_F8_NV at a time, then 3, then 1. */
AVX512_F8 static void prefill_block_avx512(float *y, size_t ldy, const nf_bk_matrix *w,
					   const float *x, size_t ldx, size_t n, int r, int r1,
					   int accumulate)
{
	const uint8_t *row[AVX512_F8_PREFILL_ROWS];
	int valid = block_rows(row, w, r, r1, AVX512_F8_PREFILL_ROWS);
	size_t cols = (size_t)w->cols, b = 0;
	float sums[AVX512_F8_PREFILL_ROWS * AVX512_F8_NV], t[AVX512_F8_PREFILL_ROWS * AVX512_F8_NV];
	for (; b < n;) {
		int nv = n - b >= AVX512_F8_NV ? AVX512_F8_NV : n - b >= 3 ? 3 : 1;
		if (nv == AVX512_F8_NV)
			dotrxn_avx512(sums, row, cols, x + b * ldx, ldx, AVX512_F8_NV);
		else if (nv == 3)
			dotrxn_avx512(sums, row, cols, x + b * ldx, ldx, 3);
		else
			dotrxn_avx512(sums, row, cols, x + b * ldx, ldx, 1);
		/* store_rows takes the sums vector-major */
		for (int v = 0; v < nv; v++)
			for (int i = 0; i < AVX512_F8_PREFILL_ROWS; i++)
				t[v * AVX512_F8_PREFILL_ROWS + i] = sums[i * AVX512_F8_NV + v];
		store_rows(y, ldy, w, t, AVX512_F8_PREFILL_ROWS, r, valid, b, nv, accumulate, F8_HALF_UNIT);
		b += (size_t)nv;
	}
}

/* Decode's vector laid out once per call for dot8_split_avx512: per 64
 * columns, the even columns of [c, c + 32), of [c + 32, c + 64), then the
 * odd ones of each, the order in which vpmaddubsw picks a line's codes. */
AVX512_F8 static void split_vector_avx512(float *xsplit, const float *x, size_t cols)
{
	const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
	const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
	for (size_t c = 0; c + 64 <= cols; c += 64)
		for (size_t h = 0; h < 2; h++) {
			__m512 x0 = _mm512_loadu_ps(x + c + 32 * h), x1 = _mm512_loadu_ps(x + c + 32 * h + 16);
			_mm512_store_ps(xsplit + c + 16 * h, _mm512_permutex2var_ps(x0, even, x1));
			_mm512_store_ps(xsplit + c + 32 + 16 * h, _mm512_permutex2var_ps(x0, odd, x1));
		}
}

/* The 64 codes at p as halves (e4m3 * 2^-8) in h: the even columns to
 * h[0, 32), the odd ones to h[32, 64), as halves_of_bytes on 32 words. */
AVX512_F8 static inline void halves64_avx512(uint16_t *h, const uint8_t *p)
{
	const __m512i mask = _mm512_set1_epi16((short)0xbf80);
	const __m512i to_even = _mm512_set1_epi16(F8_PICK_EVEN), to_odd = _mm512_set1_epi16((short)F8_PICK_ODD);
	__m512i w = _mm512_loadu_si512(p);
	_mm512_store_si512(h, _mm512_and_si512(_mm512_maddubs_epi16(to_even, w), mask));
	_mm512_store_si512(h + 32, _mm512_and_si512(_mm512_maddubs_epi16(to_odd, w), mask));
}

/* The 8 row sums (times 2^-8) with x, its whole lines of 64 columns read
 * from xsplit (split_vector_avx512), the rest as dot8_avx512 reads it.
 * Two accumulators a row, so that the FMAs of a line do not wait on each
 * other; the order of the sums is not the scalar kernel's (file comment). */
AVX512_F8 static __m256 dot8_split_avx512(const uint8_t *const row[AVX512_F8_ROWS], size_t cols,
					  const float *x, const float *xsplit)
{
	__m512 a[AVX512_F8_ROWS], b[AVX512_F8_ROWS];
#pragma GCC unroll 8
	for (int i = 0; i < AVX512_F8_ROWS; i++)
		a[i] = b[i] = _mm512_setzero_ps();
	size_t c = 0;
	for (; c + 64 <= cols; c += 64) {
		__m512 x0 = _mm512_load_ps(xsplit + c), x1 = _mm512_load_ps(xsplit + c + 16);
		__m512 x2 = _mm512_load_ps(xsplit + c + 32), x3 = _mm512_load_ps(xsplit + c + 48);
#pragma GCC unroll 8
		for (int i = 0; i < AVX512_F8_ROWS; i++) {
			_Alignas(64) uint16_t h[64];
			_mm_prefetch((const char *)row[i] + c + F8_PREFETCH, _MM_HINT_T0);
			halves64_avx512(h, row[i] + c);
			a[i] = _mm512_fmadd_ps(cvtph_mem_avx512(h), x0, a[i]);
			b[i] = _mm512_fmadd_ps(cvtph_mem_avx512(h + 16), x1, b[i]);
			a[i] = _mm512_fmadd_ps(cvtph_mem_avx512(h + 32), x2, a[i]);
			b[i] = _mm512_fmadd_ps(cvtph_mem_avx512(h + 48), x3, b[i]);
		}
	}
	for (; c < cols; c += 16) {
		__mmask16 m = cols - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (cols - c)) - 1);
		__m512 xv = _mm512_maskz_loadu_ps(m, x + c);
#pragma GCC unroll 8
		for (int i = 0; i < AVX512_F8_ROWS; i++)
			a[i] = _mm512_fmadd_ps(widen16_masked_avx512(row[i] + c, m), xv, a[i]);
	}
#pragma GCC unroll 8
	for (int i = 0; i < AVX512_F8_ROWS; i++)
		a[i] = _mm512_add_ps(a[i], b[i]);
	return reduce8x16_avx512(a);
}

/* AVX-512 decode by the direct widening of the AVX2 one (see there), 64
 * codes a line: 2 vpmaddubsw and 2 shifts, 4 masks, 4 FMAs, all on the two
 * ports that run 512-bit operations, against the 2 vpmaddubsw, 2 masks, 4
 * two-uop conversions and 4 FMAs of the half-based path.  The 8 row sums
 * (times 2^-20) of rows row[0..8) against xq (split_direct, 16 lanes);
 * cols a multiple of 64. */
AVX512_F8 static __m256 dot8_direct_avx512(const uint8_t *const row[AVX512_F8_ROWS], size_t cols,
					   const float *xq)
{
	const __m512i to_even = _mm512_set1_epi16(0x0010), to_odd = _mm512_set1_epi16(0x1000);
	const __m512i mask = _mm512_set1_epi32((int)0x87f00000u);
	__m512 a[AVX512_F8_ROWS], b[AVX512_F8_ROWS];
#pragma GCC unroll 8
	for (int i = 0; i < AVX512_F8_ROWS; i++)
		a[i] = b[i] = _mm512_setzero_ps();
	for (size_t c = 0; c < cols; c += 64) {
		__m512 x0 = _mm512_load_ps(xq + c), x1 = _mm512_load_ps(xq + c + 16);
		__m512 x2 = _mm512_load_ps(xq + c + 32), x3 = _mm512_load_ps(xq + c + 48);
#pragma GCC unroll 8
		for (int i = 0; i < AVX512_F8_ROWS; i++) {
			_mm_prefetch((const char *)row[i] + c + F8_PREFETCH, _MM_HINT_T0);
			__m512i w = _mm512_loadu_si512(row[i] + c);
			__m512i e = _mm512_maddubs_epi16(to_even, w), o = _mm512_maddubs_epi16(to_odd, w);
			__m512 f0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(e, 16), mask));
			__m512 f1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(o, 16), mask));
			__m512 f2 = _mm512_castsi512_ps(_mm512_and_si512(e, mask));
			__m512 f3 = _mm512_castsi512_ps(_mm512_and_si512(o, mask));
			a[i] = _mm512_fmadd_ps(f0, x0, a[i]);
			b[i] = _mm512_fmadd_ps(f1, x1, b[i]);
			a[i] = _mm512_fmadd_ps(f2, x2, a[i]);
			b[i] = _mm512_fmadd_ps(f3, x3, b[i]);
		}
	}
#pragma GCC unroll 8
	for (int i = 0; i < AVX512_F8_ROWS; i++)
		a[i] = _mm512_add_ps(a[i], b[i]);
	return reduce8x16_avx512(a);
}

/*
 * AVX-512 prefill by the direct widening, as AVX2's (prefill_direct):
 * for a matrix without subnormal codes, rows of whole lines of 64 columns
 * and at most F8_PREFILL_DIRECT_MAX_COLS of them, a row's 64 codes widened
 * once (8 uops) feed 8 vectors (32 FMAs, two accumulators each), against
 * the half-based widening's conversion per 16 codes; the vectors' lines
 * interleaved, 8 of them at a time against every row of the call.
 */
#define AVX512_F8_PREFILL_NV 8 /* 16 accumulators of the 32 registers */

/* acc[v] += f * the 16 floats at xq + 64 v, v < nv. */
AVX512_F8 __attribute__((always_inline)) static inline void
fma_vectors_avx512(__m512 acc[AVX512_F8_PREFILL_NV], __m512 f, const float *xq, int nv)
{
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++)
		acc[v] = _mm512_fmadd_ps(f, _mm512_load_ps(xq + 64 * v), acc[v]);
}

/* One line of the row at p against nv vectors whose blocks of those
 * columns are 64 floats apart from xq, into two accumulators per vector. */
AVX512_F8 __attribute__((always_inline)) static inline void
step64_prefill_direct_avx512(__m512 a[AVX512_F8_PREFILL_NV], __m512 b[AVX512_F8_PREFILL_NV],
			     const uint8_t *p, const float *xq, int nv)
{
	const __m512i to_even = _mm512_set1_epi16(0x0010), to_odd = _mm512_set1_epi16(0x1000);
	const __m512i mask = _mm512_set1_epi32((int)0x87f00000u);
	__m512i w = _mm512_loadu_si512(p);
	__m512i e = _mm512_maddubs_epi16(to_even, w), o = _mm512_maddubs_epi16(to_odd, w);
	fma_vectors_avx512(a, _mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(e, 16), mask)), xq, nv);
	fma_vectors_avx512(b, _mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(o, 16), mask)), xq + 16, nv);
	fma_vectors_avx512(a, _mm512_castsi512_ps(_mm512_and_si512(e, mask)), xq + 32, nv);
	fma_vectors_avx512(b, _mm512_castsi512_ps(_mm512_and_si512(o, mask)), xq + 48, nv);
}

/* The sums (times 2^-20) of one row against nv (a constant at each call)
 * vectors laid out from xq, nb vectors interleaved, into sums[0, nv). */
AVX512_F8 __attribute__((always_inline)) static inline void
dot_row_prefill_direct_avx512(float *sums, const uint8_t *row, size_t cols, const float *xq,
			      size_t nb, int nv)
{
	__m512 a[AVX512_F8_PREFILL_NV], b[AVX512_F8_PREFILL_NV];
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++)
		a[v] = b[v] = _mm512_setzero_ps();
	for (const uint8_t *end = row + cols; row < end; row += 64, xq += 64 * nb)
		step64_prefill_direct_avx512(a, b, row, xq, nv);
	if (nv == AVX512_F8_PREFILL_NV) {
#pragma GCC unroll 8
		for (int v = 0; v < nv; v++)
			a[v] = _mm512_add_ps(a[v], b[v]);
		_mm256_storeu_ps(sums, reduce8x16_avx512(a));
		return;
	}
#pragma GCC unroll 8
	for (int v = 0; v < nv; v++)
		sums[v] = _mm512_reduce_add_ps(_mm512_add_ps(a[v], b[v]));
}

/* Rows [r0, r1) against the nb vectors laid out in xq (vectors b0 on),
 * in groups of 8, 4, 2 and 1 vectors. */
AVX512_F8 static void prefill_rows_direct_avx512(float *y, size_t ldy, const nf_bk_matrix *w,
						 const float *xq, size_t nb, size_t b0, int r0, int r1,
						 int accumulate)
{
	size_t cols = (size_t)w->cols;
	for (size_t v = 0; v < nb;) {
		size_t left = nb - v;
		int nv = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
		const float *xv = xq + 64 * v;
		for (int r = r0; r < r1; r++) {
			const uint8_t *row = w->f8 + (size_t)r * cols;
			float sums[AVX512_F8_PREFILL_NV];
			if (nv == 8)
				dot_row_prefill_direct_avx512(sums, row, cols, xv, nb, 8);
			else if (nv == 4)
				dot_row_prefill_direct_avx512(sums, row, cols, xv, nb, 4);
			else if (nv == 2)
				dot_row_prefill_direct_avx512(sums, row, cols, xv, nb, 2);
			else
				dot_row_prefill_direct_avx512(sums, row, cols, xv, nb, 1);
			store_rows(y, ldy, w, sums, 1, r, 1, b0 + v, nv, accumulate, F8_DIRECT_UNIT);
		}
		v += (size_t)nv;
	}
}

/* y[r, r + valid) of one 8-row decode block from its sums d (times unit,
 * a power of two): d * unit * (scale[r] * act_scale, rounded once, as the
 * scalar kernel), added to y when accumulating. */
AVX512_F8 static inline void store8_avx512(float *y, const nf_bk_matrix *w, int r, int valid, __m256 d,
					   float unit, int accumulate)
{
	__mmask8 m = (__mmask8)((1u << valid) - 1);
	__m256 k = _mm256_mul_ps(_mm256_maskz_loadu_ps(m, w->scale + r), _mm256_set1_ps(w->act_scale));
	__m256 s = _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(unit)), k);
	if (accumulate)
		s = _mm256_add_ps(s, _mm256_maskz_loadu_ps(m, y + r));
	_mm256_mask_storeu_ps(y + r, m, s);
}

/*
 * AVX-512 decode by bf16 dot products (the avx512-bf16 family: AVX512_BF16
 * and GFNI beside the avx512-vnni family's features).  A code of a matrix
 * without subnormal codes is a bf16 of its value times 2^-120 by moving its
 * bits: the sign to bit 15, the 4 exponent bits to the bottom of the bf16's
 * exponent (bits 7..10), the 3 mantissa bits to the top of its mantissa
 * (bits 4..6).  Two GF(2) affine maps (vgf2p8affineqb, one instruction per
 * 64 codes each) give every code's high byte and low byte; interleaving
 * them makes the bf16 words, and vdpbf16ps multiplies 32 of them by 32
 * activations and adds the products in pairs to 16 float32 lanes.  Per 64
 * codes: 2 affine maps, 2 unpacks, 2 dot products, against the direct
 * widening's 2 vpmaddubsw, 2 shifts, 4 masks and 4 FMAs.
 *
 * The activations (on the e4m3 grid: 4 significant bits, which a bf16
 * holds exactly) are taken times 2^100 as the direct decode takes them, so
 * a product is the true one times 2^-20, between 2^-35 and 2^-2: the
 * instruction flushes denormals, and no product and no partial sum (a
 * multiple of 2^-38) comes near them.  A product of two bf16 holding 4
 * significant bits each is exact, so the sums are within the bound of the
 * file comment in any order.  The unpacks take bytes 0..7 of each 16-byte
 * lane in one vector and 8..15 in the other: the activations are laid out
 * once per call in that order (split_bf16).
 */
#define AVX512BF16_F8 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,gfni,f16c,fma")))

/* The GF(2) matrices of vgf2p8affineqb (row i of the output bit i is byte
 * 7 - i of the qword): the high byte of a code's bf16 takes the sign (bit 7
 * to 7) and the top 3 exponent bits (6..4 to 2..0); the low byte the last
 * exponent bit and the mantissa (3..0 to 7..4). */
#define F8_BF16_HIGH 0x1020400000000080ll
#define F8_BF16_LOW 0x0000000001020408ll

/* x[c, c + 64) times 2^100 as bf16, per 64 columns: of each 16 columns the
 * first 8 into words [0, 32), the last 8 into [32, 64), as the unpacks pick
 * the codes.  cols a multiple of 64. */
AVX512BF16_F8 static void split_bf16(uint16_t *xb, const float *x, size_t cols)
{
	const __m512 bias = _mm512_set1_ps(F8_DIRECT_BIAS);
	for (size_t c = 0; c < cols; c += 64)
		for (size_t j = 0; j < 4; j++) {
			__m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_loadu_ps(x + c + 16 * j), bias));
			_mm_storeu_si128((__m128i *)(xb + c + 8 * j), _mm256_castsi256_si128(h));
			_mm_storeu_si128((__m128i *)(xb + c + 32 + 8 * j), _mm256_extracti128_si256(h, 1));
		}
}

/* The 8 row sums (times 2^-20) of rows row[0..8) against xb (split_bf16);
 * cols a multiple of 64.  Two accumulators a row, the low and the high
 * bytes of each lane's 16 codes. */
AVX512BF16_F8 static __m256 dot8_bf16_avx512(const uint8_t *const row[AVX512_F8_ROWS], size_t cols,
					     const uint16_t *xb)
{
	const __m512i high = _mm512_set1_epi64(F8_BF16_HIGH), low = _mm512_set1_epi64(F8_BF16_LOW);
	__m512 a[AVX512_F8_ROWS], b[AVX512_F8_ROWS];
#pragma GCC unroll 8
	for (int i = 0; i < AVX512_F8_ROWS; i++)
		a[i] = b[i] = _mm512_setzero_ps();
	for (size_t c = 0; c < cols; c += 64) {
		__m512bh x0 = (__m512bh)_mm512_load_si512(xb + c), x1 = (__m512bh)_mm512_load_si512(xb + c + 32);
#pragma GCC unroll 8
		for (int i = 0; i < AVX512_F8_ROWS; i++) {
			_mm_prefetch((const char *)row[i] + c + F8_PREFETCH, _MM_HINT_T0);
			__m512i w = _mm512_loadu_si512(row[i] + c);
			__m512i hi = _mm512_gf2p8affine_epi64_epi8(w, high, 0);
			__m512i lo = _mm512_gf2p8affine_epi64_epi8(w, low, 0);
			a[i] = _mm512_dpbf16_ps(a[i], (__m512bh)_mm512_unpacklo_epi8(lo, hi), x0);
			b[i] = _mm512_dpbf16_ps(b[i], (__m512bh)_mm512_unpackhi_epi8(lo, hi), x1);
		}
	}
#pragma GCC unroll 8
	for (int i = 0; i < AVX512_F8_ROWS; i++)
		a[i] = _mm512_add_ps(a[i], b[i]);
	return reduce8x16_avx512(a);
}

/* Decode of rows [r0, r1) by dot8_bf16_avx512. */
AVX512BF16_F8 static void gemv_bf16_avx512(float *y, const nf_bk_matrix *w, const float *x, int r0,
					   int r1, int accumulate)
{
	_Alignas(64) uint16_t xb[F8_XSPLIT_MAX];
	size_t cols = (size_t)w->cols;
	split_bf16(xb, x, cols);
	for (int r = r0; r < r1; r += AVX512_F8_ROWS) {
		const uint8_t *row[AVX512_F8_ROWS];
		int valid = block_rows(row, w, r, r1, AVX512_F8_ROWS);
		store8_avx512(y, w, r, valid, dot8_bf16_avx512(row, cols, xb), F8_DIRECT_UNIT, accumulate);
	}
}

AVX512BF16_F8 void nf_cpu_gemm_f8_avx512bf16(float *y, size_t ldy, const nf_bk_matrix *w,
					     const float *x, size_t ldx, size_t n, int r0, int r1,
					     int accumulate)
{
	size_t cols = (size_t)w->cols;
	if (n == 1 && w->f8_normal && cols <= F8_XSPLIT_MAX && cols % 64 == 0)
		gemv_bf16_avx512(y, w, x, r0, r1, accumulate);
	else
		nf_cpu_gemm_f8_avx512(y, ldy, w, x, ldx, n, r0, r1, accumulate);
}

AVX512_F8 void nf_cpu_gemm_f8_avx512(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
				     size_t ldx, size_t n, int r0, int r1, int accumulate)
{
	if (n == 0)
		return;
	if (n > 1 && w->f8_normal && (size_t)w->cols % 64 == 0 &&
	    (size_t)w->cols <= F8_PREFILL_DIRECT_MAX_COLS) {
		prefill_direct(y, ldy, w, x, ldx, n, r0, r1, accumulate, 16, AVX512_F8_PREFILL_NV,
			       prefill_rows_direct_avx512);
		return;
	}
	if (n > 1) {
		for (int r = r0; r < r1; r += AVX512_F8_PREFILL_ROWS)
			prefill_block_avx512(y, ldy, w, x, ldx, n, r, r1, accumulate);
		return;
	}
	size_t cols = (size_t)w->cols;
	_Alignas(64) float table[F8_XSPLIT_MAX];
	const float *xsplit = NULL, *xq = NULL;
	if (w->f8_normal && cols <= F8_XSPLIT_MAX && cols % 64 == 0) {
		split_direct(table, x, cols, 16, 64);
		xq = table;
	} else if (cols <= F8_XSPLIT_MAX && cols >= 64) {
		split_vector_avx512(table, x, cols);
		xsplit = table;
	}
	for (int r = r0; r < r1; r += AVX512_F8_ROWS) {
		const uint8_t *row[AVX512_F8_ROWS];
		int valid = block_rows(row, w, r, r1, AVX512_F8_ROWS);
		__m256 d = xq ? dot8_direct_avx512(row, cols, xq)
			      : xsplit ? dot8_split_avx512(row, cols, x, xsplit) : dot8_avx512(row, cols, x);
		store8_avx512(y, w, r, valid, d, xq ? F8_DIRECT_UNIT : F8_HALF_UNIT, accumulate);
	}
}

/* round8_avx2 over 16 lanes. */
AVX512_F8 static inline __m512 round16_avx512(__m512 y)
{
	const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
	__m512i bits = _mm512_castps_si512(y), a = _mm512_and_si512(bits, absmask);
	__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(a, 20), _mm512_set1_epi32(1));
	__m512i norm = _mm512_add_epi32(a, _mm512_add_epi32(_mm512_set1_epi32(0x7ffff), lsb));
	norm = _mm512_and_si512(norm, _mm512_set1_epi32((int)0xfff00000u));
	const __m512 magic = _mm512_set1_ps(16384.0f);
	__m512 sub = _mm512_sub_ps(_mm512_add_ps(_mm512_castsi512_ps(a), magic), magic);
	__mmask16 is_sub = _mm512_cmplt_epi32_mask(a, _mm512_set1_epi32(0x3c800000));
	__m512 r = _mm512_mask_blend_ps(is_sub, _mm512_castsi512_ps(norm), sub);
	r = _mm512_min_ps(r, _mm512_set1_ps(448.0f));
	__mmask16 is_nan = _mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(0x7f800000));
	r = _mm512_mask_blend_ps(is_nan, r, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
	return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r), _mm512_andnot_si512(absmask, bits)));
}

AVX512_F8 void nf_cpu_round_f8_avx512(float *out, const float *x, float inv_scale, int n)
{
	__m512 vi = _mm512_set1_ps(inv_scale);
	for (int i = 0; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
		__m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vi);
		_mm512_mask_storeu_ps(out + i, m, round16_avx512(v));
	}
}
