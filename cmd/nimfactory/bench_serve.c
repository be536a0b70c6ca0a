/*
 * bench_serve.c - `nimfactory bench-serve URL`: a serving benchmark of any
 * OpenAI-compatible server (nimserve, llama-server, vLLM), in the manner of
 * `vllm bench serve` and genai-perf.  For each load of a sweep (clients of a
 * closed loop, or Poisson request rates of an open one) it sends the
 * dataset's requests after a warm-up, streamed, and reports TTFT, TPOT, ITL
 * and end-to-end latency (mean, p50, p90, p99), request and token
 * throughput and goodput under SLOs: a table on stdout, and on request JSON
 * (docs/schemas/bench-serve.schema.json), Markdown and an SVG of latency
 * against load.  docs/bench-serve.md has the details.
 *
 * Exit 0 when every load had completed requests (failures are counted in
 * the reports and the first is named on stderr); 4 when a load's requests
 * all failed or the server cannot be reached; 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/nimfactory/commands.h"
#include "factory/loadgen.h"
#include "factory/loadgen_report.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/parse.h"
#include "util/banned.h"

#define MAX_LOADS 32
#define WARMUP_SEED_SALT 0x9e3779b97f4a7c15ull /* warm-up prompts differ from the measured ones */

static const char usage_text[] =
	"usage: nimfactory bench-serve URL [--concurrency N[,N...] | --rate R[,R...]] "
	"[--max-concurrency N] [--requests N] [--max-tokens N] [--warmup N] [--model NAME] "
	"[--endpoint completions|chat] [--dataset random:IN,OUT|prefix:SHARED,IN,OUT|multiturn:TURNS|"
	"jsonl:FILE] [--seed S] [--timeout S] [--goodput ttft:MS,tpot:MS,e2e:MS] [--ignore-eos] "
	"[--extra-body JSON] "
	"[--json FILE] [--markdown FILE] [--svg FILE] [--quiet]\n";

typedef struct bench_args {
	const char *url, *model, *endpoint, *dataset, *json, *markdown, *svg, *extra_body;
	double loads[MAX_LOADS];
	size_t n_loads;
	bool rate, ignore_eos, quiet;
	long requests, max_tokens, warmup, max_concurrency;
	uint64_t seed;
	double timeout_s;
	nf_lg_slo slo;
} bench_args;

