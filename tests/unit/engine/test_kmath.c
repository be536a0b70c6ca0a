/*
 * test_kmath.c - the per-element math the CPU engine and the CUDA kernels
 * share (engine/kmath/): every half, bfloat16 and fp8 code against values
 * computed another way, the nearest-even rounding of each narrowing, int4
 * groups against their packing, int8 against the CPU quantizer, RoPE at
 * known angles and in both pair layouts, RMSNorm and SwiGLU against double
 * precision, online softmax against the two-pass one, and the sampling list
 * against a sort; plus the launch helpers of engine/cuda/launch.h.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/arch.h"
#include "engine/cpu/cpu.h"
#include "engine/cuda/launch.h"
#include "engine/kmath/dequant.h"
#include "engine/kmath/rmsnorm.h"
#include "engine/kmath/rope.h"
#include "engine/kmath/sampling.h"
#include "engine/kmath/softmax.h"
#include "engine/kmath/swiglu.h"
#include "engine/model.h"
#include "engine/quant.h"
#include "tests/rng.h"
#include "tests/tap.h"

static int same_bits(float a, float b) { return nf_km_f32_bits(a) == nf_km_f32_bits(b); }

/* ---- half and bfloat16 ---- */

/* A half's value from its fields, in double: (-1)^s * m * 2^-24 for
 * subnormals, (1024 + m) * 2^(e - 25) for normals. */
static double f16_value(uint16_t h)
{
	int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
	return s ? -v : v;
}

static void test_f16(void)
{
	int bad = 0, round_trip = 1;
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = nf_km_f16_to_f32((uint16_t)h);
		int e = (h >> 10) & 0x1f, m = h & 0x3ff;
		if (e == 0x1f)
			bad += m ? !isnan(f) : !(isinf(f) && (signbit(f) != 0) == (h >> 15));
		else
			bad += !same_bits(f, (float)f16_value((uint16_t)h));
		if (!isnan(f))
			round_trip &= nf_km_f32_to_f16(f) == h;
	}
	is_int(bad, 0, "f16: every one of the 65536 codes widens to its exact value");
	ok(round_trip, "f16: every non-NaN half survives float and back");

	/* narrowing: the nearer neighbour, the even one on a tie */
	uint64_t rng = 14;
	int nearest = 1;
	for (int i = 0; i < 200000; i++) {
		float x = nf_test_unif(&rng, 70000.0) * (i % 2 ? 1.0f : 1e-4f);
		uint16_t h = nf_km_f32_to_f16(x);
		if ((h & 0x7c00) == 0x7c00) { /* overflow: only past the largest half plus half an ulp */
			nearest &= fabsf(x) >= 65520.0f;
			continue;
		}
		double err = fabs((double)x - f16_value(h));
		double up = fabs((double)x - f16_value((uint16_t)(h + 1)));
		double down = (h & 0x7fff) ? fabs((double)x - f16_value((uint16_t)(h - 1))) : INFINITY;
		nearest &= err < up || (err == up && !(h & 1));
		nearest &= err < down || (err == down && !(h & 1));
	}
	ok(nearest, "f16: 200000 random floats narrow to the nearest half, ties to even");
	is_int(nf_km_f32_to_f16(1.0f + 0x1p-11f), 0x3c00, "f16: 1 + half an ulp ties down to even 1.0");
	is_int(nf_km_f32_to_f16(1.0f + 0x1p-11f + 0x1p-10f), 0x3c02,
	       "f16: 1 + 1.5 ulp ties up to the even code");
	is_int(nf_km_f32_to_f16(0x1p-25f), 0, "f16: half the smallest subnormal ties to zero");
	is_int(nf_km_f32_to_f16(65520.0f), 0x7c00, "f16: 65520 rounds to infinity");
	is_int(nf_km_f32_to_f16(NAN) & 0x7e00, 0x7e00, "f16: NaN stays a quiet NaN");
}

