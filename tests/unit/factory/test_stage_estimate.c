/*
 * test_stage_estimate.c - a stage's runner time before it runs
 * (factory/stage_estimate.h): the scale key leaves out what does not set the
 * cost (a gate threshold) and keeps what does (the profile's precision and
 * device, the checkpoint); a recorded time is read back as the latest; each
 * stage's estimate is 0 when cached, the record when there is one, the cost
 * model without (a GPU gate from the roofline), unknown without shapes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "factory/cache.h"
#include "factory/plan.h"
#include "factory/recipe.h"
#include "factory/stage_estimate.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"

#define SRC "b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696"
#define OTHER "037cb335abb25d1fa9e8ecae30ed2a3a8ace9302862ebcdc05d51a6bbb10c312"

static nf_plan *plan_of(nf_recipe **r, const char *threshold)
{
	char text[1024];
	nf_plan *p = NULL;
	snprintf(text, sizeof text,
		 "apiVersion: nimfactory/v1\nkind: Recipe\n"
		 "model: {name: tiny, source: {path: m.bin}}\n"
		 "build:\n  targets:\n"
		 "    - {device: cpu, precisions: [fp32, int8-wo]}\n"
		 "    - {device: h100-sxm, precisions: [fp16]}\n"
		 "gates: {correctness: {prompts: [hi], default: {min_token_agreement: %s}}}\n"
		 "image: {repository: a/b, tag: t}\n",
		 threshold);
	*r = NULL;
	if (nf_recipe_parse(r, "e.yaml", text, strlen(text), "/recipes") || nf_plan_make(&p, *r))
		return NULL;
	return p;
}

static nf_model_config stories(void)
{
	return (nf_model_config){.arch = NF_ARCH_LLAMA, .dim = 64, .hidden_dim = 172, .n_layers = 5,
				 .n_heads = 8, .n_kv_heads = 4, .vocab_size = 512, .max_seq_len = 512,
				 .norm_eps = 1e-5f, .rope_theta = 10000.0f, .shared_classifier = true};
}

int main(void)
{
	char tmpl[] = "/tmp/nf_test_estimate.XXXXXX", *tmp = mkdtemp(tmpl);
	nf_recipe *r1 = NULL, *r2 = NULL;
	nf_plan *a = plan_of(&r1, "0.9"), *b = plan_of(&r2, "0.8");
	nf_cache *c = NULL;
	char k1[NF_SHA256_HEX_LEN + 1], k2[NF_SHA256_HEX_LEN + 1], k3[NF_SHA256_HEX_LEN + 1];
	nf_model_config cfg = stories();

	if (!ok(tmp && a && b && !nf_cache_open(&c, tmp), "two plans, a cache: %s", nf_error_last()))
		goto done;
	nf_stage *ga = nf_plan_stage(a, NF_STAGE_GATE, 0), *gb = nf_plan_stage(b, NF_STAGE_GATE, 0);
	nf_stage *g8 = nf_plan_stage(a, NF_STAGE_GATE, 1);
	ok(!nf_stage_scale_key(k1, a, ga, SRC) && !nf_stage_scale_key(k2, b, gb, SRC) && !strcmp(k1, k2),
	   "a gate threshold is not in the scale key");
	ok(!nf_stage_scale_key(k3, a, g8, SRC) && strcmp(k1, k3), "the precision is");
	ok(!nf_stage_scale_key(k3, a, ga, OTHER) && strcmp(k1, k3), "and the checkpoint");

	ok(nf_stage_timing_latest(c, k1) < 0, "no record yet");
	ok(!nf_stage_timing_record(c, k1, 3.5) && !nf_stage_timing_record(c, k1, 2.25) &&
		   nf_stage_timing_latest(c, k1) == 2.25,
	   "recorded twice: the latest is read back");

	nf_plan_stage(b, NF_STAGE_CONVERT, -1)->cached = 1;
	nf_stage_estimate(b, r2, c, SRC, &cfg);
	nf_stage *convert = nf_plan_stage(b, NF_STAGE_CONVERT, -1);
	nf_stage *compile = nf_plan_stage(b, NF_STAGE_COMPILE, 0), *gpu = nf_plan_stage(b, NF_STAGE_GATE, 2);
	ok(convert->estimate == 0, "a cached stage: 0");
	ok(gb->estimate == 2.25 && !gb->estimate_modelled, "the other recipe's gate: the recorded time");
	ok(compile->estimate > 0 && compile->estimate_modelled, "a compile without a record: modelled (%g s)",
	   compile->estimate);
	ok(gpu && gpu->estimate > 0 && gpu->estimate_modelled, "an h100 gate: modelled from the roofline (%g s)",
	   gpu ? gpu->estimate : -1);
	ok(nf_plan_stage(b, NF_STAGE_FETCH, -1)->estimate < 0, "a fetch without a record: unknown");
	size_t unknown = 0;
	double total = nf_stage_estimate_total(b, &unknown);
	ok(unknown == 1 && total >= 2.25 + compile->estimate, "the total over the known ones; %zu unknown (the fetch)",
	   unknown);

	nf_stage_estimate(a, r1, c, NULL, NULL);
	ok(nf_plan_stage(a, NF_STAGE_COMPILE, 0)->estimate < 0 && ga->estimate < 0,
	   "no source digest and no shapes: nothing is known");
done:
	nf_cache_free(c);
	nf_plan_free(a);
	nf_plan_free(b);
	nf_recipe_free(r1);
	nf_recipe_free(r2);
	if (tmp)
		nf_fs_remove_tree(tmp);
	return done_testing();
}
