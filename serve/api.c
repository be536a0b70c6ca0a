/*
 * api.c - routes, request handling and response rendering for nimserve.
 */
#define _GNU_SOURCE
#include "serve/api.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "engine/tokenizer.h"
#include "serve/framing.h"
#include "serve/logprobs.h"
#include "serve/request.h"
#include "serve/sbuf.h"
#include "serve/tokenize.h"
#include "serve/workq.h"
#include "util/error.h"
#include "util/version.h"
#include "util/banned.h"

#define MAX_RESPONSE_TEXT (8u << 20)
#define KEEPALIVE_MS 10000
#define MAX_DISCARD ((size_t)64 << 20)
#define IDLE_TIMEOUT_S 120 /* MHD's: no byte moved for this long */
#define MHD_MEMORY_LIMIT (64u << 10) /* per connection: request line + headers must fit; past it 431/414 */
#define POLL_MS 100 /* how often a waiting request checks that its client is still there */

/* A connection parked (MHD_suspend_connection) on a job: the scheduler
 * resumes it when its job has text or ends; the timer thread resumes every
 * waiter each POLL_MS so that it can look whether its client left. */
typedef struct waiter {
	nf_server *srv;
	nf_job *job;
	struct MHD_Connection *c;
	atomic_int kicked; /* set by the timer: check the client and the keep-alive */
	int linked;        /* under srv->waiters_mu */
	struct waiter *prev, *next;
} waiter;

/* One open TCP connection (MHD's socket_context), on the server's list so
 * that the reaper can close those that take too long to send a request. */
typedef struct sock {
	int fd;
	struct sockaddr_storage peer;
	socklen_t peer_len;
	double t_idle; /* since when it waits for a request (open, or last response) */
	int busy;      /* a whole request arrived and is being answered */
	int reaped;
	struct sock *prev, *next;
} sock;

/* Compiled guides kept for later requests beyond those in use: a service
 * answers a handful of schemas again and again. */
#define GUIDES_KEPT 16

struct nf_server {
	struct MHD_Daemon *d;
	int port;
	size_t max_body;
	const nf_manifest *manifest;
	const nf_manifest_profile *profile;
	char *reason;
	nf_gpu_list gpus;
	nf_metrics *metrics;
	nf_engine *engine;   /* set once ready */
	nf_sched *sched;
	nf_guides *guides;   /* compiled grammars of guided requests (guide.h) */
	char *metadata;      /* JSON, built when ready */
	atomic_int ready;
	atomic_int quiesced;
	atomic_size_t inflight;
	atomic_ullong ids;
	long long created;
	int request_timeout;   /* seconds, 0 = none */
	pthread_mutex_t socks_mu;
	pthread_cond_t socks_cv;
	sock *socks;           /* under socks_mu */
	int reaper_stop;       /* under socks_mu */
	int have_reaper;
	pthread_t reaper;
	size_t n_reaped;       /* under socks_mu */
	atomic_int stopping;   /* nf_server_free: nobody parks any more */
	int max_connections;
	int n_conns;           /* open connections; MHD's thread only */
	pthread_mutex_t waiters_mu;
	waiter *waiters;       /* under waiters_mu */
	nf_workq *prep;        /* parses, renders and tokenizes completions off the HTTP thread */
	nf_chat_format chat;   /* how chat messages become a prompt (set when ready) */
	nf_jinja *chat_jinja;  /* owned: the model's template when the manifest says "model" */
	pthread_mutex_t submit_mu; /* a worker's submit against nf_server_quiesce */
};

/* Where a completion is with the worker (conn.prep). */
enum { PREP_NONE, PREP_QUEUED, PREP_DONE };
/* What the worker prepares (conn.kind). */
enum { WORK_COMPLETION, WORK_TOKENIZE, WORK_DETOKENIZE };

/* Per-request state (MHD's con_cls). */
typedef struct conn {
	nf_server *srv;
	nf_sbuf body;
	int too_big;
	size_t discarded; /* body bytes dropped after too_big */
	int answered;
	char endpoint[32];
	double t_start;
	/* a completion: prepared by the worker (prep_run), then answered here */
	struct MHD_Connection *mc;
	atomic_int prep;   /* PREP_*: PREP_DONE is stored last by the worker */
	nf_serve_req *req; /* the worker's, then read here */
	nf_guide *guide;   /* the worker's: req's compiled guide, or NULL */
	nf_api_error err;  /* status != 0: the answer */
	int kind;          /* WORK_* */
	char *reply;       /* WORK_(DE)TOKENIZE: the worker's JSON answer */
	nf_job *jobs[NF_REQ_MAX_N]; /* one per choice (n), owned until a stream takes them */
	int n_jobs;
	int last_prompt_token; /* the token before the first generated one (logprobs' text) */
	int dropped;       /* the client left while queued */
	unsigned long long idn;
	/* a non-streamed completion waiting for its jobs, one after the other */
	waiter w;          /* w.job: the one waited for, set once submitted */
	int wait_k;        /* its index */
	int chat;
	char id[48];
} conn;

/* A streamed response's state (the content reader's cls). */
typedef struct stream {
	nf_server *srv;
	nf_job *jobs[NF_REQ_MAX_N]; /* owned: one per choice, streamed one after the other */
	int n_jobs;
	int k;              /* the choice being streamed */
	nf_job *job;        /* jobs[k] */
	nf_job_result total;/* the usage of the choices streamed so far */
	int logprobs;       /* content chunks carry their tokens' logprobs (chat and completions) */
	size_t lp_sent;     /* of jobs[k]'s logprobs */
	nf_logprob_cursor lp_at;
	int last_prompt_token;
	const char *echo;   /* completions' echo: the prompt, borrowed from the request */
	size_t echo_len;
	nf_serve_req *req;  /* owned: what the chunks need of the request */
	waiter w;
	nf_sbuf out;        /* formatted bytes not yet handed to MHD */
	size_t out_off;
	int finished;       /* job over and the final events formatted */
	int chat;
	int include_usage;
	int sent_role;
	nf_sbuf text;       /* reused: the text taken from the job at each wake */
	char *pre, *post;   /* a content chunk is pre + JSON-escaped text + post (made once) */
	size_t pre_len, post_len;
	struct MHD_Connection *conn; /* the reader runs in its thread */
	double t_sent;      /* last bytes handed to MHD */
	char id[48];
	char endpoint[32];
	long long created;
	double t_start;
} stream;

static int waiter_park(void *arg)
{
	waiter *w = arg;
	if (atomic_load(&w->srv->stopping))
		return 0;
	MHD_suspend_connection(w->c);
	return 1;
}

static void waiter_wake(void *arg)
{
	waiter *w = arg;
	MHD_resume_connection(w->c);
}

static void waiter_link(nf_server *srv, waiter *w, nf_job *job, struct MHD_Connection *c)
{
	w->srv = srv;
	w->job = job;
	w->c = c;
	atomic_init(&w->kicked, 0);
	pthread_mutex_lock(&srv->waiters_mu);
	w->prev = NULL;
	w->next = srv->waiters;
	if (srv->waiters)
		srv->waiters->prev = w;
	srv->waiters = w;
	w->linked = 1;
	pthread_mutex_unlock(&srv->waiters_mu);
}

static void waiter_unlink(waiter *w)
{
	nf_server *srv = w->srv;
	if (!srv)
		return;
	pthread_mutex_lock(&srv->waiters_mu);
	if (w->linked) {
		if (w->prev)
			w->prev->next = w->next;
		else
			srv->waiters = w->next;
		if (w->next)
			w->next->prev = w->prev;
		w->linked = 0;
	}
	pthread_mutex_unlock(&srv->waiters_mu);
	if (w->job)
		nf_job_unpark(w->job);
}

/* Resume every parked connection (timer and stop); each looks at its client. */
static void waiters_kick(nf_server *srv)
{
	pthread_mutex_lock(&srv->waiters_mu);
	for (waiter *w = srv->waiters; w; w = w->next) {
		atomic_store(&w->kicked, 1);
		nf_job_kick(w->job);
	}
	pthread_mutex_unlock(&srv->waiters_mu);
}