static void test_bf16(void)
{
	int bad = 0;
	for (uint32_t h = 0; h < 0x10000; h++)
		bad += nf_km_f32_bits(nf_km_bf16_to_f32((uint16_t)h)) != h << 16;
	is_int(bad, 0, "bf16: every code widens to the float of its bits");
	is_int(nf_km_f32_to_bf16(nf_km_bits_f32(0x3f808000u)), 0x3f80, "bf16: a tie rounds to even (down)");
	is_int(nf_km_f32_to_bf16(nf_km_bits_f32(0x3f818000u)), 0x3f82, "bf16: a tie rounds to even (up)");
	is_int(nf_km_f32_to_bf16(nf_km_bits_f32(0x3f808001u)), 0x3f81, "bf16: past the tie rounds up");
	ok((nf_km_f32_to_bf16(NAN) & 0x7fc0) == 0x7fc0, "bf16: NaN stays a quiet NaN");
}

/* ---- fp8 e4m3 ---- */

static double e4m3_value(uint8_t c)
{
	int s = c >> 7, e = (c >> 3) & 0xf, m = c & 7;
	double v = e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
	return s ? -v : v;
}

static void test_e4m3(void)
{
	int bad = 0, back = 1;
	for (int c = 0; c < 256; c++) {
		float f = nf_km_e4m3_to_f32((uint8_t)c);
		if ((c & 0x7f) == 0x7f) {
			bad += !isnan(f);
			continue;
		}
		bad += !same_bits(f, (float)e4m3_value((uint8_t)c));
		back &= nf_km_e4m3_from_f32(f) == c;
		bad += nf_fp8_e4m3_to_f32((uint8_t)c) != f; /* the CPU's is this one */
	}
	is_int(bad, 0, "e4m3: every one of the 256 codes decodes to its exact value (0x7f, 0xff NaN)");
	ok(back, "e4m3: every code's value encodes back to the code");

	/* the midpoint between two neighbours goes to the even code */
	int ties = 1;
	for (int c = 0; c < 0x7e; c++) {
		double mid = (e4m3_value((uint8_t)c) + e4m3_value((uint8_t)(c + 1))) / 2;
		uint8_t want = (uint8_t)(c % 2 ? c + 1 : c);
		ties &= nf_km_e4m3_from_f32((float)mid) == want;
		ties &= nf_km_e4m3_from_f32(-(float)mid) == (want | 0x80);
	}
	ok(ties, "e4m3: every midpoint between neighbours rounds to the even code, both signs");
	is_int(nf_km_e4m3_from_f32(448.0f), 0x7e, "e4m3: 448 is the largest code");
	is_int(nf_km_e4m3_from_f32(1e9f), 0x7e, "e4m3: beyond 448 saturates");
	is_int(nf_km_e4m3_from_f32(-INFINITY), 0xfe, "e4m3: -inf saturates to -448");
	is_int(nf_km_e4m3_from_f32(-NAN), 0xff, "e4m3: NaN keeps its sign");
	is_int(nf_km_e4m3_from_f32(0x1p-10f), 0, "e4m3: half the smallest subnormal ties to zero");
}

/* ---- int8 and int4 ---- */

static void test_int8(void)
{
	enum { N = 300 };
	float x[N];
	int8_t q[N], mine[N];
	uint64_t rng = 8;
	for (int i = 0; i < N; i++)
		x[i] = nf_test_unif(&rng, 3.0);
	float s = nf_quant_int8_vec(q, x, N);
	float inv = nf_km_q8_inv(s);
	for (int i = 0; i < N; i++)
		mine[i] = nf_km_q8_quantize(x[i], inv);
	ok(memcmp(q, mine, N) == 0, "int8: per-element quantisation equals nf_quant_int8_vec");
	is_int(nf_km_q8_quantize(2.5f, 1.0f), 2, "int8: 2.5 rounds to even 2");
	is_int(nf_km_q8_quantize(-1000.0f, 1.0f), -127, "int8: clamped at -127");
	ok(nf_km_q8_inv(0.0f) == 0.0f, "int8: a zero scale quantises to zeros");
	ok(same_bits(nf_km_q8_dequant(-3, 0.5f), -1.5f), "int8: w = scale * q");
}

