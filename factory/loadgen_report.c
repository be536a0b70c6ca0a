/*
 * loadgen_report.c - a run's figures, and a sweep as a human table, JSON and
 * Markdown (see loadgen_report.h; the SVG is loadgen_svg.c).
 */
#include "factory/loadgen_report.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "factory/report_text.h"
#include "util/error.h"
#include "util/version.h"
#include "util/banned.h"

double nf_lg_tpot_ms(const nf_lg_result *r)
{
	if (r->output_tokens < 2)
		return 0;
	return (r->e2e - r->ttft) * 1e3 / (double)(r->output_tokens - 1);
}

/* The latency samples of the completed requests, in ms. */
typedef struct latencies {
	nf_lg_samples ttft, tpot, itl, e2e;
} latencies;

static int collect(latencies *l, nf_lg_figures *f, const nf_lg_run *run, const nf_lg_slo *slo)
{
	int err = 0;
	for (size_t i = 0; i < run->n && !err; i++) {
		const nf_lg_result *r = &run->results[i];
		double tpot = nf_lg_tpot_ms(r);
		if (!r->ok) {
			if (!f->first_error[0])
				snprintf(f->first_error, sizeof f->first_error, "%s", r->error ? r->error : "failed");
			f->failed++;
			continue;
		}
		f->completed++;
		f->output_tokens += r->output_tokens;
		f->without_usage += !r->usage;
		if (r->prompt_tokens > 0)
			f->input_tokens += r->prompt_tokens;
		f->good += nf_lg_slo_met(slo, r->ttft * 1e3, tpot, r->e2e * 1e3);
		err = nf_lg_samples_add(&l->ttft, r->ttft * 1e3);
		if (!err && r->output_tokens >= 2)
			err = nf_lg_samples_add(&l->tpot, tpot);
		if (!err)
			err = nf_lg_samples_add(&l->e2e, r->e2e * 1e3);
		for (size_t k = 0; k < r->n_gaps && !err; k++)
			err = nf_lg_samples_add(&l->itl, r->gaps[k] * 1e3);
	}
	return err;
}

int nf_lg_figures_of(nf_lg_figures *f, const nf_lg_run *run, const nf_lg_slo *slo)
{
	latencies l = {0};
	double d = run->duration > 0 ? run->duration : 1e-9;
	int err;
	memset(f, 0, sizeof *f);
	f->requests = run->n;
	if ((err = collect(&l, f, run, slo)) < 0 ||
	    (err = nf_lg_summarize(&f->ttft_ms, l.ttft.v, l.ttft.n)) < 0 ||
	    (err = nf_lg_summarize(&f->tpot_ms, l.tpot.v, l.tpot.n)) < 0 ||
	    (err = nf_lg_summarize(&f->itl_ms, l.itl.v, l.itl.n)) < 0 ||
	    (err = nf_lg_summarize(&f->e2e_ms, l.e2e.v, l.e2e.n)) < 0)
		goto done;
	f->duration_s = run->duration;
	f->request_throughput = (double)f->completed / d;
	f->output_throughput = (double)f->output_tokens / d;
	f->total_throughput = (double)(f->output_tokens + f->input_tokens) / d;
	f->goodput = nf_lg_slo_any(slo) ? (double)f->good / d : -1;
done:
	nf_lg_samples_release(&l.ttft);
	nf_lg_samples_release(&l.tpot);
	nf_lg_samples_release(&l.itl);
	nf_lg_samples_release(&l.e2e);
	return err;
}

/* ---- the human table ---- */

static const char *load_name(const nf_lg_sweep *s)
{
	return s->rate ? "request rate (req/s)" : "concurrency";
}

