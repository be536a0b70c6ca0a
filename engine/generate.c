/*
 * generate.c - the sampler (the transforms of sampling.h, then greedy at
 * temperature 0, else temperature, top-k, min-p and top-p with a seeded
 * xorshift) and the single-sequence generation loop (the prompt prefilled
 * in one call, then one step per token).
 */
#define _POSIX_C_SOURCE 200809L
#include "engine/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/logit_mask.h"
#include "util/error.h"
#include "util/banned.h"

typedef struct prob_index {
	float prob;
	int index;
} prob_index;

int nf_sampler_init(nf_sampler *s, int vocab_size, float temperature, float top_p, uint64_t seed)
{
	memset(s, 0, sizeof *s);
	if (vocab_size <= 0)
		return nf_error_set(NF_EINPUT, "sampler: vocab size %d", vocab_size);
	if (!(temperature >= 0.0f) || !isfinite(temperature))
		return nf_error_set(NF_EINPUT, "sampler: temperature %g must be >= 0", (double)temperature);
	if (!(top_p > 0.0f && top_p <= 1.0f))
		return nf_error_set(NF_EINPUT, "sampler: top_p %g must be in (0, 1]", (double)top_p);
	s->vocab_size = vocab_size;
	s->temperature = temperature;
	s->top_p = top_p;
	/* splitmix the seed so that 0 and nearby seeds give distinct, non-zero states */
	uint64_t z = seed + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	s->rng = (z ^ (z >> 31)) | 1;
	s->scratch = calloc((size_t)vocab_size, sizeof(prob_index));
	if (!s->scratch)
		return nf_error_set(NF_ENOMEM, "sampler: out of memory");
	return 0;
}

void nf_sampler_release(nf_sampler *s)
{
	if (!s)
		return;
	free(s->scratch);
	free(s->bias);
	free(s->counts);
	free(s->seen);
	free(s->kscratch);
	s->scratch = NULL;
	s->bias = NULL;
	s->counts = NULL;
	s->seen = NULL;
	s->kscratch = NULL;
}

static int check_params(const nf_sampling_params *p, int vocab_size)
{
	if (!(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f) ||
	    !(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f))
		return nf_error_set(NF_EINPUT, "sampler: presence and frequency penalties must be in [-2, 2]");
	if (!(p->repetition_penalty >= 0.0f && p->repetition_penalty <= 100.0f))
		return nf_error_set(NF_EINPUT, "sampler: repetition penalty %g must be in (0, 100]",
				    (double)p->repetition_penalty);
	if (p->top_k < 0 || !(p->min_p >= 0.0f && p->min_p <= 1.0f))
		return nf_error_set(NF_EINPUT, "sampler: top_k must be >= 0 and min_p in [0, 1]");
	if (p->n_bias > NF_SAMPLING_MAX_BIAS)
		return nf_error_set(NF_EINPUT, "sampler: at most %d logit biases", NF_SAMPLING_MAX_BIAS);
	for (size_t i = 0; i < p->n_bias; i++)
		if (p->bias[i].token < 0 || p->bias[i].token >= vocab_size ||
		    !(p->bias[i].bias >= -100.0f && p->bias[i].bias <= 100.0f))
			return nf_error_set(NF_EINPUT, "sampler: logit bias of token %d: a token below %d "
					    "and a bias in [-100, 100]", p->bias[i].token, vocab_size);
	return 0;
}

int nf_sampler_configure(nf_sampler *s, const nf_sampling_params *p)
{
	int err = check_params(p, s->vocab_size);
	size_t n = (size_t)s->vocab_size;
	if (err)
		return err;
	s->params = *p;
	s->params.bias = NULL;
	if (p->n_bias) {
		if (!(s->bias = malloc(p->n_bias * sizeof *s->bias)))
			return nf_error_set(NF_ENOMEM, "sampler: out of memory");
		memcpy(s->bias, p->bias, p->n_bias * sizeof *s->bias);
		s->params.bias = s->bias;
	}
	if ((p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f ||
	     (p->repetition_penalty > 0.0f && p->repetition_penalty != 1.0f)) &&
	    !(s->counts = calloc(n, sizeof *s->counts)))
		return nf_error_set(NF_ENOMEM, "sampler: out of memory");
	if (p->top_k > 0 && !(s->kscratch = malloc(n * sizeof *s->kscratch)))
		return nf_error_set(NF_ENOMEM, "sampler: out of memory");
	return 0;
}

