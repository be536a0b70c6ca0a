/*
 * test_engine.c - engine folders on stories260K: deterministic builds, the
 * fp32 engine against the float32 reference (every kernel family: logits
 * within 1e-4 relative, 64 greedy tokens identical), the int8 engine's
 * agreement, batched steps equal single steps, prefill and ragged steps equal
 * single steps (fp32 within 1e-5, int8 bit for bit), and damaged folders
 * refused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/cpu/cpu.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/reference.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"

#define STEPS 64

static char tokpath[1024];

static double rel_err(const float *a, const float *b, int n)
{
	double num = 0, den = 1e-30;
	for (int i = 0; i < n; i++) {
		num = fmax(num, fabs((double)a[i] - b[i]));
		den = fmax(den, fabs((double)b[i]));
	}
	return num / den;
}

static int build(const char *dir, const nf_model *m, nf_precision p)
{
	nf_engine_build_opts o = {0};
	o.precision = p;
	o.tokenizer_path = tokpath;
	o.profile_json = "{\"gpu\": \"cpu\",  \"precision\": \"x\"}";
	o.provenance_json = "{\"recipe\":\"sha256:abc\"}";
	o.threads = 1;
	o.autotune = p == NF_PREC_FP32;
	return nf_engine_build(dir, m, &o);
}

static int same_file(const char *a, const char *b)
{
	char *x = NULL, *y = NULL;
	size_t lx = 0, ly = 0;
	int same = nf_fs_read_file(&x, &lx, a, 1u << 28) == 0 &&
		   nf_fs_read_file(&y, &ly, b, 1u << 28) == 0 && lx == ly && memcmp(x, y, lx) == 0;
	free(x);
	free(y);
	return same;
}

/* Greedy-decode STEPS tokens with the engine and the reference side by side,
 * teacher-forced on the reference's tokens.  Returns agreement count. */
static int compare(nf_engine *e, const nf_model *m, double *worst, double *mean, int *free_run)
{
	nf_ref_state *r = NULL;
	nf_seq *s = NULL, *s2 = NULL;
	int vocab = m->cfg.vocab_size, agree = 0, tok = 1, tok2 = 1, diverged = 0;
	float *lg = malloc(sizeof(float) * (size_t)vocab), *lg2 = malloc(sizeof(float) * (size_t)vocab);
	*worst = 0;
	*mean = 0;
	*free_run = 0;
	if (nf_ref_state_new(&r, m) || nf_seq_new(&s, e) || nf_seq_new(&s2, e))
		goto done;
	for (int pos = 0; pos < STEPS; pos++) {
		const float *ref = nf_ref_forward(r, tok, pos);
		if (!ref || nf_engine_step(e, &s, &tok, &pos, 1, lg) != 0)
			break;
		double er = rel_err(lg, ref, vocab);
		*worst = fmax(*worst, er);
		*mean += er / STEPS;
		int want = nf_argmax(ref, vocab);
		agree += nf_argmax(lg, vocab) == want;
		/* free-running engine decode */
		if (nf_engine_step(e, &s2, &tok2, &pos, 1, lg2) != 0)
			break;
		int got2 = nf_argmax(lg2, vocab);
		if (!diverged && got2 == want)
			(*free_run)++;
		else
			diverged = 1;
		tok = want;
		tok2 = got2;
	}
done:
	nf_seq_free(s);
	nf_seq_free(s2);
	nf_ref_state_free(r);
	free(lg);
	free(lg2);
	return agree;
}

