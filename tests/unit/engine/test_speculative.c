/*
 * test_speculative.c - speculative decoding gives the tokens plain decoding
 * gives: prompt lookup's n-gram matching on known contexts, then on
 * stories260K engines (fp32 and int8-wo targets, prompt lookup and an
 * int8-wo draft engine) the same tokens as one step at a time, greedy and
 * sampled with a seed, over several prompts, with fewer passes than tokens
 * where the drafts are good; and the distribution of the first two tokens
 * sampled at temperature 1 after a fixed prompt, over many seeds, the same
 * with speculation as without (a two-sample chi-square test).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/speculative.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define N_GEN 64

static void lookup_tests(void)
{
	int d[8];
	int a[] = {1, 2, 3, 4, 1, 2};
	size_t n = nf_spec_lookup(a, 6, 3, d, 4);
	ok(n == 4 && d[0] == 3 && d[1] == 4 && d[2] == 1 && d[3] == 2,
	   "the bigram 1 2 that ends the text is followed by 3 4 1 2 earlier");
	int b[] = {5, 1, 9, 1, 7, 1};
	n = nf_spec_lookup(b, 6, 1, d, 2);
	ok(n == 2 && d[0] == 7 && d[1] == 1, "the most recent earlier occurrence wins");
	int c[] = {1, 2, 3, 9, 2, 3, 8, 1, 2, 3};
	n = nf_spec_lookup(c, 10, 3, d, 1);
	ok(n == 1 && d[0] == 9, "the longest n-gram wins over a more recent shorter one");
	int e[] = {1, 2, 3};
	is_int((int)nf_spec_lookup(e, 3, 3, d, 4), 0, "no earlier occurrence: no draft");
	is_int((int)nf_spec_lookup(e, 1, 3, d, 4), 0, "one token: no draft");
	int f[] = {4, 4, 4, 4};
	n = nf_spec_lookup(f, 4, 2, d, 8);
	ok(n == 1 && d[0] == 4, "a draft stops where the text does");
}

/* Plain decoding: the prompt prefilled, then one step a token. */
static int decode_plain(nf_engine *e, const int *prompt, size_t n, float temp, int *out)
{
	nf_seq *s = NULL;
	nf_sampler smp;
	int vocab = nf_engine_config(e)->vocab_size, err;
	float *logits = malloc((size_t)vocab * sizeof(float));
	if (!logits || (err = nf_seq_new(&s, e)) ||
	    (err = nf_sampler_init(&smp, vocab, temp, 1.0f, 7)))
		return -1;
	err = nf_engine_prefill(e, s, prompt, n, 0, logits);
	int pos = (int)n;
	for (int i = 0; i < N_GEN && !err; i++) {
		out[i] = nf_sampler_sample(&smp, logits);
		if (i + 1 < N_GEN)
			err = nf_engine_step(e, &s, &out[i], &pos, 1, logits);
		pos++;
	}
	nf_sampler_release(&smp);
	nf_seq_free(s);
	free(logits);
	return err;
}

/* The same with speculation; *passes gets the verification passes. */
static int decode_spec(nf_engine *e, const nf_spec_opts *o, const int *prompt, size_t n,
		       float temp, int *out, uint64_t *passes, uint64_t *draft_passes)
{
	int ctx[512];
	nf_seq *s = NULL;
	nf_spec *sp = NULL;
	nf_sampler smp;
	size_t len = n, got = 0;
	int err;
	memcpy(ctx, prompt, n * sizeof *ctx);
	if ((err = nf_seq_new(&s, e)) || (err = nf_spec_new(&sp, e, s, o)) ||
	    (err = nf_sampler_init(&smp, nf_engine_config(e)->vocab_size, temp, 1.0f, 7)))
		return err;
	if (n > 1)
		err = nf_engine_prefill(e, s, prompt, n - 1, 0, NULL);
	while (!err && got < N_GEN) {
		int step[NF_SPEC_MAX_K + 1];
		size_t k;
		if ((err = nf_spec_next(sp, ctx, len, &smp, NULL, NULL, step, &k)))
			break;
		for (size_t i = 0; i < k && got < N_GEN; i++)
			out[got++] = ctx[len++] = step[i];
	}
	*passes = nf_spec_get_stats(sp).steps;
	*draft_passes = nf_spec_get_stats(sp).draft_passes;
	nf_sampler_release(&smp);
	nf_spec_free(sp);
	nf_seq_free(s);
	return err;
}

