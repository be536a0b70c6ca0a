/*
 * test_generate.c - the sampler (greedy, seeded temperature, top-p) and
 * nf_generate on a stories260K fp32 engine: greedy from the empty prompt
 * gives the known sentence, max_tokens and the callback stop it; the
 * prompt, prefilled in one call, gives the same tokens as feeding it one
 * step at a time.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/generate.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"

typedef struct sink {
	char text[8192];
	size_t len;
	int count;
	int stop_after;
} sink;

static int collect(void *user, int token, const char *piece, size_t len)
{
	sink *s = user;
	(void)token;
	if (s->len + len < sizeof s->text) {
		memcpy(s->text + s->len, piece, len);
		s->len += len;
		s->text[s->len] = '\0';
	}
	s->count++;
	return s->stop_after && s->count >= s->stop_after;
}

static void sampler_tests(void)
{
	enum { V = 6 };
	nf_sampler s;
	float base[V] = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f, 0.5f}, l[V];

	is_int(nf_sampler_init(&s, V, 0.0f, 1.0f, 1), 0, "greedy sampler");
	memcpy(l, base, sizeof l);
	is_int(nf_sampler_sample(&s, l), 1, "temperature 0 picks the argmax");
	nf_sampler_release(&s);

	/* seeded sampling is reproducible and follows the distribution */
	int seq1[64], seq2[64], counts[V] = {0};
	for (int run = 0; run < 2; run++) {
		nf_sampler_init(&s, V, 1.0f, 1.0f, 42);
		for (int i = 0; i < 64; i++) {
			memcpy(l, base, sizeof l);
			(run ? seq2 : seq1)[i] = nf_sampler_sample(&s, l);
		}
		nf_sampler_release(&s);
	}
	ok(memcmp(seq1, seq2, sizeof seq1) == 0, "same seed, same samples");
	nf_sampler_init(&s, V, 1.0f, 1.0f, 7);
	for (int i = 0; i < 20000; i++) {
		memcpy(l, base, sizeof l);
		counts[nf_sampler_sample(&s, l)]++;
	}
	nf_sampler_release(&s);
	double z = 0, p1;
	for (int i = 0; i < V; i++)
		z += exp(base[i]);
	p1 = exp(base[1]) / z;
	ok(fabs(counts[1] / 20000.0 - p1) < 0.02, "temperature 1 frequency of token 1 %.3f ~ %.3f",
	   counts[1] / 20000.0, p1);
	int diff = 0;
	nf_sampler_init(&s, V, 1.0f, 1.0f, 43);
	for (int i = 0; i < 64; i++) {
		memcpy(l, base, sizeof l);
		diff += nf_sampler_sample(&s, l) != seq1[i];
	}
	nf_sampler_release(&s);
	ok(diff > 0, "another seed gives other samples");

	/* top-p 0.5: only the two most likely tokens (1 and 3: 0.37 + 0.34 > 0.5) */
	int outside = 0, seen3 = 0;
	nf_sampler_init(&s, V, 1.0f, 0.5f, 9);
	for (int i = 0; i < 2000; i++) {
		memcpy(l, base, sizeof l);
		int t = nf_sampler_sample(&s, l);
		outside += t != 1 && t != 3;
		seen3 += t == 3;
	}
	nf_sampler_release(&s);
	ok(outside == 0 && seen3 > 0, "top-p 0.5 keeps only the nucleus {1, 3} (%d outside)", outside);

	ok(nf_sampler_init(&s, V, -1.0f, 1.0f, 1) == NF_EINPUT, "negative temperature refused");
	ok(nf_sampler_init(&s, V, 1.0f, 0.0f, 1) == NF_EINPUT, "top_p 0 refused");
	ok(nf_sampler_init(&s, V, NAN, 1.0f, 1) == NF_EINPUT, "NaN temperature refused");
	nf_sampler_release(NULL);
}

/* The tokens nf_generate should give: the prompt one step at a time (as
 * before prefill), then sampling with p; stops as nf_generate does. */