int nf_sampler_set_prompt(nf_sampler *s, const int *tokens, size_t n)
{
	if (!(s->params.repetition_penalty > 0.0f && s->params.repetition_penalty != 1.0f))
		return 0;
	if (!s->seen && !(s->seen = calloc(((size_t)s->vocab_size + 31) / 32, sizeof *s->seen)))
		return nf_error_set(NF_ENOMEM, "sampler: out of memory");
	for (size_t i = 0; i < n; i++)
		if (tokens[i] >= 0 && tokens[i] < s->vocab_size)
			s->seen[(unsigned)tokens[i] >> 5] |= 1u << ((unsigned)tokens[i] & 31);
	return 0;
}

void nf_sampler_set_mask(nf_sampler *s, const uint32_t *allowed)
{
	s->allowed = allowed;
}

void nf_sampler_process(nf_sampler *s, float *logits)
{
	if (s->allowed)
		nf_logit_mask_apply(logits, (size_t)s->vocab_size, s->allowed);
	nf_sampling_apply_penalties(logits, s->vocab_size, s->counts, s->seen, &s->params);
	nf_sampling_apply_bias(logits, s->vocab_size, s->params.bias, s->params.n_bias);
}

void nf_sampler_accept(nf_sampler *s, int token)
{
	if (s->counts && token >= 0 && token < s->vocab_size)
		s->counts[token]++;
}

int nf_sampler_sample(nf_sampler *s, float *logits)
{
	nf_sampler_process(s, logits);
	int token = nf_sampler_pick(s, logits);
	nf_sampler_accept(s, token);
	return token;
}

