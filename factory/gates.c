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
#include "engine/reference.h"
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

static int check_model_match(const nf_model_config *a, const nf_model_config *b, const char *dir)
{
	if (a->arch != b->arch || a->dim != b->dim || a->n_layers != b->n_layers ||
	    a->vocab_size != b->vocab_size ||
	    a->hidden_dim != b->hidden_dim || a->n_heads != b->n_heads || a->n_kv_heads != b->n_kv_heads)
		return nf_error_set(NF_EINPUT,
				    "%s: engine (dim %d, layers %d, vocab %d) does not match the "
				    "reference model (dim %d, layers %d, vocab %d)",
				    dir, a->dim, a->n_layers, a->vocab_size, b->dim, b->n_layers,
				    b->vocab_size);
	return 0;
}

/* Run one prompt teacher-forced through reference and engine; fills c. */
static int correctness_case(nf_gate_case *c, nf_engine *e, const nf_model *ref, const char *prompt,
			    const nf_gate_correctness_opts *o, float *logits, nf_log *log,
			    const char *stage, uint64_t *progress, uint64_t progress_total)
{
	const nf_tokenizer *tok = nf_engine_tokenizer(e);
	const nf_model_config *cfg = &ref->cfg;
	nf_ref_state *rs = NULL;
	nf_seq *seq = NULL;
	int *toks = NULL;
	size_t nt = 0;
	int rc, token, agree = 0, compared = 0;
	double err_max = 0, err_sum = 0, t0 = now_seconds();

	c->first_mismatch = -1;
	/* a gate prompt is model input: control tokens written in it are tokens */
	rc = nf_tokenizer_encode(tok, prompt, strlen(prompt), NF_TOK_ADD_SPECIAL | NF_TOK_PARSE_SPECIAL,
				 &toks, &nt);
	if (rc < 0)
		goto done;
	if (nt == 0 || nt >= (size_t)cfg->max_seq_len) {
		rc = nf_error_set(NF_EINPUT, "%s: %zu tokens do not fit the model's context of %d",
				  c->name, nt, cfg->max_seq_len);
		goto done;
	}
	c->prompt_tokens = (int)nt;
	if ((rc = nf_ref_state_new(&rs, ref)) < 0 || (rc = nf_seq_new(&seq, e)) < 0)
		goto done;

	token = toks[0];
	for (int pos = 0; pos < cfg->max_seq_len; pos++) {
		const float *r = nf_ref_forward(rs, token, pos);
		int next;
		if (!r) {
			rc = nf_error_last_code() < 0 ? nf_error_last_code() : NF_EINTERNAL;
			goto done;
		}
		rc = nf_engine_step(e, &seq, &token, &pos, 1, logits);
		if (rc < 0)
			goto done;
		if ((size_t)pos + 1 < nt) { /* still inside the prompt */
			token = toks[pos + 1];
			continue;
		}
		/* This position predicts continuation token number `compared`. */
		next = nf_argmax(r, cfg->vocab_size);
		if (nf_argmax(logits, cfg->vocab_size) == next)
			agree++;
		else if (c->first_mismatch < 0)
			c->first_mismatch = compared;
		double err = rel_error(logits, r, cfg->vocab_size);
		if (!(err <= err_max))
			err_max = err;
		err_sum += err;
		compared++;
		(*progress)++;
		nf_log_progress(log, stage, *progress, progress_total);
		if (compared >= o->max_tokens || nf_tokenizer_is_eog(tok, next) ||
		    next == nf_tokenizer_bos(tok))
			break;
		token = next;
	}
	c->positions = compared;
	c->seconds = now_seconds() - t0;
	c->metrics = calloc(3, sizeof(*c->metrics));
	if (!c->metrics) {
		rc = nf_error_set(NF_ENOMEM, "out of memory for gate metrics");
		goto done;
	}
	nf_gate_metric_set(&c->metrics[0], "agreement", "ratio",
			   compared ? (double)agree / compared : 0.0, NF_GATE_CMP_GE, o->min_agreement);
	nf_gate_metric_set(&c->metrics[1], "rel_err_max", "",
			   err_max, o->max_rel_err >= 0 ? NF_GATE_CMP_LE : NF_GATE_CMP_NONE, o->max_rel_err);
	nf_gate_metric_set(&c->metrics[2], "rel_err_mean", "", compared ? err_sum / compared : 0.0,
			   o->max_mean_rel_err >= 0 ? NF_GATE_CMP_LE : NF_GATE_CMP_NONE, o->max_mean_rel_err);
	c->n_metrics = 3;
	c->verdict = NF_VERDICT_PASSED;
	for (size_t i = 0; i < c->n_metrics; i++)
		if (!c->metrics[i].ok)
			c->verdict = NF_VERDICT_FAILED;
	if (compared == 0) {
		c->verdict = NF_VERDICT_FAILED;
		rc = nf_gate_set_reason(&c->reason, "no position was compared");
	} else {
		rc = case_reason(c);
	}
done:
	free(toks);
	nf_seq_free(seq);
	nf_ref_state_free(rs);
	return rc;
}

