/*
 * test_quant_fp8.c - the fp8 e4m3 format (engine/quant_fp8.c) against an
 * independent reference written here from the OCP definition (values by
 * ldexp, nearest by search over all codes), the weight quantizer's error
 * bound and refusals, and the kernels of every family: round_f8 against the
 * scalar one bit for bit; gemm_f8 within its error bound of the exact sums
 * (and the bound shown to catch a dropped column or a wrong sign), bit for
 * bit with the scalar kernel where a path keeps its order, and every code
 * and rows of zeros and of +-448 against their exact values.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu.h"
#include "engine/quant.h"
#include "tests/rng.h"
#include "tests/tap.h"
#include "util/error.h"

static uint32_t bits_of(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof u);
	return u;
}

static float float_of(uint32_t u)
{
	float x;
	memcpy(&x, &u, sizeof x);
	return x;
}

/* The value of a code by the definition: (-1)^s * 2^(e-7) * (1 + m/8), or
 * 2^-6 * m/8 when e = 0; NaN for S.1111.111. */
static double ref_value(int code)
{
	int s = code >> 7, e = code >> 3 & 15, m = code & 7;
	if (e == 15 && m == 7)
		return NAN;
	double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
	return s ? -v : v;
}

/* The nearest code to x by search over the 127 finite magnitudes, ties to
 * the even code, saturating at 448. */
static int ref_encode(float x)
{
	if (isnan(x))
		return signbit(x) ? 0xff : 0x7f;
	double a = fabs((double)x);
	int best = 0;
	for (int c = 1; c <= 0x7e; c++) {
		double d = fabs(ref_value(c) - a), db = fabs(ref_value(best) - a);
		if (d < db || (d == db && c % 2 == 0))
			best = c;
	}
	return (signbit(x) ? 0x80 : 0) | best;
}

static void test_decode(void)
{
	int bad = 0, nan_ok = 1;
	for (int c = 0; c < 256; c++) {
		float got = nf_fp8_e4m3_to_f32((uint8_t)c);
		double want = ref_value(c);
		if (isnan(want))
			nan_ok &= isnan(got) && !!signbit(got) == (c >> 7);
		else if ((double)got != want || !!signbit(got) != (c >> 7))
			bad++;
	}
	is_int(bad, 0, "decode: the 254 finite codes give their defined values and signs");
	ok(nan_ok, "decode: 0x7f and 0xff are NaN with their sign");
	ok(nf_fp8_e4m3_to_f32(0x7e) == 448.0f && nf_fp8_e4m3_to_f32(0x01) == ldexpf(1, -9) &&
		   nf_fp8_e4m3_to_f32(0x08) == ldexpf(1, -6) && nf_fp8_e4m3_to_f32(0x07) == 7 * ldexpf(1, -9),
	   "decode: 448, the smallest subnormal, the smallest normal, the largest subnormal");
}

static void test_encode_codes(void)
{
	int bad = 0;
	for (int c = 0; c < 256; c++)
		if (c != 0x7f && c != 0xff && nf_fp8_e4m3_from_f32(nf_fp8_e4m3_to_f32((uint8_t)c)) != c)
			bad++;
	is_int(bad, 0, "encode: every finite code's value gives that code (both zeros included)");
	is_int(nf_fp8_e4m3_from_f32(NAN), 0x7f, "encode: NaN gives 0x7f");
	is_int(nf_fp8_e4m3_from_f32(-NAN), 0xff, "encode: -NaN gives 0xff");
}

/* Midpoints between neighbours go to the even code; a float either side
 * of a midpoint goes to that side's code. */
