/*
 * gate_metrics.h - the teacher-forced accuracy metrics of the correctness
 * gate, from the reference's and the engine's logits at each position of
 * an evaluation text (pure arithmetic: no engine, no files).
 *
 * At a position whose next token is `target`, with p = softmax(reference
 * logits) and q = softmax(engine logits), both in double:
 *   top-1 agreement  the engine's argmax is one of the reference's maximal
 *                    tokens (so a tie in the reference counts whichever of
 *                    the tied tokens the engine picks; the engine's own ties
 *                    go to the lowest id, as greedy decoding does)
 *   KL(p || q)       sum_i p_i (log p_i - log q_i), nats; +inf when the
 *                    engine's logits are not finite
 *   NLL              -log q_target (engine) and -log p_target (reference)
 * Over the positions: top1_agreement = agreeing / positions, kl_mean = mean
 * KL, perplexity = exp(mean engine NLL), perplexity_ref = exp(mean
 * reference NLL), ppl_ratio = perplexity_ref / perplexity (1 for an exact
 * engine, below 1 when the engine is worse: MLPerf's "99% of float32" is
 * ppl_ratio >= 0.99).
 */
#ifndef NF_FACTORY_GATE_METRICS_H
#define NF_FACTORY_GATE_METRICS_H

#include <stddef.h>

typedef struct nf_tf_acc {
	double kl_sum;      /* sum of KL(p || q) */
	double nll_sum;     /* sum of the engine's NLL of the targets */
	double nll_ref_sum; /* sum of the reference's NLL of the targets */
	size_t agree;       /* positions where the top-1 tokens agree */
	size_t positions;
} nf_tf_acc;

typedef struct nf_tf_metrics {
	double top1_agreement; /* ratio in [0, 1] */
	double kl_mean;        /* nats */
	double perplexity;     /* the engine's */
	double perplexity_ref; /* the reference's */
	double ppl_ratio;      /* perplexity_ref / perplexity */
} nf_tf_metrics;

/* log(sum_i exp(x_i)) in double, stable; NaN or +inf when an x_i is not finite. */
double nf_log_sum_exp(const float *x, int n);

/* Add one position: reference and engine logits (vocab each), the token
 * that follows.  target must be in [0, vocab) (checked by the caller). */
void nf_tf_add(nf_tf_acc *a, const float *ref_logits, const float *eng_logits, int vocab,
	       int target);

/* The metrics over the positions added (zeros and ratio 0 when none). */
void nf_tf_finish(const nf_tf_acc *a, nf_tf_metrics *m);

/* Merge b into a (windows evaluated apart). */
void nf_tf_merge(nf_tf_acc *a, const nf_tf_acc *b);

#endif
