/*
 * avx512.c - the AVX-512 kernel family ("avx512-vnni"): float32 GEMV/GEMM
 * eight output rows at a time with masked tails, and int8 GEMV eight rows
 * at a time with VNNI vpdpbusd: activations are flipped to unsigned (x + 128) on the fly and
 * 128 * rowsum(W) is subtracted afterwards.  Needs AVX512F/BW/VL + VNNI.
 */
#include <immintrin.h>
#include <math.h>

#include "engine/cpu/cpu.h"
#include "engine/layout.h"
#include "util/banned.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma")))

static int avx512_available(void)
{
	return nf_cpu_has(NF_CPU_AVX512F | NF_CPU_AVX512BW | NF_CPU_AVX512VL | NF_CPU_AVX512VNNI);
}

/* Lanes [0, left) of 16 (all when left >= 16). */
static inline __mmask16 mask16(int left)
{
	return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

static inline void store(float *out, float v, int accumulate)
{
	*out = accumulate ? *out + v : v;
}

/* How far ahead (bytes) the GEMV kernels prefetch the matrix, which they
 * read as one forward stream in either layout: into L1, 8 KiB ahead.  On
 * the Intel Xeon of docs/benchmarks.md this took int8 decode of tiled
 * weights from 133 to 274 tok/s and row-major from 264 to 279 (the
 * non-temporal hint used before starved the tiled stream). */
#define GEMV_PREFETCH 8192

/* The 8 sums of a0..a7 as one vector (fold-and-hadd tree). */
AVX512 static inline __m256 hsum8x16_ps(__m512 a0, __m512 a1, __m512 a2, __m512 a3, __m512 a4,
					__m512 a5, __m512 a6, __m512 a7)
{
#define FOLD(v) _mm256_add_ps(_mm512_castps512_ps256(v), \
			      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)))
	__m256 h01 = _mm256_hadd_ps(FOLD(a0), FOLD(a1)), h23 = _mm256_hadd_ps(FOLD(a2), FOLD(a3));
	__m256 h45 = _mm256_hadd_ps(FOLD(a4), FOLD(a5)), h67 = _mm256_hadd_ps(FOLD(a6), FOLD(a7));
#undef FOLD
	__m256 h0123 = _mm256_hadd_ps(h01, h23), h4567 = _mm256_hadd_ps(h45, h67);
	return _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20),
			     _mm256_permute2f128_ps(h0123, h4567, 0x31));
}

/* Dot products of 8 rows (rs floats apart, 16-float chunks cs apart:
 * layout.h) with x: one 64-byte load per row per step, as the int8 kernel,
 * tail-free when cols is a multiple of 16. */
AVX512 __attribute__((always_inline)) static inline __m256 dot8_f32(const float *w, size_t rs,
								    size_t cs, size_t cols,
								    const float *x, int tiled)
{
	__m512 a[8];
#pragma GCC unroll 8
	for (int i = 0; i < 8; i++)
		a[i] = _mm512_setzero_ps();
	size_t full = cols & ~(size_t)15;
	for (size_t c = 0; c < full; c += 16) {
		__m512 xv = _mm512_loadu_ps(x + c);
		const float *wc = tiled ? w + c / 16 * cs : w + c;
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) {
			_mm_prefetch((const char *)(wc + (size_t)i * rs) + GEMV_PREFETCH, _MM_HINT_T0);
			a[i] = _mm512_fmadd_ps(_mm512_loadu_ps(wc + (size_t)i * rs), xv, a[i]);
		}
	}
	if (full < cols) {
		__mmask16 m = mask16((int)(cols - full));
		__m512 xv = _mm512_maskz_loadu_ps(m, x + full);
		const float *wc = w + full / 16 * cs;
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++)
			a[i] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, wc + (size_t)i * rs), xv, a[i]);
	}
	return hsum8x16_ps(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
}

/* dot8_f32 of the same 8 rows with F32_NV vectors x0, x0 + ldx, ... at
 * once: each weight load feeds F32_NV FMAs (prefill is compute-bound; with
 * one vector per weight load the FMA units wait on loads).  Each (row,
 * vector) sum is accumulated and reduced exactly as in dot8_f32, so the
 * results are bit-identical to it (tests/unit/engine/test_kernels.c).
 * `stream`: this pass is the first over the tile and nobody prefetched it,
 * so it prefetches its own stream GEMV_PREFETCH bytes ahead. */