static void test_ties(void)
{
	int bad_tie = 0, bad_side = 0;
	for (int c = 0; c < 0x7e; c++) {
		for (int s = 0; s < 2; s++) {
			int sign = s ? 0x80 : 0;
			float lo = nf_fp8_e4m3_to_f32((uint8_t)(sign | c));
			float hi = nf_fp8_e4m3_to_f32((uint8_t)(sign | (c + 1)));
			float mid = (float)(((double)lo + (double)hi) / 2); /* exact: few bits */
			int even = sign | (c % 2 == 0 ? c : c + 1);
			bad_tie += nf_fp8_e4m3_from_f32(mid) != even;
			float toward_lo = nextafterf(mid, lo), toward_hi = nextafterf(mid, hi);
			bad_side += nf_fp8_e4m3_from_f32(toward_lo) != (sign | c);
			bad_side += nf_fp8_e4m3_from_f32(toward_hi) != (sign | (c + 1));
		}
	}
	is_int(bad_tie, 0, "ties: all 252 midpoints between neighbours go to the even code");
	is_int(bad_side, 0, "ties: one float below or above each midpoint goes to its side");
	is_int(nf_fp8_e4m3_from_f32(1.0625f), 0x38, "ties: 1.0625 (between 1 and 1.125) -> 1");
	is_int(nf_fp8_e4m3_from_f32(1.1875f), 0x3a, "ties: 1.1875 (between 1.125 and 1.25) -> 1.25");
	is_int(nf_fp8_e4m3_from_f32(-1.1875f), 0xba, "ties: -1.1875 -> -1.25");
	is_int(nf_fp8_e4m3_from_f32(15.5f), 0x58, "ties: 15.5 (15 and 16, across the exponent) -> 16");
}

static void test_saturation(void)
{
	const float big[] = {448.0f, 448.00003f, 455.0f, 463.99997f, 464.0f, 480.0f, 1e6f, 3.4e38f, INFINITY};
	int bad = 0;
	for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
		bad += nf_fp8_e4m3_from_f32(big[i]) != 0x7e;
		bad += nf_fp8_e4m3_from_f32(-big[i]) != 0xfe;
	}
	is_int(bad, 0, "saturation: 448 up to infinity give +-448, never NaN");
	is_int(nf_fp8_e4m3_from_f32(432.0f), 0x7e, "saturation: 432 (between 416 and 448) -> 448 (even)");
	is_int(nf_fp8_e4m3_from_f32(431.99997f), 0x7d, "saturation: just below 432 -> 416");
	ok(nf_fp8_e4m3_round(1e30f) == 448.0f && nf_fp8_e4m3_round(-INFINITY) == -448.0f,
	   "saturation: round() of 1e30 and -inf");
}

static void test_subnormals(void)
{
	float q = ldexpf(1, -10); /* half the smallest subnormal step */
	is_int(nf_fp8_e4m3_from_f32(q), 0x00, "subnormal: 2^-10 (tie 0 and 2^-9) -> 0");
	is_int(nf_fp8_e4m3_from_f32(-q), 0x80, "subnormal: -2^-10 -> -0");
	is_int(nf_fp8_e4m3_from_f32(nextafterf(q, 1)), 0x01, "subnormal: just above 2^-10 -> 2^-9");
	is_int(nf_fp8_e4m3_from_f32(3 * q), 0x02, "subnormal: 3 * 2^-10 (tie 1 and 2) -> 2 * 2^-9");
	is_int(nf_fp8_e4m3_from_f32(15 * q), 0x08, "subnormal: 15 * 2^-10 (tie 7 and 8) -> 2^-6, the smallest normal");
	is_int(nf_fp8_e4m3_from_f32(1e-45f), 0x00, "subnormal: a float32 subnormal -> 0");
	is_int(nf_fp8_e4m3_from_f32(-0.0f), 0x80, "subnormal: -0 keeps its sign");
	ok(signbit(nf_fp8_e4m3_round(-1e-5f)) && nf_fp8_e4m3_round(-1e-5f) == 0.0f,
	   "subnormal: round(-1e-5) is -0");
}

/* A float drawn to cover the whole e4m3 range and around it: a random
 * exponent in [-14, 10], a random mantissa, a random sign. */
static float random_in_range(uint64_t *s)
{
	uint64_t r = nf_test_rng(s);
	int e = (int)(r % 25) - 14;
	uint32_t u = (uint32_t)(e + 127) << 23 | (uint32_t)(r >> 8 & 0x7fffff) | (uint32_t)(r >> 40 & 1) << 31;
	return float_of(u);
}

