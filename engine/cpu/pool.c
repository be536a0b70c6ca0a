/*
 * pool.c - a small persistent thread pool: workers are created once (one
 * per CPU, optionally pinned) and wait for the next job on a generation
 * counter: they spin for SPIN_NS (~50 us; a decode step issues a few hundred
 * jobs back to back, so within and between steps they never sleep) and then
 * sleep on a futex, so an idle engine (a server between requests) burns no
 * core.  Posting a job costs one atomic load when nobody sleeps, and one
 * FUTEX_WAKE when somebody does.  The caller runs as thread 0, so a
 * one-thread pool has no workers.  NF_PIN_THREADS=1 pins worker i to CPU i.
 *
 * A job is a range of units.  Each thread owns a contiguous share and works
 * through it from the front, so its reads stay one sequential stream that
 * the prefetchers follow from claim to claim; a thread whose share is done
 * steals from the back of the share with the most left.  A claim takes at
 * most a grain and at most half of what is left, so claims shrink towards
 * the end and the threads finish close together (a shared counter of
 * equal chunks left up to a whole chunk of waiting at every job's end), and
 * a descheduled thread's share is taken over.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "engine/cpu/cpu.h"
#include "util/error.h"
#include "util/banned.h"

#define SPIN_NS 50000L /* how long an idle worker spins before it sleeps */

/* One thread's share of the current job: generation (24 bits) | front
 * (20) | back (20), units [front, back) not yet claimed.  The owner claims
 * from the front and thieves from the back, each by a CAS that also checks
 * the generation, so a worker that wakes late never touches a later job's
 * share.  Each on its own cache line. */
typedef struct share {
	_Alignas(64) _Atomic uint64_t v;
} share;

struct nf_pool {
	int n;                     /* threads including the caller */
	pthread_t *th;             /* n - 1 workers */
	int started;               /* workers actually created */
	share *shares;             /* n */
	/* generation of the current job: workers watch it for new work */
	_Alignas(64) _Atomic uint32_t gen;
	_Alignas(64) _Atomic int done; /* units of the current job finished */
	/* sleepers: workers in (or entering) futex_wait on wake_seq, which the
	 * poster bumps before FUTEX_WAKE.  A worker reads wake_seq, counts
	 * itself in sleepers, then re-checks gen; the poster publishes gen, then
	 * reads sleepers (all seq_cst): either the poster sees the sleeper and
	 * wakes it, or the sleeper sees the new job. */
	_Alignas(64) _Atomic int sleepers;
	_Atomic uint32_t wake_seq;
	_Atomic int stop;
	nf_pool_range_fn fn;
	void *ctx;
	int grain;
	/* nf_pool_run_chunks runs through a range job of its own */
	nf_pool_chunk_fn chunk_fn;
	void *chunk_ctx;
};

#define GEN_MASK 0xffffffu
#define SH_BACK(v) ((uint32_t)((v) & 0xfffffu))
#define SH_FRONT(v) ((uint32_t)(((v) >> 20) & 0xfffffu))
#define SH_GEN(v) ((uint32_t)((v) >> 40))
#define SH_MAKE(gen, front, back) (((uint64_t)(gen) << 40) | ((uint64_t)(front) << 20) | (uint64_t)(back))

typedef struct worker_arg {
	nf_pool *p;
	int tid;
} worker_arg;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Claim units of share sh of generation gen, from the front (owner) or the
 * back (thief): at most `grain`, and at most half of what is left (rounded
 * up), so a claim never takes what another thread could be sharing by
 * now.  1 and [*u0, *u1), or 0 when the share is empty. */
