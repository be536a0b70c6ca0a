/*
 * report_md.c - summary.md: the build's gates in Markdown, for people (see
 * report.h).  One table with a row per profile and a column per headline
 * metric that some profile has, then the failed and skipped cases with
 * their reasons.  Every name and reason comes from recipes or model output,
 * so each is escaped: a "|" would split a table cell, "<" or "&" would be
 * read as HTML by GitHub and GitLab.
 */
#include "factory/report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "factory/escape.h"
#include "factory/report_profiles.h"
#include "factory/report_text.h"
#include "util/error.h"
#include "util/version.h"
#include "util/banned.h"

/* A column of the table: the first of `metrics` that any profile has (so a
 * column never mixes two metrics), and beside each value the profile's
 * `ratio` to the fp32 engine when it has one. */
typedef struct md_column {
	const char *header;
	const char *metrics[3]; /* NULL-terminated */
	const char *ratio;      /* NULL: none */
} md_column;

static const md_column columns[] = {
	{"engine size (MiB)", {"engine_mib", NULL}, "size_ratio"},
	{"decode tok/s", {"decode_tokens_per_s", NULL}, "decode_speedup"},
	{"prefill tok/s", {"prefill_tokens_per_s", NULL}, "prefill_speedup"},
	{"TTFT (ms)", {"ttft_ms", NULL}, "ttft_ratio"},
	{"peak memory (MiB)", {"engine_peak_rss_mib", NULL}, "memory_ratio"},
	{"ppl ratio", {"ppl_ratio", NULL}, NULL},
	{"KL (nats)", {"kl_mean", NULL}, NULL},
	{"top-1 agreement", {"top1_agreement", NULL}, NULL},
	/* agreement_min is the gate's summary; a hand-made result may carry
	 * only its prompts' agreement. */
	{"greedy agreement", {"agreement_min", "agreement", NULL}, NULL},
};
#define N_COLUMNS (sizeof(columns) / sizeof(columns[0]))

#define MD_SIG 4 /* significant digits of a value in the table */

/* Write s (NULL = "") as Markdown inline text: one line, valid UTF-8,
 * Markdown punctuation backslash-escaped, HTML's < > & as entities. */
static void md_put(nf_report_text *t, const char *s)
{
	char *u = nf_escape_utf8(s ? s : "", s ? strlen(s) : 0);
	if (!u) {
		t->bad = true;
		return;
	}
	for (const unsigned char *p = (const unsigned char *)u; *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			fputc(' ', t->f);
		else if (*p == '<')
			fputs("&lt;", t->f);
		else if (*p == '>')
			fputs("&gt;", t->f);
		else if (*p == '&')
			fputs("&amp;", t->f);
		else if (strchr("\\`*_[]|#", *p)) {
			fputc('\\', t->f);
			fputc(*p, t->f);
		} else {
			fputc(*p, t->f);
		}
	}
	free(u);
}

/* Which metric each column shows in this build; NULL: the column is left out. */
static void choose_columns(const char *chosen[N_COLUMNS], const nf_gate_results *rs)
{
	for (size_t c = 0; c < N_COLUMNS; c++)
		chosen[c] = nf_report_first_metric_present(rs, columns[c].metrics);
}

static void put_num(nf_report_text *t, double v)
{
	char num[NF_REPORT_NUM_MAX];
	nf_report_num_sig(num, v, MD_SIG);
	fputs(num, t->f);
}

/* One cell: the value, and "(2.9x)" its ratio to fp32 when measured; an
 * em dash where this profile lacks what another has. */
static void put_cell(nf_report_text *t, const nf_gate_results *rs, const nf_gate_result *p,
		     const char *metric, const char *ratio_metric)
{
	const nf_gate_metric *m = nf_report_profile_metric(rs, p, metric);
	const nf_gate_metric *ratio = ratio_metric ? nf_report_profile_metric(rs, p, ratio_metric) : NULL;
	if (!m) {
		fputs(" \xe2\x80\x94 |", t->f);
		return;
	}
	fputc(' ', t->f);
	put_num(t, m->value);
	if (ratio) {
		fputs(" (", t->f);
		put_num(t, ratio->value);
		fputs(isfinite(ratio->value) ? "x)" : ")", t->f);
	}
	fputs(" |", t->f);
}

static void put_header(nf_report_text *t, const nf_gate_results *rs, const nf_report_meta *meta)
{
	size_t counts[NF_REPORT_VERDICTS];
	nf_report_gate_counts(counts, rs);
	fputs("# Gates", t->f);
	if (meta && meta->model) {
		fputs(": ", t->f);
		md_put(t, meta->model);
	}
	fprintf(t->f, "\n\nVerdict: **%s** (%zu gates: %zu passed, %zu failed, %zu skipped), nimfactory %s\n\n",
		nf_verdict_name(nf_gate_results_verdict(rs)), rs->n, counts[NF_VERDICT_PASSED],
		counts[NF_VERDICT_FAILED], counts[NF_VERDICT_SKIPPED], NF_VERSION);
}

