/* test_report_svg.c - chart.svg from hand-made results: parses as SVG with one point per
 * plottable profile, the accuracy axis and its fallback, point areas, escaping, NaN/Inf,
 * empty results, and the same bytes for the same results. */
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

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* The chart parses as SVG 1.1 without scripts, with `points` points. */
static void check_svg(const char *svg, int points, const char *what)
{
	int rc = fx_report_check(tmpdir, "chart.svg", svg, "svg", points);
	if (rc < 0)
		skip("%s: no validator here (NF_SRC/build/venv)", what);
	else
		is_int(rc, 0, "%s", what);
}

/* Every numeric attribute (x y cx cy r x1 y1 x2 y2 width height) is a plain
 * decimal with a '.' point: what a locale's "," or a NaN would break. */
static int numbers_plain(const char *svg)
{
	static const char *const attrs[] = {" x=\"", " y=\"", " cx=\"", " cy=\"", " r=\"", " x1=\"",
					    " y1=\"", " x2=\"", " y2=\"", " width=\"", " height=\""};
	for (size_t a = 0; a < sizeof(attrs) / sizeof(attrs[0]); a++) {
		for (const char *p = svg; (p = strstr(p, attrs[a])); p++) {
			const char *v = p + strlen(attrs[a]);
			size_t n = strspn(v, "-0123456789.");
			if (n == 0 || v[n] != '"')
				return 0;
		}
	}
	return 1;
}

/* The r="..." of the point whose <title> begins with name, or -1. */
static double radius_of(const char *svg, const char *name)
{
	char *key = nf_strdup_printf("<title>%s:", name);
	const char *p = key ? strstr(svg, key) : NULL;
	double r = -1;
	free(key);
	if (p && (p = strstr(p, " r=\"")))
		r = strtod(p + 4, NULL);
	return r;
}

static void test_empty(void)
{
	nf_gate_results rs;
	char *svg = NULL;
	nf_gate_results_init(&rs);
	is_int(nf_report_svg(&svg, &rs, NULL), 0, "empty results: written");
	check_svg(svg, 0, "empty: valid SVG, no point");
	ok(svg && strstr(svg, "no profile has an accuracy metric"), "empty: says why nothing is plotted");
	ok(svg && numbers_plain(svg), "empty: axes still have plain numbers");
	free(svg);
}

/* Today's builds: no ppl_ratio, so accuracy falls back to greedy agreement. */
static void test_today(void)
{
	nf_gate_results rs;
	nf_profile fp32 = fx_profile('a', "cpu-fp32-tp1", "cpu", NF_PREC_FP32);
	nf_report_meta meta = {.model = "stories<260k> & co"};
	char *svg = NULL;

	nf_gate_results_init(&rs);
	fx_today(&rs, &fp32, 1.0, 30381.46, 1.68);
	is_int(nf_report_svg(&svg, &rs, &meta), 0, "one profile: written");
	check_svg(svg, 1, "one profile: valid SVG with one point");
	ok(svg && strstr(svg, ">greedy agreement with float32 (lowest prompt)</text>"),
	   "no ppl_ratio anywhere: the accuracy axis is greedy agreement");
	ok(svg && strstr(svg, "<title>stories&lt;260k&gt; &amp; co: accuracy against decode speed</title>"),
	   "model name escaped in the title");
	ok(svg && strstr(svg, ">fp32</text>"), "point labelled with its precision");
	ok(svg && strstr(svg, ">not measured</text>") && radius_of(svg, "cpu-fp32-tp1") == 6.0,
	   "engine size not measured: a fixed radius, said in the legend");
	ok(svg && strstr(svg, ">30000</text>") && strstr(svg, ">decode tokens/s</text>"), "x axis ticks and label");
	free(svg);
	nf_gate_results_release(&rs);
}