/* The client closed its end or the connection broke while we generate:
 * look at the socket without consuming a pipelined next request. */
static int client_gone(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct pollfd p;
	char b;
	ssize_t n;
	if (!ci)
		return 0;
	p.fd = ci->connect_fd;
	p.events = POLLIN | POLLRDHUP;
	p.revents = 0;
	if (poll(&p, 1, 0) <= 0)
		return 0;
	if (p.revents & (POLLERR | POLLHUP | POLLNVAL))
		return 1;
	n = recv(p.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static enum MHD_Result send_body(struct MHD_Connection *c, nf_metrics *metrics, const char *endpoint,
				 int status, const char *ctype, const char *body, size_t len,
				 const char *h1, const char *v1)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	if (h1)
		MHD_add_response_header(r, h1, v1);
	ret = MHD_queue_response(c, (unsigned)status, r);
	MHD_destroy_response(r);
	if (metrics)
		nf_metrics_request(metrics, endpoint, status);
	return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, nf_server *srv, const char *endpoint,
				 int status, json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	enum MHD_Result ret;
	json_decref(o);
	if (!s)
		return send_body(c, srv->metrics, endpoint, 500, "application/json",
				 "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}",
				 86, NULL, NULL);
	ret = send_body(c, srv->metrics, endpoint, status, "application/json", s, strlen(s), NULL, NULL);
	free(s);
	return ret;
}

static int takes_post(const char *endpoint)
{
	return !strcmp(endpoint, "/v1/completions") || !strcmp(endpoint, "/v1/chat/completions") ||
	       !strcmp(endpoint, "/tokenize") || !strcmp(endpoint, "/detokenize");
}

static enum MHD_Result send_error(struct MHD_Connection *c, nf_server *srv, const char *endpoint,
				  const nf_api_error *e)
{
	char *s = nf_api_error_json(e);
	enum MHD_Result ret;
	const char *h1 = NULL, *v1 = NULL;
	if (e->status == 429) {
		h1 = "Retry-After";
		v1 = "1";
	} else if (e->status == 405) {
		h1 = "Allow";
		v1 = takes_post(endpoint) ? "POST" : "GET, HEAD";
	}
	if (!s)
		return MHD_NO;
	ret = send_body(c, srv->metrics, endpoint, e->status, "application/json", s, strlen(s), h1, v1);
	free(s);
	return ret;
}

static enum MHD_Result fail(struct MHD_Connection *c, nf_server *srv, const char *endpoint,
			    int status, const char *type, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));
static enum MHD_Result fail(struct MHD_Connection *c, nf_server *srv, const char *endpoint,
			    int status, const char *type, const char *code, const char *fmt, ...)
{
	nf_api_error e;
	va_list ap;
	e.status = status;
	e.type = type;
	e.code = code;
	e.param[0] = '\0';
	va_start(ap, fmt);
	vsnprintf(e.message, sizeof e.message, fmt, ap);
	va_end(ap);
	return send_error(c, srv, endpoint, &e);
}

static json_t *usage_json(const nf_job_result *r)
{
	/* prompt_tokens_details.cached_tokens: as OpenAI reports its prompt caching */
	return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", r->prompt_tokens, "completion_tokens",
			 r->completion_tokens, "total_tokens", r->prompt_tokens + r->completion_tokens,
			 "prompt_tokens_details", "cached_tokens", r->cached_tokens);
}

/* Add one choice's result to a request's usage: the prompt counted once
 * (the choices share it), their completions summed. */
static void usage_add(nf_job_result *total, const nf_job_result *r, int first)
{
	if (first) {
		total->prompt_tokens = r->prompt_tokens;
		total->cached_tokens = r->cached_tokens;
		total->completion_tokens = 0;
	}
	total->completion_tokens += r->completion_tokens;
}

/* The envelope of a stream's chunks around choices (stolen). */
static json_t *chunk_envelope(const stream *st, json_t *choices)
{
	return json_pack("{s:s,s:s,s:I,s:s,s:o,s:s}", "id", st->id, "object",
			 st->chat ? "chat.completion.chunk" : "text_completion", "created",
			 (json_int_t)st->created, "model", st->srv->manifest->model_name, "choices", choices,
			 "system_fingerprint", st->srv->profile->id);
}

static int stream_event(stream *st, json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	int rc;
	json_decref(o);
	if (!s)
		return nf_error_set(NF_ENOMEM, "out of memory");
	rc = nf_sbuf_printf(&st->out, "data: %s\n\n", s);
	free(s);
	return rc;
}

/* One SSE event carrying a chunk of choice st->k: text, its tokens'
 * logprobs (stolen; NULL: null) and, in its last chunk, finish. */
static int stream_chunk(stream *st, const char *text, size_t len, json_t *logprobs, const char *finish)
{
	json_t *choice, *t;
	t = json_stringn(text ? text : "", text ? len : 0);
	if (!t)
		t = json_string("");
	if (st->chat) {
		json_t *delta = json_object();
		if (!st->sent_role) {
			json_object_set_new(delta, "role", json_string("assistant"));
			st->sent_role = 1;
		}
		if (!finish || len)
			json_object_set_new(delta, "content", t);
		else
			json_decref(t);
		choice = json_pack("{s:i,s:o,s:o,s:o}", "index", st->k, "delta", delta, "logprobs",
				   logprobs ? logprobs : json_null(),
				   "finish_reason", finish ? json_string(finish) : json_null());
	} else {
		choice = json_pack("{s:i,s:o,s:o,s:o}", "index", st->k, "text", t, "logprobs",
				   logprobs ? logprobs : json_null(),
				   "finish_reason", finish ? json_string(finish) : json_null());
	}
	return stream_event(st, chunk_envelope(st, json_pack("[o]", choice)));
}

/* stream_options.include_usage: the request's usage, once, in a last
 * chunk with no choices (no other chunk carries usage). */
static int stream_usage(stream *st)
{
	return stream_event(st, json_pack("{s:s,s:s,s:I,s:s,s:[],s:o,s:s}", "id", st->id, "object",
					  st->chat ? "chat.completion.chunk" : "text_completion", "created",
					  (json_int_t)st->created, "model", st->srv->manifest->model_name,
					  "choices", "usage", usage_json(&st->total), "system_fingerprint",
					  st->srv->profile->id));
}

/* The logprobs of choice st->k's tokens generated since its last chunk,
 * in the endpoint's shape (NULL without logprobs or memory). */
static json_t *stream_logprobs(stream *st)
{
	const nf_tokenizer *tok = nf_engine_tokenizer(st->srv->engine);
	json_t *lp = st->chat ? json_pack("{s:[],s:n}", "content", "refusal") : nf_logprobs_completion_new();
	nf_token_logprob batch[32];
	size_t n;
	if (!st->logprobs || !lp) {
		json_decref(lp);
		return NULL;
	}
	while ((n = nf_job_copy_logprobs(st->job, st->lp_sent, batch, sizeof batch / sizeof *batch)) > 0) {
		int rc = st->chat ? nf_logprobs_chat_add(json_object_get(lp, "content"), tok, &st->lp_at, batch, n)
				  : nf_logprobs_completion_add(lp, tok, &st->lp_at, batch, n);
		if (rc < 0)
			break;
		st->lp_sent += n;
	}
	return lp;
}

/* Split a content chunk, formatted once by jansson around a marker text,
 * into what comes before and after the text: every later content chunk is
 * then two memcpy and an escape, with no allocation once the buffer has grown. */
