/*
 * build_gates.c - the gate phase of a build (see build_ctx.h): every
 * profile's gates from the cache, or run against the float32 reference
 * (itself a cached stage), with the performance ratios to fp32.
 */
#define _GNU_SOURCE
#include "factory/build_ctx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "factory/gates.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* The gates' temporary folder: beside OUT, so on the same disk as the build. */
static int make_gate_tmp(build_ctx *b)
{
	b->gate_tmp = nf_strdup_printf("%s.gates-%ld", b->out_final, (long)getpid());
	if (!b->gate_tmp)
		return nf_error_set(NF_ENOMEM, "out of memory");
	int err = nf_fs_remove_tree(b->gate_tmp);
	return err ? err : nf_fs_mkdir_p(b->gate_tmp, 0700);
}

/* The float32 reference of every profile's correctness gate, computed once
 * (not per profile) with the engine's batched forward pass. */
static int compute_reference(build_ctx *b)
{
	const nf_recipe_correctness *cr = &b->recipe->gates.correctness;
	char *text = NULL;
	size_t len = 0;
	int err = 0;

	if (!b->model_tokenizer)
		return nf_error_set(NF_EINPUT, "%s: the gates need the model's tokenizer", b->recipe->file);
	nf_log_stage_begin(b->log, "gate", "float32 reference on %s",
			   cr->eval_text_written ? cr->eval_text_written : "the shipped evaluation text");
	if (cr->eval_text)
		err = nf_fs_read_file(&text, &len, cr->eval_text, NF_RECIPE_MAX_EVAL_TEXT);
	nf_gate_ref_opts o = {
		.eval_text = text,
		.eval_len = len,
		.eval_tokens = cr->eval_tokens,
		.prompts = (const char *const *)cr->prompts,
		.n_prompts = cr->n_prompts,
		.max_tokens = cr->max_tokens,
		.tmp_dir = b->gate_tmp,
		.threads = b->opts->threads,
	};
	if (!err)
		err = nf_gate_ref_new(&b->ref, b->model, b->model_tokenizer, &o, b->log);
	if (err)
		nf_error_wrap(err, "%s: float32 reference", b->recipe->file);
	nf_log_stage_end(b->log, "gate", err, "float32 reference: %zu windows, %zu tokens, %zu prompts, "
			 "%zu rows%s in %.2f s", b->ref ? b->ref->n_windows : 0,
			 b->ref ? b->ref->text_tokens : 0, b->ref ? b->ref->n_prompts : 0,
			 b->ref ? b->ref->n_rows : 0, b->ref && b->ref->half ? " (half)" : "",
			 b->ref ? b->ref->seconds : 0.0);
	free(text);
	return err;
}

/* The reference stage: from the cache (keyed by the model, the evaluation
 * text and the prompts, not the tolerances: a threshold changed reuses it),
 * else computed from the model and stored. */
static int stage_reference(build_ctx *b)
{
	nf_stage *st = nf_plan_stage(b->plan, NF_STAGE_REFERENCE, -1);
	int err = 0;
	if (nf_build_reference_from_cache(b, st))
		return 0;
	if (!(err = nf_build_load_model(b, "the gates' reference")) && !(err = compute_reference(b))) {
		st->seconds = b->ref->seconds;
		err = nf_build_reference_to_cache(b, st);
	}
	return err;
}

/* A recipe tolerance as a correctness gate's bounds. */
static nf_gate_bounds tolerance_bounds(const nf_recipe_tolerance *t)
{
	return (nf_gate_bounds){
		.min_top1_agreement = t->min_top1_agreement,
		.max_kl_mean = t->max_kl_mean,
		.min_ppl_ratio = t->min_ppl_ratio,
		.min_greedy_agreement = t->min_token_agreement,
		.max_rel_err = t->max_logit_rel_error,
	};
}

/* Tokens of the prefill the performance gate times: one pass over the
 * weights (NF_FWD_PASS_TOKENS) of the first evaluation window, so the
 * measurement is batched throughput without a long window's attention. */
#define PERF_PREFILL_TOKENS 256

