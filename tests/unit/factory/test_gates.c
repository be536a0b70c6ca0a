/* test_gates.c - correctness and performance gates on the real stories260K model (fp32, int8-wo, GPU skip). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/engine.h"
#include "factory/gate_defaults.h"
#include "factory/gates.h"
#include "factory/log.h"
#include "factory/report.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"

static nf_profile mkprofile(const char *name, const char *device, nf_precision prec, int gpu)
{
	nf_profile p;
	memset(&p, 0, sizeof(p));
	snprintf(p.id, sizeof(p.id), "id-%s", name);
	snprintf(p.name, sizeof(p.name), "%s", name);
	snprintf(p.device, sizeof(p.device), "%s", device);
	p.precision = prec;
	p.is_gpu = gpu;
	return p;
}

static const nf_gate_metric *metric(const nf_gate_result *r, const char *name)
{
	for (size_t i = 0; r && i < r->n_metrics; i++)
		if (strcmp(r->metrics[i].name, name) == 0)
			return &r->metrics[i];
	return NULL;
}

static double mval(const nf_gate_result *r, const char *name)
{
	const nf_gate_metric *m = metric(r, name);
	return m ? m->value : NAN;
}

/* Overwrite the middle half of a file with pseudo-random bytes (the header
 * at its start stays readable). */
static int scramble_weights(const char *path)
{
	char *data = NULL;
	size_t len = 0;
	uint32_t x = 12345;
	int rc = nf_fs_read_file(&data, &len, path, (size_t)1 << 30);
	if (rc < 0)
		return rc;
	for (size_t i = len / 4; i < len / 4 * 3; i++) {
		x = x * 1103515245u + 12345u;
		data[i] = (char)(x >> 24);
	}
	rc = nf_fs_write_atomic(path, data, len, 0644);
	free(data);
	return rc;
}

static const char *prompts[] = {"", "Once upon a time", "The little dog was sad because"};
#define N_PROMPTS (sizeof(prompts) / sizeof(prompts[0]))
#define MAX_TOKENS 48

