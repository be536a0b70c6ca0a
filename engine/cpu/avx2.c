/*
 * avx2.c - the AVX2+FMA kernel family: float32 GEMV/GEMM four output rows at
 * a time (two accumulators each) and int8 GEMV through the maddubs sign trick
 * (|x| as u8 times sign(x)*w as s8).  Small ops reuse the portable ones.
 */
#include <immintrin.h>
#include <math.h>

#include "engine/cpu/cpu.h"
#include "engine/layout.h"
#include "engine/safetensors.h"
#include "util/banned.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))

static int avx2_available(void)
{
	return nf_cpu_has(NF_CPU_AVX2 | NF_CPU_FMA | NF_CPU_F16C);
}

AVX2 static inline float hsum8(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

AVX2 static inline int32_t hsum8i(__m256i v)
{
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
	return _mm_cvtsi128_si32(s);
}

static inline void store(float *out, float v, int accumulate)
{
	*out = accumulate ? *out + v : v;
}

/* Element c of a row whose chunks of 16 floats are cs apart (layout.h). */
#define AT16(p, c) ((p) + (c) / 16 * cs + (c) % 16)

/* How far ahead (bytes) the float32 GEMV prefetches each row into L1, as
 * the other GEMVs do: without it the hardware prefetchers lose the 4 rows
 * read side by side (docs/benchmarks.md, session 11). */
#define F32_PREFETCH 8192

/* Dot products of 4 rows (rs elements apart, chunks cs apart) with x. */
AVX2 static void dot4_f32(float out[4], const float *w, size_t rs, size_t cs, size_t cols,
			  const float *x)
{
	const float *w0 = w, *w1 = w + rs, *w2 = w + 2 * rs, *w3 = w + 3 * rs;
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	__m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
	size_t c = 0;
	/* 16 floats (one cache line) of each row per step, two accumulators
	 * a row: a takes floats [0, 8) of each chunk, b [8, 16) */
	for (; c + 16 <= cols; c += 16) {
		__m256 x0 = _mm256_loadu_ps(x + c), x1 = _mm256_loadu_ps(x + c + 8);
		_mm_prefetch((const char *)AT16(w0, c) + F32_PREFETCH, _MM_HINT_T0);
		_mm_prefetch((const char *)AT16(w1, c) + F32_PREFETCH, _MM_HINT_T0);
		_mm_prefetch((const char *)AT16(w2, c) + F32_PREFETCH, _MM_HINT_T0);
		_mm_prefetch((const char *)AT16(w3, c) + F32_PREFETCH, _MM_HINT_T0);
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(AT16(w0, c)), x0, a0);
		a1 = _mm256_fmadd_ps(_mm256_loadu_ps(AT16(w1, c)), x0, a1);
		a2 = _mm256_fmadd_ps(_mm256_loadu_ps(AT16(w2, c)), x0, a2);
		a3 = _mm256_fmadd_ps(_mm256_loadu_ps(AT16(w3, c)), x0, a3);
		b0 = _mm256_fmadd_ps(_mm256_loadu_ps(AT16(w0, c + 8)), x1, b0);
		b1 = _mm256_fmadd_ps(_mm256_loadu_ps(AT16(w1, c + 8)), x1, b1);
		b2 = _mm256_fmadd_ps(_mm256_loadu_ps(AT16(w2, c + 8)), x1, b2);
		b3 = _mm256_fmadd_ps(_mm256_loadu_ps(AT16(w3, c + 8)), x1, b3);
	}
	for (; c + 8 <= cols; c += 8) {
		__m256 x0 = _mm256_loadu_ps(x + c);
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(AT16(w0, c)), x0, a0);
		a1 = _mm256_fmadd_ps(_mm256_loadu_ps(AT16(w1, c)), x0, a1);
		a2 = _mm256_fmadd_ps(_mm256_loadu_ps(AT16(w2, c)), x0, a2);
		a3 = _mm256_fmadd_ps(_mm256_loadu_ps(AT16(w3, c)), x0, a3);
	}
	out[0] = hsum8(_mm256_add_ps(a0, b0));
	out[1] = hsum8(_mm256_add_ps(a1, b1));
	out[2] = hsum8(_mm256_add_ps(a2, b2));
	out[3] = hsum8(_mm256_add_ps(a3, b3));
	for (; c < cols; c++) {
		out[0] += *AT16(w0, c) * x[c];
		out[1] += *AT16(w1, c) * x[c];
		out[2] += *AT16(w2, c) * x[c];
		out[3] += *AT16(w3, c) * x[c];
	}
}

