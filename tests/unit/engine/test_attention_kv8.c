/*
 * test_attention_kv8.c - attention over an int8 KV cache (NF_KV_INT8):
 * every kernel family against the scalar reference at several head sizes,
 * GQA groupings and positions (1, 2, 63, 64, 65, 1000 rows), heads split
 * across calls, the cache rows' layout, and the error the int8 cache adds
 * against a float cache of the same values.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu.h"
#include "engine/kv_kind.h"
#include "engine/quant.h"
#include "tests/tap.h"
#include "util/error.h"

static unsigned rng_state = 12345u;

static float frand(void)
{
	rng_state = rng_state * 1103515245u + 12345u;
	return (float)((rng_state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static double rel_err(const float *a, const float *b, size_t n)
{
	double num = 0, den = 1e-30;
	for (size_t i = 0; i < n; i++) {
		num = fmax(num, fabs((double)a[i] - b[i]));
		den = fmax(den, fabs((double)b[i]));
	}
	return num / den;
}

/* One attention case: n_heads query heads over n_kv KV heads of hs, rows
 * 0..pos, the cache's heads (rows + 3) rows apart (the stride is honoured). */
typedef struct kv_case {
	int n_heads, n_kv, hs, pos;
	size_t rows;          /* rows per head in the cache */
	size_t rb8;           /* bytes of an int8 row */
	float *kf, *vf;       /* (n_kv, rows, hs) the float values */
	float *kd, *vd;       /* the same, dequantized from the int8 rows */
	char *k8, *v8;        /* (n_kv, rows) int8 rows: scale, then hs int8 */
	float *q, *att;
} kv_case;

/* Quantize float row x into an int8 cache row at dst, and its dequantized
 * values into back. */
static void put_row(char *dst, float *back, const float *x, size_t hs)
{
	int8_t *q = (int8_t *)(dst + sizeof(float));
	float s = nf_quant_int8_vec(q, x, hs);
	memcpy(dst, &s, sizeof s);
	for (size_t i = 0; i < hs; i++)
		back[i] = s * (float)q[i];
}

static int case_init(kv_case *c, int n_heads, int n_kv, int hs, int pos)
{
	memset(c, 0, sizeof *c);
	c->n_heads = n_heads;
	c->n_kv = n_kv;
	c->hs = hs;
	c->pos = pos;
	c->rows = (size_t)pos + 4;
	c->rb8 = nf_kv_row_bytes(NF_KV_INT8, (size_t)hs);
	size_t nf = (size_t)n_kv * c->rows * (size_t)hs, nrow = (size_t)n_kv * c->rows;
	c->kf = malloc(nf * sizeof(float));
	c->vf = malloc(nf * sizeof(float));
	c->kd = malloc(nf * sizeof(float));
	c->vd = malloc(nf * sizeof(float));
	c->k8 = malloc(nrow * c->rb8);
	c->v8 = malloc(nrow * c->rb8);
	c->q = malloc((size_t)n_heads * (size_t)hs * sizeof(float));
	c->att = malloc(((size_t)n_heads * c->rows + (size_t)hs) * sizeof(float));
	if (!c->kf || !c->vf || !c->kd || !c->vd || !c->k8 || !c->v8 || !c->q || !c->att)
		return -1;
	for (size_t i = 0; i < nf; i++) {
		c->kf[i] = 2.0f * frand();
		c->vf[i] = frand();
	}
	/* a row of zeros (scale 0) and a row with one huge value among small ones */
	memset(c->kf, 0, (size_t)hs * sizeof(float));
	c->vf[(size_t)hs + 3] = 40.0f;
	for (size_t i = 0; i < (size_t)n_heads * (size_t)hs; i++)
		c->q[i] = 1.5f * frand();
	for (size_t r = 0; r < nrow; r++) {
		size_t at = r * (size_t)hs;
		put_row(c->k8 + r * c->rb8, c->kd + at, c->kf + at, (size_t)hs);
		put_row(c->v8 + r * c->rb8, c->vd + at, c->vf + at, (size_t)hs);
	}
	return 0;
}

static void case_release(kv_case *c)
{
	free(c->kf);
	free(c->vf);
	free(c->kd);
	free(c->vd);
	free(c->k8);
	free(c->v8);
	free(c->q);
	free(c->att);
}

/* Heads [0, n_heads) in two calls split at `split` (0: one call). */
static void run_int8(const nf_backend_ops *ops, kv_case *c, float *out, int split)
{
	size_t hstride = c->rows * c->rb8;
	if (split <= 0 || split >= c->n_heads) {
		ops->attention(out, c->q, c->k8, c->v8, NF_KV_INT8, c->pos, 0, c->n_heads, c->n_heads,
			       c->n_kv, c->hs, hstride, c->att);
		return;
	}
	ops->attention(out, c->q, c->k8, c->v8, NF_KV_INT8, c->pos, 0, split, c->n_heads, c->n_kv,
		       c->hs, hstride, c->att);
	ops->attention(out, c->q, c->k8, c->v8, NF_KV_INT8, c->pos, split, c->n_heads, c->n_heads,
		       c->n_kv, c->hs, hstride, c->att);
}

static void run_f32(kv_case *c, const float *k, const float *v, float *out)
{
	nf_cpu_scalar_ops.attention(out, c->q, k, v, NF_KV_F32, c->pos, 0, c->n_heads, c->n_heads,
				    c->n_kv, c->hs, c->rows * (size_t)c->hs * sizeof(float), c->att);
}