/* The performance gate's options for the recipe. */
static nf_gate_perf_opts perf_opts(const build_ctx *b)
{
	const nf_recipe_performance *pf = &b->recipe->gates.performance;
	int n = b->ref ? b->ref->windows[0].n_tokens : 0;
	return (nf_gate_perf_opts){
		.prompt = pf->prompt,
		.prefill_tokens = b->ref ? b->ref->windows[0].tokens : NULL,
		.n_prefill_tokens = n < PERF_PREFILL_TOKENS ? n : PERF_PREFILL_TOKENS,
		.max_tokens = pf->max_tokens,
		.runs = 3,
		.min_tokens_per_s = pf->min_decode_tokens_per_s,
		.max_memory_mib = pf->max_peak_memory_mib,
		.min_prefill_tokens_per_s = pf->min_prefill_tokens_per_s,
		.max_ttft_ms = pf->max_ttft_ms,
		.threads = b->opts->threads,
	};
}

/* The fp32 engine's performance, the ratios' denominator: the shipped CPU
 * fp32 profile's gate when there is one (measured in this run), else an fp32
 * engine built in the gates' temporary folder and measured here.  NULL in
 * *base when no CPU profile was measured. */
static int perf_baseline(build_ctx *b, const nf_gate_result **base)
{
	char *dir = NULL;
	int err;

	*base = NULL;
	for (size_t i = 0; i < b->results.n; i++) {
		const nf_gate_result *r = b->results.items[i];
		/* a GPU profile measured on its GPU is no CPU engine to compare */
		if (r->kind == NF_GATE_PERFORMANCE && r->verdict != NF_VERDICT_SKIPPED &&
		    !strcmp(r->device, "cpu")) {
			if (!strcmp(r->precision, "fp32"))
				return (*base = r), 0;
			*base = r; /* some CPU profile was measured */
		}
	}
	if (!*base)
		return 0;
	if (!(dir = nf_path_join(b->gate_tmp, "fp32-engine")))
		return nf_error_set(NF_ENOMEM, "out of memory");
	nf_log_stage_begin(b->log, "gate", "fp32 engine, built to measure the ratios against");
	nf_engine_build_opts eo = {
		.precision = NF_PREC_FP32,
		.tokenizer_path = b->tokenizer ? NULL : b->tok_path,
		.tokenizer = b->tokenizer,
		.threads = b->opts->threads,
		.autotune = b->recipe->build.autotune,
	};
	nf_gate_perf_opts po = perf_opts(b);
	po.min_tokens_per_s = po.max_memory_mib = po.min_prefill_tokens_per_s = po.max_ttft_ms = 0;
	nf_profile ref = {.precision = NF_PREC_FP32};
	snprintf(ref.name, sizeof(ref.name), "fp32-reference");
	snprintf(ref.device, sizeof(ref.device), "cpu");
	err = nf_build_load_model(b, "the fp32 baseline"); /* not loaded when the reference was cached */
	if (!err)
		err = nf_engine_build(dir, b->model, &eo);
	if (!err)
		err = nf_gate_performance(&b->perf_fp32, &ref, dir, &po, b->log);
	nf_log_stage_end(b->log, "gate", err, "fp32-reference measured");
	free(dir);
	*base = b->perf_fp32;
	return err ? nf_error_wrap(err, "fp32 performance baseline") : 0;
}

static nf_gate_ratio_bounds ratio_bounds(const nf_recipe_performance *pf, nf_precision p)
{
	return (nf_gate_ratio_bounds){
		.min_decode_speedup = pf->min_decode_speedup[p],
		.min_prefill_speedup = pf->min_prefill_speedup[p],
		.max_ttft_ratio = pf->max_ttft_ratio[p],
		.max_memory_ratio = pf->max_memory_ratio[p],
		.max_size_ratio = pf->max_size_ratio[p],
	};
}

/* After every profile's gates: each performance result's ratios to fp32,
 * and the profiles' verdicts again (a ratio bound can fail one). */
