/* report.c - gates.json, junit.xml, gates.tap and the terminal table (see report.h). */
#include "factory/report.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "factory/escape.h"
#include "factory/report_profiles.h"
#include "factory/report_text.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/version.h"
#include "util/banned.h"

#define REPORT_TOOL "nimfactory"

static void now_iso(char *buf, size_t size)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	if (strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		buf[0] = '\0';
}

/* ---- JSON --------------------------------------------------------------- */

static json_t *jstr(const char *s)
{
	char *c = nf_escape_utf8(s, s ? strlen(s) : 0);
	json_t *j = c ? json_string(c) : NULL;
	free(c);
	return j;
}

static json_t *jnum(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

/* Set key to v, counting a failed allocation in *bad. */
static void jset(json_t *o, const char *key, json_t *v, int *bad)
{
	if (!o || !v || json_object_set_new(o, key, v) != 0)
		(*bad)++;
}

static json_t *metrics_json(const nf_gate_metric *m, size_t n, int *bad)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++) {
		json_t *o = json_object();
		jset(o, "name", jstr(m[i].name), bad);
		jset(o, "value", jnum(m[i].value), bad);
		jset(o, "unit", jstr(m[i].unit), bad);
		if (m[i].cmp != NF_GATE_CMP_NONE) {
			jset(o, "comparison", jstr(nf_gate_cmp_symbol(m[i].cmp)), bad);
			jset(o, "threshold", jnum(m[i].threshold), bad);
		} else {
			jset(o, "comparison", json_null(), bad);
			jset(o, "threshold", json_null(), bad);
		}
		jset(o, "ok", json_boolean(m[i].ok), bad);
		if (!o || json_array_append_new(a, o) != 0)
			(*bad)++;
	}
	if (!a)
		(*bad)++;
	return a;
}

static json_t *gate_json(const nf_gate_result *r, int *bad)
{
	json_t *g = json_object(), *cases = json_array();
	jset(g, "gate", jstr(nf_gate_kind_name(r->kind)), bad);
	jset(g, "verdict", jstr(nf_verdict_name(r->verdict)), bad);
	jset(g, "reason", r->reason ? jstr(r->reason) : json_null(), bad);
	jset(g, "seconds", jnum(r->seconds), bad);
	jset(g, "metrics", metrics_json(r->metrics, r->n_metrics, bad), bad);
	for (size_t i = 0; cases && i < r->n_cases; i++) {
		const nf_gate_case *c = &r->cases[i];
		json_t *o = json_object();
		jset(o, "name", jstr(c->name), bad);
		jset(o, "prompt", c->prompt ? jstr(c->prompt) : json_null(), bad);
		jset(o, "verdict", jstr(nf_verdict_name(c->verdict)), bad);
		jset(o, "reason", c->reason ? jstr(c->reason) : json_null(), bad);
		jset(o, "seconds", jnum(c->seconds), bad);
		if (r->kind == NF_GATE_CORRECTNESS) {
			jset(o, "prompt_tokens", json_integer(c->prompt_tokens), bad);
			jset(o, "positions", json_integer(c->positions), bad);
			jset(o, "first_mismatch", c->first_mismatch >= 0 ? json_integer(c->first_mismatch)
									 : json_null(), bad);
		}
		jset(o, "metrics", metrics_json(c->metrics, c->n_metrics, bad), bad);
		if (!o || json_array_append_new(cases, o) != 0)
			(*bad)++;
	}
	jset(g, "cases", cases, bad);
	return g;
}

/* One profile: its names, its verdict over its gates, and those gates. */
static json_t *profile_json(const nf_gate_results *rs, const nf_gate_result *r, int *bad)
{
	json_t *p = json_object(), *gates = json_array();
	jset(p, "id", jstr(r->profile_id), bad);
	jset(p, "name", jstr(r->profile_name), bad);
	jset(p, "device", jstr(r->device), bad);
	jset(p, "precision", jstr(r->precision), bad);
	jset(p, "verdict", jstr(nf_verdict_name(nf_gate_results_profile_verdict(rs, r->profile_id,
										    r->profile_name))), bad);
	for (size_t j = 0; gates && j < rs->n; j++) {
		if (!nf_report_same_profile(rs->items[j], r))
			continue;
		json_t *g = gate_json(rs->items[j], bad);
		if (!g || json_array_append_new(gates, g) != 0)
			(*bad)++;
	}
	jset(p, "gates", gates, bad);
	return p;
}

