/* gates.c - correctness and performance gates of an engine (see gates.h). */
#include "factory/gates.h"

#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/generate.h"
#include "factory/gate_metrics.h"
#include "factory/gpu_profile.h"
#include "engine/tokenizer.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define GATE_STAGE "gate"
#define MAX_PROMPT_ECHO 40

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A short, one-line echo of a prompt for case names and logs. */
static char *prompt_label(size_t index, const char *prompt)
{
	char echo[MAX_PROMPT_ECHO * 4 + 8];
	size_t n = 0, len = strlen(prompt);
	for (size_t i = 0; i < len && n < MAX_PROMPT_ECHO; i++) {
		unsigned char c = (unsigned char)prompt[i];
		echo[n++] = (c < 0x20 || c == 0x7F) ? ' ' : (char)c;
	}
	/* Do not cut a UTF-8 sequence in half. */
	if (n < len) {
		while (n > 0 && ((unsigned char)prompt[n] & 0xC0) == 0x80)
			n--;
		memcpy(echo + n, "...", 3);
		n += 3;
	}
	echo[n] = '\0';
	return nf_strdup_printf("prompt %zu: \"%s\"", index + 1, echo);
}

/* ||a - r|| / ||r|| in double; +inf for non-finite values or a zero reference. */
static double rel_error(const float *a, const float *r, int n)
{
	double num = 0, den = 0;
	for (int i = 0; i < n; i++) {
		double d = (double)a[i] - (double)r[i];
		num += d * d;
		den += (double)r[i] * (double)r[i];
	}
	if (!isfinite(num) || !isfinite(den))
		return INFINITY;
	if (den == 0)
		return num == 0 ? 0.0 : INFINITY;
	return sqrt(num / den);
}

/* The first failing metric of a case, as a reason. */
static int case_reason(nf_gate_case *c)
{
	for (size_t i = 0; i < c->n_metrics; i++) {
		const nf_gate_metric *m = &c->metrics[i];
		if (!m->ok)
			return nf_gate_set_reason(&c->reason, "%s %.6g %s %.6g failed", m->name, m->value,
					  m->cmp == NF_GATE_CMP_GE ? "<" : ">", m->threshold);
	}
	return 0;
}

/* A bound below 0 is no bound: the metric is reported only. */
static nf_gate_cmp bound_cmp(double bound, nf_gate_cmp cmp)
{
	return bound >= 0 ? cmp : NF_GATE_CMP_NONE;
}

/* A case passes when every metric holds; the first that does not is its reason. */
static int case_verdict(nf_gate_case *c)
{
	c->verdict = NF_VERDICT_PASSED;
	for (size_t i = 0; i < c->n_metrics; i++)
		if (!c->metrics[i].ok)
			c->verdict = NF_VERDICT_FAILED;
	if (c->positions == 0) {
		c->verdict = NF_VERDICT_FAILED;
		return nf_gate_set_reason(&c->reason, "no position was compared");
	}
	return case_reason(c);
}

static int check_model_match(const nf_model_config *a, const nf_model_config *b, const char *dir)
{
	if (a->arch != b->arch || a->dim != b->dim || a->n_layers != b->n_layers ||
	    a->vocab_size != b->vocab_size ||
	    a->hidden_dim != b->hidden_dim || a->n_heads != b->n_heads || a->n_kv_heads != b->n_kv_heads ||
	    a->max_seq_len != b->max_seq_len)
		return nf_error_set(NF_EINPUT,
				    "%s: engine (dim %d, layers %d, vocab %d) does not match the "
				    "reference model (dim %d, layers %d, vocab %d)",
				    dir, a->dim, a->n_layers, a->vocab_size, b->dim, b->n_layers,
				    b->vocab_size);
	return 0;
}

/* Tokens fed per prefill call: bounds the logits buffer to (GATE_CHUNK, vocab). */
#define GATE_CHUNK 256

/* What a correctness gate runs with: the engine, a sequence, the buffers. */
typedef struct eval_run {
	nf_engine *e;
	nf_seq *seq;
	const nf_gate_ref *ref;
	float *logits;  /* (GATE_CHUNK, vocab) */
	float *scratch; /* (vocab): a reference row converted from half */
	int vocab;
	nf_log *log;
	uint64_t done, total; /* positions fed, for progress */
} eval_run;

