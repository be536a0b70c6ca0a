/*
 * test_sampling.c - each logit transform of engine/sampling.h against a
 * distribution worked out by hand, the logprob helpers, and nf_sampler
 * applying them: top-k's draws follow the renormalized distribution, a
 * +100 logit bias forces its token, a presence penalty moves greedy off a
 * token it has picked, a mask is never escaped.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/generate.h"
#include "engine/sampling.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/banned.h"

static int near(float a, float b)
{
	return (isinf(a) && isinf(b) && (a > 0) == (b > 0)) || fabsf(a - b) < 1e-5f;
}

static int row_is(const float *got, const float *want, int n, const char *name)
{
	int same = 1;
	for (int i = 0; i < n; i++)
		same &= near(got[i], want[i]);
	if (!same)
		for (int i = 0; i < n; i++)
			diag("%s[%d] = %g, want %g", name, i, (double)got[i], (double)want[i]);
	return ok(same, "%s", name);
}

static void transforms(void)
{
	float l[5];
	nf_sampling_params p = {.presence_penalty = 0.5f, .frequency_penalty = 0.25f};
	memcpy(l, (float[]){2, -2, 1, 0.5f}, 4 * sizeof *l);
	nf_sampling_apply_penalties(l, 4, (int[]){2, 1, 0, 0}, NULL, &p);
	/* 2 - 0.5 - 2 x 0.25, -2 - 0.5 - 0.25; unseen tokens unchanged */
	row_is(l, (float[]){1.0f, -2.75f, 1, 0.5f}, 4, "presence and frequency penalties");

	p = (nf_sampling_params){.repetition_penalty = 2.0f};
	uint32_t seen = 0x4; /* token 2 in the prompt */
	memcpy(l, (float[]){1, -2, 1, 0.5f}, 4 * sizeof *l);
	nf_sampling_apply_penalties(l, 4, (int[]){1, 1, 0, 0}, &seen, &p);
	row_is(l, (float[]){0.5f, -4, 0.5f, 0.5f}, 4,
	       "repetition penalty divides positive, multiplies negative, prompt tokens too");

	memcpy(l, (float[]){0, 0, 0}, 3 * sizeof *l);
	nf_sampling_apply_bias(l, 3, (nf_logit_bias[]){{1, 5}, {2, -100}, {7, 3}}, 3);
	row_is(l, (float[]){0, 5, -100}, 3, "logit bias adds; an id past the vocabulary is ignored");

	float scratch[5];
	memcpy(l, (float[]){1, 5, 3, 4, 2}, 5 * sizeof *l);
	nf_sampling_top_k(l, 5, 2, scratch);
	row_is(l, (float[]){-INFINITY, 5, -INFINITY, 4, -INFINITY}, 5, "top-k 2 keeps the two largest");
	memcpy(l, (float[]){1, 3, 3, 2}, 4 * sizeof *l);
	nf_sampling_top_k(l, 4, 2, scratch);
	row_is(l, (float[]){-INFINITY, 3, 3, -INFINITY}, 4, "top-k keeps ties at the k-th");

	/* probabilities .5 .3 .15 .05: min_p .2 keeps p >= .1 at T = 1; at
	 * T = 2 the ratios are square-rooted (.05/.5 -> .316) and all stay */
	float probs[4] = {0.5f, 0.3f, 0.15f, 0.05f};
	for (int i = 0; i < 4; i++)
		l[i] = logf(probs[i]);
	nf_sampling_min_p(l, 4, 0.2f, 1.0f);
	ok(isfinite(l[2]) && l[3] == -INFINITY, "min-p 0.2 at T=1 drops p=0.05, keeps p=0.15");
	for (int i = 0; i < 4; i++)
		l[i] = logf(probs[i]);
	nf_sampling_min_p(l, 4, 0.2f, 2.0f);
	ok(isfinite(l[3]), "min-p 0.2 at T=2 keeps p=0.05 (ratio 0.316)");

	for (int i = 0; i < 4; i++)
		l[i] = logf(probs[i]) + 3.0f; /* a shift changes no logprob */
	float lse = nf_sampling_logsumexp(l, 4);
	ok(near(l[1] - lse, logf(0.3f)), "logprob = logit - logsumexp (%g)", (double)(l[1] - lse));
	l[3] = -INFINITY;
	lse = nf_sampling_logsumexp(l, 4);
	ok(near(l[0] - lse, logf(0.5f / 0.95f)), "a -inf logit takes no mass");

	int ids[NF_SAMPLING_MAX_TOP];
	is_int(nf_sampling_top_ids((float[]){0.1f, 0.5f, 0.5f, -1, 0.3f}, 5, 3, ids), 3, "top ids: 3 of 5");
	ok(ids[0] == 1 && ids[1] == 2 && ids[2] == 4, "top ids descending, ties by lower id (%d %d %d)",
	   ids[0], ids[1], ids[2]);
	is_int(nf_sampling_top_ids((float[]){2, 1}, 2, 5, ids), 2, "top ids: k past the vocabulary");
}

