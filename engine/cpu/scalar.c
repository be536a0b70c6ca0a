/*
 * scalar.c - the portable kernel family: plain C float32 and int8 kernels.
 * Its small ops (rmsnorm, rope, softmax, attention, swiglu) are also the
 * ones the SIMD families reuse, and the conformance tests' reference; their
 * per-element math is engine/kmath/'s, which the CUDA kernels share.
 */
#include <math.h>
#include <string.h>

#include "engine/cpu/cpu.h"
#include "engine/kmath/rmsnorm.h"
#include "engine/kmath/rope.h"
#include "engine/kmath/swiglu.h"
#include "engine/layout.h"
#include "engine/quant.h"
#include "engine/safetensors.h"
#include "util/banned.h"

static int scalar_available(void) { return 1; }

static void scalar_gemm_f32(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
			    size_t ldx, size_t n, int r0, int r1, int accumulate)
{
	size_t cols = (size_t)w->cols, ch = nf_bk_chunk(w), cs = nf_bk_chunk_stride(w);
	for (int r = r0; r < r1; r++) {
		const float *row = w->f32 + nf_bk_index(w, (size_t)r, 0);
		for (size_t b = 0; b < n; b++) {
			const float *xb = x + b * ldx;
			float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
			size_t c = 0;
			/* a chunk is 16 floats: groups of 4 never straddle two */
			for (; c + 4 <= cols; c += 4) {
				const float *wc = row + c / ch * cs + c % ch;
				s0 += wc[0] * xb[c];
				s1 += wc[1] * xb[c + 1];
				s2 += wc[2] * xb[c + 2];
				s3 += wc[3] * xb[c + 3];
			}
			for (; c < cols; c++)
				s0 += row[c / ch * cs + c % ch] * xb[c];
			float s = (s0 + s1) + (s2 + s3);
			float *out = y + b * ldy + (size_t)r;
			*out = accumulate ? *out + s : s;
		}
	}
}

static void scalar_gemm_q8(float *y, size_t ldy, const nf_bk_matrix *w, const int8_t *xq,
			   size_t ldx, const float *xs, size_t n, int r0, int r1, int accumulate)
{
	size_t cols = (size_t)w->cols, ch = nf_bk_chunk(w), cs = nf_bk_chunk_stride(w);
	for (int r = r0; r < r1; r++) {
		const int8_t *row = w->q8 + nf_bk_index(w, (size_t)r, 0);
		for (size_t b = 0; b < n; b++) {
			const int8_t *xb = xq + b * ldx;
			int32_t acc = 0;
			for (size_t c = 0; c < cols; c++)
				acc += (int32_t)row[c / ch * cs + c % ch] * (int32_t)xb[c];
			float s = (float)acc * w->scale[r] * xs[b];
			float *out = y + b * ldy + (size_t)r;
			*out = accumulate ? *out + s : s;
		}
	}
}

void nf_cpu_rmsnorm_ref(float *out, const float *x, const float *w, int n, float eps)
{
	float ss = 0.0f;
	for (int i = 0; i < n; i++)
		ss += x[i] * x[i];
	float inv = nf_km_rms_inv(ss, n, eps);
	for (int i = 0; i < n; i++)
		out[i] = nf_km_rms_apply(x[i], w[i], inv);
}

void nf_cpu_rope_ref(float *v, int n, int head_size, const float *cs)
{
	for (int i = 0; i < n; i += 2) {
		int j = (i % head_size) / 2;
		nf_km_rope_rotate(&v[i], &v[i + 1], cs[2 * j], cs[2 * j + 1]);
	}
}

void nf_cpu_softmax_ref(float *x, int n)
{
	float m = x[0];
	for (int i = 1; i < n; i++)
		if (x[i] > m)
			m = x[i];
	float sum = 0.0f;
	for (int i = 0; i < n; i++) {
		x[i] = expf(x[i] - m);
		sum += x[i];
	}
	float inv = 1.0f / sum;
	for (int i = 0; i < n; i++)
		x[i] *= inv;
}

float nf_cpu_kv_at(const void *c, size_t i, int f16)
{
	return f16 ? nf_f16_to_f32(((const uint16_t *)c)[i]) : ((const float *)c)[i];
}

float nf_cpu_kv8_scale(const void *row)
{
	float s;
	memcpy(&s, row, sizeof s); /* 4-aligned only when head_size is */
	return s;
}

/* Over an int8 cache (backend.h): q quantized per head once, each score an
 * exact integer dot product times the two scales; V rows widened and
 * weighted by att[t] * their scale. */