static void log_case(nf_log *log, const nf_gate_result *r, const nf_gate_case *c)
{
	nf_log_field f[8];
	size_t n = 0;
	char text[512];
	size_t tl = 0;

	f[n++] = NF_LOG_STR("profile", r->profile_name);
	f[n++] = NF_LOG_STR("gate", nf_gate_kind_name(r->kind));
	f[n++] = NF_LOG_STR("case", c->name);
	f[n++] = NF_LOG_STR("verdict", nf_verdict_name(c->verdict));
	text[0] = '\0';
	for (size_t i = 0; i < c->n_metrics && n < 8; i++) {
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

int nf_gate_correctness(nf_gate_result **out, const nf_profile *profile, const nf_model *ref,
			const char *engine_dir, const nf_gate_correctness_opts *o, nf_log *log)
{
	nf_gate_result *r = NULL;
	nf_engine *e = NULL;
	float *logits = NULL;
	int rc;
	uint64_t progress = 0, total = 0;
	double t0 = now_seconds(), agree_min = 1.0, err_max = 0, err_sum = 0;
	size_t positions = 0;

	*out = NULL;
	if (profile && profile->is_gpu)
		return nf_gate_skipped(out, profile, NF_GATE_CORRECTNESS, nf_gate_gpu_skip_reason());
	if (!ref || !engine_dir || !o || !o->prompts || o->n_prompts == 0 || o->max_tokens < 1 ||
	    !(o->min_agreement >= 0 && o->min_agreement <= 1))
		return nf_error_set(NF_EINPUT, "correctness gate: need a reference model, an engine, "
					       "at least one prompt, max_tokens >= 1 and min_agreement in [0, 1]");
	if ((rc = nf_gate_result_new(&r, profile, NF_GATE_CORRECTNESS)) < 0)
		goto done;
	if ((rc = nf_engine_open(&e, engine_dir, o->threads)) < 0) {
		nf_error_wrap(rc, "correctness gate of %s", r->profile_name);
		goto done;
	}
	if ((rc = check_model_match(nf_engine_config(e), &ref->cfg, engine_dir)) < 0)
		goto done;
	logits = calloc((size_t)ref->cfg.vocab_size, sizeof(float));
	r->cases = calloc(o->n_prompts, sizeof(*r->cases));
	if (!logits || !r->cases) {
		rc = nf_error_set(NF_ENOMEM, "out of memory for the correctness gate");
		goto done;
	}
	if (!nf_u64_mul(&total, o->n_prompts, (uint64_t)o->max_tokens))
		total = 0;
	for (size_t i = 0; i < o->n_prompts; i++) {
		nf_gate_case *c = &r->cases[i];
		const char *prompt = o->prompts[i] ? o->prompts[i] : "";
		r->n_cases = i + 1;
		c->name = prompt_label(i, prompt);
		c->prompt = strdup(prompt);
		if (!c->name || !c->prompt) {
			rc = nf_error_set(NF_ENOMEM, "out of memory for the correctness gate");
			goto done;
		}
		rc = correctness_case(c, e, ref, prompt, o, logits, log, GATE_STAGE, &progress, total);
		if (rc < 0) {
			nf_error_wrap(rc, "correctness gate of %s, %s", r->profile_name, c->name);
			goto done;
		}
		log_case(log, r, c);
		if (c->metrics[0].value < agree_min)
			agree_min = c->metrics[0].value;
		if (!(c->metrics[1].value <= err_max))
			err_max = c->metrics[1].value;
		err_sum += c->metrics[2].value * c->positions;
		positions += (size_t)c->positions;
	}
	r->metrics = calloc(3, sizeof(*r->metrics));
	if (!r->metrics) {
		rc = nf_error_set(NF_ENOMEM, "out of memory for gate metrics");
		goto done;
	}
	nf_gate_metric_set(&r->metrics[0], "agreement_min", "ratio", agree_min, NF_GATE_CMP_GE,
			   o->min_agreement);
	nf_gate_metric_set(&r->metrics[1], "rel_err_max", "", err_max,
			   o->max_rel_err >= 0 ? NF_GATE_CMP_LE : NF_GATE_CMP_NONE, o->max_rel_err);
	nf_gate_metric_set(&r->metrics[2], "rel_err_mean", "", positions ? err_sum / (double)positions : 0.0,
			   o->max_mean_rel_err >= 0 ? NF_GATE_CMP_LE : NF_GATE_CMP_NONE,
			   o->max_mean_rel_err);
	r->n_metrics = 3;
	rc = summarize(r);
	r->seconds = now_seconds() - t0;
done:
	free(logits);
	nf_engine_free(e);
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

int nf_gate_performance(nf_gate_result **out, const nf_profile *profile,
			const char *engine_dir, const nf_gate_perf_opts *o, nf_log *log)
{
	nf_gate_result *r = NULL;
	nf_engine *e = NULL;
	int rc, runs;
	double t0 = now_seconds(), best = 0;
	int64_t rss0, hwm_before, hwm, rss1, peak;
	bool reset;
	const char *prompt;
	const double mib = 1024.0 * 1024.0;

	*out = NULL;
	if (profile && profile->is_gpu)
		return nf_gate_skipped(out, profile, NF_GATE_PERFORMANCE, nf_gate_gpu_skip_reason());
	if (!engine_dir || !o || o->max_tokens < 1 || o->runs < 0)
		return nf_error_set(NF_EINPUT, "performance gate: need an engine and max_tokens >= 1");
	runs = o->runs ? o->runs : 3;
	prompt = o->prompt ? o->prompt : "";
	if ((rc = nf_gate_result_new(&r, profile, NF_GATE_PERFORMANCE)) < 0)
		goto done;

	hwm_before = proc_status_kb("VmHWM");
	rss0 = proc_status_kb("VmRSS");
	reset = reset_peak_rss();
	if ((rc = nf_engine_open(&e, engine_dir, o->threads)) < 0) {
		nf_error_wrap(rc, "performance gate of %s", r->profile_name);
		goto done;
	}
	for (int i = 0; i < runs; i++) {
		nf_gen_params gp = {.max_tokens = o->max_tokens < 2 ? 2 : o->max_tokens, .temperature = 0.0f, .top_p = 1.0f,
				    .seed = 1, .stop_at_eos = 0};
		nf_gen_stats st;
		memset(&st, 0, sizeof(st));
		rc = nf_generate(e, prompt, strlen(prompt), &gp, NULL, NULL, &st);
		if (rc < 0) {
			nf_error_wrap(rc, "performance gate of %s, run %d", r->profile_name, i + 1);
			goto done;
		}
		if (st.generated_tokens >= 2 && st.decode_seconds > 0) {
			double tps = (double)(st.generated_tokens - 1) / st.decode_seconds;
			if (tps > best)
				best = tps;
		}
		nf_log_progress(log, GATE_STAGE, (uint64_t)i + 1, (uint64_t)runs);
	}
	hwm = proc_status_kb("VmHWM");
	rss1 = proc_status_kb("VmRSS");
	peak = (reset ? hwm : rss1) - rss0;
	if (rss0 < 0 || hwm < 0 || rss1 < 0 || peak < 0)
		peak = 0;
	if (hwm_before > hwm)
		hwm = hwm_before;
	if (hwm < 0)
		hwm = 0;

	r->cases = calloc(2, sizeof(*r->cases));
	r->metrics = calloc(3, sizeof(*r->metrics));
	if (!r->cases || !r->metrics) {
		rc = nf_error_set(NF_ENOMEM, "out of memory for the performance gate");
		goto done;
	}
	r->n_cases = 2;
	r->cases[0].name = strdup("decode throughput");
	r->cases[1].name = strdup("peak memory");
	r->cases[0].prompt = strdup(prompt);
	r->cases[0].metrics = calloc(1, sizeof(nf_gate_metric));
	r->cases[1].metrics = calloc(2, sizeof(nf_gate_metric));
	if (!r->cases[0].name || !r->cases[1].name || !r->cases[0].prompt || !r->cases[0].metrics ||
	    !r->cases[1].metrics) {
		rc = nf_error_set(NF_ENOMEM, "out of memory for the performance gate");
		goto done;
	}
	r->cases[0].first_mismatch = r->cases[1].first_mismatch = -1;
	r->cases[0].positions = o->max_tokens;
	r->cases[0].n_metrics = 1;
	nf_gate_metric_set(&r->cases[0].metrics[0], "decode_tokens_per_s", "tokens/s", best,
			   o->min_tokens_per_s > 0 ? NF_GATE_CMP_GE : NF_GATE_CMP_NONE,
			   o->min_tokens_per_s);
	r->cases[1].n_metrics = 2;
	nf_gate_metric_set(&r->cases[1].metrics[0], "engine_peak_rss_mib", "MiB", (double)peak / mib,
			   o->max_memory_mib > 0 ? NF_GATE_CMP_LE : NF_GATE_CMP_NONE, o->max_memory_mib);
	nf_gate_metric_set(&r->cases[1].metrics[1], "process_peak_rss_mib", "MiB",
			   (double)hwm / mib, NF_GATE_CMP_NONE, 0);
	for (int i = 0; i < 2; i++) {
		nf_gate_case *c = &r->cases[i];
		c->verdict = c->metrics[0].ok ? NF_VERDICT_PASSED : NF_VERDICT_FAILED;
		if ((rc = case_reason(c)) < 0)
			goto done;
		if (!c->reason && c->metrics[0].cmp == NF_GATE_CMP_NONE &&
		    (rc = nf_gate_set_reason(&c->reason, "measured only: no bound set")) < 0)
			goto done;
		log_case(log, r, c);
	}
	if (!reset && (rc = nf_gate_set_reason(&r->cases[1].reason, "%s%s",
				       r->cases[1].reason ? r->cases[1].reason : "",
				       " (peak RSS could not be reset: RSS after the runs used)")) < 0)
		goto done;
	r->metrics[0] = r->cases[0].metrics[0];
	r->metrics[1] = r->cases[1].metrics[0];
	r->metrics[2] = r->cases[1].metrics[1];
	r->n_metrics = 3;
	rc = summarize(r);
	r->seconds = now_seconds() - t0;
done:
	nf_engine_free(e);
	if (rc < 0) {
		nf_gate_result_free(r);
		return rc;
	}
	*out = r;
	return 0;
}
