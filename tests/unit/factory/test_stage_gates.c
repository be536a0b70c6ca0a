/*
 * test_stage_gates.c - a profile's gate results saved as a stage result read
 * back exactly as they were (every metric, case, verdict and reason; doubles
 * to the bit; NaN kept), the other profiles' results left out; a damaged
 * file is refused whole, adding nothing.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "factory/stage_gates.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"

static nf_profile profile(const char *name, const char *id, nf_precision prec)
{
	nf_profile p;
	memset(&p, 0, sizeof(p));
	snprintf(p.name, sizeof(p.name), "%s", name);
	snprintf(p.id, sizeof(p.id), "%s", id);
	snprintf(p.device, sizeof(p.device), "cpu");
	p.precision = prec;
	return p;
}

/* A correctness result with one case and a performance result with a reason. */
static void fill(nf_gate_results *rs, const nf_profile *p)
{
	nf_gate_result *c = NULL, *f = NULL;
	nf_gate_result_new(&c, p, NF_GATE_CORRECTNESS);
	c->metrics = calloc(2, sizeof(*c->metrics));
	c->n_metrics = 2;
	nf_gate_metric_set(&c->metrics[0], "agreement", "ratio", 0.1 + 0.2, NF_GATE_CMP_GE, 0.9);
	nf_gate_metric_set(&c->metrics[1], "perplexity", "", NAN, NF_GATE_CMP_NONE, 0);
	c->verdict = NF_VERDICT_FAILED;
	c->seconds = 1.0 / 3.0;
	c->cases = calloc(1, sizeof(*c->cases));
	c->n_cases = 1;
	c->cases[0].name = strdup("prompt 1: \"Once\"");
	c->cases[0].prompt = strdup("Once\n\"upon\"");
	c->cases[0].verdict = NF_VERDICT_FAILED;
	c->cases[0].reason = strdup("agreement 0.3 < 0.9");
	c->cases[0].prompt_tokens = 5;
	c->cases[0].positions = 64;
	c->cases[0].first_mismatch = 3;
	c->cases[0].metrics = calloc(1, sizeof(*c->cases[0].metrics));
	c->cases[0].n_metrics = 1;
	nf_gate_metric_set(&c->cases[0].metrics[0], "rel_err_max", "ratio", 1e-7, NF_GATE_CMP_LE, 0.1);
	nf_gate_results_add(rs, c);
	nf_gate_result_new(&f, p, NF_GATE_PERFORMANCE);
	f->verdict = NF_VERDICT_SKIPPED;
	nf_gate_set_reason(&f->reason, "no GPU on this machine");
	nf_gate_results_add(rs, f);
}

static int same_metric(const nf_gate_metric *a, const nf_gate_metric *b)
{
	int same_value = isnan(a->value) ? isnan(b->value) : a->value == b->value;
	return !strcmp(a->name, b->name) && !strcmp(a->unit, b->unit) && same_value &&
	       a->cmp == b->cmp && a->threshold == b->threshold && a->ok == b->ok;
}

static int same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