static void test_encode_vs_search(void)
{
	uint64_t s = 1;
	int bad = 0;
	float first_bad = 0;
	for (int i = 0; i < 200000; i++) {
		float x = random_in_range(&s);
		if (nf_fp8_e4m3_from_f32(x) != ref_encode(x) && bad++ == 0)
			first_bad = x;
	}
	if (!ok(bad == 0, "encode: 200000 random floats over the range agree with the nearest-by-search"))
		diag("first: %a -> 0x%02x, search 0x%02x", (double)first_bad,
		     nf_fp8_e4m3_from_f32(first_bad), ref_encode(first_bad));
}

static void test_quant_rows(void)
{
	enum { ROWS = 6, COLS = 77 };
	float w[ROWS * COLS], scales[ROWS];
	uint8_t f8[ROWS * COLS];
	uint64_t s = 7;
	const double mag[ROWS] = {1.0, 1e-3, 300.0, 1e-7, 0.0, 5e4};
	for (int r = 0; r < ROWS; r++)
		for (int c = 0; c < COLS; c++)
			w[r * COLS + c] = nf_test_unif(&s, mag[r]);
	is_int(nf_quant_fp8_rows(f8, scales, w, ROWS, COLS), 0, "quant rows: finite weights quantize");
	int bad = 0, max_at_448 = 1, subnormal = 0;
	for (int r = 0; r < ROWS; r++) {
		int has_448 = 0;
		for (int c = 0; c < COLS; c++) {
			double v = nf_fp8_e4m3_to_f32(f8[r * COLS + c]);
			double x = scales[r] > 0 ? w[r * COLS + c] / (double)scales[r] : 0;
			/* half a step: 2^-4 relative for normals; below 2^-6, where
			 * weights round to 0 or +-2^-6, 2^-7; and a little for the
			 * rounded division */
			double tol = (fabs(x) < 0x1p-6 ? 0x1p-7 : fabs(v) * 0x1p-4) * (1 + 1e-6);
			bad += fabs(x - v) > tol;
			subnormal += (f8[r * COLS + c] & 0x78) == 0 && (f8[r * COLS + c] & 0x07) != 0;
			has_448 |= (f8[r * COLS + c] & 0x7f) == 0x7e;
		}
		if (mag[r] > 0)
			max_at_448 &= has_448;
	}
	is_int(bad, 0, "quant rows: every element within half an e4m3 step of W / scale");
	ok(max_at_448, "quant rows: each nonzero row's largest element is +-448");
	is_int(subnormal, 0, "quant rows: no weight gets a subnormal code");
	ok(nf_fp8_codes_normal(f8, sizeof f8), "quant rows: nf_fp8_codes_normal says so");
	{
		uint8_t codes[3] = {0x00, 0x80, 0x08};
		ok(nf_fp8_codes_normal(codes, 3), "zero, minus zero and 2^-6 are not subnormal");
		codes[1] = 0x81;
		ok(!nf_fp8_codes_normal(codes, 3), "-2^-9 is");
	}
	{ /* around the subnormal range, in a row whose largest maps to 448 */
		float t[6] = {448.0f, 0.4f * 0x1p-7f, -0.9f * 0x1p-7f, 1.2f * 0x1p-7f, -1.9f * 0x1p-7f,
			      0x1p-6f};
		float sc;
		uint8_t q[6];
		ok(nf_quant_fp8_rows(q, &sc, t, 1, 6) == 0 && sc == 1.0f && q[1] == 0x00 && q[2] == 0x80 &&
			   q[3] == 0x08 && q[4] == 0x88 && q[5] == 0x08,
		   "quant rows: below 2^-7 a weight is a signed zero, from 2^-7 to 2^-6 +-2^-6");
	}
	ok(scales[4] == 0.0f && f8[4 * COLS] == 0 && f8[5 * COLS - 1] == 0,
	   "quant rows: a zero row has scale 0 and zero codes");

	w[3 * COLS + 5] = NAN;
	is_int(nf_quant_fp8_rows(f8, scales, w, ROWS, COLS), NF_EINPUT, "quant rows: NaN refused");
	ok(strstr(nf_error_last(), "element 236 is NaN") != NULL, "quant rows: the message names it: %s",
	   nf_error_last());
	w[3 * COLS + 5] = 0;
	w[COLS - 1] = -INFINITY;
	is_int(nf_quant_fp8_rows(f8, scales, w, ROWS, COLS), NF_EINPUT, "quant rows: -inf refused");
	ok(strstr(nf_error_last(), "element 76 is infinite") != NULL, "quant rows: the message names it: %s",
	   nf_error_last());
}

