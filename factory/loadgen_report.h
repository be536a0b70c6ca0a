/*
 * loadgen_report.h - the figures of a serving benchmark run (factory/loadgen.h)
 * and the reports of a sweep of loads: a human table, JSON (schema
 * docs/schemas/bench-serve.schema.json), Markdown, and an SVG of latency
 * against load.
 */
#ifndef NF_FACTORY_LOADGEN_REPORT_H
#define NF_FACTORY_LOADGEN_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "factory/loadgen.h"
#include "factory/loadgen_stats.h"

/* What a run measured; latencies in milliseconds. */
typedef struct nf_lg_figures {
	size_t requests, completed, failed;
	size_t without_usage;        /* completed requests whose tokens were counted chunks */
	size_t good;                 /* completed requests within every SLO */
	long input_tokens;           /* usage prompt_tokens summed (completed with usage) */
	long output_tokens;          /* summed over completed requests */
	double duration_s;
	double request_throughput;   /* completed / duration */
	double output_throughput;    /* output tokens / duration */
	double total_throughput;     /* (input + output tokens) / duration */
	double goodput;              /* good / duration; < 0 when no SLO was given */
	nf_lg_summary ttft_ms;       /* time to first token */
	nf_lg_summary tpot_ms;       /* (e2e - ttft) / (tokens - 1), requests of 2+ tokens */
	nf_lg_summary itl_ms;        /* every gap between content chunks */
	nf_lg_summary e2e_ms;        /* end-to-end latency */
	char first_error[256];       /* "" when none failed */
} nf_lg_figures;

/* TPOT of one request in ms: 0 for a request of one token or none. */
double nf_lg_tpot_ms(const nf_lg_result *r);

int nf_lg_figures_of(nf_lg_figures *out, const nf_lg_run *run, const nf_lg_slo *slo);

/* One load of a sweep and what it measured. */
typedef struct nf_lg_point {
	double load;                 /* clients, or requests/s */
	nf_lg_figures f;
} nf_lg_point;

/* A sweep: what was asked, then one point per load, in the order run. */
typedef struct nf_lg_sweep {
	const char *url, *model, *endpoint, *dataset;
	bool rate;                   /* loads are request rates, else concurrencies */
	int max_concurrency;         /* open loop: most requests in flight */
	uint64_t seed;
	long max_tokens;
	size_t requests, warmup;
	double timeout_s;
	nf_lg_slo slo;
	const nf_lg_point *points;
	size_t n_points;
} nf_lg_sweep;

/* Each writes a new string into *out (caller frees). */
int nf_lg_sweep_text(char **out, const nf_lg_sweep *s);
int nf_lg_sweep_json(char **out, const nf_lg_sweep *s);
int nf_lg_sweep_markdown(char **out, const nf_lg_sweep *s);
int nf_lg_sweep_svg(char **out, const nf_lg_sweep *s);

#endif
