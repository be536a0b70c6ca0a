/*
 * metrics.h - nimserve's Prometheus metrics: request counts by endpoint and
 * status, token counters, time-to-first-token, inter-token-latency and
 * request-duration histograms, prompt tokens served from the prefix cache, queue depth and active sequences.  Thread-safe.
 */
#ifndef NF_SERVE_METRICS_H
#define NF_SERVE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "serve/sbuf.h"

typedef struct nf_metrics nf_metrics;

typedef enum nf_metric_hist {
	NF_HIST_TTFT,          /* nimserve_time_to_first_token_seconds */
	NF_HIST_ITL,           /* nimserve_inter_token_latency_seconds */
	NF_HIST_REQUEST,       /* nimserve_request_duration_seconds */
	NF_HIST_COUNT
} nf_metric_hist;

int nf_metrics_new(nf_metrics **out);
void nf_metrics_free(nf_metrics *m); /* NULL is fine */

/* A finished HTTP request: endpoint path (unknown ones count as "other") and status. */
void nf_metrics_request(nf_metrics *m, const char *endpoint, int status);
/* A finished sequence: prompt tokens (of which `cached` came from the
 * prefix cache, not computed) and generated tokens. */
void nf_metrics_tokens(nf_metrics *m, size_t prompt, size_t cached, size_t generated);
void nf_metrics_cancelled(nf_metrics *m);
/* A verification step of speculative decoding: tokens drafted, and of
 * those, accepted. */
void nf_metrics_spec(nf_metrics *m, size_t drafted, size_t accepted);
/* What speculation costs here (serve/spec_gov.h): decoding steps run
 * without drafts because that was cheaper, and the latest seconds per
 * token emitted with drafts and without, for a batch size both are known
 * for. */
void nf_metrics_spec_costs(nf_metrics *m, uint64_t paused_steps, double with, double without);
void nf_metrics_observe(nf_metrics *m, nf_metric_hist h, double seconds);
void nf_metrics_set_ready(nf_metrics *m, int ready);
/* ready < 0 leaves the ready gauge as it is. */
void nf_metrics_set_gauges(nf_metrics *m, size_t queued, size_t active, int ready);

/* Append the Prometheus text exposition (format 0.0.4). */
int nf_metrics_format(const nf_metrics *m, nf_sbuf *out);

#endif