/* Every midpoint and code value (and a float either side), times a few
 * scales, then random bit patterns: NaNs, infinities, subnormals, all. */
static float *round_inputs(size_t *count)
{
	size_t n = 256 * 6 + 4000000, k = 0;
	float *x = malloc(n * sizeof *x);
	if (!x)
		return NULL;
	for (int c = 0; c < 256; c++) {
		float v = nf_fp8_e4m3_to_f32((uint8_t)c);
		float nx = c == 0x7e || c == 0xfe || c == 0x7f || c == 0xff ? v * 1.03f
									       : nf_fp8_e4m3_to_f32((uint8_t)(c + 1));
		float mid = (float)(((double)v + (double)nx) / 2);
		x[k++] = v;
		x[k++] = nextafterf(v, 0);
		x[k++] = nextafterf(v, INFINITY);
		x[k++] = mid;
		x[k++] = nextafterf(mid, 0);
		x[k++] = nextafterf(mid, INFINITY);
	}
	uint64_t s = 3;
	while (k < n / 2)
		x[k++] = float_of((uint32_t)nf_test_rng(&s));
	while (k < n)
		x[k++] = random_in_range(&s);
	*count = n;
	return x;
}

static void test_round_families(void)
{
	size_t n = 0;
	float *x = round_inputs(&n), *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
	if (!ok(x && want && got, "round_f8: buffers"))
		goto done;
	const float scales[] = {1.0f, 0.37f, 1.0f / 448.0f};
	for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
		float inv = scales[si];
		int bad_ref = 0;
		nf_cpu_round_f8_scalar(want, x, inv, (int)n);
		for (size_t i = 0; i < n; i += 7)
			bad_ref += bits_of(want[i]) != bits_of(nf_fp8_e4m3_round(x[i] * inv));
		is_int(bad_ref, 0, "round_f8 scalar (inv_scale %g) is nf_fp8_e4m3_round", (double)inv);
		for (const nf_backend_ops *const *f = nf_cpu_families(); *f; f++) {
			if ((*f)->round_f8 == nf_cpu_round_f8_scalar)
				continue;
			if (!(*f)->available()) {
				skip("%s: not on this CPU", (*f)->name);
				continue;
			}
			/* odd offsets and lengths exercise the tails */
			memset(got, 0, n * sizeof(float));
			(*f)->round_f8(got, x, inv, (int)n - 3);
			(*f)->round_f8(got + n - 3, x + n - 3, inv, 3);
			size_t bad = 0, first = 0;
			for (size_t i = 0; i < n; i++)
				if (bits_of(got[i]) != bits_of(want[i]) && bad++ == 0)
					first = i;
			if (!ok(bad == 0, "round_f8 %s (inv_scale %g): %zu values bit-identical to scalar",
				(*f)->name, (double)inv, n))
				diag("%zu differ; first x=%a: %a, scalar %a", bad, (double)x[first],
				     (double)got[first], (double)want[first]);
		}
	}
done:
	free(x);
	free(want);
	free(got);
}

/* A random (rows, cols) fp8 matrix without NaN codes, and activations on
 * the e4m3 grid (what round_f8 hands gemm_f8). */
typedef struct f8_case {
	uint8_t *codes;
	float *scale, *x;
	nf_bk_matrix m;
} f8_case;