static void test_int4_packing(void)
{
	/* two blocks of 32 columns: byte j low nibble = column j, high = j + 16 */
	uint8_t row[32];
	for (int j = 0; j < 32; j++)
		row[j] = (uint8_t)((j % 16) | ((15 - j % 16) << 4));
	int ok_map = 1;
	for (int c = 0; c < 64; c++) {
		int in_block = c % 32;
		unsigned want = in_block < 16 ? (unsigned)in_block : (unsigned)(15 - (in_block - 16));
		ok_map &= nf_km_q4_level(row, (size_t)c) == want;
	}
	ok(ok_map, "int4: column j of a block is byte j's low nibble, column j + 16 its high one");
	is_int(nf_km_q4_byte(33), 17, "int4: column 33 is in byte 17");
	is_int(nf_km_q4_shift(48), 4, "int4: column 48 is a high nibble");
	ok(same_bits(nf_km_q4_dequant(15, 0.25f, -2.0f), 1.75f), "int4: w = scale * q + min");
}

/* Dequantise a quantised matrix element by element as the GPU kernels
 * index it, against the CPU's row dequantiser. */
static void test_int4_groups(void)
{
	enum { ROWS = 3, COLS = 200 };
	static float w[ROWS * COLS], row_cpu[COLS];
	static uint8_t q4[ROWS * 112];
	static uint16_t gsm[ROWS * 7 * 2];
	uint64_t rng = 4;
	for (int i = 0; i < ROWS * COLS; i++)
		w[i] = nf_test_unif(&rng, 1.0);
	const int groups_of[] = {32, 64, 128};
	for (int gi = 0; gi < 3; gi++) {
		int group = groups_of[gi], same = 1;
		if (nf_quant_int4_rows(q4, gsm, w, ROWS, COLS, group) < 0) {
			ok(0, "int4 group %d: quantise", group);
			continue;
		}
		size_t groups = nf_quant_int4_groups(COLS, group), rb = nf_quant_int4_row_bytes(COLS);
		for (int r = 0; r < ROWS; r++) {
			nf_quant_int4_dequant_row(row_cpu, q4, gsm, (size_t)r, COLS, group);
			for (int c = 0; c < COLS; c++) {
				const uint16_t *sm = gsm + ((size_t)r * groups + (size_t)(c / group)) * 2;
				float v = nf_km_q4_dequant(nf_km_q4_level(q4 + r * rb, (size_t)c),
							   nf_km_f16_to_f32(sm[0]), nf_km_f16_to_f32(sm[1]));
				same &= same_bits(v, row_cpu[c]);
			}
		}
		ok(same, "int4 group %d: every element, indexed as the kernels do, equals the CPU's", group);
	}
}

/* ---- RoPE ---- */

static void test_rope_freq(void)
{
	nf_model_config c;
	memset(&c, 0, sizeof c);
	c.dim = 256;
	c.n_heads = 4; /* head_size 64 */
	c.rope_theta = 500000.0f;
	c.rope_scaling.type = NF_ROPE_LLAMA3;
	c.rope_scaling.factor = 8.0f;
	c.rope_scaling.low_freq_factor = 1.0f;
	c.rope_scaling.high_freq_factor = 4.0f;
	c.rope_scaling.original_max_pos = 8192;
	float inv[32];
	nf_arch_rope_inv_freq(inv, &c);
	ok(inv[0] == 1.0f, "rope: pair 0's frequency is 1 (short wavelength, kept)");
	float raw = 1.0f / powf(500000.0f, 62.0f / 64.0f); /* wavelength ~ 2.1e6 > 8192 */
	ok(same_bits(inv[31], raw / 8.0f), "rope: the longest wavelength is stretched by the factor");
	/* between: wavelength 2 pi / inv with 2048 < wl < 8192 is interpolated */
	int between = 0, inside = 1;
	for (int j = 0; j < 32; j++) {
		float r = nf_km_rope_inv_freq(j, 64, 500000.0f);
		double wl = 2 * 3.14159265358979 / r;
		if (wl > 2048 && wl < 8192) {
			between++;
			inside &= inv[j] < r && inv[j] > r / 8.0f;
		}
	}
	ok(between > 0 && inside, "rope: %d medium wavelengths lie strictly between kept and stretched",
	   between);
	c.rope_scaling.type = NF_ROPE_DEFAULT;
	nf_arch_rope_inv_freq(inv, &c);
	ok(same_bits(inv[5], 1.0f / powf(500000.0f, 10.0f / 64.0f)), "rope: unscaled theta^(-2j/hs)");
	ok(same_bits(nf_km_rope_angle(7, 0.5f), 3.5f), "rope: the angle is position * frequency");
}