static int stream_template(stream *st)
{
	static const char marker[] = "\"\\u0001\\u0002\\u0003\"";
	nf_sbuf saved = st->out;
	const char *choices, *at;
	int rc;
	nf_sbuf_init(&st->out, MAX_RESPONSE_TEXT);
	rc = stream_chunk(st, "\x01\x02\x03", 3, NULL, NULL);
	if (rc < 0)
		goto done;
	choices = strstr(st->out.data, "\"choices\":");
	at = choices ? strstr(choices, marker) : NULL;
	if (!at) {
		rc = nf_error_set(NF_EINPUT, "chunk template without its marker");
		goto done;
	}
	st->pre_len = (size_t)(at - st->out.data) + 1;
	st->post_len = st->out.len - st->pre_len - (sizeof marker - 3);
	st->pre = malloc(st->pre_len + 1);
	st->post = malloc(st->post_len + 1);
	if (!st->pre || !st->post) {
		rc = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	memcpy(st->pre, st->out.data, st->pre_len);
	st->pre[st->pre_len] = '\0';
	memcpy(st->post, at + sizeof marker - 2, st->post_len);
	st->post[st->post_len] = '\0';
	rc = 0;
done:
	nf_sbuf_release(&st->out);
	st->out = saved;
	return rc;
}

/* Append s[0..len) (valid UTF-8) escaped as the inside of a JSON string,
 * as jansson's json_dumps does it (no JSON_ENSURE_ASCII, no JSON_ESCAPE_SLASH). */
static int json_escape_add(nf_sbuf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t i = 0;
	while (i < len) {
		size_t j = i;
		char e[6];
		size_t el = 2;
		unsigned char ch;
		while (j < len && (unsigned char)s[j] >= 0x20 && s[j] != '"' && s[j] != '\\')
			j++;
		if (j > i && nf_sbuf_add(b, s + i, j - i) < 0)
			return NF_EINPUT;
		if (j == len)
			break;
		ch = (unsigned char)s[j];
		e[0] = '\\';
		switch (ch) {
		case '"': e[1] = '"'; break;
		case '\\': e[1] = '\\'; break;
		case '\b': e[1] = 'b'; break;
		case '\f': e[1] = 'f'; break;
		case '\n': e[1] = 'n'; break;
		case '\r': e[1] = 'r'; break;
		case '\t': e[1] = 't'; break;
		default:
			e[1] = 'u';
			e[2] = '0';
			e[3] = '0';
			e[4] = hex[ch >> 4];
			e[5] = hex[ch & 15];
			el = 6;
		}
		if (nf_sbuf_add(b, e, el) < 0)
			return NF_EINPUT;
		i = j + 1;
	}
	return 0;
}

/* One content chunk from the template (see stream_template). */
static int stream_content(stream *st, const char *text, size_t len)
{
	if (nf_sbuf_add(&st->out, st->pre, st->pre_len) < 0 || json_escape_add(&st->out, text, len) < 0 ||
	    nf_sbuf_add(&st->out, st->post, st->post_len) < 0)
		return nf_error_set(NF_ENOMEM, "stream buffer full");
	return 0;
}

/* Text of choice st->k: through the chunk template, or with its tokens' logprobs. */
static int stream_text(stream *st, const char *text, size_t len)
{
	if (st->logprobs)
		return stream_chunk(st, text, len, stream_logprobs(st), NULL);
	return stream_content(st, text, len);
}

/* The first chunks of choice st->k: chat's role, completions' echo. */
static int stream_choice_start(stream *st)
{
	st->job = st->jobs[st->k];
	st->lp_sent = 0;
	st->lp_at = (nf_logprob_cursor){st->last_prompt_token, 0};
	st->sent_role = 0;
	if (st->chat)
		return stream_chunk(st, "", 0, NULL, NULL);
	if (st->echo_len)
		return stream_content(st, st->echo, st->echo_len);
	return 0;
}

/* Point the parked waiter at another job (the waiter list reads w->job). */
static void waiter_retarget(waiter *w, nf_job *job)
{
	pthread_mutex_lock(&w->srv->waiters_mu);
	w->job = job;
	pthread_mutex_unlock(&w->srv->waiters_mu);
}

/* Choice st->k is over (text: its last piece): its last chunk, then the
 * next choice, or the usage and the end of the stream. */
static int stream_choice_end(stream *st, const nf_sbuf *text)
{
	nf_job_result r;
	nf_job_get_result(st->job, &r);
	if (strcmp(r.finish_reason, "stop") && strcmp(r.finish_reason, "length")) {
		nf_sbuf_printf(&st->out, "data: {\"error\":{\"message\":\"generation %s\","
			       "\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n",
			       !strcmp(r.finish_reason, "cancelled") ? "cancelled: the server is stopping" : "failed");
		goto end;
	}
	if (stream_chunk(st, text->data, text->len, stream_logprobs(st), r.finish_reason) < 0)
		return NF_ENOMEM;
	usage_add(&st->total, &r, st->k == 0);
	if (st->k + 1 < st->n_jobs) {
		st->k++;
		waiter_retarget(&st->w, st->jobs[st->k]);
		free(st->pre);
		free(st->post);
		st->pre = st->post = NULL;
		st->sent_role = 1; /* the template's delta carries content only */
		if (stream_template(st) < 0)
			return NF_ENOMEM;
		return stream_choice_start(st);
	}
	if (st->include_usage && stream_usage(st) < 0)
		return NF_ENOMEM;
end:
	nf_sbuf_adds(&st->out, "data: [DONE]\n\n");
	st->finished = 1;
	return 0;
}

/* MHD's content reader, on the event-loop thread: never blocks.  Without
 * text to send it parks the connection and returns 0; the scheduler resumes
 * it at the next text (all the text ready then goes out as one chunk).
 * The n choices are streamed one after the other (they run together in
 * the scheduler; each chunk says its choice's index). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	stream *st = cls;
	(void)pos;
	while (st->out_off == st->out.len) {
		nf_sbuf *text = &st->text;
		int fin = 0, parked = 0;
		if (st->finished)
			return MHD_CONTENT_READER_END_OF_STREAM;
		st->out.len = st->out_off = 0;
		text->len = 0;
		if (atomic_exchange(&st->w.kicked, 0)) {
			if (client_gone(st->conn))
				return MHD_CONTENT_READER_END_WITH_ERROR; /* stream_free cancels */
			if (nf_sched_now() - st->t_sent >= KEEPALIVE_MS / 1000.0) {
				nf_sbuf_adds(&st->out, ": keep-alive\n\n");
				continue;
			}
		}
		if (nf_job_poll(st->job, text, &fin, &parked, waiter_park, waiter_wake, &st->w) < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (parked)
			return 0;
		if (text->len && !fin && stream_text(st, text->data, text->len) < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (fin) {
			if (stream_choice_end(st, text) < 0)
				return MHD_CONTENT_READER_END_WITH_ERROR;
		} else if (!text->len) {
			return MHD_CONTENT_READER_END_WITH_ERROR; /* could not park: the server stops */
		}
	}
	st->t_sent = nf_sched_now();
	{
		size_t n = st->out.len - st->out_off;
		if (n > max)
			n = max;
		memcpy(buf, st->out.data + st->out_off, n);
		st->out_off += n;
		return (ssize_t)n;
	}
}

static void stream_free(void *cls)
{
	stream *st = cls;
	waiter_unlink(&st->w);
	if (st->srv->metrics)
		nf_metrics_observe(st->srv->metrics, NF_HIST_REQUEST, nf_sched_now() - st->t_start);
	for (int k = 0; k < st->n_jobs; k++) {
		if (!st->finished)
			nf_job_cancel(st->jobs[k]); /* the client went away mid-stream */
		nf_job_release(st->jobs[k]);
	}
	nf_serve_req_free(st->req);
	nf_sbuf_release(&st->out);
	nf_sbuf_release(&st->text);
	free(st->pre);
	free(st->post);
	free(st);
}

/* One choice of a finished job: its text (after the echoed prompt) and
 * logprobs in the endpoint's shape. */