/* Feed tokens[0, n) from position 0; fn sees each position's logits. */
typedef void (*row_fn)(void *ctx, int pos, const float *logits);
static int prefill_rows(eval_run *run, const int *tokens, int n, row_fn fn, void *ctx)
{
	for (int at = 0; at < n; at += GATE_CHUNK) {
		int k = n - at < GATE_CHUNK ? n - at : GATE_CHUNK;
		int rc = nf_engine_prefill_logits(run->e, run->seq, tokens + at, (size_t)k, at, run->logits);
		if (rc < 0)
			return rc;
		for (int b = 0; b < k; b++)
			fn(ctx, at + b, run->logits + (size_t)b * (size_t)run->vocab);
		run->done += (uint64_t)k;
		nf_log_progress(run->log, GATE_STAGE, run->done, run->total);
	}
	return 0;
}

typedef struct window_ctx {
	eval_run *run;
	const nf_gate_ref_window *w;
	nf_tf_acc acc;
} window_ctx;

static void window_row(void *ctx, int pos, const float *logits)
{
	window_ctx *x = ctx;
	const float *r = nf_gate_ref_row(x->run->ref, x->w->first_row + (size_t)pos, x->run->scratch);
	nf_tf_add(&x->acc, r, logits, x->run->vocab, x->w->tokens[pos + 1]);
}

/* Case "evaluation text": every window teacher-forced through one prefill. */
static int eval_text_case(nf_gate_case *c, eval_run *run, const nf_gate_bounds *bd)
{
	nf_tf_acc total = {0};
	nf_tf_metrics m;
	double t0 = now_seconds();
	int rc;

	for (size_t i = 0; i < run->ref->n_windows; i++) {
		window_ctx x = {.run = run, .w = &run->ref->windows[i]};
		if ((rc = prefill_rows(run, x.w->tokens, x.w->n_tokens - 1, window_row, &x)) < 0)
			return rc;
		nf_tf_merge(&total, &x.acc);
	}
	nf_tf_finish(&total, &m);
	c->seconds = now_seconds() - t0;
	c->positions = (int)total.positions;
	c->first_mismatch = -1;
	if (!(c->metrics = calloc(5, sizeof(*c->metrics))))
		return nf_error_set(NF_ENOMEM, "out of memory for gate metrics");
	c->n_metrics = 5;
	nf_gate_metric_set(&c->metrics[0], "top1_agreement", "ratio", m.top1_agreement,
			   bound_cmp(bd->min_top1_agreement, NF_GATE_CMP_GE), bd->min_top1_agreement);
	nf_gate_metric_set(&c->metrics[1], "kl_mean", "nats", m.kl_mean,
			   bound_cmp(bd->max_kl_mean, NF_GATE_CMP_LE), bd->max_kl_mean);
	nf_gate_metric_set(&c->metrics[2], "perplexity", "", m.perplexity, NF_GATE_CMP_NONE, 0);
	nf_gate_metric_set(&c->metrics[3], "perplexity_ref", "", m.perplexity_ref, NF_GATE_CMP_NONE, 0);
	nf_gate_metric_set(&c->metrics[4], "ppl_ratio", "ratio", m.ppl_ratio,
			   bound_cmp(bd->min_ppl_ratio, NF_GATE_CMP_GE), bd->min_ppl_ratio);
	return case_verdict(c);
}

typedef struct prompt_ctx {
	eval_run *run;
	const nf_gate_ref_prompt *p;
	int agree, compared, first_mismatch;
	double err_max, err_sum;
} prompt_ctx;

static void prompt_row(void *ctx, int pos, const float *logits)
{
	prompt_ctx *x = ctx;
	int k = pos - (x->p->n_prompt - 1); /* continuation token k is predicted here */
	if (k < 0)
		return;
	const float *r = nf_gate_ref_row(x->run->ref, x->p->first_row + (size_t)k, x->run->scratch);
	if (nf_argmax(logits, x->run->vocab) == x->p->tokens[pos + 1])
		x->agree++;
	else if (x->first_mismatch < 0)
		x->first_mismatch = k;
	double err = rel_error(logits, r, x->run->vocab);
	if (!(err <= x->err_max))
		x->err_max = err;
	x->err_sum += err;
	x->compared++;
}