/* One row (chunks cs apart; cs = 16 is a plain contiguous row). */
AVX2 static float dot1_f32(const float *w, size_t cs, size_t cols, const float *x)
{
	__m256 a = _mm256_setzero_ps();
	size_t c = 0;
	for (; c + 8 <= cols; c += 8)
		a = _mm256_fmadd_ps(_mm256_loadu_ps(AT16(w, c)), _mm256_loadu_ps(x + c), a);
	float s = hsum8(a);
	for (; c < cols; c++)
		s += *AT16(w, c) * x[c];
	return s;
}

AVX2 static void avx2_gemm_f32(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
			       size_t ldx, size_t n, int r0, int r1, int accumulate)
{
	size_t cols = (size_t)w->cols, rs = nf_bk_row_stride(w), cs = nf_bk_chunk_stride(w);
	int r = r0;
	for (; r + 4 <= r1; r += 4) {
		const float *wr = w->f32 + nf_bk_index(w, (size_t)r, 0);
		for (size_t b = 0; b < n; b++) {
			float d[4];
			dot4_f32(d, wr, rs, cs, cols, x + b * ldx);
			float *o = y + b * ldy + (size_t)r;
			for (int i = 0; i < 4; i++)
				store(o + i, d[i], accumulate);
		}
	}
	for (; r < r1; r++)
		for (size_t b = 0; b < n; b++)
			store(y + b * ldy + (size_t)r,
			      dot1_f32(w->f32 + nf_bk_index(w, (size_t)r, 0), cs, cols, x + b * ldx),
			      accumulate);
}

/* Element c of a row whose chunks of 64 int8 are cs apart (layout.h). */
#define AT64(p, c) ((p) + (c) / 64 * cs + (c) % 64)

/* Rows per step of the int8 GEMV, and how far ahead (bytes) it prefetches
 * the matrix, which it reads as one forward stream in either layout.  Both
 * measured on SmolLM2 int8 (docs/benchmarks.md): 8 rows beat 4 and 6, and
 * the prefetch into L1 took decode from 166 to ~245 tok/s (a non-temporal
 * one halved it); the hardware prefetchers alone lose the short rows. */
#define Q8_ROWS 8
#define Q8_PREFETCH 8192

/* sum over c of x[c] * w[r][c] for Q8_ROWS rows (rs bytes apart, 64-byte
 * chunks cs apart: layout.h), one 64-byte chunk of every row per step, so
 * that Q8_ROWS cache lines are in flight at once.  `tiled` is a constant at
 * each call: each layout gets its own loop, without the division of AT64. */
