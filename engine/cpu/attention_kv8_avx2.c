/*
 * attention_kv8_avx2.c - the AVX2 family's attention over an int8 KV cache
 * (backend.h, NF_KV_INT8).  q is quantized per head to int8 once; a score
 * is the maddubs sign trick over 32 elements at a time (|q| as u8 times k
 * with q's sign, pairs summed in int16 without saturation: 2 * 127 * 127 <
 * 32767), exact, so the scores equal the scalar reference's bit for bit.
 * Eight positions' sums are reduced together.  V rows are widened to float
 * and added with weight att[t] * scale, each 64-element slice of out kept
 * in registers over all positions.
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

/* The 8 partial sums of q8 . k8 over hs elements (a multiple of 32). */
AVX2 __attribute__((always_inline)) static inline __m256i dot_q8_lanes(const int8_t *q8,
									const int8_t *k8, size_t hs)
{
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i acc = _mm256_setzero_si256();
	for (size_t i = 0; i + 32 <= hs; i += 32) {
		__m256i qv = _mm256_loadu_si256((const __m256i *)(q8 + i));
		__m256i kv = _mm256_loadu_si256((const __m256i *)(k8 + i));
		__m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(qv), _mm256_sign_epi8(kv, qv));
		acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
	}
	return acc;
}

/* q8 . k8 over hs elements, exactly. */
AVX2 __attribute__((always_inline)) static inline int32_t dot_q8(const int8_t *q8,
								 const int8_t *k8, size_t hs)
{
	size_t full = hs / 32 * 32;
	int32_t dot = hsum8i(dot_q8_lanes(q8, k8, full));
	for (size_t i = full; i < hs; i++)
		dot += (int32_t)q8[i] * (int32_t)k8[i];
	return dot;
}

/* The 8 lanes of each of a[0..8) summed: {sum a[0], ..., sum a[7]}. */
AVX2 static inline __m256i hsum8x8i(const __m256i a[8])
{
	__m256i s01 = _mm256_hadd_epi32(a[0], a[1]), s23 = _mm256_hadd_epi32(a[2], a[3]);
	__m256i s45 = _mm256_hadd_epi32(a[4], a[5]), s67 = _mm256_hadd_epi32(a[6], a[7]);
	__m256i s0123 = _mm256_hadd_epi32(s01, s23), s4567 = _mm256_hadd_epi32(s45, s67);
	return _mm256_add_epi32(_mm256_permute2x128_si256(s0123, s4567, 0x20),
				_mm256_permute2x128_si256(s0123, s4567, 0x31));
}

/* att[t] = (q8 . k8[t]) * (kscale[t] * qs) for the np rows of one KV head:
 * eight positions at a time when hs is a multiple of 32, their horizontal
 * sums in one transposing tree (a sum per position costs more than its
 * dot product); the same integers, so the same floats, as one at a time. */
AVX2 __attribute__((always_inline)) static inline void
scores_kv8(float *att, const int8_t *q8, float qs, const char *k, size_t np, size_t hs)
{
	size_t rb = nf_kv_row_bytes(NF_KV_INT8, hs), t = 0;
	if (hs % 32 == 0) {
		const __m256 vqs = _mm256_set1_ps(qs);
		for (; t + 8 <= np; t += 8, k += 8 * rb) {
			__m256i acc[8];
			float ks[8];
			for (int j = 0; j < 8; j++) {
				const char *row = k + (size_t)j * rb;
				prefetch_row(row, rb);
				acc[j] = dot_q8_lanes(q8, (const int8_t *)(row + sizeof(float)), hs);
				ks[j] = nf_cpu_kv8_scale(row);
			}
			__m256 d = _mm256_cvtepi32_ps(hsum8x8i(acc));
			_mm256_storeu_ps(att + t, _mm256_mul_ps(d, _mm256_mul_ps(_mm256_loadu_ps(ks), vqs)));
		}
	}
	for (; t < np; t++, k += rb) {
		prefetch_row(k, rb);
		att[t] = (float)dot_q8(q8, (const int8_t *)(k + sizeof(float)), hs) *
			 (nf_cpu_kv8_scale(k) * qs);
	}
}

/* out[i, i + 8n) = sum over t of att[t] * vscale[t] * v8[t][i, i + 8n):
 * n registers kept over all positions (no loads and stores of out per
 * position); n is a constant at each call. */
AVX2 __attribute__((always_inline)) static inline void
v_slice(float *out, const float *att, const char *v, size_t np, size_t rb, size_t i, int n)
{
	__m256 acc[8];
	for (int j = 0; j < n; j++)
		acc[j] = _mm256_setzero_ps();
	for (size_t t = 0; t < np; t++, v += rb) {
		prefetch_row(v, rb);
		const int8_t *v8 = (const int8_t *)(v + sizeof(float)) + i;
		__m256 w = _mm256_set1_ps(att[t] * nf_cpu_kv8_scale(v));
		for (int j = 0; j < n; j++) {
			__m128i b = _mm_loadl_epi64((const __m128i *)(v8 + j * 8));
			acc[j] = _mm256_fmadd_ps(w, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), acc[j]);
		}
	}
	for (int j = 0; j < n; j++)
		_mm256_storeu_ps(out + i + (size_t)j * 8, acc[j]);
}

/* out[0, hs) = sum over t of att[t] * vscale[t] * v8[t]: 64 outputs per
 * pass over the rows, then 8, then the tail in plain C. */
AVX2 __attribute__((always_inline)) static inline void
weighted_v_kv8(float *out, const float *att, const char *v, size_t np, size_t hs)
{
	size_t rb = nf_kv_row_bytes(NF_KV_INT8, hs), i = 0;
	for (; i + 64 <= hs; i += 64)
		v_slice(out, att, v, np, rb, i, 8);
	for (; i + 8 <= hs; i += 8)
		v_slice(out, att, v, np, rb, i, 1);
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
