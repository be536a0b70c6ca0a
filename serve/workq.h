/*
 * workq.h - a bounded queue of work run on a few worker threads: what must
 * not run on nimserve's single HTTP thread (rendering and tokenizing a
 * prompt of up to a megabyte takes most of a second; every other client
 * would wait for it).
 *
 * The submitter parks (suspends its connection) inside nf_workq_push, under
 * the queue's lock, so a worker can never finish an item and wake its
 * submitter before it has parked.
 */
#ifndef NF_SERVE_WORKQ_H
#define NF_SERVE_WORKQ_H

#include <stddef.h>

typedef struct nf_workq nf_workq;

/* Run on a worker with cancelled 0, or with cancelled 1 from nf_workq_free
 * for an item that never started.  Owns nothing of the queue. */
typedef void (*nf_work_fn)(void *arg, int cancelled);
/* Called once under the queue's lock when the item is accepted, before any
 * worker can see it; must not call back into the queue. */
typedef void (*nf_work_park_fn)(void *arg);

/* threads >= 1 workers, at most max_queued items waiting (>= 1).
 * Caller owns *out (nf_workq_free). */
int nf_workq_new(nf_workq **out, int threads, size_t max_queued);
/* Queue fn(arg); park(arg) first if not NULL.  NF_EENV when max_queued items
 * already wait (park is not called then); NF_EUNSUPPORTED once stopping. */
int nf_workq_push(nf_workq *q, nf_work_fn fn, nf_work_park_fn park, void *arg);
/* Items waiting (not yet taken by a worker). */
size_t nf_workq_waiting(nf_workq *q);
/* Let the running items finish, join the workers, then call every item
 * still waiting with cancelled 1 (in order), and free.  NULL is fine. */
void nf_workq_free(nf_workq *q);

#endif