/* A prompt case: the prompt and the reference's continuation in one prefill. */
static int prompt_case(nf_gate_case *c, eval_run *run, const nf_gate_ref_prompt *p,
		       const nf_gate_bounds *bd)
{
	prompt_ctx x = {.run = run, .p = p, .first_mismatch = -1};
	double t0 = now_seconds();
	int rc = prefill_rows(run, p->tokens, p->n_prompt + p->n_continued - 1, prompt_row, &x);
	if (rc < 0)
		return rc;
	c->seconds = now_seconds() - t0;
	c->prompt_tokens = p->n_prompt;
	c->positions = x.compared;
	c->first_mismatch = x.first_mismatch;
	if (!(c->metrics = calloc(3, sizeof(*c->metrics))))
		return nf_error_set(NF_ENOMEM, "out of memory for gate metrics");
	c->n_metrics = 3;
	nf_gate_metric_set(&c->metrics[0], "agreement", "ratio",
			   x.compared ? (double)x.agree / x.compared : 0.0,
			   bound_cmp(bd->min_greedy_agreement, NF_GATE_CMP_GE), bd->min_greedy_agreement);
	nf_gate_metric_set(&c->metrics[1], "rel_err_max", "", x.err_max,
			   bound_cmp(bd->max_rel_err, NF_GATE_CMP_LE), bd->max_rel_err);
	nf_gate_metric_set(&c->metrics[2], "rel_err_mean", "", x.compared ? x.err_sum / x.compared : 0.0,
			   NF_GATE_CMP_NONE, 0);
	return case_verdict(c);
}

static void log_case(nf_log *log, const nf_gate_result *r, const nf_gate_case *c)
{
	nf_log_field f[12];
	size_t n = 0;
	char text[512];
	size_t tl = 0;

	f[n++] = NF_LOG_STR("profile", r->profile_name);
	f[n++] = NF_LOG_STR("gate", nf_gate_kind_name(r->kind));
	f[n++] = NF_LOG_STR("case", c->name);
	f[n++] = NF_LOG_STR("verdict", nf_verdict_name(c->verdict));
	text[0] = '\0';
	for (size_t i = 0; i < c->n_metrics && n < 12; i++) {
		const nf_gate_metric *m = &c->metrics[i];
		f[n++] = NF_LOG_DBL(m->name, m->value);
		bool big = isfinite(m->value) && fabs(m->value) >= 1e4 && fabs(m->value) < 1e9;
		int w = snprintf(text + tl, sizeof(text) - tl, big ? "%s%s %.0f" : "%s%s %.4g", i ? ", " : "",
				 m->name, m->value);
		if (w > 0 && (size_t)w < sizeof(text) - tl)
			tl += (size_t)w;
	}
	nf_log_event(log, c->verdict == NF_VERDICT_FAILED ? NF_LOG_WARN : NF_LOG_INFO, GATE_STAGE,
		     "gate_case", f, n, "%s %s %s: %s: %s", r->profile_name, nf_gate_kind_name(r->kind),
		     c->name, text, nf_verdict_name(c->verdict));
}

/* Fill r's verdict and reason from its cases. */
static int summarize(nf_gate_result *r)
{
	for (size_t i = 0; i < r->n_cases; i++) {
		if (r->cases[i].verdict == NF_VERDICT_FAILED) {
			r->verdict = NF_VERDICT_FAILED;
			return nf_gate_set_reason(&r->reason, "%s: %s", r->cases[i].name,
					  r->cases[i].reason ? r->cases[i].reason : "failed");
		}
	}
	r->verdict = NF_VERDICT_PASSED;
	return 0;
}

/* The summary of a correctness gate: the evaluation text's metrics (case
 * 0) and, over the prompt cases, the lowest agreement and the rel_err. */