static void test_batch(nf_engine *e, const char *what)
{
	enum { N = 3 };
	int vocab = nf_engine_config(e)->vocab_size;
	nf_seq *a[N] = {0}, *b[N] = {0};
	int start[N] = {5, 11, 0}, tokens[N], pos[N];
	float *single = malloc(sizeof(float) * N * (size_t)vocab);
	float *batch = malloc(sizeof(float) * N * (size_t)vocab);
	int err = 0;
	for (int i = 0; i < N; i++) {
		err |= nf_seq_new(&a[i], e) | nf_seq_new(&b[i], e);
		/* prefill both copies with the same tokens, one at a time */
		for (int p = 0; p < start[i] && !err; p++) {
			int t = (7 * p + 3 * i + 1) % vocab;
			err |= nf_engine_step(e, &a[i], &t, &p, 1, single);
			err |= nf_engine_step(e, &b[i], &t, &p, 1, single);
		}
		tokens[i] = (31 * i + 5) % vocab;
		pos[i] = start[i];
	}
	for (int i = 0; i < N && !err; i++)
		err |= nf_engine_step(e, &a[i], &tokens[i], &pos[i], 1, single + (size_t)i * (size_t)vocab);
	if (!err)
		err = nf_engine_step(e, b, tokens, pos, N, batch);
	double er = err ? 1 : rel_err(batch, single, N * vocab);
	ok(!err && er < 1e-5, "%s: a batch of 3 sequences at positions 5, 11, 0 equals 3 single steps (rel err %.2e)",
	   what, er);
	int bad = nf_engine_step(e, (nf_seq *[]){a[0], a[0]}, tokens, pos, 2, batch);
	ok(bad == NF_EINPUT, "%s: the same sequence twice in a batch is refused", what);
	for (int i = 0; i < N; i++) {
		nf_seq_free(a[i]);
		nf_seq_free(b[i]);
	}
	free(single);
	free(batch);
}

/* The token of position p in the prefill tests (deterministic, varied). */
static int tok_at(int p, int salt, int vocab)
{
	return (int)((37u * (unsigned)p + 11u * (unsigned)salt + 1u) % (unsigned)vocab);
}

/* lg = logits after seq s consumed positions [p0, p0 + n) one step at a time. */
static int singles(nf_engine *e, nf_seq *s, int p0, int n, int salt, float *lg)
{
	int vocab = nf_engine_config(e)->vocab_size;
	for (int p = p0; p < p0 + n; p++) {
		int t = tok_at(p, salt, vocab);
		if (nf_engine_step(e, &s, &t, &p, 1, lg) != 0)
			return -1;
	}
	return 0;
}

/* Whether a and b agree: bit for bit when exact, else within 1e-5 relative. */
static int agree(const float *a, const float *b, size_t n, int exact, double *er)
{
	*er = rel_err(a, b, (int)n);
	return exact ? memcmp(a, b, n * sizeof(float)) == 0 : *er < 1e-5;
}

/* Prefix caching (exact engines): a kept sequence is handed out for a
 * prompt that starts with what it consumed, and continuing it, or a copy of
 * a running one's prefix, gives the logits of a fresh run bit for bit. */
static void test_prefix(nf_engine *e, const char *what)
{
	size_t vocab = (size_t)nf_engine_config(e)->vocab_size, reused = 99;
	float *lf = malloc(vocab * sizeof(float)), *lr = malloc(vocab * sizeof(float));
	int toks[30], other[30];
	const int *hist = NULL;
	nf_seq *fresh = NULL, *a = NULL, *b = NULL, *c = NULL, *x = NULL;
	for (int p = 0; p < 30; p++) {
		toks[p] = tok_at(p, 1, (int)vocab);
		other[p] = tok_at(p, 2, (int)vocab);
	}
	int err = !lf || !lr || nf_engine_keep_sequences(e, 2) || nf_seq_new(&fresh, e) ||
		  singles(e, fresh, 0, 30, 1, lf);
	err = err || nf_seq_new(&a, e) || singles(e, a, 0, 20, 1, lr);
	ok(!err && nf_seq_tokens(a, &hist) == 20 && hist[19] == toks[19] &&
	   nf_seq_common_prefix(a, toks, 30) == 20,
	   "%s: a sequence remembers the 20 tokens it consumed", what);
	nf_seq *was = a;
	nf_seq_free(a);
	err = err || nf_seq_new_prefixed(&b, e, other, 30, &reused);
	ok(!err && b == was && reused == 0, "%s: no shared prefix: nothing reused (%zu)", what, reused);
	err = err || singles(e, b, 0, 20, 1, lr); /* consume toks[0, 20) again */
	nf_seq_free(b);
	err = err || nf_seq_new_prefixed(&b, e, toks, 30, &reused);
	ok(!err && b == was && reused == 20, "%s: a longer prompt reuses the 20 shared (%zu)", what,
	   reused);
	err = err || singles(e, b, (int)reused, 30 - (int)reused, 1, lr);
	ok(!err && memcmp(lf, lr, vocab * sizeof(float)) == 0,
	   "%s: continuing after a reused prefix gives a fresh run's logits", what);

	err = err || nf_seq_new(&c, e);
	ok(nf_seq_copy_prefix(c, b, 31) == NF_EINPUT, "%s: copying past the consumed refused", what);
	err = err || nf_seq_copy_prefix(c, b, 25) || singles(e, c, 25, 5, 1, lr);
	ok(!err && nf_seq_tokens(c, NULL) == 30 && memcmp(lf, lr, vocab * sizeof(float)) == 0,
	   "%s: a copied prefix continues to a fresh run's logits", what);
	err = err || singles(e, c, 5, 1, 3, lr);
	ok(!err && nf_seq_tokens(c, NULL) == 6 && nf_seq_common_prefix(c, toks, 30) == 5,
	   "%s: stepping an earlier position forgets what followed it", what);
	int far = 12, t = 7;
	err = err || nf_engine_step(e, &c, &t, &far, 1, lr);
	ok(!err && nf_seq_tokens(c, NULL) == 0, "%s: a position past the consumed ones forgets all", what);

	/* kept: b and c; freeing fresh too drops the least recently kept, b
	 * (which had consumed all of toks, as fresh did) */
	nf_seq_free(b);
	nf_seq_free(c);
	nf_seq_free(fresh);
	size_t reused2 = 99;
	nf_seq *y = NULL;
	err = err || nf_seq_new_prefixed(&x, e, toks, 30, &reused) ||
	      nf_seq_new_prefixed(&y, e, toks, 30, &reused2);
	ok(!err && reused == 29, "%s: the same prompt reuses all but its last token (%zu)", what,
	   reused);
	ok(!err && reused2 == 0, "%s: past the bound the least recently kept went (%zu)", what,
	   reused2);
	nf_seq_free(x);
	nf_seq_free(y);
	ok(nf_engine_keep_sequences(e, 0) == 0, "%s: kept sequences released", what);
	free(lf);
	free(lr);
}

