/*
 * metrics.c - counters and fixed-bucket histograms under one mutex, and
 * their Prometheus text rendering.
 */
#include "serve/metrics.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

static const char *const endpoints[] = {"/v1/completions", "/v1/chat/completions", "/v1/models",
					"/v1/health/live", "/v1/health/ready", "/v1/metrics",
					"/v1/metadata", "other"};
#define N_ENDPOINTS (sizeof endpoints / sizeof endpoints[0])
static const int statuses[] = {200, 400, 404, 405, 413, 422, 429, 499, 500, 503}; /* 499: the client left */
#define N_STATUSES (sizeof statuses / sizeof statuses[0])

#define N_BUCKETS 14
static const double buckets[NF_HIST_COUNT][N_BUCKETS] = {
	{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
	{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
};
static const char *const hist_names[NF_HIST_COUNT] = {
	"nimserve_time_to_first_token_seconds", "nimserve_inter_token_latency_seconds",
	"nimserve_request_duration_seconds"};
static const char *const hist_help[NF_HIST_COUNT] = {
	"Time from request arrival to its first generated token.",
	"Time between consecutive generated tokens of one sequence.",
	"Time from request arrival to its last byte of output."};

typedef struct hist {
	uint64_t counts[N_BUCKETS + 1]; /* last: +Inf only */
	uint64_t n;
	double sum;
} hist;

struct nf_metrics {
	pthread_mutex_t mu;
	uint64_t requests[N_ENDPOINTS][N_STATUSES + 1]; /* last: any other status */
	uint64_t prompt_tokens, cached_tokens, generated_tokens, cancelled;
	uint64_t spec_steps, spec_drafted, spec_accepted; /* speculative decoding */
	uint64_t spec_paused;                  /* and its governor's figures */
	double spec_token_s_with, spec_token_s_without;
	hist h[NF_HIST_COUNT];
	size_t queued, active;
	int ready;
};

int nf_metrics_new(nf_metrics **out)
{
	nf_metrics *m = calloc(1, sizeof *m);
	if (!m)
		return nf_error_set(NF_ENOMEM, "out of memory");
	pthread_mutex_init(&m->mu, NULL);
	*out = m;
	return 0;
}

void nf_metrics_free(nf_metrics *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->mu);
	free(m);
}

void nf_metrics_request(nf_metrics *m, const char *endpoint, int status)
{
	size_t e = N_ENDPOINTS - 1, s = N_STATUSES;
	for (size_t i = 0; i + 1 < N_ENDPOINTS; i++)
		if (endpoint && !strcmp(endpoint, endpoints[i]))
			e = i;
	for (size_t i = 0; i < N_STATUSES; i++)
		if (statuses[i] == status)
			s = i;
	pthread_mutex_lock(&m->mu);
	m->requests[e][s]++;
	pthread_mutex_unlock(&m->mu);
}

void nf_metrics_tokens(nf_metrics *m, size_t prompt, size_t cached, size_t generated)
{
	pthread_mutex_lock(&m->mu);
	m->prompt_tokens += prompt;
	m->cached_tokens += cached;
	m->generated_tokens += generated;
	pthread_mutex_unlock(&m->mu);
}

void nf_metrics_cancelled(nf_metrics *m)
{
	pthread_mutex_lock(&m->mu);
	m->cancelled++;
	pthread_mutex_unlock(&m->mu);
}

void nf_metrics_observe(nf_metrics *m, nf_metric_hist h, double seconds)
{
	size_t b = N_BUCKETS;
	if (h < 0 || h >= NF_HIST_COUNT || !(seconds >= 0))
		return;
	for (size_t i = 0; i < N_BUCKETS; i++)
		if (seconds <= buckets[h][i]) {
			b = i;
			break;
		}
	pthread_mutex_lock(&m->mu);
	m->h[h].counts[b]++;
	m->h[h].n++;
	m->h[h].sum += seconds;
	pthread_mutex_unlock(&m->mu);
}

void nf_metrics_set_gauges(nf_metrics *m, size_t queued, size_t active, int ready)
{
	pthread_mutex_lock(&m->mu);
	m->queued = queued;
	m->active = active;
	if (ready >= 0)
		m->ready = ready;
	pthread_mutex_unlock(&m->mu);
}

void nf_metrics_set_ready(nf_metrics *m, int ready)
{
	pthread_mutex_lock(&m->mu);
	m->ready = ready;
	pthread_mutex_unlock(&m->mu);
}

static int head(nf_sbuf *o, const char *name, const char *type, const char *help)
{
	return nf_sbuf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* What speculation costs, as the scheduler measures it (spec_gov.h). */
static int format_spec_costs(nf_sbuf *o, const nf_metrics *snap)
{
	int rc;
	if ((rc = head(o, "nimserve_spec_paused_steps_total", "counter",
		       "Decode steps run without drafts because that was cheaper a token.")) < 0 ||
	    (rc = nf_sbuf_printf(o, "nimserve_spec_paused_steps_total %llu\n",
				 (unsigned long long)snap->spec_paused)) < 0 ||
	    (rc = head(o, "nimserve_spec_token_seconds_with_drafts", "gauge",
		       "Seconds per token emitted by decode steps with drafts (0: not measured).")) < 0 ||
	    (rc = nf_sbuf_printf(o, "nimserve_spec_token_seconds_with_drafts %.9f\n",
				 snap->spec_token_s_with)) < 0 ||
	    (rc = head(o, "nimserve_spec_token_seconds_without_drafts", "gauge",
		       "Seconds per token emitted by decode steps without drafts (0: not measured).")) < 0 ||
	    (rc = nf_sbuf_printf(o, "nimserve_spec_token_seconds_without_drafts %.9f\n",
				 snap->spec_token_s_without)) < 0)
		return rc;
	return 0;
}

/* Speculative decoding: the counters, and what they mean together. */
static int format_spec(nf_sbuf *o, const nf_metrics *snap)
{
	double rate = snap->spec_drafted ? (double)snap->spec_accepted / (double)snap->spec_drafted : 0.0;
	double per_step = snap->spec_steps ? (double)(snap->spec_accepted + snap->spec_steps) /
						      (double)snap->spec_steps : 0.0;
	int rc;
	if ((rc = head(o, "nimserve_spec_verify_steps_total", "counter",
		       "Decode steps of a sequence that verified drafted tokens.")) < 0 ||
	    (rc = nf_sbuf_printf(o, "nimserve_spec_verify_steps_total %llu\n",
				 (unsigned long long)snap->spec_steps)) < 0 ||
	    (rc = head(o, "nimserve_spec_draft_tokens_total", "counter", "Tokens drafted.")) < 0 ||
	    (rc = nf_sbuf_printf(o, "nimserve_spec_draft_tokens_total %llu\n",
				 (unsigned long long)snap->spec_drafted)) < 0 ||
	    (rc = head(o, "nimserve_spec_accepted_tokens_total", "counter",
		       "Drafted tokens the model agreed with.")) < 0 ||
	    (rc = nf_sbuf_printf(o, "nimserve_spec_accepted_tokens_total %llu\n",
				 (unsigned long long)snap->spec_accepted)) < 0 ||
	    (rc = head(o, "nimserve_spec_acceptance_rate", "gauge",
		       "Accepted over drafted tokens since the start.")) < 0 ||
	    (rc = nf_sbuf_printf(o, "nimserve_spec_acceptance_rate %.6f\n", rate)) < 0 ||
	    (rc = head(o, "nimserve_spec_tokens_per_step", "gauge",
		       "Tokens produced per verification step since the start.")) < 0 ||
	    (rc = nf_sbuf_printf(o, "nimserve_spec_tokens_per_step %.6f\n", per_step)) < 0)
		return rc;
	return format_spec_costs(o, snap);
}

void nf_metrics_spec(nf_metrics *m, size_t drafted, size_t accepted)
{
	pthread_mutex_lock(&m->mu);
	m->spec_steps++;
	m->spec_drafted += drafted;
	m->spec_accepted += accepted;
	pthread_mutex_unlock(&m->mu);
}

void nf_metrics_spec_costs(nf_metrics *m, uint64_t paused_steps, double with, double without)
{
	pthread_mutex_lock(&m->mu);
	m->spec_paused = paused_steps;
	m->spec_token_s_with = with;
	m->spec_token_s_without = without;
	pthread_mutex_unlock(&m->mu);
}

int nf_metrics_format(const nf_metrics *cm, nf_sbuf *o)
{
	nf_metrics *m = (nf_metrics *)cm; /* the mutex is not part of the value */
	nf_metrics snap;
	int rc;
	pthread_mutex_lock(&m->mu);
	memcpy(snap.requests, m->requests, sizeof snap.requests);
	memcpy(snap.h, m->h, sizeof snap.h);
	snap.prompt_tokens = m->prompt_tokens;
	snap.cached_tokens = m->cached_tokens;
	snap.generated_tokens = m->generated_tokens;
	snap.cancelled = m->cancelled;
	snap.spec_steps = m->spec_steps;
	snap.spec_drafted = m->spec_drafted;
	snap.spec_accepted = m->spec_accepted;
	snap.spec_paused = m->spec_paused;
	snap.spec_token_s_with = m->spec_token_s_with;
	snap.spec_token_s_without = m->spec_token_s_without;
	snap.queued = m->queued;
	snap.active = m->active;
	snap.ready = m->ready;
	pthread_mutex_unlock(&m->mu);

	if ((rc = head(o, "nimserve_requests_total", "counter", "HTTP requests answered, by endpoint and status.")) < 0)
		return rc;
	for (size_t e = 0; e < N_ENDPOINTS; e++)
		for (size_t s = 0; s <= N_STATUSES; s++) {
			if (!snap.requests[e][s] && !(e == 0 && s == 0))
				continue;
			if (s < N_STATUSES)
				rc = nf_sbuf_printf(o, "nimserve_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n",
						    endpoints[e], statuses[s], (unsigned long long)snap.requests[e][s]);
			else
				rc = nf_sbuf_printf(o, "nimserve_requests_total{endpoint=\"%s\",status=\"other\"} %llu\n",
						    endpoints[e], (unsigned long long)snap.requests[e][s]);
			if (rc < 0)
				return rc;
		}
	if ((rc = head(o, "nimserve_prompt_tokens_total", "counter", "Prompt tokens processed (BOS included).")) < 0 ||
	    (rc = nf_sbuf_printf(o, "nimserve_prompt_tokens_total %llu\n", (unsigned long long)snap.prompt_tokens)) < 0 ||
	    (rc = head(o, "nimserve_prompt_tokens_cached_total", "counter",
		       "Prompt tokens whose KV cache rows were reused from an earlier request, not computed.")) < 0 ||
	    (rc = nf_sbuf_printf(o, "nimserve_prompt_tokens_cached_total %llu\n", (unsigned long long)snap.cached_tokens)) < 0 ||
	    (rc = head(o, "nimserve_generation_tokens_total", "counter", "Tokens generated.")) < 0 ||
	    (rc = nf_sbuf_printf(o, "nimserve_generation_tokens_total %llu\n", (unsigned long long)snap.generated_tokens)) < 0 ||
	    (rc = head(o, "nimserve_requests_cancelled_total", "counter", "Sequences cancelled because the client went away.")) < 0 ||
	    (rc = nf_sbuf_printf(o, "nimserve_requests_cancelled_total %llu\n", (unsigned long long)snap.cancelled)) < 0)
		return rc;
	if ((rc = format_spec(o, &snap)) < 0)
		return rc;
	for (int h = 0; h < NF_HIST_COUNT; h++) {
		uint64_t cum = 0;
		if ((rc = head(o, hist_names[h], "histogram", hist_help[h])) < 0)
			return rc;
		for (size_t b = 0; b < N_BUCKETS; b++) {
			cum += snap.h[h].counts[b];
			if ((rc = nf_sbuf_printf(o, "%s_bucket{le=\"%g\"} %llu\n", hist_names[h], buckets[h][b],
						 (unsigned long long)cum)) < 0)
				return rc;
		}
		if ((rc = nf_sbuf_printf(o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n",
					 hist_names[h], (unsigned long long)snap.h[h].n, hist_names[h],
					 snap.h[h].sum, hist_names[h], (unsigned long long)snap.h[h].n)) < 0)
			return rc;
	}
	if ((rc = head(o, "nimserve_queue_depth", "gauge", "Requests waiting for a batch slot.")) < 0 ||
	    (rc = nf_sbuf_printf(o, "nimserve_queue_depth %zu\n", snap.queued)) < 0 ||
	    (rc = head(o, "nimserve_active_sequences", "gauge", "Sequences in the running batch.")) < 0 ||
	    (rc = nf_sbuf_printf(o, "nimserve_active_sequences %zu\n", snap.active)) < 0 ||
	    (rc = head(o, "nimserve_ready", "gauge", "1 once the engine is loaded and requests are served.")) < 0 ||
	    (rc = nf_sbuf_printf(o, "nimserve_ready %d\n", snap.ready)) < 0)
		return rc;
	return 0;
}