static int correctness_summary(nf_gate_result *r, const nf_gate_bounds *bd)
{
	double agree_min = 1.0, err_max = 0, err_sum = 0;
	size_t positions = 0;
	for (size_t i = 1; i < r->n_cases; i++) {
		const nf_gate_case *c = &r->cases[i];
		if (c->metrics[0].value < agree_min)
			agree_min = c->metrics[0].value;
		if (!(c->metrics[1].value <= err_max))
			err_max = c->metrics[1].value;
		err_sum += c->metrics[2].value * c->positions;
		positions += (size_t)c->positions;
	}
	if (!(r->metrics = calloc(8, sizeof(*r->metrics))))
		return nf_error_set(NF_ENOMEM, "out of memory for gate metrics");
	memcpy(r->metrics, r->cases[0].metrics, 5 * sizeof(*r->metrics));
	nf_gate_metric_set(&r->metrics[5], "agreement_min", "ratio", agree_min,
			   bound_cmp(bd->min_greedy_agreement, NF_GATE_CMP_GE), bd->min_greedy_agreement);
	nf_gate_metric_set(&r->metrics[6], "rel_err_max", "", err_max,
			   bound_cmp(bd->max_rel_err, NF_GATE_CMP_LE), bd->max_rel_err);
	nf_gate_metric_set(&r->metrics[7], "rel_err_mean", "", positions ? err_sum / (double)positions : 0.0,
			   NF_GATE_CMP_NONE, 0);
	r->n_metrics = 8;
	return summarize(r);
}

static int eval_run_open(eval_run *run, const char *engine_dir, const nf_gate_ref *ref, int threads,
			 int on_gpu, nf_log *log)
{
	int rc;
	run->ref = ref;
	run->vocab = ref->cfg.vocab_size;
	run->log = log;
	for (size_t i = 0; i < ref->n_windows; i++)
		run->total += (uint64_t)ref->windows[i].n_tokens - 1;
	for (size_t i = 0; i < ref->n_prompts; i++)
		run->total += (uint64_t)ref->prompts[i].n_prompt + (uint64_t)ref->prompts[i].n_continued - 1;
	if ((rc = nf_engine_open(&run->e, engine_dir, threads)) < 0 ||
	    (on_gpu && (rc = nf_engine_use_gpu(run->e, 1)) < 0) ||
	    (rc = check_model_match(nf_engine_config(run->e), &ref->cfg, engine_dir)) < 0 ||
	    (rc = nf_seq_new(&run->seq, run->e)) < 0)
		return rc;
	run->logits = calloc((size_t)GATE_CHUNK * (size_t)run->vocab, sizeof(float));
	run->scratch = calloc((size_t)run->vocab, sizeof(float));
	if (!run->logits || !run->scratch)
		return nf_error_set(NF_ENOMEM, "out of memory for the correctness gate");
	return 0;
}

static void eval_run_close(eval_run *run)
{
	free(run->logits);
	free(run->scratch);
	nf_seq_free(run->seq);
	nf_engine_free(run->e);
}

/* The cases of a correctness gate: the evaluation text, then each prompt. */
static int correctness_cases(nf_gate_result *r, eval_run *run, const nf_gate_bounds *bd, nf_log *log)
{
	const nf_gate_ref *ref = run->ref;
	int rc;
	if (!(r->cases = calloc(ref->n_prompts + 1, sizeof(*r->cases))))
		return nf_error_set(NF_ENOMEM, "out of memory for the correctness gate");
	r->n_cases = 1;
	if (!(r->cases[0].name = strdup("evaluation text")))
		return nf_error_set(NF_ENOMEM, "out of memory for the correctness gate");
	if ((rc = eval_text_case(&r->cases[0], run, bd)) < 0)
		return nf_error_wrap(rc, "correctness gate of %s, evaluation text", r->profile_name);
	log_case(log, r, &r->cases[0]);
	for (size_t i = 0; i < ref->n_prompts; i++) {
		nf_gate_case *c = &r->cases[i + 1];
		r->n_cases = i + 2;
		if (!(c->name = prompt_label(i, ref->prompts[i].text)) ||
		    !(c->prompt = strdup(ref->prompts[i].text)))
			return nf_error_set(NF_ENOMEM, "out of memory for the correctness gate");
		if ((rc = prompt_case(c, run, &ref->prompts[i], bd)) < 0)
			return nf_error_wrap(rc, "correctness gate of %s, %s", r->profile_name, c->name);
		log_case(log, r, c);
	}
	return 0;
}