/* A kept sequence (nf_engine_keep_sequences) is handed out again, and its
 * stale KV rows change nothing: after 20 positions of other tokens, 10
 * steps give bit for bit the logits of a fresh sequence. */
static void test_reuse(nf_engine *e, const char *what)
{
	size_t vocab = (size_t)nf_engine_config(e)->vocab_size;
	float *lf = malloc(vocab * sizeof(float)), *lr = malloc(vocab * sizeof(float));
	nf_seq *fresh = NULL, *a = NULL, *b = NULL;
	int err = !lf || !lr || nf_seq_new(&fresh, e) || singles(e, fresh, 0, 10, 2, lf);
	nf_seq_free(fresh);
	err = err || nf_engine_keep_sequences(e, 2) || nf_seq_new(&a, e) || singles(e, a, 0, 20, 1, lr);
	nf_seq *was = a;
	nf_seq_free(a);
	err = err || nf_seq_new(&b, e);
	ok(!err && b == was, "%s: a freed sequence is kept and handed out again", what);
	err = err || singles(e, b, 0, 10, 2, lr);
	ok(!err && memcmp(lf, lr, vocab * sizeof(float)) == 0,
	   "%s: a reused sequence's logits equal a fresh one's", what);
	nf_seq_free(b);
	ok(nf_engine_keep_sequences(e, 0) == 0, "%s: kept sequences released", what);
	free(lf);
	free(lr);
}

/* Prefill of P tokens (one call, from position p0 after p0 single steps)
 * then 3 decode steps equals P single steps then the same decode. */
static void prefill_case(nf_engine *e, const char *what, int exact, int p0, int P)
{
	size_t vocab = (size_t)nf_engine_config(e)->vocab_size;
	nf_seq *a = NULL, *b = NULL;
	float *la = malloc(sizeof(float) * vocab), *lb = malloc(sizeof(float) * vocab);
	int *toks = malloc(sizeof(int) * (size_t)P);
	int err = !la || !lb || !toks || nf_seq_new(&a, e) || nf_seq_new(&b, e);
	int same = 1, bitwise = 1;
	double worst = 0, er;
	for (int i = 0; i < P && !err; i++)
		toks[i] = tok_at(p0 + i, 1, (int)vocab);
	err = err || singles(e, a, 0, p0, 1, la) || singles(e, b, 0, p0, 1, lb);
	err = err || singles(e, a, p0, P, 1, la) || nf_engine_prefill(e, b, toks, (size_t)P, p0, lb);
	for (int d = 0; d <= 3 && !err; d++) {
		same &= agree(lb, la, vocab, exact, &er);
		bitwise &= memcmp(la, lb, vocab * sizeof(float)) == 0;
		worst = fmax(worst, er);
		if (d == 3)
			break;
		int pos = p0 + P + d, t = nf_argmax(la, (int)vocab);
		err = nf_engine_step(e, &a, &t, &pos, 1, la) || nf_engine_step(e, &b, &t, &pos, 1, lb);
	}
	ok(!err && same, "%s: prefill of %d tokens at position %d then 3 decode steps equals %d single steps (%s, rel err %.1e)",
	   what, P, p0, P, bitwise ? "bit-identical" : "not bit-identical", worst);
	nf_seq_free(a);
	nf_seq_free(b);
	free(la);
	free(lb);
	free(toks);
}

