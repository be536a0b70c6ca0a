/*
 * sched.h - the scheduler: one thread that advances every active sequence
 * per nf_engine_step_ragged (iteration-level batching).  New requests wait
 * in a bounded queue and join the batch between steps.  Each step carries
 * every decoding sequence's next token plus chunks of the prompts still to
 * prefill, which share the rest of one 256-token forward pass first come
 * first served: decoding never waits for a prefill, and a new prompt is
 * prefilled in one or a few steps.
 *
 * A job is shared by the HTTP thread that submitted it and the scheduler; it
 * is reference-counted: submit gives the caller one reference, which the
 * caller drops with nf_job_release.
 */
#ifndef NF_SERVE_SCHED_H
#define NF_SERVE_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/sampling.h"
#include "serve/guide.h"
#include "serve/metrics.h"
#include "serve/sbuf.h"

typedef struct nf_sched_opts {
	int max_batch;     /* sequences stepped together, >= 1 */
	int max_queue;     /* requests waiting beyond the batch; past it submit fails */
	int step_delay_us; /* extra sleep per step (tests and benches only), 0 = none */
	int prefill_chunk; /* prompt tokens per step while others decode (bounds their
			      inter-token latency); 0 = a whole forward pass */
	int prefill_slack_pct; /* and at most what keeps such a step within this many
				  percent of a decode-only step (serve/stepcost.h); 0 = no
				  such bound */
	int prefix_cache;  /* 1: a prompt starts after the longest prefix it shares with
			      a kept or running sequence (engine.h), 0: always from 0 */
	int spec_k;        /* speculative decoding by prompt lookup (engine/speculative.h):
			      tokens drafted per decoding sequence and step, 0 = off */
	int spec_ngram;    /* the longest n-gram looked up, 1..8 */
	nf_engine *spec_draft; /* with spec_k > 0: draft with this engine instead (a cheaper
				  profile or smaller model with the same vocabulary; borrowed,
				  must outlive the scheduler, used by its thread only): each
				  decoding sequence keeps a sequence on it, and spec_k batched
				  greedy steps draft for all of them at once */
	int spec_adaptive; /* 1: draft only while that is the cheaper way a token here,
			      measured as it serves (serve/spec_gov.h); 0: always */
	void (*log)(const char *line); /* NULL, or where the scheduler says what it chose
					  (adaptive speculation: drafting paused or on, and
					  the costs it measured); called on its thread */
} nf_sched_opts;

typedef struct nf_job_params {
	int max_tokens;   /* new tokens at most (>= 1) */
	float temperature;
	float top_p;
	uint64_t seed;
	char *const *stop; /* copied */
	size_t n_stop;
	double t_arrival; /* nf_sched_now() when the request arrived */
	const nf_sampling_params *sampling; /* copied; NULL: none */
	int min_tokens;    /* end-of-generation and stop ids masked before this many */
	int ignore_eos;    /* 1: end-of-generation tokens do not end the job */
	const int *stop_ids; /* copied: tokens that end the job (not part of its text) */
	size_t n_stop_ids;
	int logprobs;      /* 1: record each generated token's logprob (nf_job_copy_logprobs) */
	int top_logprobs;  /* and this many alternatives, 0..NF_SAMPLING_MAX_TOP */
	int prompt_logprobs; /* 1: and the prompt's (echo); its prompt is then computed
				whole, without the prefix cache */
	nf_guide *guide;   /* NULL, or the grammar the answer must match (the job takes a
			      reference): each token is drawn from those it allows */
} nf_job_params;

/* One token's log-probability: the log-softmax of the logits after the
 * penalties, bias and mask, before temperature (prompt tokens: of the
 * model's logits).  The first prompt token has none (logprob NAN). */
typedef struct nf_token_logprob {
	int token;
	float logprob;
	int n_top;
	int top_token[NF_SAMPLING_MAX_TOP];
	float top_logprob[NF_SAMPLING_MAX_TOP];
} nf_token_logprob;

typedef struct nf_job_result {
	const char *finish_reason; /* "stop", "length", "cancelled", "error" (static) */
	int prompt_tokens;
	int completion_tokens;
	int cached_tokens; /* of prompt_tokens, reused from the prefix cache */
	double ttft; /* seconds from arrival to first token, -1 if none */
} nf_job_result;

typedef struct nf_sched nf_sched;
typedef struct nf_job nf_job;

/* Start the scheduler thread over e (borrowed, must outlive the scheduler)
 * and m (borrowed, may be NULL). */
int nf_sched_new(nf_sched **out, nf_engine *e, nf_metrics *m, const nf_sched_opts *o);
/* Stop the thread; jobs still queued or running finish as "cancelled". NULL is fine. */
void nf_sched_free(nf_sched *s);

/* Queue a request; tokens (BOS + prompt, 1..max_seq_len-1 of them) are copied.
 * NF_EENV when the queue is full (HTTP 429); NF_EUNSUPPORTED when draining (503). */
int nf_sched_submit(nf_job **out, nf_sched *s, const int *tokens, size_t n_tokens,
		    const nf_job_params *p);
/* Refuse new submissions from now on (SIGTERM). */
void nf_sched_drain(nf_sched *s);
/* Jobs queued plus running. */
size_t nf_sched_load(nf_sched *s);

/* Wait up to timeout_ms for more text; append whatever may be sent now to
 * out.  *finished becomes 1 once the job is over and all its text appended. */
int nf_job_next(nf_job *j, nf_sbuf *out, int *finished, int timeout_ms);
/* Event-loop hand-off (nimserve's HTTP thread never blocks on a job):
 * nf_job_poll appends the text that may be sent now, like nf_job_next
 * without waiting.  When there is none and the job is not over, it calls
 * park(arg) under the job's lock; if park returns 1 (the caller has parked
 * its connection, e.g. MHD_suspend_connection) *parked becomes 1 and the
 * job remembers wake: the scheduler calls wake(arg) exactly once, still under
 * the job's lock, at the next text or when the job ends; nf_job_kick calls it
 * at once.  park and wake must not call back into the job.  A job holds one
 * parked waiter at a time.  out NULL: wait for the end only (no text is
 * taken until the job is over; then call again with a buffer). */
typedef int (*nf_job_park_fn)(void *arg);
typedef void (*nf_job_wake_fn)(void *arg);
int nf_job_poll(nf_job *j, nf_sbuf *out, int *finished, int *parked, nf_job_park_fn park,
		nf_job_wake_fn wake, void *arg);
/* Wake the parked waiter now, if any (timers: disconnect checks, keep-alives, stop). */
void nf_job_kick(nf_job *j);
/* Forget the parked waiter without waking it (its connection is gone). */
void nf_job_unpark(nf_job *j);
/* Only valid once finished. */
void nf_job_get_result(nf_job *j, nf_job_result *r);
/* Copy the logprobs of generated tokens from, from + 1, ... (at most max)
 * to out; returns how many.  Any time: a stream takes them as they come. */
size_t nf_job_copy_logprobs(nf_job *j, size_t from, nf_token_logprob *out, size_t max);
/* Once finished: the generated tokens' (prompt 0) or the prompt's
 * (prompt 1) logprobs, owned by the job; *n their count. */
const nf_token_logprob *nf_job_final_logprobs(nf_job *j, int prompt, size_t *n);
/* The client went away: the scheduler drops the sequence at the next step. */
void nf_job_cancel(nf_job *j);
void nf_job_release(nf_job *j); /* NULL is fine */

/* Monotonic seconds. */
double nf_sched_now(void);

#endif
