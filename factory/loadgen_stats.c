/*
 * loadgen_stats.c - percentiles, summaries, the seeded generator, Poisson
 * arrivals and SLOs of the serving benchmark (see loadgen_stats.h).
 */
#include "factory/loadgen_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/banned.h"

#define MAX_SAMPLES ((size_t)1 << 28)

int nf_lg_samples_add(nf_lg_samples *s, double v)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64, bytes;
		double *p;
		if (cap > MAX_SAMPLES || !nf_size_mul(&bytes, cap, sizeof *p))
			return nf_error_set(NF_ENOMEM, "more than %zu samples", MAX_SAMPLES);
		if (!(p = realloc(s->v, bytes)))
			return nf_error_set(NF_ENOMEM, "out of memory");
		s->v = p;
		s->cap = cap;
	}
	s->v[s->n++] = v;
	return 0;
}

void nf_lg_samples_release(nf_lg_samples *s)
{
	free(s->v);
	memset(s, 0, sizeof *s);
}

double nf_lg_percentile(const double *sorted, size_t n, double p)
{
	double rank, frac;
	size_t lo;
	if (n == 0)
		return 0;
	if (p <= 0)
		return sorted[0];
	if (p >= 100)
		return sorted[n - 1];
	rank = p / 100.0 * (double)(n - 1);
	lo = (size_t)rank;
	frac = rank - (double)lo;
	if (lo + 1 >= n)
		return sorted[n - 1];
	return sorted[lo] + (sorted[lo + 1] - sorted[lo]) * frac;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int nf_lg_summarize(nf_lg_summary *out, const double *v, size_t n)
{
	double *sorted, sum = 0;
	memset(out, 0, sizeof *out);
	if (n == 0)
		return 0;
	if (!(sorted = malloc(n * sizeof *sorted))) /* n came from nf_lg_samples: bounded */
		return nf_error_set(NF_ENOMEM, "out of memory");
	memcpy(sorted, v, n * sizeof *sorted);
	qsort(sorted, n, sizeof *sorted, cmp_double);
	for (size_t i = 0; i < n; i++)
		sum += sorted[i];
	out->n = n;
	out->mean = sum / (double)n;
	out->p50 = nf_lg_percentile(sorted, n, 50);
	out->p90 = nf_lg_percentile(sorted, n, 90);
	out->p99 = nf_lg_percentile(sorted, n, 99);
	free(sorted);
	return 0;
}

void nf_lg_rng_seed(nf_lg_rng *r, uint64_t seed)
{
	r->state = seed;
}

uint64_t nf_lg_rng_next(nf_lg_rng *r)
{
	uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

double nf_lg_rng_unit(nf_lg_rng *r)
{
	return (double)(nf_lg_rng_next(r) >> 11) * 0x1.0p-53; /* 53 random bits */
}

long nf_lg_rng_range(nf_lg_rng *r, long lo, long hi)
{
	uint64_t span;
	if (hi <= lo)
		return lo;
	span = (uint64_t)hi - (uint64_t)lo + 1;
	return lo + (long)(nf_lg_rng_next(r) % span); /* bias under 2^-40 for our spans */
}

int nf_lg_poisson_schedule(double *at, size_t n, double rate, uint64_t seed)
{
	nf_lg_rng r;
	double t = 0;
	if (!isfinite(rate) || rate <= 0)
		return nf_error_set(NF_EINPUT, "request rate %g: must be a number above 0", rate);
	nf_lg_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++) {
		at[i] = t;
		/* inverse CDF of the exponential; 1 - u is in (0, 1], so log is finite */
		t += -log(1.0 - nf_lg_rng_unit(&r)) / rate;
	}
	return 0;
}

/* One "NAME:MS" item of an SLO list into its slot. */
static int slo_item(nf_lg_slo *out, unsigned *seen, const char *item, size_t len)
{
	static const char *const names[] = {"ttft", "tpot", "e2e"};
	double *slots[] = {&out->ttft_ms, &out->tpot_ms, &out->e2e_ms};
	char buf[64];
	const char *colon;
	if (len >= sizeof buf)
		return nf_error_set(NF_EINPUT, "--goodput: '%.*s' is too long", (int)len, item);
	memcpy(buf, item, len);
	buf[len] = '\0';
	colon = strchr(buf, ':');
	for (size_t i = 0; colon && i < 3; i++) {
		if ((size_t)(colon - buf) != strlen(names[i]) || strncmp(buf, names[i], strlen(names[i])))
			continue;
		if (*seen & (1u << i))
			return nf_error_set(NF_EINPUT, "--goodput: %s is given twice", names[i]);
		*seen |= 1u << i;
		return nf_parse_double(slots[i], colon + 1, 1e-3, 1e9, "--goodput");
	}
	return nf_error_set(NF_EINPUT, "--goodput: '%s' is not ttft:MS, tpot:MS or e2e:MS", buf);
}

int nf_lg_slo_parse(nf_lg_slo *out, const char *spec)
{
	unsigned seen = 0;
	int err;
	memset(out, 0, sizeof *out);
	for (const char *p = spec;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if ((err = slo_item(out, &seen, p, len)) < 0)
			return err;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

bool nf_lg_slo_any(const nf_lg_slo *slo)
{
	return slo->ttft_ms > 0 || slo->tpot_ms > 0 || slo->e2e_ms > 0;
}

bool nf_lg_slo_met(const nf_lg_slo *slo, double ttft_ms, double tpot_ms, double e2e_ms)
{
	return (slo->ttft_ms <= 0 || ttft_ms <= slo->ttft_ms) &&
	       (slo->tpot_ms <= 0 || tpot_ms <= slo->tpot_ms) &&
	       (slo->e2e_ms <= 0 || e2e_ms <= slo->e2e_ms);
}