/* One ragged step of sequences with counts n[i] from positions p0[i] (each
 * first advanced to p0[i] one step at a time) equals separate calls. */
static void ragged_case(nf_engine *e, const char *what, int exact, int ns, const int *n, const int *p0)
{
	size_t vocab = (size_t)nf_engine_config(e)->vocab_size;
	nf_seq *a[4] = {0}, *b[4] = {0};
	float *la = malloc(sizeof(float) * vocab * 4), *lb = malloc(sizeof(float) * vocab * 4);
	int *toks = malloc(sizeof(int) * 1024), err = !la || !lb || !toks, at = 0, total = 0;
	char desc[128];
	size_t dl = 0;
	for (int i = 0; i < ns && !err; i++) {
		err = nf_seq_new(&a[i], e) || nf_seq_new(&b[i], e) ||
		      singles(e, a[i], 0, p0[i], 10 + i, lb) || singles(e, b[i], 0, p0[i], 10 + i, lb);
		for (int k = 0; k < n[i]; k++)
			toks[at++] = tok_at(p0[i] + k, 10 + i, (int)vocab);
		/* separately: a prefill of the chunk */
		err = err || nf_engine_prefill(e, a[i], toks + at - n[i], (size_t)n[i], p0[i],
					       la + (size_t)i * vocab);
		dl += (size_t)snprintf(desc + dl, sizeof desc - dl, "%s%d@%d", i ? " + " : "", n[i], p0[i]);
		total += n[i];
	}
	err = err || nf_engine_step_ragged(e, b, toks, n, p0, (size_t)ns, lb);
	double er = 0;
	int same = !err && agree(lb, la, vocab * (size_t)ns, exact, &er);
	/* and the caches: one more decode token each, batched */
	if (same) {
		int t[4], pos[4];
		for (int i = 0; i < ns; i++)
			t[i] = 5 + i, pos[i] = p0[i] + n[i];
		err = nf_engine_step(e, a, t, pos, (size_t)ns, la) || nf_engine_step(e, b, t, pos, (size_t)ns, lb);
		same = !err && agree(lb, la, vocab * (size_t)ns, exact, &er);
	}
	ok(same, "%s: ragged step [%s] (%d tokens) equals separate prefills, and so does the next decode (rel err %.1e)",
	   what, desc, total, er);
	for (int i = 0; i < ns; i++) {
		nf_seq_free(a[i]);
		nf_seq_free(b[i]);
	}
	free(la);
	free(lb);
	free(toks);
}

/* nf_engine_prefill_logits of P tokens at p0 gives, row by row, the logits
 * of P single steps (and leaves the cache as they do). */
