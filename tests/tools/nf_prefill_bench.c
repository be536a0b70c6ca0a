/*
 * nf_prefill_bench - time to first token of an engine folder: a prompt of
 * P tokens run one token per step (as before prefill) and in one
 * nf_engine_prefill call, each followed by the first logits:
 *
 *   nf_prefill_bench ENGINE_DIR [--prompt P] [--threads T] [--kernel NAME] [--runs R]
 *                    [--prefill-only] [--kv f32|f16|int8]
 *       prints: stepwise_s=<x> prefill_s=<y> speedup=<x/y> prefill_tokens_per_s=<z>
 *               same_logits=<0|1> kernel=<name> precision=<p> threads=<t>
 *   (--prefill-only: only the prefill is timed; stepwise_s is 0; --kv: the
 *   sequences' KV cache instead of the engine's own; also printed as kv=)
 *   nf_prefill_bench ENGINE_DIR --text TEXT [--threads T] [--runs R] [--prefill-only]
 *       the prompt is TEXT (a rendered chat prompt, say) tokenized by the
 *       engine's tokenizer as nimserve does (its special tokens added, control
 *       tokens in the text matched whole); also prints
 *       tokenize_s=<t> ttft_ms=<tokenize + prefill + the first greedy token,
 *       best run> first_token=<id>
 *
 * Build a synthetic ~110M engine with nf_decode_bench --synthetic DIR.
 * Times are the best of R runs (default 3), each on a fresh sequence.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/tokenizer.h"
#include "util/error.h"
#include "util/banned.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end = NULL;
	long v = strtol(s, &end, 10);
	if (!s[0] || *end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

/* Seconds to run the prompt through a fresh sequence, stepwise or in one call. */
static int run(double *secs, nf_engine *e, const int *toks, int n, int prefill, float *logits)
{
	nf_seq *s = NULL;
	int err;
	if ((err = nf_seq_new(&s, e)))
		return err;
	double t0 = now_s();
	if (prefill)
		err = nf_engine_prefill(e, s, toks, (size_t)n, 0, logits);
	else
		for (int p = 0; p < n && !err; p++)
			err = nf_engine_step(e, &s, &toks[p], &p, 1, logits);
	*secs = now_s() - t0;
	nf_seq_free(s);
	return err;
}

/* The prompt of --text: its tokens (*toks, *n) and the best of runs seconds
 * to tokenize it, which is part of a server's time to first token. */
