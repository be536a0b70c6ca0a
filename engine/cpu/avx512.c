/*
 * avx512.c - the AVX-512 kernel family ("avx512-vnni"): float32 GEMV/GEMM
 * four output rows at a time with masked tails, and int8 GEMV with VNNI
 * vpdpbusd: activations are flipped to unsigned (x + 128) on the fly and
 * 128 * rowsum(W) is subtracted afterwards.  Needs AVX512F/BW/VL + VNNI.
 */
#include <immintrin.h>

#include "engine/cpu/cpu.h"
#include "util/banned.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma")))

/* int8 rows are short: prefetch this many 4-row blocks ahead. */
#define PF_BLOCKS_Q8 2

static int avx512_available(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

static inline void store(float *out, float v, int accumulate)
{
	*out = accumulate ? *out + v : v;
}

AVX512 static void dot4_f32(float out[4], const float *w, size_t cols, const float *x)
{
	const float *w0 = w, *w1 = w + cols, *w2 = w + 2 * cols, *w3 = w + 3 * cols;
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	__m512 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
	size_t c = 0;
	const char *pf = (const char *)(w + 4 * cols); /* the next 4-row block */
	for (; c + 32 <= cols; c += 32) {
		for (int r = 0; r < 4; r++) {
			_mm_prefetch(pf + (r * cols + c) * 4, _MM_HINT_T0);
			_mm_prefetch(pf + (r * cols + c) * 4 + 64, _MM_HINT_T0);
		}
		__m512 x0 = _mm512_loadu_ps(x + c), x1 = _mm512_loadu_ps(x + c + 16);
		a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + c), x0, a0);
		a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + c), x0, a1);
		a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + c), x0, a2);
		a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + c), x0, a3);
		b0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + c + 16), x1, b0);
		b1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + c + 16), x1, b1);
		b2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + c + 16), x1, b2);
		b3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + c + 16), x1, b3);
	}
	for (; c < cols; c += 16) {
		size_t left = cols - c;
		__mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
		__m512 x0 = _mm512_maskz_loadu_ps(m, x + c);
		a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w0 + c), x0, a0);
		a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w1 + c), x0, a1);
		a2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w2 + c), x0, a2);
		a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w3 + c), x0, a3);
	}
	out[0] = _mm512_reduce_add_ps(_mm512_add_ps(a0, b0));
	out[1] = _mm512_reduce_add_ps(_mm512_add_ps(a1, b1));
	out[2] = _mm512_reduce_add_ps(_mm512_add_ps(a2, b2));
	out[3] = _mm512_reduce_add_ps(_mm512_add_ps(a3, b3));
}

AVX512 static float dot1_f32(const float *w, size_t cols, const float *x)
{
	__m512 a = _mm512_setzero_ps();
	for (size_t c = 0; c < cols; c += 16) {
		size_t left = cols - c;
		__mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
		a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + c), _mm512_maskz_loadu_ps(m, x + c), a);
	}
	return _mm512_reduce_add_ps(a);
}

AVX512 static void avx512_gemm_f32(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
				   size_t ldx, size_t n, int r0, int r1, int accumulate)
{
	size_t cols = (size_t)w->cols;
	int r = r0;
	for (; r + 4 <= r1; r += 4) {
		const float *wr = w->f32 + (size_t)r * cols;
		for (size_t b = 0; b < n; b++) {
			float d[4];
			dot4_f32(d, wr, cols, x + b * ldx);
			float *o = y + b * ldy + (size_t)r;
			for (int i = 0; i < 4; i++)
				store(o + i, d[i], accumulate);
		}
	}
	for (; r < r1; r++)
		for (size_t b = 0; b < n; b++)
			store(y + b * ldy + (size_t)r,
			      dot1_f32(w->f32 + (size_t)r * cols, cols, x + b * ldx), accumulate);
}

