/*
 * test_quant_half.c - fp16 and bf16 weights: the quantizer (nearest value,
 * ties to even, zeros and subnormals, NaN, infinity and overflow refused
 * with the element's index) and gemm_h16 of every kernel family (the
 * scalar one against a double-precision sum, the SIMD ones bit for bit
 * against the scalar one).  Families the CPU lacks are skipped.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu.h"
#include "engine/quant.h"
#include "engine/safetensors.h"
#include "tests/rng.h"
#include "tests/tap.h"
#include "util/error.h"

static const nf_quant_kind kinds[] = {NF_QUANT_F16, NF_QUANT_BF16};

static const char *kind_name(nf_quant_kind kind)
{
	return kind == NF_QUANT_F16 ? "f16" : "bf16";
}

static float widen(uint16_t h, nf_quant_kind kind)
{
	return kind == NF_QUANT_F16 ? nf_f16_to_f32(h) : nf_bf16_to_f32(h);
}

static uint32_t bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

/* Quantize one value; returns the code, or 0xffff when refused. */
static uint16_t quant1(float v, nf_quant_kind kind)
{
	uint16_t h = 0;
	return nf_quant_h16(&h, &v, 1, kind) == 0 ? h : 0xffff;
}

/* Random data: every code is the nearest one (its neighbours are not
 * closer, and on a tie its mantissa is even). */
static void check_nearest(nf_quant_kind kind)
{
	enum { N = 20000 };
	float *w = malloc(sizeof(float) * N);
	uint16_t *h = malloc(sizeof(uint16_t) * N);
	uint64_t seed = 42;
	for (size_t i = 0; i < N; i++) /* magnitudes from 2^-20 to 2^10 */
		w[i] = nf_test_unif(&seed, 1.0) * exp2f((float)(nf_test_rng(&seed) % 31) - 20.0f);
	is_int(nf_quant_h16(h, w, N, kind), 0, "%s: random data quantizes", kind_name(kind));
	size_t bad = 0;
	double worst_rel = 0;
	for (size_t i = 0; i < N; i++) {
		double v = w[i], got = widen(h[i], kind);
		double up = widen((uint16_t)(h[i] + 1), kind), dn = widen((uint16_t)(h[i] - 1), kind);
		double e = fabs(got - v);
		if ((h[i] & 0x7fff) != 0 && fabs(up - v) < e)
			bad++;
		if ((h[i] & 0x7fff) != 0 && fabs(dn - v) < e)
			bad++;
		if ((fabs(up - v) == e || fabs(dn - v) == e) && (h[i] & 1))
			bad++;
		if (fabs(v) >= (kind == NF_QUANT_F16 ? 6.2e-5 : 1.2e-38))
			worst_rel = fmax(worst_rel, e / fabs(v));
	}
	is_int(bad, 0, "%s: every code is the nearest, ties even", kind_name(kind));
	double ulp = kind == NF_QUANT_F16 ? 0x1p-11 : 0x1p-8;
	ok(worst_rel <= ulp, "%s: relative round-trip error %.3g <= %.3g", kind_name(kind),
	   worst_rel, ulp);
	free(w);
	free(h);
}

/* Random bit patterns (every exponent, subnormals, ties) quantized in one
 * call, through the vector path where the CPU has one, equal the scalar
 * conversions of engine/half.c element by element; one to refuse far into
 * a long tensor is named by its own index, the elements before it written. */
