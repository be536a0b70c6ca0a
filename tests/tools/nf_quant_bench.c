/*
 * nf_quant_bench.c - quantization throughput: how fast an engine build turns
 * float32 weights into each format, in GB/s of float32 input.
 *
 *   nf_quant_bench [--mb N] [--threads N] [--runs N] [--group G]
 *
 * Fills an N MiB (default 256) float32 matrix of 4096 columns with
 * Gaussian-like weights, then quantizes it into every weight format
 * (engine/wformat.h) with the engine build's row-parallel quantizer
 * (nf_quantize_rows) on `threads` threads (default: online CPUs), best of
 * `runs` (default 3).  One line per format:
 *
 *   format=<name> gb_s=<x> seconds=<best> mb=<n> threads=<t> group=<g>
 *
 * Exit 0, 2 on bad arguments, 4 when memory or threads cannot be had.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/cpu/cpu.h"
#include "engine/engine_quantize.h"
#include "engine/wformat.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/banned.h"

#define COLS 4096

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sum of four uniforms, centred: close enough to a layer's weights for the
 * int4 search to do its usual amount of work. */
static void fill(float *w, size_t n)
{
	uint64_t s = 0x9e3779b97f4a7c15u;
	for (size_t i = 0; i < n; i++) {
		float a = 0;
		for (int k = 0; k < 4; k++) {
			s ^= s << 13, s ^= s >> 7, s ^= s << 17;
			a += (float)(s >> 40) / (float)(1u << 24);
		}
		w[i] = (a - 2.0f) * 0.05f;
	}
}

static int parse_args(int argc, char **argv, long *mb, long *threads, long *runs, long *group)
{
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		long *dst = !strcmp(argv[i], "--mb")        ? mb
			    : !strcmp(argv[i], "--threads") ? threads
			    : !strcmp(argv[i], "--runs")    ? runs
			    : !strcmp(argv[i], "--group")   ? group
							    : NULL;
		if (!dst || !v || nf_parse_long(dst, v, dst == threads ? 0 : 1, 1 << 16, argv[i])) {
			fprintf(stderr, "usage: nf_quant_bench [--mb N] [--threads N] [--runs N] [--group G]\n");
			return 2;
		}
		i++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	long mb = 256, threads = 0, runs = 3, group = 32;
	nf_pool *pool = NULL;
	if (parse_args(argc, argv, &mb, &threads, &runs, &group))
		return 2;
	size_t rows = (size_t)mb * (1u << 20) / (COLS * sizeof(float));
	float *w = malloc(rows * COLS * sizeof(float));
	void *data = malloc(rows * COLS * sizeof(float)), *aux = malloc(rows * COLS);
	if (!w || !data || !aux || nf_pool_new(&pool, (int)threads)) {
		fprintf(stderr, "nf_quant_bench: out of memory or threads\n");
		return 4;
	}
	fill(w, rows * COLS);
	for (int k = 0; k < NF_QUANT_KIND_COUNT; k++) {
		const nf_wformat *f = nf_wformat_of((nf_quant_kind)k);
		double best = -1;
		for (long r = 0; r < runs; r++) {
			double t0 = now_s();
			if (nf_quantize_rows(pool, f, data, aux, w, rows, COLS, (int)group)) {
				fprintf(stderr, "nf_quant_bench: %s: %s\n", f->name, nf_error_last());
				return 2;
			}
			double t = now_s() - t0;
			best = best < 0 || t < best ? t : best;
		}
		printf("format=%s gb_s=%.2f seconds=%.4f mb=%ld threads=%d group=%ld\n", f->name,
		       (double)rows * COLS * sizeof(float) / best / 1e9, best, mb, nf_pool_threads(pool),
		       group);
	}
	nf_pool_free(pool);
	free(w);
	free(data);
	free(aux);
	return 0;
}
