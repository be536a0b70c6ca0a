/*
 * test_kernels.c - conformance: every op of every CPU kernel family this
 * machine runs, against the portable scalar float32 family (and the scalar
 * GEMMs against a double-precision sum); a GEMM of many vectors equals one
 * vector at a time bit for bit; a tiled matrix (engine/layout.h) gives the
 * row-major result bit for bit.  Families the CPU lacks are skipped.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu.h"
#include "engine/layout.h"
#include "engine/quant.h"
#include "engine/safetensors.h"
#include "tests/tap.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}
static void fill(float *x, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = frand() * scale;
}

/* max |a-b| / max(max|b|, tiny) */
static double rel_err(const float *a, const float *b, size_t n)
{
	double num = 0, den = 1e-30;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - (double)b[i]);
		if (d > num || isnan(d))
			num = isnan(d) ? INFINITY : d;
		if (fabs((double)b[i]) > den)
			den = fabs((double)b[i]);
	}
	return num / den;
}

static const int shapes[][2] = {{1, 1}, {5, 7}, {16, 64}, {37, 172}, {64, 300}, {40, 768}, {9, 129}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static void check_gemm(const nf_backend_ops *ops, const nf_backend_ops *ref)
{
	double worst_f = 0, worst_q = 0;
	for (size_t si = 0; si < NSHAPES; si++) {
		int rows = shapes[si][0], cols = shapes[si][1];
		for (size_t n = 1; n <= 3; n += 2) {
			size_t ldx = (size_t)cols + 3, ldy = (size_t)rows + 5;
			size_t ldq = ((size_t)cols + NF_BK_QPAD - 1) / NF_BK_QPAD * NF_BK_QPAD;
			float *w = malloc(sizeof(float) * (size_t)rows * (size_t)cols);
			float *x = malloc(sizeof(float) * n * ldx);
			float *y0 = calloc(n * ldy, sizeof(float)), *y1 = calloc(n * ldy, sizeof(float));
			int8_t *wq = malloc((size_t)rows * (size_t)cols);
			float *ws = malloc(sizeof(float) * (size_t)rows);
			int32_t *rs = malloc(sizeof(int32_t) * (size_t)rows);
			int8_t *xq = calloc(n, ldq);
			float xs[3];
			fill(w, (size_t)rows * (size_t)cols, 0.1f);
			fill(x, n * ldx, 1.0f);
			nf_quant_int8_rows(wq, ws, w, (size_t)rows, (size_t)cols);
			nf_quant_int8_rowsums(rs, wq, (size_t)rows, (size_t)cols);
			for (size_t b = 0; b < n; b++)
				xs[b] = nf_quant_int8_vec(xq + b * ldq, x + b * ldx, (size_t)cols);
			nf_bk_matrix mf = {.kind = NF_QUANT_NONE, .rows = rows, .cols = cols, .f32 = w, .layout = NF_BK_ROWS};
			nf_bk_matrix mq = {.kind = NF_QUANT_INT8_ROW, .rows = rows, .cols = cols, .q8 = wq, .scale = ws, .rowsum = rs, .layout = NF_BK_ROWS};

			/* float32: whole range, then accumulate over a sub-range */
			ref->gemm_f32(y0, ldy, &mf, x, ldx, n, 0, rows, 0);
			ops->gemm_f32(y1, ldy, &mf, x, ldx, n, 0, rows, 0);
			int r0 = rows / 3, r1 = rows - rows / 4;
			ref->gemm_f32(y0, ldy, &mf, x, ldx, n, r0, r1, 1);
			ops->gemm_f32(y1, ldy, &mf, x, ldx, n, r0, r1, 1);
			double e = rel_err(y1, y0, n * ldy);
			if (e > worst_f)
				worst_f = e;
			if (ops == ref) { /* scalar against a double-precision sum */
				double num = 0, den = 1e-30;
				for (size_t b = 0; b < n; b++)
					for (int r = 0; r < rows; r++) {
						double s = 0;
						for (int c = 0; c < cols; c++)
							s += (double)w[(size_t)r * (size_t)cols + (size_t)c] *
							     x[b * ldx + (size_t)c];
						if (r >= r0 && r < r1)
							s *= 2;
						num = fmax(num, fabs(s - y0[b * ldy + (size_t)r]));
						den = fmax(den, fabs(s));
					}
				if (num / den > worst_f)
					worst_f = num / den;
			}

			/* int8 */
			memset(y0, 0, sizeof(float) * n * ldy);
			memset(y1, 0, sizeof(float) * n * ldy);
			ref->gemm_q8(y0, ldy, &mq, xq, ldq, xs, n, 0, rows, 0);
			ops->gemm_q8(y1, ldy, &mq, xq, ldq, xs, n, 0, rows, 0);
			ref->gemm_q8(y0, ldy, &mq, xq, ldq, xs, n, r0, r1, 1);
			ops->gemm_q8(y1, ldy, &mq, xq, ldq, xs, n, r0, r1, 1);
			e = rel_err(y1, y0, n * ldy);
			if (e > worst_q)
				worst_q = e;
			free(w), free(x), free(y0), free(y1), free(wq), free(ws), free(rs), free(xq);
		}
	}
	ok(worst_f < 1e-5, "%s gemm_f32 matches scalar (rel err %.2e)", ops->name, worst_f);
	ok(worst_q < 1e-6, "%s gemm_q8 matches scalar (rel err %.2e)", ops->name, worst_q);
}

/* A GEMM of n vectors gives each vector's result bit for bit as a GEMM of
 * that vector alone (the multi-vector tiles of prefill change no sum), and
 * matches scalar. */
static void check_gemm_batch(const nf_backend_ops *ops, const nf_backend_ops *ref)
{
	enum { N = 11 };
	int same_f = 1, same_q = 1;
	double worst = 0;
	for (size_t si = 0; si < NSHAPES; si++) {
		int rows = shapes[si][0], cols = shapes[si][1];
		size_t ldx = (size_t)cols + 5, ldy = (size_t)rows + 3;
		size_t ldq = ((size_t)cols + NF_BK_QPAD - 1) / NF_BK_QPAD * NF_BK_QPAD;
		float *w = malloc(sizeof(float) * (size_t)rows * (size_t)cols);
		float *x = malloc(sizeof(float) * N * ldx);
		float *yb = calloc(N * ldy, sizeof(float)), *y1 = calloc(N * ldy, sizeof(float));
		float *yr = calloc(N * ldy, sizeof(float));
		int8_t *wq = malloc((size_t)rows * (size_t)cols), *xq = calloc(N, ldq);
		float *ws = malloc(sizeof(float) * (size_t)rows), xs[N];
		int32_t *rs = malloc(sizeof(int32_t) * (size_t)rows);
		fill(w, (size_t)rows * (size_t)cols, 0.1f);
		fill(x, N * ldx, 1.0f);
		nf_quant_int8_rows(wq, ws, w, (size_t)rows, (size_t)cols);
		nf_quant_int8_rowsums(rs, wq, (size_t)rows, (size_t)cols);
		for (size_t b = 0; b < N; b++)
			xs[b] = nf_quant_int8_vec(xq + b * ldq, x + b * ldx, (size_t)cols);
		nf_bk_matrix mf = {.kind = NF_QUANT_NONE, .rows = rows, .cols = cols, .f32 = w, .layout = NF_BK_ROWS};
		nf_bk_matrix mq = {.kind = NF_QUANT_INT8_ROW, .rows = rows, .cols = cols, .q8 = wq, .scale = ws, .rowsum = rs, .layout = NF_BK_ROWS};
		for (size_t n = 1; n <= N; n++) {
			int r0 = rows > 16 ? 16 : 0;
			ops->gemm_f32(yb, ldy, &mf, x, ldx, n, 0, rows, 0);
			ops->gemm_f32(yb, ldy, &mf, x, ldx, n, r0, rows, 1);
			ref->gemm_f32(yr, ldy, &mf, x, ldx, n, 0, rows, 0);
			ref->gemm_f32(yr, ldy, &mf, x, ldx, n, r0, rows, 1);
			for (size_t b = 0; b < n; b++) {
				ops->gemm_f32(y1 + b * ldy, ldy, &mf, x + b * ldx, ldx, 1, 0, rows, 0);
				ops->gemm_f32(y1 + b * ldy, ldy, &mf, x + b * ldx, ldx, 1, r0, rows, 1);
			}
			same_f &= memcmp(yb, y1, sizeof(float) * n * ldy) == 0;
			double e = rel_err(yb, yr, n * ldy);
			worst = e > worst ? e : worst;
			ops->gemm_q8(yb, ldy, &mq, xq, ldq, xs, n, 0, rows, 0);
			ops->gemm_q8(yb, ldy, &mq, xq, ldq, xs, n, r0, rows, 1);
			for (size_t b = 0; b < n; b++) {
				ops->gemm_q8(y1 + b * ldy, ldy, &mq, xq + b * ldq, ldq, xs + b, 1, 0, rows, 0);
				ops->gemm_q8(y1 + b * ldy, ldy, &mq, xq + b * ldq, ldq, xs + b, 1, r0, rows, 1);
			}
			same_q &= memcmp(yb, y1, sizeof(float) * n * ldy) == 0;
		}
		free(w), free(x), free(yb), free(y1), free(yr), free(wq), free(xq), free(ws), free(rs);
	}
	ok(same_f && worst < 1e-5,
	   "%s gemm_f32 of 1..%d vectors equals one vector at a time bit for bit (and scalar, rel err %.1e)",
	   ops->name, N, worst);
	ok(same_q, "%s gemm_q8 of 1..%d vectors equals one vector at a time bit for bit", ops->name, N);
}

/* The same GEMMs over a tiled copy of each matrix give the row-major
 * results bit for bit: 1..19 vectors, the whole matrix and the 16-row
 * aligned sub-ranges the pool hands out.  Shapes: tileable as float32 only
 * (cols % 16), as both, and the engine's own (768, 2048 columns). */
static void check_gemm_tiled(const nf_backend_ops *ops)
{
	enum { NV = 19 }; /* past two groups of 8 vectors, with every remainder */
	static const int tshapes[][2] = {{8, 16}, {16, 48}, {16, 64}, {40, 768}, {24, 192}, {48, 2048}};
	int same_f = 1, same_q = 1, tiled_f = 0, tiled_q = 0;
	for (size_t si = 0; si < sizeof tshapes / sizeof tshapes[0]; si++) {
		int rows = tshapes[si][0], cols = tshapes[si][1];
		size_t nw = (size_t)rows * (size_t)cols, ldx = (size_t)cols + 7, ldy = (size_t)rows + 1;
		size_t ldq = ((size_t)cols + NF_BK_QPAD - 1) / NF_BK_QPAD * NF_BK_QPAD;
		float *w = malloc(sizeof(float) * nw), *wt = malloc(sizeof(float) * nw);
		float *x = malloc(sizeof(float) * NV * ldx), xs[NV];
		float *y0 = calloc(NV * ldy, sizeof(float)), *y1 = calloc(NV * ldy, sizeof(float));
		int8_t *wq = malloc(nw), *wqt = malloc(nw), *xq = calloc(NV, ldq);
		float *ws = malloc(sizeof(float) * (size_t)rows);
		int32_t *rs = malloc(sizeof(int32_t) * (size_t)rows);
		fill(w, nw, 0.1f);
		fill(x, NV * ldx, 1.0f);
		nf_quant_int8_rows(wq, ws, w, (size_t)rows, (size_t)cols);
		nf_quant_int8_rowsums(rs, wq, (size_t)rows, (size_t)cols);
		for (size_t b = 0; b < NV; b++)
			xs[b] = nf_quant_int8_vec(xq + b * ldq, x + b * ldx, (size_t)cols);
		memcpy(wt, w, sizeof(float) * nw);
		memcpy(wqt, wq, nw);
		nf_bk_matrix mf = {.kind = NF_QUANT_NONE, .rows = rows, .cols = cols, .f32 = w, .layout = NF_BK_ROWS};
		nf_bk_matrix mq = {.kind = NF_QUANT_INT8_ROW, .rows = rows, .cols = cols, .q8 = wq, .scale = ws, .rowsum = rs, .layout = NF_BK_ROWS};
		nf_bk_matrix tf = mf, tq = mq;
		tf.f32 = wt;
		tq.q8 = wqt;
		if (nf_bk_tile_in_place(&tf, wt) != 0 || nf_bk_tile_in_place(&tq, wqt) != 0)
			same_f = same_q = 0;
		tiled_f += tf.layout == NF_BK_TILE8;
		tiled_q += tq.layout == NF_BK_TILE8;
		for (size_t n = 1; n <= NV; n++) {
			int r0 = rows > 16 ? 16 : 0, r1 = rows > 32 ? 32 : rows;
			ops->gemm_f32(y0, ldy, &mf, x, ldx, n, 0, rows, 0);
			ops->gemm_f32(y0, ldy, &mf, x, ldx, n, r0, r1, 1);
			ops->gemm_f32(y1, ldy, &tf, x, ldx, n, 0, rows, 0);
			ops->gemm_f32(y1, ldy, &tf, x, ldx, n, r0, r1, 1);
			same_f &= memcmp(y0, y1, sizeof(float) * n * ldy) == 0;
			ops->gemm_q8(y0, ldy, &mq, xq, ldq, xs, n, 0, rows, 0);
			ops->gemm_q8(y0, ldy, &mq, xq, ldq, xs, n, r0, r1, 1);
			ops->gemm_q8(y1, ldy, &tq, xq, ldq, xs, n, 0, rows, 0);
			ops->gemm_q8(y1, ldy, &tq, xq, ldq, xs, n, r0, r1, 1);
			same_q &= memcmp(y0, y1, sizeof(float) * n * ldy) == 0;
		}
		free(w), free(wt), free(x), free(y0), free(y1), free(wq), free(wqt), free(xq);
		free(ws), free(rs);
	}
	ok(same_f && tiled_f == 6, "%s gemm_f32 over tiled matrices equals row-major bit for bit (%d tiled)",
	   ops->name, tiled_f);
	ok(same_q && tiled_q == 4, "%s gemm_q8 over tiled matrices equals row-major bit for bit (%d tiled)",
	   ops->name, tiled_q);
}

/* What can be tiled, where an element lands, and a row read back. */
static void check_layout(void)
{
	nf_bk_matrix m = {.kind = NF_QUANT_INT8_ROW, .rows = 16, .cols = 128, .layout = NF_BK_ROWS};
	ok(nf_bk_can_tile(&m), "int8 16x128 can be tiled");
	m.cols = 96;
	ok(!nf_bk_can_tile(&m), "int8 rows of 96 bytes cannot (not whole 64-byte chunks)");
	m.kind = NF_QUANT_NONE;
	ok(nf_bk_can_tile(&m), "float32 16x96 can (384-byte rows)");
	m.rows = 12;
	ok(!nf_bk_can_tile(&m), "12 rows cannot (not whole 8-row tiles)");

	enum { R = 16, C = 128 };
	int8_t q[R * C], qt[R * C];
	float sc[R], back[C];
	int placed = 1, rows_ok = 1;
	for (int i = 0; i < R * C; i++)
		q[i] = (int8_t)(i * 31 % 251 - 125);
	for (int r = 0; r < R; r++)
		sc[r] = 0.5f + (float)r;
	memcpy(qt, q, sizeof q);
	nf_bk_matrix t = {.kind = NF_QUANT_INT8_ROW, .rows = R, .cols = C, .q8 = qt, .scale = sc, .layout = NF_BK_ROWS};
	ok(nf_bk_tile_in_place(&t, qt) == 0 && t.layout == NF_BK_TILE8, "int8 16x128 tiled in place");
	/* (r, c) = (9, 70): tile 1 (byte 1024), chunk 1 (+512), row 1 in it (+64), byte 6 */
	ok(nf_bk_index(&t, 9, 70) == 1024 + 512 + 64 + 6, "element (9, 70) of a tiled 16x128 int8 at byte 1606");
	for (int r = 0; r < R; r++)
		for (int c = 0; c < C; c++)
			placed &= qt[nf_bk_index(&t, (size_t)r, (size_t)c)] == q[r * C + c];
	ok(placed, "every element is where nf_bk_index says");
	for (int r = 0; r < R; r++) {
		nf_bk_row_f32(back, &t, (size_t)r);
		for (int c = 0; c < C; c++)
			rows_ok &= back[c] == sc[r] * (float)q[r * C + c];
	}
	ok(rows_ok, "nf_bk_row_f32 reads each tiled row back dequantized");
}

static void check_small_ops(const nf_backend_ops *ops, const nf_backend_ops *ref)
{
	enum { N = 173, HS = 8, NH = 8, NKV = 4, POS = 37 };
	float a[N], b[N], c[N], w[N], d[N];
	fill(a, N, 2.0f);
	fill(w, N, 1.0f);
	ref->rmsnorm(b, a, w, N, 1e-5f);
	ops->rmsnorm(c, a, w, N, 1e-5f);
	ok(rel_err(c, b, N) < 1e-6, "%s rmsnorm", ops->name);

	float cs[HS];
	for (int i = 0; i < HS; i += 2) {
		cs[i] = cosf(0.3f * (float)i + 1.0f);
		cs[i + 1] = sinf(0.3f * (float)i + 1.0f);
	}
	memcpy(b, a, sizeof a);
	memcpy(c, a, sizeof a);
	ref->rope(b, 64, HS, cs);
	ops->rope(c, 64, HS, cs);
	ok(rel_err(c, b, 64) < 1e-6, "%s rope", ops->name);

	memcpy(b, a, sizeof a);
	memcpy(c, a, sizeof a);
	ref->softmax(b, N);
	ops->softmax(c, N);
	double sum = 0;
	for (int i = 0; i < N; i++)
		sum += c[i];
	ok(rel_err(c, b, N) < 1e-6 && fabs(sum - 1.0) < 1e-5, "%s softmax (sum %.6f)", ops->name, sum);

	memcpy(b, a, sizeof a);
	memcpy(c, a, sizeof a);
	fill(d, N, 3.0f);
	ref->swiglu(b, d, N);
	ops->swiglu(c, d, N);
	ok(rel_err(c, b, N) < 1e-6, "%s swiglu", ops->name);

	if (ops->add) {
		memcpy(b, a, sizeof a);
		memcpy(c, a, sizeof a);
		for (int i = 0; i < N; i++)
			b[i] += d[i];
		ops->add(c, d, N);
		ok(rel_err(c, b, N) < 1e-7, "%s add", ops->name);
	}

	if (ops->quantize_q8) {
		int8_t q0[N], q1[N];
		float s0 = nf_quant_int8_vec(q0, a, N), s1 = ops->quantize_q8(q1, a, N);
		int same = s0 == s1 && memcmp(q0, q1, N) == 0;
		float z[N] = {0};
		same = same && ops->quantize_q8(q1, z, N) == 0.0f && q1[0] == 0 && q1[N - 1] == 0;
		ok(same, "%s quantize_q8 is bit-identical to nf_quant_int8_vec", ops->name);
	}

	/* head-major cache with room for 5 more rows per head (the stride is
	 * honoured, not assumed to be (POS + 1) rows) */
	size_t hstride = (POS + 6) * HS, kvn = NKV * hstride;
	float *kc = malloc(sizeof(float) * kvn), *vc = malloc(sizeof(float) * kvn);
	float q[NH * HS], o0[NH * HS], o1[NH * HS], att[NH * (POS + 1) + HS];
	fill(kc, kvn, 1.0f);
	fill(vc, kvn, 1.0f);
	fill(q, NH * HS, 1.0f);
	ref->attention(o0, q, kc, vc, NF_KV_F32, POS, 0, NH, NH, NKV, HS, hstride * sizeof(float), att);
	ops->attention(o1, q, kc, vc, NF_KV_F32, POS, 0, 3, NH, NKV, HS, hstride * sizeof(float), att);
	ops->attention(o1, q, kc, vc, NF_KV_F32, POS, 3, NH, NH, NKV, HS, hstride * sizeof(float), att);
	ok(rel_err(o1, o0, NH * HS) < 1e-5, "%s attention (GQA, split heads)", ops->name);
	/* head 5 reads KV head 2: check it against a direct computation */
	double sc[POS + 1], mx = -1e30, tot = 0, o = 0;
	for (int t = 0; t <= POS; t++) {
		double s = 0;
		for (int i = 0; i < HS; i++)
			s += (double)q[5 * HS + i] * kc[2 * hstride + (size_t)t * HS + (size_t)i];
		sc[t] = s / sqrt((double)HS);
		mx = fmax(mx, sc[t]);
	}
	for (int t = 0; t <= POS; t++)
		tot += (sc[t] = exp(sc[t] - mx));
	for (int t = 0; t <= POS; t++)
		o += sc[t] / tot * vc[2 * hstride + (size_t)t * HS];
	ok(fabs(o - o1[5 * HS]) < 1e-5, "%s attention head 5 uses kv head 2", ops->name);
	free(kc);
	free(vc);

	/* to_f16 rounds as nf_f32_to_f16: normal, halfway, subnormal,
	 * overflowing, signed-zero and infinite values */
	float xs[40];
	uint16_t h0[40], h1[40];
	for (int i = 0; i < 32; i++)
		xs[i] = (float)ldexp(1.0 + i / 2048.0 + 1.0 / 4096.0, i * 2 - 30) * (i % 2 ? -1.0f : 1.0f);
	xs[32] = 0.0f;
	xs[33] = -0.0f;
	xs[34] = 65519.0f;  /* rounds down to the largest half */
	xs[35] = 65520.0f;  /* rounds up to infinity */
	xs[36] = 1e-8f;     /* subnormal */
	xs[37] = -3e-5f;    /* subnormal */
	xs[38] = INFINITY;
	xs[39] = 0.333333f;
	nf_cpu_to_f16_ref(h0, xs, 40);
	ops->to_f16(h1, xs, 40);
	ok(memcmp(h0, h1, sizeof h0) == 0, "%s to_f16 is bit-identical to nf_f32_to_f16", ops->name);
}

/* Attention at head sizes that take the SIMD families' full-width paths (64)
 * and full-width plus a tail (24), against the scalar family: over a float
 * cache, over a half cache, and the half cache against a float cache of
 * the same (rounded) values. */
static void check_attention_sizes(const nf_backend_ops *ops, const nf_backend_ops *ref)
{
	static const int hss[] = {64, 24};
	enum { NH = 6, NKV = 3, POS = 70 };
	double worst = 0, worst_h = 0, worst_rounded = 0, drift = 0;
	for (size_t k = 0; k < sizeof hss / sizeof hss[0]; k++) {
		int hs = hss[k];
		size_t hstride = (POS + 3) * (size_t)hs, kvn = NKV * hstride, qd = (size_t)NH * (size_t)hs;
		float *kc = malloc(sizeof(float) * kvn), *vc = malloc(sizeof(float) * kvn);
		float *kr = malloc(sizeof(float) * kvn), *vr = malloc(sizeof(float) * kvn);
		uint16_t *kh = malloc(sizeof(uint16_t) * kvn), *vh = malloc(sizeof(uint16_t) * kvn);
		float *q = malloc(sizeof(float) * qd), *o0 = malloc(sizeof(float) * qd);
		float *o1 = malloc(sizeof(float) * qd), *o2 = malloc(sizeof(float) * qd);
		float *att = malloc(sizeof(float) * (NH * (POS + 1) + (size_t)hs));
		if (!kc || !vc || !kr || !vr || !kh || !vh || !q || !o0 || !o1 || !o2 || !att) {
			worst = INFINITY;
		} else {
			fill(kc, kvn, 1.0f);
			fill(vc, kvn, 1.0f);
			fill(q, qd, 1.0f);
			ref->attention(o0, q, kc, vc, NF_KV_F32, POS, 0, NH, NH, NKV, hs, hstride * sizeof(float), att);
			ops->attention(o1, q, kc, vc, NF_KV_F32, POS, 0, 2, NH, NKV, hs, hstride * sizeof(float), att);
			ops->attention(o1, q, kc, vc, NF_KV_F32, POS, 2, NH, NH, NKV, hs, hstride * sizeof(float), att);
			worst = fmax(worst, rel_err(o1, o0, qd));
			for (size_t i = 0; i < kvn; i++) {
				kh[i] = nf_f32_to_f16(kc[i]);
				vh[i] = nf_f32_to_f16(vc[i]);
				kr[i] = nf_f16_to_f32(kh[i]);
				vr[i] = nf_f16_to_f32(vh[i]);
			}
			ref->attention(o2, q, kh, vh, NF_KV_F16, POS, 0, NH, NH, NKV, hs, hstride * sizeof(uint16_t), att);
			drift = fmax(drift, rel_err(o2, o0, qd));
			ops->attention(o1, q, kh, vh, NF_KV_F16, POS, 0, 3, NH, NKV, hs, hstride * sizeof(uint16_t), att);
			ops->attention(o1, q, kh, vh, NF_KV_F16, POS, 3, NH, NH, NKV, hs, hstride * sizeof(uint16_t), att);
			worst_h = fmax(worst_h, rel_err(o1, o2, qd));
			ops->attention(o2, q, kr, vr, NF_KV_F32, POS, 0, NH, NH, NKV, hs, hstride * sizeof(float), att);
			worst_rounded = fmax(worst_rounded, rel_err(o1, o2, qd));
		}
		free(kc);
		free(vc);
		free(kr);
		free(vr);
		free(kh);
		free(vh);
		free(q);
		free(o0);
		free(o1);
		free(o2);
		free(att);
	}
	ok(worst < 1e-5, "%s attention at head sizes 64 and 24 (rel err %.2e)", ops->name, worst);
	ok(worst_h < 1e-5, "%s attention over a half cache (rel err %.2e)", ops->name, worst_h);
	ok(worst_rounded < 1e-6, "%s half cache reads as its rounded floats (rel err %.2e)", ops->name,
	   worst_rounded);
	ok(drift > 0 && drift < 2e-3, "a half cache changes attention by %.2e (rounding, not garbage)",
	   drift);
}

int main(void)
{
	const nf_backend_ops *ref = &nf_cpu_scalar_ops;
	const nf_backend_ops *const *fam = nf_cpu_families();
	int n = 0;
	for (size_t i = 0; fam[i]; i++, n++) {
		if (!fam[i]->available()) {
			skip("kernel family %s: this CPU lacks its instructions", fam[i]->name);
			continue;
		}
		check_gemm(fam[i], ref);
		check_gemm_batch(fam[i], ref);
		check_gemm_tiled(fam[i]);
		check_small_ops(fam[i], ref);
		check_attention_sizes(fam[i], ref);
		ok(nf_cpu_find(fam[i]->name) == fam[i], "%s found by name", fam[i]->name);
	}
	ok(n >= 3, "three kernel families");
	check_layout();
	ok(nf_cpu_best()->available(), "best family (%s) runs here", nf_cpu_best()->name);
	ok(nf_cpu_find("no-such") == NULL, "unknown family not found");

	/* int8 quantization round trip error is at most half a step */
	float w[300], back[300], s;
	int8_t q[300];
	fill(w, 300, 0.5f);
	nf_quant_int8_rows(q, &s, w, 1, 300);
	nf_quant_int8_dequant_row(back, q, s, 300);
	double worst = 0;
	for (int i = 0; i < 300; i++)
		worst = fmax(worst, fabs((double)back[i] - w[i]));
	ok(worst <= s * 0.5 + 1e-7, "int8 round trip within half a step (%.3g <= %.3g)", worst, s * 0.5);

	return done_testing();
}