static void check_bulk_matches_scalar(nf_quant_kind kind)
{
	enum { N = 40000 };
	float *w = malloc(sizeof(float) * N);
	uint16_t *h = malloc(sizeof(uint16_t) * N);
	uint64_t seed = 9;
	for (size_t i = 0; i < N; i++) {
		uint32_t u = (uint32_t)nf_test_rng(&seed);
		if (i % 4 == 1) /* ties: the bits below the kept mantissa exactly half */
			u = (u & ~0x1fffu) | 0x1000u;
		if (i % 4 == 2)
			u = (u & ~0xffffu) | 0x8000u;
		memcpy(&w[i], &u, sizeof(u));
		uint16_t one = kind == NF_QUANT_F16 ? nf_f32_to_f16(w[i]) : nf_f32_to_bf16(w[i]);
		if ((kind == NF_QUANT_F16 && (one & 0x7c00) == 0x7c00) ||
		    (kind == NF_QUANT_BF16 && (one & 0x7f80) == 0x7f80))
			w[i] = w[i] > 0 ? 1.0f : -0.0f; /* would be refused: keep it out here */
	}
	is_int(nf_quant_h16(h, w, N, kind), 0, "%s: random bit patterns quantize", kind_name(kind));
	size_t differ = 0;
	for (size_t i = 0; i < N; i++)
		differ += h[i] != (kind == NF_QUANT_F16 ? nf_f32_to_f16(w[i]) : nf_f32_to_bf16(w[i]));
	is_int(differ, 0, "%s: in bulk the codes are the element-by-element ones", kind_name(kind));
	memset(h, 0, sizeof(uint16_t) * N);
	w[1003] = kind == NF_QUANT_F16 ? 70000.0f : -INFINITY;
	nf_error_clear();
	is_int(nf_quant_h16(h, w, N, kind), NF_EINPUT, "%s: element 1003 refused in bulk",
	       kind_name(kind));
	ok(strstr(nf_error_last(), "element 1003 ") != NULL, "%s: bulk message names it: %s",
	   kind_name(kind), nf_error_last());
	differ = 0;
	for (size_t i = 0; i < 1003; i++)
		differ += h[i] != (kind == NF_QUANT_F16 ? nf_f32_to_f16(w[i]) : nf_f32_to_bf16(w[i]));
	is_int(differ, 0, "%s: the elements before it are written", kind_name(kind));
	free(w);
	free(h);
}

static void check_hand_picked(void)
{
	/* zeros keep their sign */
	is_int(quant1(0.0f, NF_QUANT_F16), 0x0000, "f16 +0");
	is_int(quant1(-0.0f, NF_QUANT_F16), 0x8000, "f16 -0");
	is_int(quant1(0.0f, NF_QUANT_BF16), 0x0000, "bf16 +0");
	is_int(quant1(-0.0f, NF_QUANT_BF16), 0x8000, "bf16 -0");
	/* ties to even: halfway between 1 and the next value down, then up */
	is_int(quant1(1.0f + 0x1p-11f, NF_QUANT_F16), 0x3c00, "f16 1+2^-11 ties down to 1");
	is_int(quant1(1.0f + 3 * 0x1p-11f, NF_QUANT_F16), 0x3c02, "f16 1+3*2^-11 ties up to even");
	is_int(quant1(-(1.0f + 3 * 0x1p-11f), NF_QUANT_F16), 0xbc02, "f16 tie, negative");
	is_int(quant1(1.0f + 0x1p-11f + 0x1p-20f, NF_QUANT_F16), 0x3c01, "f16 just above a tie rounds up");
	is_int(quant1(1.0f + 0x1p-8f, NF_QUANT_BF16), 0x3f80, "bf16 1+2^-8 ties down to 1");
	is_int(quant1(1.0f + 3 * 0x1p-8f, NF_QUANT_BF16), 0x3f82, "bf16 1+3*2^-8 ties up to even");
	is_int(quant1(-(1.0f + 3 * 0x1p-8f), NF_QUANT_BF16), 0xbf82, "bf16 tie, negative");
	is_int(quant1(1.0f + 0x1p-8f + 0x1p-20f, NF_QUANT_BF16), 0x3f81, "bf16 just above a tie rounds up");
	/* subnormals: f16's smallest is 2^-24; bf16's are float32's */
	is_int(quant1(0x1p-24f, NF_QUANT_F16), 0x0001, "f16 2^-24 is the smallest subnormal");
	is_int(quant1(0x1p-25f, NF_QUANT_F16), 0x0000, "f16 2^-25 ties to zero");
	is_int(quant1(3 * 0x1p-25f, NF_QUANT_F16), 0x0002, "f16 1.5*2^-24 ties to even 2");
	is_int(quant1(0x1p-14f - 0x1p-24f, NF_QUANT_F16), 0x03ff, "f16 largest subnormal");
	ok(nf_f16_to_f32(quant1(1e-6f, NF_QUANT_F16)) == 0x1p-24f * 17, "f16 1e-6 is 17*2^-24");
	is_int(quant1(0x1p-140f, NF_QUANT_BF16), bits(0x1p-140f) >> 16, "bf16 subnormal kept");
	is_int(quant1(0x1p-149f, NF_QUANT_BF16), 0x0000, "bf16 2^-149 ties to zero");
	/* the largest finite values are kept */
	is_int(quant1(65504.0f, NF_QUANT_F16), 0x7bff, "f16 65504 kept");
	is_int(quant1(-65519.0f, NF_QUANT_F16), 0xfbff, "f16 -65519 rounds to -65504");
	is_int(quant1(3.3895313e38f, NF_QUANT_BF16), 0x7f7f, "bf16 largest finite kept");
	is_int(quant1(1e38f, NF_QUANT_BF16), nf_f32_to_bf16(1e38f), "bf16 1e38 kept");
}