static int f8_case_init(f8_case *t, int rows, int cols, size_t n, size_t ldx, uint64_t *s)
{
	memset(t, 0, sizeof *t);
	t->codes = malloc((size_t)rows * (size_t)cols + 1);
	t->scale = malloc((size_t)rows * sizeof(float));
	t->x = malloc((n * ldx + 1) * sizeof(float));
	if (!t->codes || !t->scale || !t->x)
		return -1;
	/* random codes as the quantizer writes them: no NaN, no subnormal
	 * (those become the smallest normal) */
	for (size_t i = 0; i < (size_t)rows * (size_t)cols; i++) {
		uint8_t c = (uint8_t)nf_test_rng(s);
		c = (c & 0x7f) == 0x7f ? (uint8_t)(c - 1) : c;
		t->codes[i] = !(c & 0x78) && (c & 0x07) ? (uint8_t)((c & 0x80) | 0x08) : c;
	}
	for (int r = 0; r < rows; r++)
		t->scale[r] = 0.001f + (float)(nf_test_rng(s) % 1000) * 1e-5f;
	for (size_t i = 0; i < n * ldx; i++)
		t->x[i] = nf_fp8_e4m3_round(random_in_range(s));
	t->m = (nf_bk_matrix){.kind = NF_QUANT_FP8_E4M3, .rows = rows, .cols = cols, .f8 = t->codes,
			      .scale = t->scale, .act_scale = 0.0123f, .layout = NF_BK_ROWS,
			      .f8_normal = nf_fp8_codes_normal(t->codes, (size_t)rows * (size_t)cols)};
	return 0;
}

static void f8_case_release(f8_case *t)
{
	free(t->codes);
	free(t->scale);
	free(t->x);
}

/* The scalar kernel against a double-precision sum of the defined values. */
static void test_gemm_scalar_vs_double(void)
{
	uint64_t s = 11;
	f8_case t;
	int rows = 9, cols = 300, bad = 0;
	if (!ok(f8_case_init(&t, rows, cols, 1, (size_t)cols, &s) == 0, "gemm_f8: case"))
		goto done;
	float y[9];
	nf_cpu_gemm_f8_scalar(y, 0, &t.m, t.x, (size_t)cols, 1, 0, rows, 0);
	for (int r = 0; r < rows; r++) {
		double sum = 0, mag = 0;
		for (int c = 0; c < cols; c++) {
			double p = ref_value(t.codes[r * cols + c]) * t.x[c];
			sum += p;
			mag += fabs(p);
		}
		double k = (double)t.scale[r] * t.m.act_scale;
		bad += fabs(y[r] - sum * k) > mag * k * 1e-6 + 1e-30;
	}
	is_int(bad, 0, "gemm_f8 scalar: y = scale * act_scale * sum e4m3(w) x, within float rounding");
done:
	f8_case_release(&t);
}

/* The error bound of the fp8 GEMM (engine/cpu/gemm_f8.c): every product
 * of an e4m3 weight and an activation on the e4m3 grid is exact in float32,
 * so a row's sum in any order of its n products is within gamma_n *
 * sum |w * x| of the exact sum, gamma_n = n u / (1 - n u), u = 2^-24; then
 * the product by k = scale * act_scale (float) and, when accumulating, the
 * add to y0 each round once more. */
static double f8_sum_bound(size_t n, double mag, double k, double exact_y, double y0)
{
	const double u = ldexp(1.0, -24);
	double gamma = (double)n * u / (1.0 - (double)n * u);
	double sum_err = gamma * mag * k;
	return sum_err + u * (fabs(exact_y) + sum_err) + u * (fabs(exact_y) + fabs(y0) + sum_err) + 1e-37;
}

/* How many y of rows [r0, r1) for n vectors are outside the bound of the
 * exact result (y0: y before the call, read when accumulating). */
static int f8_outside_bound(const float *y, const float *y0, size_t ldy, const f8_case *t, size_t ldx,
			    size_t n, int r0, int r1, int accumulate)
{
	size_t cols = (size_t)t->m.cols;
	int bad = 0;
	for (size_t b = 0; b < n; b++)
		for (int r = r0; r < r1; r++) {
			double sum = 0, mag = 0;
			for (size_t c = 0; c < cols; c++) {
				double p = ref_value(t->codes[(size_t)r * cols + c]) * t->x[b * ldx + c];
				sum += p;
				mag += fabs(p);
			}
			double k = (double)(t->scale[r] * t->m.act_scale);
			double before = accumulate ? (double)y0[b * ldy + (size_t)r] : 0.0;
			double exact = before + k * sum;
			double got = y[b * ldy + (size_t)r];
			bad += !(fabs(got - exact) <= f8_sum_bound(cols, mag, k, k * sum, before));
		}
	return bad;
}

