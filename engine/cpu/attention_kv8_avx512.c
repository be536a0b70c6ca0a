/*
 * attention_kv8_avx512.c - the AVX-512 family's attention over an int8 KV
 * cache (backend.h, NF_KV_INT8).  q is quantized per head to int8 once, so
 * a score is one VNNI vpdpbusd per 64 elements of a K row (|q| as u8 times
 * k with q's sign, exact, so the scores equal the scalar reference's bit
 * for bit); V rows are widened to float and accumulated with weight
 * att[t] * scale, each 64-element slice of out kept in registers over all
 * positions.
 */
#include <immintrin.h>
#include <math.h>

#include "engine/cpu/cpu.h"
#include "util/banned.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma")))

/* A head's rows come from memory as one stream (head-major): prefetch
 * this many bytes ahead, as the family's float/half attention does. */
#define KV8_PREFETCH 1024

static inline __mmask64 mask64(size_t left)
{
	return left >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << left) - 1);
}

static inline __mmask16 mask16(size_t left)
{
	return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

AVX512 static inline void prefetch_row(const char *row, size_t bytes)
{
	for (size_t i = 0; i < bytes; i += 64)
		_mm_prefetch(row + i + KV8_PREFETCH, _MM_HINT_T0);
}

/* att[t] = (q8 . k8[t]) * (kscale[t] * qs) for the np rows of one KV head;
 * hs is a constant at the call for the common head size, so the |q| and
 * sign registers of a one-chunk head stay out of the loop. */
AVX512 __attribute__((always_inline)) static inline void
scores_kv8(float *att, const int8_t *q8, float qs, const char *k, size_t np, size_t hs)
{
	size_t rb = nf_kv_row_bytes(NF_KV_INT8, hs);
	for (size_t t = 0; t < np; t++, k += rb) {
		prefetch_row(k, rb);
		__m512i acc = _mm512_setzero_si512();
		for (size_t i = 0; i < hs; i += 64) {
			__mmask64 m = mask64(hs - i);
			__m512i qv = _mm512_maskz_loadu_epi8(m, q8 + i);
			__m512i kv = _mm512_maskz_loadu_epi8(m, k + sizeof(float) + i);
			/* vpdpbusd multiplies u8 by s8: |q| times k negated where q < 0 */
			__mmask64 neg = _mm512_movepi8_mask(qv);
			kv = _mm512_mask_sub_epi8(kv, neg, _mm512_setzero_si512(), kv);
			acc = _mm512_dpbusd_epi32(acc, _mm512_abs_epi8(qv), kv);
		}
		att[t] = (float)_mm512_reduce_add_epi32(acc) * (nf_cpu_kv8_scale(k) * qs);
	}
}

/* out[0, hs) = sum over t of att[t] * vscale[t] * v8[t]: 64 outputs at a
 * time in four registers over all positions. */
AVX512 __attribute__((always_inline)) static inline void
weighted_v_kv8(float *out, const float *att, const char *v, size_t np, size_t hs)
{
	size_t rb = nf_kv_row_bytes(NF_KV_INT8, hs);
	for (size_t i = 0; i < hs; i += 64) {
		__mmask16 m[4];
		__m512 acc[4];
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			size_t o = i + (size_t)j * 16;
			m[j] = o < hs ? mask16(hs - o) : 0;
			acc[j] = _mm512_setzero_ps();
		}
		const char *row = v;
		for (size_t t = 0; t < np; t++, row += rb) {
			prefetch_row(row, rb);
			const int8_t *v8 = (const int8_t *)(row + sizeof(float)) + i;
			__m512 w = _mm512_set1_ps(att[t] * nf_cpu_kv8_scale(row));
#pragma GCC unroll 4
			for (int j = 0; j < 4; j++) {
				__m128i b = _mm_maskz_loadu_epi8(m[j], v8 + j * 16);
				__m512 x = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
				acc[j] = _mm512_fmadd_ps(w, x, acc[j]);
			}
		}
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++)
			_mm512_mask_storeu_ps(out + i + (size_t)j * 16, m[j], acc[j]);
	}
}

