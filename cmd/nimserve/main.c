/*
 * main.c - nimserve: read the model manifest, choose the engine profile for
 * this machine, load it and serve the OpenAI-compatible API until SIGTERM.
 *
 * Every option has an NIM_* environment default (docs/serving.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/sku.h"
#include "serve/api.h"
#include "cmd/nimserve/health.h"
#include "serve/gpu.h"
#include "serve/manifest.h"
#include "serve/metrics.h"
#include "serve/profile.h"
#include "serve/sched.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/version.h"
#include "util/banned.h"

typedef struct opts {
	const char *manifest, *host, *profile, *port_file;
	long port, max_batch, max_queue, max_body, max_conns, threads, drain_timeout, step_delay_us, request_timeout;
	long prefill_chunk, prefill_slack, prefix_cache, spec_k, spec_ngram, spec_adaptive;
	long max_context; /* 0: the manifest's serving.max_context, else the engine's */
	const char *speculative;   /* "none" | "lookup" | "draft"; NULL: the manifest's, else none */
	const char *draft_profile; /* draft: the profile drafting, NULL: the manifest's */
	int list_profiles;
	int health;
} opts;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
	char ts[32];
	time_t now = time(NULL);
	struct tm tm;
	va_list ap;
	gmtime_r(&now, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
	fprintf(stderr, "%s nimserve: ", ts);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: nimserve [options]\n"
		"  --manifest PATH        model_manifest.yaml (NIM_MANIFEST, /opt/nim/model_manifest.yaml)\n"
		"  --host ADDR            listen address (NIM_HOST, 0.0.0.0)\n"
		"  --port N               listen port, 0 = any free one (NIM_PORT, 8000)\n"
		"  --port-file PATH       write the bound port there once listening\n"
		"  --profile ID|NAME      force a profile (NIM_MODEL_PROFILE)\n"
		"  --list-profiles        print every profile and whether it fits here, then exit\n"
		"  --health               ask the server on 127.0.0.1:PORT whether it is ready; exit 0 if so\n"
		"  --max-batch N          sequences decoded together, 0 = the manifest's serving.max_batch,\n"
		"                         else 32 (NIM_MAX_BATCH, 0)\n"
		"  --max-context N        tokens a sequence may hold, prompt and answer; less than the\n"
		"                         model's context takes less memory a sequence; 0 = the manifest's\n"
		"                         serving.max_context, else the model's (NIM_MAX_CONTEXT, 0)\n"
		"  --max-queue N          requests waiting beyond the batch; past it 429 (NIM_MAX_QUEUE, 64)\n"
		"  --max-body BYTES       largest request body; past it 413 (NIM_MAX_BODY, 1048576)\n"
		"  --max-connections N    open connections at most (NIM_MAX_CONNECTIONS, 256)\n"
		"  --threads N            engine threads, 0 = all cores (NIM_THREADS, 0)\n"
		"  --request-timeout S    a connection must send a whole request within S s of opening or of\n"
		"                         its previous response, else it is closed (NIM_REQUEST_TIMEOUT, 30; 0 = off)\n"
		"  --drain-timeout S      on SIGTERM, wait this long for in-flight requests (NIM_DRAIN_TIMEOUT, 30)\n"
		"  --prefill-chunk N      prompt tokens per step while others decode; 0 = 256 (NIM_PREFILL_CHUNK, 256)\n"
		"  --prefill-slack PCT    and no more than keeps such a step within PCT%% of a decode-only\n"
		"                         step, as measured while serving; 0 = no such bound (NIM_PREFILL_SLACK, 0)\n"
		"  --prefix-cache 0|1     1: a prompt skips the longest prefix it shares with a running or\n"
		"                         recent request, reusing its KV cache rows (NIM_PREFIX_CACHE, 1)\n"
		"  --speculative none|lookup|draft  speculative decoding: each decoding sequence drafts\n"
		"                         tokens, by prompt lookup in its own text or with a draft engine,\n"
		"                         and one step verifies the drafts; the output is the same\n"
		"                         (NIM_SPECULATIVE, the manifest's serving.speculative, else none)\n"
		"  --draft-profile ID|NAME  draft: the manifest's profile that drafts, a cheaper one of the\n"
		"                         same model or a smaller model with the same vocabulary\n"
		"                         (NIM_DRAFT_PROFILE, the manifest's)\n"
		"  --spec-k N             tokens drafted per sequence and step, 1..16, 0 = the manifest's,\n"
		"                         else 4 (NIM_SPEC_K, 0)\n"
		"  --spec-ngram N         longest n-gram looked up, 1..8 (NIM_SPEC_NGRAM, 3)\n"
		"  --spec-adaptive 0|1    1: draft only while drafting is the cheaper way a token, as\n"
		"                         measured while serving; 0: always (NIM_SPEC_ADAPTIVE, 1)\n"
		"  --step-delay-us N      sleep per decode step; tests and benchmarks only (NIM_STEP_DELAY_US, 0)\n"
		"  --version, --help\n");
}

