/* test_gate_metrics.c - teacher-forced metrics on hand-made logits, and the default thresholds table. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine.h"
#include "factory/gate_defaults.h"
#include "factory/gate_metrics.h"
#include "tests/tap.h"

static int near(double a, double b, double tol) { return fabs(a - b) <= tol; }

static void test_kl(void)
{
	float r[5] = {1.5f, -2.0f, 0.25f, 3.0f, 0.0f};
	float shifted[5];
	nf_tf_acc a = {0};
	nf_tf_metrics m;

	nf_tf_add(&a, r, r, 5, 3);
	nf_tf_finish(&a, &m);
	ok(m.kl_mean == 0.0, "KL of identical distributions is 0 (%g)", m.kl_mean);
	ok(m.top1_agreement == 1.0 && m.ppl_ratio == 1.0, "identical: top-1 1, ppl_ratio 1");

	for (int i = 0; i < 5; i++)
		shifted[i] = r[i] + 7.0f;
	a = (nf_tf_acc){0};
	nf_tf_add(&a, r, shifted, 5, 3);
	nf_tf_finish(&a, &m);
	ok(m.kl_mean < 1e-12 && near(m.ppl_ratio, 1.0, 1e-12),
	   "logits shifted by a constant are the same distribution (KL %g)", m.kl_mean);

	/* p = (1/2, 1/2), q = (3/4, 1/4): KL = 1/2 ln(2/3) + 1/2 ln 2 */
	float p2[2] = {logf(0.5f), logf(0.5f)}, q2[2] = {logf(0.75f), logf(0.25f)};
	double want = 0.5 * log(0.5 / 0.75) + 0.5 * log(0.5 / 0.25);
	a = (nf_tf_acc){0};
	nf_tf_add(&a, p2, q2, 2, 1);
	nf_tf_finish(&a, &m);
	ok(near(m.kl_mean, want, 1e-7), "KL((1/2,1/2) || (3/4,1/4)) = %.7f (want %.7f)", m.kl_mean, want);
	ok(near(m.perplexity, 4.0, 1e-6) && near(m.perplexity_ref, 2.0, 1e-6) && near(m.ppl_ratio, 0.5, 1e-6),
	   "target with q 1/4 and p 1/2: perplexity 4, reference 2, ratio 0.5 (%g %g %g)", m.perplexity,
	   m.perplexity_ref, m.ppl_ratio);
	/* KL is not symmetric: swapping gives a different value */
	a = (nf_tf_acc){0};
	nf_tf_add(&a, q2, p2, 2, 1);
	nf_tf_finish(&a, &m);
	double rev = 0.75 * log(0.75 / 0.5) + 0.25 * log(0.25 / 0.5);
	ok(near(m.kl_mean, rev, 1e-7) && !near(rev, want, 1e-3), "KL(q || p) = %.7f, the reference is p", m.kl_mean);
}

static void test_perplexity(void)
{
	enum { V = 100 };
	float uni[V], sharp[V];
	nf_tf_acc a = {0};
	nf_tf_metrics m;

	memset(uni, 0, sizeof(uni));
	for (int t = 0; t < 37; t++)
		nf_tf_add(&a, uni, uni, V, (t * 13) % V);
	nf_tf_finish(&a, &m);
	ok(near(m.perplexity, V, 1e-9) && near(m.perplexity_ref, V, 1e-9),
	   "the perplexity of a uniform model is the vocabulary size (%.9g)", m.perplexity);
	ok(a.positions == 37, "37 positions counted");

	/* an engine that puts probability 1/2 on the target: perplexity 2 */
	for (int i = 0; i < V; i++)
		sharp[i] = 0.0f;
	sharp[5] = logf(0.5f * (V - 1) / 0.5f); /* e^x / (e^x + 99) = 1/2 */
	a = (nf_tf_acc){0};
	nf_tf_add(&a, uni, sharp, V, 5);
	nf_tf_add(&a, uni, sharp, V, 5);
	nf_tf_finish(&a, &m);
	ok(near(m.perplexity, 2.0, 1e-5) && near(m.ppl_ratio, 50.0, 1e-3),
	   "engine q(target) = 1/2: perplexity 2, ratio %g to the uniform reference", m.ppl_ratio);

	/* windows merge into the same means */
	nf_tf_acc x = {0}, y = {0}, all = {0};
	nf_tf_metrics mm, ma;
	nf_tf_add(&x, uni, sharp, V, 5);
	nf_tf_add(&y, sharp, uni, V, 7);
	nf_tf_add(&all, uni, sharp, V, 5);
	nf_tf_add(&all, sharp, uni, V, 7);
	nf_tf_merge(&x, &y);
	nf_tf_finish(&x, &mm);
	nf_tf_finish(&all, &ma);
	ok(!memcmp(&mm, &ma, sizeof(mm)), "merged windows give the metrics of one pass");

	nf_tf_finish(&(nf_tf_acc){0}, &m);
	ok(m.top1_agreement == 0 && m.ppl_ratio == 0, "no positions: zeros, never a pass by default");
}

