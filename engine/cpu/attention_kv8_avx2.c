/*
 * attention_kv8_avx2.c - the AVX2 family's attention over an int8 KV cache
 * (backend.h, NF_KV_INT8).  q is quantized per head to int8 once; a score
 * is the maddubs sign trick over 32 elements at a time (|q| as u8 times k
 * with q's sign, pairs summed in int16 without saturation: 2 * 127 * 127 <
 * 32767), exact, so the scores equal the scalar reference's bit for bit.
 * V rows are widened to float and added with weight att[t] * scale, each
 * 32-element slice of out kept in registers over all positions.
 */
#include <immintrin.h>
#include <math.h>

#include "engine/cpu/cpu.h"
#include "util/banned.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline int32_t hsum8i(__m256i v)
{
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
	return _mm_cvtsi128_si32(s);
}

/* A head's rows come from memory as one stream (head-major): prefetch
 * this many bytes ahead, as the AVX-512 family does. */
#define KV8_PREFETCH 1024

AVX2 static inline void prefetch_row(const char *row, size_t bytes)
{
	for (size_t i = 0; i < bytes; i += 64)
		_mm_prefetch(row + i + KV8_PREFETCH, _MM_HINT_T0);
}

/* q8 . k8 over hs elements, exactly. */
AVX2 __attribute__((always_inline)) static inline int32_t dot_q8(const int8_t *q8,
								 const int8_t *k8, size_t hs)
{
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i acc = _mm256_setzero_si256();
	size_t i = 0;
	for (; i + 32 <= hs; i += 32) {
		__m256i qv = _mm256_loadu_si256((const __m256i *)(q8 + i));
		__m256i kv = _mm256_loadu_si256((const __m256i *)(k8 + i));
		__m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(qv), _mm256_sign_epi8(kv, qv));
		acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
	}
	int32_t dot = hsum8i(acc);
	for (; i < hs; i++)
		dot += (int32_t)q8[i] * (int32_t)k8[i];
	return dot;
}

/* att[t] = (q8 . k8[t]) * (kscale[t] * qs) for the np rows of one KV head. */
AVX2 __attribute__((always_inline)) static inline void
scores_kv8(float *att, const int8_t *q8, float qs, const char *k, size_t np, size_t hs)
{
	size_t rb = nf_kv_row_bytes(NF_KV_INT8, hs);
	for (size_t t = 0; t < np; t++, k += rb) {
		prefetch_row(k, rb);
		att[t] = (float)dot_q8(q8, (const int8_t *)(k + sizeof(float)), hs) *
			 (nf_cpu_kv8_scale(k) * qs);
	}
}

/* out[0, hs) = sum over t of att[t] * vscale[t] * v8[t]: 32 outputs at a
 * time in four registers over all positions (no loads and stores of out
 * per position), the last slice's tail in plain C. */
AVX2 __attribute__((always_inline)) static inline void
weighted_v_kv8(float *out, const float *att, const char *v, size_t np, size_t hs)
{
	size_t rb = nf_kv_row_bytes(NF_KV_INT8, hs), i = 0;
	for (; i + 32 <= hs; i += 32) {
		__m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
				 _mm256_setzero_ps()};
		const char *row = v;
		for (size_t t = 0; t < np; t++, row += rb) {
			prefetch_row(row, rb);
			const int8_t *v8 = (const int8_t *)(row + sizeof(float)) + i;
			__m256 w = _mm256_set1_ps(att[t] * nf_cpu_kv8_scale(row));
#pragma GCC unroll 4
			for (int j = 0; j < 4; j++) {
				__m128i b = _mm_loadl_epi64((const __m128i *)(v8 + j * 8));
				__m256 x = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
				acc[j] = _mm256_fmadd_ps(w, x, acc[j]);
			}
		}
		for (int j = 0; j < 4; j++)
			_mm256_storeu_ps(out + i + (size_t)j * 8, acc[j]);
	}
	for (; i < hs; i++) {
		float o = 0.0f;
		const char *row = v;
		for (size_t t = 0; t < np; t++, row += rb)
			o += att[t] * nf_cpu_kv8_scale(row) * (float)((const int8_t *)(row + sizeof(float)))[i];
		out[i] = o;
	}
}

AVX2 static void heads_kv8(float *out, const float *q, const void *kc, const void *vc, int pos,
			   int h0, int h1, int group, size_t hs, size_t head_stride, float *att)
{
	const nf_backend_ops *ops = &nf_cpu_avx2_ops;
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

void nf_cpu_attention_kv8_avx2(float *out, const float *q, const void *kc, const void *vc, int pos,
			       int h0, int h1, int n_heads, int n_kv_heads, int head_size,
			       size_t head_stride, float *att)
{
	heads_kv8(out, q, kc, vc, pos, h0, h1, n_heads / n_kv_heads, (size_t)head_size, head_stride,
		  att);
}