static void text_point(FILE *o, const nf_lg_sweep *s, const nf_lg_point *p)
{
	const nf_lg_figures *f = &p->f;
	const struct {
		const char *name;
		const nf_lg_summary *v;
	} rows[] = {{"TTFT", &f->ttft_ms}, {"TPOT", &f->tpot_ms}, {"ITL", &f->itl_ms}, {"E2E", &f->e2e_ms}};
	fprintf(o, "== %s %g: %zu requests, %zu completed, %zu failed in %.2f s\n", load_name(s),
		p->load, f->requests, f->completed, f->failed, f->duration_s);
	fprintf(o, "  throughput  %.2f req/s  output %.1f tok/s  total %.1f tok/s", f->request_throughput,
		f->output_throughput, f->total_throughput);
	if (f->goodput >= 0)
		fprintf(o, "  goodput %.2f req/s (%zu good)", f->goodput, f->good);
	fprintf(o, "\n  tokens      input %ld  output %ld%s\n", f->input_tokens, f->output_tokens,
		f->without_usage ? "  (some counted as chunks: no usage)" : "");
	fprintf(o, "  %-6s %10s %10s %10s %10s\n", "ms", "mean", "p50", "p90", "p99");
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
		fprintf(o, "  %-6s %10.2f %10.2f %10.2f %10.2f\n", rows[i].name, rows[i].v->mean,
			rows[i].v->p50, rows[i].v->p90, rows[i].v->p99);
	if (f->failed)
		fprintf(o, "  first failure: %s\n", f->first_error);
}

int nf_lg_sweep_text(char **out, const nf_lg_sweep *s)
{
	nf_report_text t;
	int err;
	if ((err = nf_report_text_open(&t)) < 0)
		return err;
	fprintf(t.f, "bench-serve %s  model %s  endpoint %s  dataset %s\n", s->url, s->model, s->endpoint,
		s->dataset);
	for (size_t i = 0; i < s->n_points; i++)
		text_point(t.f, s, &s->points[i]);
	return nf_report_text_close(&t, out);
}

/* ---- JSON ---- */

static json_t *summary_json(const nf_lg_summary *v)
{
	return json_pack("{s:I, s:f, s:f, s:f, s:f}", "count", (json_int_t)v->n, "mean", v->mean,
			 "p50", v->p50, "p90", v->p90, "p99", v->p99);
}

static json_t *point_json(const nf_lg_sweep *s, const nf_lg_point *p)
{
	const nf_lg_figures *f = &p->f;
	json_t *j = json_pack("{s:s, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f}",
			      "mode", s->rate ? "rate" : "concurrency", "load", p->load,
			      "requests", (json_int_t)f->requests, "completed", (json_int_t)f->completed,
			      "failed", (json_int_t)f->failed,
			      "requests_without_usage", (json_int_t)f->without_usage,
			      "input_tokens", (json_int_t)f->input_tokens,
			      "output_tokens", (json_int_t)f->output_tokens, "duration_s", f->duration_s,
			      "request_throughput", f->request_throughput,
			      "output_token_throughput", f->output_throughput,
			      "total_token_throughput", f->total_throughput);
	if (!j)
		return NULL;
	json_object_set_new(j, "good_requests", f->goodput >= 0 ? json_integer((json_int_t)f->good) : json_null());
	json_object_set_new(j, "goodput", f->goodput >= 0 ? json_real(f->goodput) : json_null());
	json_object_set_new(j, "ttft_ms", summary_json(&f->ttft_ms));
	json_object_set_new(j, "tpot_ms", summary_json(&f->tpot_ms));
	json_object_set_new(j, "itl_ms", summary_json(&f->itl_ms));
	json_object_set_new(j, "e2e_ms", summary_json(&f->e2e_ms));
	json_object_set_new(j, "first_error", f->failed ? json_string(f->first_error) : json_null());
	return j;
}

static json_t *slo_json(const nf_lg_slo *slo)
{
	json_t *j;
	if (!nf_lg_slo_any(slo))
		return json_null();
	j = json_object();
	if (slo->ttft_ms > 0)
		json_object_set_new(j, "ttft_ms", json_real(slo->ttft_ms));
	if (slo->tpot_ms > 0)
		json_object_set_new(j, "tpot_ms", json_real(slo->tpot_ms));
	if (slo->e2e_ms > 0)
		json_object_set_new(j, "e2e_ms", json_real(slo->e2e_ms));
	return j;
}

