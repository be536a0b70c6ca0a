/* test_report_md.c - summary.md from hand-made results: columns only for measured metrics,
 * values, ratios, NaN/Inf, escaping, the failed and skipped list, empty results. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "factory/report.h"
#include "tests/tap.h"
#include "tests/unit/factory/report_fixtures.h"
#include "util/fs.h"

static const char *tmpdir;

/* The line of text that begins with prefix, as a new string (NULL if none). */
static char *line_starting(const char *text, const char *prefix)
{
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, prefix, strlen(prefix)) == 0) {
			size_t n = strcspn(p, "\n");
			return strndup(p, n);
		}
	}
	return NULL;
}

static void check_table(const char *md, int rows, const char *what)
{
	int rc = fx_report_check(tmpdir, "summary.md", md, "md", rows);
	if (rc < 0)
		skip("%s: no validator here (NF_SRC/build/venv)", what);
	else
		is_int(rc, 0, "%s", what);
}

static void test_empty(void)
{
	nf_gate_results rs;
	char *md = NULL;
	nf_gate_results_init(&rs);
	is_int(nf_report_markdown(&md, &rs, NULL), 0, "empty results: written");
	ok(md && strstr(md, "# Gates\n"), "empty: title without a model");
	ok(md && strstr(md, "Verdict: **skipped** (0 gates"), "empty: verdict skipped, never passed");
	ok(md && strstr(md, "No profile was gated.") && !strstr(md, "| profile"), "empty: no table");
	ok(md && strstr(md, "No case failed or was skipped."), "empty: nothing listed");
	free(md);
}

/* Today's metrics only: the table has their columns and none of the others. */
static void test_today(void)
{
	nf_gate_results rs;
	nf_profile p = fx_profile('a', "cpu-fp32-tp1", "cpu", NF_PREC_FP32);
	nf_report_meta meta = {.model = "stories260k"};
	char *md = NULL, *header = NULL, *row = NULL;

	nf_gate_results_init(&rs);
	fx_today(&rs, &p, 1.0, 30381.4596, 1.6796875);
	is_int(nf_report_markdown(&md, &rs, &meta), 0, "one profile: written");
	ok(md && strstr(md, "# Gates: stories260k\n"), "title names the model");
	header = md ? line_starting(md, "| profile") : NULL;
	is_str(header, "| profile | device | precision | verdict | decode tok/s | peak memory (MiB) | greedy agreement |",
	       "columns only for the metrics measured");
	row = md ? line_starting(md, "| cpu-fp32") : NULL;
	is_str(row, "| cpu-fp32-tp1 | cpu | fp32 | passed | 30381 | 1.68 | 1 |",
	       "row: 4 significant digits, trailing zeros dropped");
	ok(md && !strstr(md, "In parentheses"), "no ratio note without ratios");
	check_table(md, 1, "one profile: one table row, every row as wide as the header");
	free(header);
	free(row);
	free(md);
	nf_gate_results_release(&rs);
}

/* The suite's metrics on one profile, ratios to fp32 beside the values. */
static void add_suite(nf_gate_results *rs, const nf_profile *p, double ppl_ratio, double kl,
		      double decode, double speedup)
{
	nf_gate_result *r = fx_result(rs, p, NF_GATE_CORRECTNESS, NF_VERDICT_PASSED, NULL);
	fx_metric(r, "top1_agreement", "ratio", 0.975, NF_GATE_CMP_GE, 0.9);
	fx_metric(r, "kl_mean", "nats", kl, NF_GATE_CMP_LE, 0.1);
	fx_metric(r, "ppl_ratio", "ratio", ppl_ratio, NF_GATE_CMP_GE, 0.99);
	fx_metric(r, "agreement_min", "ratio", 0.96875, NF_GATE_CMP_GE, 0.9);
	r = fx_result(rs, p, NF_GATE_PERFORMANCE, NF_VERDICT_PASSED, NULL);
	fx_metric(r, "decode_tokens_per_s", "tokens/s", decode, NF_GATE_CMP_NONE, 0);
	fx_metric(r, "decode_speedup", "ratio", speedup, NF_GATE_CMP_GE, 1);
	fx_metric(r, "prefill_tokens_per_s", "tokens/s", 1234.5, NF_GATE_CMP_NONE, 0);
	fx_metric(r, "ttft_ms", "ms", 12.3456, NF_GATE_CMP_NONE, 0);
	fx_metric(r, "engine_peak_rss_mib", "MiB", 70.5, NF_GATE_CMP_NONE, 0);
	fx_metric(r, "engine_mib", "MiB", 81.25, NF_GATE_CMP_NONE, 0);
}