static int stepwise(nf_engine *e, const char *prompt, const nf_gen_params *p, int *out, int cap)
{
	const nf_model_config *c = nf_engine_config(e);
	nf_sampler smp = {0};
	nf_seq *s = NULL;
	int *toks = NULL, n = -1;
	size_t nt = 0;
	float *lg = malloc(sizeof(float) * (size_t)c->vocab_size);
	if (!lg || nf_sampler_init(&smp, c->vocab_size, p->temperature, p->top_p, p->seed) ||
	    nf_tokenizer_encode(nf_engine_tokenizer(e), prompt, strlen(prompt), NF_TOK_ADD_BOS, &toks, &nt) ||
	    nf_seq_new(&s, e))
		goto done;
	int pos = 0;
	for (; pos < (int)nt; pos++)
		if (nf_engine_step(e, &s, &toks[pos], &pos, 1, lg))
			goto done;
	n = 0;
	while (n < p->max_tokens && n < cap) {
		int next = nf_sampler_sample(&smp, lg);
		if (p->stop_at_eos && (next == NF_TOKEN_EOS || next == NF_TOKEN_BOS))
			break;
		out[n++] = next;
		if (pos >= c->max_seq_len)
			break;
		if (nf_engine_step(e, &s, &next, &pos, 1, lg)) {
			n = -1;
			break;
		}
		pos++;
	}
done:
	nf_seq_free(s);
	nf_sampler_release(&smp);
	free(toks);
	free(lg);
	return n;
}

typedef struct tokens {
	int t[256];
	int n;
} tokens;

static int collect_tokens(void *user, int token, const char *piece, size_t len)
{
	tokens *t = user;
	(void)piece;
	(void)len;
	if (t->n < 256)
		t->t[t->n++] = token;
	return 0;
}

static void test_prefill_equivalence(nf_engine *e)
{
	const char *prompt = "Once upon a time, there was a big dog named Max. Max liked to run in the "
			     "park with his friend, a small cat. One day, the sun was hot and";
	nf_gen_params p = {0};
	p.max_tokens = 40;
	p.top_p = 1.0f;
	p.stop_at_eos = 1;
	for (int sampled = 0; sampled < 2; sampled++) {
		if (sampled) {
			p.temperature = 0.9f;
			p.top_p = 0.9f;
			p.seed = 77;
		}
		int want[256];
		tokens got = {0};
		nf_gen_stats st = {0};
		int n = stepwise(e, prompt, &p, want, 256);
		int rc = nf_generate(e, prompt, strlen(prompt), &p, collect_tokens, &got, &st);
		ok(rc == 0 && n > 0 && got.n == n && memcmp(got.t, want, sizeof(int) * (size_t)n) == 0,
		   "%s: a %d-token prompt prefilled in one call gives the %d tokens of the one-step-at-a-time loop (got %d)",
		   sampled ? "sampled" : "greedy", st.prompt_tokens, n, got.n);
	}
	tokens none = {0};
	nf_gen_stats st = {0};
	p.max_tokens = 0;
	ok(nf_generate(e, prompt, strlen(prompt), &p, collect_tokens, &none, &st) == 0 && none.n == 0 &&
		   st.generated_tokens == 0,
	   "max_tokens 0 generates nothing");
}

