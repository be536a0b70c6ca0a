/*
 * test_kv_cache.c - the engine's KV cache kind on stories260K: config.json's
 * "kv_cache" recorded and read (absent: f32 for fp32, f16 otherwise; an
 * unknown value refused on open, naming the file), an int8-KV engine's
 * logits within a bound of the f16-KV engine's over 256 positions with
 * greedy output agreeing, its prefill equal to single steps bit for bit, and
 * the cache half the f16 one's bytes or less.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/engine.h"
#include "engine/forward.h"
#include "engine/generate.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"

#define POSITIONS 256

static char tokpath[1024];

static int build(const char *dir, const nf_model *m, nf_precision p, const char *kv)
{
	nf_engine_build_opts o = {0};
	o.precision = p;
	o.tokenizer_path = tokpath;
	o.threads = 1;
	o.kv_cache = kv;
	return nf_engine_build(dir, m, &o);
}

static double rel_err(const float *a, const float *b, int n)
{
	double num = 0, den = 1e-30;
	for (int i = 0; i < n; i++) {
		num = fmax(num, fabs((double)a[i] - b[i]));
		den = fmax(den, fabs((double)b[i]));
	}
	return num / den;
}

/* The int8-KV engine e8 teacher-forced on the f16-KV engine e16's greedy
 * tokens over POSITIONS positions: the worst and mean relative error of the
 * logits, the top-1 agreement, and how many leading tokens e8's own greedy
 * decode shares with e16's. */
typedef struct kv_agreement {
	double worst, mean;
	int top1, free_run;
} kv_agreement;

static int agreement(kv_agreement *r, nf_engine *e16, nf_engine *e8)
{
	int vocab = nf_engine_config(e16)->vocab_size, tok = 1, own = 1, diverged = 0, err;
	nf_seq *a = NULL, *b = NULL, *c = NULL;
	float *l16 = malloc(sizeof(float) * (size_t)vocab), *l8 = malloc(sizeof(float) * (size_t)vocab);
	memset(r, 0, sizeof *r);
	if (!l16 || !l8 || (err = nf_seq_new(&a, e16)) || (err = nf_seq_new(&b, e8)) ||
	    (err = nf_seq_new(&c, e8))) {
		err = -1;
		goto done;
	}
	for (int pos = 0; pos < POSITIONS; pos++) {
		if ((err = nf_engine_step(e16, &a, &tok, &pos, 1, l16)) ||
		    (err = nf_engine_step(e8, &b, &tok, &pos, 1, l8)))
			goto done;
		double er = rel_err(l8, l16, vocab);
		r->worst = fmax(r->worst, er);
		r->mean += er / POSITIONS;
		int want = nf_argmax(l16, vocab);
		r->top1 += nf_argmax(l8, vocab) == want;
		if ((err = nf_engine_step(e8, &c, &own, &pos, 1, l8)))
			goto done;
		own = nf_argmax(l8, vocab);
		if (!diverged && own == want)
			r->free_run++;
		else
			diverged = 1;
		tok = want;
	}
done:
	nf_seq_free(a);
	nf_seq_free(b);
	nf_seq_free(c);
	free(l16);
	free(l8);
	return err;
}

/* Prefill of n tokens equals n single steps, bit for bit (the rows are
 * quantized per token, whatever shares the pass). */
static int prefill_is_steps(nf_engine *e, int n)
{
	int vocab = nf_engine_config(e)->vocab_size, same = 0;
	int *toks = malloc(sizeof(int) * (size_t)n);
	float *lp = malloc(sizeof(float) * (size_t)vocab), *ls = malloc(sizeof(float) * (size_t)vocab);
	nf_seq *a = NULL, *b = NULL;
	if (!toks || !lp || !ls || nf_seq_new(&a, e) || nf_seq_new(&b, e))
		goto done;
	for (int i = 0; i < n; i++)
		toks[i] = (13 * i + 7) % vocab;
	if (nf_engine_prefill(e, a, toks, (size_t)n, 0, lp))
		goto done;
	for (int i = 0; i < n; i++)
		if (nf_engine_step(e, &b, &toks[i], &i, 1, ls))
			goto done;
	same = memcmp(lp, ls, sizeof(float) * (size_t)vocab) == 0;
done:
	nf_seq_free(a);
	nf_seq_free(b);
	free(toks);
	free(lp);
	free(ls);
	return same;
}

/* Rewrite `from` as `to` in dir's config.json. */
static int edit_config(const char *dir, const char *from, const char *to)
{
	char path[1200], *text = NULL, *out = NULL;
	size_t n;
	int err = -1;
	snprintf(path, sizeof path, "%s/config.json", dir);
	if (nf_fs_read_file(&text, &n, path, 1u << 20))
		return -1;
	char *at = strstr(text, from);
	if (at && (out = malloc(n + strlen(to)))) {
		size_t head = (size_t)(at - text), lt = strlen(to), tail = n - head - strlen(from);
		memcpy(out, text, head);
		memcpy(out + head, to, lt);
		memcpy(out + head + lt, at + strlen(from), tail);
		err = nf_fs_write_atomic(path, out, head + lt + tail, 0644);
	}
	free(text);
	free(out);
	return err;
}