#define F32_NV 4 /* measured best of 1-6 on Zen 5, of 2-4 on Zen 4 (32 accumulators) */
AVX512 __attribute__((always_inline)) static inline void dot8xn_f32(__m256 *out, const float *w,
								   size_t rs, size_t cs, size_t cols,
								   const float *x, size_t ldx, int stream,
								   const char *pf, int pf_lines)
{
	__m512 a[F32_NV][8];
#pragma GCC unroll 8
	for (int v = 0; v < F32_NV; v++)
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++)
			a[v][i] = _mm512_setzero_ps();
	size_t full = cols & ~(size_t)15;
	for (size_t c = 0; c < full; c += 16) {
		__m512 xv[F32_NV];
#pragma GCC unroll 8
		for (int v = 0; v < F32_NV; v++)
			xv[v] = _mm512_loadu_ps(x + (size_t)v * ldx + c);
		const float *wc = w + c / 16 * cs;
		if (pf) {
			for (int k = 0; k < pf_lines; k++)
				_mm_prefetch(pf + k * 64, _MM_HINT_T1);
			pf += pf_lines * 64;
		}
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) {
			if (stream)
				_mm_prefetch((const char *)(wc + (size_t)i * rs) + GEMV_PREFETCH, _MM_HINT_T0);
			__m512 wv = _mm512_loadu_ps(wc + (size_t)i * rs);
#pragma GCC unroll 8
			for (int v = 0; v < F32_NV; v++)
				a[v][i] = _mm512_fmadd_ps(wv, xv[v], a[v][i]);
		}
	}
	if (full < cols) {
		__mmask16 m = mask16((int)(cols - full));
		__m512 xv[F32_NV];
#pragma GCC unroll 8
		for (int v = 0; v < F32_NV; v++)
			xv[v] = _mm512_maskz_loadu_ps(m, x + (size_t)v * ldx + full);
		const float *wc = w + full / 16 * cs;
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) {
			__m512 wv = _mm512_maskz_loadu_ps(m, wc + (size_t)i * rs);
#pragma GCC unroll 8
			for (int v = 0; v < F32_NV; v++)
				a[v][i] = _mm512_fmadd_ps(wv, xv[v], a[v][i]);
		}
	}
#pragma GCC unroll 8
	for (int v = 0; v < F32_NV; v++)
		out[v] = hsum8x16_ps(a[v][0], a[v][1], a[v][2], a[v][3], a[v][4], a[v][5], a[v][6],
				     a[v][7]);
}

/* One row (16-float chunks cs apart). */
AVX512 static float dot1_f32(const float *w, size_t cs, size_t cols, const float *x)
{
	__m512 a = _mm512_setzero_ps();
	for (size_t c = 0; c < cols; c += 16) {
		size_t left = cols - c;
		__mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
		a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + c / 16 * cs),
				    _mm512_maskz_loadu_ps(m, x + c), a);
	}
	return _mm512_reduce_add_ps(a);
}