int nf_gate_correctness(nf_gate_result **out, const nf_profile *profile, const char *engine_dir,
			const nf_gate_correctness_opts *o, nf_log *log)
{
	nf_gate_result *r = NULL;
	eval_run run = {0};
	double t0 = now_seconds();
	int rc;

	*out = NULL;
	/* a GPU profile's gates run on its GPU when it is here, else skipped */
	char why[256];
	int on_gpu = profile && profile->is_gpu;
	if (on_gpu && !nf_gpu_profile_gates_here(profile, why, sizeof why))
		return nf_gpu_profile_gate(out, profile, engine_dir, NF_GATE_CORRECTNESS);
	if (!engine_dir || !o || !o->ref)
		return nf_error_set(NF_EINPUT, "correctness gate: need an engine and the float32 reference");
	if ((rc = nf_gate_result_new(&r, profile, NF_GATE_CORRECTNESS)) < 0)
		goto done;
	if ((rc = eval_run_open(&run, engine_dir, o->ref, o->threads, on_gpu, log)) < 0) {
		nf_error_wrap(rc, "correctness gate of %s", r->profile_name);
		goto done;
	}
	if ((rc = correctness_cases(r, &run, &o->bounds, log)) < 0 ||
	    (rc = correctness_summary(r, &o->bounds)) < 0)
		goto done;
	r->seconds = now_seconds() - t0;
done:
	eval_run_close(&run);
	if (rc < 0) {
		nf_gate_result_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

/* A "Key:   123 kB" line of /proc/self/status, in bytes; -1 when absent.
 * (procfs files report size 0, so this reads line by line.) */
static int64_t proc_status_kb(const char *key)
{
	char line[256];
	size_t klen = strlen(key);
	int64_t v = -1;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			char *end = NULL;
			long long kb = strtoll(line + klen + 1, &end, 10);
			if (end != line + klen + 1 && kb >= 0 && kb < (1LL << 40))
				v = kb * 1024;
			break;
		}
	}
	fclose(f);
	return v;
}

/* Reset the process's peak RSS to its current RSS (Linux >= 4.0). */
static bool reset_peak_rss(void)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	bool ok;
	if (fd < 0)
		return false;
	ok = write(fd, "5", 1) == 1;
	close(fd);
	return ok;
}

/* What the runs of a performance gate measured (best of the runs). */
typedef struct perf_measure {
	double decode_tps, prefill_tps, ttft_s;
	int prefill_tokens;
	int64_t peak, hwm;  /* bytes: the engine's peak resident, the process's */
	bool reset;         /* the peak could be reset (else RSS after the runs) */
	double engine_bytes;
} perf_measure;

/* Bytes of the regular files in a folder (the engine's files, one level). */
static int add_file_size(void *ctx, const char *path, const char *name)
{
	uint64_t size = 0;
	if (!nf_fs_is_dir(path) && nf_fs_file_size(&size, path) == 0)
		*(double *)ctx += (double)size;
	return 0;
}

/* Decode speed and time to first token of one greedy generation. */
static int run_generate(nf_engine *e, const char *prompt, int max_tokens, perf_measure *pm)
{
	nf_gen_params gp = {.max_tokens = max_tokens < 2 ? 2 : max_tokens, .temperature = 0.0f,
			    .top_p = 1.0f, .seed = 1, .stop_at_eos = 0};
	nf_gen_stats st;
	memset(&st, 0, sizeof(st));
	int rc = nf_generate(e, prompt, strlen(prompt), &gp, NULL, NULL, &st);
	if (rc < 0)
		return rc;
	if (st.generated_tokens >= 2 && st.decode_seconds > 0) {
		double tps = (double)(st.generated_tokens - 1) / st.decode_seconds;
		if (tps > pm->decode_tps)
			pm->decode_tps = tps;
	}
	if (st.first_token_seconds > 0 && (pm->ttft_s == 0 || st.first_token_seconds < pm->ttft_s))
		pm->ttft_s = st.first_token_seconds;
	return 0;
}