#define N_SEEDS 1500
#define N_FIRST 2

/* The first N_FIRST tokens after prompt[0, n), sampled at temperature temp
 * with seed: plain decoding when o is NULL, else with speculation (its
 * counts added to *st). */
static int first_tokens(nf_engine *e, const nf_spec_opts *o, const int *prompt, size_t n,
			float temp, uint64_t seed, int *out, nf_spec_stats *st)
{
	int ctx[512], vocab = nf_engine_config(e)->vocab_size, pos = (int)n, err;
	float logits[512];
	size_t got = 0;
	nf_seq *s = NULL;
	nf_spec *sp = NULL;
	nf_sampler smp;
	if (vocab > 512 || n + N_FIRST > 512 || (err = nf_seq_new(&s, e)))
		return -1;
	if ((err = nf_sampler_init(&smp, vocab, temp, 1.0f, seed))) {
		nf_seq_free(s);
		return err;
	}
	memcpy(ctx, prompt, n * sizeof *ctx);
	if (!o) {
		err = nf_engine_prefill(e, s, prompt, n, 0, logits);
		for (; !err && got < N_FIRST; got++, pos++) {
			out[got] = nf_sampler_sample(&smp, logits);
			if (got + 1 < N_FIRST)
				err = nf_engine_step(e, &s, &out[got], &pos, 1, logits);
		}
	} else if (!(err = nf_spec_new(&sp, e, s, o)) &&
		   !(err = nf_engine_prefill(e, s, prompt, n - 1, 0, NULL))) {
		while (!err && got < N_FIRST) {
			int step[NF_SPEC_MAX_K + 1];
			size_t k = 0;
			err = nf_spec_next(sp, ctx, n + got, &smp, NULL, NULL, step, &k);
			for (size_t i = 0; !err && i < k && got < N_FIRST; i++, got++)
				out[got] = ctx[n + got] = step[i];
		}
		nf_spec_stats add = nf_spec_get_stats(sp);
		st->drafted += add.drafted;
		st->accepted += add.accepted;
	}
	nf_spec_free(sp);
	nf_sampler_release(&smp);
	nf_seq_free(s);
	return err;
}

/* Upper 0.001 critical value of chi-square with df degrees of freedom
 * (Wilson-Hilferty: within 1% of the table from 3 df on). */
static double chi2_crit_001(int df)
{
	double z = 3.0902, a = 2.0 / (9.0 * df), c = 1.0 - a + z * sqrt(a);
	return df * c * c * c;
}

/* The two-sample chi-square statistic of histograms a and b of equal
 * totals over vocab tokens, the tokens seen fewer than 10 times in both
 * together pooled into one bin; *df its degrees of freedom. */
static double chi2_two_sample(const long *a, const long *b, int vocab, int *df)
{
	long pa = 0, pb = 0;
	double x2 = 0.0;
	int bins = 0;
	for (int t = 0; t < vocab; t++) {
		if (a[t] + b[t] < 10) {
			pa += a[t];
			pb += b[t];
			continue;
		}
		x2 += (double)(a[t] - b[t]) * (double)(a[t] - b[t]) / (double)(a[t] + b[t]);
		bins++;
	}
	if (pa + pb > 0) {
		x2 += (double)(pa - pb) * (double)(pa - pb) / (double)(pa + pb);
		bins++;
	}
	*df = bins - 1;
	return x2;
}

/* Histograms of each of the first N_FIRST tokens over seeds [seed0, seed0
 * + N_SEEDS): hist[i * vocab + t]. */
static int histogram(nf_engine *e, const nf_spec_opts *o, const int *prompt, size_t n,
		     float temp, uint64_t seed0, long *hist, nf_spec_stats *st)
{
	int vocab = nf_engine_config(e)->vocab_size;
	for (uint64_t seed = seed0; seed < seed0 + N_SEEDS; seed++) {
		int out[N_FIRST];
		if (first_tokens(e, o, prompt, n, temp, seed, out, st))
			return -1;
		for (int i = 0; i < N_FIRST; i++)
			hist[i * vocab + out[i]]++;
	}
	return 0;
}