static void test_top1(void)
{
	float ref[3] = {2.0f, 2.0f, 0.0f};
	float picks_second[3] = {1.0f, 3.0f, 0.0f}, ties[3] = {3.0f, 3.0f, 0.0f}, wrong[3] = {0.0f, 0.0f, 5.0f};
	float ref1[3] = {0.0f, 4.0f, 1.0f};
	nf_tf_acc a = {0};

	nf_tf_add(&a, ref, picks_second, 3, 0);
	ok(a.agree == 1, "a reference tie: the engine picking either tied token agrees");
	nf_tf_add(&a, ref, ties, 3, 0);
	ok(a.agree == 2, "an engine tie goes to the lowest id, one of the reference's");
	nf_tf_add(&a, ref, wrong, 3, 0);
	ok(a.agree == 2, "a token the reference ranks lower disagrees");
	nf_tf_add(&a, ref1, ties, 3, 1);
	ok(a.agree == 2, "an engine tie resolved to id 0 disagrees with a reference top of id 1");
	nf_tf_metrics m;
	nf_tf_finish(&a, &m);
	ok(m.top1_agreement == 0.5, "top1_agreement 2/4 (%g)", m.top1_agreement);
}

static void test_broken(void)
{
	float r[4] = {1, 2, 3, 4}, bad[4] = {1, NAN, 3, 4}, inf[4] = {1, INFINITY, 3, 4};
	nf_tf_acc a = {0};
	nf_tf_metrics m;
	nf_tf_add(&a, r, bad, 4, 2);
	nf_tf_add(&a, r, r, 4, 2);
	nf_tf_finish(&a, &m);
	ok(isinf(m.kl_mean) && isinf(m.perplexity) && m.ppl_ratio == 0 && m.top1_agreement == 0.5,
	   "a NaN logit: KL and perplexity infinite, ratio 0, that position disagrees");
	a = (nf_tf_acc){0};
	nf_tf_add(&a, r, inf, 4, 2);
	nf_tf_finish(&a, &m);
	ok(isinf(m.kl_mean) && m.top1_agreement == 0, "an infinite logit: infinitely far");
	float big[2] = {1000.0f, 1000.0f};
	ok(near(nf_log_sum_exp(big, 2), 1000.0 + log(2.0), 1e-9), "log-sum-exp stable at 1000");
	float neg[2] = {-INFINITY, 0.0f};
	ok(nf_log_sum_exp(neg, 2) == 0.0, "a -inf logit is probability 0");
}

static void test_defaults_table(void)
{
	size_t n = 0;
	const nf_gate_default_row *t = nf_gate_defaults_table(&n);
	const char *want[] = {"fp32", "fp16", "bf16", "int8-wo", "int4-wo", "int4-awq", "fp8-e4m3"};
	int all = 1, sane = 1, fp32_strictest = 1;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		int found = 0;
		for (size_t k = 0; k < n; k++)
			found |= !strcmp(t[k].precision, want[i]) && nf_gate_defaults_for(want[i]) == &t[k].bounds;
		all &= found;
	}
	ok(all, "a row for each precision of the suite");
	for (int p = 0; p < NF_PREC_COUNT; p++) {
		const char *name = nf_precision_name((nf_precision)p);
		int found = 0;
		for (size_t k = 0; k < n; k++)
			found |= !strcmp(t[k].precision, name);
		ok(found, "the engine's precision %s has its own row", name);
	}
	const nf_gate_bounds *f = nf_gate_defaults_for("fp32");
	for (size_t k = 0; k < n; k++) {
		const nf_gate_bounds *b = &t[k].bounds;
		sane &= b->min_top1_agreement > 0 && b->min_top1_agreement <= 1 && b->max_kl_mean > 0 &&
			b->min_ppl_ratio > 0.5 && b->min_ppl_ratio <= 1 && b->min_greedy_agreement > 0 &&
			b->min_greedy_agreement <= 1 && b->max_rel_err > 0;
		fp32_strictest &= f->min_top1_agreement >= b->min_top1_agreement && f->max_kl_mean <= b->max_kl_mean &&
				  f->min_ppl_ratio >= b->min_ppl_ratio && f->max_rel_err <= b->max_rel_err;
	}
	ok(sane, "every bound set and in range (a default never waves a gate through)");
	ok(fp32_strictest, "fp32, the reference's own arithmetic, has the strictest bounds");
	ok(nf_gate_defaults_for("fp16")->min_ppl_ratio >= 0.99, "fp16: at least 99%% of float32 (MLPerf)");
	const nf_gate_bounds *u = nf_gate_defaults_for("int3-future");
	ok(u == nf_gate_defaults_for("int4-wo") && u->min_ppl_ratio > 0, "an unknown precision gets the loosest row, not none");
}

int main(void)
{
	test_kl();
	test_perplexity();
	test_top1();
	test_broken();
	test_defaults_table();
	return done_testing();
}