/* The 8 lane sums of a[0..8) as one vector (a fold-and-hadd tree, as the
 * family's int8 GEMV reduces eight rows: cheaper than eight reductions). */
AVX512 static inline __m256i hsum8x16(const __m512i a[8])
{
#define FOLD(v) _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1))
	__m256i h01 = _mm256_hadd_epi32(FOLD(a[0]), FOLD(a[1]));
	__m256i h23 = _mm256_hadd_epi32(FOLD(a[2]), FOLD(a[3]));
	__m256i h45 = _mm256_hadd_epi32(FOLD(a[4]), FOLD(a[5]));
	__m256i h67 = _mm256_hadd_epi32(FOLD(a[6]), FOLD(a[7]));
#undef FOLD
	__m256i h0123 = _mm256_hadd_epi32(h01, h23), h4567 = _mm256_hadd_epi32(h45, h67);
	return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
				_mm256_permute2x128_si256(h0123, h4567, 0x31));
}

/* Head size 64, up to GROUP64 query heads of one KV head at once: a K row
 * is one 64-byte load for all of them, eight positions' sums reduced in one
 * tree; a V row is widened to floats once and added into every head's four
 * registers.  The same integers and the same FMA order per output as
 * scores_kv8 and weighted_v_kv8, so the same results bit for bit. */
#define GROUP64 4

AVX512 static void scores64(float *att, size_t np, const int8_t *q8, const float *qs, int nh,
			    const char *k)
{
	const size_t rb = nf_kv_row_bytes(NF_KV_INT8, 64);
	size_t t = 0;
	for (; t + 8 <= np; t += 8, k += 8 * rb) {
		__m512i kv[8];
		__m256 ks = _mm256_setr_ps(nf_cpu_kv8_scale(k), nf_cpu_kv8_scale(k + rb),
					   nf_cpu_kv8_scale(k + 2 * rb), nf_cpu_kv8_scale(k + 3 * rb),
					   nf_cpu_kv8_scale(k + 4 * rb), nf_cpu_kv8_scale(k + 5 * rb),
					   nf_cpu_kv8_scale(k + 6 * rb), nf_cpu_kv8_scale(k + 7 * rb));
		for (int j = 0; j < 8; j++) {
			prefetch_row(k + (size_t)j * rb, rb);
			kv[j] = _mm512_loadu_si512(k + (size_t)j * rb + sizeof(float));
		}
		for (int h = 0; h < nh; h++) {
			__m512i qv = _mm512_loadu_si512(q8 + h * 64), qa = _mm512_abs_epi8(qv), acc[8];
			__mmask64 neg = _mm512_movepi8_mask(qv);
			for (int j = 0; j < 8; j++)
				acc[j] = _mm512_dpbusd_epi32(
					_mm512_setzero_si512(), qa,
					_mm512_mask_sub_epi8(kv[j], neg, _mm512_setzero_si512(), kv[j]));
			__m256 d = _mm256_cvtepi32_ps(hsum8x16(acc));
			_mm256_storeu_ps(att + (size_t)h * np + t,
					 _mm256_mul_ps(d, _mm256_mul_ps(ks, _mm256_set1_ps(qs[h]))));
		}
	}
	for (; t < np; t++, k += rb)
		for (int h = 0; h < nh; h++)
			scores_kv8(att + (size_t)h * np + t, q8 + h * 64, qs[h], k, 1, 64);
}