static json_t *summary_json(const nf_gate_results *rs, int *bad)
{
	json_t *summary = json_object();
	size_t counts[NF_REPORT_VERDICTS];
	nf_report_gate_counts(counts, rs);
	jset(summary, "gates", json_integer((json_int_t)rs->n), bad);
	jset(summary, "passed", json_integer((json_int_t)counts[NF_VERDICT_PASSED]), bad);
	jset(summary, "failed", json_integer((json_int_t)counts[NF_VERDICT_FAILED]), bad);
	jset(summary, "skipped", json_integer((json_int_t)counts[NF_VERDICT_SKIPPED]), bad);
	return summary;
}

int nf_report_json(char **out, const nf_gate_results *rs, const nf_report_meta *meta)
{
	json_t *root = json_object(), *profiles = json_array();
	char when[64];
	int bad = 0, rc = 0;

	*out = NULL;
	if (meta && meta->generated_at)
		snprintf(when, sizeof(when), "%s", meta->generated_at);
	else
		now_iso(when, sizeof(when));
	jset(root, "schema_version", json_integer(NF_REPORT_SCHEMA_VERSION), &bad);
	jset(root, "tool", jstr(REPORT_TOOL), &bad);
	jset(root, "version", jstr(NF_VERSION), &bad);
	jset(root, "generated_at", jstr(when), &bad);
	if (meta && meta->model)
		jset(root, "model", jstr(meta->model), &bad);
	if (meta && meta->recipe)
		jset(root, "recipe", jstr(meta->recipe), &bad);
	jset(root, "verdict", jstr(nf_verdict_name(nf_gate_results_verdict(rs))), &bad);
	if (meta && meta->skipped_gates)
		jset(root, "allow_skipped_gates", json_boolean(meta->allow_skipped_gates), &bad);
	jset(root, "summary", summary_json(rs, &bad), &bad);
	for (size_t i = 0; profiles && i < rs->n; i++) {
		if (!nf_report_first_of_profile(rs, i))
			continue;
		json_t *p = profile_json(rs, rs->items[i], &bad);
		if (!p || json_array_append_new(profiles, p) != 0)
			bad++;
	}
	jset(root, "profiles", profiles, &bad);
	if (bad) {
		rc = nf_error_set(NF_ENOMEM, "out of memory building gates.json");
		goto done;
	}
	*out = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
	if (!*out)
		rc = nf_error_set(NF_ENOMEM, "out of memory writing gates.json");
done:
	json_decref(root);
	return rc;
}

static void metric_line(nf_report_text *s, const nf_gate_metric *m, int attr)
{
	char line[256];
	const char *unit = strcmp(m->unit, "ratio") == 0 ? "" : m->unit;
	if (m->cmp != NF_GATE_CMP_NONE)
		snprintf(line, sizeof(line), "%s = %.6g%s%s (threshold %s %.6g): %s", m->name, m->value,
			 unit[0] ? " " : "", unit, nf_gate_cmp_symbol(m->cmp), m->threshold,
			 m->ok ? "ok" : "FAILED");
	else
		snprintf(line, sizeof(line), "%s = %.6g%s%s", m->name, m->value, unit[0] ? " " : "", unit);
	nf_report_text_xml(s, line, attr);
}

/* "name = value unit (bound >= threshold unit)": what a CI view shows of a
 * failed bound, so the number and its limit are read without opening the
 * report. */
static void bound_text(char *buf, size_t size, const nf_gate_metric *m)
{
	const char *unit = strcmp(m->unit, "ratio") == 0 ? "" : m->unit;
	const char *sep = unit[0] ? " " : "";
	snprintf(buf, size, "%s = %.6g%s%s (bound %s %.6g%s%s)", m->name, m->value, sep, unit,
		 nf_gate_cmp_symbol(m->cmp), m->threshold, sep, unit);
}

