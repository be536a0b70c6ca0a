/*
 * stage_sched.h - run independent stages (one per profile) at once, within
 * a number of jobs and a memory budget.
 *
 * Each job carries an estimate of its peak memory.  A job starts, in order,
 * when fewer than max_jobs run and its estimate fits in what the running
 * ones leave of the budget; so two stages that together exceed the budget
 * never run together.  A job whose estimate alone exceeds the budget is
 * refused before any starts.  Each job is offered a share of the cores
 * (threads / the jobs that may run at once, at least one), which a job whose
 * output must not depend on the schedule ignores (the build's compiles: an
 * engine records its threads).  The log says
 * when each job starts, with how many run and the memory they hold, so the
 * overlap is visible.
 *
 * Jobs run on threads; a job's error (code and message) comes back to the
 * caller's thread: the first failed job's, in job order.
 */
#ifndef NF_FACTORY_STAGE_SCHED_H
#define NF_FACTORY_STAGE_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "factory/log.h"

typedef struct nf_stage_job {
	const char *stage;   /* log stage name: "compile" */
	const char *name;    /* what it builds: "cpu-int8-wo-tp1" */
	uint64_t memory;     /* estimated peak bytes */
	/* The work: 0 or a negative NF_E* with nf_error_last() set, on its thread. */
	int (*run)(void *arg, int threads);
	void *arg;
	/* Filled by the scheduler. */
	int err;
	char *message;       /* owned by the scheduler until nf_stage_sched_run returns */
} nf_stage_job;

typedef struct nf_stage_sched_opts {
	int max_jobs;       /* >= 1 */
	uint64_t budget;    /* bytes; 0 = no limit */
	int threads;        /* cores to split; 0 = all online */
	nf_log *log;
} nf_stage_sched_opts;

/* Run every job; NF_EINPUT (naming the job, its estimate and the budget)
 * when one cannot fit; else the first failed job's error. */
int nf_stage_sched_run(nf_stage_job *jobs, size_t n, const nf_stage_sched_opts *o);

/* The machine's available memory (MemAvailable), 0 when unknown. */
uint64_t nf_stage_sched_available_memory(void);

#endif