AVX2 __attribute__((always_inline)) static inline void
dotn_q8(int32_t out[Q8_ROWS], const int8_t *w, size_t rs, size_t cs, size_t cols, const int8_t *x,
	int tiled)
{
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i a[Q8_ROWS];
#pragma GCC unroll 8
	for (int i = 0; i < Q8_ROWS; i++)
		a[i] = _mm256_setzero_si256();
	size_t full = cols & ~(size_t)63;
	for (size_t c = 0; c < full; c += 64) {
		__m256i x0 = _mm256_loadu_si256((const __m256i *)(x + c));
		__m256i x1 = _mm256_loadu_si256((const __m256i *)(x + c + 32));
		__m256i ax0 = _mm256_abs_epi8(x0), ax1 = _mm256_abs_epi8(x1);
		const int8_t *wc = tiled ? w + c / 64 * cs : w + c;
#pragma GCC unroll 8
		for (int i = 0; i < Q8_ROWS; i++) {
			const int8_t *wi = wc + (size_t)i * rs;
			_mm_prefetch((const char *)wi + Q8_PREFETCH, _MM_HINT_T0);
			__m256i p0 = _mm256_maddubs_epi16(ax0, _mm256_sign_epi8(
				_mm256_loadu_si256((const __m256i *)wi), x0));
			__m256i p1 = _mm256_maddubs_epi16(ax1, _mm256_sign_epi8(
				_mm256_loadu_si256((const __m256i *)(wi + 32)), x1));
			a[i] = _mm256_add_epi32(a[i], _mm256_add_epi32(_mm256_madd_epi16(p0, ones),
								 _mm256_madd_epi16(p1, ones)));
		}
	}
#pragma GCC unroll 8
	for (int i = 0; i < Q8_ROWS; i++)
		out[i] = hsum8i(a[i]);
	for (size_t c = full; c < cols; c++) /* row-major only: tiled rows are whole chunks */
#pragma GCC unroll 8
		for (int i = 0; i < Q8_ROWS; i++)
			out[i] += (int32_t)w[(size_t)i * rs + c] * x[c];
}

AVX2 static void avx2_gemm_q8(float *y, size_t ldy, const nf_bk_matrix *w, const int8_t *xq,
			      size_t ldx, const float *xs, size_t n, int r0, int r1, int accumulate)
{
	size_t cols = (size_t)w->cols, rs = nf_bk_row_stride(w), cs = nf_bk_chunk_stride(w);
	int tiled = w->layout == NF_BK_TILE8;
	int r = r0;
	for (; r + Q8_ROWS <= r1; r += Q8_ROWS) {
		const int8_t *wr = w->q8 + nf_bk_index(w, (size_t)r, 0);
		for (size_t b = 0; b < n; b++) {
			int32_t d[Q8_ROWS];
			if (tiled)
				dotn_q8(d, wr, rs, cs, cols, xq + b * ldx, 1);
			else
				dotn_q8(d, wr, rs, cs, cols, xq + b * ldx, 0);
			float *o = y + b * ldy + (size_t)r;
			for (int i = 0; i < Q8_ROWS; i++)
				store(o + i, (float)d[i] * w->scale[r + i] * xs[b], accumulate);
		}
	}
	for (; r < r1; r++) {
		const int8_t *wr = w->q8 + nf_bk_index(w, (size_t)r, 0);
		for (size_t b = 0; b < n; b++) {
			const int8_t *xb = xq + b * ldx;
			int32_t acc = 0;
			for (size_t c = 0; c < cols; c++)
				acc += (int32_t)*AT64(wr, c) * xb[c];
			store(y + b * ldy + (size_t)r, (float)acc * w->scale[r] * xs[b], accumulate);
		}
	}
}

AVX2 static void avx2_add(float *y, const float *x, int n)
{
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
	for (; i < n; i++)
		y[i] += x[i];
}

/* e^x for 8 floats (Cephes expf, as exp16 in avx512.c; 2^n built in the
 * exponent bits); about 1 ulp, 0 below -87.3. */
AVX2 static inline __m256 exp8(__m256 x)
{
	x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.3f)), _mm256_set1_ps(-87.3f));
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
				   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
	__m256 p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	/* n in [-126, 127]: 2^n = (n + 127) << 23 */
	__m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
	return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

AVX2 static void avx2_rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
	__m256 a = _mm256_setzero_ps();
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i);
		a = _mm256_fmadd_ps(v, v, a);
	}
	float ss = hsum8(a);
	for (; i < n; i++)
		ss += x[i] * x[i];
	ss = 1.0f / sqrtf(ss / (float)n + eps);
	__m256 vs = _mm256_set1_ps(ss);
	for (i = 0; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(w + i),
							_mm256_mul_ps(vs, _mm256_loadu_ps(x + i))));
	for (; i < n; i++)
		out[i] = w[i] * (ss * x[i]);
}

