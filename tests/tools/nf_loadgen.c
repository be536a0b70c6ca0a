/*
 * nf_loadgen.c - the load generator of `make bench` (tests/bench/bench_serve.sh):
 * N concurrent clients each stream R completions one after another from
 * nimserve or any OpenAI-compatible server (llama.cpp's llama-server);
 * reports aggregate tokens/s, time to first token and inter-token latency
 * (p50/p99).  The client and the measurement are factory/loadgen* (the same
 * as `nimfactory bench-serve`, the user-facing command); this keeps the
 * benchmark's command line and output.
 *
 *   nf_loadgen (--port P [--host 127.0.0.1] | --url http://HOST:PORT[/PATH])
 *              [--path /v1/completions] [--clients N] [--requests R]
 *              [--max-tokens T] [--prompt TEXT | --prompts FILE] [--model NAME]
 *              [--ignore-eos] [--timeout S] [--json] [--gaps FILE]
 *              [--chat] [--escapes]
 *
 * --prompts FILE: one prompt per line (at most 256 lines of 4000 bytes);
 * request k of client i sends prompt (i + k * N) mod lines, so every run of the
 * same N and R sends the same prompts in the same order, whatever the server.
 * --ignore-eos adds "ignore_eos":true (llama.cpp; nimserve rejects unknown
 * fields).  --chat sends each prompt as the one user message of a chat
 * completion (path /v1/chat/completions unless --path or --url names one).
 * Every request asks for the usage chunk (stream_options.include_usage),
 * which chat streams (llama-server's among them) send only when asked.
 * --escapes decodes \n, \t and \\ in the prompts (a prompt already rendered
 * through a chat template has newlines and must fit on one line of --prompts
 * FILE).  Requests are streamed with temperature 0; the answer may be chunked
 * or not.  Generated tokens are the usage counts (when a server sends none,
 * the content chunks are counted and the output says how many requests
 * lacked usage).  TTFT runs from connect to the first content chunk;
 * inter-token gaps between content chunks, as the client sees them.
 * --gaps FILE writes every gap as a line "CLIENT END_MS GAP_MS" (END_MS from
 * the start of the run), to see which steps make the tail.  Exit 0; 1 when
 * any request failed (the first failure is on stderr); 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "factory/loadgen.h"
#include "factory/loadgen_report.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/banned.h"

#define MAX_PROMPTS 256
#define MAX_PROMPT_BYTES 4000

typedef struct args {
	nf_lg_run_opts o;
	const char *host, *port, *url, *path, *prompt, *prompts_file, *gaps_file;
	long clients, requests;
	bool json, escapes;
	char url_path[sizeof(((nf_lg_server *)0)->path)]; /* --url's path, the request path */
} args;

