/* stage_sched.c - independent stages at once within jobs and a memory budget (see stage_sched.h). */
#define _GNU_SOURCE
#include "factory/stage_sched.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"
#include "util/banned.h"

#define MIB(x) ((double)(x) / (1024.0 * 1024.0))

typedef struct sched {
	pthread_mutex_t mu;
	pthread_cond_t done; /* a job finished */
	size_t running;
	uint64_t held;       /* estimates of the running jobs */
} sched;

typedef struct worker {
	sched *s;
	nf_stage_job *job;
	int threads;
	pthread_t tid;
	int started;
} worker;

static void *work(void *arg)
{
	worker *w = arg;
	nf_stage_job *j = w->job;
	j->err = j->run(j->arg, w->threads);
	if (j->err)
		j->message = strdup(nf_error_last());
	pthread_mutex_lock(&w->s->mu);
	w->s->running--;
	w->s->held -= j->memory;
	pthread_cond_signal(&w->s->done);
	pthread_mutex_unlock(&w->s->mu);
	return NULL;
}

/* Every job must fit the budget on its own. */
static int check_budget(const nf_stage_job *jobs, size_t n, uint64_t budget)
{
	for (size_t i = 0; budget && i < n; i++)
		if (jobs[i].memory > budget)
			return nf_error_set(NF_EINPUT,
					    "%s %s needs about %.1f MiB, more than the %.1f MiB its stages "
					    "have of the memory budget (--memory)",
					    jobs[i].stage, jobs[i].name, MIB(jobs[i].memory), MIB(budget));
	return 0;
}

static int fits(const sched *s, const nf_stage_job *j, const nf_stage_sched_opts *o)
{
	return s->running < (size_t)o->max_jobs && (!o->budget || s->held + j->memory <= o->budget);
}

/* Start the jobs in order as they fit; the caller holds s->mu. */
static int start_jobs(sched *s, worker *ws, size_t n, size_t *next, const nf_stage_sched_opts *o)
{
	while (*next < n && fits(s, ws[*next].job, o)) {
		worker *w = &ws[(*next)++];
		s->running++;
		s->held += w->job->memory;
		if (o->budget)
			nf_log_info(o->log, w->job->stage, "%s: started (%zu running, %.1f of %.1f MiB, "
				    "%d threads)", w->job->name, s->running, MIB(s->held),
				    MIB(o->budget), w->threads);
		else
			nf_log_info(o->log, w->job->stage, "%s: started (%zu running, %.1f MiB, %d threads)",
				    w->job->name, s->running, MIB(s->held), w->threads);
		if (pthread_create(&w->tid, NULL, work, w) != 0) {
			s->running--;
			s->held -= w->job->memory;
			return nf_error_set(NF_EINTERNAL, "cannot start a thread for %s", w->job->name);
		}
		w->started = 1;
	}
	return 0;
}

static int online_cores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 && n < 4096 ? (int)n : 1;
}

int nf_stage_sched_run(nf_stage_job *jobs, size_t n, const nf_stage_sched_opts *o)
{
	sched s = {.running = 0};
	worker *ws = NULL;
	size_t next = 0, at_once = n < (size_t)o->max_jobs ? n : (size_t)o->max_jobs;
	int cores = o->threads > 0 ? o->threads : online_cores(), err;

	if (o->max_jobs < 1)
		return nf_error_set(NF_EINPUT, "jobs must be at least 1");
	if ((err = check_budget(jobs, n, o->budget)) || n == 0)
		return err;
	if (!(ws = calloc(n, sizeof(*ws))))
		return nf_error_set(NF_ENOMEM, "out of memory");
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.done, NULL);
	for (size_t i = 0; i < n; i++) {
		ws[i] = (worker){.s = &s, .job = &jobs[i]};
		ws[i].threads = at_once && cores / (int)at_once > 1 ? cores / (int)at_once : 1;
		jobs[i].err = 0;
		jobs[i].message = NULL;
	}
	pthread_mutex_lock(&s.mu);
	while (!err && next < n) {
		err = start_jobs(&s, ws, n, &next, o);
		if (!err && next < n)
			pthread_cond_wait(&s.done, &s.mu);
	}
	pthread_mutex_unlock(&s.mu);
	for (size_t i = 0; i < n; i++)
		if (ws[i].started)
			pthread_join(ws[i].tid, NULL);
	for (size_t i = 0; !err && i < n; i++)
		if (jobs[i].err)
			err = nf_error_set(jobs[i].err, "%s", jobs[i].message ? jobs[i].message : "failed");
	for (size_t i = 0; i < n; i++) {
		free(jobs[i].message);
		jobs[i].message = NULL;
	}
	pthread_cond_destroy(&s.done);
	pthread_mutex_destroy(&s.mu);
	free(ws);
	return err;
}

uint64_t nf_stage_sched_available_memory(void)
{
	/* /proc files have no size, so read them as a stream, not with nf_fs_read_file */
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kib = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib < (UINT64_MAX >> 10) ? (uint64_t)kib << 10 : 0;
}