static void test_suite(void)
{
	nf_gate_results rs;
	nf_profile fp32 = fx_profile('a', "cpu-fp32-tp1", "cpu", NF_PREC_FP32);
	nf_profile int8 = fx_profile('b', "cpu|int8<&>_*", "cpu", NF_PREC_INT8_WO);
	nf_profile old = fx_profile('c', "cpu-bf16-tp1", "cpu", NF_PREC_BF16);
	nf_profile gpu = fx_profile('d', "h100-sxm-fp8-e4m3-tp1", "h100-sxm", NF_PREC_FP8_E4M3);
	char *md = NULL, *line = NULL;

	nf_gate_results_init(&rs);
	add_suite(&rs, &fp32, 1.0, 0.0, 84.25, 1.0);
	add_suite(&rs, &int8, 0.998712, NAN, 246.1234, INFINITY);
	/* A profile whose gates measured today's metrics only. */
	fx_today(&rs, &old, 0.984375, 150, 40);
	/* A failed correctness case whose reason holds table syntax and HTML. */
	nf_gate_result *r = fx_result(&rs, &old, NF_GATE_CORRECTNESS, NF_VERDICT_FAILED, "see the case");
	nf_gate_case *c = fx_case(r, "prompt 2: \"a|b\"", NF_VERDICT_FAILED, "kl | <b>big</b> & bad\nsecond line");
	fx_case_metric(c, "kl_mean", "nats", 0.5, NF_GATE_CMP_LE, 0.1);
	c = fx_case(r, "prompt 3", NF_VERDICT_FAILED, NULL);
	fx_case_metric(c, "agreement", "ratio", 0.5, NF_GATE_CMP_GE, 0.9);
	fx_result(&rs, &gpu, NF_GATE_CORRECTNESS, NF_VERDICT_SKIPPED, "no GPU on this machine");
	fx_result(&rs, &gpu, NF_GATE_PERFORMANCE, NF_VERDICT_SKIPPED, "no GPU on this machine");

	is_int(nf_report_markdown(&md, &rs, NULL), 0, "suite: written");
	line = md ? line_starting(md, "| profile") : NULL;
	is_str(line, "| profile | device | precision | verdict | engine size (MiB) | decode tok/s | prefill tok/s | "
		     "TTFT (ms) | peak memory (MiB) | ppl ratio | KL (nats) | top-1 agreement | greedy agreement |",
	       "every headline column, in the documented order");
	free(line);
	line = md ? line_starting(md, "| cpu\\|") : NULL;
	is_str(line, "| cpu\\|int8&lt;&amp;&gt;\\_\\* | cpu | int8-wo | passed | 81.25 | 246.1 (inf) | 1235 | 12.35 | "
		     "70.5 | 0.9987 | NaN | 0.975 | 0.9688 |",
	       "escaped name; NaN and inf written as such; ratio beside the value");
	free(line);
	line = md ? line_starting(md, "| cpu-fp32") : NULL;
	ok(line && strstr(line, "| 84.25 (1x) |") && strstr(line, "| 1 | 0 | 0.975 |"), "fp32 row: its ratio is 1x");
	free(line);
	line = md ? line_starting(md, "| cpu-bf16") : NULL;
	is_str(line, "| cpu-bf16-tp1 | cpu | bf16 | failed | \xe2\x80\x94 | 150 | \xe2\x80\x94 | \xe2\x80\x94 | 40 | "
		     "\xe2\x80\x94 | 0.5 | \xe2\x80\x94 | 0.9844 |",
	       "a metric this profile lacks is a dash, never 0; one only a case measured is taken from the case");
	free(line);
	line = md ? line_starting(md, "| h100") : NULL;
	ok(line && strstr(line, "| h100-sxm | fp8-e4m3 | skipped |"), "skipped GPU profile has its row");
	free(line);
	ok(md && strstr(md, "In parentheses: the ratio to the fp32 engine"), "ratio note");
	check_table(md, 4, "suite: four rows, escaped pipes do not split cells");

	line = md ? line_starting(md, "- **cpu-bf16-tp1** correctness, prompt 2") : NULL;
	is_str(line, "- **cpu-bf16-tp1** correctness, prompt 2: \"a\\|b\": failed: kl \\| &lt;b&gt;big&lt;/b&gt; &amp; bad second line",
	       "failed case with its escaped one-line reason");
	free(line);
	line = md ? line_starting(md, "- **cpu-bf16-tp1** correctness, prompt 3") : NULL;
	is_str(line, "- **cpu-bf16-tp1** correctness, prompt 3: failed: agreement = 0.5 (bound &gt;= 0.9)",
	       "failed case without a reason: its value and bound");
	free(line);
	line = md ? line_starting(md, "- **h100-sxm-fp8-e4m3-tp1** correctness") : NULL;
	is_str(line, "- **h100-sxm-fp8-e4m3-tp1** correctness: skipped: no GPU on this machine", "skipped gate with its reason");
	free(line);
	ok(md && !strstr(md, "cpu-fp32-tp1** "), "passed profiles are not listed");
	ok(md && strstr(md, "Verdict: **failed** (9 gates: 6 passed, 1 failed, 2 skipped)"), "verdict line counts gates");
	free(md);
	nf_gate_results_release(&rs);
}

int main(void)
{
	char tmpl[] = "/tmp/nf_test_report_md.XXXXXX";
	tmpdir = mkdtemp(tmpl);
	if (!tmpdir) {
		ok(0, "mkdtemp");
		return done_testing();
	}
	test_empty();
	test_today();
	test_suite();
	nf_fs_remove_tree(tmpdir);
	return done_testing();
}