AVX512 static void avx512_gemm_f32(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
				   size_t ldx, size_t n, int r0, int r1, int accumulate)
{
	size_t cols = (size_t)w->cols, rs = nf_bk_row_stride(w), cs = nf_bk_chunk_stride(w);
	int tiled = w->layout == NF_BK_TILE8;
	int r = r0;
	/* With several vector groups, the passes over one tile also prefetch
	 * the next tile, spread evenly over them: the weights stream while the
	 * FMAs run, instead of the first pass waiting on memory alone. */
	size_t groups = n / F32_NV, steps = (cols + 15) / 16;
	size_t tile_lines = cols / 2; /* 8 rows of cols floats, in 64-byte lines */
	size_t per_group = groups ? (tile_lines + groups - 1) / groups : 0;
	int pf_lines = (int)((per_group + steps - 1) / steps);
	int ahead = tiled && groups >= 2 && cols % 16 == 0;
	for (; r + 8 <= r1; r += 8) {
		const float *wr = w->f32 + nf_bk_index(w, (size_t)r, 0);
		const char *next = ahead && r + 16 <= r1 ? (const char *)(wr + 8 * cols) : NULL;
		int fetched = ahead && r > r0; /* the previous tile prefetched this one */
		size_t b = 0;
		for (; b + F32_NV <= n; b += F32_NV) {
			__m256 v[F32_NV];
			const char *pf = next ? next + b / F32_NV * per_group * 64 : NULL;
			if (tiled && b == 0 && !fetched)
				dot8xn_f32(v, wr, rs, cs, cols, x + b * ldx, ldx, 1, pf, pf_lines);
			else
				dot8xn_f32(v, wr, rs, cs, cols, x + b * ldx, ldx, 0, pf, pf_lines);
			for (int k = 0; k < F32_NV; k++) {
				float *o = y + (b + (size_t)k) * ldy + (size_t)r;
				if (accumulate)
					v[k] = _mm256_add_ps(v[k], _mm256_loadu_ps(o));
				_mm256_storeu_ps(o, v[k]);
			}
		}
		for (; b < n; b++) {
			__m256 v = tiled ? dot8_f32(wr, rs, cs, cols, x + b * ldx, 1)
					 : dot8_f32(wr, rs, cs, cols, x + b * ldx, 0);
			float *o = y + b * ldy + (size_t)r;
			if (accumulate)
				v = _mm256_add_ps(v, _mm256_loadu_ps(o));
			_mm256_storeu_ps(o, v);
		}
	}
	for (; r < r1; r++)
		for (size_t b = 0; b < n; b++)
			store(y + b * ldy + (size_t)r,
			      dot1_f32(w->f32 + nf_bk_index(w, (size_t)r, 0), cs, cols, x + b * ldx),
			      accumulate);
}

/* The 8 row sums of a0..a7 as one vector of 8 int32 (a fold-and-hadd
 * tree: cheaper than eight full reductions). */
AVX512 static inline __m256i hsum8x16(__m512i a0, __m512i a1, __m512i a2, __m512i a3, __m512i a4,
				      __m512i a5, __m512i a6, __m512i a7)
{
#define FOLD(v) _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1))
	__m256i h01 = _mm256_hadd_epi32(FOLD(a0), FOLD(a1)), h23 = _mm256_hadd_epi32(FOLD(a2), FOLD(a3));
	__m256i h45 = _mm256_hadd_epi32(FOLD(a4), FOLD(a5)), h67 = _mm256_hadd_epi32(FOLD(a6), FOLD(a7));
#undef FOLD
	__m256i h0123 = _mm256_hadd_epi32(h01, h23), h4567 = _mm256_hadd_epi32(h45, h67);
	/* h0123 = [r0 r1 r2 r3 | r0 r1 r2 r3] partial sums of the low and high halves */
	__m256i lo = _mm256_permute2x128_si256(h0123, h4567, 0x20);
	__m256i hi = _mm256_permute2x128_si256(h0123, h4567, 0x31);
	return _mm256_add_epi32(lo, hi);
}

/* sum over c of (x[c] + 128) * w[r][c] for 8 rows (rs bytes apart, 64-byte
 * chunks cs apart: layout.h); x is padded to 64 bytes.  Eight rows of one
 * 64-byte load each per step (masked loads in the main loop measured
 * slower).  `tiled` is a constant at each call, so each layout gets its own
 * loop. */
AVX512 __attribute__((always_inline)) static inline __m256i dot8_q8(const int8_t *w, size_t rs,
								   size_t cs, size_t cols,
								   const int8_t *x, int tiled)
{
	const __m512i flip = _mm512_set1_epi8((char)0x80);
	__m512i a[8];
#pragma GCC unroll 8
	for (int i = 0; i < 8; i++)
		a[i] = _mm512_setzero_si512();
	/* the common case, cols a multiple of 64: no tail, a plain loop (the
	 * form with a tail after it measured ~10% slower) */
	size_t full = cols & ~(size_t)63;
	for (size_t c = 0; c < full; c += 64) {
		__m512i xv = _mm512_xor_si512(_mm512_loadu_si512(x + c), flip);
		const int8_t *wc = tiled ? w + c / 64 * cs : w + c;
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) {
			_mm_prefetch((const char *)(wc + (size_t)i * rs + 8192), _MM_HINT_T0);
			a[i] = _mm512_dpbusd_epi32(a[i], xv, _mm512_loadu_si512(wc + (size_t)i * rs));
		}
	}
	if (full < cols) { /* row-major only: tiled rows are whole chunks */
		__mmask64 m = ((__mmask64)1 << (cols - full)) - 1;
		__m512i xv = _mm512_xor_si512(_mm512_loadu_si512(x + full), flip);
		const int8_t *wc = w + full / 64 * cs;
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++)
			a[i] = _mm512_dpbusd_epi32(a[i], xv, _mm512_maskz_loadu_epi8(m, wc + (size_t)i * rs));
	}
	return hsum8x16(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
}

