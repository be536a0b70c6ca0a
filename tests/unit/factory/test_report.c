/* test_report.c - gates.json, junit.xml, gates.tap and the table from hand-made results. */
#define _GNU_SOURCE
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "factory/escape.h"
#include "factory/gates.h"
#include "factory/report.h"
#include "tests/tap.h"
#include "tests/unit/factory/report_fixtures.h"
#include "util/error.h"
#include "util/fs.h"

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Assert report_check passes, or skip where it cannot run. */
static void check_valid(const char *dir, const char *name, const char *text, const char *kind,
			int count, const char *what)
{
	int rc = fx_report_check(dir, name, text, kind, count);
	if (rc < 0)
		skip("%s: no validator here (NF_SRC/build/venv)", what);
	else
		is_int(rc, 0, "%s", what);
}

/* What TAP::Parser (tests/report_tap.pl) reads from text, its first line into
 * line; -1 when perl or NF_SRC is missing here. */
static int tap_parse(char *line, size_t size, const char *dir, const char *text)
{
	const char *src = getenv("NF_SRC");
	char *path = nf_path_join(dir, "parse.tap"), *cmd = NULL;
	FILE *p = NULL;
	int rc = -1;

	line[0] = '\0';
	if (!src || !path || system("perl -MTAP::Parser -e 1 2>/dev/null") != 0 ||
	    nf_fs_write_atomic(path, text, strlen(text), 0644) < 0)
		goto done;
	cmd = nf_strdup_printf("perl '%s/tests/report_tap.pl' '%s'", src, path);
	p = cmd ? popen(cmd, "r") : NULL;
	if (p && fgets(line, (int)size, p))
		line[strcspn(line, "\n")] = '\0';
	rc = p && pclose(p) == 0 ? 0 : -1;
done:
	free(path);
	free(cmd);
	return rc;
}

/* A profile id as the planner makes them: 64 hex digits. */
static void hex_id(char *dst, size_t size, char digit)
{
	size_t n = size - 1 < 64 ? size - 1 : 64;
	memset(dst, digit, n);
	dst[n] = '\0';
}

static nf_profile mkprofile(const char *id, const char *name, const char *device, nf_precision prec,
			    int gpu)
{
	nf_profile p;
	memset(&p, 0, sizeof(p));
	snprintf(p.id, sizeof(p.id), "%s", id);
	snprintf(p.name, sizeof(p.name), "%s", name);
	snprintf(p.device, sizeof(p.device), "%s", device);
	p.precision = prec;
	p.is_gpu = gpu;
	return p;
}

/* A correctness result with two prompts; the second fails when fail is set. */
static nf_gate_result *mk_correctness(const nf_profile *p, int fail)
{
	nf_gate_result *r = NULL;
	if (nf_gate_result_new(&r, p, NF_GATE_CORRECTNESS) < 0)
		return NULL;
	r->cases = calloc(2, sizeof(*r->cases));
	r->n_cases = 2;
	for (int i = 0; i < 2; i++) {
		nf_gate_case *c = &r->cases[i];
		double agree = (fail && i == 1) ? 0.5 : 1.0;
		c->name = nf_strdup_printf("prompt %d: \"<tag> & 'q'\"", i + 1);
		c->prompt = strdup(i ? "bad\x01 byte \xff#x" : "Once upon");
		c->metrics = calloc(2, sizeof(*c->metrics));
		c->n_metrics = 2;
		c->positions = 8;
		c->prompt_tokens = 3;
		c->first_mismatch = agree < 1 ? 2 : -1;
		nf_gate_metric_set(&c->metrics[0], "agreement", "ratio", agree, NF_GATE_CMP_GE, 0.9);
		nf_gate_metric_set(&c->metrics[1], "rel_err_max", "", i ? INFINITY : 0.001,
				   NF_GATE_CMP_LE, fail ? 0.1 : INFINITY);
		c->verdict = c->metrics[0].ok && c->metrics[1].ok ? NF_VERDICT_PASSED : NF_VERDICT_FAILED;
		if (c->verdict == NF_VERDICT_FAILED)
			nf_gate_set_reason(&c->reason, "agreement %.3g < %.3g", agree, 0.9);
	}
	r->metrics = calloc(1, sizeof(*r->metrics));
	r->n_metrics = 1;
	nf_gate_metric_set(&r->metrics[0], "agreement_min", "ratio", fail ? 0.5 : 1.0, NF_GATE_CMP_GE, 0.9);
	r->verdict = fail ? NF_VERDICT_FAILED : NF_VERDICT_PASSED;
	if (fail)
		nf_gate_set_reason(&r->reason, "%s: %s", r->cases[1].name, r->cases[1].reason);
	r->seconds = 0.5;
	return r;
}

