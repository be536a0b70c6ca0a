/*
 * test_cuda_emu.cpp - every CUDA kernel of engine/cuda/ run on the CPU
 * through emu.h's model of blocks, warps and shared memory, against the
 * CPU engine: the GEMV and tiled GEMM of every weight format (aligned and
 * ragged columns, int4 groups of 32, 64 and 128) against the dequantised
 * product in double, the embedding gather, RMSNorm, RoPE and SwiGLU (the
 * last two bit for bit), argmax and sampling, the KV-cache append (the
 * CPU's rows byte for byte) and decode (flash-decoding splits) and prefill
 * (causal, grouped-query) attention against nf_cpu_attention_ref.
 * It checks the thread decomposition, not a GPU: `make cuda-emu` runs it.
 */
#include "tests/cuda_emu/emu.h"

#include <cstdio>
#include <cstdlib>

extern "C" {
#include "engine/cpu/cpu.h"
#include "engine/quant.h"
#include "engine/safetensors.h"
#include "tests/rng.h"
#include "tests/tap.h"
}

#include "build/cuda/nf_kernels.cu"

static uint64_t rng = 14;

/* A weight matrix in a format, and its dequantised floats (times the
 * factor its products carry) for the reference. */
struct emu_matrix {
	nf_cu_wmat w;
	std::vector<float> deq;
	std::vector<unsigned char> data, aux; /* what w points into (16-byte aligned by new) */
	std::vector<float> scale;
};

/* n elements of T in buf, for w's pointers. */
template <class T> static T *emu_alloc(std::vector<unsigned char> *buf, size_t n)
{
	buf->assign(n * sizeof(T), 0);
	return (T *)buf->data();
}

static void make_half(emu_matrix *m, const std::vector<float> &f, bool bf16)
{
	uint16_t *d = emu_alloc<uint16_t>(&m->data, f.size());
	for (size_t i = 0; i < f.size(); i++) {
		d[i] = bf16 ? nf_f32_to_bf16(f[i]) : nf_f32_to_f16(f[i]);
		m->deq[i] = bf16 ? nf_bf16_to_f32(d[i]) : nf_f16_to_f32(d[i]);
	}
	m->w.data = d;
}

static void make_q8(emu_matrix *m, const std::vector<float> &f, int rows, int cols)
{
	int8_t *d = emu_alloc<int8_t>(&m->data, f.size());
	m->scale.resize(rows);
	float *s = m->scale.data();
	nf_quant_int8_rows(d, s, f.data(), rows, cols);
	for (size_t i = 0; i < f.size(); i++)
		m->deq[i] = s[i / cols] * d[i];
	m->w.data = d;
	m->w.scale = s;
}

static void make_f8(emu_matrix *m, const std::vector<float> &f, int rows, int cols)
{
	uint8_t *d = emu_alloc<uint8_t>(&m->data, f.size());
	m->scale.resize(rows);
	float *s = m->scale.data();
	nf_quant_fp8_rows(d, s, f.data(), rows, cols);
	m->w.act_scale = 0.5f;
	for (size_t i = 0; i < f.size(); i++)
		m->deq[i] = s[i / cols] * 0.5f * nf_fp8_e4m3_to_f32(d[i]);
	m->w.data = d;
	m->w.scale = s;
}

static void make_q4(emu_matrix *m, const std::vector<float> &f, int rows, int cols, int group)
{
	size_t rb = nf_quant_int4_row_bytes(cols), groups = nf_quant_int4_groups(cols, group);
	uint8_t *d = emu_alloc<uint8_t>(&m->data, rows * rb);
	uint16_t *sm = emu_alloc<uint16_t>(&m->aux, rows * groups * 2);
	nf_quant_int4_rows(d, sm, f.data(), rows, cols, group);
	for (int r = 0; r < rows; r++)
		nf_quant_int4_dequant_row(&m->deq[(size_t)r * cols], d, sm, r, cols, group);
	m->w.data = d;
	m->w.aux = sm;
}