/* w[bad] = v among ordinary weights: refused with bad's index in the message. */
static void check_refused(float v, size_t bad, nf_quant_kind kind, const char *what)
{
	float w[8] = {0.5f, -1.0f, 2.0f, 0.25f, 3.0f, -0.125f, 1.5f, 7.0f};
	uint16_t h[8];
	char want[32];
	w[bad] = v;
	nf_error_clear();
	int rc = nf_quant_h16(h, w, 8, kind);
	is_int(rc, NF_EINPUT, "%s %s refused", kind_name(kind), what);
	snprintf(want, sizeof(want), "element %zu ", bad);
	ok(strstr(nf_error_last(), want) != NULL, "%s %s: message names the index: %s",
	   kind_name(kind), what, nf_error_last());
}

static void check_refusals(void)
{
	for (size_t k = 0; k < 2; k++) {
		check_refused(NAN, 3, kinds[k], "NaN");
		check_refused(INFINITY, 0, kinds[k], "+inf");
		check_refused(-INFINITY, 7, kinds[k], "-inf");
	}
	check_refused(65520.0f, 5, NF_QUANT_F16, "65520 (rounds to inf)");
	check_refused(-1e5f, 2, NF_QUANT_F16, "-1e5");
	check_refused(3.4028235e38f, 6, NF_QUANT_BF16, "FLT_MAX (rounds to inf)");
	float one = 1.0f;
	uint16_t h;
	is_int(nf_quant_h16(&h, &one, 1, NF_QUANT_INT8_ROW), NF_EINPUT, "a non-16-bit kind refused");
	is_int(nf_quant_h16(&h, &one, 0, NF_QUANT_F16), 0, "zero elements is fine");
}

/* A gemm problem: rows x cols weights of one kind, n vectors, strides
 * with slack so a kernel that ignores them is caught. */
typedef struct problem {
	nf_quant_kind kind;
	int rows, cols;
	size_t n, ldx, ldy;
	uint16_t *h;
	float *x, *y0;
} problem;

static void problem_init(problem *p, nf_quant_kind kind, int rows, int cols, size_t n, uint64_t seed)
{
	p->kind = kind;
	p->rows = rows;
	p->cols = cols;
	p->n = n;
	p->ldx = (size_t)cols + 5;
	p->ldy = (size_t)rows + 3;
	size_t nw = (size_t)rows * (size_t)cols;
	float *w = malloc(sizeof(float) * nw);
	p->h = malloc(sizeof(uint16_t) * nw);
	p->x = malloc(sizeof(float) * n * p->ldx);
	p->y0 = malloc(sizeof(float) * n * p->ldy);
	for (size_t i = 0; i < nw; i++) /* every third row below 2^-14: f16 subnormals */
		w[i] = nf_test_unif(&seed, 0.5) * (i / (size_t)cols % 3 == 2 ? 0x1p-16f : 1.0f);
	for (size_t i = 0; i < n * p->ldx; i++)
		p->x[i] = nf_test_unif(&seed, 2.0);
	for (size_t i = 0; i < n * p->ldy; i++)
		p->y0[i] = nf_test_unif(&seed, 1.0);
	nf_quant_h16(p->h, w, nw, kind);
	free(w);
}

static void problem_release(problem *p)
{
	free(p->h);
	free(p->x);
	free(p->y0);
}

/* y (a copy of y0) after gemm over rows [r0, r1). */
static float *run_gemm(const nf_backend_ops *ops, const problem *p, int r0, int r1, int accumulate)
{
	float *y = malloc(sizeof(float) * p->n * p->ldy);
	memcpy(y, p->y0, sizeof(float) * p->n * p->ldy);
	nf_bk_matrix m = {.kind = p->kind, .rows = p->rows, .cols = p->cols, .h16 = p->h,
			  .layout = NF_BK_ROWS};
	ops->gemm_h16(y, p->ldy, &m, p->x, p->ldx, p->n, r0, r1, accumulate);
	return y;
}