/* The failure message attribute: every failed bound of the case, or the
 * reason when no bound failed (e.g. nothing could be compared). */
static void failure_message(nf_report_text *s, const nf_gate_metric *m, size_t nm, const char *reason)
{
	size_t failed = 0;
	for (size_t i = 0; i < nm; i++) {
		char line[256];
		if (m[i].cmp == NF_GATE_CMP_NONE || m[i].ok)
			continue;
		bound_text(line, sizeof(line), &m[i]);
		if (failed++)
			fputs("; ", s->f);
		nf_report_text_xml(s, line, 1);
	}
	if (!failed)
		nf_report_text_xml(s, reason ? reason : "failed", 1);
}

/* JUnit times are plain decimals (Surefire's pattern): no sign, no NaN. */
static double junit_seconds(double s)
{
	return isfinite(s) && s > 0 ? s : 0.0;
}

/* time="..." as JUnit readers parse it: a plain decimal whatever the locale. */
static void junit_time(nf_report_text *s, double seconds)
{
	char num[NF_REPORT_NUM_MAX];
	nf_report_num_fixed(num, junit_seconds(seconds), 3);
	fprintf(s->f, " time=\"%s\"", num);
}

/* <skipped> or <failure> of a case with verdict v; nothing when it passed. */
static void junit_outcome(nf_report_text *s, nf_verdict v, const nf_gate_metric *m, size_t nm,
			  const char *reason)
{
	if (v == NF_VERDICT_SKIPPED) {
		fputs("      <skipped message=\"", s->f);
		nf_report_text_xml(s, reason ? reason : "skipped", 1);
		fputs("\"/>\n", s->f);
	} else if (v == NF_VERDICT_FAILED) {
		fputs("      <failure type=\"gate\" message=\"", s->f);
		failure_message(s, m, nm, reason);
		fputs("\">", s->f);
		if (reason) {
			nf_report_text_xml(s, reason, 0);
			fputc('\n', s->f);
		}
		for (size_t i = 0; i < nm; i++) {
			metric_line(s, &m[i], 0);
			fputc('\n', s->f);
		}
		fputs("</failure>\n", s->f);
	}
}

/* <system-out>: the prompt and every metric, for cases that ran. */
static void junit_output(nf_report_text *s, const nf_gate_case *c, const nf_gate_metric *m, size_t nm)
{
	fputs("      <system-out>", s->f);
	if (c && c->prompt) {
		fputs("prompt: ", s->f);
		nf_report_text_xml(s, c->prompt, 0);
		fputc('\n', s->f);
	}
	for (size_t i = 0; i < nm; i++) {
		metric_line(s, &m[i], 0);
		fputc('\n', s->f);
	}
	fputs("</system-out>\n", s->f);
}

/* One <testcase>; c may be NULL for a gate without cases. */
static void junit_case(nf_report_text *s, const nf_gate_result *r, const nf_gate_case *c)
{
	nf_verdict v = c ? c->verdict : r->verdict;
	const char *reason = c && c->reason ? c->reason : r->reason;
	const nf_gate_metric *m = c ? c->metrics : r->metrics;
	size_t nm = c ? c->n_metrics : r->n_metrics;

	/* A skipped gate skips all its cases. */
	if (r->verdict == NF_VERDICT_SKIPPED) {
		v = NF_VERDICT_SKIPPED;
		reason = r->reason;
	}
	fputs("    <testcase classname=\"", s->f);
	nf_report_text_xml(s, r->profile_name, 1);
	fputc('.', s->f);
	nf_report_text_xml(s, nf_gate_kind_name(r->kind), 1);
	fputs("\" name=\"", s->f);
	nf_report_text_xml(s, c ? c->name : nf_gate_kind_name(r->kind), 1);
	fputc('"', s->f);
	junit_time(s, c ? c->seconds : r->seconds);
	fputs(">\n", s->f);
	junit_outcome(s, v, m, nm, reason);
	if (v != NF_VERDICT_SKIPPED && nm)
		junit_output(s, c, m, nm);
	fputs("    </testcase>\n", s->f);
}