static int claim(share *sh, uint32_t gen, uint32_t grain, int from_back, uint32_t *u0, uint32_t *u1)
{
	uint64_t v = atomic_load_explicit(&sh->v, memory_order_acquire);
	for (;;) {
		uint32_t front = SH_FRONT(v), back = SH_BACK(v);
		if (SH_GEN(v) != gen || front >= back)
			return 0;
		uint32_t half = (back - front + 1) / 2, k = grain < half ? grain : half;
		uint64_t nv = from_back ? SH_MAKE(gen, front, back - k) : SH_MAKE(gen, front + k, back);
		if (atomic_compare_exchange_weak_explicit(&sh->v, &v, nv, memory_order_acq_rel,
							   memory_order_acquire)) {
			*u0 = from_back ? back - k : front;
			*u1 = from_back ? back : front + k;
			return 1;
		}
	}
}

static void run(nf_pool *p, uint32_t u0, uint32_t u1, int tid)
{
	p->fn(p->ctx, (int)u0, (int)u1, tid);
	atomic_fetch_add_explicit(&p->done, (int)(u1 - u0), memory_order_release);
}

/* Work on job gen until every share is claimed: thread tid's own share
 * first, then pieces of the others'. */
static void drain(nf_pool *p, uint32_t gen, int tid)
{
	uint32_t u0, u1;
	while (claim(&p->shares[tid], gen, (uint32_t)p->grain, 0, &u0, &u1))
		run(p, u0, u1, tid);
	for (;;) {
		int victim = -1;
		uint32_t most = 0;
		for (int i = 0; i < p->n; i++) {
			uint64_t v = atomic_load_explicit(&p->shares[i].v, memory_order_relaxed);
			if (SH_GEN(v) == gen && SH_FRONT(v) < SH_BACK(v) && SH_BACK(v) - SH_FRONT(v) > most) {
				most = SH_BACK(v) - SH_FRONT(v);
				victim = i;
			}
		}
		if (victim < 0)
			return;
		if (claim(&p->shares[victim], gen, (uint32_t)p->grain, 1, &u0, &u1))
			run(p, u0, u1, tid);
	}
}

static long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
	/* returns at once if *addr != val; EINTR and spurious wake-ups are fine:
	 * the caller loops */
	(void)syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
	(void)syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Wake the sleeping workers, if any (after a new state or stop is stored). */
static void wake_sleepers(nf_pool *p)
{
	if (atomic_load(&p->sleepers) > 0) {
		atomic_fetch_add(&p->wake_seq, 1);
		futex_wake_all(&p->wake_seq);
	}
}

static int nothing_new(nf_pool *p, uint32_t seen, uint32_t *gen)
{
	*gen = atomic_load_explicit(&p->gen, memory_order_acquire);
	return *gen == seen && !atomic_load_explicit(&p->stop, memory_order_acquire);
}

static void *worker_main(void *arg)
{
	worker_arg *wa = arg;
	nf_pool *p = wa->p;
	int tid = wa->tid;
	free(wa);
	uint32_t seen = 0;
	for (;;) {
		uint32_t gen;
		long t0 = -1;
		int spins = 0;
		while (nothing_new(p, seen, &gen)) {
			cpu_relax();
			if ((++spins & 63) != 0)
				continue;
			if (t0 < 0) {
				t0 = now_ns();
				continue;
			}
			if (now_ns() - t0 < SPIN_NS)
				continue;
			uint32_t w = atomic_load(&p->wake_seq);
			atomic_fetch_add(&p->sleepers, 1);
			if (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
				futex_wait(&p->wake_seq, w);
			atomic_fetch_sub(&p->sleepers, 1);
			t0 = -1; /* woken: spin again before the next sleep */
		}
		if (atomic_load_explicit(&p->stop, memory_order_acquire))
			break;
		seen = gen;
		drain(p, seen, tid);
	}
	return NULL;
}

static void pin(pthread_t t, int cpu)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu <= 1)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu % (int)ncpu, &set);
	(void)pthread_setaffinity_np(t, sizeof set, &set); /* best effort */
}

