/*
 * test_stage_sched.c - the stage scheduler never runs more jobs than
 * max_jobs nor more estimated memory than the budget at once, does run
 * jobs together when they fit, refuses a job over the budget before any
 * starts, splits the cores, and brings a job's error back to the caller.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "factory/stage_sched.h"
#include "tests/tap.h"
#include "util/error.h"

static nf_log *quiet; /* the scheduler's "started" lines are not this test's output */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int running, most_running, ran, least_threads = 1 << 30;
/* Jobs that may overlap wait (up to half a second) for this many to run at
 * once, so the test holds on a loaded machine and in the sanitizer build,
 * where a fixed pause lets the first jobs end before the last start. */
static int want_together;
static uint64_t held, most_held;

typedef struct arg {
	uint64_t memory;
	int fail;
} arg;

/* Record how many jobs and how much memory run at once, holding until
 * want_together run (or half a second passed), then 1 ms more. */
static int job(void *p, int threads)
{
	arg *a = p;
	struct timespec ms1 = {0, 1000000};
	pthread_mutex_lock(&mu);
	running++;
	held += a->memory;
	most_running = running > most_running ? running : most_running;
	most_held = held > most_held ? held : most_held;
	least_threads = threads < least_threads ? threads : least_threads;
	ran++;
	for (int waited = 0; running < want_together && waited < 500; waited++) {
		pthread_mutex_unlock(&mu);
		nanosleep(&ms1, NULL);
		pthread_mutex_lock(&mu);
		most_running = running > most_running ? running : most_running;
	}
	pthread_mutex_unlock(&mu);
	nanosleep(&ms1, NULL);
	pthread_mutex_lock(&mu);
	running--;
	held -= a->memory;
	pthread_mutex_unlock(&mu);
	return a->fail ? nf_error_set(NF_EIO, "job %llu failed", (unsigned long long)a->memory) : 0;
}

static void reset(void)
{
	running = most_running = ran = 0;
	held = most_held = 0;
	least_threads = 1 << 30;
}

/* n jobs of the given memory each, run with max_jobs and budget. */
static int run(size_t n, const uint64_t *memory, int max_jobs, uint64_t budget, int fail_at,
	       int together)
{
	nf_stage_job jobs[8];
	arg args[8];
	nf_stage_sched_opts o = {.max_jobs = max_jobs, .budget = budget, .threads = 8, .log = quiet};
	reset();
	want_together = together;
	for (size_t i = 0; i < n; i++) {
		args[i] = (arg){.memory = memory[i], .fail = (int)i == fail_at};
		jobs[i] = (nf_stage_job){.stage = "compile", .name = "p", .memory = memory[i],
					 .run = job, .arg = &args[i]};
	}
	return nf_stage_sched_run(jobs, n, &o);
}

int main(void)
{
	static const uint64_t four[] = {10, 10, 10, 10}, mixed[] = {60, 50, 30, 20};

	nf_log_opts lo = {.level = NF_LOG_WARN};
	if (nf_log_new(&quiet, &lo))
		return 1;
	plan(16);
	is_int(run(4, four, 4, 0, -1, 4), 0, "4 jobs, -j 4, no budget");
	is_int(ran, 4, "all ran");
	is_int(most_running, 4, "all at once");
	is_int(least_threads, 2, "8 cores split 4 ways: 2 threads each");

	is_int(run(4, four, 2, 0, -1, 2), 0, "4 jobs, -j 2");
	is_int(most_running, 2, "never more than 2 at once");

	is_int(run(4, mixed, 4, 100, -1, 3), 0, "jobs of 60, 50, 30, 20 in a budget of 100");
	ok(most_held <= 100, "never more than the budget at once (%llu)", (unsigned long long)most_held);
	ok(most_running >= 2, "some ran together (%d)", most_running);

	is_int(run(4, four, 4, 15, -1, 0), 0, "jobs of 10 in a budget of 15");
	is_int(most_running, 1, "one at a time");

	is_int(run(4, mixed, 4, 55, -1, 0), NF_EINPUT, "a job of 60 in a budget of 55: refused");
	is_int(ran, 0, "before any job started");
	ok(strstr(nf_error_last(), "more than the") != NULL, "the message gives the numbers: %s",
	   nf_error_last());

	is_int(run(4, four, 2, 0, 2, 0), NF_EIO, "a failing job's code comes back");
	is_str(nf_error_last(), "job 10 failed", "with its message, on the caller's thread");
	nf_log_free(quiet);
	return done_testing();
}