/* Count the testcases a gate yields and how many failed / were skipped. */
static void gate_counts(const nf_gate_result *r, size_t *tests, size_t *failed, size_t *skipped)
{
	if (r->n_cases == 0) {
		(*tests)++;
		*failed += r->verdict == NF_VERDICT_FAILED;
		*skipped += r->verdict == NF_VERDICT_SKIPPED;
		return;
	}
	for (size_t i = 0; i < r->n_cases; i++) {
		nf_verdict v = r->verdict == NF_VERDICT_SKIPPED ? NF_VERDICT_SKIPPED : r->cases[i].verdict;
		(*tests)++;
		*failed += v == NF_VERDICT_FAILED;
		*skipped += v == NF_VERDICT_SKIPPED;
	}
}

/* One <testsuite>: the profile of r, its properties and every case of its gates. */
static void junit_suite(nf_report_text *s, const nf_gate_results *rs, const nf_gate_result *r,
			const char *when)
{
	size_t t = 0, f = 0, sk = 0;
	double secs = 0;
	const char *props[][2] = {{"profile_id", r->profile_id}, {"device", r->device},
				  {"precision", r->precision}, {"tool_version", NF_VERSION}};

	for (size_t j = 0; j < rs->n; j++) {
		if (nf_report_same_profile(rs->items[j], r)) {
			gate_counts(rs->items[j], &t, &f, &sk);
			secs += junit_seconds(rs->items[j]->seconds);
		}
	}
	fputs("  <testsuite name=\"", s->f);
	nf_report_text_xml(s, r->profile_name, 1);
	fprintf(s->f, "\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\"", t, f, sk);
	junit_time(s, secs);
	fputs(" timestamp=\"", s->f);
	nf_report_text_xml(s, when, 1);
	fputs("\">\n    <properties>\n", s->f);
	for (size_t k = 0; k < sizeof(props) / sizeof(props[0]); k++) {
		fputs("      <property name=\"", s->f);
		nf_report_text_xml(s, props[k][0], 1);
		fputs("\" value=\"", s->f);
		nf_report_text_xml(s, props[k][1], 1);
		fputs("\"/>\n", s->f);
	}
	fputs("    </properties>\n", s->f);
	for (size_t j = 0; j < rs->n; j++) {
		const nf_gate_result *g = rs->items[j];
		if (!nf_report_same_profile(g, r))
			continue;
		if (g->n_cases == 0)
			junit_case(s, g, NULL);
		for (size_t k = 0; k < g->n_cases; k++)
			junit_case(s, g, &g->cases[k]);
	}
	fputs("  </testsuite>\n", s->f);
}

int nf_report_junit(char **out, const nf_gate_results *rs, const nf_report_meta *meta)
{
	nf_report_text s;
	int rc;
	size_t tests = 0, failed = 0, skipped = 0;
	double secs = 0;
	char when[64];

	*out = NULL;
	if ((rc = nf_report_text_open(&s)) < 0)
		return rc;
	if (meta && meta->generated_at)
		snprintf(when, sizeof(when), "%s", meta->generated_at);
	else
		now_iso(when, sizeof(when));
	for (size_t i = 0; i < rs->n; i++) {
		gate_counts(rs->items[i], &tests, &failed, &skipped);
		secs += junit_seconds(rs->items[i]->seconds);
	}
	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"", s.f);
	nf_report_text_xml(&s, meta && meta->model ? meta->model : REPORT_TOOL " gates", 1);
	/* No skipped= here: Jenkins' schema has it on <testsuite> only. */
	fprintf(s.f, "\" tests=\"%zu\" failures=\"%zu\" errors=\"0\"", tests, failed);
	junit_time(&s, secs);
	fputs(">\n", s.f);
	for (size_t i = 0; i < rs->n; i++)
		if (nf_report_first_of_profile(rs, i))
			junit_suite(&s, rs, rs->items[i], when);
	fputs("</testsuites>\n", s.f);
	return nf_report_text_close(&s, out);
}