static nf_gate_result *mk_perf(const nf_profile *p)
{
	nf_gate_result *r = NULL;
	if (nf_gate_result_new(&r, p, NF_GATE_PERFORMANCE) < 0)
		return NULL;
	r->cases = calloc(1, sizeof(*r->cases));
	r->n_cases = 1;
	r->cases[0].name = strdup("decode throughput");
	r->cases[0].metrics = calloc(1, sizeof(nf_gate_metric));
	r->cases[0].n_metrics = 1;
	r->cases[0].first_mismatch = -1;
	nf_gate_metric_set(&r->cases[0].metrics[0], "decode_tokens_per_s", "tokens/s", 1234.5,
			   NF_GATE_CMP_NONE, 0);
	r->cases[0].verdict = NF_VERDICT_PASSED;
	r->metrics = calloc(1, sizeof(nf_gate_metric));
	r->n_metrics = 1;
	r->metrics[0] = r->cases[0].metrics[0];
	return r;
}

static void test_escape(void)
{
	char *s = nf_escape_xml("a<b>&\"c'\x01\t\n\r\xef\xbf\xbe\xc3", 1);
	is_str(s, "a&lt;b&gt;&amp;&quot;c&apos;&#9;&#10;&#13;\xef\xbf\xbd", "XML attribute escaping");
	free(s);
	s = nf_escape_xml("x\ty\nz\x1b", 0);
	is_str(s, "x\ty\nz", "XML text keeps tab/newline, drops ESC");
	free(s);
	s = nf_escape_utf8("ok\xe2\x82\xac \xc0\xaf \xed\xa0\x80", 12);
	is_str(s, "ok\xe2\x82\xac \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
	       "UTF-8: euro kept, overlong and surrogate replaced");
	free(s);
	s = nf_escape_utf8("a\0b", 3);
	is_str(s, "a\xef\xbf\xbd" "b", "embedded NUL replaced");
	free(s);
	s = nf_escape_tap("a # b\\c\nd");
	is_str(s, "a \\# b\\\\c d", "TAP description escaping");
	free(s);
}