/* Prefill speed: tokens[0, n) in one prefill of a fresh sequence. */
static int run_prefill(nf_engine *e, const int *tokens, int n, float *logits, perf_measure *pm)
{
	nf_seq *s = NULL;
	int rc = nf_seq_new(&s, e);
	double t0 = now_seconds();
	if (rc == 0)
		rc = nf_engine_prefill(e, s, tokens, (size_t)n, 0, logits);
	double dt = now_seconds() - t0;
	nf_seq_free(s);
	if (rc == 0 && dt > 0 && n / dt > pm->prefill_tps)
		pm->prefill_tps = n / dt;
	return rc;
}

/* The tokens to prefill: the options' (an evaluation window), else the prompt's. */
static int prefill_input(nf_engine *e, const nf_gate_perf_opts *o, const char *prompt, int **owned,
			 const int **tokens, int *n)
{
	size_t nt = 0;
	int max = nf_engine_config(e)->max_seq_len, rc;
	*owned = NULL;
	if (o->prefill_tokens && o->n_prefill_tokens > 0) {
		*tokens = o->prefill_tokens;
		*n = o->n_prefill_tokens < max ? o->n_prefill_tokens : max;
		return 0;
	}
	rc = nf_tokenizer_encode(nf_engine_tokenizer(e), prompt, strlen(prompt),
				 NF_TOK_ADD_SPECIAL | NF_TOK_PARSE_SPECIAL, owned, &nt);
	if (rc < 0)
		return rc;
	if (nt == 0 || nt > (size_t)max)
		return nf_error_set(NF_EINPUT, "performance gate: the prompt's %zu tokens do not fit "
				    "the context of %d", nt, max);
	*tokens = *owned;
	*n = (int)nt;
	return 0;
}

/* Open the engine and run it `runs` times; the peak RSS spans all of it. */
static int perf_runs(perf_measure *pm, const char *engine_dir, const nf_gate_perf_opts *o,
		     const char *prompt, int runs, int on_gpu, nf_log *log)
{
	nf_engine *e = NULL;
	int *owned = NULL, n = 0, rc;
	const int *tokens = NULL;
	float *logits = NULL;
	int64_t hwm_before = proc_status_kb("VmHWM"), rss0 = proc_status_kb("VmRSS");

	pm->reset = reset_peak_rss();
	if ((rc = nf_engine_open(&e, engine_dir, o->threads)) < 0 ||
	    (on_gpu && (rc = nf_engine_use_gpu(e, 1)) < 0) ||
	    (rc = prefill_input(e, o, prompt, &owned, &tokens, &n)) < 0)
		goto done;
	if (!(logits = calloc((size_t)nf_engine_config(e)->vocab_size, sizeof(float)))) {
		rc = nf_error_set(NF_ENOMEM, "out of memory for the performance gate");
		goto done;
	}
	pm->prefill_tokens = n;
	for (int i = 0; i < runs; i++) {
		if ((rc = run_generate(e, prompt, o->max_tokens, pm)) < 0 ||
		    (rc = run_prefill(e, tokens, n, logits, pm)) < 0) {
			nf_error_wrap(rc, "run %d", i + 1);
			goto done;
		}
		nf_log_progress(log, GATE_STAGE, (uint64_t)i + 1, (uint64_t)runs);
	}
	int64_t hwm = proc_status_kb("VmHWM"), rss1 = proc_status_kb("VmRSS");
	pm->peak = (pm->reset ? hwm : rss1) - rss0;
	if (rss0 < 0 || hwm < 0 || rss1 < 0 || pm->peak < 0)
		pm->peak = 0;
	pm->hwm = hwm_before > hwm ? hwm_before : hwm < 0 ? 0 : hwm;
	rc = nf_fs_each_child(engine_dir, add_file_size, &pm->engine_bytes);
done:
	free(logits);
	free(owned);
	nf_engine_free(e);
	return rc;
}

/* Append a case of one metric, or two, to r (cases preallocated). */
static int perf_case(nf_gate_result *r, const char *name, const char *prompt, const nf_gate_metric *m,
		     size_t nm, int positions)
{
	nf_gate_case *c = &r->cases[r->n_cases++];
	c->first_mismatch = -1;
	c->positions = positions;
	if (!(c->name = strdup(name)) || (prompt && !(c->prompt = strdup(prompt))) ||
	    !(c->metrics = calloc(nm, sizeof(*c->metrics))))
		return nf_error_set(NF_ENOMEM, "out of memory for the performance gate");
	memcpy(c->metrics, m, nm * sizeof(*m));
	c->n_metrics = nm;
	c->verdict = NF_VERDICT_PASSED;
	for (size_t i = 0; i < nm; i++)
		if (!m[i].ok)
			c->verdict = NF_VERDICT_FAILED;
	int rc = case_reason(c);
	if (rc == 0 && !c->reason && m[0].cmp == NF_GATE_CMP_NONE)
		rc = nf_gate_set_reason(&c->reason, "measured only: no bound set");
	return rc;
}