static int parse_long(long *out, const char *what, const char *s, long lo, long hi)
{
	char *end = NULL;
	long v;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || !end || *end || end == s || v < lo || v > hi)
		return nf_error_set(NF_EINPUT, "%s: expected an integer in %ld..%ld, got '%s'", what, lo, hi, s);
	*out = v;
	return 0;
}

static const char *env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);
	return v && *v ? v : dflt;
}

static int parse_args(opts *o, int argc, char **argv)
{
	struct { const char *flag, *env, *dflt; long *dst; long lo, hi; } nums[] = {
		{"--port", "NIM_PORT", "8000", &o->port, 0, 65535},
		{"--max-batch", "NIM_MAX_BATCH", "0", &o->max_batch, 0, 4096},
		{"--max-context", "NIM_MAX_CONTEXT", "0", &o->max_context, 0, 1 << 24},
		{"--max-queue", "NIM_MAX_QUEUE", "64", &o->max_queue, 0, 65536},
		{"--max-body", "NIM_MAX_BODY", "1048576", &o->max_body, 1024, 64L << 20},
		{"--max-connections", "NIM_MAX_CONNECTIONS", "256", &o->max_conns, 4, 65536},
		{"--threads", "NIM_THREADS", "0", &o->threads, 0, 1024},
		{"--drain-timeout", "NIM_DRAIN_TIMEOUT", "30", &o->drain_timeout, 0, 3600},
		{"--request-timeout", "NIM_REQUEST_TIMEOUT", "30", &o->request_timeout, 0, 3600},
		{"--step-delay-us", "NIM_STEP_DELAY_US", "0", &o->step_delay_us, 0, 10000000},
		{"--prefill-chunk", "NIM_PREFILL_CHUNK", "256", &o->prefill_chunk, 0, 4096},
		{"--prefill-slack", "NIM_PREFILL_SLACK", "0", &o->prefill_slack, 0, 1000},
		{"--prefix-cache", "NIM_PREFIX_CACHE", "1", &o->prefix_cache, 0, 1},
		{"--spec-k", "NIM_SPEC_K", "0", &o->spec_k, 0, 16},
		{"--spec-ngram", "NIM_SPEC_NGRAM", "3", &o->spec_ngram, 1, 8},
		{"--spec-adaptive", "NIM_SPEC_ADAPTIVE", "1", &o->spec_adaptive, 0, 1},
	};
	size_t n_nums = sizeof nums / sizeof nums[0];
	int rc;
	o->manifest = env_or("NIM_MANIFEST", "/opt/nim/model_manifest.yaml");
	o->host = env_or("NIM_HOST", "0.0.0.0");
	o->profile = env_or("NIM_MODEL_PROFILE", NULL);
	o->speculative = env_or("NIM_SPECULATIVE", NULL);
	o->draft_profile = env_or("NIM_DRAFT_PROFILE", NULL);
	for (size_t i = 0; i < n_nums; i++)
		if ((rc = parse_long(nums[i].dst, nums[i].env, env_or(nums[i].env, nums[i].dflt),
				     nums[i].lo, nums[i].hi)) < 0)
			return rc;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int matched = 0;
		if (!strcmp(a, "--list-profiles")) {
			o->list_profiles = 1;
			continue;
		}
		if (!strcmp(a, "--health")) {
			o->health = 1;
			continue;
		}
		if (i + 1 >= argc)
			return nf_error_set(NF_EINPUT, "unknown option or missing value: %s", a);
		if (!strcmp(a, "--manifest"))
			o->manifest = argv[++i], matched = 1;
		else if (!strcmp(a, "--host"))
			o->host = argv[++i], matched = 1;
		else if (!strcmp(a, "--profile"))
			o->profile = argv[++i], matched = 1;
		else if (!strcmp(a, "--port-file"))
			o->port_file = argv[++i], matched = 1;
		else if (!strcmp(a, "--speculative"))
			o->speculative = argv[++i], matched = 1;
		else if (!strcmp(a, "--draft-profile"))
			o->draft_profile = argv[++i], matched = 1;
		for (size_t k = 0; k < n_nums && !matched; k++)
			if (!strcmp(a, nums[k].flag)) {
				if ((rc = parse_long(nums[k].dst, a, argv[++i], nums[k].lo, nums[k].hi)) < 0)
					return rc;
				matched = 1;
			}
		if (!matched)
			return nf_error_set(NF_EINPUT, "unknown option: %s (see --help)", a);
	}
	if (o->speculative && strcmp(o->speculative, "none") && strcmp(o->speculative, "lookup") &&
	    strcmp(o->speculative, "draft"))
		return nf_error_set(NF_EINPUT, "--speculative: '%s' is not none, lookup or draft",
				    o->speculative);
	return 0;
}