/* A random (rows, cols) matrix in fmt. */
static emu_matrix make_matrix(const char *fmt, int rows, int cols, int group)
{
	emu_matrix m{};
	m.w.rows = rows, m.w.cols = cols, m.w.group = group, m.w.act_scale = 1.0f;
	std::vector<float> f((size_t)rows * cols);
	for (float &x : f)
		x = nf_test_unif(&rng, 1.0);
	m.deq = f;
	if (!strcmp(fmt, "f32"))
		m.w.data = memcpy(emu_alloc<float>(&m.data, f.size()), f.data(), f.size() * sizeof(float));
	else if (!strcmp(fmt, "f16") || !strcmp(fmt, "bf16"))
		make_half(&m, f, fmt[0] == 'b');
	else if (!strcmp(fmt, "q8"))
		make_q8(&m, f, rows, cols);
	else if (!strcmp(fmt, "f8"))
		make_f8(&m, f, rows, cols);
	else
		make_q4(&m, f, rows, cols, group);
	return m;
}

typedef void (*emu_mm_kernel)(float *, size_t, nf_cu_wmat, const float *, size_t, int, int);

/* y = W x for n vectors by kernel k (launched as variant v), against double. */
static void check_product(const char *fmt, emu_mm_kernel k, nf_cu_variant v, int rows, int cols,
			  int n, int group)
{
	emu_matrix m = make_matrix(fmt, rows, cols, group);
	size_t ldx = (size_t)(cols + 3) / 4 * 4 + 4, ldy = (size_t)rows + 3;
	float *x = (float *)aligned_alloc(64, (ldx * n * sizeof(float) + 63) / 64 * 64);
	std::vector<float> y(ldy * n);
	for (size_t i = 0; i < ldx * n; i++)
		x[i] = nf_test_unif(&rng, 1.0);
	nf_cu_launch l = nf_cu_launch_variant(v, rows, n);
	emu_launch(k, l.grid[0], l.grid[1], l.block[0], y.data(), ldy, m.w, (const float *)x, ldx, n, 0);
	double worst = 0;
	for (int b = 0; b < n; b++)
		for (int r = 0; r < rows; r++) {
			double s = 0;
			for (int c = 0; c < cols; c++)
				s += (double)m.deq[(size_t)r * cols + c] * x[b * ldx + c];
			worst = std::max(worst, fabs(s - y[b * ldy + r]));
		}
	ok(worst < 2e-5, "%s %s %dx%d, %d vectors, group %d: within 2e-5 of double (%.2g)",
	   nf_cu_variant_of(v).name, fmt, rows, cols, n, group, worst);
	free(x);
}

static void test_products(void)
{
	const struct {
		const char *fmt;
		emu_mm_kernel gemv, gemm, gemv_sk, gemm_n16, gemv_v32;
	} fmts[] = {
		{"f32", nf_cu_gemv_f32, nf_cu_gemm_f32, nf_cu_gemv_sk_f32, nf_cu_gemm_n16_f32, nf_cu_gemv_v32_f32},
		{"f16", nf_cu_gemv_f16, nf_cu_gemm_f16, nf_cu_gemv_sk_f16, nf_cu_gemm_n16_f16, nf_cu_gemv_v32_f16},
		{"bf16", nf_cu_gemv_bf16, nf_cu_gemm_bf16, nf_cu_gemv_sk_bf16, nf_cu_gemm_n16_bf16,
		 nf_cu_gemv_v32_bf16},
		{"q8", nf_cu_gemv_q8, nf_cu_gemm_q8, nf_cu_gemv_sk_q8, nf_cu_gemm_n16_q8, nf_cu_gemv_v32_q8},
		{"f8", nf_cu_gemv_f8, nf_cu_gemm_f8, nf_cu_gemv_sk_f8, nf_cu_gemm_n16_f8, nf_cu_gemv_v32_f8},
	};
	for (int cols : {96, 200}) { /* whole 16-byte chunks; a ragged, unaligned row */
		for (const auto &f : fmts) {
			check_product(f.fmt, f.gemv, NF_CU_VAR_GEMV, 37, cols, 2, 0);
			check_product(f.fmt, f.gemm, NF_CU_VAR_GEMM, 70, cols, 67, 0);
			/* the tactics' other variants: split-K parts, two 16-token tiles */
			check_product(f.fmt, f.gemv_sk, NF_CU_VAR_GEMV_SK, 37, cols, 2, 0);
			check_product(f.fmt, f.gemm_n16, NF_CU_VAR_GEMM_N16, 70, cols, 19, 0);
			check_product(f.fmt, f.gemv_v32, NF_CU_VAR_GEMV_V32, 37, cols, 2, 0);
		}
		for (int g : {32, 64, 128}) {
			check_product("q4", nf_cu_gemv_q4, NF_CU_VAR_GEMV, 37, cols, 2, g);
			check_product("q4", nf_cu_gemm_q4, NF_CU_VAR_GEMM, 70, cols, 5, g);
		}
		check_product("q4", nf_cu_gemv_sk_q4, NF_CU_VAR_GEMV_SK, 37, cols, 2, 64);
		check_product("q4", nf_cu_gemm_n16_q4, NF_CU_VAR_GEMM_N16, 70, cols, 19, 64);
		check_product("q4", nf_cu_gemv_v32_q4, NF_CU_VAR_GEMV_V32, 37, cols, 2, 64);
	}
}

