/* test_workq.c - the bounded work queue (serve/workq.h): items run in order
 * on the worker, park runs before a worker can take the item, the bound
 * refuses with NF_EENV, and nf_workq_free lets the running item finish and
 * hands every waiting one back as cancelled. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "serve/workq.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/banned.h"

typedef struct rec {
	atomic_int parked;   /* set by park */
	atomic_int ran;      /* 1 ran, 2 cancelled */
	int parked_first;    /* park had run when fn started */
	int order;
	pthread_mutex_t *gate; /* fn waits on it when set */
} rec;

static atomic_int counter;

static void work(void *arg, int cancelled)
{
	rec *r = arg;
	r->parked_first = atomic_load(&r->parked);
	if (r->gate) {
		pthread_mutex_lock(r->gate);
		pthread_mutex_unlock(r->gate);
	}
	r->order = atomic_fetch_add(&counter, 1);
	atomic_store(&r->ran, cancelled ? 2 : 1);
}

static void park(void *arg)
{
	rec *r = arg;
	atomic_store(&r->parked, 1);
}

static void *free_queue(void *q)
{
	nf_workq_free(q);
	return NULL;
}

static void wait_ran(rec *r)
{
	struct timespec ts = {0, 1000000};
	for (int i = 0; i < 5000 && !atomic_load(&r->ran); i++)
		nanosleep(&ts, NULL);
}

int main(void)
{
	nf_workq *q = NULL;
	rec r[8] = {0};
	pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;

	ok(nf_workq_new(&q, 0, 4) < 0 && !q, "no thread: refused");
	ok(nf_workq_new(&q, 1, 2) == 0 && q, "a queue of 2 on one worker");

	/* in order, parked first */
	for (int i = 0; i < 2; i++)
		is_int(nf_workq_push(q, work, park, &r[i]), 0, "item %d queued", i);
	wait_ran(&r[1]);
	ok(atomic_load(&r[0].ran) == 1 && atomic_load(&r[1].ran) == 1, "both ran");
	ok(r[0].order < r[1].order, "in the order queued");
	ok(r[0].parked_first && r[1].parked_first, "park ran before the worker took each item");

	/* the bound: one item blocks the worker, two wait, a third is refused */
	pthread_mutex_lock(&gate);
	r[2].gate = &gate;
	is_int(nf_workq_push(q, work, park, &r[2]), 0, "a blocking item");
	for (int i = 0; i < 1000 && nf_workq_waiting(q) > 0; i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	is_int(nf_workq_push(q, work, park, &r[3]), 0, "waiting 1 of 2");
	is_int(nf_workq_push(q, work, park, &r[4]), 0, "waiting 2 of 2");
	is_int(nf_workq_push(q, work, park, &r[5]), NF_EENV, "a third waiting item: NF_EENV");
	ok(!atomic_load(&r[5].parked), "... and it was not parked");
	is_int((int)nf_workq_waiting(q), 2, "two wait");

	/* free while the worker is busy: it finishes, the waiting are cancelled */
	{
		pthread_t t;
		struct timespec ts = {0, 50 * 1000000};
		pthread_create(&t, NULL, free_queue, q);
		nanosleep(&ts, NULL);
		pthread_mutex_unlock(&gate);
		pthread_join(t, NULL);
	}
	is_int(atomic_load(&r[2].ran), 1, "the running item finished");
	ok(atomic_load(&r[3].ran) == 2 && atomic_load(&r[4].ran) == 2, "the waiting items were cancelled");
	ok(r[3].order < r[4].order, "... in order");
	nf_workq_free(NULL);
	ok(1, "nf_workq_free(NULL) is fine");
	return done_testing();
}
