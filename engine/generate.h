/*
 * generate.h - sampling and the single-sequence generation loop used by
 * `nimfactory run` and the gates.  (The server batches with nf_engine_step
 * and the sampler directly.)
 */
#ifndef NF_ENGINE_GENERATE_H
#define NF_ENGINE_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/sampling.h"

typedef struct nf_sampler {
	int vocab_size;
	float temperature; /* 0 = greedy (argmax) */
	float top_p;       /* 1 = off */
	uint64_t rng;      /* xorshift state, from the seed */
	void *scratch;     /* owned: top-p workspace */
	nf_sampling_params params; /* params.bias points at bias */
	nf_logit_bias *bias;       /* owned copy */
	int *counts;       /* owned: times each token was accepted (penalties); NULL without */
	uint32_t *seen;    /* owned: the prompt's tokens as a bitmask (repetition penalty) */
	float *kscratch;   /* owned: top-k workspace */
	const uint32_t *allowed; /* borrowed: the token mask (grammar); NULL: every token */
} nf_sampler;

/* The index of the first largest of x[0..n) (NaNs never win; 0 when x[0]
 * is NaN and nothing is larger), n >= 1: greedy decoding. */
int nf_argmax(const float *x, int n);

int nf_sampler_init(nf_sampler *s, int vocab_size, float temperature, float top_p, uint64_t seed);
void nf_sampler_release(nf_sampler *s);
/* The transforms of sampling.h beyond temperature and top-p (p is copied;
 * all zero: none).  NF_EINPUT for values out of range, NF_ENOMEM. */
int nf_sampler_configure(nf_sampler *s, const nf_sampling_params *p);
/* The prompt, for the repetition penalty (which also counts prompt tokens). */
int nf_sampler_set_prompt(nf_sampler *s, const int *tokens, size_t n);
/* The place a token constraint plugs in: from now on tokens whose bit is
 * clear in allowed (borrowed, vocab bits) are never picked and have no
 * logprob; NULL lifts it.  A grammar sets it before each nf_sampler_sample. */
void nf_sampler_set_mask(nf_sampler *s, const uint32_t *allowed);

/* The three phases of nf_sampler_sample, for callers that read logprobs
 * between them: process applies the mask, penalties and bias in place (the
 * logits logprobs are the log-softmax of); pick applies temperature,
 * top-k, min-p and top-p and draws (may modify logits); accept counts the
 * chosen token for the penalties. */
void nf_sampler_process(nf_sampler *s, float *logits);
int nf_sampler_pick(nf_sampler *s, float *logits);
void nf_sampler_accept(nf_sampler *s, int token);
/* process, pick, accept: the next token; modifies logits in place. */
int nf_sampler_sample(nf_sampler *s, float *logits);

typedef struct nf_gen_params {
	int max_tokens;    /* new tokens to generate at most */
	float temperature;
	float top_p;
	uint64_t seed;
	int stop_at_eos;   /* 1: stop at EOS/BOS */
	nf_sampling_params sampling; /* penalties, bias, top-k, min-p; zero: none */
} nf_gen_params;

typedef struct nf_gen_stats {
	int prompt_tokens;
	int generated_tokens;
	double prefill_seconds;
	double decode_seconds; /* time for generated tokens after the first */
	double first_token_seconds;
} nf_gen_stats;

/* Called for each generated token with its decoded piece; return non-zero to stop. */
typedef int (*nf_token_cb)(void *user, int token, const char *piece, size_t len);

/* Encode prompt (with BOS), prefill, then sample up to max_tokens. */
int nf_generate(nf_engine *e, const char *prompt, size_t prompt_len, const nf_gen_params *p,
		nf_token_cb cb, void *user, nf_gen_stats *stats);

#endif