static void test_verdicts(void)
{
	nf_gate_results rs;
	nf_profile cpu = mkprofile("aa", "cpu-fp32", "cpu", NF_PREC_FP32, 0);
	nf_profile gpu = mkprofile("bb", "h100-fp16", "h100", NF_PREC_FP16, 1);
	nf_gate_result *r = NULL;

	nf_gate_results_init(&rs);
	is_int(nf_gate_results_verdict(&rs), NF_VERDICT_SKIPPED, "no gates: skipped, never passed");
	nf_gate_skipped(&r, &gpu, NF_GATE_CORRECTNESS, nf_gate_gpu_skip_reason());
	nf_gate_results_add(&rs, r);
	is_int(nf_gate_results_verdict(&rs), NF_VERDICT_SKIPPED, "only skipped gates: skipped");
	nf_gate_results_add(&rs, mk_correctness(&cpu, 0));
	is_int(nf_gate_results_verdict(&rs), NF_VERDICT_SKIPPED,
	       "passed + skipped: skipped (a gate that did not run is never passed)");
	is_int(nf_gate_results_profile_verdict(&rs, "aa", NULL), NF_VERDICT_PASSED,
	       "the profile whose gates all ran and passed: passed");
	nf_gate_results_add(&rs, mk_correctness(&cpu, 1));
	is_int(nf_gate_results_verdict(&rs), NF_VERDICT_FAILED, "any failure: failed");
	is_int(nf_gate_results_profile_verdict(&rs, "bb", NULL), NF_VERDICT_SKIPPED, "gpu profile skipped");
	is_int(nf_gate_results_profile_verdict(&rs, "aa", NULL), NF_VERDICT_FAILED, "cpu profile failed");
	is_str(rs.items[0]->precision, "fp16", "precision name copied from the profile");

	nf_gate_metric m;
	nf_gate_metric_set(&m, "x", "", NAN, NF_GATE_CMP_LE, 1.0);
	ok(!m.ok, "NaN never passes a bound");
	nf_gate_metric_set(&m, "x", "", 1.0, NF_GATE_CMP_LE, 1.0);
	ok(m.ok, "equal to a <= bound passes");
	nf_gate_metric_set(&m, "x", "", 0.89, NF_GATE_CMP_GE, 0.9);
	ok(!m.ok, "below a >= bound fails");
	nf_gate_results_release(&rs);
	nf_gate_results_release(&rs);
	nf_gate_result_free(NULL);
}