int nf_pool_new(nf_pool **out, int threads)
{
	nf_pool *p = NULL;
	*out = NULL;
	if (threads <= 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		threads = c > 0 ? (int)c : 1;
	}
	if (threads > 256)
		threads = 256;
	p = aligned_alloc(64, sizeof *p);
	if (p)
		memset(p, 0, sizeof *p);
	if (!p)
		return nf_error_set(NF_ENOMEM, "thread pool: out of memory");
	/* Pinning helps on an idle machine and hurts badly when other processes
	 * share the cores (a pinned worker cannot move), so it is opt-in. */
	const char *pv = getenv("NF_PIN_THREADS");
	int pin_threads = pv && pv[0] == '1';
	p->n = threads;
	p->shares = aligned_alloc(64, (size_t)threads * sizeof *p->shares);
	if (!p->shares) {
		nf_pool_free(p);
		return nf_error_set(NF_ENOMEM, "thread pool: out of memory");
	}
	memset(p->shares, 0, (size_t)threads * sizeof *p->shares);
	if (threads > 1) {
		p->th = calloc((size_t)threads - 1, sizeof *p->th);
		if (!p->th) {
			nf_pool_free(p);
			return nf_error_set(NF_ENOMEM, "thread pool: out of memory");
		}
	}
	for (int i = 1; i < threads; i++) {
		worker_arg *wa = malloc(sizeof *wa);
		if (!wa) {
			nf_pool_free(p);
			return nf_error_set(NF_ENOMEM, "thread pool: out of memory");
		}
		wa->p = p;
		wa->tid = i;
		if (pthread_create(&p->th[i - 1], NULL, worker_main, wa) != 0) {
			free(wa);
			nf_pool_free(p);
			return nf_error_set(NF_EENV, "thread pool: cannot create thread %d", i);
		}
		p->started++;
		if (pin_threads)
			pin(p->th[i - 1], i);
	}
	*out = p;
	return 0;
}

void nf_pool_free(nf_pool *p)
{
	if (!p)
		return;
	atomic_store(&p->stop, 1);
	wake_sleepers(p);
	for (int i = 0; i < p->started; i++)
		pthread_join(p->th[i], NULL);
	free(p->th);
	free(p->shares);
	free(p);
}

int nf_pool_threads(const nf_pool *p)
{
	return p ? p->n : 1;
}

void nf_pool_run_ranges(nf_pool *p, nf_pool_range_fn fn, void *ctx, int units, int grain)
{
	if (units <= 0)
		return;
	if (grain < 1)
		grain = 1;
	if (p->n <= 1 || units == 1 || units > NF_POOL_MAX_UNITS) {
		for (int u = 0; u < units; u += grain)
			fn(ctx, u, units - u < grain ? units : u + grain, 0);
		return;
	}
	uint32_t gen = (atomic_load_explicit(&p->gen, memory_order_relaxed) + 1) & GEN_MASK;
	if (gen == 0)
		gen = 1; /* workers start having seen generation 0 */
	p->fn = fn;
	p->ctx = ctx;
	p->grain = grain;
	for (int t = 0; t < p->n; t++) {
		uint32_t a = (uint32_t)((long)units * t / p->n), b = (uint32_t)((long)units * (t + 1) / p->n);
		atomic_store_explicit(&p->shares[t].v, SH_MAKE(gen, a, b), memory_order_relaxed);
	}
	atomic_store_explicit(&p->done, 0, memory_order_relaxed);
	atomic_store(&p->gen, gen); /* seq_cst: publishes the shares; see sleepers */
	wake_sleepers(p);
	drain(p, gen, 0);
	int spins = 0;
	while (atomic_load_explicit(&p->done, memory_order_acquire) < units) {
		cpu_relax();
		if ((++spins & 255) == 0)
			sched_yield();
	}
}

static void chunks_as_range(void *ctx, int u0, int u1, int tid)
{
	nf_pool *p = ctx;
	for (int i = u0; i < u1; i++)
		p->chunk_fn(p->chunk_ctx, i, tid);
}

void nf_pool_run_chunks(nf_pool *p, nf_pool_chunk_fn fn, void *ctx, int chunks)
{
	p->chunk_fn = fn;
	p->chunk_ctx = ctx;
	nf_pool_run_ranges(p, chunks_as_range, p, chunks, 1);
}
