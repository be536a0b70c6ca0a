/*
 * nf_attention_bench - the attention kernel alone, per kernel family and KV
 * cache kind, as decode runs it: one query token over `context` cached
 * positions of every layer in turn (so the caches come from memory, as the
 * weights' stream evicts them in a real step):
 *
 *   nf_attention_bench [--context N] [--layers L] [--heads H] [--kv-heads G]
 *                      [--head-size D] [--reps R]
 *       prints per family and kind: family=<f> kv=<kind> us_per_token=<t>
 *       gb_per_s=<cache bytes read / time> (best of R passes over the layers,
 *       in CPU time of the thread)
 *
 * Defaults are SmolLM2-135M's shape (30 layers, 9 heads, 3 KV heads, 64)
 * at 2000 positions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/cpu/cpu.h"
#include "engine/kv_kind.h"
#include "engine/quant.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/banned.h"

static double cpu_s(void)
{
	struct timespec ts;
	/* CPU time of this thread: the build hosts are shared, and a
	 * descheduled thread's wall time says nothing about the kernel */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct shape {
	long context, layers, heads, kv_heads, head_size, reps;
} shape;

/* Fill a cache of `rows` rows of kind from pseudo-random floats. */
static void fill_cache(char *c, nf_kv_kind kind, size_t rows, size_t hs, unsigned *seed)
{
	float *x = malloc(hs * sizeof(float));
	size_t rb = nf_kv_row_bytes(kind, hs);
	for (size_t r = 0; x && r < rows; r++) {
		for (size_t i = 0; i < hs; i++) {
			*seed = *seed * 1103515245u + 12345u;
			x[i] = (float)((*seed >> 9) & 0xffff) / 32768.0f - 1.0f;
		}
		char *row = c + r * rb;
		if (kind == NF_KV_F32)
			memcpy(row, x, hs * sizeof(float));
		else if (kind == NF_KV_F16)
			nf_cpu_to_f16_ref((uint16_t *)row, x, (int)hs);
		else {
			float s = nf_quant_int8_vec((int8_t *)(row + sizeof(float)), x, hs);
			memcpy(row, &s, sizeof s);
		}
	}
	free(x);
}

/* Best seconds per pass over the layers of one family and kind. */
static double time_kind(const nf_backend_ops *ops, nf_kv_kind kind, const shape *sh, size_t *bytes)
{
	size_t hs = (size_t)sh->head_size, rows = (size_t)sh->context;
	size_t hstride = rows * nf_kv_row_bytes(kind, hs), layer = (size_t)sh->kv_heads * hstride;
	size_t qn = (size_t)sh->heads * hs;
	char *k = malloc(layer * (size_t)sh->layers), *v = malloc(layer * (size_t)sh->layers);
	float *q = malloc(qn * sizeof(float)), *out = malloc(qn * sizeof(float));
	float *att = malloc(((size_t)sh->heads * rows + hs) * sizeof(float));
	double best = 1e30;
	unsigned seed = 7;
	if (!k || !v || !q || !out || !att)
		goto done;
	fill_cache(k, kind, (size_t)sh->kv_heads * rows * (size_t)sh->layers, hs, &seed);
	fill_cache(v, kind, (size_t)sh->kv_heads * rows * (size_t)sh->layers, hs, &seed);
	for (size_t i = 0; i < qn; i++)
		q[i] = (float)(i % 17) / 17.0f - 0.5f;
	for (long r = 0; r < sh->reps; r++) {
		double t0 = cpu_s();
		for (long l = 0; l < sh->layers; l++)
			ops->attention(out, q, k + (size_t)l * layer, v + (size_t)l * layer, kind,
				       (int)sh->context - 1, 0, (int)sh->heads, (int)sh->heads,
				       (int)sh->kv_heads, (int)hs, hstride, att);
		double dt = cpu_s() - t0;
		best = dt < best ? dt : best;
	}
	*bytes = 2 * layer * (size_t)sh->layers;
done:
	free(k);
	free(v);
	free(q);
	free(out);
	free(att);
	return best;
}

int main(int argc, char **argv)
{
	shape sh = {2000, 30, 9, 3, 64, 5};
	struct {
		const char *flag;
		long *at, lo, hi;
	} opts[] = {
		{"--context", &sh.context, 1, 1 << 20}, {"--layers", &sh.layers, 1, 1024},
		{"--heads", &sh.heads, 1, 1024},        {"--kv-heads", &sh.kv_heads, 1, 1024},
		{"--head-size", &sh.head_size, 2, 4096}, {"--reps", &sh.reps, 1, 1000},
	};
	for (int i = 1; i < argc; i++) {
		size_t o = 0;
		while (o < sizeof opts / sizeof opts[0] && strcmp(argv[i], opts[o].flag) != 0)
			o++;
		if (o == sizeof opts / sizeof opts[0] || i + 1 >= argc ||
		    nf_parse_long(opts[o].at, argv[++i], opts[o].lo, opts[o].hi, opts[o].flag)) {
			fprintf(stderr, "usage: nf_attention_bench [--context N] [--layers L] [--heads H] "
					"[--kv-heads G] [--head-size D] [--reps R]\n");
			return NF_EXIT_INPUT;
		}
	}
	if (sh.heads % sh.kv_heads != 0) {
		fprintf(stderr, "nf_attention_bench: --heads must be a multiple of --kv-heads\n");
		return NF_EXIT_INPUT;
	}
	const nf_backend_ops *const *fam = nf_cpu_families();
	for (size_t f = 0; fam[f]; f++) {
		if (!fam[f]->available())
			continue;
		for (int kind = NF_KV_F16; kind <= NF_KV_INT8; kind++) {
			size_t bytes = 0;
			double t = time_kind(fam[f], (nf_kv_kind)kind, &sh, &bytes);
			printf("family=%s kv=%s context=%ld us_per_token=%.1f gb_per_s=%.2f\n", fam[f]->name,
			       nf_kv_kind_name((nf_kv_kind)kind), sh.context, t * 1e6, (double)bytes / t / 1e9);
		}
	}
	return 0;
}