static json_t *choice_json(nf_server *srv, conn *cn, int k, const nf_job_result *res)
{
	const nf_tokenizer *tok = nf_engine_tokenizer(srv->engine);
	const nf_serve_req *req = cn->req;
	nf_logprob_cursor at = {cn->last_prompt_token, 0};
	const nf_token_logprob *lp;
	json_t *t, *logprobs = json_null();
	nf_sbuf text;
	size_t n;
	int fin = 0, parked = 0;
	nf_sbuf_init(&text, MAX_RESPONSE_TEXT);
	if (req->echo)
		nf_sbuf_add_utf8(&text, req->prompt, req->prompt_len);
	/* the job is over: all its text is ready, nothing parks */
	nf_job_poll(cn->jobs[k], &text, &fin, &parked, waiter_park, waiter_wake, &cn->w);
	t = json_stringn(text.data ? text.data : "", text.len);
	nf_sbuf_release(&text);
	if (req->logprobs && req->chat) {
		json_decref(logprobs);
		logprobs = json_pack("{s:[],s:n}", "content", "refusal");
		lp = nf_job_final_logprobs(cn->jobs[k], 0, &n);
		if (logprobs && n)
			nf_logprobs_chat_add(json_object_get(logprobs, "content"), tok, &at, lp, n);
	} else if (req->logprobs) {
		json_decref(logprobs);
		logprobs = nf_logprobs_completion_new();
		if (logprobs && req->echo) { /* the first choice's job computed the prompt's */
			at.prev = -1;
			lp = nf_job_final_logprobs(cn->jobs[0], 1, &n);
			nf_logprobs_completion_add(logprobs, tok, &at, lp, n);
		}
		lp = nf_job_final_logprobs(cn->jobs[k], 0, &n);
		if (logprobs && n)
			nf_logprobs_completion_add(logprobs, tok, &at, lp, n);
	}
	if (cn->chat)
		return json_pack("{s:i,s:{s:s,s:o*},s:o*,s:s}", "index", k, "message", "role", "assistant",
				 "content", t, "logprobs", logprobs, "finish_reason", res->finish_reason);
	return json_pack("{s:i,s:o*,s:o*,s:s}", "index", k, "text", t, "logprobs", logprobs,
			 "finish_reason", res->finish_reason);
}

/* Every job is over: the answer with one choice per job, or the error of
 * the first that failed. */
static enum MHD_Result answer_choices(struct MHD_Connection *c, nf_server *srv, conn *cn)
{
	const char *ep = cn->endpoint;
	nf_job_result res, total = {0};
	json_t *choices = json_array(), *o;
	for (int k = 0; k < cn->n_jobs; k++) {
		nf_job_get_result(cn->jobs[k], &res);
		if (strcmp(res.finish_reason, "stop") && strcmp(res.finish_reason, "length")) {
			json_decref(choices);
			if (!strcmp(res.finish_reason, "cancelled"))
				return fail(c, srv, ep, 503, "service_unavailable", "shutting_down",
					    "the server stopped before the completion finished");
			return fail(c, srv, ep, 500, "server_error", NULL, "generation failed");
		}
		usage_add(&total, &res, k == 0);
		json_array_append_new(choices, choice_json(srv, cn, k, &res));
	}
	o = json_pack("{s:s,s:s,s:I,s:s,s:o,s:o,s:s}", "id", cn->id, "object",
		      cn->chat ? "chat.completion" : "text_completion", "created",
		      (json_int_t)time(NULL), "model", srv->manifest->model_name, "choices", choices,
		      "usage", usage_json(&total), "system_fingerprint", srv->profile->id);
	if (srv->metrics)
		nf_metrics_observe(srv->metrics, NF_HIST_REQUEST, nf_sched_now() - cn->t_start);
	return send_json(c, srv, ep, 200, o);
}

/* A non-streamed completion, called again each time its connection is
 * resumed: park on the first job not over yet (the text is taken at the
 * end); answer once they all are. */
static enum MHD_Result answer_pending(struct MHD_Connection *c, nf_server *srv, conn *cn)
{
	int fin = 0, parked = 0;
	if (atomic_exchange(&cn->w.kicked, 0) && client_gone(c))
		return MHD_NO; /* nobody to answer: on_completed cancels (499) */
	for (;;) {
		if (nf_job_poll(cn->jobs[cn->wait_k], NULL, &fin, &parked, waiter_park, waiter_wake, &cn->w) < 0)
			return MHD_NO;
		if (parked)
			return MHD_YES;
		if (!fin || cn->wait_k + 1 == cn->n_jobs)
			break;
		cn->wait_k++;
		waiter_retarget(&cn->w, cn->jobs[cn->wait_k]);
	}
	waiter_unlink(&cn->w);
	if (!fin) { /* could not park: the server stops */
		for (int k = 0; k < cn->n_jobs; k++)
			nf_job_cancel(cn->jobs[k]);
		return fail(c, srv, cn->endpoint, 500, "server_error", NULL, "generation failed");
	}
	return answer_choices(c, srv, cn);
}

/* The request's one call of the tokenizer: the special tokens the model's
 * tokenizer adds (BOS where it adds one), and control tokens written in the
 * prompt (a rendered chat template's) matched whole. */
static int tokenize_prompt(const nf_server *srv, const nf_serve_req *req, int **tokens, size_t *n_tokens)
{
	return nf_tokenizer_encode(nf_engine_tokenizer(srv->engine), req->prompt, req->prompt_len,
				   NF_TOK_ADD_SPECIAL | NF_TOK_PARSE_SPECIAL, tokens, n_tokens);
}

/* A prompt given as token ids is used as given (ids checked against the
 * vocabulary already); its text, for echo, is what they decode to. */
