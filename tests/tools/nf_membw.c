/*
 * nf_membw.c - measure memory READ bandwidth, the ceiling of a decode step
 * that streams the weights once per token.
 *
 *   nf_membw [--mb N] [--threads N] [--runs N]
 *
 * Allocates N MiB (default 1024, far larger than any cache), writes every
 * page (so the reads hit real memory, not the shared zero page), then runs
 * `runs` (default 5) passes in which `threads` (default: online CPUs)
 * threads each stream-read their slice with 64-byte vector loads into
 * independent accumulators.  Prints the best pass:
 *
 *   read_gb_s=<x> threads=<t> mb=<n> runs=<r>
 *
 * (GB = 1e9 bytes.)  Exit 0, 2 on bad arguments, 4 when memory or threads
 * cannot be had.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/parse.h"

#include "util/banned.h"

#define MAX_THREADS 256

typedef uint64_t v8u64 __attribute__((vector_size(64)));

/* Threads wait for `go` so that they start reading together. */
typedef struct start_gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int go;
} start_gate;

typedef struct worker {
	const v8u64 *p;
	size_t n; /* vectors */
	start_gate *gate;
	uint64_t sink;
} worker;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *read_slice(void *arg)
{
	worker *w = arg;
	v8u64 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
	size_t i = 0;

	pthread_mutex_lock(&w->gate->mu);
	while (!w->gate->go)
		pthread_cond_wait(&w->gate->cv, &w->gate->mu);
	pthread_mutex_unlock(&w->gate->mu);
	for (; i + 4 <= w->n; i += 4) {
		a0 += w->p[i];
		a1 += w->p[i + 1];
		a2 += w->p[i + 2];
		a3 += w->p[i + 3];
	}
	for (; i < w->n; i++)
		a0 += w->p[i];
	a0 += a1 + a2 + a3;
	w->sink = 0;
	for (int k = 0; k < 8; k++)
		w->sink += a0[k];
	return NULL;
}

/* One pass with t threads; its wall time in seconds in *secs. */
static int one_pass(double *secs, const v8u64 *buf, size_t nvec, int t, uint64_t *sink)
{
	pthread_t tid[MAX_THREADS];
	worker w[MAX_THREADS];
	start_gate gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
	int started = 0, err = 0;
	double t0;

	for (int i = 0; i < t; i++) {
		size_t lo = nvec * (size_t)i / (size_t)t, hi = nvec * (size_t)(i + 1) / (size_t)t;
		w[i] = (worker){.p = buf + lo, .n = hi - lo, .gate = &gate};
		if (pthread_create(&tid[i], NULL, read_slice, &w[i]) != 0) {
			err = nf_error_set(NF_EENV, "pthread_create failed");
			break;
		}
		started++;
	}
	t0 = now_s();
	pthread_mutex_lock(&gate.mu);
	gate.go = 1;
	pthread_cond_broadcast(&gate.cv);
	pthread_mutex_unlock(&gate.mu);
	for (int i = 0; i < started; i++) {
		pthread_join(tid[i], NULL);
		*sink += w[i].sink;
	}
	*secs = now_s() - t0;
	return err;
}

int main(int argc, char **argv)
{
	long mb = 1024, threads = sysconf(_SC_NPROCESSORS_ONLN), runs = 5;
	size_t bytes, nvec;
	v8u64 *buf = NULL;
	double best = 0.0;
	uint64_t sink = 0;
	int err = 0;

	if (threads < 1)
		threads = 1;
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	for (int i = 1; i < argc; i++) {
		long *dst = NULL, max = 0;
		const char *name = argv[i];
		if (strcmp(name, "--mb") == 0)
			dst = &mb, max = 1L << 20;
		else if (strcmp(name, "--threads") == 0)
			dst = &threads, max = MAX_THREADS;
		else if (strcmp(name, "--runs") == 0)
			dst = &runs, max = 1000;
		if (!dst || i + 1 >= argc) {
			fprintf(stderr, "usage: nf_membw [--mb N] [--threads N] [--runs N]\n");
			return NF_EXIT_INPUT;
		}
		if ((err = nf_parse_long(dst, argv[++i], 1, max, name)))
			goto fail;
	}
	if (!nf_size_mul(&bytes, (size_t)mb, (size_t)1 << 20)) {
		err = nf_error_set(NF_EINPUT, "--mb too large");
		goto fail;
	}
	nvec = bytes / sizeof(v8u64);
	if (posix_memalign((void **)&buf, 4096, bytes) != 0) {
		buf = NULL;
		err = nf_error_set(NF_ENOMEM, "cannot allocate %ld MiB", mb);
		goto fail;
	}
	memset(buf, 0x5a, bytes);
	for (long r = 0; r < runs; r++) {
		double secs = 0.0, gbs;
		if ((err = one_pass(&secs, buf, nvec, (int)threads, &sink)))
			goto fail;
		gbs = secs > 0.0 ? (double)bytes / secs / 1e9 : 0.0;
		if (gbs > best)
			best = gbs;
	}
	/* sink keeps the reads alive; it is the same for every pass. */
	printf("read_gb_s=%.2f threads=%ld mb=%ld runs=%ld sink=%llu\n", best, threads, mb, runs,
	       (unsigned long long)(sink & 0xff));
	free(buf);
	return 0;
fail:
	free(buf);
	fprintf(stderr, "nf_membw: %s\n", nf_error_last());
	return nf_error_exit_status(err);
}
