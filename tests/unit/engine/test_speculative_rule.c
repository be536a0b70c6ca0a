/*
 * test_speculative_rule.c - the accept/reject rule of speculative decoding
 * emits tokens distributed as the target's p, whatever the draft's q:
 * nf_spec_accept for fixed p and q over a handful of tokens (q with mass
 * where p has none, p = q, point masses), and nf_spec_verify, the walk
 * the deterministic drafters use, over fixed rows of logits.  Each is run
 * 100000 times with a seeded generator and its counts held to p by a
 * chi-square test at significance 0.001; two deliberately broken rules
 * (keep every draft; draw from p instead of max(0, p - q) after a
 * rejection) must fail the same test, which shows it can (a statistic
 * of -1: a token p has no mass on was emitted).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/generate.h"
#include "engine/speculative.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/banned.h"

#define N_TOK 5
#define DRAWS 100000

/* Upper 0.001 critical values of chi-square by degrees of freedom (1..4):
 * a correct rule exceeds them one time in a thousand, and the seeds fix
 * which time, so a pass is deterministic. */
static const double chi2_crit_001[] = {0, 10.828, 13.816, 16.266, 18.467};

static uint64_t rng_state;

static double uniform(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (double)((rng_state * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
}

/* A token drawn from q. */
static int draw(const float *q)
{
	double u = uniform(), at = 0.0;
	int last = 0;
	for (int i = 0; i < N_TOK; i++) {
		if (q[i] <= 0.0f)
			continue;
		last = i;
		at += q[i];
		if (u < at)
			return i;
	}
	return last;
}

/* Pearson's statistic of counts[] (total draws) against p over the tokens p
 * gives mass; *df its degrees of freedom; -1 when a token without mass
 * was emitted, which no statistic excuses. */
static double chi2_vs(const long *counts, long total, const float *p, int *df)
{
	double x2 = 0.0;
	*df = -1;
	for (int i = 0; i < N_TOK; i++) {
		if (p[i] <= 0.0f) {
			if (counts[i])
				return -1.0;
			continue;
		}
		double want = (double)total * p[i];
		x2 += ((double)counts[i] - want) * ((double)counts[i] - want) / want;
		(*df)++;
	}
	return x2;
}

/* 1 when counts pass the test against p. */
static int fits(const long *counts, long total, const float *p, double *x2, int *df)
{
	*x2 = chi2_vs(counts, total, p, df);
	if (*x2 < 0.0)
		return 0;
	return *df == 0 || *x2 < chi2_crit_001[*df];
}

enum rule { RULE_RIGHT, RULE_KEEP_ALL, RULE_DRAW_FROM_P };

/* One emitted token under a rule: the library's, or a broken one. */
static int emit(enum rule r, const float *p, const float *q)
{
	int d = draw(q), kept;
	double u_keep = uniform(), u_draw = uniform();
	if (r == RULE_KEEP_ALL)
		return d;
	int x = nf_spec_accept(p, q, N_TOK, d, u_keep, u_draw, &kept);
	if (r == RULE_DRAW_FROM_P && !kept)
		return draw(p);
	return x;
}

static int rule_fits(enum rule r, const float *p, const float *q, uint64_t seed, double *x2,
		     int *df)
{
	long counts[N_TOK] = {0};
	rng_state = seed;
	for (int i = 0; i < DRAWS; i++) {
		int x = emit(r, p, q);
		if (x < 0 || x >= N_TOK)
			return 0;
		counts[x]++;
	}
	return fits(counts, DRAWS, p, x2, df);
}

struct rule_case {
	const char *what;
	float p[N_TOK], q[N_TOK];
	int broken_differ; /* which broken rules emit another distribution: 1 keeping
			      every draft, 2 drawing from p after a rejection */
};

static const struct rule_case cases[] = {
	{"q has mass where p has none, p where q has none",
	 {0.1f, 0.2f, 0.3f, 0.4f, 0.0f}, {0.25f, 0.25f, 0.25f, 0.0f, 0.25f}, 3},
	{"p = q", {0.05f, 0.15f, 0.2f, 0.25f, 0.35f}, {0.05f, 0.15f, 0.2f, 0.25f, 0.35f}, 0},
	{"q a point mass (a deterministic drafter)",
	 {0.3f, 0.1f, 0.4f, 0.15f, 0.05f}, {0.0f, 0.0f, 1.0f, 0.0f, 0.0f}, 3},
	{"p a point mass", {0.0f, 0.0f, 0.0f, 1.0f, 0.0f}, {0.2f, 0.2f, 0.2f, 0.2f, 0.2f}, 1},
	{"q close to p", {0.1f, 0.2f, 0.3f, 0.2f, 0.2f}, {0.12f, 0.18f, 0.3f, 0.25f, 0.15f}, 3},
};

static void rule_tests(void)
{
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		const struct rule_case *k = &cases[c];
		double x2 = 0.0;
		int df = 0, pass = rule_fits(RULE_RIGHT, k->p, k->q, 0x9E3779B97F4A7C15ull + c, &x2, &df);
		ok(pass, "%s: %d draws fit p (chi-square %.2f, %d df, critical %.3f at 0.001)", k->what,
		   DRAWS, x2, df, df > 0 ? chi2_crit_001[df] : 0.0);
		if (k->broken_differ & 1) {
			pass = rule_fits(RULE_KEEP_ALL, k->p, k->q, 0x51ED2701ull + c, &x2, &df);
			ok(!pass, "%s: keeping every draft fails the test (chi-square %.1f)", k->what,
			   x2);
		}
		/* (q a point mass: a rejection leaves p without d, which drawing
		 * from p, d included, gets wrong as well) */
		if (k->broken_differ & 2) {
			pass = rule_fits(RULE_DRAW_FROM_P, k->p, k->q, 0xC0FFEEull + c, &x2, &df);
			ok(!pass, "%s: drawing from p after a rejection fails the test (chi-square %.1f)",
			   k->what, x2);
		}
	}
	int kept;
	float p[N_TOK] = {0.2f, 0.2f, 0.2f, 0.2f, 0.2f};
	is_int(nf_spec_accept(p, p, N_TOK, N_TOK, 0.5, 0.5, &kept), NF_EINPUT,
	       "a draft token outside the vocabulary is refused");
	is_int(nf_spec_accept(p, p, N_TOK, 3, 0.999999, 0.5, &kept) * 10 + kept, 31,
	       "p = q: every draft is kept");
}

/* nf_spec_verify over two fixed rows (p0, p1) with drafts d0, d1: the
 * first token emitted is distributed as p0; after d0 was kept the second
 * as p1; after a rejection nothing follows. */
static void verify_tests(void)
{
	static const float p0[N_TOK] = {0.3f, 0.1f, 0.4f, 0.15f, 0.05f};
	static const float p1[N_TOK] = {0.05f, 0.5f, 0.0f, 0.25f, 0.2f};
	const int drafts[2] = {2, 1};
	long first[N_TOK] = {0}, second[N_TOK] = {0}, n_second = 0, bad = 0, kept_d0 = 0;
	float rows[2 * N_TOK];
	nf_sampler smp;
	if (nf_sampler_init(&smp, N_TOK, 1.0f, 1.0f, 42)) {
		ok(0, "a sampler over %d tokens", N_TOK);
		return;
	}
	for (int i = 0; i < DRAWS; i++) {
		int out[3];
		size_t accepted;
		for (int t = 0; t < N_TOK; t++) {
			rows[t] = logf(p0[t]);
			rows[N_TOK + t] = p1[t] > 0.0f ? logf(p1[t]) : -INFINITY;
		}
		size_t n = nf_spec_verify(&smp, rows, N_TOK, drafts, 1, NULL, NULL, out, &accepted);
		first[out[0]]++;
		kept_d0 += out[0] == drafts[0];
		/* one token, or two exactly when the first was the draft */
		bad += n != 1 + (size_t)(out[0] == drafts[0]) || accepted != n - 1;
		if (n == 2) {
			second[out[1]]++;
			n_second++;
		}
	}
	nf_sampler_release(&smp);
	double x2 = 0.0;
	int df = 0, pass;
	is_int((int)bad, 0, "the walk goes on exactly after a kept draft");
	pass = fits(first, DRAWS, p0, &x2, &df);
	ok(pass, "the first token emitted fits p0 (chi-square %.2f, %d df, critical %.3f)", x2, df,
	   chi2_crit_001[df]);
	pass = fits(second, n_second, p1, &x2, &df);
	ok(pass, "after the draft was kept (%ld times), the second fits p1 (chi-square %.2f, %d df, "
	   "critical %.3f)", n_second, x2, df, chi2_crit_001[df]);
	ok(fabs((double)kept_d0 / DRAWS - p0[drafts[0]]) < 0.01,
	   "the draft is kept with probability p0(d0) = %.2f: %.4f", p0[drafts[0]],
	   (double)kept_d0 / DRAWS);
	long keep_all[N_TOK] = {0};
	keep_all[drafts[0]] = DRAWS;
	ok(!fits(keep_all, DRAWS, p0, &x2, &df), "a walk that keeps every draft fails the test");
}

int main(void)
{
	rule_tests();
	verify_tests();
	return done_testing();
}