/* Decode \n, \t and \\ in place (--escapes); another backslash stays. */
static void unescape(char *text)
{
	char *o = text;
	for (const char *p = text; *p; p++) {
		if (p[0] == '\\' && (p[1] == 'n' || p[1] == 't' || p[1] == '\\')) {
			p++;
			*o++ = *p == 'n' ? '\n' : *p == 't' ? '\t' : '\\';
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
}

/* The prompts of FILE, one a line (blank lines skipped). */
static int load_prompts(char **prompts, size_t *n, const char *path, bool escapes)
{
	FILE *f = fopen(path, "r");
	char *ln = NULL;
	size_t cap = 0;
	ssize_t len;
	int lineno = 0, err = 0;
	if (!f)
		return nf_error_set(NF_EINPUT, "%s: cannot open", path);
	while (!err && (len = getline(&ln, &cap, f)) >= 0) {
		lineno++;
		while (len > 0 && (ln[len - 1] == '\n' || ln[len - 1] == '\r'))
			ln[--len] = '\0';
		if (len == 0)
			continue;
		if (*n == MAX_PROMPTS || len > MAX_PROMPT_BYTES)
			err = nf_error_set(NF_EINPUT, "%s:%d: more than %d prompts or one over %d bytes",
					   path, lineno, MAX_PROMPTS, MAX_PROMPT_BYTES);
		else if (!(prompts[(*n)++] = strdup(ln)))
			err = nf_error_set(NF_ENOMEM, "out of memory");
		else if (escapes)
			unescape(prompts[*n - 1]);
	}
	free(ln);
	fclose(f);
	if (!err && *n == 0)
		err = nf_error_set(NF_EINPUT, "%s: no prompts", path);
	return err;
}

static int make_dataset(nf_lg_dataset **ds, const args *a)
{
	char *prompts[MAX_PROMPTS] = {0};
	size_t n = 0;
	int err = 0;
	if (a->prompts_file)
		err = load_prompts(prompts, &n, a->prompts_file, a->escapes);
	else if (strlen(a->prompt) > MAX_PROMPT_BYTES)
		err = nf_error_set(NF_EINPUT, "the prompt is over %d bytes", MAX_PROMPT_BYTES);
	else if (!(prompts[n++] = strdup(a->prompt)))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	else if (a->escapes)
		unescape(prompts[0]);
	if (!err)
		err = nf_lg_dataset_prompts(ds, (const char *const *)prompts, n);
	for (size_t i = 0; i < n; i++)
		free(prompts[i]);
	return err;
}

/* Where requests go: --url (whose path is the request path) or --host/--port. */
static int target(args *a)
{
	nf_lg_server *s = &a->o.server;
	if (a->url) {
		if (nf_lg_server_parse(s, a->url) < 0)
			return -1;
		if (s->path[0] && !a->path) {
			memcpy(a->url_path, s->path, sizeof a->url_path);
			a->path = a->url_path;
		}
		s->path[0] = '\0';
	} else {
		if (!a->port || strlen(a->host) >= sizeof s->host)
			return -1;
		snprintf(s->host, sizeof s->host, "%s", a->host);
		snprintf(s->port, sizeof s->port, "%s", a->port);
	}
	a->o.path = a->path ? a->path : a->o.chat ? "/v1/chat/completions" : "/v1/completions";
	return a->o.path[0] == '/' && !strpbrk(a->o.path, " \r\n") ? 0 : -1;
}

static int number(long *out, const char *v, long lo, long hi, const char *what)
{
	return nf_parse_long(out, v, lo, hi, what) < 0 ? -1 : 0;
}

/* One option with a value; -1 when it is bad or unknown. */
static int option(args *a, const char *k, const char *v)
{
	long x;
	if (!strcmp(k, "--port"))
		return number(&x, v, 1, 65535, k) < 0 ? -1 : (a->port = v, 0);
	if (!strcmp(k, "--timeout"))
		return number(&x, v, 1, 86400, k) < 0 ? -1 : (a->o.timeout_s = (double)x, 0);
	if (!strcmp(k, "--clients"))
		return number(&a->clients, v, 1, 1024, k);
	if (!strcmp(k, "--requests"))
		return number(&a->requests, v, 1, 1000000, k);
	if (!strcmp(k, "--max-tokens"))
		return number(&a->o.max_tokens, v, 1, 1000000, k);
	const char **slot = !strcmp(k, "--host")      ? &a->host
			    : !strcmp(k, "--url")     ? &a->url
			    : !strcmp(k, "--path")    ? &a->path
			    : !strcmp(k, "--prompt")  ? &a->prompt
			    : !strcmp(k, "--prompts") ? &a->prompts_file
			    : !strcmp(k, "--model")   ? &a->o.model
			    : !strcmp(k, "--gaps")    ? &a->gaps_file
						      : NULL;
	if (!slot)
		return -1;
	*slot = v;
	return 0;
}

static int parse_args(args *a, int argc, char **argv)
{
	*a = (args){.host = "127.0.0.1", .prompt = "Once upon a time", .clients = 1, .requests = 4};
	a->o.model = "stories260k";
	a->o.max_tokens = 64;
	a->o.timeout_s = 120;
	for (int i = 1; i < argc; i++) {
		const char *k = argv[i];
		if (!strcmp(k, "--json"))
			a->json = true;
		else if (!strcmp(k, "--ignore-eos"))
			a->o.ignore_eos = true;
		else if (!strcmp(k, "--chat"))
			a->o.chat = true;
		else if (!strcmp(k, "--escapes"))
			a->escapes = true;
		else if (i + 1 >= argc || option(a, k, argv[++i]) < 0)
			return -1;
	}
	a->o.concurrency = (int)a->clients;
	a->o.requests = (size_t)(a->clients * a->requests);
	a->o.round_robin = true;
	return target(a);
}

/* --gaps: "CLIENT END_MS GAP_MS" per gap, END_MS from the start of the run. */
static int write_gaps(const char *path, const nf_lg_run *run)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	for (size_t i = 0; i < run->n; i++) {
		const nf_lg_result *r = &run->results[i];
		double end = r->start + r->ttft;
		for (size_t k = 0; r->ok && k < r->n_gaps; k++) {
			end += r->gaps[k];
			fprintf(f, "%d %.3f %.3f\n", r->client, end * 1e3, r->gaps[k] * 1e3);
		}
	}
	return fclose(f) == 0 ? 0 : -1;
}

static void print(const args *a, const nf_lg_figures *f)
{
	double tpr = f->completed ? (double)f->output_tokens / (double)f->completed : 0;
	double tps = f->duration_s > 0 ? (double)f->output_tokens / f->duration_s : 0;
	if (a->json)
		printf("{\"clients\":%ld,\"requests\":%zu,\"errors\":%zu,\"tokens\":%ld,"
		       "\"tokens_per_request\":%.1f,\"requests_without_usage\":%zu,\"seconds\":%.3f,"
		       "\"tokens_per_second\":%.1f,\"ttft_p50_ms\":%.2f,\"ttft_p99_ms\":%.2f,"
		       "\"itl_p50_ms\":%.3f,\"itl_p99_ms\":%.3f}\n",
		       a->clients, f->requests, f->failed, f->output_tokens, tpr, f->without_usage,
		       f->duration_s, tps, f->ttft_ms.p50, f->ttft_ms.p99, f->itl_ms.p50, f->itl_ms.p99);
	else
		printf("clients %ld  requests %zu  errors %zu  tokens %ld  %.2f s  %.1f tok/s  "
		       "TTFT p50 %.2f ms p99 %.2f ms  ITL p50 %.3f ms p99 %.3f ms\n",
		       a->clients, f->requests, f->failed, f->output_tokens, f->duration_s, tps,
		       f->ttft_ms.p50, f->ttft_ms.p99, f->itl_ms.p50, f->itl_ms.p99);
}

int main(int argc, char **argv)
{
	args a;
	nf_lg_dataset *ds = NULL;
	nf_lg_run *run = NULL;
	nf_lg_figures f;
	nf_lg_slo no_slo = {0};
	int rc = 1;
	if (parse_args(&a, argc, argv) < 0) {
		fprintf(stderr, "usage: nf_loadgen (--port P [--host HOST] | --url http://HOST:PORT[/PATH]) "
				"[--path PATH] [--clients N] [--requests R] [--max-tokens T]\n"
				"                  [--prompt TEXT | --prompts FILE] [--model NAME] "
				"[--ignore-eos] [--timeout S] [--json] [--gaps FILE]\n"
				"                  [--chat] [--escapes]\n");
		return 2;
	}
	if (make_dataset(&ds, &a) < 0) {
		fprintf(stderr, "nf_loadgen: %s\n", nf_error_last());
		return 2;
	}
	if (nf_lg_run_load(&run, &a.o, ds) < 0 || nf_lg_figures_of(&f, run, &no_slo) < 0) {
		fprintf(stderr, "nf_loadgen: %s\n", nf_error_last());
		goto done;
	}
	if (a.gaps_file && write_gaps(a.gaps_file, run) < 0) {
		fprintf(stderr, "nf_loadgen: cannot write %s\n", a.gaps_file);
		goto done;
	}
	if (f.failed)
		fprintf(stderr, "nf_loadgen: %zu of %zu requests failed; first: %s\n", f.failed,
			f.requests, f.first_error);
	print(&a, &f);
	rc = f.failed ? 1 : 0;
done:
	nf_lg_run_free(run);
	nf_lg_dataset_free(ds);
	return rc;
}