static void test_rope_rotate(void)
{
	float a = 1.0f, b = 0.0f;
	nf_km_rope_rotate(&a, &b, 0.0f, 1.0f);
	ok(a == 0.0f && b == 1.0f, "rope: (1, 0) turned a quarter is (0, 1)");
	a = 3.0f, b = 4.0f;
	nf_km_rope_rotate(&a, &b, -1.0f, 0.0f);
	ok(a == -3.0f && b == -4.0f, "rope: a half turn negates the pair");
	a = 1.0f, b = 2.0f;
	float c = cosf(0.3f), s = sinf(0.3f);
	nf_km_rope_rotate(&a, &b, c, s);
	ok(fabsf(a - (c - 2 * s)) < 1e-6f && fabsf(b - (s + 2 * c)) < 1e-6f,
	   "rope: (1, 2) at 0.3 rad is (cos - 2 sin, sin + 2 cos)");

	/* the same head in the two layouts: interleaved (2j, 2j+1) and rotate-half
	 * (j, j + hs/2) rotate to the same pairs */
	enum { HS = 16 };
	float inter[HS], halves[HS], cs[HS];
	uint64_t rng = 2;
	for (int j = 0; j < HS / 2; j++) {
		float x = nf_test_unif(&rng, 1.0), y = nf_test_unif(&rng, 1.0);
		inter[2 * j] = halves[j] = x;
		inter[2 * j + 1] = halves[j + HS / 2] = y;
		float ang = nf_km_rope_angle(9, nf_km_rope_inv_freq(j, HS, 10000.0f));
		cs[2 * j] = cosf(ang);
		cs[2 * j + 1] = sinf(ang);
	}
	float cpu[HS];
	memcpy(cpu, inter, sizeof cpu);
	nf_cpu_rope_ref(cpu, HS, HS, cs);
	int same = 1;
	for (int j = 0; j < HS / 2; j++) {
		int i0, i1, k0, k1;
		nf_km_rope_pair(&i0, &i1, NF_KM_ROPE_INTERLEAVED, j, HS);
		nf_km_rope_pair(&k0, &k1, NF_KM_ROPE_HALVES, j, HS);
		nf_km_rope_rotate(&inter[i0], &inter[i1], cs[2 * j], cs[2 * j + 1]);
		nf_km_rope_rotate(&halves[k0], &halves[k1], cs[2 * j], cs[2 * j + 1]);
		same &= k0 == j && k1 == j + HS / 2 && i0 == 2 * j && i1 == 2 * j + 1;
		same &= same_bits(inter[2 * j], halves[j]) && same_bits(inter[2 * j + 1], halves[j + HS / 2]);
		same &= same_bits(inter[2 * j], cpu[2 * j]) && same_bits(inter[2 * j + 1], cpu[2 * j + 1]);
	}
	ok(same, "rope: interleaved and rotate-half pairs rotate alike, as the CPU's rope does");
}

/* ---- RMSNorm, SwiGLU ---- */