static void sampler(void)
{
	enum { V = 3, DRAWS = 20000 };
	nf_sampler s;
	float l[V];
	int counts[V] = {0};

	/* .5 .3 .2 with top-k 2: .625 / .375 / never */
	nf_sampler_init(&s, V, 1.0f, 1.0f, 11);
	is_int(nf_sampler_configure(&s, &(nf_sampling_params){.top_k = 2}), 0, "configure top-k");
	for (int i = 0; i < DRAWS; i++) {
		l[0] = logf(0.5f), l[1] = logf(0.3f), l[2] = logf(0.2f);
		counts[nf_sampler_sample(&s, l)]++;
	}
	nf_sampler_release(&s);
	ok(counts[2] == 0 && fabs(counts[0] / (double)DRAWS - 0.625) < 0.02,
	   "top-k 2 draws follow .625/.375 (%d %d %d)", counts[0], counts[1], counts[2]);

	nf_sampler_init(&s, V, 1.0f, 1.0f, 12);
	nf_sampler_configure(&s, &(nf_sampling_params){.bias = (nf_logit_bias[]){{2, 100}}, .n_bias = 1});
	int forced = 1;
	for (int i = 0; i < 200; i++) {
		l[0] = 5, l[1] = 4, l[2] = -5;
		forced &= nf_sampler_sample(&s, l) == 2;
	}
	nf_sampler_release(&s);
	ok(forced, "logit bias +100 forces its token at temperature 1");

	nf_sampler_init(&s, V, 0.0f, 1.0f, 13);
	nf_sampler_configure(&s, &(nf_sampling_params){.presence_penalty = 0.5f});
	l[0] = 1.0f, l[1] = 0.9f, l[2] = 0;
	int first = nf_sampler_sample(&s, l);
	l[0] = 1.0f, l[1] = 0.9f, l[2] = 0;
	int second = nf_sampler_sample(&s, l);
	nf_sampler_release(&s);
	ok(first == 0 && second == 1, "greedy with a presence penalty leaves a picked token (%d %d)", first, second);

	uint32_t allowed = 0x2;
	nf_sampler_init(&s, V, 1.5f, 1.0f, 14);
	nf_sampler_set_mask(&s, &allowed);
	int kept = 1;
	for (int i = 0; i < 200; i++) {
		l[0] = 3, l[1] = -3, l[2] = 2;
		kept &= nf_sampler_sample(&s, l) == 1;
	}
	nf_sampler_release(&s);
	ok(kept, "the mask decides, whatever the logits");

	nf_sampler_init(&s, V, 1.0f, 1.0f, 15);
	is_int(nf_sampler_configure(&s, &(nf_sampling_params){.bias = (nf_logit_bias[]){{3, 1}}, .n_bias = 1}),
	       NF_EINPUT, "a bias on a token past the vocabulary is refused");
	nf_sampler_release(&s);
	nf_sampler_init(&s, V, 1.0f, 1.0f, 15);
	is_int(nf_sampler_configure(&s, &(nf_sampling_params){.presence_penalty = 3}), NF_EINPUT,
	       "a presence penalty past 2 is refused");
	nf_sampler_release(&s);
}

int main(void)
{
	transforms();
	sampler();
	return done_testing();
}