/* sum over c of (x[c] + 128) * w[r][c] for 4 rows; x is padded to 64 bytes. */
AVX512 static void dot4_q8(int32_t out[4], const int8_t *w, size_t cols, const int8_t *x)
{
	const int8_t *w0 = w, *w1 = w + cols, *w2 = w + 2 * cols, *w3 = w + 3 * cols;
	const __m512i flip = _mm512_set1_epi8((char)0x80);
	__m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
	__m512i b0 = a0, b1 = a0, b2 = a0, b3 = a0;
	size_t c = 0;
	const char *pf = (const char *)(w + PF_BLOCKS_Q8 * 4 * cols);
	for (; c + 128 <= cols; c += 128) {
		for (int r = 0; r < 4; r++) {
			_mm_prefetch(pf + r * cols + c, _MM_HINT_T0);
			_mm_prefetch(pf + r * cols + c + 64, _MM_HINT_T0);
		}
		__m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(x + c), flip);
		__m512i x1 = _mm512_xor_si512(_mm512_loadu_si512(x + c + 64), flip);
		a0 = _mm512_dpbusd_epi32(a0, x0, _mm512_loadu_si512(w0 + c));
		a1 = _mm512_dpbusd_epi32(a1, x0, _mm512_loadu_si512(w1 + c));
		a2 = _mm512_dpbusd_epi32(a2, x0, _mm512_loadu_si512(w2 + c));
		a3 = _mm512_dpbusd_epi32(a3, x0, _mm512_loadu_si512(w3 + c));
		b0 = _mm512_dpbusd_epi32(b0, x1, _mm512_loadu_si512(w0 + c + 64));
		b1 = _mm512_dpbusd_epi32(b1, x1, _mm512_loadu_si512(w1 + c + 64));
		b2 = _mm512_dpbusd_epi32(b2, x1, _mm512_loadu_si512(w2 + c + 64));
		b3 = _mm512_dpbusd_epi32(b3, x1, _mm512_loadu_si512(w3 + c + 64));
	}
	for (; c < cols; c += 64) {
		size_t left = cols - c;
		__mmask64 m = left >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << left) - 1);
		__m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(x + c), flip);
		a0 = _mm512_dpbusd_epi32(a0, x0, _mm512_maskz_loadu_epi8(m, w0 + c));
		a1 = _mm512_dpbusd_epi32(a1, x0, _mm512_maskz_loadu_epi8(m, w1 + c));
		a2 = _mm512_dpbusd_epi32(a2, x0, _mm512_maskz_loadu_epi8(m, w2 + c));
		a3 = _mm512_dpbusd_epi32(a3, x0, _mm512_maskz_loadu_epi8(m, w3 + c));
	}
	out[0] = _mm512_reduce_add_epi32(_mm512_add_epi32(a0, b0));
	out[1] = _mm512_reduce_add_epi32(_mm512_add_epi32(a1, b1));
	out[2] = _mm512_reduce_add_epi32(_mm512_add_epi32(a2, b2));
	out[3] = _mm512_reduce_add_epi32(_mm512_add_epi32(a3, b3));
}

AVX512 static int32_t dot1_q8(const int8_t *w, size_t cols, const int8_t *x)
{
	const __m512i flip = _mm512_set1_epi8((char)0x80);
	__m512i a = _mm512_setzero_si512();
	for (size_t c = 0; c < cols; c += 64) {
		size_t left = cols - c;
		__mmask64 m = left >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << left) - 1);
		__m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(x + c), flip);
		a = _mm512_dpbusd_epi32(a, x0, _mm512_maskz_loadu_epi8(m, w + c));
	}
	return _mm512_reduce_add_epi32(a);
}

AVX512 static void avx512_gemm_q8(float *y, size_t ldy, const nf_bk_matrix *w, const int8_t *xq,
				  size_t ldx, const float *xs, size_t n, int r0, int r1,
				  int accumulate)
{
	size_t cols = (size_t)w->cols;
	int r = r0;
	for (; r + 4 <= r1; r += 4) {
		const int8_t *wr = w->q8 + (size_t)r * cols;
		for (size_t b = 0; b < n; b++) {
			int32_t d[4];
			dot4_q8(d, wr, cols, xq + b * ldx);
			float *o = y + b * ldy + (size_t)r;
			for (int i = 0; i < 4; i++) {
				int32_t dot = d[i] - 128 * w->rowsum[r + i];
				store(o + i, (float)dot * w->scale[r + i] * xs[b], accumulate);
			}
		}
	}
	for (; r < r1; r++) {
		const int8_t *wr = w->q8 + (size_t)r * cols;
		for (size_t b = 0; b < n; b++) {
			int32_t dot = dot1_q8(wr, cols, xq + b * ldx) - 128 * w->rowsum[r];
			store(y + b * ldy + (size_t)r, (float)dot * w->scale[r] * xs[b], accumulate);
		}
	}
}

AVX512 static void avx512_add(float *y, const float *x, int n)
{
	for (int i = 0; i < n; i += 16) {
		int left = n - i;
		__mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
		__m512 s = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_maskz_loadu_ps(m, x + i));
		_mm512_mask_storeu_ps(y + i, m, s);
	}
}

const nf_backend_ops nf_cpu_avx512_ops = {
	/* .name      = */ "avx512-vnni",
	/* .available = */ avx512_available,
	/* .gemm_f32  = */ avx512_gemm_f32,
	/* .gemm_q8   = */ avx512_gemm_q8,
	/* .rmsnorm   = */ nf_cpu_rmsnorm_ref,
	/* .rope      = */ nf_cpu_rope_ref,
	/* .softmax   = */ nf_cpu_softmax_ref,
	/* .attention = */ nf_cpu_attention_ref,
	/* .swiglu    = */ nf_cpu_swiglu_ref,
	/* .add       = */ avx512_add,
};