int nf_lg_sweep_json(char **out, const nf_lg_sweep *s)
{
	json_t *j = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:f}",
			      "schema_version", 1, "tool", "nimfactory bench-serve", "version", NF_VERSION,
			      "url", s->url, "model", s->model, "endpoint", s->endpoint,
			      "dataset", s->dataset, "seed", (json_int_t)(s->seed & 0x7fffffffffffffffull),
			      "max_tokens", (json_int_t)s->max_tokens, "requests", (json_int_t)s->requests,
			      "warmup", (json_int_t)s->warmup, "timeout_s", s->timeout_s);
	json_t *points = json_array();
	int err = 0;
	*out = NULL;
	if (!j || !points) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	json_object_set_new(j, "mode", json_string(s->rate ? "rate" : "concurrency"));
	json_object_set_new(j, "max_concurrency", s->rate ? json_integer(s->max_concurrency) : json_null());
	json_object_set_new(j, "goodput_slo", slo_json(&s->slo));
	for (size_t i = 0; i < s->n_points; i++)
		if (json_array_append_new(points, point_json(s, &s->points[i])) < 0)
			err = nf_error_set(NF_ENOMEM, "out of memory");
	json_object_set(j, "runs", points);
	if (!err && !(*out = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6))))
		err = nf_error_set(NF_ENOMEM, "out of memory");
done:
	json_decref(j);
	json_decref(points);
	return err;
}

/* ---- Markdown ---- */

static void md_num(FILE *o, double v, int decimals)
{
	char b[NF_REPORT_NUM_MAX];
	nf_report_num_fixed(b, v, decimals);
	fprintf(o, " %s |", b);
}

/* Markdown cell text: '|' and line ends would break the table. */
static void md_text(FILE *o, const char *s)
{
	for (; *s; s++)
		fputc(*s == '|' || *s == '\n' || *s == '\r' ? ' ' : *s, o);
}

int nf_lg_sweep_markdown(char **out, const nf_lg_sweep *s)
{
	nf_report_text t;
	int err;
	if ((err = nf_report_text_open(&t)) < 0)
		return err;
	fputs("## bench-serve: ", t.f);
	md_text(t.f, s->model);
	fputs(" at ", t.f);
	md_text(t.f, s->url);
	fprintf(t.f, "\n\nEndpoint %s, dataset `", s->endpoint);
	md_text(t.f, s->dataset);
	fprintf(t.f, "`, %zu requests per load after %zu warm-up, max_tokens %ld, seed %llu.\n\n",
		s->requests, s->warmup, s->max_tokens, (unsigned long long)s->seed);
	fprintf(t.f, "| %s | completed | failed | req/s | output tok/s | total tok/s | goodput req/s "
		     "| TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | TPOT p99 ms | ITL p50 ms | ITL p99 ms "
		     "| E2E p50 ms | E2E p99 ms |\n",
		s->rate ? "rate req/s" : "concurrency");
	fputs("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
	      "| ---: | ---: | ---: |\n", t.f);
	for (size_t i = 0; i < s->n_points; i++) {
		const nf_lg_figures *f = &s->points[i].f;
		fputc('|', t.f);
		md_num(t.f, s->points[i].load, s->rate ? 2 : 0);
		fprintf(t.f, " %zu | %zu |", f->completed, f->failed);
		md_num(t.f, f->request_throughput, 2);
		md_num(t.f, f->output_throughput, 1);
		md_num(t.f, f->total_throughput, 1);
		if (f->goodput >= 0)
			md_num(t.f, f->goodput, 2);
		else
			fputs(" - |", t.f);
		md_num(t.f, f->ttft_ms.p50, 2);
		md_num(t.f, f->ttft_ms.p99, 2);
		md_num(t.f, f->tpot_ms.p50, 2);
		md_num(t.f, f->tpot_ms.p99, 2);
		md_num(t.f, f->itl_ms.p50, 2);
		md_num(t.f, f->itl_ms.p99, 2);
		md_num(t.f, f->e2e_ms.p50, 1);
		md_num(t.f, f->e2e_ms.p99, 1);
		fputc('\n', t.f);
	}
	return nf_report_text_close(&t, out);
}