/* A step may hold sequences of two cache kinds: an f16 and an int8
 * sequence stepped together equal each stepped alone (within 1e-5, what
 * test_engine allows a float32 batch against single steps). */
static int mixed_batch_is_single(nf_engine *e)
{
	int vocab = nf_engine_config(e)->vocab_size, same = 1;
	nf_seq *b[2] = {0}, *one[2] = {0};
	float *lb = malloc(sizeof(float) * 2 * (size_t)vocab), *l1 = malloc(sizeof(float) * (size_t)vocab);
	nf_kv_kind kinds[2] = {NF_KV_F16, NF_KV_INT8};
	for (int i = 0; i < 2; i++)
		if (nf_engine_set_kv_cache(e, kinds[i]) || nf_seq_new(&b[i], e) || nf_seq_new(&one[i], e))
			same = 0;
	for (int pos = 0; same && lb && l1 && pos < 8; pos++) {
		int toks[2] = {(5 * pos + 1) % vocab, (3 * pos + 2) % vocab}, ps[2] = {pos, pos};
		same = nf_engine_step(e, b, toks, ps, 2, lb) == 0;
		for (int i = 0; same && i < 2; i++)
			same = nf_engine_step(e, &one[i], &toks[i], &pos, 1, l1) == 0 &&
			       rel_err(lb + (size_t)i * (size_t)vocab, l1, vocab) < 1e-5;
	}
	for (int i = 0; i < 2; i++) {
		nf_seq_free(b[i]);
		nf_seq_free(one[i]);
	}
	free(lb);
	free(l1);
	return same && lb && l1;
}

/* nimserve's --max-context: sequences made after the cap hold that many
 * positions, and the step past them is refused; beyond the engine's, no. */
static void check_cap_context(nf_engine *e)
{
	int full = nf_engine_config(e)->max_seq_len, tok = 1, pos = 0, err = 0;
	float *lg = malloc(sizeof(float) * (size_t)nf_engine_config(e)->vocab_size);
	nf_seq *s = NULL;
	ok(nf_engine_cap_context(e, full + 1) == NF_EINPUT && nf_engine_cap_context(e, 0) == NF_EINPUT,
	   "a cap of 0 or beyond the engine's %d positions refused", full);
	is_int(nf_engine_cap_context(e, 64), 0, "capped at 64 positions: %s", nf_error_last());
	is_int(nf_engine_config(e)->max_seq_len, 64, "the engine's config says 64");
	err = !lg || nf_seq_new(&s, e);
	for (pos = 0; !err && pos < 64; pos++)
		err = nf_engine_step(e, &s, &tok, &pos, 1, lg);
	ok(!err, "positions 0 to 63 step: %s", nf_error_last());
	ok(s && nf_engine_step(e, &s, &tok, &pos, 1, lg) == NF_EINPUT &&
		   strstr(nf_error_last(), "max_seq_len 64"),
	   "position 64 refused: %s", nf_error_last());
	nf_seq_free(s);
	free(lg);
}

static void check_config(const nf_model *m, const char *root)
{
	char d[1100], dbad[1100];
	nf_engine *e = NULL;
	snprintf(d, sizeof d, "%s/fp32-int8kv", root);
	snprintf(dbad, sizeof dbad, "%s/bad", root);
	is_int(build(d, m, NF_PREC_FP32, "int8"), 0, "build fp32 with kv_cache int8: %s", nf_error_last());
	is_int(nf_engine_open(&e, d, 1), 0, "open it: %s", nf_error_last());
	if (e) {
		ok(strstr(nf_engine_config_json(e), "\"kv_cache\": \"int8\"") != NULL,
		   "config.json records \"kv_cache\": \"int8\"");
		is_int(nf_engine_kv_cache(e), NF_KV_INT8, "the engine's sequences get an int8 cache");
		ok(prefill_is_steps(e, 100), "fp32 + int8 KV: a prefill of 100 tokens equals 100 steps bit for bit");
		nf_seq *s = NULL, *t = NULL;
		int tok = 1, pos = 0;
		float *lg = malloc(sizeof(float) * (size_t)m->cfg.vocab_size);
		int err = nf_seq_new(&s, e) || nf_engine_step(e, &s, &tok, &pos, 1, lg) ||
			  nf_engine_set_kv_cache(e, NF_KV_F16) || nf_seq_new(&t, e);
		ok(!err && nf_seq_copy_prefix(t, s, 1) == NF_EINPUT,
		   "a prefix is not copied between caches of different kinds");
		ok(nf_engine_set_kv_cache(e, NF_KV_KIND_COUNT) == NF_EINPUT, "a kind out of range refused");
		ok(mixed_batch_is_single(e), "an f16 and an int8 sequence in one step equal each alone (1e-5)");
		free(lg);
		nf_seq_free(s);
		nf_seq_free(t);
		check_cap_context(e);
		nf_engine_free(e);
		e = NULL;
	}
	ok(build(dbad, m, NF_PREC_INT8_WO, "int4") == NF_EINPUT && strstr(nf_error_last(), "int4"),
	   "build refuses kv_cache int4: %s", nf_error_last());
	ok(edit_config(d, "\"kv_cache\": \"int8\"", "\"kv_cache\": \"int4\"") == 0 &&
		   nf_engine_open(&e, d, 1) == NF_EINPUT && strstr(nf_error_last(), "config.json") &&
		   strstr(nf_error_last(), "'int4'"),
	   "an unknown kv_cache refused on open: %s", nf_error_last());
	nf_engine_free(e);
	e = NULL;
	ok(edit_config(d, "\"kv_cache\": \"int4\"", "\"kv_cache\": 8") == 0 &&
		   nf_engine_open(&e, d, 1) == NF_EINPUT,
	   "a kv_cache that is not a string refused: %s", nf_error_last());
	nf_engine_free(e);
}

