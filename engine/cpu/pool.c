/*
 * pool.c - a small persistent thread pool: workers are created once, pinned
 * one per CPU, spin briefly on a generation counter for the next job (decode
 * issues a few hundred jobs per token) and then sleep on a condition
 * variable.  The caller runs as thread 0, so a one-thread pool has no workers.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/cpu/cpu.h"
#include "util/error.h"
#include "util/banned.h"

#define SPIN_ROUNDS 200000

struct nf_pool {
	int n;                   /* threads including the caller */
	pthread_t *th;           /* n - 1 workers */
	int started;             /* workers actually created */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	_Atomic unsigned long gen; /* bumped for each job */
	_Atomic int pending;     /* workers still running the current job */
	_Atomic int sleepers;
	_Atomic int stop;
	nf_pool_fn fn;
	void *ctx;
};

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

static void *worker_main(void *arg)
{
	worker_arg *wa = arg;
	nf_pool *p = wa->p;
	int tid = wa->tid;
	free(wa);
	unsigned long seen = 0;
	for (;;) {
		unsigned long g;
		int spins = 0;
		while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
		       !atomic_load_explicit(&p->stop, memory_order_acquire)) {
			if (++spins < SPIN_ROUNDS) {
				cpu_relax();
				if ((spins & 1023) == 0)
					sched_yield();
				continue;
			}
			pthread_mutex_lock(&p->mu);
			atomic_fetch_add(&p->sleepers, 1);
			while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
				pthread_cond_wait(&p->cv, &p->mu);
			atomic_fetch_sub(&p->sleepers, 1);
			pthread_mutex_unlock(&p->mu);
			spins = 0;
		}
		if (atomic_load_explicit(&p->stop, memory_order_acquire))
			break;
		seen = g;
		p->fn(p->ctx, tid, p->n);
		atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
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
	p = calloc(1, sizeof *p);
	if (!p)
		return nf_error_set(NF_ENOMEM, "thread pool: out of memory");
	p->n = threads;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
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
		pin(p->th[i - 1], i);
	}
	*out = p;
	return 0;
}

void nf_pool_free(nf_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->stop, 1);
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->started; i++)
		pthread_join(p->th[i], NULL);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p->th);
	free(p);
}

int nf_pool_threads(const nf_pool *p)
{
	return p ? p->n : 1;
}

void nf_pool_run(nf_pool *p, nf_pool_fn fn, void *ctx)
{
	if (p->n <= 1) {
		fn(ctx, 0, 1);
		return;
	}
	p->fn = fn;
	p->ctx = ctx;
	atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
	if (atomic_load(&p->sleepers) > 0) {
		pthread_mutex_lock(&p->mu);
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
	}
	fn(ctx, 0, p->n);
	int spins = 0;
	while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
		cpu_relax();
		if ((++spins & 1023) == 0)
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