/* Whether a family's kernel keeps the scalar kernel's summation order for
 * n vectors of cols columns, and so its bits (gemm_f8.c): not the decode
 * (n = 1) of AVX2 and AVX-512, nor their prefill by the direct widening
 * (these cases hold no subnormal code; rows of whole blocks of 32 columns
 * for AVX2, of 64 for AVX-512, at most 2048). */
static int f8_bit_identical(const nf_backend_ops *f, size_t n, int cols)
{
	if (n == 1 || cols > 2048)
		return n != 1;
	if (f->gemm_f8 == nf_cpu_gemm_f8_avx2)
		return cols % 32 != 0;
	return f->gemm_f8 == nf_cpu_gemm_f8_scalar || cols % 64 != 0;
}

/* One family on one shape, rows [r0, r1), n vectors: *outside the count of
 * results outside the bound of the exact sums, the return the count of
 * results whose bits differ from the scalar kernel's (-1: no memory). */
static int gemm_family_case(const nf_backend_ops *f, int rows, int cols, size_t n, int r0, int r1,
			    int accumulate, uint64_t *s, int *outside)
{
	f8_case t;
	size_t ldx = (size_t)cols + 3, ldy = (size_t)rows + 1;
	float *want = malloc(n * ldy * sizeof(float)), *got = malloc(n * ldy * sizeof(float));
	float *y0 = malloc(n * ldy * sizeof(float));
	int bad = -1;
	if (f8_case_init(&t, rows, cols, n, ldx, s) < 0 || !want || !got || !y0)
		goto done;
	for (size_t i = 0; i < n * ldy; i++)
		y0[i] = want[i] = got[i] = (float)i * 0.25f;
	nf_cpu_gemm_f8_scalar(want, ldy, &t.m, t.x, ldx, n, r0, r1, accumulate);
	f->gemm_f8(got, ldy, &t.m, t.x, ldx, n, r0, r1, accumulate);
	bad = 0;
	for (size_t i = 0; i < n * ldy; i++)
		bad += bits_of(got[i]) != bits_of(want[i]);
	*outside = f8_outside_bound(got, y0, ldy, &t, ldx, n, r0, r1, accumulate);
	/* rows outside [r0, r1) are not written */
	for (size_t b = 0; b < n; b++)
		for (int r = 0; r < rows; r++)
			if (r < r0 || r >= r1)
				*outside += bits_of(got[b * ldy + (size_t)r]) != bits_of(y0[b * ldy + (size_t)r]);
done:
	f8_case_release(&t);
	free(want);
	free(got);
	free(y0);
	return bad;
}

/* The bound is tight enough to catch a real bug: on a long random row, the
 * scalar kernel's result is inside it, and the same result with one
 * column dropped (its largest product) or one product's sign flipped is
 * outside it. */
static void test_gemm_bound_catches_bugs(void)
{
	uint64_t s = 23;
	f8_case t;
	enum { COLS = 8208 };
	float y[1], y0[1] = {0}, dropped[1], flipped[1];
	if (!ok(f8_case_init(&t, 1, COLS, 1, COLS, &s) == 0, "gemm_f8 bound: case"))
		goto done;
	nf_cpu_gemm_f8_scalar(y, 1, &t.m, t.x, COLS, 1, 0, 1, 0);
	size_t big = 0;
	for (size_t c = 1; c < COLS; c++)
		if (fabs(ref_value(t.codes[c]) * t.x[c]) > fabs(ref_value(t.codes[big]) * t.x[big]))
			big = c;
	uint8_t code = t.codes[big];
	t.codes[big] = 0;
	nf_cpu_gemm_f8_scalar(dropped, 1, &t.m, t.x, COLS, 1, 0, 1, 0);
	t.codes[big] = code ^ 0x80;
	nf_cpu_gemm_f8_scalar(flipped, 1, &t.m, t.x, COLS, 1, 0, 1, 0);
	t.codes[big] = code;
	is_int(f8_outside_bound(y, y0, 1, &t, COLS, 1, 0, 1, 0), 0, "gemm_f8 bound: the scalar kernel is inside it");
	is_int(f8_outside_bound(dropped, y0, 1, &t, COLS, 1, 0, 1, 0), 1,
	       "gemm_f8 bound: a dropped column (of %d) is outside it", COLS);
	is_int(f8_outside_bound(flipped, y0, 1, &t, COLS, 1, 0, 1, 0), 1,
	       "gemm_f8 bound: a product of the wrong sign is outside it");
done:
	f8_case_release(&t);
}