int main(void)
{
	const char *shared = tap_env("NF_SHARED", "../shared");
	char *ckpt = nf_strdup_printf("%s/models/stories260K/stories260K.bin", shared);
	char *tok = nf_strdup_printf("%s/models/stories260K/tok512.bin", shared);
	char tmpl[] = "/tmp/nf_test_gates.XXXXXX";
	char *tmp = NULL, *dir32 = NULL, *dir8 = NULL;
	nf_model *m = NULL;
	nf_gate_results rs;
	nf_gate_result *r = NULL;
	nf_tokenizer *tk = NULL;
	nf_gate_ref *ref = NULL;
	nf_log *log = NULL;
	char *logbuf = NULL;
	size_t loglen = 0;
	FILE *logf = open_memstream(&logbuf, &loglen);
	nf_log_opts lo = {.stream = logf, .format = NF_LOG_FMT_JSON, .level = NF_LOG_INFO};
	int rc;

	nf_gate_results_init(&rs);
	if (!nf_fs_exists(ckpt) || !nf_fs_exists(tok)) {
		skip("stories260K not found under %s", shared);
		goto done;
	}
	tmp = mkdtemp(tmpl);
	ok(tmp != NULL, "temp dir");
	if (!tmp)
		goto done;
	ok(nf_log_new(&log, &lo) == 0, "logger");
	rc = nf_ckpt_load(&m, ckpt, NF_CKPT_LLAMA2C);
	is_int(rc, 0, "load stories260K: %s", nf_error_last());
	if (rc < 0)
		goto done;
	dir32 = nf_path_join(tmp, "fp32");
	dir8 = nf_path_join(tmp, "int8");
	nf_engine_build_opts bo = {.precision = NF_PREC_FP32, .tokenizer_path = tok, .threads = 1, .autotune = 0};
	rc = nf_engine_build(dir32, m, &bo);
	is_int(rc, 0, "build fp32 engine: %s", nf_error_last());
	bo.precision = NF_PREC_INT8_WO;
	rc = nf_engine_build(dir8, m, &bo);
	is_int(rc, 0, "build int8-wo engine: %s", nf_error_last());

	nf_profile p32 = mkprofile("cpu-fp32", "cpu", NF_PREC_FP32, 0);
	nf_profile p8 = mkprofile("cpu-int8-wo", "cpu", NF_PREC_INT8_WO, 0);
	nf_profile pgpu = mkprofile("h100-fp16", "h100", NF_PREC_FP16, 1);

	/* The float32 reference, once: 600 text tokens make two windows of the
	 * 512-token context (BOS + 511, BOS + 89). */
	rc = nf_ckpt_load_tokenizer(&tk, ckpt, NF_CKPT_LLAMA2C, tok, m->cfg.vocab_size);
	is_int(rc, 0, "tokenizer: %s", nf_error_last());
	nf_gate_ref_opts ro = {.eval_tokens = 600, .prompts = prompts, .n_prompts = N_PROMPTS,
			       .max_tokens = MAX_TOKENS, .tmp_dir = tmp, .threads = 2};
	rc = rc ? rc : nf_gate_ref_new(&ref, m, tk, &ro, log);
	is_int(rc, 0, "float32 reference computed: %s", nf_error_last());
	if (rc < 0)
		goto done;
	ok(ref->n_windows == 2 && ref->windows[0].n_tokens == 512 && ref->windows[1].n_tokens == 90 &&
		   ref->text_tokens == 600 && ref->windows[1].tokens[0] == ref->windows[0].tokens[0],
	   "two windows, each led by BOS (%zu windows, %zu text tokens)", ref->n_windows, ref->text_tokens);
	size_t cont = 0;
	for (size_t i = 0; i < ref->n_prompts; i++)
		cont += (size_t)ref->prompts[i].n_continued;
	ok(ref->n_rows == 511 + 89 + cont && !ref->half && nf_fs_exists(ref->path),
	   "one float32 row per predicting position (%zu rows) in a file", ref->n_rows);
	ok(ref->prompts[0].n_prompt == 1 && ref->prompts[0].n_continued == MAX_TOKENS,
	   "empty prompt: BOS only, %d tokens continued", ref->prompts[0].n_continued);
	diag("reference: %zu rows in %.3f s", ref->n_rows, ref->seconds);

	/* fp32: the engine is the reference's arithmetic: exact. */
	nf_gate_correctness_opts co = {.ref = ref, .bounds = *nf_gate_defaults_for("fp32"), .threads = 2};
	rc = nf_gate_correctness(&r, &p32, dir32, &co, log);
	is_int(rc, 0, "fp32 correctness gate ran: %s", nf_error_last());
	if (rc == 0) {
		is_int(r->verdict, NF_VERDICT_PASSED, "fp32 passes its defaults (%s)", r->reason ? r->reason : "");
		ok(mval(r, "top1_agreement") == 1.0 && mval(r, "kl_mean") < 1e-9 &&
			   fabs(mval(r, "ppl_ratio") - 1.0) < 1e-9,
		   "fp32: top-1 1, KL %.3g, ppl_ratio %.9f", mval(r, "kl_mean"), mval(r, "ppl_ratio"));
		ok(mval(r, "perplexity") > 1 && mval(r, "perplexity") < 512 &&
			   mval(r, "perplexity") == mval(r, "perplexity_ref"),
		   "fp32 perplexity %.2f between 1 and the vocabulary", mval(r, "perplexity"));
		ok(mval(r, "agreement_min") == 1.0 && mval(r, "rel_err_max") < 1e-5, "fp32 greedy agreement 1, rel_err %.3g",
		   mval(r, "rel_err_max"));
		is_int(r->n_cases, N_PROMPTS + 1, "the evaluation text, then one case per prompt");
		is_str(r->cases[0].name, "evaluation text", "case 0 is the evaluation text");
		is_int(r->cases[0].positions, 600, "every text token predicted once");
		ok(r->cases[1].positions == MAX_TOKENS && r->cases[1].prompt_tokens == 1,
		   "empty prompt: BOS only, %d positions compared", r->cases[1].positions);
		ok(r->cases[2].prompt_tokens > 2, "prompt 2 tokenized (%d tokens)", r->cases[2].prompt_tokens);
		is_int(r->cases[1].first_mismatch, -1, "no mismatch");
		is_str(r->precision, "fp32", "precision recorded");
		diag("fp32: ppl %.3f, %.3fs", mval(r, "perplexity"), r->seconds);
		nf_gate_results_add(&rs, r);
		r = NULL;
	}

	/* int8-wo: a real quantization passes its defaults, with a real loss. */
	co.bounds = *nf_gate_defaults_for("int8-wo");
	rc = nf_gate_correctness(&r, &p8, dir8, &co, log);
	is_int(rc, 0, "int8 correctness gate ran: %s", nf_error_last());
	if (rc == 0) {
		double t1 = mval(r, "top1_agreement"), kl = mval(r, "kl_mean"), pr = mval(r, "ppl_ratio");
		diag("int8-wo: top1 %.4f, KL %.5f, ppl %.3f / ref %.3f = %.4f, greedy min %.4f, rel_err max %.4g (%s)",
		     t1, kl, mval(r, "perplexity"), mval(r, "perplexity_ref"), pr, mval(r, "agreement_min"),
		     mval(r, "rel_err_max"), r->reason ? r->reason : "no failure");
		ok(t1 > 0.9 && t1 <= 1.0, "int8 top-1 agreement plausible");
		ok(kl > 1e-6 && kl < 0.02, "int8 KL above zero, under its bound");
		ok(pr > 0.95 && pr < 1.05 && pr != 1.0, "int8 perplexity ratio near 1, not 1");
		is_int(r->verdict, NF_VERDICT_PASSED, "int8 passes the default thresholds");
		nf_gate_results_add(&rs, r);
		r = NULL;
	}

	/* An impossible threshold fails the gate (not an error), named in the reason. */
	co.bounds.min_ppl_ratio = 1.5;
	rc = nf_gate_correctness(&r, &p8, dir8, &co, log);
	is_int(rc, 0, "a failing gate is not an error");
	if (rc == 0) {
		is_int(r->verdict, NF_VERDICT_FAILED, "impossible ppl_ratio bound: failed");
		is_str(nf_verdict_name(r->verdict), "failed", "verdict name");
		ok(r->reason && strstr(r->reason, "evaluation text") && strstr(r->reason, "ppl_ratio") &&
			   strstr(r->reason, "< 1.5"),
		   "reason names the case, metric and bound: %s", r->reason ? r->reason : "(null)");
		ok(metric(r, "ppl_ratio") && !metric(r, "ppl_ratio")->ok, "metric marked not ok");
		nf_gate_results_add(&rs, r);
		r = NULL;
	}
	co.bounds = *nf_gate_defaults_for("int8-wo");
	co.bounds.max_rel_err = 1e-9;
	rc = nf_gate_correctness(&r, &p8, dir8, &co, log);
	if (rc == 0) {
		ok(r->verdict == NF_VERDICT_FAILED && r->reason && strstr(r->reason, "rel_err_max") &&
			   strstr(r->reason, "> 1e-09"),
		   "impossible rel_err bound: failed: %s", r->reason ? r->reason : "(null)");
		nf_gate_results_add(&rs, r);
		r = NULL;
	}

	/* Rows stored as half (what a large vocabulary gets): fp32 still agrees,
	 * with the KL of a 1e-3 rounding of each logit. */
	nf_gate_ref *half = NULL;
	ro.f32_max_bytes = 1;
	ro.tmp_dir = dir8; /* another folder: the file name is fixed */
	rc = nf_gate_ref_new(&half, m, tk, &ro, log);
	is_int(rc, 0, "half reference: %s", nf_error_last());
	if (rc == 0) {
		nf_gate_correctness_opts ho = {.ref = half, .bounds = *nf_gate_defaults_for("fp32"), .threads = 2};
		float *scratch = calloc((size_t)m->cfg.vocab_size, sizeof(float));
		const float *h0 = nf_gate_ref_row(half, 5, scratch), *f0 = nf_gate_ref_row(ref, 5, NULL);
		double worst = 0;
		for (int i = 0; i < m->cfg.vocab_size; i++)
			worst = fmax(worst, fabs((double)h0[i] - f0[i]) / fmax(1.0, fabs(f0[i])));
		ok(half->half && half->n_rows == ref->n_rows && worst > 0 && worst < 1e-3,
		   "half rows are the float rows rounded (worst %.2g)", worst);
		free(scratch);
		rc = nf_gate_correctness(&r, &p32, dir32, &ho, log);
		ok(rc == 0 && r->verdict == NF_VERDICT_PASSED && mval(r, "top1_agreement") == 1.0 &&
			   mval(r, "kl_mean") > 0 && mval(r, "kl_mean") < 1e-5,
		   "fp32 against half rows: top-1 1, KL %.2g", rc == 0 ? mval(r, "kl_mean") : -1.0);
		nf_gate_result_free(r);
		r = NULL;
	}
	nf_gate_ref_free(half);
	ro.tmp_dir = tmp;

	/* A broken engine (a scrambled quarter of its weights) fails the defaults. */
	char *dirbad = nf_path_join(tmp, "broken");
	char *wbad = nf_path_join(dirbad, "weights.safetensors");
	rc = nf_fs_copy_tree(dir8, dirbad);
	if (rc == 0)
		rc = scramble_weights(wbad);
	co.bounds = *nf_gate_defaults_for("int8-wo");
	if (rc == 0)
		rc = nf_gate_correctness(&r, &p8, dirbad, &co, log);
	is_int(rc, 0, "broken engine gated: %s", nf_error_last());
	if (rc == 0) {
		diag("broken: top1 %.4f, KL %.4g, ppl_ratio %.4g", mval(r, "top1_agreement"),
		     mval(r, "kl_mean"), mval(r, "ppl_ratio"));
		ok(r->verdict == NF_VERDICT_FAILED && !metric(r, "kl_mean")->ok && !metric(r, "ppl_ratio")->ok,
		   "a broken engine fails KL and perplexity: %s", r->reason ? r->reason : "");
		nf_gate_result_free(r);
		r = NULL;
	}
	free(dirbad);
	free(wbad);

	/* A GPU profile is skipped, never passed, and touches nothing; no driver
	 * whatever this host has, so the reason is the same everywhere. */
	setenv("NF_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
	rc = nf_gate_correctness(&r, &pgpu, NULL, &co, log);
	is_int(rc, 0, "gpu gate returns a result");
	if (rc == 0) {
		is_int(r->verdict, NF_VERDICT_SKIPPED, "gpu correctness skipped");
		is_str(r->reason, "no h100 here: its kernels are not held to the float32 reference",
		       "skip reason");
		nf_gate_results_add(&rs, r);
		r = NULL;
	}
	nf_gate_perf_opts po = {.prompt = "Once upon a time", .max_tokens = 64, .runs = 2, .threads = 1};
	rc = nf_gate_performance(&r, &pgpu, NULL, &po, log);
	ok(rc == 0 && r->verdict == NF_VERDICT_SKIPPED, "gpu performance skipped");
	if (rc == 0)
		is_str(r->reason, "no h100 here; no roofline model in the engine",
		       "without an engine: no modelled figures, and says so");
	if (rc == 0)
		nf_gate_results_add(&rs, r);
	r = NULL;

	/* Performance: measured without bounds, then against impossible ones. */
	nf_gate_result *base = NULL;
	po.prefill_tokens = ref->windows[0].tokens;
	po.n_prefill_tokens = ref->windows[0].n_tokens;
	rc = nf_gate_performance(&base, &p32, dir32, &po, log);
	is_int(rc, 0, "fp32 performance measured: %s", nf_error_last());
	rc = rc ? rc : nf_gate_performance(&r, &p8, dir8, &po, log);
	is_int(rc, 0, "int8 performance gate ran: %s", nf_error_last());
	if (rc == 0) {
		double tps = mval(r, "decode_tokens_per_s"), mib = mval(r, "engine_peak_rss_mib");
		double pre = mval(r, "prefill_tokens_per_s"), ttft = mval(r, "ttft_ms"), size = mval(r, "engine_mib");
		diag("int8-wo: %.0f tokens/s, prefill %.0f tokens/s, ttft %.3f ms, engine %.3f MiB, peak %.2f MiB, "
		     "process peak %.1f MiB", tps, pre, ttft, size, mib, mval(r, "process_peak_rss_mib"));
		ok(tps > 10, "decode tokens/s measured (%.0f)", tps);
		ok(mib > 0 && mib < 64, "engine peak memory measured (%.2f MiB)", mib);
		ok(pre > 10 && r->cases[2].positions == 512, "prefill of a 512-token window measured (%.0f tokens/s)", pre);
		ok(ttft > 0 && ttft < 1000, "time to first token measured (%.3f ms)", ttft);
		ok(size > 0.1 && size < mval(base, "engine_mib"), "engine size measured, below fp32's (%.3f MiB)", size);
		is_int(r->n_cases, 5, "decode, memory, prefill, time to first token, size");
		is_int(r->verdict, NF_VERDICT_PASSED, "no bounds: passed");

		/* ratios to fp32: reported, and bounded where asked */
		nf_gate_ratio_bounds none = {0};
		is_int(nf_gate_perf_ratios(r, base, &none, log), 0, "ratios computed");
		double sr = mval(r, "size_ratio"), ds = mval(r, "decode_speedup");
		diag("int8-wo / fp32: decode %.2fx, prefill %.2fx, ttft %.2f, memory %.2f, size %.3f", ds,
		     mval(r, "prefill_speedup"), mval(r, "ttft_ratio"), mval(r, "memory_ratio"), sr);
		ok(fabs(sr - mval(r, "engine_mib") / mval(base, "engine_mib")) < 1e-12 && sr < 0.6,
		   "size_ratio is int8 / fp32 engine size (%.3f)", sr);
		ok(ds > 0 && mval(r, "prefill_speedup") > 0 && mval(r, "ttft_ratio") > 0 && mval(r, "memory_ratio") > 0,
		   "every ratio measured");
		ok(r->verdict == NF_VERDICT_PASSED && !strcmp(r->cases[5].name, "ratios to fp32") &&
			   r->cases[5].reason && strstr(r->cases[5].reason, "measured only"),
		   "unbounded ratios are reported only");
		nf_gate_results_add(&rs, r);
		r = NULL;
	}
	rc = nf_gate_performance(&r, &p8, dir8, &po, log);
	if (rc == 0) {
		nf_gate_ratio_bounds tight = {.min_decode_speedup = 1e6, .max_size_ratio = 0.9};
		rc = nf_gate_perf_ratios(r, base, &tight, log);
		ok(rc == 0 && r->verdict == NF_VERDICT_FAILED && r->reason && strstr(r->reason, "decode_speedup") &&
			   metric(r, "size_ratio")->ok && !metric(r, "decode_speedup")->ok,
		   "an impossible speedup bound fails, a met size bound holds: %s", r->reason ? r->reason : "");
		nf_gate_result_free(r);
		r = NULL;
	}
	po.min_tokens_per_s = 1e12;
	po.max_memory_mib = 1e-6;
	po.min_prefill_tokens_per_s = 1e12;
	po.max_ttft_ms = 1e-9;
	po.runs = 1;
	rc = nf_gate_performance(&r, &p32, dir32, &po, log);
	is_int(rc, 0, "fp32 performance gate ran");
	if (rc == 0) {
		is_int(r->verdict, NF_VERDICT_FAILED, "impossible bounds: failed");
		ok(r->n_cases == 5 && r->cases[0].verdict == NF_VERDICT_FAILED &&
			   r->cases[1].verdict == NF_VERDICT_FAILED && r->cases[2].verdict == NF_VERDICT_FAILED &&
			   r->cases[3].verdict == NF_VERDICT_FAILED && r->cases[4].verdict == NF_VERDICT_PASSED,
		   "every bound fails; the size, unbounded, passes");
		ok(r->reason && strstr(r->reason, "decode_tokens_per_s"), "reason: %s", r->reason ? r->reason : "");
		nf_gate_results_add(&rs, r);
		r = NULL;
	}
	nf_gate_result_free(base);

	/* Errors are errors, not verdicts. */
	char *missing = nf_path_join(tmp, "nope");
	rc = nf_gate_correctness(&r, &p8, missing, &co, log);
	ok(rc < 0 && r == NULL, "missing engine: an error (%s)", nf_error_last());
	co.ref = NULL;
	is_int(nf_gate_correctness(&r, &p8, dir8, &co, log), NF_EINPUT, "no reference: bad input");
	free(missing);

	/* The log carries one gate_case event per case. */
	fflush(logf);
	ok(logbuf && strstr(logbuf, "\"event\":\"gate_case\"") && strstr(logbuf, "\"verdict\":\"failed\""),
	   "gate cases logged as JSON events");

	/* The whole set reports as failed, and the files are written. */
	is_int(nf_gate_results_verdict(&rs), NF_VERDICT_FAILED, "overall verdict failed");
	nf_report_meta meta = {.model = "stories260K"};
	is_int(nf_report_write(tmp, &rs, &meta), 0, "reports written: %s", nf_error_last());
	char *table = NULL;
	if (nf_report_table(&table, &rs) == 0)
		diag("\n%s", table);
	free(table);
	free(dir32);
	free(dir8);

done:
	nf_gate_ref_free(ref);
	nf_tokenizer_free(tk);
	nf_gate_results_release(&rs);
	nf_gate_result_free(r);
	nf_model_free(m);
	nf_log_free(log);
	if (logf)
		fclose(logf);
	free(logbuf);
	if (tmp)
		nf_fs_remove_tree(tmp);
	free(ckpt);
	free(tok);
	return done_testing();
}