static const int shapes[][2] = {{1, 1},	   {3, 15},   {8, 16},	 {9, 17},   {13, 31}, {17, 33},
				{24, 100}, {11, 257}, {16, 600}, {5, 2055}, {20, 4100}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* The scalar kernel against a double-precision sum: within a bound on
 * float32 summation error, and rows outside [r0, r1) untouched. */
static void check_scalar_exact_enough(void)
{
	size_t bad = 0, untouched_bad = 0;
	double worst = 0;
	for (size_t k = 0; k < 2; k++)
		for (size_t si = 0; si < NSHAPES; si++) {
			problem p;
			int rows = shapes[si][0], cols = shapes[si][1];
			problem_init(&p, kinds[k], rows, cols, 3, 7 + si);
			int r0 = rows / 4, r1 = rows - rows / 5;
			for (int acc = 0; acc <= 1; acc++) {
				float *y = run_gemm(&nf_cpu_scalar_ops, &p, r0, r1, acc);
				for (size_t b = 0; b < p.n; b++)
					for (int r = 0; r < rows; r++) {
						size_t at = b * p.ldy + (size_t)r;
						if (r < r0 || r >= r1) {
							untouched_bad += bits(y[at]) != bits(p.y0[at]);
							continue;
						}
						double s = acc ? p.y0[at] : 0, mag = fabs(s);
						for (int c = 0; c < cols; c++) {
							double t = (double)widen(p.h[(size_t)r * cols + c], p.kind) *
								   p.x[b * p.ldx + (size_t)c];
							s += t;
							mag += fabs(t);
						}
						/* float32 sums of cols/16 + 5 terms per lane path */
						double bound = mag * 0x1p-24 * ((double)cols / 16 + 6);
						double e = fabs(y[at] - s);
						worst = fmax(worst, e / (mag + 1e-30));
						bad += !(e <= bound);
					}
				free(y);
			}
			problem_release(&p);
		}
	is_int(bad, 0, "scalar gemm_h16 within float32 error of the exact sum (worst %.3g of |terms|)",
	       worst);
	is_int(untouched_bad, 0, "scalar gemm_h16 leaves rows outside [r0, r1) alone");
}

/* Every family bit for bit against the scalar kernel: every shape, n = 1..5
 * and the prefill sizes 8 and 9, both kinds, overwrite and accumulate over
 * a sub-range of rows. */
static const size_t ns[] = {1, 2, 3, 4, 5, 8, 9};
static void check_family(const nf_backend_ops *ops)
{
	if (!ops->gemm_h16) {
		ok(0, "%s has a gemm_h16 kernel", ops->name);
		return;
	}
	for (size_t k = 0; k < 2; k++) {
		size_t cases = 0, differ = 0;
		for (size_t si = 0; si < NSHAPES; si++)
			for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
				size_t n = ns[ni];
				problem p;
				int rows = shapes[si][0], cols = shapes[si][1];
				problem_init(&p, kinds[k], rows, cols, n, 100 * si + n);
				int ranges[2][2] = {{0, rows}, {rows / 3, rows - rows / 4}};
				for (int acc = 0; acc <= 1; acc++) {
					int r0 = ranges[acc][0], r1 = ranges[acc][1];
					float *want = run_gemm(&nf_cpu_scalar_ops, &p, r0, r1, acc);
					float *got = run_gemm(ops, &p, r0, r1, acc);
					size_t bad = 0;
					for (size_t i = 0; i < n * p.ldy; i++)
						bad += bits(got[i]) != bits(want[i]);
					if (bad)
						diag("%s %s %dx%d n=%zu accumulate=%d: %zu outputs differ",
						     ops->name, kind_name(kinds[k]), rows, cols, n, acc, bad);
					differ += bad != 0;
					cases++;
					free(want);
					free(got);
				}
				problem_release(&p);
			}
		is_int(differ, 0, "%s gemm_h16 %s: bit-identical to scalar in %zu cases", ops->name,
		       kind_name(kinds[k]), cases);
	}
}

int main(void)
{
	check_nearest(NF_QUANT_F16);
	check_nearest(NF_QUANT_BF16);
	check_bulk_matches_scalar(NF_QUANT_F16);
	check_bulk_matches_scalar(NF_QUANT_BF16);
	check_hand_picked();
	check_refusals();
	check_scalar_exact_enough();
	const nf_backend_ops *const *fam = nf_cpu_families();
	for (size_t i = 0; fam[i]; i++) {
		if (!fam[i]->available())
			skip("kernel family %s: this CPU lacks its instructions", fam[i]->name);
		else if (fam[i] != &nf_cpu_scalar_ops)
			check_family(fam[i]);
	}
	return done_testing();
}