/* The speculation asked for (the options, else the manifest's
 * serving.speculative) into so; for a draft engine, its profile loaded
 * into *draft (the caller frees it after the scheduler). */
static int speculation_setup(nf_sched_opts *so, nf_engine **draft, const opts *o, const nf_manifest *m,
			     const nf_gpu_list *gpus)
{
	const nf_manifest_spec *ms = &m->speculative;
	const char *method = o->speculative ? o->speculative : ms->method ? ms->method : "none";
	const char *want = o->draft_profile ? o->draft_profile : ms->draft_profile;
	char why[1536];
	size_t at = 0;
	int rc;
	so->spec_k = o->spec_k ? (int)o->spec_k : ms->k ? ms->k : 4;
	so->spec_ngram = (int)o->spec_ngram;
	if (!strcmp(method, "none"))
		so->spec_k = 0;
	if (strcmp(method, "draft"))
		return 0;
	if (!want)
		return nf_error_set(NF_EINPUT, "--speculative draft: no --draft-profile, and the manifest "
				    "names none");
	for (at = 0; at < m->n_profiles; at++)
		if (!strcmp(m->profiles[at].id, want) || !strcmp(m->profiles[at].name, want))
			break;
	if (at == m->n_profiles)
		return nf_error_set(NF_EINPUT, "draft profile '%s': the manifest %s has no such profile",
				    want, m->path);
	/* it must fit here as a chosen one must */
	if ((rc = nf_profile_select(&at, why, sizeof why, m, gpus, want, 1)) < 0)
		return nf_error_wrap(rc, "draft profile");
	if ((rc = nf_engine_open(draft, m->profiles[at].engine_path, (int)o->threads)) < 0)
		return nf_error_wrap(rc, "loading draft engine %s", m->profiles[at].engine_path);
	/* its sequences follow the served ones: no longer KV caches than theirs */
	if (o->max_context && o->max_context < nf_engine_config(*draft)->max_seq_len &&
	    (rc = nf_engine_cap_context(*draft, (int)o->max_context)) < 0)
		return nf_error_wrap(rc, "draft engine");
	logf_("draft profile %s (%s, %s), %d tokens a step, context %d: %s", m->profiles[at].name,
	      m->profiles[at].id, nf_precision_name(nf_engine_precision(*draft)), so->spec_k,
	      nf_engine_config(*draft)->max_seq_len, why);
	so->spec_draft = *draft;
	return 0;
}

/* A GPU profile's engine runs on its GPU when the driver and such a device
 * are here, with a device slot for each running and each kept sequence;
 * otherwise one line says why it runs on the CPU.  The prefix cache and
 * speculative decoding stay as asked: the device copies prefixes and
 * gives the verifier's rows of logits (engine/cuda/backend.h). */
static void on_gpu(nf_engine *e, const opts *o)
{
	const nf_sku *sku = nf_engine_gpu_sku(e);
	if (!sku)
		return;
	if (nf_engine_use_gpu(e, (int)(2 * o->max_batch)) != 0) {
		logf_("%s engine on the CPU: %s", sku->name, nf_error_last());
		return;
	}
	logf_("%s engine on the GPU", sku->name);
}

