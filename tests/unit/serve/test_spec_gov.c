/* test_spec_gov.c - the speculation governor: it measures both ways, then
 * takes the cheaper per token emitted and tries the other after
 * NF_SPEC_GOV_PROBE steps, then ever more rarely (up to
 * NF_SPEC_GOV_PROBE_MAX), follows a host whose costs change, keeps batch
 * sizes apart, and ignores steps that measured nothing. */
#include "serve/spec_gov.h"
#include "tests/tap.h"
#include "util/banned.h"

/* Run `steps` decoding steps of n sequences on a host where a step without
 * drafts costs `plain` seconds for one token a sequence, and one with drafts
 * `spec` seconds for `per_spec` tokens a sequence; the drafting steps. */
static int run(nf_spec_gov *g, int n, int steps, double plain, double spec, int per_spec)
{
	int drafting = 0;
	for (int i = 0; i < steps; i++) {
		int d = nf_spec_gov_draft(g, n);
		drafting += d;
		nf_spec_gov_add(g, n, d, d ? spec : plain, d ? n * per_spec : n);
	}
	return drafting;
}

int main(void)
{
	nf_spec_gov g;
	nf_spec_gov_init(&g);
	ok(nf_spec_gov_draft(&g, 1) == 1, "nothing measured: draft first");
	nf_spec_gov_add(&g, 1, 1, 0.010, 2);
	ok(nf_spec_gov_draft(&g, 1) == 0, "drafting measured: measure without next");
	nf_spec_gov_add(&g, 1, 0, 0.004, 1);

	/* int4 drafting for int8 here: 4 draft steps and a verification,
	 * 5 ms for 3.9 tokens (1.28 ms a token) against 1 ms a token; tries
	 * after 16, 32, 64, 128, 256 and then every 512 steps */
	nf_spec_gov_init(&g);
	int d = run(&g, 1, 2 + 16 + 32 + 64 + 128 + 256 + 3 * 512, 0.001, 0.005, 4);
	ok(d == 1 + 5 + 3, "drafting that costs more a token is tried ever more rarely "
	   "(%d of %d steps drafted)", d, 2 + 16 + 32 + 64 + 128 + 256 + 3 * 512);
	ok(g.paused_steps >= 2000, "the other steps count as paused (%llu)",
	   (unsigned long long)g.paused_steps);
	ok(nf_spec_gov_cost(&g, 1, 1) > nf_spec_gov_cost(&g, 1, 0) &&
	   nf_spec_gov_cost(&g, 1, 0) > 0.00099 && nf_spec_gov_cost(&g, 1, 0) < 0.00101,
	   "the costs a token it learnt: %.2f ms with drafts, %.2f without",
	   1e3 * nf_spec_gov_cost(&g, 1, 1), 1e3 * nf_spec_gov_cost(&g, 1, 0));

	/* the host changes: drafting now costs 0.5 ms a token; the next try
	 * comes within NF_SPEC_GOV_PROBE_MAX steps, finds it cheaper, and is
	 * repeated every NF_SPEC_GOV_PROBE steps until the estimates flip */
	d = run(&g, 1, NF_SPEC_GOV_PROBE_MAX + 8 * NF_SPEC_GOV_PROBE, 0.001, 0.002, 4);
	int later = run(&g, 1, 16 * NF_SPEC_GOV_PROBE, 0.001, 0.002, 4);
	ok(d > 0 && later >= 16 * NF_SPEC_GOV_PROBE - 3,
	   "once drafting gets cheaper it is taken (%d of %d steps after the change settled)", later,
	   16 * NF_SPEC_GOV_PROBE);

	/* batch sizes are measured apart: cheap alone, dear in a batch of 8 */
	nf_spec_gov_init(&g);
	int alone = 0, batch = 0;
	for (int i = 0; i < 8 * NF_SPEC_GOV_PROBE; i++) {
		alone += run(&g, 1, 1, 0.004, 0.005, 4);
		batch += run(&g, 8, 1, 0.005, 0.020, 2);
	}
	ok(alone >= 8 * NF_SPEC_GOV_PROBE - 4 && batch <= 5,
	   "one sequence drafts (%d of %d steps), a batch of 8 mostly not (%d)", alone,
	   8 * NF_SPEC_GOV_PROBE, batch);

	ok(nf_spec_gov_class(1) == 0 && nf_spec_gov_class(2) == 1 && nf_spec_gov_class(3) == 1 &&
	   nf_spec_gov_class(4) == 2 && nf_spec_gov_class(7) == 2 && nf_spec_gov_class(8) == 3 &&
	   nf_spec_gov_class(4096) == 3, "batch-size classes: 1, 2-3, 4-7, 8 and more");

	nf_spec_gov_init(&g);
	nf_spec_gov_add(&g, 1, 1, 0.01, 0);
	nf_spec_gov_add(&g, 0, 1, 0.01, 2);
	nf_spec_gov_add(&g, 1, 1, -1.0, 2);
	ok(nf_spec_gov_cost(&g, 1, 1) == 0.0, "steps without tokens, sequences or a time are ignored");
	return done_testing();
}
