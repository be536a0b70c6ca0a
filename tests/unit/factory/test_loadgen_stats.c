/* test_loadgen_stats.c - the serving benchmark's statistics: percentiles on
 * known data (numpy's linear interpolation), summaries, SLO parsing and
 * goodput, the Poisson schedule (reproducible by seed, the right mean), and a
 * run's figures from hand-made results (TPOT, throughput, goodput <= throughput). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "factory/loadgen_report.h"
#include "factory/loadgen_stats.h"
#include "tests/tap.h"

static int near(double a, double b, double tol)
{
	return fabs(a - b) <= tol;
}

static void test_percentiles(void)
{
	double v[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, one = 42;
	double shuffled[10] = {7, 3, 10, 1, 9, 2, 8, 5, 6, 4}, copy[10];
	nf_lg_summary s;
	/* numpy.percentile([1..10], [50, 90, 99]) = 5.5, 9.1, 9.91 */
	ok(near(nf_lg_percentile(v, 10, 50), 5.5, 1e-12), "p50 of 1..10 is 5.5");
	ok(near(nf_lg_percentile(v, 10, 90), 9.1, 1e-12), "p90 of 1..10 is 9.1");
	ok(near(nf_lg_percentile(v, 10, 99), 9.91, 1e-12), "p99 of 1..10 is 9.91");
	ok(nf_lg_percentile(v, 10, 0) == 1 && nf_lg_percentile(v, 10, 100) == 10, "p0 and p100 are the ends");
	ok(nf_lg_percentile(&one, 1, 99) == 42, "one value is every percentile");
	ok(nf_lg_percentile(v, 0, 50) == 0, "no values: 0");
	memcpy(copy, shuffled, sizeof copy);
	is_int(nf_lg_summarize(&s, shuffled, 10), 0, "summarize");
	ok(s.n == 10 && near(s.mean, 5.5, 1e-12) && near(s.p50, 5.5, 1e-12) && near(s.p90, 9.1, 1e-12) &&
	       near(s.p99, 9.91, 1e-12),
	   "summary of shuffled 1..10: mean 5.5, p50 5.5, p90 9.1, p99 9.91");
	ok(!memcmp(copy, shuffled, sizeof copy), "summarize leaves its input unsorted");
	ok(s.p50 <= s.p90 && s.p90 <= s.p99, "percentiles are ordered");
	is_int(nf_lg_summarize(&s, NULL, 0), 0, "summary of nothing");
	ok(s.n == 0 && s.mean == 0 && s.p99 == 0, "... is all zero");
}

static void test_slo(void)
{
	nf_lg_slo slo;
	is_int(nf_lg_slo_parse(&slo, "ttft:200,tpot:15.5"), 0, "ttft:200,tpot:15.5 parses");
	ok(slo.ttft_ms == 200 && slo.tpot_ms == 15.5 && slo.e2e_ms == 0, "... into its fields");
	ok(nf_lg_slo_met(&slo, 200, 15.5, 1e9), "a request at the bounds meets them");
	ok(!nf_lg_slo_met(&slo, 200.1, 1, 1), "TTFT over its bound fails");
	ok(!nf_lg_slo_met(&slo, 1, 16, 1), "TPOT over its bound fails");
	is_int(nf_lg_slo_parse(&slo, "e2e:1000"), 0, "e2e alone");
	ok(nf_lg_slo_any(&slo) && !nf_lg_slo_met(&slo, 0, 0, 1001), "e2e over its bound fails");
	ok(nf_lg_slo_parse(&slo, "ttft:1,ttft:2") < 0, "a bound given twice is refused");
	ok(nf_lg_slo_parse(&slo, "ttft:0") < 0, "a bound of 0 is refused");
	ok(nf_lg_slo_parse(&slo, "latency:5") < 0, "an unknown metric is refused");
	ok(nf_lg_slo_parse(&slo, "ttft") < 0 && nf_lg_slo_parse(&slo, "ttft:5,") < 0,
	   "a metric without a bound, a trailing comma are refused");
}

