/*
 * workq.c - a bounded FIFO of work items and the threads that run them
 * (workq.h).
 */
#include "serve/workq.h"

#include <pthread.h>
#include <stdlib.h>

#include "util/error.h"
#include "util/banned.h"

typedef struct item {
	nf_work_fn fn;
	void *arg;
	struct item *next;
} item;

struct nf_workq {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	item *head, *tail;     /* under mu */
	size_t waiting;        /* under mu */
	size_t max_queued;
	int stopping;          /* under mu */
	int n_threads;         /* started */
	pthread_t *threads;
};

/* Take the oldest item, or NULL once stopping (under mu). */
static item *take(nf_workq *q)
{
	item *it;
	while (!q->head && !q->stopping)
		pthread_cond_wait(&q->cv, &q->mu);
	if (q->stopping)
		return NULL;
	it = q->head;
	q->head = it->next;
	if (!q->head)
		q->tail = NULL;
	q->waiting--;
	return it;
}

static void *worker_main(void *arg)
{
	nf_workq *q = arg;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		item *it = take(q);
		if (!it)
			break;
		pthread_mutex_unlock(&q->mu);
		it->fn(it->arg, 0);
		free(it);
		pthread_mutex_lock(&q->mu);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

int nf_workq_new(nf_workq **out, int threads, size_t max_queued)
{
	nf_workq *q;
	*out = NULL;
	if (threads < 1 || max_queued < 1)
		return nf_error_set(NF_EINPUT, "a work queue needs a thread and room for an item");
	q = calloc(1, sizeof *q);
	if (!q || !(q->threads = calloc((size_t)threads, sizeof *q->threads))) {
		free(q);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	q->max_queued = max_queued;
	for (; q->n_threads < threads; q->n_threads++) {
		if (pthread_create(&q->threads[q->n_threads], NULL, worker_main, q) != 0) {
			nf_workq_free(q);
			return nf_error_set(NF_EENV, "cannot start a worker thread");
		}
	}
	*out = q;
	return 0;
}

int nf_workq_push(nf_workq *q, nf_work_fn fn, nf_work_park_fn park, void *arg)
{
	item *it = malloc(sizeof *it);
	int rc = 0;
	if (!it)
		return nf_error_set(NF_ENOMEM, "out of memory");
	it->fn = fn;
	it->arg = arg;
	it->next = NULL;
	pthread_mutex_lock(&q->mu);
	if (q->stopping)
		rc = nf_error_set(NF_EUNSUPPORTED, "the work queue is stopping");
	else if (q->waiting >= q->max_queued)
		rc = nf_error_set(NF_EENV, "%zu requests wait to be prepared", q->waiting);
	if (rc == 0) {
		if (park)
			park(arg);
		if (q->tail)
			q->tail->next = it;
		else
			q->head = it;
		q->tail = it;
		q->waiting++;
		pthread_cond_signal(&q->cv);
	}
	pthread_mutex_unlock(&q->mu);
	if (rc < 0)
		free(it);
	return rc;
}

size_t nf_workq_waiting(nf_workq *q)
{
	size_t n;
	pthread_mutex_lock(&q->mu);
	n = q->waiting;
	pthread_mutex_unlock(&q->mu);
	return n;
}

void nf_workq_free(nf_workq *q)
{
	item *it;
	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	q->stopping = 1;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	for (int i = 0; i < q->n_threads; i++)
		pthread_join(q->threads[i], NULL);
	/* no worker is left: the waiting items are ours */
	while ((it = q->head)) {
		q->head = it->next;
		it->fn(it->arg, 1);
		free(it);
	}
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->cv);
	free(q->threads);
	free(q);
}
