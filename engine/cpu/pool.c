/*
 * pool.c - a small persistent thread pool: workers are created once (one
 * per CPU, optionally pinned) and wait for the next job on a generation
 * counter: they spin for SPIN_NS (~50 us; a decode step issues a few hundred
 * jobs back to back, so within and between steps they never sleep) and then
 * sleep on a futex, so an idle engine (a server between requests) burns no
 * core.  Posting a job costs one atomic load when nobody sleeps, and one
 * FUTEX_WAKE when somebody does.  The caller runs as thread 0, so a
 * one-thread pool has no workers.  NF_PIN_THREADS=1 pins worker i to CPU i.
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

struct nf_pool {
	int n;                     /* threads including the caller */
	pthread_t *th;             /* n - 1 workers */
	int started;               /* workers actually created */
	/* job state: generation (24 bits) | chunk count (20) | next chunk (20).
	 * A chunk is claimed by a CAS that also checks the generation, so a
	 * worker that wakes late finds nothing to do and never touches a
	 * finished job; the caller waits only for claimed chunks to be done. */
	/* state, done and the rest each on their own cache line: a worker
	 * bumping `done` must not steal the line the others claim from. */
	_Alignas(64) _Atomic uint64_t state;
	_Alignas(64) _Atomic int done; /* chunks of the current job finished */
	/* sleepers: workers in (or entering) futex_wait on wake_seq, which the
	 * poster bumps before FUTEX_WAKE.  A worker reads wake_seq, counts
	 * itself in sleepers, then re-checks the job state; the poster publishes
	 * the state, then reads sleepers (all seq_cst): either the poster sees
	 * the sleeper and wakes it, or the sleeper sees the new job. */
	_Alignas(64) _Atomic int sleepers;
	_Atomic uint32_t wake_seq;
	_Atomic int stop;
	nf_pool_chunk_fn fn;
	void *ctx;
};

#define ST_IDX(v) ((uint32_t)((v) & 0xfffffu))
#define ST_TOTAL(v) ((uint32_t)(((v) >> 20) & 0xfffffu))
#define ST_GEN(v) ((uint32_t)((v) >> 40))

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

/* Claim and run chunks of generation gen until none are left. */
static void drain(nf_pool *p, uint32_t gen, int tid)
{
	uint64_t v = atomic_load_explicit(&p->state, memory_order_acquire);
	for (;;) {
		if (ST_GEN(v) != gen || ST_IDX(v) >= ST_TOTAL(v))
			return;
		if (!atomic_compare_exchange_weak_explicit(&p->state, &v, v + 1, memory_order_acq_rel,
							   memory_order_acquire))
			continue;
		p->fn(p->ctx, (int)ST_IDX(v), tid);
		atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
		v = atomic_load_explicit(&p->state, memory_order_acquire);
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

static int nothing_new(nf_pool *p, uint32_t seen, uint64_t *v)
{
	*v = atomic_load_explicit(&p->state, memory_order_acquire);
	return ST_GEN(*v) == seen && !atomic_load_explicit(&p->stop, memory_order_acquire);
}

static void *worker_main(void *arg)
{
	worker_arg *wa = arg;
	nf_pool *p = wa->p;
	int tid = wa->tid;
	free(wa);
	uint32_t seen = 0;
	for (;;) {
		uint64_t v;
		long t0 = -1;
		int spins = 0;
		while (nothing_new(p, seen, &v)) {
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
			if (ST_GEN(atomic_load(&p->state)) == seen && !atomic_load(&p->stop))
				futex_wait(&p->wake_seq, w);
			atomic_fetch_sub(&p->sleepers, 1);
			t0 = -1; /* woken: spin again before the next sleep */
		}
		if (atomic_load_explicit(&p->stop, memory_order_acquire))
			break;
		seen = ST_GEN(v);
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
	free(p);
}

int nf_pool_threads(const nf_pool *p)
{
	return p ? p->n : 1;
}

void nf_pool_run_chunks(nf_pool *p, nf_pool_chunk_fn fn, void *ctx, int chunks)
{
	if (chunks <= 0)
		return;
	if (p->n <= 1 || chunks == 1 || chunks > NF_POOL_MAX_CHUNKS) {
		for (int i = 0; i < chunks; i++)
			fn(ctx, i, 0);
		return;
	}
	uint32_t gen = (ST_GEN(atomic_load_explicit(&p->state, memory_order_relaxed)) + 1) & 0xffffffu;
	if (gen == 0)
		gen = 1; /* workers start having seen generation 0 */
	p->fn = fn;
	p->ctx = ctx;
	atomic_store_explicit(&p->done, 0, memory_order_relaxed);
	atomic_store(&p->state, ((uint64_t)gen << 40) | ((uint64_t)chunks << 20)); /* seq_cst: see sleepers */
	wake_sleepers(p);
	drain(p, gen, 0);
	int spins = 0;
	while (atomic_load_explicit(&p->done, memory_order_acquire) < chunks) {
		cpu_relax();
		if ((++spins & 255) == 0)
			sched_yield();
	}
}

void nf_pool_split(int *r0, int *r1, int rows, int tid, int n)
{
	long a = (long)rows * tid / n, b = (long)rows * (tid + 1) / n;
	a = (a + 15) & ~15L;
	b = tid == n - 1 ? rows : ((b + 15) & ~15L);
	if (a > rows)
		a = rows;
	if (b > rows)
		b = rows;
	*r0 = (int)a;
	*r1 = (int)(b < a ? a : b);
}