static void prefill_logits_case(nf_engine *e, const char *what, int exact, int p0, int P)
{
	size_t vocab = (size_t)nf_engine_config(e)->vocab_size;
	nf_seq *a = NULL, *b = NULL;
	float *la = malloc(sizeof(float) * vocab * (size_t)P), *lb = malloc(sizeof(float) * vocab * (size_t)P);
	int *toks = malloc(sizeof(int) * (size_t)P);
	int err = !la || !lb || !toks || nf_seq_new(&a, e) || nf_seq_new(&b, e);
	double er = 0, worst = 0;
	int same = 1;
	for (int i = 0; i < P && !err; i++)
		toks[i] = tok_at(p0 + i, 1, (int)vocab);
	err = err || singles(e, a, 0, p0, 1, la) || singles(e, b, 0, p0, 1, lb);
	for (int i = 0; i < P && !err; i++)
		err = singles(e, a, p0 + i, 1, 1, la + (size_t)i * vocab);
	err = err || nf_engine_prefill_logits(e, b, toks, (size_t)P, p0, lb);
	for (int i = 0; i < P && !err; i++) {
		same &= agree(lb + (size_t)i * vocab, la + (size_t)i * vocab, vocab, exact, &er);
		worst = fmax(worst, er);
	}
	int t = 3, pos = p0 + P;
	err = err || nf_engine_step(e, &a, &t, &pos, 1, la) || nf_engine_step(e, &b, &t, &pos, 1, lb);
	same = same && !err && agree(lb, la, vocab, exact, &er);
	ok(!err && same, "%s: prefill with logits of %d tokens at position %d equals %d single steps row by row, and the next decode (rel err %.1e)",
	   what, P, p0, P, fmax(worst, er));
	ok(nf_engine_prefill_logits(e, b, toks, 0, 0, lb) == NF_EINPUT &&
		   nf_engine_prefill_logits(e, b, toks, 1, nf_engine_config(e)->max_seq_len, lb) == NF_EINPUT,
	   "%s: prefill with logits refuses 0 tokens and positions past the context", what);
	nf_seq_free(a);
	nf_seq_free(b);
	free(la);
	free(lb);
	free(toks);
}

