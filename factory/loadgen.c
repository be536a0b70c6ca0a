/*
 * loadgen.c - the serving benchmark's load (see loadgen.h): worker threads
 * take units of work (a request, or a conversation's turns in order) from
 * a shared counter, or in a fixed round-robin; in an open loop each unit
 * waits for its Poisson arrival time first.  Every request is one
 * connection, timed from before connecting to its last byte.
 */
#define _GNU_SOURCE
#include "factory/loadgen.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "factory/loadgen_sse.h"
#include "factory/loadgen_stats.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define RECV_BUF 65536
#define MAX_CLIENTS 4096
#define WORKER_STACK ((size_t)256 << 10)

typedef struct shared {
	const nf_lg_run_opts *o;
	const nf_lg_dataset *ds;
	nf_lg_run *run;
	size_t units;
	double *arrivals;      /* open loop: seconds from t0 of each unit; else NULL */
	double t0;
	atomic_size_t next;    /* the next unit to take (shared counter) */
} shared;

typedef struct worker {
	pthread_t th;
	int index, n_workers;
	shared *sh;
	char *buf;             /* RECV_BUF bytes */
} worker;

/* The messages of a chat turn: the conversation so far, the item's own, or
 * its prompt as the one user message.  A new reference. */
static json_t *chat_messages(const nf_lg_item *it, json_t *history)
{
	if (history || it->messages)
		return json_incref(history ? history : it->messages);
	return json_pack("[{s:s, s:s}]", "role", "user", "content", it->prompt ? it->prompt : "");
}

/* The request body of one turn (a new string), NULL when out of memory. */
static char *request_body(const nf_lg_run_opts *o, const nf_lg_item *it, json_t *history)
{
	long mt = it->max_tokens > 0 ? it->max_tokens : o->max_tokens;
	json_t *b = json_pack("{s:s, s:I, s:i, s:b, s:{s:b}}", "model", o->model, "max_tokens",
			      (json_int_t)mt, "temperature", 0, "stream", 1, "stream_options",
			      "include_usage", 1);
	char *text = NULL;
	int bad = !b;
	if (!bad && o->chat)
		bad = json_object_set_new(b, "messages", chat_messages(it, history)) < 0;
	else if (!bad)
		bad = json_object_set_new(b, "prompt", json_string(it->prompt ? it->prompt : "")) < 0;
	if (!bad && o->ignore_eos)
		bad = json_object_set_new(b, "ignore_eos", json_true()) < 0;
	if (!bad && o->extra_body) { /* checked by the caller: an object */
		json_t *x = json_loads(o->extra_body, 0, NULL);
		bad = !x || json_object_update(b, x) < 0;
		json_decref(x);
	}
	if (!bad)
		text = json_dumps(b, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(b);
	return text;
}

/* Send req and read the stream into s by the deadline. */
static int exchange(const nf_lg_run_opts *o, nf_lg_stream *s, const char *req, size_t len,
		    char *buf, double deadline)
{
	int fd = -1, err;
	if ((err = nf_lg_http_connect(&fd, &o->server, deadline)) < 0 ||
	    (err = nf_lg_http_send(fd, req, len, deadline)) < 0)
		goto done;
	while (!nf_lg_stream_complete(s)) {
		size_t got = 0;
		if ((err = nf_lg_http_recv(fd, buf, RECV_BUF, &got, deadline)) < 0)
			goto done;
		if (got == 0) {
			err = nf_lg_stream_finish(s);
			goto done;
		}
		if ((err = nf_lg_stream_feed(s, buf, got, nf_lg_now())) < 0)
			goto done;
	}
	err = nf_lg_stream_finish(s);
done:
	if (fd >= 0)
		close(fd);
	return err;
}

static void record(nf_lg_result *r, nf_lg_stream *s, double end)
{
	r->ok = true;
	r->e2e = end - s->t0;
	r->ttft = s->first >= 0 ? s->first - s->t0 : r->e2e;
	r->output_tokens = nf_lg_stream_tokens(s);
	r->prompt_tokens = s->prompt_tokens;
	r->usage = s->completion_tokens >= 0;
	r->gaps = s->gaps.v; /* handed over */
	r->n_gaps = s->gaps.n;
	memset(&s->gaps, 0, sizeof s->gaps);
}

static void record_error(nf_lg_result *r, const char *msg)
{
	r->ok = false;
	free(r->error);
	r->error = strdup(msg && *msg ? msg : "failed");
}

/* One request; on success *answer (when asked) gets the streamed text. */
static void one_request(worker *w, nf_lg_result *r, const nf_lg_item *it, json_t *history,
			char **answer)
{
	const nf_lg_run_opts *o = w->sh->o;
	const char *path = o->path ? o->path : o->chat ? "/v1/chat/completions" : "/v1/completions";
	char *body = request_body(o, it, history), *req = NULL;
	size_t len = 0;
	nf_lg_stream s;
	double t0 = nf_lg_now();
	nf_lg_stream_init(&s, t0, answer != NULL);
	r->client = w->index;
	r->start = t0 - w->sh->t0;
	if (!body || !(req = nf_lg_http_post(&o->server, path, body, strlen(body), &len))) {
		record_error(r, "out of memory");
	} else if (exchange(o, &s, req, len, w->buf, t0 + o->timeout_s) < 0) {
		if (nf_error_last_code() == NF_ENET && strstr(nf_error_last(), "timed out"))
			nf_error_wrap(NF_ENET, "no complete answer within %g s", o->timeout_s);
		record_error(r, nf_error_last());
		r->e2e = nf_lg_now() - t0;
	} else {
		record(r, &s, nf_lg_now());
		if (answer)
			*answer = s.text ? strdup(s.text) : strdup("");
	}
	free(body);
	free(req);
	nf_lg_stream_release(&s);
}

/* Append {"role": role, "content": text} to history. */
static int add_message(json_t *history, const char *role, const char *text)
{
	return json_array_append_new(history, json_pack("{s:s, s:s}", "role", role, "content", text));
}

/* The turns of a multi-turn unit, each sending the conversation so far. */
static void run_conversation(worker *w, size_t j, const nf_lg_item *it)
{
	nf_lg_run *run = w->sh->run;
	json_t *history = json_array();
	size_t turns = json_array_size(it->turns);
	bool failed = false;
	for (size_t t = 0; t < turns && j * turns + t < run->n; t++) {
		nf_lg_result *r = &run->results[j * turns + t];
		char *answer = NULL;
		r->unit = j;
		r->turn = t;
		if (failed || !history ||
		    add_message(history, "user", json_string_value(json_array_get(it->turns, t))) < 0) {
			record_error(r, failed ? "not sent: an earlier turn of its conversation failed"
					       : "out of memory");
			failed = true;
			continue;
		}
		one_request(w, r, it, history, &answer);
		failed = !r->ok || !answer || add_message(history, "assistant", answer) < 0;
		free(answer);
	}
	json_decref(history);
}

static void run_unit(worker *w, size_t j)
{
	const nf_lg_item *it = nf_lg_dataset_item(w->sh->ds, j);
	if (it->turns) {
		run_conversation(w, j, it);
		return;
	}
	w->sh->run->results[j].unit = j;
	one_request(w, &w->sh->run->results[j], it, NULL, NULL);
}

static void sleep_until(double t)
{
	for (;;) {
		double left = t - nf_lg_now();
		struct timespec ts;
		if (left <= 0)
			return;
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
	}
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	shared *sh = w->sh;
	for (size_t k = 0;; k++) {
		size_t j = sh->o->round_robin && !sh->arrivals
				   ? (size_t)w->index + k * (size_t)w->n_workers
				   : atomic_fetch_add(&sh->next, 1);
		if (j >= sh->units)
			break;
		if (sh->arrivals)
			sleep_until(sh->t0 + sh->arrivals[j]);
		run_unit(w, j);
	}
	return NULL;
}

static int check_opts(const nf_lg_run_opts *o, const nf_lg_dataset *ds)
{
	if (o->requests == 0 || o->concurrency < 1 || o->concurrency > MAX_CLIENTS ||
	    !(o->rate >= 0 && isfinite(o->rate)) || !(o->timeout_s > 0) || o->max_tokens < 1 ||
	    !o->model)
		return nf_error_set(NF_EINPUT, "load options out of range");
	if (ds->needs_chat && !o->chat)
		return nf_error_set(NF_EINPUT, "the dataset holds chat conversations: use the chat endpoint");
	return 0;
}

/* Start the workers, wait for them; *started how many ran. */
static int run_workers(shared *sh, worker *ws, int n)
{
	pthread_attr_t attr;
	int started = 0, err = 0;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, WORKER_STACK);
	sh->t0 = nf_lg_now();
	for (; started < n; started++) {
		ws[started] = (worker){.index = started, .n_workers = n, .sh = sh};
		if (!(ws[started].buf = malloc(RECV_BUF))) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			break;
		}
		if (pthread_create(&ws[started].th, &attr, worker_main, &ws[started]) != 0) {
			free(ws[started].buf);
			err = nf_error_set(NF_EENV, "cannot start client thread %d", started);
			break;
		}
	}
	if (err < 0) /* the started ones finish the work from the shared counter or stop */
		atomic_store(&sh->next, sh->units);
	for (int i = 0; i < started; i++) {
		pthread_join(ws[i].th, NULL);
		free(ws[i].buf);
	}
	pthread_attr_destroy(&attr);
	return err;
}