/* What nimserve holds while it serves (nimserve_release frees it). */
typedef struct nimserve {
	opts o;
	nf_manifest *m;
	nf_gpu_list gpus;
	size_t chosen;      /* the profile served */
	char why[1536];     /* why that one */
	nf_metrics *metrics;
	nf_server *srv;
	nf_engine *engine, *draft;
	nf_sched *sched;
} nimserve;

/* --help or --version anywhere: print and return 1. */
static int info_flag(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 1;
		}
		if (!strcmp(argv[i], "--version")) {
			printf("nimserve %s\n", NF_VERSION);
			return 1;
		}
	}
	return 0;
}

/* The manifest, the GPUs here and the profile to serve; with
 * --list-profiles, the list printed instead and 1 returned. */
static int choose_profile(nimserve *ns)
{
	int rc;
	if ((rc = nf_manifest_load(&ns->m, ns->o.manifest)) < 0)
		return rc;
	nf_gpu_detect(&ns->gpus);
	if (ns->o.list_profiles) {
		nf_profile_print(stdout, ns->m, &ns->gpus, 1);
		return 1;
	}
	logf_("nimserve %s, model %s %s, manifest %s", NF_VERSION, ns->m->model_name,
	      ns->m->model_version, ns->o.manifest);
	logf_("gpu detection: %s", ns->gpus.note);
	if ((rc = nf_profile_select(&ns->chosen, ns->why, sizeof ns->why, ns->m, &ns->gpus,
				    ns->o.profile, 1)) < 0)
		return rc;
	logf_("profile %s (%s) chosen: %s", ns->m->profiles[ns->chosen].name,
	      ns->m->profiles[ns->chosen].id, ns->why);
	return 0;
}

/* The HTTP server listening (health answers "not ready" until the engine
 * is loaded), and its port in --port-file. */
static int start_listening(nimserve *ns)
{
	nf_server_config sc = {
		.host = ns->o.host,
		.port = (int)ns->o.port,
		.max_body = (size_t)ns->o.max_body,
		.max_connections = (int)ns->o.max_conns,
		.request_timeout = (int)ns->o.request_timeout,
		.manifest = ns->m,
		.profile = ns->chosen,
		.selection_reason = ns->why,
		.gpus = &ns->gpus,
		.max_pending = (int)ns->o.max_queue,
	};
	int rc;
	if ((rc = nf_metrics_new(&ns->metrics)) < 0)
		return rc;
	sc.metrics = ns->metrics;
	if ((rc = nf_server_start(&ns->srv, &sc)) < 0)
		return rc;
	logf_("listening on http://%s:%d (not ready until the engine is loaded)", ns->o.host,
	      nf_server_port(ns->srv));
	if (ns->o.port_file) {
		char buf[16];
		int n = snprintf(buf, sizeof buf, "%d\n", nf_server_port(ns->srv));
		if ((rc = nf_fs_write_atomic(ns->o.port_file, buf, (size_t)n, 0644)) < 0)
			return rc;
	}
	return 0;
}

/* A line the scheduler has to say (its choices). */
static void log_line(const char *line)
{
	logf_("%s", line);
}

/* --max-batch and --max-context left at 0 take the manifest's serving
 * sizes (the recipe's), else 32 sequences and the model's context. */
static void take_manifest_sizes(opts *o, const nf_manifest *m)
{
	if (!o->max_batch)
		o->max_batch = m->max_batch ? m->max_batch : 32;
	if (!o->max_context)
		o->max_context = m->max_context;
}

/* The scheduler's options from the command line. */
static nf_sched_opts sched_opts(const opts *o)
{
	return (nf_sched_opts){
		.max_batch = (int)o->max_batch,
		.max_queue = (int)o->max_queue,
		.step_delay_us = (int)o->step_delay_us,
		.prefill_chunk = (int)o->prefill_chunk,
		.prefill_slack_pct = (int)o->prefill_slack,
		.prefix_cache = (int)o->prefix_cache,
		.spec_adaptive = (int)o->spec_adaptive,
		.log = log_line,
	};
}

/* The engine (and a draft engine) loaded, the scheduler running over it,
 * the server ready. */
