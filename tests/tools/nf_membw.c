/*
 * nf_membw.c - measure memory READ bandwidth, the ceiling of a decode step
 * that streams the weights once per token.
 *
 *   nf_membw [--mb N] [--threads N] [--runs N]
 *
 * Allocates N MiB (default 1024, far larger than any cache), writes every
 * page (so the reads hit real memory, not the shared zero page), then runs
 * 2 x `runs` (default 5) passes in which `threads` (default: online CPUs)
 * threads each stream-read their slice with 64-byte vector loads into
 * independent accumulators; every other pass also prefetches 2 KiB ahead,
 * non-temporal (on some minutes of these VMs that reads faster, and a
 * ceiling below what the engine reads would be no ceiling).  Prints the best pass of either kind, then of each:
 *
 *   read_gb_s=<x> threads=<t> mb=<n> runs=<r> kernel=<k> plain_gb_s=<y> prefetch_gb_s=<z>
 *
 * (GB = 1e9 bytes.)  Exit 0, 2 on bad arguments, 4 when memory or threads
 * cannot be had.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/tools/long_opts.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/parse.h"

#include "util/banned.h"

#define MAX_THREADS 256

/* Native-width vectors: a 64-byte generic vector without AVX-512 is split
 * badly by the compiler and halves the measured bandwidth. */
typedef uint64_t v2u64 __attribute__((vector_size(16)));
typedef uint64_t v4u64 __attribute__((vector_size(32)));
typedef uint64_t v8u64 __attribute__((vector_size(64)));

/* Threads wait for `go` so that they start reading together. */
typedef struct start_gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int go;
} start_gate;

typedef struct worker {
	const unsigned char *p;
	size_t n; /* bytes, a multiple of 256 */
	int prefetch;
	start_gate *gate;
	uint64_t sink;
} worker;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sum n bytes at p (n a multiple of 256) with four accumulators of vector
 * type V, so that the loads, not the adds, are the limit. */
#define READ_BODY(V)                                                                   \
	do {                                                                           \
		const V *v = (const V *)p;                                             \
		size_t nv = n / sizeof(V);                                             \
		V a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                              \
		for (size_t i = 0; i < nv; i += 4) {                                   \
			if (prefetch)                                                  \
				for (size_t b = 0; b < 4 * sizeof(V); b += 64)         \
					__builtin_prefetch((const char *)(v + i) + 2048 + b, 0, 0); \
			a0 += v[i];                                                    \
			a1 += v[i + 1];                                                \
			a2 += v[i + 2];                                                \
			a3 += v[i + 3];                                                \
		}                                                                      \
		a0 += a1 + a2 + a3;                                                    \
		for (size_t k = 0; k < sizeof(V) / 8; k++)                             \
			sum += a0[k];                                                  \
	} while (0)

__attribute__((target("avx512f"))) static uint64_t read_avx512(const unsigned char *p, size_t n, int prefetch)
{
	uint64_t sum = 0;
	READ_BODY(v8u64);
	return sum;
}

__attribute__((target("avx2"))) static uint64_t read_avx2(const unsigned char *p, size_t n, int prefetch)
{
	uint64_t sum = 0;
	READ_BODY(v4u64);
	return sum;
}

static uint64_t read_sse2(const unsigned char *p, size_t n, int prefetch)
{
	uint64_t sum = 0;
	READ_BODY(v2u64);
	return sum;
}

typedef uint64_t (*read_fn)(const unsigned char *p, size_t n, int prefetch);
static read_fn g_read = read_sse2;

static const char *pick_kernel(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f")) {
		g_read = read_avx512;
		return "avx512";
	}
	if (__builtin_cpu_supports("avx2")) {
		g_read = read_avx2;
		return "avx2";
	}
	g_read = read_sse2;
	return "sse2";
}

static void *read_slice(void *arg)
{
	worker *w = arg;

	pthread_mutex_lock(&w->gate->mu);
	while (!w->gate->go)
		pthread_cond_wait(&w->gate->cv, &w->gate->mu);
	pthread_mutex_unlock(&w->gate->mu);
	w->sink = g_read(w->p, w->n, w->prefetch);
	return NULL;
}

/* One pass with t threads; its wall time in seconds in *secs. */
static int one_pass(double *secs, const unsigned char *buf, size_t nblk, int t, int prefetch,
		    uint64_t *sink)
{
	pthread_t tid[MAX_THREADS];
	worker w[MAX_THREADS];
	start_gate gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
	int started = 0, err = 0;
	double t0;

	for (int i = 0; i < t; i++) {
		size_t lo = nblk * (size_t)i / (size_t)t, hi = nblk * (size_t)(i + 1) / (size_t)t;
		w[i] = (worker){.p = buf + lo * 256, .n = (hi - lo) * 256, .prefetch = prefetch,
				.gate = &gate};
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
	size_t bytes;
	unsigned char *buf = NULL;
	const char *kernel;
	double best[2] = {0.0, 0.0}; /* plain, prefetched */
	uint64_t sink = 0;
	int err = 0;

	if (threads < 1)
		threads = 1;
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	const long_opt opts[] = {{"--mb", &mb, 1L << 20}, {"--threads", &threads, MAX_THREADS}, {"--runs", &runs, 1000}};
	if ((err = long_opts_parse(opts, sizeof opts / sizeof opts[0], argc, argv)) == 1) {
		fprintf(stderr, "usage: nf_membw [--mb N] [--threads N] [--runs N]\n");
		return NF_EXIT_INPUT;
	}
	if (err)
		goto fail;
	if (!nf_size_mul(&bytes, (size_t)mb, (size_t)1 << 20)) {
		err = nf_error_set(NF_EINPUT, "--mb too large");
		goto fail;
	}
	kernel = pick_kernel();
	/* The engine keeps its weights on 2 MiB pages (engine.c); the ceiling
	 * must read memory the same way, or the engine "beats" it by TLB misses. */
	if (posix_memalign((void **)&buf, (size_t)2 << 20, bytes) != 0) {
		buf = NULL;
		err = nf_error_set(NF_ENOMEM, "cannot allocate %ld MiB", mb);
		goto fail;
	}
	madvise(buf, bytes, MADV_HUGEPAGE);
	memset(buf, 0x5a, bytes);
	/* runs passes of each kind, interleaved, so a change of the host's
	 * bandwidth during the measurement reaches both alike */
	for (long r = 0; r < 2 * runs; r++) {
		double secs = 0.0, gbs;
		int pf = (int)(r & 1);
		if ((err = one_pass(&secs, buf, bytes / 256, (int)threads, pf, &sink)))
			goto fail;
		gbs = secs > 0.0 ? (double)bytes / secs / 1e9 : 0.0;
		if (gbs > best[pf])
			best[pf] = gbs;
	}
	/* sink keeps the reads alive; it is the same for every pass. */
	printf("read_gb_s=%.2f threads=%ld mb=%ld runs=%ld kernel=%s plain_gb_s=%.2f "
	       "prefetch_gb_s=%.2f sink=%llu\n",
	       best[0] > best[1] ? best[0] : best[1], threads, mb, runs, kernel, best[0], best[1],
	       (unsigned long long)(sink & 0xff));
	free(buf);
	return 0;
fail:
	free(buf);
	fprintf(stderr, "nf_membw: %s\n", nf_error_last());
	return nf_error_exit_status(err);
}