static int stage_perf_ratios(build_ctx *b)
{
	const nf_gate_result *base = NULL;
	int err = b->recipe->gates.performance.present ? perf_baseline(b, &base) : 0;
	for (size_t i = 0; !err && base && i < b->plan->n_profiles; i++) {
		nf_profile *p = &b->plan->profiles[i];
		/* a cached gate holds its ratios already; a GPU profile's speed and
		 * memory say nothing against a CPU float32 engine's */
		if (!b->gated_now[i] || p->is_gpu)
			continue;
		nf_gate_ratio_bounds rb = ratio_bounds(&b->recipe->gates.performance, p->precision);
		for (size_t k = 0; !err && k < b->results.n; k++) {
			nf_gate_result *r = b->results.items[k];
			if (r->kind == NF_GATE_PERFORMANCE && !strcmp(r->profile_id, p->id))
				err = nf_gate_perf_ratios(r, base, &rb, b->log);
		}
		p->verdict = nf_gate_results_profile_verdict(&b->results, p->id, p->name);
	}
	return err;
}

static int stage_gate(build_ctx *b, size_t i)
{
	nf_profile *p = &b->plan->profiles[i];
	nf_stage *st = nf_plan_stage(b->plan, NF_STAGE_GATE, (int)i);
	const nf_recipe_gates *g = &b->recipe->gates;
	nf_gate_result *res = NULL;
	double t0 = nf_build_now();
	int err;

	nf_log_stage_begin(b->log, "gate", "%s", p->name);
	nf_gate_correctness_opts co = {
		.ref = b->ref,
		.bounds = tolerance_bounds(&g->correctness.tolerance[p->precision]),
		.threads = b->opts->threads,
	};
	err = nf_gate_correctness(&res, p, p->engine_dir, &co, b->log);
	if (!err)
		err = nf_gate_results_add(&b->results, res);
	if (!err && g->performance.present) {
		nf_gate_perf_opts po = perf_opts(b);
		res = NULL;
		err = nf_gate_performance(&res, p, p->engine_dir, &po, b->log);
		if (!err)
			err = nf_gate_results_add(&b->results, res);
	}
	if (!err)
		p->verdict = nf_gate_results_profile_verdict(&b->results, p->id, p->name);
	b->gated_now[i] = 1;
	st->seconds = nf_build_now() - t0;
	nf_log_stage_end(b->log, "gate", err, "%s: %s", p->name, nf_verdict_name(p->verdict));
	return err;
}


/* The gates not found in the cache, run and stored under their keys. */
static int run_gates(build_ctx *b)
{
	size_t n = b->plan->n_profiles;
	int err = make_gate_tmp(b);
	if (!err)
		err = stage_reference(b);
	for (size_t i = 0; !err && i < n; i++)
		if (!nf_plan_stage(b->plan, NF_STAGE_GATE, (int)i)->cached)
			err = stage_gate(b, i);
	if (!err)
		err = stage_perf_ratios(b);
	/* A skipped gate (a GPU profile where its GPU is not) measured nothing:
	 * it is not a result, and a machine with the GPU must run it. */
	for (size_t i = 0; !err && i < n; i++)
		if (b->gated_now[i] && b->plan->profiles[i].verdict != NF_VERDICT_SKIPPED)
			err = nf_build_gate_to_cache(b, i);
	return err;
}

/* Every profile's gates: those cached are read back; the others run against
 * the float32 reference (computed only then), get their ratios to fp32, and
 * are stored under their keys. */
int nf_build_stage_gates(build_ctx *b)
{
	size_t n = b->plan->n_profiles, missing = 0;
	int err = 0;

	if (!(b->gated_now = calloc(n ? n : 1, sizeof(*b->gated_now))))
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		missing += !nf_build_gate_from_cache(b, i);
	if (missing)
		err = run_gates(b);
	for (size_t i = 0; !err && i < n; i++)
		if (b->plan->profiles[i].verdict != NF_VERDICT_SKIPPED)
			err = nf_build_stage_push(b, "gate", nf_plan_stage(b->plan, NF_STAGE_GATE, (int)i)->key);
	return err;
}