static int text_tokens(int **toks, int *n, double *secs, nf_engine *e, const char *text, int runs)
{
	const nf_tokenizer *t = nf_engine_tokenizer(e);
	const unsigned flags = NF_TOK_ADD_SPECIAL | NF_TOK_PARSE_SPECIAL; /* as serve/api.c */
	size_t len = 0;
	*secs = 1e30;
	for (int r = 0; r < runs; r++) {
		free(*toks);
		*toks = NULL;
		double t0 = now_s();
		int err = nf_tokenizer_encode(t, text, strlen(text), flags, toks, &len);
		double dt = now_s() - t0;
		if (err)
			return err;
		*secs = dt < *secs ? dt : *secs;
	}
	if (len == 0 || len > (size_t)nf_engine_config(e)->max_seq_len)
		return nf_error_set(NF_EINPUT, "--text: %zu tokens (1 to the context, %d)", len,
				    (int)nf_engine_config(e)->max_seq_len);
	*n = (int)len;
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *kernel = NULL, *text = NULL, *kv = NULL;
	double tok_s = 0;
	int prompt = 200, threads = 0, runs = 3, err = 0, only = 0;
	nf_engine *e = NULL;
	float *la = NULL, *lb = NULL;
	int *toks = NULL;
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : "";
		if (strcmp(argv[i], "--prompt") == 0 && parse_int(v, 1, 1 << 20, &prompt) == 0)
			i++;
		else if (strcmp(argv[i], "--threads") == 0 && parse_int(v, 0, 1024, &threads) == 0)
			i++;
		else if (strcmp(argv[i], "--runs") == 0 && parse_int(v, 1, 100, &runs) == 0)
			i++;
		else if (strcmp(argv[i], "--text") == 0 && i + 1 < argc)
			text = argv[++i];
		else if (strcmp(argv[i], "--prefill-only") == 0)
			only = 1;
		else if (strcmp(argv[i], "--kernel") == 0 && i + 1 < argc)
			kernel = argv[++i];
		else if (strcmp(argv[i], "--kv") == 0 && i + 1 < argc)
			kv = argv[++i];
		else if (argv[i][0] != '-' && !dir)
			dir = argv[i];
		else {
			fprintf(stderr, "usage: nf_prefill_bench ENGINE_DIR [--prompt P] [--threads T] [--kernel NAME] [--runs R] [--prefill-only] [--kv KIND]\n"
					"       nf_prefill_bench ENGINE_DIR --text TEXT [--threads T] [--runs R] [--prefill-only]\n");
			return 2;
		}
	}
	if (!dir) {
		fprintf(stderr, "nf_prefill_bench: no engine folder given\n");
		return 2;
	}
	nf_kv_kind kind = NF_KV_F32;
	if ((kv && (err = nf_kv_kind_parse(&kind, kv))) || (err = nf_engine_open(&e, dir, threads)) ||
	    (kernel && (err = nf_engine_set_kernel(e, kernel))) ||
	    (kv && (err = nf_engine_set_kv_cache(e, kind))))
		goto done;
	const nf_model_config *c = nf_engine_config(e);
	if (prompt > c->max_seq_len)
		prompt = c->max_seq_len;
	if (text && (err = text_tokens(&toks, &prompt, &tok_s, e, text, runs)))
		goto done;
	la = malloc(sizeof(float) * (size_t)c->vocab_size);
	lb = malloc(sizeof(float) * (size_t)c->vocab_size);
	if (!text)
		toks = malloc(sizeof(int) * (size_t)prompt);
	if (!la || !lb || !toks) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (!text) { /* a deterministic token mix; BOS first */
		toks[0] = NF_TOKEN_BOS;
		for (int i = 1; i < prompt; i++)
			toks[i] = (int)((7919u * (unsigned)i + 13u) % (unsigned)c->vocab_size);
	}
	double warm, best_step = 1e30, best_pre = 1e30, t;
	int wn = prompt < 8 ? prompt : 8;
	if ((err = run(&warm, e, toks, wn, 0, la)) || (err = run(&warm, e, toks, wn, 1, la)))
		goto done;
	for (int r = 0; r < runs; r++) {
		if (!only) {
			if ((err = run(&t, e, toks, prompt, 0, la)))
				goto done;
			best_step = t < best_step ? t : best_step;
		}
		if ((err = run(&t, e, toks, prompt, 1, lb)))
			goto done;
		best_pre = t < best_pre ? t : best_pre;
	}
	if (only) /* nothing to compare with */
		best_step = 0, memcpy(la, lb, sizeof(float) * (size_t)c->vocab_size);
	printf("prompt=%d stepwise_s=%.4f prefill_s=%.4f speedup=%.2f prefill_tokens_per_s=%.1f same_logits=%d kernel=%s precision=%s threads=%d",
	       prompt, best_step, best_pre, best_step / best_pre, (double)prompt / best_pre,
	       memcmp(la, lb, sizeof(float) * (size_t)c->vocab_size) == 0, nf_engine_kernel_name(e),
	       nf_precision_name(nf_engine_precision(e)), nf_engine_threads(e));
	printf(" kv=%s", nf_kv_kind_name(nf_engine_kv_cache(e)));
	/* TTFT: the prompt's tokens and the logits of the first token (its
	 * argmax is nanoseconds beside them) */
	if (text)
		printf(" tokenize_s=%.6f ttft_ms=%.2f first_token=%d", tok_s, (tok_s + best_pre) * 1e3,
		       nf_argmax(lb, c->vocab_size));
	printf("\n");
done:
	free(la);
	free(lb);
	free(toks);
	nf_engine_free(e);
	if (err) {
		fprintf(stderr, "nf_prefill_bench: %s\n", nf_error_last());
		return nf_error_exit_status(err);
	}
	return 0;
}
