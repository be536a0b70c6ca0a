/* test_stepcost.c - the step-time model: an exact line is recovered, the
 * prompt budget follows p <= slack * (a/b + n_decode), undetermined fits
 * say so, and old steps are forgotten. */
#include <math.h>

#include "serve/stepcost.h"
#include "tests/tap.h"
#include "util/banned.h"

static void feed(nf_stepcost *c, double a, double b, int lo, int hi, int times)
{
	for (int k = 0; k < times; k++)
		for (int n = lo; n <= hi; n++)
			nf_stepcost_add(c, n, a + b * n);
}

int main(void)
{
	nf_stepcost c = {0};
	double a = -1, b = -1;

	ok(!nf_stepcost_fit(&c, &a, &b) && nf_stepcost_prompt_budget(&c, 4, 0.25) == -1,
	   "no steps: no fit, no budget");
	for (int k = 0; k < 40; k++)
		nf_stepcost_add(&c, 32, 0.040);
	ok(!nf_stepcost_fit(&c, &a, &b), "steps all of one size: no fit");

	/* memory-bound 110M fp32-like: 11 ms a step, 0.5 ms a token */
	c = (nf_stepcost){0};
	feed(&c, 0.011, 0.0005, 1, 40, 3);
	int fit = nf_stepcost_fit(&c, &a, &b);
	ok(fit && fabs(a - 0.011) < 1e-9 && fabs(b - 0.0005) < 1e-12,
	   "an exact line is recovered (a %.6f s, b %.7f s/token)", a, b);
	/* p <= 0.25 * (22 + 32) = 13.5 */
	is_int(nf_stepcost_prompt_budget(&c, 32, 0.25), 13, "32 decoding, slack 0.25: 13 prompt tokens");
	is_int(nf_stepcost_prompt_budget(&c, 3, 0.25), 6, "3 decoding, slack 0.25: 6 prompt tokens");
	/* the bound holds: a step with the budget takes at most 1.25x */
	int p = nf_stepcost_prompt_budget(&c, 32, 0.25);
	ok(a + b * (32 + p) <= 1.25 * (a + b * 32) + 1e-12, "the budgeted step is within 1.25x of a decode-only step");

	/* a compute-bound machine: nothing per step, all per token */
	c = (nf_stepcost){0};
	feed(&c, 0.0, 0.001, 1, 20, 2);
	is_int(nf_stepcost_prompt_budget(&c, 0, 0.25), 1, "no fixed cost and no decoders: at least 1 token");

	/* the machine changes: after ~300 steps of a new line the old is forgotten */
	c = (nf_stepcost){0};
	feed(&c, 0.011, 0.0005, 1, 40, 3);
	feed(&c, 0.003, 0.0001, 1, 30, 10);
	fit = nf_stepcost_fit(&c, &a, &b);
	ok(fit && fabs(a - 0.003) < 1e-4 && fabs(b - 0.0001) < 1e-5,
	   "the fit follows the recent steps (a %.5f s, b %.6f s/token)", a, b);

	/* garbage is ignored */
	c = (nf_stepcost){0};
	nf_stepcost_add(&c, 0, 1.0);
	nf_stepcost_add(&c, -5, 1.0);
	nf_stepcost_add(&c, 4, NAN);
	nf_stepcost_add(&c, 4, -1.0);
	nf_stepcost_add(&c, 4, INFINITY);
	ok(c.w == 0.0, "steps of no tokens, or of NaN, negative or infinite time, are ignored");
	/* a line going down is not a cost model */
	c = (nf_stepcost){0};
	for (int n = 1; n <= 20; n++)
		nf_stepcost_add(&c, n, 0.05 - 0.001 * n);
	ok(!nf_stepcost_fit(&c, &a, &b), "a step time that falls with its tokens: no fit");
	return done_testing();
}
