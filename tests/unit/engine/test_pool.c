/*
 * test_pool.c - the thread pool: every unit of a job runs exactly once, in
 * the ranges the caller asked for, and a stalled thread's share is taken
 * over by the others.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <time.h>

#include "engine/cpu/cpu.h"
#include "tests/tap.h"

#define MAX_UNITS 1000

static _Atomic int hits[MAX_UNITS];
static _Atomic int ran_by[MAX_UNITS];
static _Atomic int calls;
static _Atomic int too_big; /* a call longer than its job allows */

typedef struct job {
	int grain, stall_tid;
} job;

static void count_range(void *ctx, int u0, int u1, int tid)
{
	const job *j = ctx;
	if (u1 - u0 > j->grain || u0 >= u1)
		atomic_store(&too_big, 1);
	if (tid == j->stall_tid && atomic_fetch_add(&calls, 1) == 0) {
		/* the first piece of this thread stalls: the others must take over */
		struct timespec ts = {0, 30 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	for (int i = u0; i < u1; i++) {
		atomic_fetch_add(&hits[i], 1);
		atomic_store(&ran_by[i], tid);
	}
}

static _Atomic int chunk_hits[64];
static void count_chunk(void *ctx, int chunk, int tid)
{
	(void)ctx;
	(void)tid;
	atomic_fetch_add(&chunk_hits[chunk], 1);
}

static int each_once(int units)
{
	for (int i = 0; i < MAX_UNITS; i++)
		if (atomic_load(&hits[i]) != (i < units))
			return 0;
	return 1;
}

int main(void)
{
	nf_pool *p = NULL;
	ok(nf_pool_new(&p, 3) == 0 && nf_pool_threads(p) == 3, "pool of 3 threads");
	if (!p)
		return done_testing();

	int once = 1;
	for (int n = 0; n < 200; n++) {
		int chunks = 1 + n % 37;
		memset(chunk_hits, 0, sizeof chunk_hits);
		nf_pool_run_chunks(p, count_chunk, NULL, chunks);
		for (int i = 0; i < 64; i++)
			if (atomic_load(&chunk_hits[i]) != (i < chunks))
				once = 0;
	}
	ok(once, "200 chunk jobs ran every chunk exactly once");

	once = 1;
	atomic_store(&too_big, 0);
	for (int n = 0; n < 300; n++) {
		job j = {1 + n % 17, -1};
		int units = 1 + (n * 37) % MAX_UNITS;
		memset(hits, 0, sizeof hits);
		nf_pool_run_ranges(p, count_range, &j, units, j.grain);
		once &= each_once(units);
	}
	ok(once, "300 range jobs (1-1000 units, grains 1-17) ran every unit exactly once");
	ok(!atomic_load(&too_big), "no call got more units than its grain");

	/* worker 1 stalls on its first piece: the others finish its share */
	job j = {4, 1};
	memset(hits, 0, sizeof hits);
	atomic_store(&calls, 0);
	nf_pool_run_ranges(p, count_range, &j, 300, j.grain);
	int stolen = 0;
	for (int i = 100; i < 200; i++) /* thread 1's share */
		stolen += atomic_load(&ran_by[i]) != 1;
	ok(each_once(300), "a job with a stalled thread ran every unit once");
	ok(stolen >= 50, "the others ran %d of the stalled thread's 100 units", stolen);

	j = (job){1, -1};
	memset(hits, 0, sizeof hits);
	nf_pool_run_ranges(p, count_range, &j, 3, 1);
	ok(each_once(3), "a job of as many units as threads");

	nf_pool_free(p);
	nf_pool *one = NULL;
	ok(nf_pool_new(&one, 1) == 0, "pool of 1 thread");
	memset(hits, 0, sizeof hits);
	j = (job){8, -1};
	nf_pool_run_ranges(one, count_range, &j, 8, 8);
	ok(each_once(8) && atomic_load(&ran_by[7]) == 0, "a one-thread pool runs the job on the caller");
	nf_pool_free(one);
	return done_testing();
}