static int prompt_from_ids(const nf_server *srv, nf_serve_req *req, int **tokens, size_t *n_tokens)
{
	const nf_tokenizer *tok = nf_engine_tokenizer(srv->engine);
	nf_sbuf raw, text;
	int rc = 0;
	if (!(*tokens = malloc(req->n_prompt_ids * sizeof **tokens)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	memcpy(*tokens, req->prompt_ids, req->n_prompt_ids * sizeof **tokens);
	*n_tokens = req->n_prompt_ids;
	nf_sbuf_init(&raw, MAX_RESPONSE_TEXT);
	nf_sbuf_init(&text, 4 * MAX_RESPONSE_TEXT);
	for (size_t i = 0; i < req->n_prompt_ids && rc == 0; i++) {
		size_t len = 0;
		const char *piece = nf_tokenizer_decode(tok, i ? req->prompt_ids[i - 1] : -1, req->prompt_ids[i], &len);
		rc = nf_sbuf_add(&raw, piece, len);
	}
	if (rc == 0 && (rc = nf_sbuf_add_utf8(&text, raw.data ? raw.data : "", raw.len)) == 0 &&
	    (rc = nf_sbuf_add(&text, "", 0)) == 0) {
		free(req->prompt);
		req->prompt = nf_sbuf_detach(&text, &req->prompt_len);
	}
	nf_sbuf_release(&raw);
	nf_sbuf_release(&text);
	return rc < 0 ? nf_error_set(NF_EINPUT, "the prompt's text exceeds %u bytes", MAX_RESPONSE_TEXT) : 0;
}

/* The scheduler's parameters of choice k of the request. */
static void job_params(nf_job_params *jp, const nf_server *srv, const conn *cn, int k)
{
	const nf_serve_req *req = cn->req;
	const nf_model_config *cfg = nf_engine_config(srv->engine);
	memset(jp, 0, sizeof *jp);
	jp->max_tokens = req->max_tokens > 0 ? req->max_tokens : cn->chat ? cfg->max_seq_len : 16;
	jp->temperature = req->temperature;
	jp->top_p = req->top_p;
	/* choices differ by seed: seed + k, so a seeded request is reproducible */
	jp->seed = (req->has_seed ? req->seed
				  : ((uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull) ^
					    (cn->idn * 0xBF58476D1CE4E5B9ull)) + (uint64_t)k;
	jp->stop = req->stop;
	jp->n_stop = req->n_stop;
	jp->t_arrival = cn->t_start;
	jp->sampling = &req->sampling;
	jp->min_tokens = req->min_tokens;
	jp->ignore_eos = req->ignore_eos;
	jp->stop_ids = req->stop_token_ids;
	jp->n_stop_ids = req->n_stop_token_ids;
	jp->logprobs = req->logprobs;
	jp->top_logprobs = req->top_logprobs;
	/* the choices share one prompt: the first computes its logprobs */
	jp->prompt_logprobs = k == 0 && req->echo && req->logprobs && !req->chat;
	jp->guide = cn->guide;
}

/* Worker: the request's guide compiled (or found in the cache); 400 naming
 * the part of the schema or pattern that cannot be. */
static int compile_guide(nf_server *srv, conn *cn)
{
	if (cn->req->guide.kind == NF_GUIDE_NONE)
		return 0;
	if (nf_guides_get(&cn->guide, srv->guides, &cn->req->guide) < 0) {
		nf_api_error_set(&cn->err, 400, "invalid_request_error", "invalid_guide",
				 cn->req->guide.kind == NF_GUIDE_SCHEMA ? "response_format" : "nvext",
				 "cannot constrain the answer: %s", nf_error_last());
		return -1;
	}
	return 0;
}

/* Worker: queue the tokens on the scheduler, one job per choice (cn->jobs;
 * the later ones copy the first one's prompt cache rows, sched.c's prefix
 * sharing), or fill cn->err.  submit_mu makes nf_server_quiesce a barrier:
 * once it returns no submit runs or starts, so the scheduler can be freed. */
static void prep_submit(nf_server *srv, conn *cn, const int *tokens, size_t n_tokens)
{
	nf_job_params jp;
	int rc = 0;
	cn->idn = atomic_fetch_add(&srv->ids, 1) + 1;
	cn->last_prompt_token = tokens[n_tokens - 1];
	pthread_mutex_lock(&srv->submit_mu);
	for (int k = 0; k < cn->req->n && rc == 0; k++) {
		job_params(&jp, srv, cn, k);
		rc = atomic_load(&srv->quiesced) ? NF_EUNSUPPORTED
						 : nf_sched_submit(&cn->jobs[k], srv->sched, tokens, n_tokens, &jp);
		if (rc == 0)
			cn->n_jobs++;
	}
	pthread_mutex_unlock(&srv->submit_mu);
	if (rc < 0) { /* all or none */
		for (int k = 0; k < cn->n_jobs; k++) {
			nf_job_cancel(cn->jobs[k]);
			nf_job_release(cn->jobs[k]);
		}
		cn->n_jobs = 0;
	}
	if (rc == NF_EENV)
		nf_api_error_set(&cn->err, 429, "rate_limit_error", "queue_full", "",
				 "too many requests in flight (%s); retry shortly", nf_error_last());
	else if (rc == NF_EUNSUPPORTED)
		nf_api_error_set(&cn->err, 503, "service_unavailable", "shutting_down", "", "the server is shutting down");
	else if (rc < 0)
		nf_api_error_set(&cn->err, 500, "server_error", NULL, "", "cannot queue the request: %s", nf_error_last());
}

/* Worker: parse the body (the chat template renders inside), tokenize,
 * submit.  On failure cn->err says what to answer. */
static void prep_completion(nf_server *srv, conn *cn)
{
	const nf_model_config *cfg = nf_engine_config(srv->engine);
	int *tokens = NULL;
	size_t n_tokens = 0;
	if (nf_serve_req_parse(&cn->req, &cn->err, cn->body.data ? cn->body.data : "", cn->body.len, cn->chat,
			       &srv->chat) < 0)
		goto done;
	if (strcmp(cn->req->model, srv->manifest->model_name) != 0) {
		nf_api_error_set(&cn->err, 404, "invalid_request_error", "model_not_found", "model",
				 "The model '%.128s' does not exist; this server serves '%s'", cn->req->model,
				 srv->manifest->model_name);
		goto done;
	}
	if (nf_serve_req_check_vocab(cn->req, &cn->err, cfg->vocab_size) < 0 ||
	    compile_guide(srv, cn) < 0)
		goto done;
	if ((cn->req->n_prompt_ids ? prompt_from_ids(srv, cn->req, &tokens, &n_tokens)
				   : tokenize_prompt(srv, cn->req, &tokens, &n_tokens)) < 0) {
		nf_api_error_set(&cn->err, 400, "invalid_request_error", NULL, "", "cannot tokenize the prompt: %s",
				 nf_error_last());
		goto done;
	}
	if (n_tokens >= (size_t)cfg->max_seq_len) {
		nf_api_error_set(&cn->err, 400, "invalid_request_error", "context_length_exceeded",
				 cn->chat ? "messages" : "prompt",
				 "This model's maximum context length is %d tokens, however the prompt is %zu tokens "
				 "(BOS included); shorten it to at most %d tokens",
				 cfg->max_seq_len, n_tokens, cfg->max_seq_len - 1);
		goto done;
	}
	prep_submit(srv, cn, tokens, n_tokens);
done:
	free(tokens);
}

/* The work item (workq.h), on the worker: prepare the request unless its
 * client left while it waited or the server stops, then wake its connection,
 * whose handler answers (finish_completion). */
static void prep_run(void *arg, int cancelled)
{
	conn *cn = arg;
	if (cancelled)
		nf_api_error_set(&cn->err, 503, "service_unavailable", "shutting_down", "", "the server is shutting down");
	else if (client_gone(cn->mc))
		cn->dropped = 1; /* nobody to answer: not worth tokenizing */
	else if (cn->kind == WORK_TOKENIZE)
		nf_serve_tokenize(&cn->reply, &cn->err, nf_engine_tokenizer(cn->srv->engine),
				  cn->srv->manifest->model_name, nf_engine_config(cn->srv->engine)->max_seq_len,
				  &cn->srv->chat, cn->body.data ? cn->body.data : "", cn->body.len);
	else if (cn->kind == WORK_DETOKENIZE)
		nf_serve_detokenize(&cn->reply, &cn->err, nf_engine_tokenizer(cn->srv->engine),
				    cn->srv->manifest->model_name, cn->body.data ? cn->body.data : "", cn->body.len);
	else
		prep_completion(cn->srv, cn);
	atomic_store(&cn->prep, PREP_DONE);
	MHD_resume_connection(cn->mc);
}

/* Under the work queue's lock, before a worker can take the item. */
static void prep_park(void *arg)
{
	conn *cn = arg;
	atomic_store(&cn->prep, PREP_QUEUED);
	MHD_suspend_connection(cn->mc);
}

/* Answer a streamed completion: SSE from the job, see stream_read. */
static enum MHD_Result start_stream(struct MHD_Connection *c, nf_server *srv, conn *cn)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	stream *st = calloc(1, sizeof *st);
	if (!st)
		return MHD_NO;
	st->srv = srv;
	st->conn = c;
	st->t_sent = nf_sched_now();
	memcpy(st->jobs, cn->jobs, sizeof st->jobs);
	st->n_jobs = cn->n_jobs;
	cn->n_jobs = 0;
	st->req = cn->req;
	cn->req = NULL;
	st->logprobs = st->req->logprobs;
	st->last_prompt_token = cn->last_prompt_token;
	if (st->req->echo) {
		st->echo = st->req->prompt;
		st->echo_len = st->req->prompt_len;
	}
	waiter_link(srv, &st->w, st->jobs[0], c);
	nf_sbuf_init(&st->out, MAX_RESPONSE_TEXT);
	nf_sbuf_init(&st->text, MAX_RESPONSE_TEXT);
	st->chat = cn->chat;
	st->include_usage = st->req->include_usage;
	st->created = (long long)time(NULL);
	st->t_start = cn->t_start;
	memcpy(st->id, cn->id, sizeof st->id);
	st->sent_role = 1; /* the template's delta carries content only */
	if (stream_template(st) < 0)
		goto fail;
	if (stream_choice_start(st) < 0)
		goto fail;
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, st, stream_free);
	if (!r)
		goto fail;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	ret = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	if (srv->metrics)
		nf_metrics_request(srv->metrics, cn->endpoint, 200);
	return ret;
fail:
	stream_free(st);
	return MHD_NO;
}

/* Back on the HTTP thread once the worker is done with the request. */
static enum MHD_Result finish_completion(struct MHD_Connection *c, nf_server *srv, conn *cn)
{
	if (cn->dropped)
		return MHD_NO; /* on_completed counts the 499 */
	if (cn->err.status)
		return send_error(c, srv, cn->endpoint, &cn->err);
	if (cn->kind != WORK_COMPLETION)
		return send_body(c, srv->metrics, cn->endpoint, 200, "application/json", cn->reply,
				 strlen(cn->reply), NULL, NULL);
	snprintf(cn->id, sizeof cn->id, "%s-%016llx%08llx", cn->chat ? "chatcmpl" : "cmpl",
		 (unsigned long long)srv->created, cn->idn);
	if (cn->req->stream)
		return start_stream(c, srv, cn);
	/* not streamed: park the connection until the jobs end (answer_pending) */
	waiter_link(srv, &cn->w, cn->jobs[0], c);
	return answer_pending(c, srv, cn);
}

/* The HTTP thread only checks that the server takes completions and queues
 * the request (a completion, or kind's (de)tokenization) for the worker,
 * with its connection suspended meanwhile. */
static enum MHD_Result handle_completion(struct MHD_Connection *c, nf_server *srv, conn *cn, int chat,
					 int kind)
{
	const char *ep = cn->endpoint;
	int rc;
	if (!atomic_load(&srv->ready) || atomic_load(&srv->quiesced))
		return fail(c, srv, ep, 503, "service_unavailable", "model_not_ready",
			    atomic_load(&srv->ready) ? "the server is shutting down"
						     : "the model is still loading; see /v1/health/ready");
	cn->chat = chat;
	cn->kind = kind;
	cn->mc = c;
	rc = nf_workq_push(srv->prep, prep_run, prep_park, cn);
	if (rc == NF_EENV)
		return fail(c, srv, ep, 429, "rate_limit_error", "queue_full",
			    "too many requests in flight (%s); retry shortly", nf_error_last());
	if (rc == NF_EUNSUPPORTED)
		return fail(c, srv, ep, 503, "service_unavailable", "shutting_down", "the server is shutting down");
	if (rc < 0)
		return fail(c, srv, ep, 500, "server_error", NULL, "cannot queue the request: %s", nf_error_last());
	return MHD_YES;
}

/* The served model as /v1/models lists it. */
static json_t *model_json(const nf_server *srv)
{
	return json_pack("{s:s,s:s,s:I,s:s,s:s}", "id", srv->manifest->model_name, "object", "model",
			 "created", (json_int_t)srv->created, "owned_by", "nimfactory", "root",
			 srv->profile->name);
}

/* GET /v1/models/{id}: the model, or 404 in OpenAI's shape. */
static enum MHD_Result handle_model(struct MHD_Connection *c, nf_server *srv, const char *ep, const char *url)
{
	const char *id = url + strlen("/v1/models/");
	nf_api_error e;
	if (!strcmp(id, srv->manifest->model_name))
		return send_json(c, srv, ep, 200, model_json(srv));
	nf_api_error_set(&e, 404, "invalid_request_error", "model_not_found", "model",
			 "The model '%.128s' does not exist", id);
	return send_error(c, srv, ep, &e);
}

static enum MHD_Result handle_get(struct MHD_Connection *c, nf_server *srv, const char *ep, const char *url)
{
	if (!strcmp(ep, "/v1/models/{id}"))
		return handle_model(c, srv, ep, url);
	if (!strcmp(ep, "/v1/version"))
		return send_json(c, srv, ep, 200, json_pack("{s:s}", "version", NF_VERSION));
	if (!strcmp(ep, "/v1/health/live"))
		return send_json(c, srv, ep, 200, json_pack("{s:s}", "status", "live"));
	if (!strcmp(ep, "/v1/health/ready")) {
		if (atomic_load(&srv->ready) && !atomic_load(&srv->quiesced))
			return send_json(c, srv, ep, 200, json_pack("{s:s}", "status", "ready"));
		return fail(c, srv, ep, 503, "service_unavailable", "model_not_ready",
			    atomic_load(&srv->ready) ? "the server is shutting down" : "the model is still loading");
	}
	if (!strcmp(ep, "/v1/models"))
		return send_json(c, srv, ep, 200, json_pack("{s:s,s:[o]}", "object", "list", "data", model_json(srv)));
	if (!strcmp(ep, "/v1/metrics")) {
		nf_sbuf b;
		enum MHD_Result ret;
		nf_sbuf_init(&b, 1u << 20);
		if (srv->metrics)
			nf_metrics_request(srv->metrics, ep, 200); /* counted before, so it shows itself */
		if (!srv->metrics || nf_metrics_format(srv->metrics, &b) < 0) {
			nf_sbuf_release(&b);
			return fail(c, srv, ep, 500, "server_error", NULL, "metrics unavailable");
		}
		ret = send_body(c, NULL, ep, 200,
				"text/plain; version=0.0.4; charset=utf-8", b.data ? b.data : "", b.len, NULL, NULL);
		nf_sbuf_release(&b);
		return ret;
	}
	if (!strcmp(ep, "/v1/metadata")) {
		if (!srv->metadata)
			return fail(c, srv, ep, 503, "service_unavailable", "model_not_ready",
				    "the model is still loading");
		return send_body(c, srv->metrics, ep, 200, "application/json", srv->metadata,
				 strlen(srv->metadata), NULL, NULL);
	}
	return fail(c, srv, ep, 404, "invalid_request_error", "not_found", "no route for GET %s", ep);
}

static const char *known_endpoint(const char *url)
{
	static const char *const eps[] = {"/v1/completions", "/v1/chat/completions", "/v1/models",
					  "/v1/health/live", "/v1/health/ready", "/v1/metrics",
					  "/v1/metadata", "/v1/version", "/tokenize", "/detokenize", NULL};
	for (const char *const *e = eps; *e; e++)
		if (!strcmp(url, *e))
			return *e;
	if (!strncmp(url, "/v1/models/", strlen("/v1/models/")) && url[strlen("/v1/models/")])
		return "/v1/models/{id}";
	return NULL;
}

static sock *sock_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

/* A whole request arrived (busy = 1) or its response is done (busy = 0). */
static void sock_busy(nf_server *srv, struct MHD_Connection *c, int busy)
{
	sock *k = sock_of(c);
	if (!k)
		return;
	pthread_mutex_lock(&srv->socks_mu);
	k->busy = busy;
	if (!busy)
		k->t_idle = nf_sched_now();
	pthread_mutex_unlock(&srv->socks_mu);
}

/* Past --max-connections a new connection is accepted and closed at once
 * (MHD's own limit in epoll mode would stop accepting instead, leaving
 * clients waiting in the backlog). */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	nf_server *srv = cls;
	(void)addr;
	(void)addrlen;
	return srv->n_conns < srv->max_connections ? MHD_YES : MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	nf_server *srv = cls;
	sock *k;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
		srv->n_conns++;
	else
		srv->n_conns--;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		k = calloc(1, sizeof *k);
		*socket_context = k;
		if (!k || !fd)
			return;
		k->fd = fd->connect_fd;
		k->peer_len = sizeof k->peer;
		if (getpeername(k->fd, (struct sockaddr *)&k->peer, &k->peer_len) != 0)
			k->peer_len = 0;
		k->t_idle = nf_sched_now();
		pthread_mutex_lock(&srv->socks_mu);
		k->next = srv->socks;
		if (srv->socks)
			srv->socks->prev = k;
		srv->socks = k;
		pthread_mutex_unlock(&srv->socks_mu);
		return;
	}
	k = *socket_context;
	if (!k)
		return;
	pthread_mutex_lock(&srv->socks_mu);
	if (k->prev)
		k->prev->next = k->next;
	else if (srv->socks == k)
		srv->socks = k->next;
	if (k->next)
		k->next->prev = k->prev;
	pthread_mutex_unlock(&srv->socks_mu);
	free(k);
	*socket_context = NULL;
}

