/*
 * nf_preempt.c - how much of its CPUs' time this machine is not given:
 * the noise that a benchmark on a shared VM cannot see in its own figures.
 *
 *   nf_preempt [--threads N] [--ms N] [--gap-us N]
 *
 * `threads` (default: online CPUs) threads each read the monotonic clock
 * in a loop for `ms` milliseconds (default 500); two readings further
 * apart than `gap-us` microseconds (default 10; a reading takes ~30 ns)
 * are time in which the thread did not run: the hypervisor ran another
 * guest's vCPU, or this machine another process (so it reads the host's
 * share only on an otherwise idle machine).  Prints
 *
 *   lost_pct=<x> max_gap_us=<y> gaps=<n> threads=<t> ms=<m>
 *
 * lost_pct: the gaps' total over the threads' total time, in percent;
 * max_gap_us: the longest gap.  A decode step with a barrier per matrix
 * waits for the slowest thread, so a few percent lost here cost it much
 * more (docs/benchmarks.md, session 11).  Exit 0, 2 on bad arguments, 4
 * when threads cannot be had.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "tests/tools/long_opts.h"
#include "util/error.h"

#include "util/banned.h"

#define MAX_THREADS 256

typedef struct probe {
	int64_t run_ns, gap_ns;         /* in */
	int64_t lost_ns, max_ns, gaps; /* out */
	int64_t spent_ns;               /* out: the loop's own length */
} probe;

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *spin(void *arg)
{
	probe *p = arg;
	int64_t start = now_ns(), last = start;
	while (last - start < p->run_ns) {
		int64_t t = now_ns(), d = t - last;
		if (d > p->gap_ns) {
			p->lost_ns += d;
			p->gaps++;
			if (d > p->max_ns)
				p->max_ns = d;
		}
		last = t;
	}
	p->spent_ns = last - start;
	return NULL;
}

int main(int argc, char **argv)
{
	long threads = sysconf(_SC_NPROCESSORS_ONLN), ms = 500, gap_us = 10;
	pthread_t tid[MAX_THREADS];
	probe pr[MAX_THREADS];
	int64_t lost = 0, spent = 0, longest = 0, gaps = 0;
	int started = 0, err = 0;

	if (threads < 1)
		threads = 1;
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	const long_opt opts[] = {
		{"--threads", &threads, MAX_THREADS}, {"--ms", &ms, 600000}, {"--gap-us", &gap_us, 1000000}};
	if ((err = long_opts_parse(opts, sizeof opts / sizeof opts[0], argc, argv)) == 1) {
		fprintf(stderr, "usage: nf_preempt [--threads N] [--ms N] [--gap-us N]\n");
		return NF_EXIT_INPUT;
	}
	if (err)
		goto fail;
	for (long i = 0; i < threads; i++) {
		pr[i] = (probe){.run_ns = (int64_t)ms * 1000000, .gap_ns = (int64_t)gap_us * 1000};
		if (pthread_create(&tid[i], NULL, spin, &pr[i]) != 0) {
			err = nf_error_set(NF_EENV, "cannot start thread %ld", i + 1);
			break;
		}
		started++;
	}
	for (int i = 0; i < started; i++) {
		pthread_join(tid[i], NULL);
		lost += pr[i].lost_ns;
		spent += pr[i].spent_ns;
		gaps += pr[i].gaps;
		if (pr[i].max_ns > longest)
			longest = pr[i].max_ns;
	}
	if (err)
		goto fail;
	printf("lost_pct=%.2f max_gap_us=%.1f gaps=%lld threads=%ld ms=%ld\n",
	       spent > 0 ? 100.0 * (double)lost / (double)spent : 0.0, (double)longest / 1e3,
	       (long long)gaps, threads, ms);
	return 0;
fail:
	fprintf(stderr, "nf_preempt: %s\n", nf_error_last());
	return nf_error_exit_status(err);
}