static void test_rmsnorm_swiglu(void)
{
	enum { N = 96 };
	float x[N], w[N], out[N];
	uint64_t rng = 6;
	double ss = 0;
	for (int i = 0; i < N; i++) {
		x[i] = nf_test_unif(&rng, 4.0);
		w[i] = nf_test_unif(&rng, 2.0);
		ss += (double)x[i] * x[i];
	}
	double inv = 1.0 / sqrt(ss / N + 1e-5);
	float sum_sq = 0.0f;
	for (int i = 0; i < N; i++)
		sum_sq += x[i] * x[i];
	float kinv = nf_km_rms_inv(sum_sq, N, 1e-5f);
	int close = fabs(kinv - inv) < 1e-6 * inv;
	nf_cpu_rmsnorm_ref(out, x, w, N, 1e-5f);
	int same = 1;
	for (int i = 0; i < N; i++) {
		float v = nf_km_rms_apply(x[i], w[i], kinv);
		close &= fabs(v - w[i] * x[i] * inv) < 1e-5 * (fabs(w[i] * x[i] * inv) + 1e-6);
		same &= same_bits(v, out[i]);
	}
	ok(close, "rmsnorm: within 1e-6 of the double-precision normalisation");
	ok(same, "rmsnorm: the CPU's nf_cpu_rmsnorm_ref gives the same bits");
	ok(same_bits(nf_km_rms_inv(12.0f, 3, 0.0f), 0.5f), "rmsnorm: 1/sqrt(12/3) is 0.5");

	int sw = nf_km_swiglu(0.0f, 5.0f) == 0.0f;
	for (int i = -8; i <= 8; i++) {
		double g = i * 0.75, want = g / (1 + exp(-g)) * 1.5;
		sw &= fabs(nf_km_swiglu((float)g, 1.5f) - want) < 1e-6 * (fabs(want) + 1);
	}
	ok(sw, "swiglu: silu(g) * u within 1e-6 of double precision, 0 at 0");
}

/* ---- online softmax ---- */

/* The weighted sum sum_i softmax(x)_i * v_i of a row, online over splits of
 * `split` positions merged as flash-decoding does, against the two-pass
 * softmax of the CPU. */
static double online_error(const float *x, const float *v, int n, int split)
{
	float p[512];
	memcpy(p, x, (size_t)n * sizeof(float));
	nf_cpu_softmax_ref(p, n);
	double want = 0;
	for (int i = 0; i < n; i++)
		want += (double)p[i] * v[i];
	nf_km_softmax total = nf_km_softmax_empty();
	float sum = 0.0f;
	for (int s0 = 0; s0 < n; s0 += split) {
		nf_km_softmax part = nf_km_softmax_empty();
		float o = 0.0f, old_w, x_w, wa, wb;
		for (int i = s0; i < n && i < s0 + split; i++) {
			nf_km_softmax_push(&part, x[i], &old_w, &x_w);
			o = o * old_w + x_w * v[i];
		}
		total = nf_km_softmax_merge(total, part, &wa, &wb);
		sum = sum * wa + o * wb;
	}
	return fabs(sum * nf_km_softmax_norm(total) - want);
}

static void test_softmax(void)
{
	float x[512], v[512];
	uint64_t rng = 5;
	double worst = 0;
	for (int row = 0; row < 60; row++) {
		int n = 1 + (int)(nf_test_rng(&rng) % 500);
		float spread = row % 3 == 0 ? 80.0f : 8.0f; /* wide rows: most weights underflow */
		for (int i = 0; i < n; i++) {
			x[i] = nf_test_unif(&rng, spread);
			v[i] = nf_test_unif(&rng, 1.0);
		}
		int split = 1 + (int)(nf_test_rng(&rng) % 300);
		double e = online_error(x, v, n, split);
		worst = e > worst ? e : worst;
	}
	ok(worst < 2e-6, "softmax: online over random splits, merged, is the two-pass result (worst %.2g)",
	   worst);

	nf_km_softmax a = nf_km_softmax_empty(), b = {2.0f, 3.0f};
	float wa, wb;
	nf_km_softmax m = nf_km_softmax_merge(a, b, &wa, &wb);
	ok(wa == 0.0f && wb == 1.0f && m.m == 2.0f && m.l == 3.0f,
	   "softmax: merging an empty split changes nothing (no NaN from -inf - -inf)");
	m = nf_km_softmax_merge(a, a, &wa, &wb);
	ok(wa == 0.0f && wb == 0.0f && nf_km_softmax_norm(m) == 0.0f, "softmax: two empty splits stay empty");
	nf_km_softmax c = {0.0f, 1.0f}, d = {(float)log(3.0), 1.0f};
	m = nf_km_softmax_merge(c, d, &wa, &wb);
	ok(fabsf(wa - 1.0f / 3.0f) < 1e-7f && wb == 1.0f && fabsf(m.l - 4.0f / 3.0f) < 1e-6f,
	   "softmax: states (0, 1) and (ln 3, 1) merge to (ln 3, 4/3), the first scaled by 1/3");
}