/* 1 when every one of the first N_FIRST tokens' histograms in a and b pass
 * the two-sample test; the statistics go to the test's name. */
static int same_distribution(const long *a, const long *b, int vocab, char *why, size_t cap)
{
	int pass = 1;
	size_t at = 0;
	for (int i = 0; i < N_FIRST; i++) {
		int df;
		double x2 = chi2_two_sample(a + i * vocab, b + i * vocab, vocab, &df);
		pass &= df > 0 && x2 < chi2_crit_001(df);
		at += (size_t)snprintf(why + at, at < cap ? cap - at : 0,
				       "%stoken %d: chi-square %.1f, %d df, critical %.1f", i ? "; " : "",
				       i + 1, x2, df, chi2_crit_001(df));
	}
	return pass;
}

/* Sampling at temperature 1, N_SEEDS answers with speculation (lookup and
 * the int8-wo draft engine) against N_SEEDS without, on other seeds: the
 * first tokens' distributions agree at significance 0.001; the same test
 * tells temperature 0.8 from 1, which shows it can fail.  (With one seed
 * speculation gives plain decoding's very tokens, as compare() checks, so
 * the two drafters' histograms coincide; this holds the sampled answers to
 * the model's distribution by their counts, whatever the seeds do.) */
static void distribution_tests(nf_engine *e, nf_engine *draft)
{
	static const char prompt[] = "The cat sat on the mat. The cat sat on the";
	int vocab = nf_engine_config(e)->vocab_size, *p = NULL;
	size_t n = 0, cells = (size_t)N_FIRST * (size_t)vocab;
	long *plain = calloc(cells, sizeof *plain), *other = calloc(cells, sizeof *other);
	char why[256];
	nf_spec_opts lookup = {.kind = NF_SPEC_LOOKUP, .k = 4, .max_ngram = 3};
	nf_spec_opts drafted = {.kind = NF_SPEC_DRAFT, .k = 4, .draft = draft};
	const nf_spec_opts *opts[] = {&lookup, &drafted};
	if (!plain || !other ||
	    nf_tokenizer_encode(nf_engine_tokenizer(e), prompt, strlen(prompt), NF_TOK_ADD_SPECIAL,
				&p, &n) ||
	    histogram(e, NULL, p, n, 1.0f, 1, plain, NULL)) {
		ok(0, "plain sampling over %d seeds: %s", N_SEEDS, nf_error_last());
		goto done;
	}
	for (size_t k = 0; k < 2; k++) {
		nf_spec_stats st = {0};
		memset(other, 0, cells * sizeof *other);
		int err = histogram(e, opts[k], p, n, 1.0f, 1 + N_SEEDS, other, &st);
		int pass = !err && same_distribution(plain, other, vocab, why, sizeof why);
		ok(pass, "%s at temperature 1, %d seeds each: the first %d tokens as without (%s)",
		   nf_spec_kind_name(opts[k]->kind), N_SEEDS, N_FIRST, err ? nf_error_last() : why);
		ok(st.accepted > 0 && st.accepted < st.drafted,
		   "%s: drafts both kept and rejected (%" PRIu64 " of %" PRIu64 ")",
		   nf_spec_kind_name(opts[k]->kind), st.accepted, st.drafted);
	}
	memset(other, 0, cells * sizeof *other);
	int pass = !histogram(e, NULL, p, n, 0.8f, 1 + N_SEEDS, other, NULL) &&
		   !same_distribution(plain, other, vocab, why, sizeof why);
	ok(pass, "the same test tells temperature 0.8 from 1 (%s)", why);
done:
	free(p);
	free(plain);
	free(other);
}

static nf_engine *engine(const nf_model *m, const char *dir, const char *tok, nf_precision p)
{
	nf_engine_build_opts o = {.precision = p, .tokenizer_path = tok, .threads = 1};
	nf_engine *e = NULL;
	if (nf_engine_build(dir, m, &o) || nf_engine_open(&e, dir, 1))
		return NULL;
	return e;
}

