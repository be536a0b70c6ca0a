/*
 * gates.h - the gates an engine must pass before it is packaged.
 *
 * Correctness (nf_gate_correctness): the engine against the build's float32
 * reference (gate_reference.h, computed once per build): teacher-forced
 * top-1 agreement, KL and perplexity on an evaluation text, and greedy
 * agreement on the gate prompts, every pass a prefill.
 *
 * Performance: nf_generate (greedy) from a prompt; decode tokens/s =
 * (generated - 1) / decode_seconds, the best of `runs`; and the engine's
 * peak resident memory: the process's peak RSS (VmHWM, reset through
 * /proc/self/clear_refs just before the engine is opened) minus the RSS
 * before opening, i.e. the resident bytes the engine's mapped weights, KV
 * cache and activations added at their peak.  When the peak cannot be reset
 * the RSS with the engine loaded after generation stands in ("method" says
 * which).  The process's own VmHWM is reported beside it, unbounded.
 *
 * GPU profiles are never run here: their gates are "skipped" with a reason,
 * never "passed".
 *
 * Verdicts are factory/profile.h's nf_verdict (PASSED, FAILED, SKIPPED; a
 * result is never PENDING).  The profile under test is read for its id,
 * name, device, precision and is_gpu only (borrowed, not kept).
 * A result owns all its strings and arrays; results are collected in an
 * nf_gate_results list that the report writer (report.h) consumes.
 */
#ifndef NF_FACTORY_GATES_H
#define NF_FACTORY_GATES_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/model.h"
#include "factory/gate_reference.h"
#include "factory/log.h"
#include "factory/profile.h" /* nf_profile, nf_verdict */

typedef enum nf_gate_kind {
	NF_GATE_CORRECTNESS = 0,
	NF_GATE_PERFORMANCE,
} nf_gate_kind;

/* How a measured value is held against its threshold. */
typedef enum nf_gate_cmp {
	NF_GATE_CMP_NONE = 0, /* reported only, no threshold */
	NF_GATE_CMP_GE,       /* passes when value >= threshold */
	NF_GATE_CMP_LE,       /* passes when value <= threshold */
} nf_gate_cmp;

const char *nf_gate_kind_name(nf_gate_kind k);       /* "correctness" "performance" */
const char *nf_gate_cmp_symbol(nf_gate_cmp c);       /* "" ">=" "<=" */

typedef struct nf_gate_metric {
	char name[48];    /* "agreement", "rel_err_max", "decode_tokens_per_s", ... */
	char unit[16];    /* "ratio", "tokens/s", "MiB", ... ("" when none) */
	double value;
	nf_gate_cmp cmp;
	double threshold; /* meaningful when cmp != NONE */
	bool ok;          /* value holds against threshold (true when cmp == NONE) */
} nf_gate_metric;

/* One test case of a gate: a prompt (correctness) or a bound (performance). */
typedef struct nf_gate_case {
	char *name;              /* owned: "prompt 1: \"Once upon\"", "decode throughput" */
	char *prompt;            /* owned, may be NULL: the prompt text */
	nf_verdict verdict;
	char *reason;            /* owned, may be NULL: why it failed or was skipped */
	double seconds;          /* time the case took */
	int prompt_tokens;       /* tokens of the prompt, BOS included (0 when n/a) */
	int positions;           /* positions compared / tokens generated */
	int first_mismatch;      /* correctness: first position index (0-based,
				    among the compared ones) whose argmax differs; -1 none */
	nf_gate_metric *metrics; /* owned */
	size_t n_metrics;
} nf_gate_case;

typedef struct nf_gate_result {
	char *profile_id;        /* owned: stable id of the profile (sha256 hex) */
	char *profile_name;      /* owned: e.g. "cpu-int8-wo" */
	char *device;            /* owned: "cpu", "h100", ... */
	char *precision;         /* owned: "fp32", "int8-wo", ... */
	nf_gate_kind kind;
	nf_verdict verdict;
	char *reason;            /* owned, may be NULL: one line, for failed or skipped */
	double seconds;          /* time the gate took */
	nf_gate_metric *metrics; /* owned: the summary over the cases */
	size_t n_metrics;
	nf_gate_case *cases;     /* owned */
	size_t n_cases;
} nf_gate_result;

/* An empty result (verdict PASSED, no metrics or cases) for profile (may be
 * NULL: empty names), with the profile's id, name, device and precision
 * copied.  Caller owns *out.  For the pipeline to record its own gates. */
int nf_gate_result_new(nf_gate_result **out, const nf_profile *profile, nf_gate_kind kind);
void nf_gate_result_free(nf_gate_result *r); /* NULL is fine */
/* Replace *dst (owned string) with the formatted text. */
int nf_gate_set_reason(char **dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A correctness gate's bounds, for one precision (gate_defaults.h has the
 * defaults per precision); a negative bound is no bound (reported only). */
typedef struct nf_gate_bounds {
	double min_top1_agreement;   /* evaluation text: top1_agreement >= this */
	double max_kl_mean;          /* evaluation text: kl_mean <= this (nats) */
	double min_ppl_ratio;        /* evaluation text: ppl_ratio >= this */
	double min_greedy_agreement; /* each prompt's greedy agreement >= this */
	double max_rel_err;          /* each prompt's max logit rel_err <= this */
} nf_gate_bounds;

typedef struct nf_gate_correctness_opts {
	const nf_gate_ref *ref;      /* borrowed: the build's float32 reference */
	nf_gate_bounds bounds;
	int threads;                 /* engine threads; 0 = all cores */
} nf_gate_correctness_opts;

