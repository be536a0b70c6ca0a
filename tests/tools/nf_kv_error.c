/*
 * nf_kv_error - what a KV cache kind costs in accuracy on an engine folder:
 * the engine run twice side by side, once with each cache, the second
 * teacher-forced on the first one's greedy tokens after a prompt:
 *
 *   nf_kv_error ENGINE_DIR [--kv int8] [--base f16] [--positions N]
 *               [--prompt P] [--threads T] [--kernel NAME]
 *       prints: positions=<N> worst_rel=<x> mean_rel=<y> top1=<a>/<N>
 *               greedy_agree=<n> base=<kind> kv=<kind>
 *
 * The prompt is P deterministic tokens (default 0) prefilled into both; the
 * errors are of the N positions decoded after it (relative to the largest
 * logit magnitude, as test_engine's), greedy_agree the leading tokens the
 * --kv engine's own greedy decode shares with the base's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/generate.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/banned.h"

static double rel_err(const float *a, const float *b, int n)
{
	double num = 0, den = 1e-30;
	for (int i = 0; i < n; i++) {
		num = fmax(num, fabs((double)a[i] - b[i]));
		den = fmax(den, fabs((double)b[i]));
	}
	return num / den;
}

typedef struct run {
	nf_engine *base, *kv;
	int positions, prompt;
} run;

/* Prefill the same prompt into each sequence; logits of its last token. */
static int prefill(nf_engine *e, nf_seq *s, int n, float *logits)
{
	int vocab = nf_engine_config(e)->vocab_size, err;
	int *toks = malloc(sizeof(int) * (size_t)n);
	if (!toks)
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (int i = 0; i < n; i++)
		toks[i] = 3 + (int)((7919u * (unsigned)i) % (unsigned)(vocab - 3));
	err = nf_engine_prefill(e, s, toks, (size_t)n, 0, logits);
	free(toks);
	return err;
}

static int compare(const run *r)
{
	int vocab = nf_engine_config(r->base)->vocab_size, err = 0, top1 = 0, agree = 0, diverged = 0;
	int tok = 1, own = 1;
	double worst = 0, mean = 0;
	nf_seq *a = NULL, *b = NULL, *c = NULL;
	float *lb = malloc(sizeof(float) * (size_t)vocab), *lk = malloc(sizeof(float) * (size_t)vocab);
	if (!lb || !lk) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = nf_seq_new(&a, r->base)) || (err = nf_seq_new(&b, r->kv)) ||
	    (err = nf_seq_new(&c, r->kv)))
		goto done;
	if (r->prompt > 0) {
		if ((err = prefill(r->base, a, r->prompt, lb)) || (err = prefill(r->kv, b, r->prompt, lk)) ||
		    (err = prefill(r->kv, c, r->prompt, lk)))
			goto done;
		tok = own = nf_argmax(lb, vocab);
	}
	for (int pos = r->prompt; pos < r->prompt + r->positions; pos++) {
		if ((err = nf_engine_step(r->base, &a, &tok, &pos, 1, lb)) ||
		    (err = nf_engine_step(r->kv, &b, &tok, &pos, 1, lk)))
			goto done;
		double e = rel_err(lk, lb, vocab);
		worst = fmax(worst, e);
		mean += e / r->positions;
		int want = nf_argmax(lb, vocab);
		top1 += nf_argmax(lk, vocab) == want;
		if ((err = nf_engine_step(r->kv, &c, &own, &pos, 1, lk)))
			goto done;
		own = nf_argmax(lk, vocab);
		if (!diverged && own == want)
			agree++;
		else
			diverged = 1;
		tok = want;
	}
	printf("positions=%d prompt=%d worst_rel=%.4e mean_rel=%.4e top1=%d/%d greedy_agree=%d base=%s kv=%s kernel=%s\n",
	       r->positions, r->prompt, worst, mean, top1, r->positions, agree,
	       nf_kv_kind_name(nf_engine_kv_cache(r->base)), nf_kv_kind_name(nf_engine_kv_cache(r->kv)),
	       nf_engine_kernel_name(r->kv));
done:
	nf_seq_free(a);
	nf_seq_free(b);
	nf_seq_free(c);
	free(lb);
	free(lk);
	return err;
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *kv = "int8", *base = "f16", *kernel = NULL;
	long positions = 256, prompt = 0, threads = 0;
	run r = {0};
	nf_kv_kind kb = NF_KV_F16, kk = NF_KV_INT8;
	int err = 0;
	for (int i = 1; i < argc && !err; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(argv[i], "--kv") == 0 && v)
			kv = argv[++i];
		else if (strcmp(argv[i], "--kernel") == 0 && v)
			kernel = argv[++i];
		else if (strcmp(argv[i], "--base") == 0 && v)
			base = argv[++i];
		else if (strcmp(argv[i], "--positions") == 0 && v)
			err = nf_parse_long(&positions, argv[++i], 1, 1 << 20, "--positions");
		else if (strcmp(argv[i], "--prompt") == 0 && v)
			err = nf_parse_long(&prompt, argv[++i], 0, 1 << 20, "--prompt");
		else if (strcmp(argv[i], "--threads") == 0 && v)
			err = nf_parse_long(&threads, argv[++i], 0, 1024, "--threads");
		else if (argv[i][0] != '-' && !dir)
			dir = argv[i];
		else {
			fprintf(stderr, "usage: nf_kv_error ENGINE_DIR [--kv int8] [--base f16] [--positions N] "
					"[--prompt P] [--threads T] [--kernel NAME]\n");
			return NF_EXIT_INPUT;
		}
	}
	if (!err && !dir)
		err = nf_error_set(NF_EINPUT, "no engine folder given");
	if (err || (err = nf_kv_kind_parse(&kb, base)) || (err = nf_kv_kind_parse(&kk, kv)) ||
	    (err = nf_engine_open(&r.base, dir, (int)threads)) ||
	    (err = nf_engine_open(&r.kv, dir, (int)threads)) ||
	    (err = nf_engine_set_kv_cache(r.base, kb)) || (err = nf_engine_set_kv_cache(r.kv, kk)) ||
	    (kernel && ((err = nf_engine_set_kernel(r.base, kernel)) ||
			(err = nf_engine_set_kernel(r.kv, kernel)))))
		goto done;
	if (prompt + positions > nf_engine_config(r.base)->max_seq_len) {
		err = nf_error_set(NF_EINPUT, "--prompt + --positions exceed max_seq_len %d",
				   nf_engine_config(r.base)->max_seq_len);
		goto done;
	}
	r.positions = (int)positions;
	r.prompt = (int)prompt;
	err = compare(&r);
done:
	nf_engine_free(r.base);
	nf_engine_free(r.kv);
	if (err) {
		fprintf(stderr, "nf_kv_error: %s\n", nf_error_last());
		return nf_error_exit_status(err);
	}
	return 0;
}