/* A bound > 0 is a bound; 0 or less is none (reported only). */
static nf_gate_cmp positive_cmp(double bound, nf_gate_cmp cmp)
{
	return bound > 0 ? cmp : NF_GATE_CMP_NONE;
}

/* The cases and summary of a performance gate from what was measured. */
static int perf_result(nf_gate_result *r, const perf_measure *pm, const nf_gate_perf_opts *o,
		       const char *prompt, nf_log *log)
{
	const double mib = 1024.0 * 1024.0;
	nf_gate_metric m[6];
	int rc;

	nf_gate_metric_set(&m[0], "decode_tokens_per_s", "tokens/s", pm->decode_tps,
			   positive_cmp(o->min_tokens_per_s, NF_GATE_CMP_GE), o->min_tokens_per_s);
	nf_gate_metric_set(&m[1], "engine_peak_rss_mib", "MiB", (double)pm->peak / mib,
			   positive_cmp(o->max_memory_mib, NF_GATE_CMP_LE), o->max_memory_mib);
	nf_gate_metric_set(&m[2], "process_peak_rss_mib", "MiB", (double)pm->hwm / mib, NF_GATE_CMP_NONE, 0);
	nf_gate_metric_set(&m[3], "prefill_tokens_per_s", "tokens/s", pm->prefill_tps,
			   positive_cmp(o->min_prefill_tokens_per_s, NF_GATE_CMP_GE), o->min_prefill_tokens_per_s);
	nf_gate_metric_set(&m[4], "ttft_ms", "ms", pm->ttft_s * 1000.0,
			   positive_cmp(o->max_ttft_ms, NF_GATE_CMP_LE), o->max_ttft_ms);
	nf_gate_metric_set(&m[5], "engine_mib", "MiB", pm->engine_bytes / mib, NF_GATE_CMP_NONE, 0);
	if (!(r->cases = calloc(6, sizeof(*r->cases))) || !(r->metrics = calloc(6, sizeof(*r->metrics))))
		return nf_error_set(NF_ENOMEM, "out of memory for the performance gate");
	memcpy(r->metrics, m, sizeof(m));
	r->n_metrics = 6;
	if ((rc = perf_case(r, "decode throughput", prompt, &m[0], 1, o->max_tokens)) < 0 ||
	    (rc = perf_case(r, "peak memory", NULL, &m[1], 2, 0)) < 0 ||
	    (rc = perf_case(r, "prefill throughput", NULL, &m[3], 1, pm->prefill_tokens)) < 0 ||
	    (rc = perf_case(r, "time to first token", prompt, &m[4], 1, 0)) < 0 ||
	    (rc = perf_case(r, "engine size", NULL, &m[5], 1, 0)) < 0)
		return rc;
	if (!pm->reset && (rc = nf_gate_set_reason(&r->cases[1].reason, "%s%s",
					   r->cases[1].reason ? r->cases[1].reason : "",
					   " (peak RSS could not be reset: RSS after the runs used)")) < 0)
		return rc;
	for (size_t i = 0; i < r->n_cases; i++)
		log_case(log, r, &r->cases[i]);
	return summarize(r);
}