static void put_table(nf_report_text *t, const nf_gate_results *rs, const nf_report_profile *ps,
		      size_t n)
{
	const char *chosen[N_COLUMNS];
	bool ratios = false;

	choose_columns(chosen, rs);
	fputs("| profile | device | precision | verdict |", t->f);
	for (size_t c = 0; c < N_COLUMNS; c++)
		if (chosen[c])
			fprintf(t->f, " %s |", columns[c].header);
	fputs("\n| --- | --- | --- | --- |", t->f);
	for (size_t c = 0; c < N_COLUMNS; c++)
		if (chosen[c])
			fputs(" ---: |", t->f);
	fputc('\n', t->f);
	for (size_t i = 0; i < n; i++) {
		const nf_gate_result *p = ps[i].first;
		const char *cells[] = {p->profile_name, p->device, p->precision, nf_verdict_name(ps[i].verdict)};
		fputc('|', t->f);
		for (size_t k = 0; k < sizeof(cells) / sizeof(cells[0]); k++) {
			fputc(' ', t->f);
			md_put(t, cells[k]);
			fputs(" |", t->f);
		}
		for (size_t c = 0; c < N_COLUMNS; c++) {
			if (!chosen[c])
				continue;
			put_cell(t, rs, p, chosen[c], columns[c].ratio);
			ratios |= columns[c].ratio && nf_report_profile_metric(rs, p, columns[c].ratio);
		}
		fputc('\n', t->f);
	}
	if (ratios)
		fputs("\nIn parentheses: the ratio to the fp32 engine, measured in the same run.\n", t->f);
}

/* "value (bound >= threshold)" of each failed bound, for a case without a reason. */
static void put_failed_bounds(nf_report_text *t, const nf_gate_metric *m, size_t nm)
{
	size_t failed = 0;
	for (size_t i = 0; i < nm; i++) {
		if (m[i].cmp == NF_GATE_CMP_NONE || m[i].ok)
			continue;
		fputs(failed++ ? "; " : "", t->f);
		md_put(t, m[i].name);
		fputs(" = ", t->f);
		put_num(t, m[i].value);
		fprintf(t->f, " (bound %s ", m[i].cmp == NF_GATE_CMP_GE ? "&gt;=" : "&lt;=");
		put_num(t, m[i].threshold);
		fputc(')', t->f);
	}
	if (!failed)
		fputs("no reason recorded", t->f);
}

/* "- **profile** gate, case: verdict: reason" */
static void put_problem(nf_report_text *t, const nf_gate_result *r, const nf_gate_case *c,
			nf_verdict v, const char *reason)
{
	fputs("- **", t->f);
	md_put(t, r->profile_name);
	fprintf(t->f, "** %s", nf_gate_kind_name(r->kind));
	if (c) {
		fputs(", ", t->f);
		md_put(t, c->name);
	}
	fprintf(t->f, ": %s: ", nf_verdict_name(v));
	if (reason)
		md_put(t, reason);
	else if (c)
		put_failed_bounds(t, c->metrics, c->n_metrics);
	else
		put_failed_bounds(t, r->metrics, r->n_metrics);
	fputc('\n', t->f);
}

/* The failed and skipped cases; a skipped gate is one line, its reason
 * being the same for every case. */
static void put_problems(nf_report_text *t, const nf_gate_results *rs)
{
	size_t lines = 0;
	fputs("\n## Failed and skipped\n\n", t->f);
	for (size_t i = 0; i < rs->n; i++) {
		const nf_gate_result *r = rs->items[i];
		if (r->verdict == NF_VERDICT_SKIPPED || (r->n_cases == 0 && r->verdict == NF_VERDICT_FAILED)) {
			put_problem(t, r, NULL, r->verdict, r->reason);
			lines++;
			continue;
		}
		for (size_t k = 0; k < r->n_cases; k++) {
			const nf_gate_case *c = &r->cases[k];
			if (c->verdict != NF_VERDICT_FAILED && c->verdict != NF_VERDICT_SKIPPED)
				continue;
			put_problem(t, r, c, c->verdict, c->reason);
			lines++;
		}
	}
	if (!lines)
		fputs("No case failed or was skipped.\n", t->f);
}

int nf_report_markdown(char **out, const nf_gate_results *rs, const nf_report_meta *meta)
{
	nf_report_text t;
	nf_report_profile *ps = NULL;
	size_t n = 0;
	int rc;

	*out = NULL;
	if ((rc = nf_report_profiles(&ps, &n, rs)) < 0)
		return rc;
	if ((rc = nf_report_text_open(&t)) < 0)
		goto done;
	put_header(&t, rs, meta);
	if (n)
		put_table(&t, rs, ps, n);
	else
		fputs("No profile was gated.\n", t.f);
	put_problems(&t, rs);
	rc = nf_report_text_close(&t, out);
done:
	free(ps);
	return rc;
}