static int start_engine(nimserve *ns)
{
	const nf_manifest_profile *p = &ns->m->profiles[ns->chosen];
	nf_sched_opts so;
	int rc;
	if ((rc = nf_engine_open(&ns->engine, p->engine_path, (int)ns->o.threads)) < 0)
		return nf_error_wrap(rc, "loading engine %s", p->engine_path);
	take_manifest_sizes(&ns->o, ns->m);
	if (ns->o.max_context && (rc = nf_engine_cap_context(ns->engine, (int)ns->o.max_context)) < 0)
		return nf_error_wrap(rc, "--max-context");
	on_gpu(ns->engine, &ns->o);
	so = sched_opts(&ns->o);
	if ((rc = speculation_setup(&so, &ns->draft, &ns->o, ns->m, &ns->gpus)) < 0 ||
	    (rc = nf_sched_new(&ns->sched, ns->engine, ns->metrics, &so)) < 0 ||
	    (rc = nf_server_set_ready(ns->srv, ns->engine, ns->sched)) < 0)
		return rc;
	logf_("ready: engine %s (%s, kernels %s, context %d), max batch %ld, queue %ld, prefix cache %s, "
	      "speculative %s%s", p->engine_path, nf_precision_name(nf_engine_precision(ns->engine)),
	      nf_engine_kernel_name(ns->engine), nf_engine_config(ns->engine)->max_seq_len,
	      ns->o.max_batch, ns->o.max_queue, ns->o.prefix_cache ? "on" : "off",
	      !so.spec_k ? "off" : so.spec_draft ? "by draft engine" : "lookup",
	      so.spec_k && so.spec_adaptive ? " (adaptive: drafts while that is cheaper a token)" : "");
	return 0;
}

/* After SIGTERM or SIGINT: no new requests; those in flight get up to
 * --drain-timeout, then the scheduler cancels what is left (so open
 * streams end) and the server stops. */
static void drain(nimserve *ns, int sig)
{
	double deadline = nf_sched_now() + (double)ns->o.drain_timeout;
	struct timespec ts = {0, 20 * 1000 * 1000};
	logf_("%s: no longer accepting; finishing %zu request(s) in flight",
	      sig == SIGTERM ? "SIGTERM" : "SIGINT", nf_sched_load(ns->sched));
	nf_server_quiesce(ns->srv);
	nf_sched_drain(ns->sched);
	while ((nf_sched_load(ns->sched) > 0 || nf_server_inflight(ns->srv) > 0) &&
	       nf_sched_now() < deadline)
		nanosleep(&ts, NULL);
	if (nf_sched_load(ns->sched) > 0 || nf_server_inflight(ns->srv) > 0)
		logf_("drain timeout after %lds: cancelling what is left", ns->o.drain_timeout);
	nf_sched_free(ns->sched);
	ns->sched = NULL;
	nf_server_free(ns->srv);
	ns->srv = NULL;
	logf_("stopped");
}

/* The scheduler before the server and the engines it steps. */
static void nimserve_release(nimserve *ns)
{
	nf_sched_free(ns->sched);
	nf_server_free(ns->srv);
	nf_engine_free(ns->engine);
	nf_engine_free(ns->draft);
	nf_metrics_free(ns->metrics);
	nf_manifest_free(ns->m);
}

int main(int argc, char **argv)
{
	nimserve ns;
	sigset_t sigs;
	int rc, sig = 0;

	/* Signals go to sigwait below, never to a handler in some other thread. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	if (info_flag(argc, argv))
		return 0;
	memset(&ns, 0, sizeof ns);
	if ((rc = parse_args(&ns.o, argc, argv)) < 0)
		goto done;
	if (ns.o.health)
		return nf_health_probe(ns.o.port);
	if ((rc = choose_profile(&ns)) != 0 || (rc = start_listening(&ns)) < 0 ||
	    (rc = start_engine(&ns)) < 0)
		goto done;
	while (sigwait(&sigs, &sig) != 0)
		;
	drain(&ns, sig);
done:
	if (rc < 0)
		fprintf(stderr, "nimserve: error: %s\n", nf_error_last());
	nimserve_release(&ns);
	return rc < 0 ? nf_error_exit_status(rc) : 0;
}