static void add_profile(nf_gate_results *rs, const nf_profile *p, double ppl_ratio, double decode,
			double mib, nf_verdict v)
{
	nf_gate_result *r = fx_result(rs, p, NF_GATE_CORRECTNESS, v, v == NF_VERDICT_FAILED ? "ppl" : NULL);
	fx_metric(r, "ppl_ratio", "ratio", ppl_ratio, NF_GATE_CMP_GE, 0.99);
	fx_metric(r, "agreement_min", "ratio", 0.5, NF_GATE_CMP_GE, 0.9);
	r = fx_result(rs, p, NF_GATE_PERFORMANCE, NF_VERDICT_PASSED, NULL);
	fx_metric(r, "decode_tokens_per_s", "tokens/s", decode, NF_GATE_CMP_NONE, 0);
	fx_metric(r, "engine_mib", "MiB", mib, NF_GATE_CMP_NONE, 0);
}

/* Five profiles: three plottable, one with a NaN accuracy, one with an
 * infinite speed, and a skipped GPU profile with nothing measured. */
static void make_suite(nf_gate_results *rs)
{
	static const struct {
		char id;
		const char *name;
		nf_precision prec;
		double ppl, decode, mib;
		nf_verdict v;
	} rows[] = {
		{'a', "cpu-fp32-tp1", NF_PREC_FP32, 1.0, 84.0, 540.0, NF_VERDICT_PASSED},
		{'b', "cpu-int8<&>-tp1", NF_PREC_INT8_WO, 0.9987, 246.0, 135.0, NF_VERDICT_PASSED},
		{'c', "cpu-int4-awq-tp1", NF_PREC_INT4_AWQ, 0.95, 400.0, 135.0 / 4, NF_VERDICT_FAILED},
		{'d', "cpu-bf16-tp1", NF_PREC_BF16, NAN, 160.0, 270.0, NF_VERDICT_PASSED},
		{'e', "cpu-fp16-tp1", NF_PREC_FP16, 1.0, INFINITY, 270.0, NF_VERDICT_PASSED},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		nf_profile p = fx_profile(rows[i].id, rows[i].name, "cpu", rows[i].prec);
		add_profile(rs, &p, rows[i].ppl, rows[i].decode, rows[i].mib, rows[i].v);
	}
	nf_profile gpu = fx_profile('f', "h100-sxm-fp8-e4m3-tp1", "h100-sxm", NF_PREC_FP8_E4M3);
	fx_result(rs, &gpu, NF_GATE_CORRECTNESS, NF_VERDICT_SKIPPED, "no GPU on this machine");
}

static void test_suite(void)
{
	nf_gate_results rs, again;
	nf_report_meta meta = {.model = "smollm2", .generated_at = "2026-01-01T00:00:00Z"};
	nf_report_meta later = {.model = "smollm2", .generated_at = "2027-06-01T12:00:00Z"};
	char *svg = NULL, *svg2 = NULL;

	nf_gate_results_init(&rs);
	nf_gate_results_init(&again);
	make_suite(&rs);
	make_suite(&again);
	is_int(nf_report_svg(&svg, &rs, &meta), 0, "suite: written");
	check_svg(svg, 3, "suite: valid SVG, a point for each profile with both values finite");
	is_int(count(svg, "<circle class=\"point\""), 3, "three points");
	ok(svg && strstr(svg, ">perplexity ratio to float32 (1 = as good)</text>"), "accuracy axis is ppl_ratio");
	ok(svg && strstr(svg, ">not plotted</text>") && strstr(svg, ">cpu-bf16-tp1</text>") &&
	   strstr(svg, ">cpu-fp16-tp1</text>") && strstr(svg, ">h100-sxm-fp8-e4m3-tp1</text>"),
	   "NaN accuracy, infinite speed and nothing measured: named as not plotted");
	ok(svg && strstr(svg, "<title>cpu-int8&lt;&amp;&gt;-tp1: 246 tokens/s"), "profile name escaped in its tooltip");
	double r32 = radius_of(svg, "cpu-fp32-tp1"), r8 = radius_of(svg, "cpu-int8&lt;&amp;&gt;-tp1"),
	       r4 = radius_of(svg, "cpu-int4-awq-tp1");
	ok(r32 == 26.0, "largest engine has the largest radius (26), got %g", r32);
	ok(fabs(r8 * r8 / (r32 * r32) - 135.0 / 540.0) < 0.01, "area proportional to engine size (int8 = 1/4 of fp32)");
	ok(fabs(r4 - 6.5) < 0.051, "int4 (1/16 of fp32) has a quarter of the radius, got %g", r4);
	ok(strstr(svg, "fill=\"#c62828\"") != NULL, "failed profile drawn in red");
	ok(svg && strstr(svg, ">float32</text>") && strstr(svg, "stroke-dasharray"), "float32 reference line");
	ok(svg && strstr(svg, ">540 MiB</text>"), "size legend names the largest engine");
	ok(svg && numbers_plain(svg), "every coordinate a plain decimal");
	ok(svg && !strstr(svg, "<script") && !strstr(svg, "href") && !strstr(svg, "@font-face"),
	   "self-contained: no script, link or font");
	/* The largest point is drawn first, so the smaller ones stay on top. */
	ok(svg && strstr(svg, "<title>cpu-fp32-tp1") < strstr(svg, "<title>cpu-int4-awq-tp1"),
	   "points drawn largest first");
	if (getenv("NF_TEST_DUMP")) /* to look at it: NF_TEST_DUMP=1 ... | sed -n '/^<?xml/,/^<\/svg>/p' */
		printf("%s", svg);
	is_int(nf_report_svg(&svg2, &again, &later), 0, "same results again, another time");
	ok(svg && svg2 && strcmp(svg, svg2) == 0, "same results give the same bytes, whatever the time");
	free(svg);
	free(svg2);
	nf_gate_results_release(&rs);
	nf_gate_results_release(&again);
}