/* ---- TAP ---------------------------------------------------------------- */

static void tap_put(nf_report_text *s, const char *text)
{
	char *e = nf_escape_tap(text);
	if (!e) {
		s->bad = true;
		return;
	}
	fputs(e, s->f);
	free(e);
}

static void tap_line(nf_report_text *s, size_t n, const nf_gate_result *r, const nf_gate_case *c)
{
	nf_verdict v = r->verdict == NF_VERDICT_SKIPPED ? NF_VERDICT_SKIPPED : c ? c->verdict : r->verdict;
	const char *reason = r->verdict == NF_VERDICT_SKIPPED ? r->reason
			     : c && c->reason ? c->reason : r->reason;
	const nf_gate_metric *m = c ? c->metrics : r->metrics;
	size_t nm = c ? c->n_metrics : r->n_metrics;

	fprintf(s->f, "%s %zu - ", v == NF_VERDICT_FAILED ? "not ok" : "ok", n);
	tap_put(s, r->profile_name);
	fputc(' ', s->f);
	tap_put(s, nf_gate_kind_name(r->kind));
	if (c) {
		fputs(": ", s->f);
		tap_put(s, c->name);
	}
	if (v == NF_VERDICT_SKIPPED) {
		fputs(" # SKIP ", s->f);
		tap_put(s, reason ? reason : "skipped");
	}
	fputc('\n', s->f);
	if (v == NF_VERDICT_FAILED && reason) {
		fputs("# ", s->f);
		tap_put(s, reason);
		fputc('\n', s->f);
	}
	for (size_t i = 0; v != NF_VERDICT_SKIPPED && i < nm; i++) {
		char line[256];
		if (m[i].cmp != NF_GATE_CMP_NONE)
			snprintf(line, sizeof(line), "%s = %.6g (threshold %s %.6g)", m[i].name, m[i].value,
				 nf_gate_cmp_symbol(m[i].cmp), m[i].threshold);
		else
			snprintf(line, sizeof(line), "%s = %.6g", m[i].name, m[i].value);
		fputs("#   ", s->f);
		tap_put(s, line);
		fputc('\n', s->f);
	}
}

int nf_report_tap(char **out, const nf_gate_results *rs)
{
	nf_report_text s;
	int rc;
	size_t tests = 0, f = 0, sk = 0, n = 0;

	*out = NULL;
	if ((rc = nf_report_text_open(&s)) < 0)
		return rc;
	for (size_t i = 0; i < rs->n; i++)
		gate_counts(rs->items[i], &tests, &f, &sk);
	fprintf(s.f, "TAP version 13\n1..%zu\n", tests);
	for (size_t i = 0; i < rs->n; i++) {
		const nf_gate_result *r = rs->items[i];
		if (r->n_cases == 0)
			tap_line(&s, ++n, r, NULL);
		for (size_t k = 0; k < r->n_cases; k++)
			tap_line(&s, ++n, r, &r->cases[k]);
	}
	return nf_report_text_close(&s, out);
}

/* ---- files -------------------------------------------------------------- */

static int write_one(const char *dir, const char *name, const char *text)
{
	char *path = nf_path_join(dir, name);
	int rc;
	if (!path)
		return nf_error_set(NF_ENOMEM, "out of memory");
	rc = nf_fs_write_atomic(path, text, strlen(text), 0644);
	if (rc < 0)
		nf_error_wrap(rc, "writing %s", path);
	free(path);
	return rc;
}