int nf_gate_performance(nf_gate_result **out, const nf_profile *profile,
			const char *engine_dir, const nf_gate_perf_opts *o, nf_log *log)
{
	nf_gate_result *r = NULL;
	perf_measure pm;
	double t0 = now_seconds();
	int rc;

	*out = NULL;
	char why[256];
	int on_gpu = profile && profile->is_gpu;
	if (on_gpu && !nf_gpu_profile_gates_here(profile, why, sizeof why))
		return nf_gpu_profile_gate(out, profile, engine_dir, NF_GATE_PERFORMANCE);
	if (!engine_dir || !o || o->max_tokens < 1 || o->runs < 0)
		return nf_error_set(NF_EINPUT, "performance gate: need an engine and max_tokens >= 1");
	memset(&pm, 0, sizeof(pm));
	const char *prompt = o->prompt ? o->prompt : "";
	if ((rc = nf_gate_result_new(&r, profile, NF_GATE_PERFORMANCE)) < 0)
		goto done;
	if ((rc = perf_runs(&pm, engine_dir, o, prompt, o->runs ? o->runs : 3, on_gpu, log)) < 0) {
		nf_error_wrap(rc, "performance gate of %s", r->profile_name);
		goto done;
	}
	if ((rc = perf_result(r, &pm, o, prompt, log)) < 0 ||
	    (on_gpu && (rc = nf_gpu_profile_perf_roofline(r, engine_dir)) < 0))
		goto done;
	r->seconds = now_seconds() - t0;
done:
	if (rc < 0) {
		nf_gate_result_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

static const nf_gate_metric *find_metric(const nf_gate_result *r, const char *name)
{
	for (size_t i = 0; r && i < r->n_metrics; i++)
		if (!strcmp(r->metrics[i].name, name))
			return &r->metrics[i];
	return NULL;
}

/* value(r) / value(base) of one metric; 0 when either is missing or zero. */
static double metric_ratio(const nf_gate_result *r, const nf_gate_result *base, const char *name,
			   bool inverse)
{
	const nf_gate_metric *a = find_metric(r, name), *b = find_metric(base, name);
	if (!a || !b || a->value <= 0 || b->value <= 0)
		return 0;
	return inverse ? b->value / a->value : a->value / b->value;
}

int nf_gate_perf_ratios(nf_gate_result *r, const nf_gate_result *base, const nf_gate_ratio_bounds *b,
			nf_log *log)
{
	nf_gate_metric m[5];
	nf_gate_metric *all;
	int rc;

	if (!r || !base || !b || r->kind != NF_GATE_PERFORMANCE || r->verdict == NF_VERDICT_SKIPPED)
		return 0;
	nf_gate_metric_set(&m[0], "decode_speedup", "ratio", metric_ratio(r, base, "decode_tokens_per_s", false),
			   positive_cmp(b->min_decode_speedup, NF_GATE_CMP_GE), b->min_decode_speedup);
	nf_gate_metric_set(&m[1], "prefill_speedup", "ratio",
			   metric_ratio(r, base, "prefill_tokens_per_s", false),
			   positive_cmp(b->min_prefill_speedup, NF_GATE_CMP_GE), b->min_prefill_speedup);
	nf_gate_metric_set(&m[2], "ttft_ratio", "ratio", metric_ratio(r, base, "ttft_ms", false),
			   positive_cmp(b->max_ttft_ratio, NF_GATE_CMP_LE), b->max_ttft_ratio);
	nf_gate_metric_set(&m[3], "memory_ratio", "ratio", metric_ratio(r, base, "engine_peak_rss_mib", false),
			   positive_cmp(b->max_memory_ratio, NF_GATE_CMP_LE), b->max_memory_ratio);
	nf_gate_metric_set(&m[4], "size_ratio", "ratio", metric_ratio(r, base, "engine_mib", false),
			   positive_cmp(b->max_size_ratio, NF_GATE_CMP_LE), b->max_size_ratio);
	nf_gate_case *cases = realloc(r->cases, (r->n_cases + 1) * sizeof(*cases));
	if (!cases)
		return nf_error_set(NF_ENOMEM, "out of memory for the performance gate");
	r->cases = cases;
	memset(&r->cases[r->n_cases], 0, sizeof(r->cases[0]));
	if ((rc = perf_case(r, "ratios to fp32", NULL, m, 5, 0)) < 0)
		return rc;
	log_case(log, r, &r->cases[r->n_cases - 1]);
	if (!(all = realloc(r->metrics, (r->n_metrics + 5) * sizeof(*all))))
		return nf_error_set(NF_ENOMEM, "out of memory for the performance gate");
	memcpy(all + r->n_metrics, m, sizeof(m));
	r->metrics = all;
	r->n_metrics += 5;
	free(r->reason);
	r->reason = NULL;
	return summarize(r);
}