/* The timer thread: every POLL_MS it resumes the parked connections (each
 * then looks whether its client is still there and whether a keep-alive is
 * due), and it reaps.  A connection that has not delivered a whole request within
 * request_timeout seconds of opening (or of its previous response) is shut
 * down, so slow senders (slowloris, slow bodies) cannot hold every
 * connection slot; MHD's own idle timeout restarts at every byte.  The peer
 * address is compared first, in case MHD has closed the fd already and
 * the number was reused. */
static void *reaper_main(void *arg)
{
	nf_server *srv = arg;
	pthread_mutex_lock(&srv->socks_mu);
	while (!srv->reaper_stop) {
		struct timespec dl;
		double now = nf_sched_now();
		pthread_mutex_unlock(&srv->socks_mu);
		waiters_kick(srv);
		pthread_mutex_lock(&srv->socks_mu);
		for (sock *k = srv->socks; k && srv->request_timeout > 0; k = k->next) {
			struct sockaddr_storage peer;
			socklen_t len = sizeof peer;
			if (k->busy || k->reaped || k->peer_len == 0 ||
			    now - k->t_idle < (double)srv->request_timeout)
				continue;
			if (getpeername(k->fd, (struct sockaddr *)&peer, &len) == 0 && len == k->peer_len &&
			    memcmp(&peer, &k->peer, len) == 0) {
				shutdown(k->fd, SHUT_RDWR);
				srv->n_reaped++;
			}
			k->reaped = 1;
		}
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_nsec += POLL_MS * 1000 * 1000;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&srv->socks_cv, &srv->socks_mu, &dl);
	}
	pthread_mutex_unlock(&srv->socks_mu);
	return NULL;
}

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	nf_framing_add(cls, key, value);
	return MHD_YES;
}