static void test_prefill(nf_engine *e, const char *what, int exact)
{
	static const int lens[] = {1, 2, 7, 64};
	int max = nf_engine_config(e)->max_seq_len, vocab = nf_engine_config(e)->vocab_size;
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
		prefill_case(e, what, exact, 0, lens[i]);
	prefill_case(e, what, exact, 5, 13);
	prefill_case(e, what, exact, 0, 300); /* two passes of NF_FWD_PASS_TOKENS */
	prefill_case(e, what, exact, max - 10, 7); /* decode up to the end of the context */
	prefill_logits_case(e, what, exact, 0, 1);
	prefill_logits_case(e, what, exact, 5, 13);
	prefill_logits_case(e, what, exact, 0, 300); /* two passes of NF_FWD_PASS_TOKENS */
	/* a decode token beside a 13-token prompt */
	ragged_case(e, what, exact, 2, (int[]){1, 13}, (int[]){9, 0});
	/* a sequence split across passes, and one whose chunk continues it */
	ragged_case(e, what, exact, 3, (int[]){250, 20, 1}, (int[]){0, 30, 4});


	nf_seq *s = NULL, *s2 = NULL;
	float *lg = malloc(sizeof(float) * (size_t)vocab);
	int toks[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	nf_seq_new(&s, e);
	nf_seq_new(&s2, e);
	ok(nf_engine_prefill(e, s, toks, 0, 0, lg) == NF_EINPUT, "%s: prefill of 0 tokens refused", what);
	ok(nf_engine_prefill(e, s, toks, 8, max - 7, lg) == NF_EINPUT &&
		   strstr(nf_error_last(), "max_seq_len"),
	   "%s: pos0 + n > max_seq_len refused (%s)", what, nf_error_last());
	ok(nf_engine_prefill(e, s, toks, 2, -1, lg) == NF_EINPUT, "%s: negative pos0 refused", what);
	ok(nf_engine_prefill(e, s, toks, 2, 0x7fffffff, lg) == NF_EINPUT, "%s: pos0 near INT_MAX refused", what);
	toks[3] = vocab;
	ok(nf_engine_prefill(e, s, toks, 8, 0, lg) == NF_EINPUT, "%s: a token out of range refused", what);
	toks[3] = 4;
	ok(nf_engine_step_ragged(e, (nf_seq *[]){s, s2}, toks, (int[]){3, 0}, (int[]){0, 0}, 2, lg) == NF_EINPUT,
	   "%s: a ragged sequence with 0 tokens refused", what);
	ok(nf_engine_step_ragged(e, (nf_seq *[]){s, s}, toks, (int[]){3, 1}, (int[]){0, 3}, 2, lg) == NF_EINPUT,
	   "%s: the same sequence twice in a ragged step refused", what);
	ok(nf_engine_step_ragged(e, NULL, NULL, NULL, NULL, 0, NULL) == 0, "%s: an empty ragged step does nothing", what);
	/* logits NULL: the cache is still written */
	float *l1 = malloc(sizeof(float) * (size_t)vocab), *l2 = malloc(sizeof(float) * (size_t)vocab);
	int p = 8, t = 9;
	int rc = nf_engine_prefill(e, s, toks, 8, 0, NULL) | nf_engine_step(e, &s, &t, &p, 1, l1) |
		 nf_engine_prefill(e, s2, toks, 8, 0, lg) | nf_engine_step(e, &s2, &t, &p, 1, l2);
	ok(rc == 0 && memcmp(l1, l2, sizeof(float) * (size_t)vocab) == 0,
	   "%s: prefill without logits writes the same cache", what);
	free(l1);
	free(l2);
	free(lg);
	nf_seq_free(s);
	nf_seq_free(s2);
}

/* The logits of STEPS single steps of engine folder dir opened with the
 * environment variable var set to val (NULL: unset), into lg. */
static int logits_with(float *lg, const char *dir, const char *var, const char *val, int vocab)
{
	nf_engine *e = NULL;
	nf_seq *s = NULL;
	int err;
	if (val)
		setenv(var, val, 1);
	err = nf_engine_open(&e, dir, 2);
	unsetenv(var);
	if (err || (err = nf_seq_new(&s, e)))
		goto done;
	for (int p = 0; p < STEPS && !err; p++)
		err = singles(e, s, p, 1, 3, lg + (size_t)p * (size_t)vocab);
done:
	nf_seq_free(s);
	nf_engine_free(e);
	return err;
}

/* Tiled weights (the default), row-major copies and the file mapping give
 * the same logits bit for bit. */
static void test_layouts(const char *dir, const char *what, int vocab)
{
	size_t n = (size_t)STEPS * (size_t)vocab;
	float *tiled = calloc(n, sizeof(float)), *rows = calloc(n, sizeof(float));
	float *mapped = calloc(n, sizeof(float));
	int err = logits_with(tiled, dir, "NF_WEIGHTS_TILE", NULL, vocab) ||
		  logits_with(rows, dir, "NF_WEIGHTS_TILE", "0", vocab) ||
		  logits_with(mapped, dir, "NF_WEIGHTS_COPY", "0", vocab);
	ok(!err && memcmp(tiled, rows, n * sizeof(float)) == 0 &&
		   memcmp(tiled, mapped, n * sizeof(float)) == 0,
	   "%s: tiled, row-major and file-mapped weights give the same logits bit for bit", what);
	free(tiled), free(rows), free(mapped);
}

static void write_text(const char *path, const char *text)
{
	nf_fs_write_atomic(path, text, strlen(text), 0644);
}

int main(void)
{
	const char *shared = tap_env("NF_SHARED", "../shared");
	const char *build_dir = tap_env("NF_BUILD", "build");
	char mpath[1024], root[1024], d1[1100], d2[1100], d8[1100], bad[1100], p1[1200], p2[1200];
	nf_model *m = NULL;
	nf_engine *e = NULL;
	snprintf(mpath, sizeof mpath, "%s/models/stories260K/stories260K.bin", shared);
	snprintf(tokpath, sizeof tokpath, "%s/models/stories260K/tok512.bin", shared);
	snprintf(root, sizeof root, "%s/tmp/test_engine.%d", build_dir, (int)getpid());
	snprintf(d1, sizeof d1, "%s/fp32-a", root);
	snprintf(d2, sizeof d2, "%s/fp32-b", root);
	snprintf(d8, sizeof d8, "%s/int8", root);
	snprintf(bad, sizeof bad, "%s/bad", root);

	if (nf_ckpt_load(&m, mpath, NF_CKPT_LLAMA2C) != 0) {
		ok(0, "load stories260K: %s", nf_error_last());
		return done_testing();
	}
	is_int(build(d1, m, NF_PREC_FP32), 0, "build fp32 engine: %s", nf_error_last());
	is_int(build(d2, m, NF_PREC_FP32), 0, "build fp32 engine again");
	snprintf(p1, sizeof p1, "%s/config.json", d1);
	snprintf(p2, sizeof p2, "%s/config.json", d2);
	ok(same_file(p1, p2), "config.json is byte-identical across builds");
	snprintf(p1, sizeof p1, "%s/weights.safetensors", d1);
	snprintf(p2, sizeof p2, "%s/weights.safetensors", d2);
	ok(same_file(p1, p2), "weights.safetensors is byte-identical across builds");
	snprintf(p1, sizeof p1, "%s/tactics.json", d1);
	ok(nf_fs_exists(p1), "tactics.json written");
	{
		char *t = NULL;
		size_t n;
		nf_fs_read_file(&t, &n, p1, 1u << 20);
		ok(t && strstr(t, "\"measured\"") && strstr(t, "\"shape\""), "tactics.json has measured shapes");
		free(t);
	}
	is_int(build(d8, m, NF_PREC_INT8_WO), 0, "build int8 engine: %s", nf_error_last());
	ok(build(bad, m, (nf_precision)NF_PREC_COUNT) == NF_EUNSUPPORTED,
	   "a precision out of the table is refused");

	/* fp32: every kernel family against the reference */
	is_int(nf_engine_open(&e, d1, 2), 0, "open fp32 engine: %s", nf_error_last());
	if (e) {
		const char *cj = nf_engine_config_json(e);
		ok(strstr(cj, "\"profile\": {\"gpu\": \"cpu\",  \"precision\": \"x\"}") != NULL,
		   "profile stored verbatim in config.json");
		ok(strstr(cj, "\"precision\": \"fp32\"") && strstr(cj, "\"sha256\"") &&
			   strstr(cj, "\"version\""), "config.json records precision, hashes and tool version");
		is_int(nf_engine_verify(e), 0, "hashes verify: %s", nf_error_last());
		ok(nf_engine_weight_bytes(e) > 4u * 200000u, "weight bytes per step %llu",
		   (unsigned long long)nf_engine_weight_bytes(e));
		const nf_backend_ops *const *fam = nf_cpu_families();
		for (size_t i = 0; fam[i]; i++) {
			if (nf_engine_set_kernel(e, fam[i]->name) != 0) {
				skip("fp32 engine with %s: this CPU lacks it", fam[i]->name);
				continue;
			}
			double worst, mean;
			int fr, agree = compare(e, m, &worst, &mean, &fr);
			ok(worst < 1e-4, "fp32 %s: logits within 1e-4 of the reference (max rel err %.2e)",
			   fam[i]->name, worst);
			ok(agree == STEPS && fr == STEPS, "fp32 %s: %d greedy tokens identical (%d, free %d)",
			   fam[i]->name, STEPS, agree, fr);
			test_batch(e, fam[i]->name);
			test_prefill(e, fam[i]->name, 0);
		}
		int t = 1, p = m->cfg.max_seq_len;
		nf_seq *s = NULL;
		float *lg = malloc(sizeof(float) * (size_t)m->cfg.vocab_size);
		nf_seq_new(&s, e);
		ok(nf_engine_step(e, &s, &t, &p, 1, lg) == NF_EINPUT, "position past the context refused");
		t = m->cfg.vocab_size, p = 0;
		ok(nf_engine_step(e, &s, &t, &p, 1, lg) == NF_EINPUT, "token out of range refused");
		ok(nf_engine_set_kernel(e, "sse9") == NF_EUNSUPPORTED, "unknown kernel family refused");
		nf_seq_free(s);
		free(lg);
		nf_engine_free(e);
		e = NULL;
	}

	test_layouts(d1, "fp32", m->cfg.vocab_size);
	test_layouts(d8, "int8", m->cfg.vocab_size);

	/* int8 */
	is_int(nf_engine_open(&e, d8, 2), 0, "open int8 engine: %s", nf_error_last());
	if (e) {
		const nf_backend_ops *const *fam = nf_cpu_families();
		ok(nf_engine_weight_bytes(e) < 400000, "int8 weight bytes per step %llu",
		   (unsigned long long)nf_engine_weight_bytes(e));
		for (size_t i = 0; fam[i]; i++) {
			if (nf_engine_set_kernel(e, fam[i]->name) != 0) {
				skip("int8 engine with %s: this CPU lacks it", fam[i]->name);
				continue;
			}
			double worst, mean;
			int fr, agree = compare(e, m, &worst, &mean, &fr);
			diag("int8 %s: top-1 agreement %d/%d (teacher-forced), free-running identical for %d tokens, logits rel err mean %.4f max %.4f",
			     fam[i]->name, agree, STEPS, fr, mean, worst);
			ok(agree >= STEPS * 9 / 10, "int8 %s: greedy tokens agree on >= 90%% of positions (%d/%d)",
			   fam[i]->name, agree, STEPS);
			ok(mean < 0.05, "int8 %s: mean logits rel err %.4f < 0.05", fam[i]->name, mean);
			char what[64];
			snprintf(what, sizeof what, "int8 %s", fam[i]->name);
			test_prefill(e, what, 1);
		}
		test_batch(e, "int8");
		test_reuse(e, "int8");
		test_prefix(e, "int8");
		nf_engine_free(e);
		e = NULL;
	}

	/* damaged folders */
	ok(nf_engine_open(&e, bad, 1) != 0 && strstr(nf_error_last(), "config.json"),
	   "missing folder: error names config.json (%s)", nf_error_last());
	nf_fs_mkdir_p(bad, 0755);
	snprintf(p1, sizeof p1, "%s/config.json", bad);
	write_text(p1, "{\"format\": \"nimfactory-engine\", \"format_version\": 1,");
	ok(nf_engine_open(&e, bad, 1) == NF_EINPUT && strstr(nf_error_last(), "config.json"),
	   "broken JSON refused (%s)", nf_error_last());
	/* a config that disagrees with the weights: copy the fp32 engine, change dim */
	{
		char *t = NULL, *w = NULL;
		size_t n, wn;
		snprintf(p2, sizeof p2, "%s/config.json", d1);
		nf_fs_read_file(&t, &n, p2, 1u << 20);
		char *at = t ? strstr(t, "\"hidden_dim\": 172") : NULL;
		if (at)
			memcpy(at, "\"hidden_dim\": 176", 17);
		write_text(p1, t ? t : "");
		snprintf(p2, sizeof p2, "%s/weights.safetensors", d1);
		nf_fs_read_file(&w, &wn, p2, 1u << 28);
		snprintf(p1, sizeof p1, "%s/weights.safetensors", bad);
		nf_fs_write_atomic(p1, w, wn, 0644);
		snprintf(p2, sizeof p2, "%s/tokenizer.bin", d1);
		free(w);
		w = NULL;
		nf_fs_read_file(&w, &wn, p2, 1u << 28);
		snprintf(p1, sizeof p1, "%s/tokenizer.bin", bad);
		nf_fs_write_atomic(p1, w, wn, 0644);
		ok(nf_engine_open(&e, bad, 1) == NF_EINPUT && strstr(nf_error_last(), "weights.safetensors") &&
			   strstr(nf_error_last(), "w1"),
		   "shape mismatch refused (%s)", nf_error_last());
		/* truncated weights */
		if (at)
			memcpy(at, "\"hidden_dim\": 172", 17);
		snprintf(p1, sizeof p1, "%s/config.json", bad);
		write_text(p1, t ? t : "");
		snprintf(p1, sizeof p1, "%s/weights.safetensors", bad);
		snprintf(p2, sizeof p2, "%s/weights.safetensors", d1);
		free(w);
		w = NULL;
		nf_fs_read_file(&w, &wn, p2, 1u << 28);
		nf_fs_write_atomic(p1, w, wn / 2, 0644);
		ok(nf_engine_open(&e, bad, 1) != 0 && strstr(nf_error_last(), "weights.safetensors"),
		   "truncated weights refused (%s)", nf_error_last());
		/* good weights, altered tokenizer: opens, but verify fails */
		nf_fs_write_atomic(p1, w, wn, 0644);
		snprintf(p1, sizeof p1, "%s/tokenizer.bin", bad);
		snprintf(p2, sizeof p2, "%s/tokenizer.bin", d1);
		free(w);
		w = NULL;
		nf_fs_read_file(&w, &wn, p2, 1u << 28);
		if (w && wn > 8)
			w[wn - 1] ^= 0x01;
		nf_fs_write_atomic(p1, w, wn, 0644);
		int rc = nf_engine_open(&e, bad, 1);
		ok(rc == 0 && nf_engine_verify(e) == NF_EINPUT && strstr(nf_error_last(), "tokenizer.bin"),
		   "altered tokenizer fails verification (%s)", nf_error_last());
		nf_engine_free(e);
		e = NULL;
		free(t);
		free(w);
	}
	nf_engine_free(NULL);
	nf_fs_remove_tree(root);
	nf_model_free(m);
	return done_testing();
}