/* Only agreement per prompt (no summary): the last fallback. */
static void test_case_only(void)
{
	nf_gate_results rs;
	nf_profile p = fx_profile('a', "cpu-int8-wo-tp1", "cpu", NF_PREC_INT8_WO);
	char *svg = NULL;
	nf_gate_results_init(&rs);
	nf_gate_result *r = fx_result(&rs, &p, NF_GATE_CORRECTNESS, NF_VERDICT_PASSED, NULL);
	fx_case_metric(fx_case(r, "prompt 1", NF_VERDICT_PASSED, NULL), "agreement", "ratio", 0.75, NF_GATE_CMP_NONE, 0);
	r = fx_result(&rs, &p, NF_GATE_PERFORMANCE, NF_VERDICT_PASSED, NULL);
	fx_case_metric(fx_case(r, "decode", NF_VERDICT_PASSED, NULL), "decode_tokens_per_s", "tokens/s", 1e9,
		       NF_GATE_CMP_NONE, 0);
	is_int(nf_report_svg(&svg, &rs, NULL), 0, "case metrics only: written");
	check_svg(svg, 1, "case metrics only: one point");
	ok(svg && strstr(svg, ">greedy agreement with float32</text>"), "accuracy falls back to a case's agreement");
	ok(svg && numbers_plain(svg), "a billion tokens/s still gives plain numbers");
	free(svg);
	nf_gate_results_release(&rs);
}

/* A point near the right edge has its label on its left, off the legend. */
static void test_label_side(void)
{
	nf_gate_results rs;
	nf_profile slow = fx_profile('a', "cpu-fp32-tp1", "cpu", NF_PREC_FP32);
	nf_profile fast = fx_profile('b', "cpu-fp8-e4m3-tp1", "cpu", NF_PREC_FP8_E4M3);
	char *svg = NULL;
	nf_gate_results_init(&rs);
	add_profile(&rs, &slow, 1.0, 10, 100, NF_VERDICT_PASSED);
	add_profile(&rs, &fast, 0.99, 95, 25, NF_VERDICT_PASSED); /* x axis ends at 100 */
	is_int(nf_report_svg(&svg, &rs, NULL), 0, "label sides: written");
	ok(svg && strstr(svg, "text-anchor=\"end\">fp8-e4m3</text>"), "label left of a point at the right edge");
	ok(svg && strstr(svg, "\">fp32</text>") && !strstr(svg, "text-anchor=\"end\">fp32</text>"),
	   "label right of a point with room");
	free(svg);
	nf_gate_results_release(&rs);
}

int main(void)
{
	char tmpl[] = "/tmp/nf_test_report_svg.XXXXXX";
	tmpdir = mkdtemp(tmpl);
	if (!tmpdir) {
		ok(0, "mkdtemp");
		return done_testing();
	}
	test_empty();
	test_today();
	test_suite();
	test_case_only();
	test_label_side();
	nf_fs_remove_tree(tmpdir);
	return done_testing();
}