AVX512 static void weighted_v64(float *out, size_t hs_stride, const float *att, size_t np, int nh,
				const char *v)
{
	const size_t rb = nf_kv_row_bytes(NF_KV_INT8, 64);
	__m512 acc[GROUP64][4];
	for (int h = 0; h < nh; h++)
		for (int j = 0; j < 4; j++)
			acc[h][j] = _mm512_setzero_ps();
	for (size_t t = 0; t < np; t++, v += rb) {
		prefetch_row(v, rb);
		const int8_t *v8 = (const int8_t *)(v + sizeof(float));
		float vs = nf_cpu_kv8_scale(v);
		__m512 x[4];
		for (int j = 0; j < 4; j++)
			x[j] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(v8 + j * 16))));
		for (int h = 0; h < nh; h++) {
			__m512 w = _mm512_set1_ps(att[(size_t)h * np + t] * vs);
			for (int j = 0; j < 4; j++)
				acc[h][j] = _mm512_fmadd_ps(w, x[j], acc[h][j]);
		}
	}
	for (int h = 0; h < nh; h++)
		for (int j = 0; j < 4; j++)
			_mm512_storeu_ps(out + (size_t)h * hs_stride + (size_t)j * 16, acc[h][j]);
}

/* Heads [h0, h1) of head size 64, GROUP64 at most at a time, each batch
 * within one KV head. */
AVX512 static void heads_kv8_64(float *out, const float *q, const void *kc, const void *vc,
				int pos, int h0, int h1, int group, size_t head_stride, float *att)
{
	const nf_backend_ops *ops = &nf_cpu_avx512_ops;
	size_t np = (size_t)pos + 1;
	/* the scratch's head_size floats hold GROUP64 heads of 64 int8 */
	int8_t *q8 = (int8_t *)(att + (size_t)(h1 - h0) * np);
	float scale = 1.0f / sqrtf(64.0f), qs[GROUP64];
	for (int hb = h0; hb < h1;) {
		int g = hb / group, he = (g + 1) * group;
		he = he < h1 ? he : h1;
		he = he < hb + GROUP64 ? he : hb + GROUP64;
		int nh = he - hb;
		float *a = att + (size_t)(hb - h0) * np;
		for (int h = 0; h < nh; h++)
			qs[h] = ops->quantize_q8(q8 + h * 64, q + (size_t)(hb + h) * 64, 64) * scale;
		scores64(a, np, q8, qs, nh, (const char *)kc + (size_t)g * head_stride);
		for (int h = 0; h < nh; h++)
			ops->softmax(a + (size_t)h * np, (int)np);
		weighted_v64(out + (size_t)hb * 64, 64, a, np, nh, (const char *)vc + (size_t)g * head_stride);
		hb = he;
	}
}

AVX512 static void heads_kv8(float *out, const float *q, const void *kc, const void *vc, int pos,
			     int h0, int h1, int group, size_t hs, size_t head_stride, float *att)
{
	const nf_backend_ops *ops = &nf_cpu_avx512_ops;
	size_t np = (size_t)pos + 1;
	int8_t *q8 = (int8_t *)(att + (size_t)(h1 - h0) * np); /* the scratch's head_size floats */
	float scale = 1.0f / sqrtf((float)hs);
	for (int h = h0; h < h1; h++) {
		float *a = att + (size_t)(h - h0) * np;
		float qs = ops->quantize_q8(q8, q + (size_t)h * hs, hs) * scale;
		size_t g = (size_t)(h / group);
		if (hs == 64)
			scores_kv8(a, q8, qs, (const char *)kc + g * head_stride, np, 64);
		else
			scores_kv8(a, q8, qs, (const char *)kc + g * head_stride, np, hs);
		ops->softmax(a, (int)np);
		if (hs == 64)
			weighted_v_kv8(out + (size_t)h * hs, a, (const char *)vc + g * head_stride, np, 64);
		else
			weighted_v_kv8(out + (size_t)h * hs, a, (const char *)vc + g * head_stride, np, hs);
	}
}

void nf_cpu_attention_kv8_avx512(float *out, const float *q, const void *kc, const void *vc,
				 int pos, int h0, int h1, int n_heads, int n_kv_heads,
				 int head_size, size_t head_stride, float *att)
{
	if (head_size == 64) {
		heads_kv8_64(out, q, kc, vc, pos, h0, h1, n_heads / n_kv_heads, head_stride, att);
		return;
	}
	heads_kv8(out, q, kc, vc, pos, h0, h1, n_heads / n_kv_heads, (size_t)head_size, head_stride,
		  att);
}