/* The one-pass argmax nf_argmax replaces: the first largest, NaN never wins. */
static int argmax_ref(const float *x, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

static void argmax_tests(void)
{
	static float x[40000];
	unsigned r = 12345;
	int bad = 0, cases = 0;
	/* every length 1..100 and a vocabulary-sized one, few distinct values
	 * (ties everywhere), now and then a NaN or an infinity */
	for (int round = 0; round < 20; round++)
		for (int n = 1; n <= 101; n++, cases++) {
			int len = n == 101 ? 32000 + round : n;
			for (int i = 0; i < len; i++) {
				r = r * 1103515245u + 12345u;
				unsigned v = (r >> 16) % 11;
				x[i] = v == 10 && round % 3 == 0 ? NAN : v == 9 && round % 5 == 0 ? -INFINITY
											: (float)v;
			}
			bad += nf_argmax(x, len) != argmax_ref(x, len);
		}
	ok(bad == 0, "nf_argmax equals the one-pass loop on %d arrays with ties, NaN and -inf (%d differ)",
	   cases, bad);
	x[0] = NAN, x[1] = 3.0f, x[2] = 7.0f;
	is_int(nf_argmax(x, 3), 0, "a NaN first stays the answer, as in the one-pass loop");
	x[0] = 1.0f;
	is_int(nf_argmax(x, 3), 2, "the largest of three");
}

int main(void)
{
	const char *shared = tap_env("NF_SHARED", "../shared");
	const char *build_dir = tap_env("NF_BUILD", "build");
	char mpath[1024], tpath[1024], dir[1024];
	nf_model *m = NULL;
	nf_engine *e = NULL;

	sampler_tests();
	argmax_tests();

	snprintf(mpath, sizeof mpath, "%s/models/stories260K/stories260K.bin", shared);
	snprintf(tpath, sizeof tpath, "%s/models/stories260K/tok512.bin", shared);
	snprintf(dir, sizeof dir, "%s/tmp/test_generate.%d", build_dir, (int)getpid());
	nf_engine_build_opts o = {0};
	o.precision = NF_PREC_FP32;
	o.tokenizer_path = tpath;
	o.threads = 1;
	if (nf_ckpt_load(&m, mpath, NF_CKPT_LLAMA2C) != 0 || nf_engine_build(dir, m, &o) != 0 ||
	    nf_engine_open(&e, dir, 1) != 0) {
		ok(0, "stories260K fp32 engine: %s", nf_error_last());
		nf_model_free(m);
		return done_testing();
	}

	nf_gen_params p = {0};
	p.max_tokens = 40;
	p.top_p = 1.0f;
	p.stop_at_eos = 1;
	sink out = {0};
	nf_gen_stats st = {0};
	is_int(nf_generate(e, "", 0, &p, collect, &out, &st), 0, "generate from the empty prompt");
	const char *want =
		"Once upon a time, there was a little girl named Lily. She loved to play outside in the park.";
	ok(strncmp(out.text, want, strlen(want)) == 0, "greedy text begins with the known sentence");
	diag("text: %s", out.text);
	is_int(st.generated_tokens, 40, "40 tokens generated");
	is_int(st.prompt_tokens, 1, "prompt is BOS only");
	ok(st.first_token_seconds > 0 && st.decode_seconds > 0, "timings recorded");

	/* a prompt continues; the callback can stop it */
	sink out2 = {0};
	out2.stop_after = 5;
	p.max_tokens = 100;
	const char *prompt = "Once upon a time";
	is_int(nf_generate(e, prompt, strlen(prompt), &p, collect, &out2, &st), 0, "generate with a prompt");
	is_int(out2.count, 5, "callback stops generation after 5 tokens");
	ok(st.prompt_tokens > 1, "prompt encoded to %d tokens", st.prompt_tokens);
	ok(strncmp(out2.text, ",", 1) == 0, "greedy continuation of \"Once upon a time\" starts with ',' (%s)", out2.text);

	test_prefill_equivalence(e);

	/* sampling with a seed is reproducible */
	sink a = {0}, b = {0};
	p.max_tokens = 30;
	p.temperature = 0.8f;
	p.top_p = 0.9f;
	p.seed = 1234;
	nf_generate(e, "", 0, &p, collect, &a, NULL);
	nf_generate(e, "", 0, &p, collect, &b, NULL);
	ok(a.len > 0 && strcmp(a.text, b.text) == 0, "same seed, same text");
	p.max_tokens = -1;
	ok(nf_generate(e, "", 0, &p, collect, &a, NULL) == NF_EINPUT, "negative max_tokens refused");

	nf_engine_free(e);
	nf_model_free(m);
	nf_fs_remove_tree(dir);
	return done_testing();
}
