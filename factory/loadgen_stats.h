/*
 * loadgen_stats.h - the statistics of a serving benchmark (factory/loadgen*):
 * growing sample arrays, percentiles, summaries, a seeded generator and the
 * Poisson arrival schedule it draws, and service-level objectives (goodput).
 */
#ifndef NF_FACTORY_LOADGEN_STATS_H
#define NF_FACTORY_LOADGEN_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growing array of doubles.  Zero-initialized is empty; release frees. */
typedef struct nf_lg_samples {
	double *v;
	size_t n, cap;
} nf_lg_samples;

int nf_lg_samples_add(nf_lg_samples *s, double v); /* NF_ENOMEM past 2^28 samples */
void nf_lg_samples_release(nf_lg_samples *s);

/* The p-th percentile (0..100) of n sorted values, interpolated linearly
 * between the two nearest ranks (numpy's default, which vLLM's and
 * genai-perf's reports use); 0 when n is 0. */
double nf_lg_percentile(const double *sorted, size_t n, double p);

/* Mean and percentiles of a metric. */
typedef struct nf_lg_summary {
	size_t n;
	double mean, p50, p90, p99;
} nf_lg_summary;

/* Summarize n values (a sorted copy is made; v is not changed).  All zero
 * when n is 0. */
int nf_lg_summarize(nf_lg_summary *out, const double *v, size_t n);

/* A seeded generator (splitmix64): the same seed gives the same numbers on
 * every host. */
typedef struct nf_lg_rng {
	uint64_t state;
} nf_lg_rng;

void nf_lg_rng_seed(nf_lg_rng *r, uint64_t seed);
uint64_t nf_lg_rng_next(nf_lg_rng *r);
double nf_lg_rng_unit(nf_lg_rng *r);                    /* in [0, 1) */
long nf_lg_rng_range(nf_lg_rng *r, long lo, long hi);   /* in [lo, hi] */

/* Poisson arrivals at `rate` requests/s: at[0] = 0, then exponential gaps
 * of mean 1/rate drawn from seed.  NF_EINPUT unless rate is finite and > 0. */
int nf_lg_poisson_schedule(double *at, size_t n, double rate, uint64_t seed);

/* Service-level objectives in milliseconds; 0 means no bound. */
typedef struct nf_lg_slo {
	double ttft_ms, tpot_ms, e2e_ms;
} nf_lg_slo;

/* "ttft:MS,tpot:MS,e2e:MS" (any of them, any order, each once). */
int nf_lg_slo_parse(nf_lg_slo *out, const char *spec);
bool nf_lg_slo_any(const nf_lg_slo *slo);
/* Whether a request with these latencies (ms) meets every bound. */
bool nf_lg_slo_met(const nf_lg_slo *slo, double ttft_ms, double tpot_ms, double e2e_ms);

#endif