typedef void (*emu_embed_kernel)(float *, nf_cu_wmat, const int *, int, size_t);

static void check_embed(const char *fmt, emu_embed_kernel k, int group)
{
	enum { ROWS = 20, COLS = 200, N = 3 };
	emu_matrix m = make_matrix(fmt, ROWS, COLS, group);
	int toks[N] = {3, 19, 0};
	float out[N * COLS];
	float unscale = !strcmp(fmt, "f8") ? 2.0f : 1.0f; /* an embedding has no activation scale */
	nf_cu_launch l = nf_cu_launch_embed(N, COLS);
	emu_launch(k, l.grid[0], l.grid[1], l.block[0], out, m.w, (const int *)toks, (int)N, (size_t)COLS);
	bool same = true;
	for (int b = 0; b < N; b++)
		for (int c = 0; c < COLS; c++) {
			float want = m.deq[toks[b] * COLS + c] * unscale;
			same &= fabsf(out[b * COLS + c] - want) <= 1e-7f * fabsf(want);
		}
	ok(same, "embed %s: rows of the table as the CPU dequantises them", fmt);
}

static void test_small_ops(void)
{
	int dim = 300;
	std::vector<float> x(2 * dim), w(dim), o(2 * dim), r(dim);
	for (float &a : x)
		a = nf_test_unif(&rng, 3.0);
	for (float &a : w)
		a = nf_test_unif(&rng, 1.0);
	emu_launch(nf_cu_rmsnorm, 2, 1, NF_CU_BLOCK, o.data(), (const float *)x.data(),
		   (const float *)w.data(), dim, 1e-5f, (size_t)dim);
	double worst = 0;
	for (int b = 0; b < 2; b++) {
		nf_cpu_rmsnorm_ref(r.data(), &x[b * dim], w.data(), dim, 1e-5f);
		for (int i = 0; i < dim; i++)
			worst = std::max(worst, (double)fabsf(r[i] - o[b * dim + i]) / (fabsf(r[i]) + 1e-3));
	}
	ok(worst < 1e-5, "rmsnorm: the CPU's to 1e-5 (the sum of squares in another order: %.2g)", worst);

	int hs = 16, nh = 3;
	std::vector<float> v(2 * nh * hs), cpu, cs(2 * hs);
	for (float &a : v)
		a = nf_test_unif(&rng, 1.0);
	for (float &a : cs)
		a = nf_test_unif(&rng, 1.0);
	cpu = v;
	emu_launch(nf_cu_rope, 2, 1, NF_CU_BLOCK, v.data(), (size_t)(nh * hs), (const float *)cs.data(),
		   nh, hs, (int)NF_KM_ROPE_INTERLEAVED);
	for (int b = 0; b < 2; b++)
		nf_cpu_rope_ref(&cpu[b * nh * hs], nh * hs, hs, &cs[b * hs]);
	ok(!memcmp(v.data(), cpu.data(), v.size() * sizeof(float)), "rope: nf_cpu_rope_ref bit for bit");

	std::vector<float> h1(1000), h3(1000), ref;
	for (float &a : h1)
		a = nf_test_unif(&rng, 4.0);
	for (float &a : h3)
		a = nf_test_unif(&rng, 1.0);
	ref = h1;
	nf_cu_launch l = nf_cu_launch_elementwise(1000);
	emu_launch(nf_cu_swiglu, l.grid[0], 1, l.block[0], h1.data(), (const float *)h3.data(), (size_t)1000);
	nf_cpu_swiglu_ref(ref.data(), h3.data(), 1000);
	ok(!memcmp(h1.data(), ref.data(), 1000 * sizeof(float)), "swiglu: the CPU's bit for bit");
}