static void test_gemm_families(void)
{
	/* 9 x 8208: past the decode's tables of split activations */
	static const int shapes[][2] = {{1, 1},   {3, 15},  {8, 16},  {9, 17},   {16, 64}, {17, 100},
					{24, 129}, {13, 513}, {40, 576}, {19, 1000}, {8, 2048},
					{9, 8208}};
	for (const nf_backend_ops *const *f = nf_cpu_families(); *f; f++) {
		if ((*f)->gemm_f8 == nf_cpu_gemm_f8_scalar)
			continue;
		if (!(*f)->available()) {
			skip("%s: not on this CPU", (*f)->name);
			continue;
		}
		uint64_t s = 5;
		int cases = 0, differ = 0, identical_cases = 0, outside = 0, bad_cases = 0;
		/* 1 is decode; the others every path of the prefill groups */
		static const size_t ns[] = {1, 2, 3, 4, 5, 12, 17};
		for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
			for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
				for (int acc = 0; acc < 2; acc++)
					for (int share = 0; share < 2; share++) {
						int rows = shapes[k][0], cols = shapes[k][1];
						size_t n = ns[ni];
						/* a share that starts mid-matrix */
						int r0 = share && rows > 2 ? 1 : 0, out = 0;
						int d = gemm_family_case(*f, rows, cols, n, r0, rows, acc, &s, &out);
						cases++;
						bad_cases += d < 0;
						outside += out;
						if (f8_bit_identical(*f, n, cols)) {
							identical_cases++;
							differ += d != 0;
						}
					}
		/* no vectors: nothing is written */
		f8_case t;
		float y[4] = {1, 2, 3, 4};
		if (f8_case_init(&t, 4, 32, 1, 32, &s) == 0)
			(*f)->gemm_f8(y, 4, &t.m, t.x, 32, 0, 0, 4, 0);
		f8_case_release(&t);
		ok(y[0] == 1 && y[1] == 2 && y[2] == 3 && y[3] == 4, "gemm_f8 %s: n = 0 writes nothing",
		   (*f)->name);
		ok(bad_cases == 0 && outside == 0,
		   "gemm_f8 %s: %d cases (tails, n = 1..5, 12, 17, accumulate 0/1, row shares) "
		   "within the bound of the exact sums (%d results outside)",
		   (*f)->name, cases, outside);
		ok(differ == 0, "gemm_f8 %s: the %d cases that keep the scalar order bit-identical to it "
				"(%d differ)",
		   (*f)->name, identical_cases, differ);
	}
}

/* A code of exponent 0 other than a zero. */
static int is_subnormal_code(uint8_t b)
{
	return (b & 0x78) == 0 && (b & 7) != 0;
}

/* Every family widens every code to its defined value and multiplies it
 * exactly by each class of activation: row r holds code r alone (the
 * others zero) in a column that visits every position of the 64-column
 * steps and the tail, x all one value; so y[r] is one product, exact,
 * value(r) * x * scale[r] * act_scale, and +0 when that is zero.  The NaN
 * codes (never written) read as 480 with their sign, as the file says. */
static int every_code_case(const nf_backend_ops *f, float xv, int COLS, int f8_normal)
{
	enum { ROWS = 256, MAX_COLS = 192 };
	/* (r * 7) % COLS visits every column (7 is prime to 131 and to 192) */
	static uint8_t codes[ROWS * MAX_COLS];
	float scale[ROWS], x[MAX_COLS], y[ROWS];
	memset(codes, 0, sizeof codes);
	for (int r = 0; r < ROWS; r++) {
		/* f8_normal promises no subnormal code (the widenings by moving
		 * bits rely on it): those rows are left zero then */
		if (!(f8_normal && is_subnormal_code((uint8_t)r)))
			codes[r * COLS + (r * 7) % COLS] = (uint8_t)r;
		scale[r] = 1.0f;
	}
	for (int c = 0; c < COLS; c++)
		x[c] = xv;
	nf_bk_matrix m = {.kind = NF_QUANT_FP8_E4M3, .rows = ROWS, .cols = COLS, .f8 = codes,
			  .scale = scale, .act_scale = 0.5f, .layout = NF_BK_ROWS, .f8_normal = f8_normal};
	f->gemm_f8(y, 0, &m, x, COLS, 1, 0, ROWS, 0);
	int bad = 0;
	for (int r = 0; r < ROWS; r++) {
		double v = isnan(ref_value(r)) ? (r & 0x80 ? -480.0 : 480.0) : ref_value(r);
		double want = f8_normal && is_subnormal_code((uint8_t)r) ? 0.0 : v * xv * 0.5;
		bad += (double)y[r] != want || !!signbit(y[r]) != (want < 0);
	}
	return bad;
}

