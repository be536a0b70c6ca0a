/*
 * quant_half.c - float32 weights to IEEE binary16 (NF_QUANT_F16) or
 * bfloat16 (NF_QUANT_BF16), rounded to nearest even as engine/half.c does.
 * A weight the format cannot hold (NaN, infinity, or a finite value that
 * rounds past the largest half) is refused rather than stored as an
 * infinity that would poison every activation it touches.
 *
 * Where the CPU has AVX2 and F16C, whole blocks of 8 are converted with
 * vector instructions (bit-identical to the scalar conversions for every
 * value that is not refused); the first block holding a weight to refuse,
 * and the tail, go through the scalar loop, which names the element.
 */
#include "engine/quant.h"

#include <immintrin.h>
#include <math.h>

#include "engine/cpu/cpu.h"
#include "engine/safetensors.h"
#include "util/error.h"
#include "util/banned.h"

/* The exponent field all ones: infinity or NaN, in either 16-bit format. */
static int h16_is_special(uint16_t h, nf_quant_kind kind)
{
	if (kind == NF_QUANT_F16)
		return (h & 0x7c00u) == 0x7c00u;
	return (h & 0x7f80u) == 0x7f80u;
}

/* Elements [0, n) of w, element `first` onwards of the tensor (for the
 * message); stops at the first weight to refuse. */
static int quant_h16_scalar(uint16_t *h, const float *w, size_t n, nf_quant_kind kind, size_t first)
{
	const char *name = kind == NF_QUANT_F16 ? "fp16" : "bf16";
	for (size_t i = 0; i < n; i++) {
		uint16_t v = kind == NF_QUANT_F16 ? nf_f32_to_f16(w[i]) : nf_f32_to_bf16(w[i]);
		if (h16_is_special(v, kind)) {
			if (!isfinite(w[i]))
				return nf_error_set(NF_EINPUT, "element %zu is %s", first + i,
						    isnan(w[i]) ? "NaN" : "infinite");
			return nf_error_set(NF_EINPUT, "element %zu (%g) overflows %s (max %g)",
					    first + i, (double)w[i], name,
					    kind == NF_QUANT_F16 ? 65504.0 : 3.3895313892515355e38);
		}
		h[i] = v;
	}
	return 0;
}

#define AVX2 __attribute__((target("avx2,f16c")))

/* 8 floats to bfloat16, ties to even (nf_f32_to_bf16 for a non-NaN);
 * *refuse set to non-zero when one is NaN, infinite or rounds to infinity
 * (|bits| >= 0x7f7f8000, where the tie goes up to the odd code's even
 * neighbour, infinity). */
AVX2 static __m128i bf16x8(__m256 v, int *refuse)
{
	__m256i u = _mm256_castps_si256(v);
	__m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
	*refuse = !_mm256_testz_si256(_mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f7f7fff)),
				      _mm256_set1_epi32(-1));
	__m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
	u = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));
	u = _mm256_srli_epi32(u, 16);
	return _mm_packus_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
}

/* 8 floats to IEEE half, ties to even; *refuse when a result is infinite
 * or NaN (the input was, or overflowed). */
AVX2 static __m128i f16x8(__m256 v, int *refuse)
{
	__m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
	const __m128i exp = _mm_set1_epi16(0x7c00);
	*refuse = _mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(h, exp), exp)) != 0;
	return h;
}

/* Whole blocks of 8 up to the first holding a weight to refuse; returns
 * how many elements it converted. */
AVX2 static size_t quant_h16_avx2(uint16_t *h, const float *w, size_t n, nf_quant_kind kind)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		int refuse;
		__m256 v = _mm256_loadu_ps(w + i);
		__m128i r = kind == NF_QUANT_F16 ? f16x8(v, &refuse) : bf16x8(v, &refuse);
		if (refuse)
			break;
		_mm_storeu_si128((__m128i *)(h + i), r);
	}
	return i;
}

int nf_quant_h16(uint16_t *h, const float *w, size_t n, nf_quant_kind kind)
{
	if (kind != NF_QUANT_F16 && kind != NF_QUANT_BF16)
		return nf_error_set(NF_EINPUT, "quant: kind %d is not a 16-bit float kind", (int)kind);
	size_t done = 0;
	if (nf_cpu_has(NF_CPU_AVX2 | NF_CPU_F16C))
		done = quant_h16_avx2(h, w, n, kind);
	return quant_h16_scalar(h + done, w + done, n - done, kind, done);
}