/* "A,B,C" into a->loads: concurrencies (whole, 1..4096) or rates (0, 1e6]. */
static int parse_loads(bench_args *a, const char *list, bool rate)
{
	char buf[512], *p = buf;
	if (a->n_loads)
		return nf_error_set(NF_EINPUT, "give one of --concurrency and --rate, once");
	if (strlen(list) >= sizeof buf)
		return nf_error_set(NF_EINPUT, "%s: the list is too long", rate ? "--rate" : "--concurrency");
	memcpy(buf, list, strlen(list) + 1);
	a->rate = rate;
	for (;;) {
		char *comma = strchr(p, ',');
		long c;
		int err;
		if (comma)
			*comma = '\0';
		if (a->n_loads == MAX_LOADS)
			return nf_error_set(NF_EINPUT, "at most %d loads", MAX_LOADS);
		if (rate)
			err = nf_parse_double(&a->loads[a->n_loads], p, 1e-6, 1e6, "--rate");
		else if (!(err = nf_parse_long(&c, p, 1, 4096, "--concurrency")))
			a->loads[a->n_loads] = (double)c;
		if (err < 0)
			return err;
		a->n_loads++;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

#define MAX_EXTRA_BODY (64 << 10)

/* --extra-body: a JSON object of at most MAX_EXTRA_BODY bytes that leaves
 * alone the members the generator writes. */
static int check_extra_body(const char *v)
{
	static const char *const owned[] = {"model", "prompt", "messages", "stream", "stream_options"};
	json_error_t e;
	json_t *x;
	if (strlen(v) > MAX_EXTRA_BODY)
		return nf_error_set(NF_EINPUT, "--extra-body: longer than %d bytes", MAX_EXTRA_BODY);
	if (!(x = json_loads(v, JSON_REJECT_DUPLICATES, &e)) || !json_is_object(x)) {
		json_decref(x);
		return nf_error_set(NF_EINPUT, "--extra-body: expected a JSON object (%s)",
				    x ? "got another value" : e.text);
	}
	for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
		if (json_object_get(x, owned[i])) {
			json_decref(x);
			return nf_error_set(NF_EINPUT, "--extra-body: \"%s\" is the generator's to set",
					    owned[i]);
		}
	json_decref(x);
	return 0;
}

/* One option; NF_EINPUT on a bad value. */
static int take_option(bench_args *a, int c, const char *v)
{
	switch (c) {
	case 'c': return parse_loads(a, v, false);
	case 'r': return parse_loads(a, v, true);
	case 'C': return nf_parse_long(&a->max_concurrency, v, 1, 4096, "--max-concurrency");
	case 'n': return nf_parse_long(&a->requests, v, 1, 1000000, "--requests");
	case 't': return nf_parse_long(&a->max_tokens, v, 1, 1000000, "--max-tokens");
	case 'w': return nf_parse_long(&a->warmup, v, 0, 100000, "--warmup");
	case 's': return nf_parse_u64(&a->seed, v, INT64_MAX, "--seed");
	case 'T': return nf_parse_double(&a->timeout_s, v, 0.001, 86400, "--timeout");
	case 'g': return nf_lg_slo_parse(&a->slo, v);
	case 'm': a->model = v; return 0;
	case 'e': a->endpoint = v; return 0;
	case 'd': a->dataset = v; return 0;
	case 'j': a->json = v; return 0;
	case 'M': a->markdown = v; return 0;
	case 'S': a->svg = v; return 0;
	case 'i': a->ignore_eos = true; return 0;
	case 'x': a->extra_body = v; return check_extra_body(v);
	case 'q': a->quiet = true; return 0;
	default: return nf_error_set(NF_EINPUT, "unknown option");
	}
}

static int parse_args(bench_args *a, int argc, char **argv, bool *help)
{
	static const struct option options[] = {
		{"concurrency", required_argument, NULL, 'c'}, {"rate", required_argument, NULL, 'r'},
		{"max-concurrency", required_argument, NULL, 'C'},
		{"requests", required_argument, NULL, 'n'}, {"max-tokens", required_argument, NULL, 't'},
		{"warmup", required_argument, NULL, 'w'}, {"model", required_argument, NULL, 'm'},
		{"endpoint", required_argument, NULL, 'e'}, {"dataset", required_argument, NULL, 'd'},
		{"seed", required_argument, NULL, 's'}, {"timeout", required_argument, NULL, 'T'},
		{"goodput", required_argument, NULL, 'g'}, {"json", required_argument, NULL, 'j'},
		{"markdown", required_argument, NULL, 'M'}, {"svg", required_argument, NULL, 'S'},
		{"ignore-eos", no_argument, NULL, 'i'}, {"quiet", no_argument, NULL, 'q'},
		{"extra-body", required_argument, NULL, 'x'},
		{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
	};
	int c, err;
	*a = (bench_args){.dataset = "random:64,128", .requests = 64, .max_tokens = 128, .warmup = 1,
			  .max_concurrency = 256, .timeout_s = 300};
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
		if (c == 'h') {
			*help = true;
			return 0;
		}
		if (c == '?')
			return nf_error_set(NF_EINPUT, "unknown option or missing value: %s", argv[optind - 1]);
		if ((err = take_option(a, c, optarg)) < 0)
			return err;
	}
	if (optind + 1 != argc)
		return nf_error_set(NF_EINPUT, "give one URL (http://HOST:PORT)");
	a->url = argv[optind];
	if (!a->n_loads)
		a->loads[a->n_loads++] = 1;
	if (a->endpoint && strcmp(a->endpoint, "completions") && strcmp(a->endpoint, "chat"))
		return nf_error_set(NF_EINPUT, "--endpoint %s: completions or chat", a->endpoint);
	if (a->model && (!*a->model || strlen(a->model) > 1024))
		return nf_error_set(NF_EINPUT, "--model: from 1 to 1024 bytes");
	return 0;
}

/* The first model the server lists (GET /v1/models). */
static int first_model(char **out, const nf_lg_server *srv, double timeout_s)
{
	json_t *j = NULL, *id;
	int err;
	if ((err = nf_lg_http_get_json(&j, srv, "/v1/models", timeout_s)) < 0)
		return nf_error_wrap(err, "cannot learn the model (give --model)");
	id = json_object_get(json_array_get(json_object_get(j, "data"), 0), "id");
	if (!json_is_string(id) || !json_string_length(id) || json_string_length(id) > 1024)
		err = nf_error_set(NF_ENET, "GET /v1/models lists no model: give --model");
	else if (!(*out = strdup(json_string_value(id))))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	json_decref(j);
	return err;
}

/* The first failure of a run, for the error when all failed. */
static const char *first_error(const nf_lg_run *run)
{
	for (size_t i = 0; i < run->n; i++)
		if (!run->results[i].ok)
			return run->results[i].error;
	return "";
}

/* Warm-up requests, not counted: one client (open loop) or the load's clients. */
static int warm_up(nf_lg_run_opts o, const nf_lg_dataset *ds, size_t n, const char *what)
{
	nf_lg_run *run = NULL;
	size_t ok = 0;
	int err;
	if (n == 0)
		return 0;
	o.requests = n;
	o.rate = 0;
	if ((err = nf_lg_run_load(&run, &o, ds)) < 0)
		return err;
	for (size_t i = 0; i < run->n; i++)
		ok += run->results[i].ok;
	if (ok == 0)
		err = nf_error_set(NF_ENET, "%s: every warm-up request failed; first: %s", what,
				   first_error(run));
	nf_lg_run_free(run);
	return err;
}

/* Warm up, then measure one load into *p. */
static int run_point(nf_lg_point *p, nf_lg_run_opts o, const bench_args *a, const nf_lg_dataset *ds,
		     const nf_lg_dataset *warm_ds, double load)
{
	nf_lg_run *run = NULL;
	char what[64];
	int err;
	snprintf(what, sizeof what, "%s %g", a->rate ? "rate" : "concurrency", load);
	o.concurrency = a->rate ? 1 : (int)load;
	if ((err = warm_up(o, warm_ds, (size_t)a->warmup, what)) < 0)
		return err;
	o.concurrency = a->rate ? (int)a->max_concurrency : (int)load;
	o.rate = a->rate ? load : 0;
	if ((err = nf_lg_run_load(&run, &o, ds)) < 0)
		return err;
	p->load = load;
	if ((err = nf_lg_figures_of(&p->f, run, &a->slo)) < 0)
		goto done;
	if (p->f.completed == 0)
		err = nf_error_set(NF_ENET, "%s: all %zu requests failed; first: %s", what, p->f.requests,
				   p->f.first_error);
	else if (p->f.failed)
		fprintf(stderr, "nimfactory bench-serve: %s: %zu of %zu requests failed; first: %s\n",
			what, p->f.failed, p->f.requests, p->f.first_error);
	if (!a->quiet && p->f.completed)
		fprintf(stderr, "nimfactory bench-serve: %s: %zu requests in %.2f s\n", what,
			p->f.requests, p->f.duration_s);
done:
	nf_lg_run_free(run);
	return err;
}

/* Write one report by its writer, atomically, when a path was given. */
static int write_report(const char *path, int (*writer)(char **, const nf_lg_sweep *),
			const nf_lg_sweep *s)
{
	char *text = NULL;
	int err;
	if (!path)
		return 0;
	if (!(err = writer(&text, s)))
		err = nf_fs_write_atomic(path, text, strlen(text), 0644);
	free(text);
	return err < 0 ? nf_error_wrap(err, "%s", path) : 0;
}

static int report(const nf_lg_sweep *s, const bench_args *a)
{
	char *text = NULL;
	int err;
	if ((err = nf_lg_sweep_text(&text, s)) < 0)
		return err;
	fputs(text, stdout);
	fflush(stdout);
	free(text);
	if ((err = write_report(a->json, nf_lg_sweep_json, s)) < 0 ||
	    (err = write_report(a->markdown, nf_lg_sweep_markdown, s)) < 0 ||
	    (err = write_report(a->svg, nf_lg_sweep_svg, s)) < 0)
		return err;
	return 0;
}

/* The datasets, the endpoint and the model: everything before the first request. */
static int prepare(nf_lg_run_opts *o, nf_lg_dataset **ds, nf_lg_dataset **warm, char **model,
		   const bench_args *a)
{
	int err;
	if ((err = nf_lg_server_parse(&o->server, a->url)) < 0 ||
	    (err = nf_lg_dataset_make(ds, a->dataset, (size_t)a->requests, a->seed)) < 0 ||
	    (err = nf_lg_dataset_make(warm, a->dataset, a->warmup ? (size_t)a->warmup : 1,
				      a->seed ^ WARMUP_SEED_SALT)) < 0)
		return err;
	o->chat = a->endpoint ? !strcmp(a->endpoint, "chat") : (*ds)->needs_chat;
	if ((*ds)->needs_chat && !o->chat)
		return nf_error_set(NF_EINPUT, "--dataset %s holds chat conversations: use --endpoint chat",
				    a->dataset);
	if (!a->model && (err = first_model(model, &o->server, a->timeout_s)) < 0)
		return err;
	o->model = a->model ? a->model : *model;
	o->ignore_eos = a->ignore_eos;
	o->extra_body = a->extra_body;
	o->max_tokens = a->max_tokens;
	o->requests = (size_t)a->requests;
	o->seed = a->seed;
	o->timeout_s = a->timeout_s;
	return 0;
}

int nf_cmd_bench_serve(int argc, char **argv)
{
	bench_args a;
	nf_lg_run_opts o = {0};
	nf_lg_dataset *ds = NULL, *warm = NULL;
	nf_lg_point points[MAX_LOADS];
	nf_lg_sweep s;
	char *model = NULL;
	bool help = false;
	size_t n = 0;
	int err;
	if ((err = parse_args(&a, argc, argv, &help)) < 0) {
		fprintf(stderr, "nimfactory bench-serve: %s\n%s", nf_error_last(), usage_text);
		return NF_EXIT_INPUT;
	}
	if (help) {
		fputs(usage_text, stdout);
		return NF_EXIT_OK;
	}
	if ((err = prepare(&o, &ds, &warm, &model, &a)) < 0)
		goto done;
	for (; n < a.n_loads; n++)
		if ((err = run_point(&points[n], o, &a, ds, warm, a.loads[n])) < 0)
			goto done;
	s = (nf_lg_sweep){.url = a.url, .model = o.model, .endpoint = o.chat ? "chat" : "completions",
			  .dataset = a.dataset, .rate = a.rate, .max_concurrency = (int)a.max_concurrency,
			  .seed = a.seed, .max_tokens = a.max_tokens, .requests = (size_t)a.requests,
			  .warmup = (size_t)a.warmup, .timeout_s = a.timeout_s, .slo = a.slo,
			  .points = points, .n_points = n};
	err = report(&s, &a);
done:
	nf_lg_dataset_free(ds);
	nf_lg_dataset_free(warm);
	free(model);
	return err < 0 ? nf_cmd_fail("bench-serve", err) : NF_EXIT_OK;
}