/* Rows of zeros give +0; rows of +-448 against activations of 448 give
 * sums of 2^24 * 49 * n exactly (no rounding anywhere), in every family. */
static int extreme_rows_case(const nf_backend_ops *f, int COLS)
{
	enum { ROWS = 11, MAX_COLS = 4096 + 37 };
	static uint8_t codes[ROWS * MAX_COLS];
	static float x[MAX_COLS];
	float scale[ROWS], y[ROWS];
	for (int r = 0; r < ROWS; r++) {
		scale[r] = 0.25f;
		for (int c = 0; c < COLS; c++) {
			uint8_t big = r % 3 == 2 && c % 2 ? 0xfe : 0x7e; /* row 2 mod 3: +448, -448, .. */
			codes[r * COLS + c] = r % 3 == 0 ? 0 : big;
		}
	}
	for (int c = 0; c < COLS; c++)
		x[c] = 448.0f;
	nf_bk_matrix m = {.kind = NF_QUANT_FP8_E4M3, .rows = ROWS, .cols = COLS, .f8 = codes,
			  .scale = scale, .act_scale = 1.0f, .layout = NF_BK_ROWS,
			  .f8_normal = nf_fp8_codes_normal(codes, (size_t)ROWS * (size_t)COLS)};
	f->gemm_f8(y, 0, &m, x, COLS, 1, 0, ROWS, 0);
	int bad = 0;
	for (int r = 0; r < ROWS; r++) {
		/* +448, -448, ..: one 448^2 left over for an odd count of columns */
		double alternating = COLS % 2 ? 448.0 * 448.0 : 0;
		double want = r % 3 == 0 ? 0 : r % 3 == 1 ? 448.0 * 448.0 * COLS : alternating;
		bad += (double)y[r] != want * 0.25 || signbit(y[r]);
	}
	return bad;
}

static void test_gemm_codes_and_extremes(void)
{
	for (const nf_backend_ops *const *f = nf_cpu_families(); *f; f++) {
		if (!(*f)->available()) {
			skip("%s: not on this CPU", (*f)->name);
			continue;
		}
		/* the activation classes: one, the largest, the smallest and the
		 * largest subnormal, a normal with all mantissa bits, negative,
		 * zero */
		static const float xs[] = {1.0f, 448.0f, 0x1p-9f, 7 * 0x1p-9f, 1.875f * 0x1p-6f, -3.25f, 0.0f};
		int bad = 0;
		/* 131 columns: every step and the tail; 192: the decode paths
		 * for whole multiples of 32 columns */
		for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
			for (int normal = 0; normal < 2; normal++)
				bad += every_code_case(*f, xs[i], 131, normal) +
				       every_code_case(*f, xs[i], 192, normal);
		is_int(bad, 0, "gemm_f8 %s: each of the 256 codes times each class of activation is exact",
		       (*f)->name);
		is_int(extreme_rows_case(*f, 4096 + 37) + extreme_rows_case(*f, 4096), 0,
		       "gemm_f8 %s: rows of zeros and of +-448 give their exact sums", (*f)->name);
	}
}

int main(void)
{
	test_decode();
	test_encode_codes();
	test_ties();
	test_saturation();
	test_subnormals();
	test_encode_vs_search();
	test_quant_rows();
	test_round_families();
	test_gemm_scalar_vs_double();
	test_gemm_bound_catches_bugs();
	test_gemm_families();
	test_gemm_codes_and_extremes();
	return done_testing();
}