/*
 * Run the correctness gate of the engine in engine_dir against the build's
 * float32 reference (gate_reference.h), every pass a prefill
 * (nf_engine_prefill_logits):
 *   case "evaluation text": each window teacher-forced; metrics
 *     top1_agreement, kl_mean, perplexity, perplexity_ref, ppl_ratio
 *     (gate_metrics.h) over every position of every window;
 *   one case per gate prompt: the prompt and the reference's greedy
 *     continuation fed at once; agreement = fraction of continuation
 *     positions whose engine argmax is the reference's token, and the
 *     logits' rel_err = ||engine - ref|| / ||ref|| (max and mean).
 * The result's metrics: the evaluation text's five, agreement_min over the
 * prompts, rel_err_max and rel_err_mean over their positions.
 * *out gets a result whose verdict says whether it passed (a failed gate is
 * NOT an error: the function returns 0).  Errors (engine cannot be opened,
 * does not match the reference) return a negative code.  For a GPU profile
 * neither ref nor engine_dir is touched and the verdict is skipped.
 * Caller owns *out.
 */
int nf_gate_correctness(nf_gate_result **out, const nf_profile *profile, const char *engine_dir,
			const nf_gate_correctness_opts *opts, nf_log *log);

typedef struct nf_gate_perf_opts {
	const char *prompt;       /* borrowed; NULL = "" */
	const int *prefill_tokens; /* borrowed: what to prefill for prefill_tokens_per_s (an
				      evaluation window); NULL = the prompt's tokens */
	int n_prefill_tokens;     /* cut to the context */
	int max_tokens;           /* tokens to generate (>= 1; at least 2 are generated,
				     so that decode speed is defined; EOS does not stop) */
	int runs;                 /* measure this many times, keep the best; 0 = 3 */
	double min_tokens_per_s;  /* <= 0 = no bound (measured and reported) */
	double max_memory_mib;    /* engine peak resident MiB bound; <= 0 = no bound */
	double min_prefill_tokens_per_s; /* <= 0 = no bound */
	double max_ttft_ms;       /* time to first token of the prompt; <= 0 = no bound */
	int threads;              /* engine threads; 0 = all cores */
} nf_gate_perf_opts;

/*
 * The performance gate (same conventions as nf_gate_correctness): the
 * engine opened once and run `runs` times, the best of each kept.  Cases
 * and their metrics, in order:
 *   "decode throughput"   decode_tokens_per_s (greedy generation of the prompt)
 *   "peak memory"         engine_peak_rss_mib, process_peak_rss_mib
 *   "prefill throughput"  prefill_tokens_per_s (one prefill of prefill_tokens)
 *   "time to first token" ttft_ms (prompt to first generated token)
 *   "engine size"         engine_mib (the engine folder's files)
 * The summary metrics are the same six.
 */
int nf_gate_performance(nf_gate_result **out, const nf_profile *profile,
			const char *engine_dir, const nf_gate_perf_opts *opts, nf_log *log);

/* Bounds on a performance gate's ratios to the fp32 engine; <= 0 = none. */
typedef struct nf_gate_ratio_bounds {
	double min_decode_speedup;
	double min_prefill_speedup;
	double max_ttft_ratio;
	double max_memory_ratio;
	double max_size_ratio;
} nf_gate_ratio_bounds;

/*
 * Add the case "ratios to fp32" to the performance result r, against base,
 * the fp32 engine's performance result measured in the same run: metrics
 * decode_speedup and prefill_speedup (r / fp32 tokens/s), ttft_ratio,
 * memory_ratio (engine peak RSS) and size_ratio (engine_mib), each r / fp32,
 * 0 when either side was not measured; appended to r's summary metrics too,
 * and the verdict recomputed.  A skipped r is left as it is.
 */
int nf_gate_perf_ratios(nf_gate_result *r, const nf_gate_result *base, const nf_gate_ratio_bounds *b,
			nf_log *log);

/* A skipped result for a gate that cannot run here (reason copied). */
int nf_gate_skipped(nf_gate_result **out, const nf_profile *profile, nf_gate_kind kind,
		    const char *reason);

/* Why a GPU gate cannot run on this machine ("no GPU on this machine"). */
const char *nf_gate_gpu_skip_reason(void);

/* A list of results, in the order added. */
typedef struct nf_gate_results {
	nf_gate_result **items; /* owned */
	size_t n, cap;
} nf_gate_results;

void nf_gate_results_init(nf_gate_results *rs);
/* Append r, taking ownership (also on failure, when r is freed). */
int nf_gate_results_add(nf_gate_results *rs, nf_gate_result *r);
void nf_gate_results_release(nf_gate_results *rs); /* frees every result; rs reusable */

/* Failed if any gate failed; else skipped if any was skipped or there is
 * none (a gate that did not run is never passed: a GPU profile's on a
 * machine without its GPU); passed only when every gate ran and passed. */
nf_verdict nf_gate_results_verdict(const nf_gate_results *rs);
/* The verdict of one profile over its gates (matched by profile_id, then name). */
nf_verdict nf_gate_results_profile_verdict(const nf_gate_results *rs, const char *profile_id,
						const char *profile_name);

/* Building blocks, public for the lead's pipeline and tests: fill a metric
 * (name/unit truncated to fit) and evaluate it against its threshold. */
void nf_gate_metric_set(nf_gate_metric *m, const char *name, const char *unit, double value,
			nf_gate_cmp cmp, double threshold);

#endif