static void test_selection(void)
{
	int vocab = 1000;
	std::vector<float> l(2 * vocab);
	for (float &a : l)
		a = nf_test_unif(&rng, 5.0);
	l[777] = 9, l[vocab + 5] = 9, l[vocab + 900] = 9, l[3] = NAN;
	int out[2];
	emu_launch(nf_cu_argmax, 2, 1, NF_CU_BLOCK, out, (const float *)l.data(), vocab, (size_t)vocab);
	ok(out[0] == 777 && out[1] == 5, "argmax: the first largest; a NaN never wins");
	float coins[2] = {0.3f, 0.9f};
	emu_launch(nf_cu_sample, 2, 1, NF_CU_BLOCK, out, (const float *)l.data(), vocab, (size_t)vocab, 1,
		   1.0f, 1.0f, (const float *)coins);
	ok(out[0] == 777 && out[1] == 5, "sample: top-1 is argmax");
	emu_launch(nf_cu_sample, 2, 1, NF_CU_BLOCK, out, (const float *)l.data(), vocab, (size_t)vocab, 2,
		   1.0f, 1.0f, (const float *)coins);
	ok(out[1] == 900, "sample: top-2 of a tie at 0.5 each, coin 0.9 draws the second");
}

/* The cache rows the kernels appended equal the CPU's (f16 halves; int8
 * scale and levels of nf_quant_int8_vec). */
static bool same_rows(const char *c, const std::vector<float> &src, bool int8, int n_kv, int hs,
		      size_t n_pos, size_t stride)
{
	size_t rb = nf_kv_row_bytes(int8 ? NF_KV_INT8 : NF_KV_F16, hs), kvd = (size_t)n_kv * hs;
	bool same = true;
	for (int h = 0; h < n_kv; h++)
		for (size_t p = 0; p < n_pos; p++) {
			const char *row = c + h * stride + p * rb;
			const float *x = &src[p * kvd + h * hs];
			if (int8) {
				int8_t q8[NF_CU_HEAD_MAX];
				float s = nf_quant_int8_vec(q8, x, hs), s2;
				memcpy(&s2, row, sizeof s2);
				same &= s == s2 && !memcmp(q8, row + 4, hs);
			} else {
				for (int i = 0; i < hs; i++)
					same &= ((const uint16_t *)row)[i] == nf_f32_to_f16(x[i]);
			}
		}
	return same;
}