/* ---- sampling ---- */

typedef struct cand {
	float v;
	int i;
} cand;

static int cand_cmp(const void *a, const void *b)
{
	const cand *x = a, *y = b;
	if (x->v != y->v)
		return x->v > y->v ? -1 : 1;
	return x->i - y->i;
}

static void test_sampling(void)
{
	enum { N = 1000, K = 40 };
	static cand all[N];
	float val[K];
	int idx[K], n = 0;
	uint64_t rng = 7;
	for (int i = 0; i < N; i++) {
		all[i].v = (float)(int)(nf_test_unif(&rng, 50.0)); /* many ties */
		all[i].i = i;
		nf_km_topk_insert(val, idx, &n, K, all[i].v, i);
	}
	nf_km_topk_insert(val, idx, &n, K, NAN, N);
	qsort(all, N, sizeof all[0], cand_cmp);
	int same = n == K;
	for (int j = 0; j < K && same; j++)
		same &= val[j] == all[j].v && idx[j] == all[j].i;
	ok(same, "topk: the list kept equals the first %d of a sort (ties: lower token), NaN never kept", K);

	float p[4] = {0.5f, 0.3f, 0.15f, 0.05f}, mass;
	is_int(nf_km_sample_topp_last(p, 4, 0.7f, &mass), 1, "topp 0.7 keeps two (0.8 passes 0.7)");
	ok(fabsf(mass - 0.8f) < 1e-7f, "topp: the mass kept is 0.8");
	is_int(nf_km_sample_topp_last(p, 4, 1.0f, &mass), 3, "topp 1 keeps all");
	is_int(nf_km_sample_pick(p, 1, 0.8f, 0.0f), 0, "pick: coin 0 draws the first");
	is_int(nf_km_sample_pick(p, 1, 0.8f, 0.7f), 1, "pick: coin 0.7 of 0.8 passes 0.5: the second");
	is_int(nf_km_sample_pick(p, 1, 0.8f, 0.9999f), 1, "pick: never past the cut");

	float logits[3] = {2.0f, 1.0f, 0.0f};
	nf_km_sample_softmax(logits, 3, 1.0f);
	double z = 1 + exp(-1.0) + exp(-2.0);
	ok(fabs(logits[0] - 1 / z) < 1e-6 && fabs(logits[2] - exp(-2.0) / z) < 1e-6,
	   "sample softmax: e^(v - v0) / sum at temperature 1");
}

/* ---- the launch contract ---- */

static void test_launch(void)
{
	ok(nf_cu_head_size_ok(8) && nf_cu_head_size_ok(64) && nf_cu_head_size_ok(128) &&
	   !nf_cu_head_size_ok(256) && !nf_cu_head_size_ok(7) && !nf_cu_head_size_ok(0),
	   "attention takes even heads up to 128 (stories260K's 8, SmolLM2's 64, Llama's 128)");
	is_int(nf_cu_decode_splits(255), 1, "decode: 256 positions are one split");
	is_int(nf_cu_decode_splits(256), 2, "decode: 257 positions are two");
	nf_cu_launch l = nf_cu_launch_gemv(4097, 3);
	ok(l.grid[0] == 1025 && l.grid[1] == 3 && l.block[0] == 128,
	   "gemv: a warp per row, 4 rows a block, a grid row per vector");
	l = nf_cu_launch_attn_prefill(9, 12);
	ok(l.grid[0] == 3 && l.grid[1] == 12, "prefill attention: four tokens a block, a grid row per head");
	l = nf_cu_launch_gemm(100, 65);
	ok(l.grid[0] == 2 && l.grid[1] == 2 && l.block[0] == NF_CU_BLOCK, "gemm: 64 x 64 tiles");
}

int main(void)
{
	test_f16();
	test_bf16();
	test_e4m3();
	test_int8();
	test_int4_packing();
	test_int4_groups();
	test_rope_freq();
	test_rope_rotate();
	test_rmsnorm_swiglu();
	test_softmax();
	test_sampling();
	test_launch();
	return done_testing();
}