int main(void)
{
	char dir[] = "/tmp/nf-test-stage-gates-XXXXXX";
	nf_gate_results saved, loaded;
	nf_profile fp32 = profile("cpu-fp32-tp1", "aaaa", NF_PREC_FP32);
	nf_profile int8 = profile("cpu-int8-wo-tp1", "bbbb", NF_PREC_INT8_WO);
	char *path = NULL, *bad = NULL;

	plan(17);
	nf_gate_results_init(&saved);
	nf_gate_results_init(&loaded);
	if (!mkdtemp(dir))
		return 1;
	path = nf_path_join(dir, NF_STAGE_GATES_FILE);
	bad = nf_path_join(dir, "bad.json");
	fill(&saved, &fp32);
	fill(&saved, &int8);

	is_int(nf_stage_gates_save(path, &saved, int8.id), 0, "save the int8-wo profile's gates");
	is_int(nf_stage_gates_load(&loaded, path), 0, "load them");
	is_int((int)loaded.n, 2, "its two results, not the fp32 profile's");
	const nf_gate_result *a = saved.items[2], *b = loaded.items[0];
	is_str(b->profile_id, "bbbb", "profile id");
	is_str(b->profile_name, "cpu-int8-wo-tp1", "profile name");
	ok(b->kind == NF_GATE_CORRECTNESS && b->verdict == NF_VERDICT_FAILED, "kind and verdict");
	ok(b->seconds == a->seconds, "seconds to the bit");
	ok(b->n_metrics == 2 && same_metric(&a->metrics[0], &b->metrics[0]), "a metric to the bit");
	ok(b->n_metrics == 2 && same_metric(&a->metrics[1], &b->metrics[1]), "a NaN metric stays NaN");
	ok(b->n_cases == 1 && same_str(b->cases[0].name, a->cases[0].name) &&
		   same_str(b->cases[0].prompt, a->cases[0].prompt) &&
		   same_str(b->cases[0].reason, a->cases[0].reason),
	   "the case's texts");
	ok(b->n_cases == 1 && b->cases[0].prompt_tokens == 5 && b->cases[0].positions == 64 &&
		   b->cases[0].first_mismatch == 3 && b->cases[0].n_metrics == 1 &&
		   same_metric(&a->cases[0].metrics[0], &b->cases[0].metrics[0]),
	   "the case's counts and metric");
	ok(loaded.items[1]->kind == NF_GATE_PERFORMANCE &&
		   loaded.items[1]->verdict == NF_VERDICT_SKIPPED &&
		   same_str(loaded.items[1]->reason, "no GPU on this machine") && !b->reason,
	   "reasons, present and absent");
	ok(nf_gate_results_profile_verdict(&loaded, "bbbb", "cpu-int8-wo-tp1") == NF_VERDICT_FAILED,
	   "the profile's verdict over the loaded results");

	static const char *const damaged[] = {
		"{}",
		"[{\"profile_id\": \"x\"}]",
		NULL, /* a good result, then a damaged one */
		"[{\"profile_id\":\"x\",\"profile_name\":\"n\",\"device\":\"cpu\",\"precision\":\"fp32\","
		"\"kind\":7,\"verdict\":1,\"reason\":null,\"seconds\":0,\"metrics\":[],\"cases\":[]}]",
	};
	size_t before = loaded.n;
	int refused = 0;
	char *good_then_bad = NULL;
	size_t len;
	if (nf_fs_read_file(&good_then_bad, &len, path, 1 << 20) == 0 && len > 2) {
		good_then_bad[len - 1] = '\0'; /* drop the closing bracket */
		char *t = nf_strdup_printf("%s, {\"profile_id\": 1}]", good_then_bad);
		free(good_then_bad);
		good_then_bad = t;
	}
	for (size_t i = 0; i < sizeof(damaged) / sizeof(damaged[0]); i++) {
		const char *text = damaged[i] ? damaged[i] : good_then_bad;
		if (text && nf_fs_write_atomic(bad, text, strlen(text), 0644) == 0 &&
		    nf_stage_gates_load(&loaded, bad) == NF_EINPUT)
			refused++;
	}
	free(good_then_bad);
	is_int(refused, 4, "not an array, a result without its fields, good results then a damaged "
	       "one, a kind out of range: refused");
	is_int((int)loaded.n, (int)before, "a refused file adds nothing");
	ok(strstr(nf_error_last(), "damaged") != NULL, "the message says the entry is damaged");
	is_int(nf_stage_gates_load(&loaded, "/nonexistent/gates.json") < 0, 1, "a missing file is an error");

	nf_gate_results_release(&saved);
	nf_gate_results_release(&loaded);
	nf_fs_remove_tree(dir);
	free(path);
	free(bad);
	return done_testing();
}