static void check_attention(bool int8, int n_heads, int n_kv, int hs, int pos0, int n)
{
	nf_kv_kind kind = int8 ? NF_KV_INT8 : NF_KV_F16;
	const char *kn = int8 ? "int8" : "f16";
	size_t rb = nf_kv_row_bytes(kind, hs), n_pos = (size_t)pos0 + n, stride = rb * n_pos + 4;
	size_t kvd = (size_t)n_kv * hs, qd = (size_t)n_heads * hs;
	std::vector<char> kc(stride * n_kv), vc(stride * n_kv);
	std::vector<float> k(kvd * n_pos), v(kvd * n_pos), q(qd * n);
	for (float &a : k)
		a = nf_test_unif(&rng, 2.0);
	for (float &a : v)
		a = nf_test_unif(&rng, 1.0);
	for (float &a : q)
		a = nf_test_unif(&rng, 2.0);
	auto append = int8 ? nf_cu_kv_append_int8 : nf_cu_kv_append_f16;
	nf_cu_launch l = nf_cu_launch_kv_append((int)n_pos, n_kv);
	emu_launch(append, l.grid[0], l.grid[1], l.block[0], kc.data(), vc.data(), (const float *)k.data(),
		   (const float *)v.data(), kvd, 0, n_kv, hs, stride);
	ok(same_rows(kc.data(), k, int8, n_kv, hs, n_pos, stride) &&
	   same_rows(vc.data(), v, int8, n_kv, hs, n_pos, stride),
	   "kv append %s, head %d: the CPU's rows byte for byte", kn, hs);

	std::vector<float> out(qd * n), ref(qd), att((size_t)n_heads * n_pos + hs);
	auto prefill = int8 ? nf_cu_attn_prefill_int8 : nf_cu_attn_prefill_f16;
	l = nf_cu_launch_attn_prefill(n, n_heads);
	emu_launch(prefill, l.grid[0], l.grid[1], l.block[0], out.data(), (const float *)q.data(), qd,
		   (const char *)kc.data(), (const char *)vc.data(), pos0, n, n_heads, n_kv, hs, stride);
	double worst = 0;
	for (int b = 0; b < n; b++) {
		nf_cpu_attention_ref(ref.data(), &q[b * qd], kc.data(), vc.data(), kind, pos0 + b, 0,
				     n_heads, n_heads, n_kv, hs, stride, att.data());
		for (size_t i = 0; i < qd; i++)
			worst = std::max(worst, (double)fabsf(ref[i] - out[b * qd + i]));
	}
	ok(worst < 2e-5, "prefill attention %s, heads %d/%d of %d, tokens %d..%d: the CPU's to 2e-5 (%.2g)",
	   kn, n_heads, n_kv, hs, pos0, pos0 + n - 1, worst);

	int pos = (int)n_pos - 1, splits = nf_cu_decode_splits(pos);
	std::vector<float> part_o(qd * splits), part_ml((size_t)n_heads * splits * 2), dec(qd);
	auto decode = int8 ? nf_cu_attn_decode_int8 : nf_cu_attn_decode_f16;
	l = nf_cu_launch_attn_decode(pos, n_heads);
	emu_launch(decode, l.grid[0], l.grid[1], l.block[0], part_o.data(), part_ml.data(),
		   (const float *)&q[(n - 1) * qd], (const char *)kc.data(), (const char *)vc.data(), pos,
		   n_heads, n_kv, hs, stride);
	l = nf_cu_launch_attn_reduce(n_heads);
	emu_launch(nf_cu_attn_decode_reduce, l.grid[0], 1, l.block[0], dec.data(),
		   (const float *)part_o.data(), (const float *)part_ml.data(), n_heads, hs, splits);
	nf_cpu_attention_ref(ref.data(), &q[(n - 1) * qd], kc.data(), vc.data(), kind, pos, 0, n_heads,
			     n_heads, n_kv, hs, stride, att.data());
	worst = 0;
	for (size_t i = 0; i < qd; i++)
		worst = std::max(worst, (double)fabsf(ref[i] - dec[i]));
	ok(worst < 2e-5, "decode attention %s at %d (%d splits): the CPU's to 2e-5 (%.2g)", kn, pos, splits,
	   worst);
}

int main(void)
{
	test_products();
	check_embed("f32", nf_cu_embed_f32, 0);
	check_embed("f16", nf_cu_embed_f16, 0);
	check_embed("q8", nf_cu_embed_q8, 0);
	check_embed("f8", nf_cu_embed_f8, 0);
	check_embed("q4", nf_cu_embed_q4, 64);
	test_small_ops();
	test_selection();
	for (bool int8 : {false, true}) {
		check_attention(int8, 4, 2, 64, 290, 6); /* two decode splits, GQA 2 */
		check_attention(int8, 8, 8, 8, 3, 9);    /* stories260K's heads of 8 */
		check_attention(int8, 9, 3, 64, 0, 5);   /* SmolLM2's 9 / 3, from position 0 */
	}
	return done_testing();
}