/* dot8_q8 of the same 8 rows with Q8_NV vectors x0, x0 + ldx, ... at once
 * (as dot8xn_f32): bit-identical to dot8_q8 per vector. */
#define Q8_NV 2 /* measured: 2 beats 1, 3 and 4 here */
AVX512 __attribute__((always_inline)) static inline void dot8xn_q8(__m256i *out, const int8_t *w,
								  size_t rs, size_t cs, size_t cols,
								  const int8_t *x, size_t ldx, int tiled)
{
	const __m512i flip = _mm512_set1_epi8((char)0x80);
	__m512i a[Q8_NV][8];
#pragma GCC unroll 8
	for (int v = 0; v < Q8_NV; v++)
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++)
			a[v][i] = _mm512_setzero_si512();
	size_t full = cols & ~(size_t)63;
	for (size_t c = 0; c < full; c += 64) {
		__m512i xv[Q8_NV];
#pragma GCC unroll 8
		for (int v = 0; v < Q8_NV; v++)
			xv[v] = _mm512_xor_si512(_mm512_loadu_si512(x + (size_t)v * ldx + c), flip);
		const int8_t *wc = tiled ? w + c / 64 * cs : w + c;
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) {
			_mm_prefetch((const char *)(wc + (size_t)i * rs + 8192), _MM_HINT_T0);
			__m512i wv = _mm512_loadu_si512(wc + (size_t)i * rs);
#pragma GCC unroll 8
			for (int v = 0; v < Q8_NV; v++)
				a[v][i] = _mm512_dpbusd_epi32(a[v][i], xv[v], wv);
		}
	}
	if (full < cols) {
		__mmask64 m = ((__mmask64)1 << (cols - full)) - 1;
		__m512i xv[Q8_NV];
#pragma GCC unroll 8
		for (int v = 0; v < Q8_NV; v++)
			xv[v] = _mm512_xor_si512(_mm512_loadu_si512(x + (size_t)v * ldx + full), flip);
		const int8_t *wc = w + full / 64 * cs;
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) {
			__m512i wv = _mm512_maskz_loadu_epi8(m, wc + (size_t)i * rs);
#pragma GCC unroll 8
			for (int v = 0; v < Q8_NV; v++)
				a[v][i] = _mm512_dpbusd_epi32(a[v][i], xv[v], wv);
		}
	}
#pragma GCC unroll 8
	for (int v = 0; v < Q8_NV; v++)
		out[v] = hsum8x16(a[v][0], a[v][1], a[v][2], a[v][3], a[v][4], a[v][5], a[v][6], a[v][7]);
}

/* One row (64-byte chunks cs apart). */
AVX512 static int32_t dot1_q8(const int8_t *w, size_t cs, size_t cols, const int8_t *x)
{
	const __m512i flip = _mm512_set1_epi8((char)0x80);
	__m512i a = _mm512_setzero_si512();
	for (size_t c = 0; c < cols; c += 64) {
		size_t left = cols - c;
		__mmask64 m = left >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << left) - 1);
		__m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(x + c), flip);
		a = _mm512_dpbusd_epi32(a, x0, _mm512_maskz_loadu_epi8(m, w + c / 64 * cs));
	}
	return _mm512_reduce_add_epi32(a);
}