AVX2 static void avx2_softmax(float *x, int n)
{
	float m = x[0];
	int i = 0;
	__m256 mx = _mm256_set1_ps(x[0]);
	for (; i + 8 <= n; i += 8)
		mx = _mm256_max_ps(mx, _mm256_loadu_ps(x + i));
	__m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
	h = _mm_max_ps(h, _mm_movehl_ps(h, h));
	h = _mm_max_ss(h, _mm_movehdup_ps(h));
	m = _mm_cvtss_f32(h);
	for (; i < n; i++)
		if (x[i] > m)
			m = x[i];
	__m256 vm = _mm256_set1_ps(m), vs = _mm256_setzero_ps();
	for (i = 0; i + 8 <= n; i += 8) {
		__m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
		_mm256_storeu_ps(x + i, e);
		vs = _mm256_add_ps(vs, e);
	}
	float sum = hsum8(vs);
	for (; i < n; i++) {
		x[i] = expf(x[i] - m);
		sum += x[i];
	}
	float inv = 1.0f / sum;
	__m256 vi = _mm256_set1_ps(inv);
	for (i = 0; i + 8 <= n; i += 8)
		_mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vi));
	for (; i < n; i++)
		x[i] *= inv;
}

AVX2 static void avx2_swiglu(float *h1, const float *h3, int n)
{
	const __m256 one = _mm256_set1_ps(1.0f);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 g = _mm256_loadu_ps(h1 + i);
		__m256 sig = _mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
		_mm256_storeu_ps(h1 + i, _mm256_mul_ps(sig, _mm256_loadu_ps(h3 + i)));
	}
	for (; i < n; i++) {
		float g = h1[i];
		h1[i] = g / (1.0f + expf(-g)) * h3[i];
	}
}

/* 8 elements of a KV cache row from element i: floats, or IEEE half
 * widened exactly. */
AVX2 __attribute__((always_inline)) static inline __m256 load_kv8(const void *row, size_t i, int f16)
{
	if (f16)
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + i)));
	return _mm256_loadu_ps((const float *)row + i);
}

/* Head by head over the head-major cache (backend.h): scores, softmax,
 * then V rows added position by position; att holds (h1-h0, pos+1).  f16
 * is a constant at each call, so each cache type gets its own loops. */
AVX2 __attribute__((always_inline)) static inline void
attention_heads(float *out, const float *q, const void *kc, const void *vc, int f16, int pos,
		int h0, int h1, int n_heads, int n_kv_heads, int head_size, size_t head_stride,
		float *att)
{
	size_t hs = (size_t)head_size, es = f16 ? 2 : 4;
	size_t np = (size_t)pos + 1;
	int group = n_heads / n_kv_heads;
	float scale = 1.0f / sqrtf((float)head_size);
	for (int h = h0; h < h1; h++) {
		const float *qh = q + (size_t)h * hs;
		const char *k = (const char *)kc + (size_t)(h / group) * head_stride;
		for (size_t t = 0; t < np; t++, k += hs * es) {
			__m256 a = _mm256_setzero_ps();
			size_t i = 0;
			for (; i + 8 <= hs; i += 8)
				a = _mm256_fmadd_ps(load_kv8(k, i, f16), _mm256_loadu_ps(qh + i), a);
			float d = hsum8(a);
			for (; i < hs; i++)
				d += nf_cpu_kv_at(k, i, f16) * qh[i];
			att[(size_t)(h - h0) * np + t] = d * scale;
		}
	}
	for (int h = h0; h < h1; h++) {
		avx2_softmax(att + (size_t)(h - h0) * np, (int)np);
		for (size_t i = 0; i < hs; i++)
			out[(size_t)h * hs + i] = 0.0f;
	}
	for (size_t t = 0; t < np; t++) {
		for (int h = h0; h < h1; h++) {
			float a = att[(size_t)(h - h0) * np + t], *o = out + (size_t)h * hs;
			const char *vh = (const char *)vc + (size_t)(h / group) * head_stride + t * hs * es;
			__m256 va = _mm256_set1_ps(a);
			size_t i = 0;
			for (; i + 8 <= hs; i += 8)
				_mm256_storeu_ps(o + i, _mm256_fmadd_ps(va, load_kv8(vh, i, f16),
									_mm256_loadu_ps(o + i)));
			for (; i < hs; i++)
				o[i] += a * nf_cpu_kv_at(vh, i, f16);
		}
	}
}

