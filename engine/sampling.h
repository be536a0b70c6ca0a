/*
 * sampling.h - the logit transforms every sampler applies, each a small
 * function over one row of vocab_size logits, shared by nimserve and
 * `nimfactory run` (through nf_sampler, engine/generate.h):
 *
 *   mask -> penalties -> bias          (the "processed" logits: logprobs
 *                                       are their log-softmax)
 *   -> temperature -> top-k -> min-p -> top-p -> draw
 *
 * A removed token's logit becomes -INFINITY.
 */
#ifndef NF_ENGINE_SAMPLING_H
#define NF_ENGINE_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

#define NF_SAMPLING_MAX_BIAS 1024 /* logit_bias entries */
#define NF_SAMPLING_MAX_TOP 20    /* top logprobs per token */

typedef struct nf_logit_bias {
	int token;
	float bias; /* added to the logit, -100..100 */
} nf_logit_bias;

typedef struct nf_sampling_params {
	float presence_penalty;   /* subtracted once from a token generated so far; 0 off */
	float frequency_penalty;  /* subtracted per time it was generated; 0 off */
	float repetition_penalty; /* a token of the prompt or the output: positive logits
				     divided by it, negative ones multiplied (CTRL, as
				     Hugging Face and vLLM); 1 off */
	int top_k;                /* keep the k most likely; 0 off */
	float min_p;              /* keep tokens at least min_p x the top probability; 0 off */
	const nf_logit_bias *bias; /* borrowed by the caller; nf_sampler copies it */
	size_t n_bias;
} nf_sampling_params;

/* 1 when bit `token` of a vocabulary bitmask (32 tokens per word, as
 * engine/logit_mask.h's) is set. */
static inline int nf_mask_has(const uint32_t *mask, int token)
{
	return (int)((mask[(unsigned)token >> 5] >> ((unsigned)token & 31)) & 1u);
}

/* (A token constraint, grammar or tools, is engine/logit_mask.h's
 * nf_logit_mask_apply: nf_sampler applies it first.) */
/* Presence and frequency penalties from counts[t] (times t was generated),
 * then the repetition penalty on tokens generated or set in `seen` (the
 * prompt's bitmask, may be NULL). */
void nf_sampling_apply_penalties(float *logits, int n, const int *counts, const uint32_t *seen,
				 const nf_sampling_params *p);
/* logits[bias[i].token] += bias[i].bias (tokens out of [0, n) ignored). */
void nf_sampling_apply_bias(float *logits, int n, const nf_logit_bias *bias, size_t n_bias);
/* Every logit below the k-th largest becomes -inf (ties at the k-th kept);
 * k <= 0 or k >= n: nothing.  scratch: n floats. */
void nf_sampling_top_k(float *logits, int n, int k, float *scratch);
/* Tokens whose probability at this temperature is below min_p times the
 * top one's become -inf: logit < max + T ln(min_p).  T > 0. */
void nf_sampling_min_p(float *logits, int n, float min_p, float temperature);

/* ln(sum exp(logits)), -inf entries ignored: a token's logprob is
 * logits[t] - nf_sampling_logsumexp(logits, n). */
float nf_sampling_logsumexp(const float *logits, int n);
/* The k largest logits' indices in descending order (ties: lower id first),
 * k <= NF_SAMPLING_MAX_TOP; returns how many (min(k, n)). */
int nf_sampling_top_ids(const float *logits, int n, int k, int *ids);

#endif