static void test_documents(const char *tmp)
{
	nf_gate_results rs;
	char id_a[65], id_b[65], id_c[65];
	hex_id(id_a, sizeof(id_a), 'a');
	hex_id(id_b, sizeof(id_b), 'b');
	hex_id(id_c, sizeof(id_c), 'c');
	nf_profile cpu = mkprofile(id_a, "cpu-int8-wo<&>", "cpu", NF_PREC_INT8_WO, 0);
	nf_profile cpu32 = mkprofile(id_c, "cpu-fp32", "cpu", NF_PREC_FP32, 0);
	nf_profile gpu = mkprofile(id_b, "h100-fp16", "h100", NF_PREC_FP16, 1);
	nf_report_meta meta = {.model = "stories260K", .recipe = "recipes/llama.yaml",
			       .generated_at = "2024-05-01T12:00:00Z"};
	nf_gate_result *r = NULL;
	char *json = NULL, *xml = NULL, *tap = NULL, *table = NULL;
	json_error_t err;

	nf_gate_results_init(&rs);
	nf_gate_results_add(&rs, mk_correctness(&cpu32, 0));
	nf_gate_results_add(&rs, mk_correctness(&cpu, 1));
	nf_gate_results_add(&rs, mk_perf(&cpu));
	nf_gate_skipped(&r, &gpu, NF_GATE_CORRECTNESS, "no GPU on this machine");
	nf_gate_results_add(&rs, r);
	nf_gate_skipped(&r, &gpu, NF_GATE_PERFORMANCE, "no GPU on this machine");
	nf_gate_results_add(&rs, r);

	/* JSON */
	is_int(nf_report_json(&json, &rs, &meta), 0, "gates.json built");
	json_t *root = json ? json_loads(json, 0, &err) : NULL;
	ok(root != NULL, "gates.json parses");
	is_int(json_integer_value(json_object_get(root, "schema_version")), NF_REPORT_SCHEMA_VERSION,
	       "schema_version recorded");
	check_valid(tmp, "hand.json", json, "json", -1,
		    "gates.json with failed, skipped and infinite values validates against its schema");
	is_str(json_string_value(json_object_get(root, "version")), "0.1.0", "tool version recorded");
	is_str(json_string_value(json_object_get(root, "verdict")), "failed", "overall verdict failed");
	is_str(json_string_value(json_object_get(root, "generated_at")), "2024-05-01T12:00:00Z", "pinned time");
	json_t *profiles = json_object_get(root, "profiles");
	is_int(json_array_size(profiles), 3, "three profiles (gates grouped by profile)");
	json_t *p1 = json_array_get(profiles, 1);
	is_str(json_string_value(json_object_get(p1, "name")), "cpu-int8-wo<&>", "profile name");
	is_str(json_string_value(json_object_get(p1, "verdict")), "failed", "profile verdict");
	is_str(json_string_value(json_object_get(p1, "precision")), "int8-wo", "profile precision");
	json_t *gates = json_object_get(p1, "gates");
	is_int(json_array_size(gates), 2, "int8 profile has correctness and performance");
	json_t *g0 = json_array_get(gates, 0);
	ok(strstr(json_string_value(json_object_get(g0, "reason")), "agreement 0.5 < 0.9") != NULL,
	   "failure reason kept");
	json_t *c1 = json_array_get(json_object_get(g0, "cases"), 1);
	is_int(json_integer_value(json_object_get(c1, "first_mismatch")), 2, "first mismatch recorded");
	is_str(json_string_value(json_object_get(c1, "prompt")), "bad\x01 byte \xef\xbf\xbd#x",
	       "prompt kept, invalid UTF-8 replaced");
	json_t *m1 = json_array_get(json_object_get(c1, "metrics"), 1);
	ok(json_is_null(json_object_get(m1, "value")), "infinite value written as null");
	is_str(json_string_value(json_object_get(m1, "comparison")), "<=", "comparison recorded");
	ok(json_real_value(json_object_get(m1, "threshold")) == 0.1, "threshold recorded");
	ok(json_is_false(json_object_get(m1, "ok")), "metric ok false");
	json_t *gm = json_array_get(json_object_get(json_array_get(gates, 1), "metrics"), 0);
	ok(json_is_null(json_object_get(gm, "threshold")), "unbounded metric has null threshold");
	ok(json_real_value(json_object_get(gm, "value")) == 1234.5, "measured value");
	json_t *p2 = json_array_get(profiles, 2);
	is_str(json_string_value(json_object_get(p2, "verdict")), "skipped", "gpu profile skipped");
	is_str(json_string_value(json_object_get(json_array_get(json_object_get(p2, "gates"), 0), "reason")),
	       "no GPU on this machine", "skip reason");
	json_t *sum = json_object_get(root, "summary");
	ok(json_integer_value(json_object_get(sum, "passed")) == 2 &&
	   json_integer_value(json_object_get(sum, "failed")) == 1 &&
	   json_integer_value(json_object_get(sum, "skipped")) == 2, "summary counts gates");
	json_decref(root);

	/* JUnit */
	is_int(nf_report_junit(&xml, &rs, &meta), 0, "junit.xml built");
	ok(xml && strncmp(xml, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites", 50) == 0, "XML prolog");
	is_int(count(xml, "<testsuite "), 3, "one testsuite per profile");
	is_int(count(xml, "<testcase "), 7, "a testcase per case, one per skipped gate");
	is_int(count(xml, "<failure "), 1, "one failure");
	is_int(count(xml, "<skipped message=\"no GPU on this machine\"/>"), 2, "two skipped");
	ok(strstr(xml, "<testsuites name=\"stories260K\" tests=\"7\" failures=\"1\" errors=\"0\" time=") != NULL,
	   "testsuites totals (no skipped=: Jenkins' schema has none there)");
	ok(strstr(xml, "name=\"cpu-int8-wo&lt;&amp;&gt;\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"0\"") != NULL,
	   "int8 suite totals, name escaped");
	ok(strstr(xml, "name=\"prompt 2: &quot;&lt;tag&gt; &amp; &apos;q&apos;&quot;\"") != NULL,
	   "testcase name escaped as an attribute");
	ok(strstr(xml, "<failure type=\"gate\" message=\"agreement = 0.5 (bound &gt;= 0.9); "
		       "rel_err_max = inf (bound &lt;= 0.1)\">") != NULL,
	   "failure message: every failed value with its bound");
	check_valid(tmp, "junit.xml", xml, "junit", -1, "junit.xml validates against the Jenkins JUnit schema");
	ok(strchr(xml, '\x01') == NULL, "control characters removed");
	ok(strstr(xml, "<property name=\"tool_version\" value=\"0.1.0\"/>") != NULL, "tool version property");

	/* TAP */
	is_int(nf_report_tap(&tap, &rs), 0, "gates.tap built");
	ok(tap && strncmp(tap, "TAP version 13\n1..7\n", 20) == 0, "TAP header and plan");
	is_int(count(tap, "\nnot ok "), 1, "one not ok");
	is_int(count(tap, "# SKIP no GPU on this machine\n"), 2, "skips are TAP SKIP directives");
	ok(strstr(tap, "not ok 4 - cpu-int8-wo<&> correctness: prompt 2: \"<tag> & 'q'\"\n") != NULL,
	   "failing test line");
	ok(strstr(tap, "ok 6 - h100-fp16 correctness # SKIP") != NULL, "skipped gate line");
	char parsed[256];
	if (tap_parse(parsed, sizeof(parsed), tmp, tap) < 0)
		skip("TAP::Parser: no perl or NF_SRC here");
	else
		is_str(parsed, "version=13 planned=7 run=7 passed=6 failed=1 skipped=2 parse_errors=0",
		       "TAP::Parser reads gates.tap: plan, counts, no parse errors");

	/* Table */
	is_int(nf_report_table(&table, &rs), 0, "table built");
	ok(table && strstr(table, "profile") && strstr(table, "threshold") && strstr(table, "verdict"),
	   "table header");
	ok(table && strstr(table, "agreement_min 0.5") && strstr(table, ">= 0.9") && strstr(table, "FAILED"),
	   "table row with measured, threshold and verdict");
	ok(table && strstr(table, "no GPU on this machine") && strstr(table, "skipped"), "skipped row");
	ok(table && strstr(table, "overall: failed\n"), "overall line");
	if (table)
		diag("table:\n%s", table);

	/* Files */
	char *out = nf_path_join(tmp, "out");
	is_int(nf_report_write(out, &rs, &meta), 0, "reports written");
	char *p = nf_strdup_printf("%s/reports/gates.json", out);
	char *text = NULL;
	size_t len = 0;
	ok(nf_fs_read_file(&text, &len, p, 1 << 20) == 0 && strcmp(text, json) == 0, "gates.json on disk");
	free(text);
	free(p);
	p = nf_strdup_printf("%s/reports/junit.xml", out);
	if (system("command -v xmllint >/dev/null 2>&1") == 0) {
		char *cmd = nf_strdup_printf("xmllint --noout '%s'", p);
		is_int(system(cmd), 0, "junit.xml is well-formed (xmllint)");
		free(cmd);
	} else {
		skip("xmllint not installed");
	}
	free(p);
	p = nf_strdup_printf("%s/reports", out);
	DIR *d = opendir(p);
	int files = 0, temps = 0;
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		files++;
		if (strcmp(e->d_name, "gates.json") && strcmp(e->d_name, "junit.xml") && strcmp(e->d_name, "gates.tap") &&
		    strcmp(e->d_name, "summary.md") && strcmp(e->d_name, "chart.svg"))
			temps++;
	}
	if (d)
		closedir(d);
	ok(files == 5 && temps == 0, "exactly the five reports, no temp files left");
	free(p);
	free(out);

	if (getenv("NF_TEST_DUMP"))
		printf("%s\n%s\n", xml, tap);
	free(json);
	free(xml);
	free(tap);
	free(table);
	nf_gate_results_release(&rs);
}

int main(void)
{
	char tmpl[] = "/tmp/nf_test_report.XXXXXX";
	char *tmp = mkdtemp(tmpl);

	test_escape();
	test_verdicts();
	if (tmp)
		test_documents(tmp);
	else
		ok(0, "mkdtemp");
	if (tmp)
		nf_fs_remove_tree(tmp);
	return done_testing();
}