AVX512 static void avx512_gemm_q8(float *y, size_t ldy, const nf_bk_matrix *w, const int8_t *xq,
				  size_t ldx, const float *xs, size_t n, int r0, int r1,
				  int accumulate)
{
	size_t cols = (size_t)w->cols, rs = nf_bk_row_stride(w), cs = nf_bk_chunk_stride(w);
	int tiled = w->layout == NF_BK_TILE8;
	int r = r0;
	for (; r + 8 <= r1; r += 8) {
		const int8_t *wr = w->q8 + nf_bk_index(w, (size_t)r, 0);
		/* 128 * rowsum undoes the +128 of the activations */
		__m256i bias = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(w->rowsum + r)), 7);
		__m256 sc = _mm256_loadu_ps(w->scale + r);
		size_t b = 0;
		for (; b + Q8_NV <= n; b += Q8_NV) {
			__m256i d[Q8_NV];
			if (tiled)
				dot8xn_q8(d, wr, rs, cs, cols, xq + b * ldx, ldx, 1);
			else
				dot8xn_q8(d, wr, rs, cs, cols, xq + b * ldx, ldx, 0);
			for (int k = 0; k < Q8_NV; k++) {
				__m256 v = _mm256_mul_ps(
					_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(d[k], bias)), sc),
					_mm256_set1_ps(xs[b + (size_t)k]));
				float *o = y + (b + (size_t)k) * ldy + (size_t)r;
				if (accumulate)
					v = _mm256_add_ps(v, _mm256_loadu_ps(o));
				_mm256_storeu_ps(o, v);
			}
		}
		for (; b < n; b++) {
			__m256i d = tiled ? dot8_q8(wr, rs, cs, cols, xq + b * ldx, 1)
					  : dot8_q8(wr, rs, cs, cols, xq + b * ldx, 0);
			d = _mm256_sub_epi32(d, bias);
			__m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(d), sc),
						 _mm256_set1_ps(xs[b]));
			float *o = y + b * ldy + (size_t)r;
			if (accumulate)
				v = _mm256_add_ps(v, _mm256_loadu_ps(o));
			_mm256_storeu_ps(o, v);
		}
	}
	for (; r < r1; r++) {
		const int8_t *wr = w->q8 + nf_bk_index(w, (size_t)r, 0);
		for (size_t b = 0; b < n; b++) {
			int32_t dot = dot1_q8(wr, cs, cols, xq + b * ldx) - 128 * w->rowsum[r];
			store(y + b * ldy + (size_t)r, (float)dot * w->scale[r] * xs[b], accumulate);
		}
	}
}

AVX512 static void avx512_add(float *y, const float *x, int n)
{
	for (int i = 0; i < n; i += 16) {
		__mmask16 m = mask16(n - i);
		__m512 s = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_maskz_loadu_ps(m, x + i));
		_mm512_mask_storeu_ps(y + i, m, s);
	}
}

/* nf_quant_int8_vec, vectorised: the same scale, the same products x * inv
 * and cvtps rounding to nearest even as nearbyintf, so bit-identical. */
AVX512 static float avx512_quantize_q8(int8_t *q, const float *x, size_t n)
{
	__m512 mx = _mm512_setzero_ps();
	for (size_t i = 0; i < n; i += 16)
		mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_maskz_loadu_ps(mask16((int)(n - i)), x + i)));
	float s = _mm512_reduce_max_ps(mx) / 127.0f;
	float inv = s > 0.0f ? 1.0f / s : 0.0f;
	__m512 vi = _mm512_set1_ps(inv);
	const __m512i hi = _mm512_set1_epi32(127), lo = _mm512_set1_epi32(-127);
	for (size_t i = 0; i < n; i += 16) {
		__mmask16 m = mask16((int)(n - i));
		__m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vi));
		v = _mm512_max_epi32(_mm512_min_epi32(v, hi), lo);
		_mm512_mask_cvtepi32_storeu_epi8(q + i, m, v);
	}
	return s;
}

/* e^x for 16 floats (Cephes expf: x = n ln2 + r, |r| <= ln2/2, degree-5
 * polynomial, 2^n by scalef); about 1 ulp, 0 below -87.3. */
AVX512 static inline __m512 exp16(__m512 x)
{
	x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.7f)), _mm512_set1_ps(-87.3f));
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
					_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
	__m512 p = _mm512_set1_ps(1.9875691500e-4f);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
	p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
	return _mm512_scalef_ps(p, n);
}