static float rand_f32(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return (float)((*state * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f; /* [0, 1) */
}

int nf_argmax(const float *x, int n)
{
	/* Two passes: the largest value, with 16 independent running maxima the
	 * compiler turns into vector compares and blends (the one-pass loop
	 * carries `best` from iteration to iteration, ~20x slower: 120 us for a
	 * 32000-token vocabulary, once per sequence per step), then the first
	 * index holding it.  The select form keeps x > m semantics, so NaNs
	 * never win, as in the one-pass loop. */
	enum { LANES = 16 };
	float m[LANES], top = x[0];
	int i = 0;
	if (n >= LANES) {
		/* -inf, not x[j]: a lane that started at a NaN would keep it */
		for (int j = 0; j < LANES; j++)
			m[j] = -INFINITY;
		for (i = 0; i + LANES <= n; i += LANES)
			for (int j = 0; j < LANES; j++)
				m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
		for (int j = 0; j < LANES; j++)
			top = m[j] > top ? m[j] : top;
	}
	for (; i < n; i++)
		top = x[i] > top ? x[i] : top;
	for (i = 0; i < n; i++)
		if (x[i] == top)
			return i;
	return 0;
}

static int cmp_desc(const void *a, const void *b)
{
	const prob_index *x = a, *y = b;
	if (x->prob != y->prob)
		return x->prob > y->prob ? -1 : 1;
	return x->index - y->index;
}

int nf_sampler_pick(nf_sampler *s, float *logits)
{
	int n = s->vocab_size;
	if (s->temperature == 0.0f)
		return nf_argmax(logits, n);
	if (s->kscratch)
		nf_sampling_top_k(logits, n, s->params.top_k, s->kscratch);
	nf_sampling_min_p(logits, n, s->params.min_p, s->temperature);
	float max = logits[0];
	for (int i = 1; i < n; i++)
		if (logits[i] > max)
			max = logits[i];
	if (max == -INFINITY) /* a mask that left nothing */
		return nf_argmax(logits, n);
	double sum = 0.0;
	for (int i = 0; i < n; i++) {
		logits[i] = expf((logits[i] - max) / s->temperature);
		sum += logits[i];
	}
	for (int i = 0; i < n; i++)
		logits[i] = (float)(logits[i] / sum);
	float coin = rand_f32(&s->rng);
	if (s->top_p >= 1.0f) {
		float cdf = 0.0f;
		for (int i = 0; i < n; i++) {
			cdf += logits[i];
			if (coin < cdf)
				return i;
		}
		return n - 1;
	}
	/* top-p: keep the smallest set of most likely tokens whose mass exceeds top_p;
	 * tokens below (1 - top_p) / (n - 1) can never be in it */
	prob_index *pi = s->scratch;
	float cutoff = n > 1 ? (1.0f - s->top_p) / (float)(n - 1) : 0.0f;
	int m = 0;
	for (int i = 0; i < n; i++)
		if (logits[i] >= cutoff)
			pi[m++] = (prob_index){logits[i], i};
	if (m == 0)
		return nf_argmax(logits, n);
	qsort(pi, (size_t)m, sizeof *pi, cmp_desc);
	float cum = 0.0f;
	int last = m - 1;
	for (int i = 0; i < m; i++) {
		cum += pi[i].prob;
		if (cum > s->top_p) {
			last = i;
			break;
		}
	}
	float r = coin * cum, cdf = 0.0f;
	for (int i = 0; i <= last; i++) {
		cdf += pi[i].prob;
		if (r < cdf)
			return pi[i].index;
	}
	return pi[last].index;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int nf_generate(nf_engine *e, const char *prompt, size_t prompt_len, const nf_gen_params *p,
		nf_token_cb cb, void *user, nf_gen_stats *stats)
{
	const nf_model_config *c = nf_engine_config(e);
	const nf_tokenizer *tok = nf_engine_tokenizer(e);
	nf_seq *seq = NULL;
	nf_sampler smp = {0};
	int *toks = NULL;
	size_t ntoks = 0;
	float *logits = NULL;
	nf_gen_stats st = {0};
	int err;
	double t0 = now_s(), t_first = 0.0;

	if (p->max_tokens < 0)
		return nf_error_set(NF_EINPUT, "generate: max_tokens %d is negative", p->max_tokens);
	if ((err = nf_sampler_init(&smp, c->vocab_size, p->temperature, p->top_p, p->seed)) ||
	    (err = nf_sampler_configure(&smp, &p->sampling)) ||
	    (err = nf_tokenizer_encode(tok, prompt ? prompt : "", prompt ? prompt_len : 0,
				       NF_TOK_ADD_SPECIAL | NF_TOK_PARSE_SPECIAL, &toks, &ntoks)) ||
	    (err = nf_seq_new(&seq, e)))
		goto done;
	if (ntoks == 0 || ntoks > (size_t)c->max_seq_len) {
		err = nf_error_set(NF_EINPUT, "generate: prompt of %zu tokens does not fit the context of %d",
				   ntoks, (int)c->max_seq_len);
		goto done;
	}
	if ((err = nf_sampler_set_prompt(&smp, toks, ntoks)))
		goto done;
	if (!(logits = malloc(sizeof(float) * (size_t)c->vocab_size))) {
		err = nf_error_set(NF_ENOMEM, "generate: out of memory");
		goto done;
	}
	st.prompt_tokens = (int)ntoks;
	/* the whole prompt in one pass over the weights; its logits predict
	 * the token after the last prompt token */
	int pos = (int)ntoks - 1, token = toks[pos];
	if (p->max_tokens > 0 && (err = nf_engine_prefill(e, seq, toks, ntoks, 0, logits)))
		goto done;
	/* each later step consumes `token` at pos and samples the next */
	while (st.generated_tokens < p->max_tokens && pos < c->max_seq_len) {
		if (st.generated_tokens > 0 && (err = nf_engine_step(e, &seq, &token, &pos, 1, logits)))
			goto done;
		int next = nf_sampler_sample(&smp, logits);
		if (st.generated_tokens == 0) {
			t_first = now_s();
			st.prefill_seconds = t_first - t0;
			st.first_token_seconds = t_first - t0;
		}
		if (p->stop_at_eos && (nf_tokenizer_is_eog(tok, next) || next == nf_tokenizer_bos(tok)))
			break;
		st.generated_tokens++;
		size_t len = 0;
		const char *piece = nf_tokenizer_decode(tok, token, next, &len);
		pos++;
		token = next;
		if (cb && cb(user, next, piece, len))
			break;
	}
	if (st.generated_tokens > 0)
		st.decode_seconds = now_s() - t_first;
done:
	if (stats)
		*stats = st;
	free(logits);
	free(toks);
	nf_seq_free(seq);
	nf_sampler_release(&smp);
	return err;
}
