/*
 * api.h - the OpenAI-compatible HTTP server on libmicrohttpd: one event-loop
 * thread (epoll) for every connection; a connection waiting for its job is
 * suspended and the scheduler resumes it when the job has text or ends.
 *
 *   POST /v1/completions, /v1/chat/completions   ("stream": true -> SSE, ends in [DONE])
 *   GET  /v1/models, /v1/health/live, /v1/health/ready, /v1/metrics, /v1/metadata
 *
 * The server listens before the engine is loaded: until nf_server_set_ready
 * /v1/health/ready and the completion endpoints answer 503.
 */
#ifndef NF_SERVE_API_H
#define NF_SERVE_API_H

#include <stddef.h>

#include "engine/engine.h"
#include "serve/gpu.h"
#include "serve/manifest.h"
#include "serve/metrics.h"
#include "serve/sched.h"

typedef struct nf_server_config {
	const char *host;             /* "127.0.0.1", "0.0.0.0", "::" */
	int port;                     /* 0 = an ephemeral port */
	size_t max_body;              /* request bodies larger than this get 413 */
	int max_connections;
	int request_timeout;          /* seconds a connection may take to send a whole request
	                               * (from opening, or from its previous response); 0 = none */
	const nf_manifest *manifest;  /* borrowed, outlives the server */
	size_t profile;               /* index of the chosen profile */
	const char *selection_reason; /* copied */
	const nf_gpu_list *gpus;      /* copied */
	nf_metrics *metrics;          /* borrowed */
	int max_pending;              /* completions waiting to be tokenized; past it 429 (0 = 64) */
} nf_server_config;

typedef struct nf_server nf_server;

/* Bind and start serving (not ready yet).  Caller owns *out (nf_server_free). */
int nf_server_start(nf_server **out, const nf_server_config *cfg);
/* The port actually bound. */
int nf_server_port(const nf_server *s);
/* The engine is loaded: start answering completions.  e and sched are
 * borrowed and must outlive the server. */
int nf_server_set_ready(nf_server *s, nf_engine *e, nf_sched *sched);
/* Stop accepting connections; requests on open ones get 503. */
void nf_server_quiesce(nf_server *s);
/* HTTP requests being answered right now (streams included). */
size_t nf_server_inflight(nf_server *s);
/* Stop the HTTP daemon (closes open connections) and free.  NULL is fine. */
void nf_server_free(nf_server *s);

#endif