static const int head_sizes[] = {64, 128, 32, 24, 8};
static const int groupings[][2] = {{4, 4}, {6, 3}, {9, 3}, {8, 1}};
static const int positions[] = {0, 1, 62, 63, 64, 999}; /* 1, 2, 63, 64, 65, 1000 rows */
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Every family against scalar over the whole grid; the worst relative
 * error, and whether split calls equal one call bit for bit. */
static void check_family(const nf_backend_ops *ops)
{
	rng_state = 12345u; /* the same cases for every family, however many come first */
	double worst = 0;
	int split_same = 1, cases = 0;
	for (size_t a = 0; a < COUNT(head_sizes); a++)
		for (size_t g = 0; g < COUNT(groupings); g++)
			for (size_t p = 0; p < COUNT(positions); p++) {
				kv_case c;
				int nh = groupings[g][0], hs = head_sizes[a];
				size_t n = (size_t)nh * (size_t)hs;
				float *o0 = malloc(n * sizeof(float)), *o1 = malloc(n * sizeof(float));
				float *o2 = malloc(n * sizeof(float));
				if (!o0 || !o1 || !o2 || case_init(&c, nh, groupings[g][1], hs, positions[p])) {
					worst = INFINITY;
				} else {
					run_int8(&nf_cpu_scalar_ops, &c, o0, 0);
					run_int8(ops, &c, o1, 0);
					run_int8(ops, &c, o2, nh / 2 + 1);
					worst = fmax(worst, rel_err(o1, o0, n));
					split_same &= memcmp(o1, o2, n * sizeof(float)) == 0;
					cases++;
				}
				case_release(&c);
				free(o0);
				free(o1);
				free(o2);
			}
	ok(cases == (int)(COUNT(head_sizes) * COUNT(groupings) * COUNT(positions)) && worst < 2e-6,
	   "%s int8-cache attention matches scalar over %d cases (head sizes 64 128 32 24 8, GQA 1-8, 1-1000 rows; rel err %.2e)",
	   ops->name, cases, worst);
	ok(split_same, "%s int8-cache attention: heads split over two calls equal one call", ops->name);
}

/* The int8 cache against float caches: of the dequantized values (only q's
 * quantization differs) and of the original values (the cache's error). */
static void check_accuracy(void)
{
	double vs_dequant = 0, vs_float = 0, f16_drift = 0;
	for (size_t p = 0; p < COUNT(positions); p++) {
		kv_case c;
		size_t n = 9 * 64;
		float *o8 = malloc(n * sizeof(float)), *od = malloc(n * sizeof(float));
		float *of = malloc(n * sizeof(float));
		if (!o8 || !od || !of || case_init(&c, 9, 3, 64, positions[p])) {
			vs_float = INFINITY;
		} else {
			run_int8(&nf_cpu_scalar_ops, &c, o8, 0);
			run_f32(&c, c.kd, c.vd, od);
			run_f32(&c, c.kf, c.vf, of);
			vs_dequant = fmax(vs_dequant, rel_err(o8, od, n));
			vs_float = fmax(vs_float, rel_err(o8, of, n));
			f16_drift = fmax(f16_drift, rel_err(od, of, n));
		}
		case_release(&c);
		free(o8);
		free(od);
		free(of);
	}
	ok(vs_dequant > 0 && vs_dequant < 2e-2,
	   "int8 cache vs a float cache of its dequantized rows: rel err %.2e (q's per-head int8)",
	   vs_dequant);
	ok(vs_float > 0 && vs_float < 3e-2,
	   "int8 cache vs the float values: rel err %.2e (rounding, not garbage)", vs_float);
	diag("dequantized K/V alone change attention by %.2e", f16_drift);
}

/* A row is its scale then head_size int8: x = scale * q. */
static void check_layout(void)
{
	ok(nf_kv_row_bytes(NF_KV_INT8, 64) == 68 && nf_kv_row_bytes(NF_KV_F16, 64) == 128 &&
		   nf_kv_row_bytes(NF_KV_F32, 64) == 256,
	   "row bytes of head size 64: int8 68, f16 128, f32 256");
	float x[8] = {1.0f, -2.0f, 0.5f, 127.0f, 0, 0, 0, -127.0f};
	char row[4 + 8];
	float back[8];
	put_row(row, back, x, 8);
	ok(nf_cpu_kv8_scale(row) == 1.0f && ((int8_t *)(row + 4))[3] == 127 &&
		   ((int8_t *)(row + 4))[7] == -127 && ((int8_t *)(row + 4))[1] == -2,
	   "an int8 row stores max|x| / 127 first, then x / scale rounded");
	nf_kv_kind k = NF_KV_F32;
	ok(nf_kv_kind_parse(&k, "int8") == 0 && k == NF_KV_INT8 &&
		   strcmp(nf_kv_kind_name(NF_KV_F16), "f16") == 0,
	   "kv kind names: int8 parses, f16 prints");
	ok(nf_kv_kind_parse(&k, NULL) == NF_EINPUT, "a missing kv kind refused");
	ok(nf_kv_kind_parse(&k, "q4") == NF_EINPUT && strstr(nf_error_last(), "'q4'") &&
		   k == NF_KV_INT8,
	   "an unknown kv kind refused, *out untouched: %s", nf_error_last());
}

int main(void)
{
	const nf_backend_ops *const *fam = nf_cpu_families();
	check_layout();
	check_accuracy();
	for (size_t i = 0; fam[i]; i++) {
		if (!fam[i]->available()) {
			skip("%s does not run on this CPU", fam[i]->name);
			continue;
		}
		check_family(fam[i]);
	}
	return done_testing();
}