/* Refuse a request whose framing is broken, and close: where its body ends,
 * and so where a next request would start, is not known. */
static enum MHD_Result refuse_framing(struct MHD_Connection *c, nf_server *srv, conn *cn, int status,
				      const char *why)
{
	nf_api_error e;
	enum MHD_Result ret;
	char *s;
	nf_api_error_set(&e, status, "invalid_request_error", status == 501 ? "unsupported_transfer_coding"
									   : "invalid_framing", "", "%s", why);
	cn->answered = 1;
	sock_busy(srv, c, 1);
	s = nf_api_error_json(&e);
	if (!s)
		return MHD_NO;
	ret = send_body(c, srv->metrics, cn->endpoint, status, "application/json", s, strlen(s),
			MHD_HTTP_HEADER_CONNECTION, "close");
	free(s);
	return ret;
}

/* The first call for a request: its header is in, no body byte has been
 * read.  A response queued now makes MHD skip the body and, with the body
 * unread, close the connection after it. */
static enum MHD_Result begin_request(struct MHD_Connection *c, nf_server *srv, const char *url,
				     const char *version, void **con_cls)
{
	conn *cn = calloc(1, sizeof *cn);
	const char *ep, *cl, *why;
	nf_framing f;
	int status;
	if (!cn)
		return MHD_NO;
	cn->srv = srv;
	cn->t_start = nf_sched_now();
	nf_sbuf_init(&cn->body, srv->max_body);
	ep = known_endpoint(url);
	snprintf(cn->endpoint, sizeof cn->endpoint, "%s", ep ? ep : "other");
	*con_cls = cn;
	atomic_fetch_add(&srv->inflight, 1);
	nf_framing_init(&f, version);
	MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &f);
	if ((status = nf_framing_check(&f, &why)) != 0)
		return refuse_framing(c, srv, cn, status, why);
	cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl) {
		char *end = NULL;
		unsigned long long v = strtoull(cl, &end, 10);
		if (end && *end == '\0' && v > srv->max_body) {
			cn->answered = 1;
			sock_busy(srv, c, 1);
			return fail(c, srv, cn->endpoint, 413, "invalid_request_error", "request_too_large",
				    "the request body exceeds %zu bytes", srv->max_body);
		}
	}
	return MHD_YES;
}

/* A piece of the body: kept up to --max-body, then counted and dropped. */
static enum MHD_Result take_upload(struct MHD_Connection *c, nf_server *srv, conn *cn, const char *upload,
				   size_t *upload_size)
{
	if (!cn->too_big && nf_sbuf_add(&cn->body, upload, *upload_size) < 0) {
		cn->too_big = 1;
		nf_sbuf_release(&cn->body);
	}
	if (cn->too_big)
		cn->discarded += *upload_size;
	*upload_size = 0;
	/* A body without Content-Length: read and drop the rest so that the
	 * client gets to read the 413, unless it will not stop sending. */
	if (cn->too_big && !cn->answered && cn->discarded > MAX_DISCARD) {
		cn->answered = 1;
		sock_busy(srv, c, 1);
		return fail(c, srv, cn->endpoint, 413, "invalid_request_error", "request_too_large",
			    "the request body exceeds %zu bytes", srv->max_body);
	}
	return MHD_YES;
}

