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
	heads_kv8(out, q, kc, vc, pos, h0, h1, n_heads / n_kv_heads, (size_t)head_size, head_stride,
		  att);
}