AVX512 static void avx512_rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
	__m512 a = _mm512_setzero_ps();
	for (int i = 0; i < n; i += 16) {
		__m512 v = _mm512_maskz_loadu_ps(mask16(n - i), x + i);
		a = _mm512_fmadd_ps(v, v, a);
	}
	float ss = 1.0f / sqrtf(_mm512_reduce_add_ps(a) / (float)n + eps);
	__m512 vs = _mm512_set1_ps(ss);
	for (int i = 0; i < n; i += 16) {
		__mmask16 m = mask16(n - i);
		__m512 v = _mm512_mul_ps(vs, _mm512_maskz_loadu_ps(m, x + i));
		_mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + i), v));
	}
}

AVX512 static void avx512_softmax(float *x, int n)
{
	__m512 mx = _mm512_set1_ps(-INFINITY);
	for (int i = 0; i < n; i += 16)
		mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), mask16(n - i), x + i));
	__m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(mx)), sum = _mm512_setzero_ps();
	for (int i = 0; i < n; i += 16) {
		__mmask16 m = mask16(n - i);
		__m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vm)));
		_mm512_mask_storeu_ps(x + i, m, e);
		sum = _mm512_add_ps(sum, e);
	}
	__m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
	for (int i = 0; i < n; i += 16) {
		__mmask16 m = mask16(n - i);
		_mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
	}
}

AVX512 static void avx512_swiglu(float *h1, const float *h3, int n)
{
	const __m512 one = _mm512_set1_ps(1.0f);
	for (int i = 0; i < n; i += 16) {
		__mmask16 m = mask16(n - i);
		__m512 g = _mm512_maskz_loadu_ps(m, h1 + i);
		__m512 sig = _mm512_div_ps(g, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
		_mm512_mask_storeu_ps(h1 + i, m, _mm512_mul_ps(sig, _mm512_maskz_loadu_ps(m, h3 + i)));
	}
}

/* 16 elements of a KV cache row from element i (the first `m` of them):
 * floats, or IEEE half widened exactly. */
AVX512 __attribute__((always_inline)) static inline __m512 load_kv16(const void *row, size_t i,
								    __mmask16 m, int f16)
{
	if (f16)
		return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + i));
	return _mm512_maskz_loadu_ps(m, (const float *)row + i);
}

/* q . k over n elements of a cache row k. */
AVX512 __attribute__((always_inline)) static inline float dot_kv(const float *q, const void *k,
								size_t n, int f16)
{
	__m512 s = _mm512_setzero_ps();
	for (size_t i = 0; i < n; i += 16) {
		__mmask16 m = mask16((int)(n - i));
		s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + i), load_kv16(k, i, m, f16), s);
	}
	return _mm512_reduce_add_ps(s);
}

/* The cache usually comes from memory (the weights stream evicted it), and
 * a head's rows are one sequential stream (head-major, backend.h): the
 * kernel prefetches ATT_PREFETCH bytes ahead of where it reads (1 KiB
 * measured best of 1-8 KiB). */
#define ATT_PREFETCH 1024

/* Prefetch the `bytes` at p, ATT_PREFETCH bytes ahead. */
AVX512 static inline void prefetch_ahead(const void *p, size_t bytes)
{
	for (size_t i = 0; i < bytes; i += 64)
		_mm_prefetch((const char *)p + i + ATT_PREFETCH, _MM_HINT_T0);
}

/* Head by head over the head-major cache: scores, softmax, then the
 * weighted sum of V; att holds (h1-h0, pos+1).  f16 is a constant at each
 * call, so each cache type gets its own loops. */