int main(void)
{
	const char *shared = tap_env("NF_SHARED", "../shared");
	const char *build_dir = tap_env("NF_BUILD", "build");
	char mpath[1024], root[1024], d16[1100], d8[1100], d32[1100];
	nf_model *m = NULL;
	nf_engine *e16 = NULL, *e8 = NULL, *e32 = NULL;
	snprintf(mpath, sizeof mpath, "%s/models/stories260K/stories260K.bin", shared);
	snprintf(tokpath, sizeof tokpath, "%s/models/stories260K/tok512.bin", shared);
	snprintf(root, sizeof root, "%s/tmp/test_kv_cache.%d", build_dir, (int)getpid());
	snprintf(d16, sizeof d16, "%s/int8-wo", root);
	snprintf(d8, sizeof d8, "%s/int8-wo-kv8", root);
	snprintf(d32, sizeof d32, "%s/fp32", root);
	if (nf_ckpt_load(&m, mpath, NF_CKPT_LLAMA2C) != 0) {
		ok(0, "load stories260K: %s", nf_error_last());
		return done_testing();
	}
	ok(m->cfg.max_seq_len >= POSITIONS, "stories260K holds %d positions", POSITIONS);
	is_int(build(d16, m, NF_PREC_INT8_WO, NULL), 0, "build int8-wo: %s", nf_error_last());
	is_int(build(d8, m, NF_PREC_INT8_WO, "int8"), 0, "build int8-wo, kv_cache int8: %s",
	       nf_error_last());
	is_int(build(d32, m, NF_PREC_FP32, NULL), 0, "build fp32: %s", nf_error_last());
	if (nf_engine_open(&e16, d16, 2) || nf_engine_open(&e8, d8, 2) || nf_engine_open(&e32, d32, 1)) {
		ok(0, "open the engines: %s", nf_error_last());
		goto done;
	}
	ok(strstr(nf_engine_config_json(e16), "kv_cache") == NULL && nf_engine_kv_cache(e16) == NF_KV_F16 &&
		   nf_engine_kv_cache(e32) == NF_KV_F32,
	   "without the field: f16 for int8-wo, f32 for fp32 (today's rule)");
	const nf_model_config *c = nf_engine_config(e8);
	size_t b8 = nf_fwd_kv_bytes(c, NF_KV_INT8), b16 = nf_fwd_kv_bytes(c, NF_KV_F16);
	size_t hs = (size_t)nf_model_head_size(c);
	ok(b8 > 0 && b8 * 2 * hs == b16 * (hs + 4),
	   "int8 cache %zu bytes = f16's %zu * (head_size + 4) / (2 * head_size)", b8, b16);

	kv_agreement r;
	is_int(agreement(&r, e16, e8), 0, "decode %d positions with both caches: %s", POSITIONS,
	       nf_error_last());
	diag("int8 KV vs f16 KV over %d positions: worst rel err %.3e, mean %.3e, top-1 %d/%d, "
	     "greedy agrees for %d tokens",
	     POSITIONS, r.worst, r.mean, r.top1, POSITIONS, r.free_run);
	/* measured on stories260K (head size 8): worst 7.5-9.3e-2, mean 3.2e-2,
	 * top-1 246/256, 61 greedy tokens, where the int8-wo engine against
	 * fp32 gives 3.9e-2, 2.2e-2, 250/256 and 61 (docs/quantization.md) */
	ok(r.worst > 0 && r.worst < 0.12, "int8 KV logits within 12%% of f16 KV's (worst %.3e)", r.worst);
	ok(r.mean < 0.05, "mean relative error under 5%% (%.3e)", r.mean);
	ok(r.top1 >= POSITIONS * 95 / 100, "teacher-forced top-1 agreement %d/%d >= 95%%", r.top1,
	   POSITIONS);
	ok(r.free_run >= 48, "greedy output agrees for the first %d tokens (>= 48)", r.free_run);
	ok(prefill_is_steps(e8, 200), "int8-wo + int8 KV: a prefill of 200 tokens equals 200 steps bit for bit");
done:
	nf_engine_free(e16);
	nf_engine_free(e8);
	nf_engine_free(e32);
	check_config(m, root);
	nf_model_free(m);
	nf_fs_remove_tree(root);
	return done_testing();
}