int nf_report_write(const char *out_dir, const nf_gate_results *rs, const nf_report_meta *meta)
{
	char *dir = NULL, *json = NULL, *xml = NULL, *tap = NULL, *md = NULL, *svg = NULL;
	int rc;

	dir = nf_path_join(out_dir, "reports");
	if (!dir) {
		rc = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if ((rc = nf_fs_mkdir_p(dir, 0755)) < 0)
		goto done;
	if ((rc = nf_report_json(&json, rs, meta)) < 0 || (rc = nf_report_junit(&xml, rs, meta)) < 0 ||
	    (rc = nf_report_tap(&tap, rs)) < 0 || (rc = nf_report_markdown(&md, rs, meta)) < 0 ||
	    (rc = nf_report_svg(&svg, rs, meta)) < 0)
		goto done;
	if ((rc = write_one(dir, "gates.json", json)) < 0 || (rc = write_one(dir, "junit.xml", xml)) < 0 ||
	    (rc = write_one(dir, "gates.tap", tap)) < 0 || (rc = write_one(dir, "summary.md", md)) < 0 ||
	    (rc = write_one(dir, "chart.svg", svg)) < 0)
		goto done;
done:
	free(dir);
	free(json);
	free(xml);
	free(tap);
	free(md);
	free(svg);
	return rc;
}

/* ---- the terminal table ------------------------------------------------- */

/* A number for people: integers when large, 4 significant digits otherwise. */
static void human_num(char *buf, size_t size, double v)
{
	if (isfinite(v) && fabs(v) >= 1e4 && fabs(v) < 1e9)
		snprintf(buf, size, "%.0f", v);
	else
		snprintf(buf, size, "%.4g", v);
}

/* Fit a (sanitised, one-line) cell into w columns, by bytes. */
static void cell(char *dst, size_t size, const char *src, size_t w)
{
	char *clean = nf_escape_tap(src ? src : "");
	size_t n = clean ? strlen(clean) : 0;
	if (w >= size)
		w = size - 1;
	if (n > w) {
		n = w;
		while (n > 0 && ((unsigned char)clean[n] & 0xC0) == 0x80)
			n--;
	}
	if (n)
		memcpy(dst, clean, n);
	dst[n] = '\0';
	free(clean);
}

int nf_report_table(char **out, const nf_gate_results *rs)
{
	nf_report_text s;
	int rc;

	*out = NULL;
	if ((rc = nf_report_text_open(&s)) < 0)
		return rc;
	fprintf(s.f, "%-24s %-12s %-40s %-14s %s\n", "profile", "gate", "measured", "threshold", "verdict");
	for (size_t i = 0; i < rs->n; i++) {
		const nf_gate_result *r = rs->items[i];
		char prof[64], meas[64], thr[64];
		cell(prof, sizeof(prof), r->profile_name, 24);
		if (r->verdict == NF_VERDICT_SKIPPED || r->n_metrics == 0) {
			cell(meas, sizeof(meas), r->reason ? r->reason : "-", 40);
			fprintf(s.f, "%-24s %-12s %-40s %-14s %s\n", prof, nf_gate_kind_name(r->kind), meas,
				"-", nf_verdict_name(r->verdict));
			continue;
		}
		for (size_t k = 0; k < r->n_metrics; k++) {
			const nf_gate_metric *m = &r->metrics[k];
			char tmp[128], num[48];
			bool unit = m->unit[0] && strcmp(m->unit, "ratio") != 0;
			human_num(num, sizeof(num), m->value);
			snprintf(tmp, sizeof(tmp), "%s %s%s%s", m->name, num, unit ? " " : "", unit ? m->unit : "");
			cell(meas, sizeof(meas), tmp, 40);
			human_num(num, sizeof(num), m->threshold);
			if (m->cmp != NF_GATE_CMP_NONE)
				snprintf(thr, sizeof(thr), "%s %s", nf_gate_cmp_symbol(m->cmp), num);
			else
				snprintf(thr, sizeof(thr), "-");
			fprintf(s.f, "%-24s %-12s %-40s %-14s %s\n", k ? "" : prof,
				k ? "" : nf_gate_kind_name(r->kind), meas, thr,
				m->cmp == NF_GATE_CMP_NONE ? "(info)" : m->ok ? "passed" : "FAILED");
		}
	}
	fprintf(s.f, "overall: %s\n", nf_verdict_name(nf_gate_results_verdict(rs)));
	return nf_report_text_close(&s, out);
}

int nf_report_print_table(FILE *f, const nf_gate_results *rs)
{
	char *t = NULL;
	int rc = nf_report_table(&t, rs);
	if (rc < 0)
		return rc;
	fputs(t, f);
	fflush(f);
	free(t);
	return 0;
}
