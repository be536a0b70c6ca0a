/* test_gates.c - correctness and performance gates on the real stories260K model (fp32, int8-wo, GPU skip). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/engine.h"
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

	/* fp32: the engine must agree with the reference exactly. */
	nf_gate_correctness_opts co = {.prompts = prompts, .n_prompts = N_PROMPTS, .max_tokens = MAX_TOKENS,
				       .min_agreement = 1.0, .max_rel_err = 1e-4, .max_mean_rel_err = -1,
				       .threads = 2};
	rc = nf_gate_correctness(&r, &p32, m, dir32, &co, log);
	is_int(rc, 0, "fp32 correctness gate ran: %s", nf_error_last());
	if (rc == 0) {
		is_int(r->verdict, NF_VERDICT_PASSED, "fp32 passes (%s)", r->reason ? r->reason : "");
		ok(mval(r, "agreement_min") == 1.0, "fp32 agreement 1.0 (%g)", mval(r, "agreement_min"));
		ok(mval(r, "rel_err_max") < 1e-5, "fp32 rel_err_max tiny (%.3g)", mval(r, "rel_err_max"));
		is_int(r->n_cases, N_PROMPTS, "one case per prompt");
		ok(r->cases[0].prompt_tokens == 1 && r->cases[0].positions == MAX_TOKENS,
		   "empty prompt: BOS only, %d positions compared", r->cases[0].positions);
		ok(r->cases[1].prompt_tokens > 2, "prompt 2 tokenized (%d tokens)", r->cases[1].prompt_tokens);
		is_int(r->cases[0].first_mismatch, -1, "no mismatch");
		is_str(r->precision, "fp32", "precision recorded");
		diag("fp32: agreement %.4f, rel_err max %.3g mean %.3g, %.3fs", mval(r, "agreement_min"),
		     mval(r, "rel_err_max"), mval(r, "rel_err_mean"), r->seconds);
		nf_gate_results_add(&rs, r);
		r = NULL;
	}

	/* int8-wo: measured against the recipe's default tolerances. */
	co.min_agreement = 0.9;
	co.max_rel_err = 0.1;
	rc = nf_gate_correctness(&r, &p8, m, dir8, &co, log);
	is_int(rc, 0, "int8 correctness gate ran: %s", nf_error_last());
	if (rc == 0) {
		double a = mval(r, "agreement_min"), e = mval(r, "rel_err_max"), mean = mval(r, "rel_err_mean");
		diag("int8-wo: agreement min %.4f, rel_err max %.4g mean %.4g (%s)", a, e, mean,
		     r->reason ? r->reason : "no failure");
		for (size_t i = 0; i < r->n_cases; i++)
			diag("  %s: agreement %.4f rel_err max %.4g mean %.4g first mismatch %d",
			     r->cases[i].name, r->cases[i].metrics[0].value, r->cases[i].metrics[1].value,
			     r->cases[i].metrics[2].value, r->cases[i].first_mismatch);
		ok(a > 0.5 && a <= 1.0, "int8 agreement plausible");
		ok(e > 1e-5 && e < 0.1, "int8 logits differ, but by less than 10%%");
		ok(mean > 0 && mean <= e, "mean <= max");
		is_int(r->verdict, NF_VERDICT_PASSED, "int8 passes the default tolerances");
		nf_gate_results_add(&rs, r);
		r = NULL;
	}

	/* An impossible threshold fails the gate (not an error). */
	co.max_rel_err = 1e-9;
	co.n_prompts = 1;
	rc = nf_gate_correctness(&r, &p8, m, dir8, &co, log);
	is_int(rc, 0, "a failing gate is not an error");
	if (rc == 0) {
		is_int(r->verdict, NF_VERDICT_FAILED, "impossible rel_err bound: failed");
		is_str(nf_verdict_name(r->verdict), "failed", "verdict name");
		ok(r->reason && strstr(r->reason, "rel_err_max") && strstr(r->reason, "> 1e-09"),
		   "reason names the metric and bound: %s", r->reason ? r->reason : "(null)");
		ok(metric(r, "rel_err_max") && !metric(r, "rel_err_max")->ok, "metric marked not ok");
		nf_gate_results_add(&rs, r);
		r = NULL;
	}

	/* A GPU profile is skipped, never passed, and touches nothing. */
	rc = nf_gate_correctness(&r, &pgpu, NULL, NULL, &co, log);
	is_int(rc, 0, "gpu gate returns a result");
	if (rc == 0) {
		is_int(r->verdict, NF_VERDICT_SKIPPED, "gpu correctness skipped");
		if (access("/dev/nvidiactl", F_OK) != 0)
			is_str(r->reason, "no GPU on this machine", "skip reason");
		nf_gate_results_add(&rs, r);
		r = NULL;
	}
	nf_gate_perf_opts po = {.prompt = "Once upon a time", .max_tokens = 64, .runs = 2, .threads = 1};
	rc = nf_gate_performance(&r, &pgpu, NULL, &po, log);
	ok(rc == 0 && r->verdict == NF_VERDICT_SKIPPED, "gpu performance skipped");
	if (rc == 0)
		nf_gate_results_add(&rs, r);
	r = NULL;

	/* Performance: measured without bounds, then against impossible ones. */
	rc = nf_gate_performance(&r, &p8, dir8, &po, log);
	is_int(rc, 0, "int8 performance gate ran: %s", nf_error_last());
	if (rc == 0) {
		double tps = mval(r, "decode_tokens_per_s"), mib = mval(r, "engine_peak_rss_mib");
		diag("int8-wo: %.0f tokens/s, engine peak %.2f MiB, process peak %.1f MiB", tps, mib,
		     mval(r, "process_peak_rss_mib"));
		ok(tps > 10, "decode tokens/s measured (%.0f)", tps);
		ok(mib > 0 && mib < 64, "engine peak memory measured (%.2f MiB)", mib);
		is_int(r->verdict, NF_VERDICT_PASSED, "no bounds: passed");
		nf_gate_results_add(&rs, r);
		r = NULL;
	}
	po.min_tokens_per_s = 1e12;
	po.max_memory_mib = 1e-6;
	po.runs = 1;
	rc = nf_gate_performance(&r, &p32, dir32, &po, log);
	is_int(rc, 0, "fp32 performance gate ran");
	if (rc == 0) {
		is_int(r->verdict, NF_VERDICT_FAILED, "impossible bounds: failed");
		ok(r->n_cases == 2 && r->cases[0].verdict == NF_VERDICT_FAILED &&
		   r->cases[1].verdict == NF_VERDICT_FAILED, "both bounds fail");
		ok(r->reason && strstr(r->reason, "decode_tokens_per_s"), "reason: %s", r->reason ? r->reason : "");
		nf_gate_results_add(&rs, r);
		r = NULL;
	}

	/* Errors are errors, not verdicts. */
	char *missing = nf_path_join(tmp, "nope");
	co.max_rel_err = 0.1;
	rc = nf_gate_correctness(&r, &p8, m, missing, &co, log);
	ok(rc < 0 && r == NULL, "missing engine: an error (%s)", nf_error_last());
	co.n_prompts = 0;
	is_int(nf_gate_correctness(&r, &p8, m, dir8, &co, log), NF_EINPUT, "no prompts: bad input");
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