static void attention_int8_ref(float *out, const float *q, const void *kc, const void *vc,
			       int pos, int h0, int h1, int n_heads, int n_kv_heads, int head_size,
			       size_t head_stride, float *att)
{
	int group = n_heads / n_kv_heads;
	size_t hs = (size_t)head_size, rb = nf_kv_row_bytes(NF_KV_INT8, hs), np = (size_t)pos + 1;
	int8_t *q8 = (int8_t *)(att + (size_t)(h1 - h0) * np); /* the scratch's head_size floats */
	float scale = 1.0f / sqrtf((float)head_size);
	for (int h = h0; h < h1; h++) {
		float qs = nf_quant_int8_vec(q8, q + (size_t)h * hs, hs) * scale;
		const char *k = (const char *)kc + (size_t)(h / group) * head_stride;
		for (size_t t = 0; t < np; t++, k += rb) {
			const int8_t *k8 = (const int8_t *)(k + sizeof(float));
			int32_t dot = 0;
			for (size_t i = 0; i < hs; i++)
				dot += (int32_t)q8[i] * (int32_t)k8[i];
			att[t] = (float)dot * (nf_cpu_kv8_scale(k) * qs);
		}
		nf_cpu_softmax_ref(att, (int)np);
		float *oh = out + (size_t)h * hs;
		for (size_t i = 0; i < hs; i++)
			oh[i] = 0.0f;
		const char *v = (const char *)vc + (size_t)(h / group) * head_stride;
		for (size_t t = 0; t < np; t++, v += rb) {
			const int8_t *v8 = (const int8_t *)(v + sizeof(float));
			float a = att[t] * nf_cpu_kv8_scale(v);
			for (size_t i = 0; i < hs; i++)
				oh[i] += a * (float)v8[i];
		}
	}
}

void nf_cpu_attention_ref(float *out, const float *q, const void *kc, const void *vc,
			  nf_kv_kind kind, int pos, int h0, int h1, int n_heads, int n_kv_heads,
			  int head_size, size_t head_stride, float *att)
{
	if (kind == NF_KV_INT8) {
		attention_int8_ref(out, q, kc, vc, pos, h0, h1, n_heads, n_kv_heads, head_size,
				   head_stride, att);
		return;
	}
	int group = n_heads / n_kv_heads, f16 = kind == NF_KV_F16;
	float scale = 1.0f / sqrtf((float)head_size);
	size_t hs = (size_t)head_size, rb = nf_kv_row_bytes(kind, hs);
	for (int h = h0; h < h1; h++) {
		const float *qh = q + (size_t)h * hs;
		const char *k = (const char *)kc + (size_t)(h / group) * head_stride;
		for (int t = 0; t <= pos; t++, k += rb) {
			float s = 0.0f;
			for (size_t i = 0; i < hs; i++)
				s += qh[i] * nf_cpu_kv_at(k, i, f16);
			att[t] = s * scale;
		}
		nf_cpu_softmax_ref(att, pos + 1);
		float *oh = out + (size_t)h * hs;
		for (size_t i = 0; i < hs; i++)
			oh[i] = 0.0f;
		const char *v = (const char *)vc + (size_t)(h / group) * head_stride;
		for (int t = 0; t <= pos; t++, v += rb) {
			float a = att[t];
			for (size_t i = 0; i < hs; i++)
				oh[i] += a * nf_cpu_kv_at(v, i, f16);
		}
	}
}

void nf_cpu_to_f16_ref(uint16_t *h, const float *x, int n)
{
	for (int i = 0; i < n; i++)
		h[i] = nf_f32_to_f16(x[i]);
}

void nf_cpu_swiglu_ref(float *h1, const float *h3, int n)
{
	for (int i = 0; i < n; i++)
		h1[i] = nf_km_swiglu(h1[i], h3[i]);
}

static void scalar_add(float *y, const float *x, int n)
{
	for (int i = 0; i < n; i++)
		y[i] += x[i];
}

const nf_backend_ops nf_cpu_scalar_ops = {
	.name = "scalar",
	.available = scalar_available,
	.gemm_f32 = scalar_gemm_f32,
	.gemm_q8 = scalar_gemm_q8,
	.gemm_h16 = nf_cpu_gemm_h16_scalar,
	.gemm_f8 = nf_cpu_gemm_f8_scalar,
	.round_f8 = nf_cpu_round_f8_scalar,
	.gemm_q4 = nf_cpu_gemm_q4_scalar,
	.rmsnorm = nf_cpu_rmsnorm_ref,
	.rope = nf_cpu_rope_ref,
	.softmax = nf_cpu_softmax_ref,
	.attention = nf_cpu_attention_ref,
	.swiglu = nf_cpu_swiglu_ref,
	.add = scalar_add,
	.quantize_q8 = NULL,
	.to_f16 = nf_cpu_to_f16_ref,
};
