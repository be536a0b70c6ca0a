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

typedef struct nf_sampler {
	int vocab_size;
	float temperature; /* 0 = greedy (argmax) */
	float top_p;       /* 1 = off */
	uint64_t rng;      /* xorshift state, from the seed */
	void *scratch;     /* owned: top-p workspace */
} nf_sampler;

/* The index of the first largest of x[0..n) (NaNs never win; 0 when x[0]
 * is NaN and nothing is larger), n >= 1: greedy decoding. */
int nf_argmax(const float *x, int n);

int nf_sampler_init(nf_sampler *s, int vocab_size, float temperature, float top_p, uint64_t seed);
void nf_sampler_release(nf_sampler *s);
/* Pick the next token; may modify logits in place. */
int nf_sampler_sample(nf_sampler *s, float *logits);

typedef struct nf_gen_params {
	int max_tokens;    /* new tokens to generate at most */
	float temperature;
	float top_p;
	uint64_t seed;
	int stop_at_eos;   /* 1: stop at EOS/BOS */
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
