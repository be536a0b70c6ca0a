/*
 * loadgen.h - the serving benchmark's load: a dataset's requests sent to an
 * OpenAI-compatible server, streamed, each timed (factory/loadgen_sse.h),
 * by a closed loop of N clients or an open loop of Poisson arrivals.
 * `nimfactory bench-serve` and tests/tools/nf_loadgen are its two users;
 * loadgen_report.h turns a run into figures.
 */
#ifndef NF_FACTORY_LOADGEN_H
#define NF_FACTORY_LOADGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "factory/loadgen_dataset.h"
#include "factory/loadgen_http.h"

/* What one request did. */
typedef struct nf_lg_result {
	size_t unit, turn;      /* the dataset's unit of work, the turn of its conversation */
	int client;             /* the client (closed loop) or worker (open loop) that sent it */
	bool ok;
	char *error;            /* owned, when !ok: one line */
	double start;           /* seconds from the run's start */
	double ttft, e2e;       /* seconds from the start of the request */
	long output_tokens;     /* the usage count, else the content chunks */
	long prompt_tokens;     /* from usage; -1 when the server sent none */
	bool usage;             /* output_tokens came from usage */
	double *gaps;           /* owned: seconds between consecutive content chunks */
	size_t n_gaps;
} nf_lg_result;

typedef struct nf_lg_run_opts {
	nf_lg_server server;
	const char *model;
	bool chat;              /* /v1/chat/completions, else /v1/completions */
	const char *path;       /* the request path after server.path; NULL: by chat */
	bool ignore_eos;        /* send "ignore_eos": true (llama.cpp, vLLM) */
	const char *extra_body; /* a JSON object whose members join every request body
				   (response_format, speculative options...); NULL: none */
	long max_tokens;        /* for items without their own */
	size_t requests;
	int concurrency;        /* closed loop: clients; open loop: most requests in flight */
	double rate;            /* > 0: open loop of Poisson arrivals, requests (units) per s */
	uint64_t seed;          /* of the arrivals */
	bool round_robin;       /* closed loop: client i takes units i, i+N, i+2N... */
	double timeout_s;       /* per request, connect to the last byte */
} nf_lg_run_opts;

typedef struct nf_lg_run {
	nf_lg_result *results;  /* owned: one per request, in unit and turn order */
	size_t n;
	double duration;        /* seconds from the start to the end of the last request */
} nf_lg_run;

/* Send every request of o over ds; failed requests are results with ok
 * false, not an error.  Errors: bad options (NF_EINPUT), memory, threads. */
int nf_lg_run_load(nf_lg_run **out, const nf_lg_run_opts *o, const nf_lg_dataset *ds);
void nf_lg_run_free(nf_lg_run *run); /* NULL is fine */

#endif