AVX2 static void avx2_attention(float *out, const float *q, const void *kc, const void *vc,
		nf_kv_kind kind, int pos, int h0, int h1, int n_heads, int n_kv_heads,
		int head_size, size_t head_stride, float *att)
{
	if (kind == NF_KV_INT8)
		nf_cpu_attention_kv8_avx2(out, q, kc, vc, pos, h0, h1, n_heads, n_kv_heads, head_size,
			head_stride, att);
	else if (kind == NF_KV_F16)
		attention_heads(out, q, kc, vc, 1, pos, h0, h1, n_heads, n_kv_heads, head_size,
				head_stride, att);
	else
		attention_heads(out, q, kc, vc, 0, pos, h0, h1, n_heads, n_kv_heads, head_size,
				head_stride, att);
}

/* Round to nearest even, as nf_f32_to_f16. */
AVX2 static void avx2_to_f16(uint16_t *h, const float *x, int n)
{
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(h + i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
	for (; i < n; i++)
		h[i] = nf_f32_to_f16(x[i]);
}

/* nf_quant_int8_vec, vectorised and bit-identical (cvtps rounds to nearest
 * even like nearbyintf). */
AVX2 static float avx2_quantize_q8(int8_t *q, const float *x, size_t n)
{
	const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	__m256 mx = _mm256_setzero_ps();
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		mx = _mm256_max_ps(mx, _mm256_and_ps(_mm256_loadu_ps(x + i), absmask));
	__m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
	h = _mm_max_ps(h, _mm_movehl_ps(h, h));
	h = _mm_max_ss(h, _mm_movehdup_ps(h));
	float m = _mm_cvtss_f32(h);
	for (; i < n; i++)
		if (fabsf(x[i]) > m)
			m = fabsf(x[i]);
	float s = m / 127.0f, inv = s > 0.0f ? 1.0f / s : 0.0f;
	__m256 vi = _mm256_set1_ps(inv);
	const __m256i hi = _mm256_set1_epi32(127), lo = _mm256_set1_epi32(-127);
	for (i = 0; i + 8 <= n; i += 8) {
		__m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), vi));
		v = _mm256_max_epi32(_mm256_min_epi32(v, hi), lo);
		__m128i p = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
		_mm_storel_epi64((__m128i *)(q + i), _mm_packs_epi16(p, p));
	}
	for (; i < n; i++) {
		float v = nearbyintf(x[i] * inv);
		v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
		q[i] = (int8_t)v;
	}
	return s;
}

const nf_backend_ops nf_cpu_avx2_ops = {
	.name = "avx2",
	.available = avx2_available,
	.gemm_f32 = avx2_gemm_f32,
	.gemm_q8 = avx2_gemm_q8,
	.gemm_h16 = nf_cpu_gemm_h16_avx2,
	.gemm_q4 = nf_cpu_gemm_q4_avx2,
	.gemm_f8 = nf_cpu_gemm_f8_avx2,
	.round_f8 = nf_cpu_round_f8_avx2,
	.rmsnorm = avx2_rmsnorm,
	.rope = nf_cpu_rope_ref,
	.softmax = avx2_softmax,
	.attention = avx2_attention,
	.swiglu = avx2_swiglu,
	.add = avx2_add,
	.quantize_q8 = avx2_quantize_q8,
	.to_f16 = avx2_to_f16,
};