static void test_poisson(void)
{
	enum { N = 20000 };
	double *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *c = malloc(N * sizeof *c);
	int mono = 1;
	is_int(nf_lg_poisson_schedule(a, N, 4.0, 7), 0, "a schedule at 4 req/s");
	nf_lg_poisson_schedule(b, N, 4.0, 7);
	nf_lg_poisson_schedule(c, N, 4.0, 8);
	ok(!memcmp(a, b, N * sizeof *a), "the same seed gives the same arrivals");
	ok(memcmp(a, c, N * sizeof *a) != 0, "another seed gives others");
	ok(a[0] == 0, "the first request goes at once");
	for (int i = 1; i < N; i++)
		mono &= a[i] >= a[i - 1];
	ok(mono, "arrivals never go back in time");
	/* mean gap 1/rate = 0.25 s; the mean of 20000 exponentials is within 3% (~4 sigma) */
	ok(near(a[N - 1] / (N - 1), 0.25, 0.0075), "mean gap %.4f s is 1/rate", a[N - 1] / (N - 1));
	ok(nf_lg_poisson_schedule(a, N, 0, 1) < 0 && nf_lg_poisson_schedule(a, N, NAN, 1) < 0,
	   "a rate of 0 or NaN is refused");
	free(a);
	free(b);
	free(c);
}

static void test_rng(void)
{
	nf_lg_rng r;
	int inside = 1, lo_seen = 0, hi_seen = 0;
	nf_lg_rng_seed(&r, 1);
	for (int i = 0; i < 1000; i++) {
		long v = nf_lg_rng_range(&r, 3, 6);
		inside &= v >= 3 && v <= 6;
		lo_seen |= v == 3;
		hi_seen |= v == 6;
	}
	ok(inside && lo_seen && hi_seen, "range(3, 6) stays inside and reaches both ends");
	nf_lg_rng_seed(&r, 0);
	/* splitmix64's first output from 0, the published reference value */
	ok(nf_lg_rng_next(&r) == 0xe220a8397b1dcdafull, "splitmix64 of seed 0 matches the reference");
}

/* Hand-made results: 1 s run, 4 requests, one failed. */
static void test_figures(void)
{
	double gaps0[] = {0.01, 0.02, 0.03}, gaps1[] = {0.05};
	nf_lg_result res[4] = {
		{.ok = true, .ttft = 0.1, .e2e = 0.16, .output_tokens = 4, .prompt_tokens = 10, .usage = true,
		 .gaps = gaps0, .n_gaps = 3},
		{.ok = true, .ttft = 0.3, .e2e = 0.35, .output_tokens = 2, .prompt_tokens = 5, .usage = true,
		 .gaps = gaps1, .n_gaps = 1},
		{.ok = true, .ttft = 0.05, .e2e = 0.05, .output_tokens = 1, .prompt_tokens = -1},
		{.ok = false, .error = "HTTP 500: boom"},
	};
	nf_lg_run run = {.results = res, .n = 4, .duration = 2.0};
	nf_lg_slo slo = {.ttft_ms = 200};
	nf_lg_figures f;
	ok(near(nf_lg_tpot_ms(&res[0]), 20, 1e-9), "TPOT = (e2e - ttft) / (tokens - 1) = 20 ms");
	ok(nf_lg_tpot_ms(&res[2]) == 0, "TPOT of a one-token answer is 0");
	is_int(nf_lg_figures_of(&f, &run, &slo), 0, "figures");
	ok(f.requests == 4 && f.completed == 3 && f.failed == 1, "4 requests: 3 completed, 1 failed");
	is_str(f.first_error, "HTTP 500: boom", "the first failure is kept");
	is_int(f.output_tokens, 7, "output tokens are the sum over completed requests");
	is_int(f.input_tokens, 15, "input tokens are the usage sums");
	is_int((long)f.without_usage, 1, "one request counted chunks");
	ok(near(f.request_throughput, 1.5, 1e-12) && near(f.output_throughput, 3.5, 1e-12) &&
	       near(f.total_throughput, 11, 1e-12),
	   "throughput: 1.5 req/s, 3.5 output tok/s, 11 total tok/s");
	is_int((long)f.good, 2, "two requests meet TTFT <= 200 ms");
	ok(near(f.goodput, 1.0, 1e-12) && f.goodput <= f.request_throughput, "goodput 1 req/s <= throughput");
	ok(f.ttft_ms.n == 3 && near(f.ttft_ms.p50, 100, 1e-9), "TTFT over completed requests, p50 100 ms");
	ok(f.tpot_ms.n == 2 && near(f.tpot_ms.mean, 35, 1e-9), "TPOT over 2+-token requests: mean (20 + 50) / 2");
	ok(f.itl_ms.n == 4 && near(f.itl_ms.p99, 49.4, 1e-9), "ITL takes every gap: p99 of 10,20,30,50 is 49.4");
	ok(near(f.e2e_ms.mean, 560.0 / 3, 1e-9), "E2E mean");
	nf_lg_slo none = {0};
	nf_lg_figures_of(&f, &run, &none);
	ok(f.goodput < 0, "no SLO: no goodput");
}

int main(void)
{
	test_percentiles();
	test_slo();
	test_poisson();
	test_rng();
	test_figures();
	return done_testing();
}