/* 404 for an unknown path, quoting method and path made printable. */
static enum MHD_Result no_route(struct MHD_Connection *c, nf_server *srv, const char *method, const char *url)
{
	char u[128], mth[16];
	snprintf(u, sizeof u, "%s", url);
	for (char *p = u; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	snprintf(mth, sizeof mth, "%s", method);
	for (char *p = mth; *p; p++)
		if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
			*p = '?';
	return fail(c, srv, "other", 404, "invalid_request_error", "not_found", "no route for %s %s", mth, u);
}

/* The whole request is in: route it. */
static enum MHD_Result route(struct MHD_Connection *c, nf_server *srv, conn *cn, const char *url,
			     const char *method)
{
	const char *ep = known_endpoint(url);
	if (!ep)
		return no_route(c, srv, method, url);
	if (takes_post(ep)) {
		if (strcmp(method, "POST"))
			return fail(c, srv, ep, 405, "invalid_request_error", "method_not_allowed",
				    "%s takes POST", ep);
		return handle_completion(c, srv, cn, !strcmp(ep, "/v1/chat/completions"),
					 !strcmp(ep, "/tokenize")     ? WORK_TOKENIZE
					 : !strcmp(ep, "/detokenize") ? WORK_DETOKENIZE
								      : WORK_COMPLETION);
	}
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return fail(c, srv, ep, 405, "invalid_request_error", "method_not_allowed", "%s takes GET or HEAD", ep);
	return handle_get(c, srv, ep, url);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	nf_server *srv = cls;
	conn *cn = *con_cls;
	if (!cn)
		return begin_request(c, srv, url, version, con_cls);
	if (*upload_size)
		return take_upload(c, srv, cn, upload, upload_size);
	if (cn->w.job && cn->w.linked)
		return answer_pending(c, srv, cn); /* resumed */
	if (atomic_load(&cn->prep) == PREP_DONE) { /* resumed by the worker */
		atomic_store(&cn->prep, PREP_NONE);
		return finish_completion(c, srv, cn);
	}
	if (cn->answered)
		return MHD_YES;
	cn->answered = 1;
	sock_busy(srv, c, 1);
	if (cn->too_big)
		return fail(c, srv, cn->endpoint, 413, "invalid_request_error", "request_too_large",
			    "the request body exceeds %zu bytes", srv->max_body);
	return route(c, srv, cn, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	nf_server *srv = cls;
	conn *cn = *con_cls;
	(void)toe;
	sock_busy(srv, c, 0);
	if (!cn)
		return;
	if (cn->w.job) {
		if (cn->w.linked && srv->metrics) /* closed before its answer: the client left (or the server stops) */
			nf_metrics_request(srv->metrics, cn->endpoint, 499);
		waiter_unlink(&cn->w);
	}
	if (cn->dropped && srv->metrics)
		nf_metrics_request(srv->metrics, cn->endpoint, 499);
	for (int k = 0; k < cn->n_jobs; k++) { /* over, or never answered: the client left, the server stops */
		nf_job_cancel(cn->jobs[k]);
		nf_job_release(cn->jobs[k]);
	}
	nf_serve_req_free(cn->req);
	nf_guide_release(cn->guide);
	free(cn->reply);
	nf_sbuf_release(&cn->body);
	free(cn);
	*con_cls = NULL;
	atomic_fetch_sub(&srv->inflight, 1);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	fprintf(stderr, "nimserve: http: ");
	vfprintf(stderr, fmt, ap);
}

int nf_server_start(nf_server **out, const nf_server_config *cfg)
{
	nf_server *s = NULL;
	struct addrinfo hints, *ai = NULL;
	char portstr[16];
	unsigned flags;
	const union MHD_DaemonInfo *info;
	int rc;

	*out = NULL;
	s = calloc(1, sizeof *s);
	if (!s)
		return nf_error_set(NF_ENOMEM, "out of memory");
	s->max_body = cfg->max_body;
	s->manifest = cfg->manifest;
	s->profile = &cfg->manifest->profiles[cfg->profile];
	s->reason = strdup(cfg->selection_reason ? cfg->selection_reason : "");
	s->gpus = *cfg->gpus;
	s->metrics = cfg->metrics;
	s->created = (long long)time(NULL);
	s->request_timeout = cfg->request_timeout;
	pthread_mutex_init(&s->socks_mu, NULL);
	pthread_cond_init(&s->socks_cv, NULL);
	pthread_mutex_init(&s->waiters_mu, NULL);
	pthread_mutex_init(&s->submit_mu, NULL);
	atomic_init(&s->stopping, 0);
	atomic_init(&s->ready, 0);
	atomic_init(&s->quiesced, 0);
	atomic_init(&s->inflight, 0);
	atomic_init(&s->ids, 0);
	if (!s->reason) {
		rc = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	/* One worker: a prompt is tokenized in well under a second, and the
	 * second core is the engine's. */
	if ((rc = nf_workq_new(&s->prep, 1, cfg->max_pending > 0 ? (size_t)cfg->max_pending : 64)) < 0)
		goto done;
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	snprintf(portstr, sizeof portstr, "%d", cfg->port);
	if (cfg->port < 0 || cfg->port > 65535 || getaddrinfo(cfg->host, portstr, &hints, &ai) != 0 || !ai) {
		rc = nf_error_set(NF_EINPUT, "cannot resolve listen address %s port %d", cfg->host, cfg->port);
		goto done;
	}
	/* One event-loop thread for every connection (epoll); a connection
	 * waiting for its job is suspended, and resumed by the scheduler. */
	flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
		MHD_USE_ITC | MHD_USE_ERROR_LOG;
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	s->max_connections = cfg->max_connections;
	s->d = MHD_start_daemon(flags, (uint16_t)cfg->port, accept_policy, s, on_request, s,
				MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				MHD_OPTION_SOCK_ADDR, ai->ai_addr,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections + 1,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MHD_MEMORY_LIMIT,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
				MHD_OPTION_END);
	if (!s->d) {
		rc = nf_error_set(NF_EENV, "cannot listen on %s port %d (in use, or not an address of this host)",
				  cfg->host, cfg->port);
		goto done;
	}
	if (pthread_create(&s->reaper, NULL, reaper_main, s) != 0) {
		rc = nf_error_set(NF_EENV, "cannot start the connection timer thread");
		goto done;
	}
	s->have_reaper = 1;
	info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : cfg->port;
	*out = s;
	s = NULL;
	rc = 0;
done:
	if (ai)
		freeaddrinfo(ai);
	nf_server_free(s);
	return rc;
}

int nf_server_port(const nf_server *s)
{
	return s->port;
}

/* The chat format of the manifest: a built-in, or the engine's own
 * template compiled once here (a template the build checked; an engine
 * without one cannot serve "model"). */
static int chat_format_init(nf_server *s, const nf_engine *e)
{
	const nf_tokenizer *t = nf_engine_tokenizer(e);
	const char *src = nf_tokenizer_chat_template(t);
	s->chat = nf_chat_format_builtin(s->manifest->chat_template);
	if (s->manifest->chat_template != NF_CHAT_MODEL)
		return 0;
	if (!src)
		return nf_error_set(NF_EINPUT, "serving.chat_template is \"model\" but the engine's "
				    "tokenizer has no chat template");
	int err = nf_jinja_compile(&s->chat_jinja, src, strlen(src), "chat_template");
	if (err)
		return err;
	s->chat.jinja = s->chat_jinja;
	s->chat.bos = nf_tokenizer_bos_text(t);
	s->chat.eos = nf_tokenizer_eos_text(t);
	return 0;
}

int nf_server_set_ready(nf_server *s, nf_engine *e, nf_sched *sched)
{
	const nf_manifest *m = s->manifest;
	const nf_manifest_profile *p = s->profile;
	json_t *o, *gpus, *cfgj;
	json_error_t jerr;
	const char *cj = nf_engine_config_json(e);
	int err = chat_format_init(s, e);
	if (!err)
		err = nf_guides_new(&s->guides, nf_engine_tokenizer(e), GUIDES_KEPT);
	if (err)
		return err;
	s->engine = e;
	s->sched = sched;
	gpus = json_array();
	for (int i = 0; i < s->gpus.count; i++) {
		char cc[16];
		snprintf(cc, sizeof cc, "%d.%d", s->gpus.gpus[i].major, s->gpus.gpus[i].minor);
		json_array_append_new(gpus, json_pack("{s:s,s:s}", "name", s->gpus.gpus[i].name,
						      "compute_capability", cc));
	}
	cfgj = cj ? json_loads(cj, 0, &jerr) : NULL;
	o = json_pack("{s:{s:s,s:s,s:s},s:s,s:{s:s,s:s,s:s,s:s,s:s,s:i,s:s,s:s},s:s,s:{s:s,s:o},"
		      "s:{s:s,s:s,s:i,s:o},s:{s:s},s:s}",
		      "model", "name", m->model_name, "family", m->model_family, "version", m->model_version,
		      "recipe_digest", m->recipe_digest,
		      "profile", "id", p->id, "name", p->name, "device", p->device, "arch", p->arch,
		      "precision", p->precision, "tensor_parallel", p->tensor_parallel, "gate",
		      nf_gate_name(p->gate), "engine", p->engine,
		      "selection", s->reason,
		      "gpus", "detection", s->gpus.note, "devices", gpus,
		      "engine", "precision", nf_precision_name(nf_engine_precision(e)), "kernel",
		      nf_engine_kernel_name(e), "context_length", nf_engine_config(e)->max_seq_len,
		      "config", cfgj ? cfgj : json_null(),
		      "nimserve", "version", NF_VERSION,
		      "chat_template", nf_chat_template_name(m->chat_template));
	s->metadata = o ? json_dumps(o, JSON_COMPACT | JSON_INDENT(0)) : NULL;
	json_decref(o);
	if (!s->metadata)
		return nf_error_set(NF_ENOMEM, "cannot build /v1/metadata");
	atomic_store(&s->ready, 1);
	if (s->metrics)
		nf_metrics_set_ready(s->metrics, 1);
	return 0;
}

void nf_server_quiesce(nf_server *s)
{
	MHD_socket fd;
	pthread_mutex_lock(&s->submit_mu);
	atomic_store(&s->quiesced, 1);
	pthread_mutex_unlock(&s->submit_mu);
	if (s->metrics)
		nf_metrics_set_ready(s->metrics, 0);
	fd = MHD_quiesce_daemon(s->d);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
}

size_t nf_server_inflight(nf_server *s)
{
	return atomic_load(&s->inflight);
}

void nf_server_free(nf_server *s)
{
	if (!s)
		return;
	/* MHD must not stop with suspended connections: nobody parks from
	 * now on, and every parked one is resumed (it then ends its response). */
	atomic_store(&s->stopping, 1);
	nf_workq_free(s->prep); /* requests still waiting for it are answered 503 */
	s->prep = NULL;
	waiters_kick(s);
	if (s->have_reaper) {
		pthread_mutex_lock(&s->socks_mu);
		s->reaper_stop = 1;
		pthread_cond_broadcast(&s->socks_cv);
		pthread_mutex_unlock(&s->socks_mu);
		pthread_join(s->reaper, NULL);
	}
	if (s->d)
		MHD_stop_daemon(s->d);
	pthread_mutex_destroy(&s->socks_mu);
	pthread_cond_destroy(&s->socks_cv);
	pthread_mutex_destroy(&s->waiters_mu);
	pthread_mutex_destroy(&s->submit_mu);
	free(s->metadata);
	nf_jinja_free(s->chat_jinja);
	free(s->reason);
	nf_guides_free(s->guides); /* last: every job, and so every guide, is released */
	free(s);
}