int nf_lg_run_load(nf_lg_run **out, const nf_lg_run_opts *o, const nf_lg_dataset *ds)
{
	shared sh = {.o = o, .ds = ds};
	worker *ws = NULL;
	nf_lg_run *run = NULL;
	int n, err;
	*out = NULL;
	if ((err = check_opts(o, ds)) < 0)
		return err;
	sh.units = nf_lg_dataset_units(ds, o->requests);
	n = (size_t)o->concurrency < sh.units ? o->concurrency : (int)sh.units;
	if (!(run = calloc(1, sizeof *run)) || !(run->results = calloc(o->requests, sizeof *run->results)) ||
	    !(ws = calloc((size_t)n, sizeof *ws)) ||
	    (o->rate > 0 && !(sh.arrivals = calloc(sh.units, sizeof *sh.arrivals)))) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	run->n = o->requests;
	sh.run = run;
	if (o->rate > 0 && (err = nf_lg_poisson_schedule(sh.arrivals, sh.units, o->rate, o->seed)) < 0)
		goto done;
	if ((err = run_workers(&sh, ws, n)) < 0)
		goto done;
	run->duration = nf_lg_now() - sh.t0;
	*out = run;
	run = NULL;
done:
	nf_lg_run_free(run);
	free(ws);
	free(sh.arrivals);
	return err;
}

void nf_lg_run_free(nf_lg_run *run)
{
	if (!run)
		return;
	for (size_t i = 0; i < run->n; i++) {
		free(run->results[i].error);
		free(run->results[i].gaps);
	}
	free(run->results);
	free(run);
}