AVX512 __attribute__((always_inline)) static inline void
attention_heads(float *out, const float *q, const void *kc, const void *vc, int f16, int pos,
		int h0, int h1, int n_heads, int n_kv_heads, int head_size, size_t head_stride,
		float *att)
{
	size_t hs = (size_t)head_size, es = f16 ? 2 : 4, row = hs * es;
	size_t np = (size_t)pos + 1;
	int group = n_heads / n_kv_heads;
	float scale = 1.0f / sqrtf((float)head_size);
	for (int h = h0; h < h1; h++) {
		const char *k = (const char *)kc + (size_t)(h / group) * head_stride;
		for (size_t t = 0; t < np; t++, k += row) {
			prefetch_ahead(k, row);
			att[(size_t)(h - h0) * np + t] = dot_kv(q + (size_t)h * hs, k, hs, f16) * scale;
		}
	}
	/* out[h] = sum over t of att[h][t] * V[t][h]: each 64-element slice of
	 * out stays in four registers over all t (the same FMAs in the same
	 * order as an axpy per position, without the loads and stores of out) */
	for (int h = h0; h < h1; h++) {
		float *a = att + (size_t)(h - h0) * np;
		avx512_softmax(a, (int)np);
		for (size_t i = 0; i < hs; i += 64) {
			__mmask16 m[4];
			__m512 acc[4];
#pragma GCC unroll 4
			for (int j = 0; j < 4; j++) {
				size_t o = i + (size_t)j * 16;
				m[j] = o < hs ? mask16((int)(hs - o)) : 0;
				acc[j] = _mm512_setzero_ps();
			}
			const char *v = (const char *)vc + (size_t)(h / group) * head_stride + i * es;
			for (size_t t = 0; t < np; t++, v += row) {
				prefetch_ahead(v, (hs - i < 64 ? hs - i : 64) * es);
				__m512 at = _mm512_set1_ps(a[t]);
#pragma GCC unroll 4
				for (int j = 0; j < 4; j++)
					acc[j] = _mm512_fmadd_ps(at, load_kv16(v, (size_t)j * 16, m[j], f16),
								 acc[j]);
			}
#pragma GCC unroll 4
			for (int j = 0; j < 4; j++)
				_mm512_mask_storeu_ps(out + (size_t)h * hs + i + (size_t)j * 16, m[j], acc[j]);
		}
	}
}

AVX512 static void avx512_attention(float *out, const float *q, const void *kc, const void *vc,
		nf_kv_kind kind, int pos, int h0, int h1, int n_heads, int n_kv_heads,
		int head_size, size_t head_stride, float *att)
{
	if (kind == NF_KV_INT8)
		nf_cpu_attention_kv8_avx512(out, q, kc, vc, pos, h0, h1, n_heads, n_kv_heads, head_size,
			head_stride, att);
	else if (kind == NF_KV_F16)
		attention_heads(out, q, kc, vc, 1, pos, h0, h1, n_heads, n_kv_heads, head_size,
				head_stride, att);
	else
		attention_heads(out, q, kc, vc, 0, pos, h0, h1, n_heads, n_kv_heads, head_size,
				head_stride, att);
}

/* Round to nearest even, as nf_f32_to_f16. */
AVX512 static void avx512_to_f16(uint16_t *h, const float *x, int n)
{
	for (int i = 0; i < n; i += 16) {
		__mmask16 m = mask16(n - i);
		__m256i v = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i),
					    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		_mm256_mask_storeu_epi16(h + i, m, v);
	}
}

/* What the two AVX-512 families share: all but their fp8 GEMM. */
#define AVX512_SHARED_OPS                              \
	.gemm_f32 = avx512_gemm_f32,                   \
	.gemm_q8 = avx512_gemm_q8,                     \
	.gemm_h16 = nf_cpu_gemm_h16_avx512,            \
	.round_f8 = nf_cpu_round_f8_avx512,            \
	.gemm_q4 = nf_cpu_gemm_q4_avx512,              \
	.rmsnorm = avx512_rmsnorm,                     \
	.rope = nf_cpu_rope_ref,                       \
	.softmax = avx512_softmax,                     \
	.attention = avx512_attention,                 \
	.swiglu = avx512_swiglu,                       \
	.add = avx512_add,                             \
	.quantize_q8 = avx512_quantize_q8,             \
	.to_f16 = avx512_to_f16

const nf_backend_ops nf_cpu_avx512_ops = {
	.name = "avx512-vnni",
	.available = avx512_available,
	.gemm_f8 = nf_cpu_gemm_f8_avx512,
	AVX512_SHARED_OPS,
};

/* avx512-vnni and, where the CPU has AVX512_BF16 and GFNI (Zen 4,
 * Sapphire Rapids and later), fp8 decode by bf16 dot products
 * (gemm_f8.c). */
static int avx512bf16_available(void)
{
	return avx512_available() && nf_cpu_has(NF_CPU_AVX512BF16 | NF_CPU_GFNI);
}

const nf_backend_ops nf_cpu_avx512bf16_ops = {
	.name = "avx512-bf16",
	.available = avx512bf16_available,
	.gemm_f8 = nf_cpu_gemm_f8_avx512bf16,
	AVX512_SHARED_OPS,
};