static void compare(nf_engine *e, const nf_spec_opts *o, const char *what)
{
	static const char *const prompts[] = {
		"Once upon a time",
		"The cat sat on the mat. The dog sat on the log. The cat sat on the",
		"Lily and Ben went to the park. Lily and Ben",
	};
	const nf_tokenizer *tok = nf_engine_tokenizer(e);
	uint64_t passes_all = 0, draft_all = 0, room_all = 0;
	for (size_t i = 0; i < sizeof prompts / sizeof prompts[0]; i++) {
		int *p = NULL, want[N_GEN], got[N_GEN];
		size_t n = 0;
		for (int sampled = 0; sampled < 2; sampled++) {
			uint64_t passes = 0, draft_passes = 0;
			float temp = sampled ? 1.0f : 0.0f;
			int err = nf_tokenizer_encode(tok, prompts[i], strlen(prompts[i]),
						      NF_TOK_ADD_SPECIAL, &p, &n);
			if (!err)
				err = decode_plain(e, p, n, temp, want);
			if (!err)
				err = decode_spec(e, o, p, n, temp, got, &passes, &draft_passes);
			ok(!err && memcmp(want, got, sizeof want) == 0,
			   "%s, prompt %zu, %s: the tokens of plain decoding (%" PRIu64 " passes for %d)",
			   what, i, sampled ? "sampled" : "greedy", passes, N_GEN);
			passes_all += passes;
			draft_all += draft_passes;
			room_all += (uint64_t)o->k * passes;
			free(p);
			p = NULL;
		}
	}
	ok(passes_all < 6 * N_GEN, "%s: %" PRIu64 " passes for %d tokens", what, passes_all,
	   6 * N_GEN);
	/* the draft engine's catch-up on the accepted tokens rides in its
	 * first pass of a step, not a pass of its own */
	if (o->kind == NF_SPEC_DRAFT)
		ok(draft_all <= room_all && draft_all > 0,
		   "%s: %" PRIu64 " draft engine passes, no more than k a step (%" PRIu64 ")", what,
		   draft_all, room_all);
}

int main(void)
{
	const char *shared = tap_env("NF_SHARED", "../shared");
	const char *build_dir = tap_env("NF_BUILD", "build");
	char mpath[1024], tpath[1024], d32[1024], d8[1024];
	nf_model *m = NULL;

	lookup_tests();
	snprintf(mpath, sizeof mpath, "%s/models/stories260K/stories260K.bin", shared);
	snprintf(tpath, sizeof tpath, "%s/models/stories260K/tok512.bin", shared);
	snprintf(d32, sizeof d32, "%s/tmp/test_speculative32.%d", build_dir, (int)getpid());
	snprintf(d8, sizeof d8, "%s/tmp/test_speculative8.%d", build_dir, (int)getpid());
	if (nf_ckpt_load(&m, mpath, NF_CKPT_LLAMA2C)) {
		ok(0, "stories260K: %s", nf_error_last());
		return done_testing();
	}
	nf_engine *f32 = engine(m, d32, tpath, NF_PREC_FP32);
	nf_engine *i8 = engine(m, d8, tpath, NF_PREC_INT8_WO);
	ok(f32 && i8, "stories260K fp32 and int8-wo engines: %s", f32 && i8 ? "" : nf_error_last());
	if (f32 && i8) {
		nf_spec_opts lookup = {.kind = NF_SPEC_LOOKUP, .k = 4, .max_ngram = 3};
		nf_spec_opts draft = {.kind = NF_SPEC_DRAFT, .k = 4, .draft = i8};
		compare(f32, &lookup, "fp32, prompt lookup");
		compare(i8, &lookup, "int8-wo, prompt lookup");
		compare(f32, &draft, "fp32, int8-wo draft engine");
		if (getenv("NF_SAN"))
			skip("the distribution over %d seeds: sampling thousands of answers is slow "
			     "under the sanitizers, and the plain build runs it", N_SEEDS);
		else
			distribution_tests(f32, i8);
		nf_spec_opts bad = {.kind = NF_SPEC_LOOKUP, .k = 0, .max_ngram = 3};
		nf_spec *sp = NULL;
		is_int(nf_spec_new(&sp, f32, NULL, &bad), NF_EINPUT, "k 0 is refused");
	}
	nf_engine_free(f32);
	nf_engine_free(i8);
	nf_model_free(m);
	nf_fs_remove_tree(d32);
	nf_fs_remove_tree(d8);
	return done_testing();
}
