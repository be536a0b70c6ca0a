/*
 * nf_quant_error - where an int8 engine's error comes from, on a real model:
 *
 *   nf_quant_error MODEL [--positions N] [--threads T] [--kernel NAME]
 *
 * Teacher-forces N tokens of a chat-like text (repeated as needed) through
 * the float32 reference (engine/reference) and through two engines built in
 * a temporary folder, and prints for each the mean and max L2 relative
 * error of the logits (as factory/gates.c) and the top-1 agreement:
 *   int8-wo      the int8 engine (weights and the activation quantization);
 *   fakeq-w      an fp32 engine of the weights quantized per row to int8 and
 *                dequantized (the weight error alone, float activations);
 *   fakeq-w-b64, fakeq-w-b32  the same with a scale per 64 or 32 elements of
 *                a row instead (what per-block weight scales would give);
 *   fakeq-attn, fakeq-w13, fakeq-w2, fakeq-emb  per row, only the attention
 *                matrices, only w1 and w3, only w2, only the embedding and
 *                classifier (which matrices the weight error comes from).
 * The gap between int8-wo and fakeq-w is what the activation quantization
 * costs (and the int8 engine's half KV cache).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "engine/checkpoint.h"
#include "engine/engine.h"
#include "engine/model.h"
#include "engine/quant.h"
#include "engine/reference.h"
#include "engine/tokenizer.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

static const char TEXT[] =
	"<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
	"<|im_start|>user\nCan you explain how a refrigerator keeps food cold? Keep it short.<|im_end|>\n"
	"<|im_start|>assistant\nA refrigerator moves heat from the inside to the outside. A liquid "
	"called the refrigerant evaporates in coils inside the fridge, and evaporating absorbs heat, "
	"so the inside gets cold. A compressor then squeezes the vapour, which makes it hot, and it "
	"gives that heat away through the coils on the back before it turns liquid again. The cycle "
	"repeats as long as the thermostat asks for cooling.<|im_end|>\n"
	"<|im_start|>user\nWrite a Python function that returns the n-th Fibonacci number.<|im_end|>\n"
	"<|im_start|>assistant\nHere is a simple iterative version:\n\ndef fib(n):\n    a, b = 0, 1\n"
	"    for _ in range(n):\n        a, b = b, a + b\n    return a\n\nIt runs in O(n) time and "
	"uses constant memory. For example, fib(10) returns 55.<|im_end|>\n"
	"<|im_start|>user\nWhat is the capital of Australia, and why is it not Sydney?<|im_end|>\n"
	"<|im_start|>assistant\nThe capital of Australia is Canberra. When the colonies federated in "
	"1901, Sydney and Melbourne both wanted to be the capital, so a compromise site was chosen "
	"between them, and Canberra was built there as a planned city.<|im_end|>\n";

typedef struct stats {
	double sum, max;
	int agree, n;
} stats;

static int argmax(const float *x, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

/* ||a - r|| / ||r|| in double (factory/gates.c's rel_error). */
static double rel_error(const float *a, const float *r, int n)
{
	double num = 0, den = 0;
	for (int i = 0; i < n; i++) {
		double d = (double)a[i] - (double)r[i];
		num += d * d;
		den += (double)r[i] * (double)r[i];
	}
	return den > 0 ? sqrt(num / den) : 0.0;
}

/* Matrix kinds, for the per-kind breakdown. */
enum { K_ATTN = 1, K_W13 = 2, K_W2 = 4, K_EMB = 8, K_ALL = 15 };

/* Quantize each of the n floats' blocks of `block` (0: all n) to int8 and
 * back, in place. */
static void fake_quant_row(float *row, int8_t *q, size_t n, size_t block)
{
	block = block ? block : n;
	for (size_t c = 0; c < n; c += block) {
		size_t len = n - c < block ? n - c : block;
		float s;
		nf_quant_int8_rows(q, &s, row + c, 1, len);
		nf_quant_int8_dequant_row(row + c, q, s, len);
	}
}

/* Quantize the matrices of the kinds in `kinds` of m to int8 (one scale per
 * row, or per `block` elements of a row) and back, in place. */
static int fake_quant(nf_model *m, int kinds, size_t block)
{
	const nf_model_config *c = &m->cfg;
	size_t L = (size_t)c->n_layers, d = (size_t)c->dim, kv = (size_t)nf_model_kv_dim(c);
	size_t h = (size_t)c->hidden_dim, V = (size_t)c->vocab_size;
	struct { float *w; size_t rows, cols; int kind; } mats[] = {
		{m->w.wq, L * d, d, K_ATTN}, {m->w.wk, L * kv, d, K_ATTN}, {m->w.wv, L * kv, d, K_ATTN},
		{m->w.wo, L * d, d, K_ATTN}, {m->w.w1, L * h, d, K_W13}, {m->w.w3, L * h, d, K_W13},
		{m->w.w2, L * d, h, K_W2}, {m->w.token_embedding, V, d, K_EMB},
		{m->w.wcls != m->w.token_embedding ? m->w.wcls : NULL, V, d, K_EMB},
	};
	int8_t *q = malloc(h > d ? h : d);
	if (!q)
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
		for (size_t r = 0; mats[i].w && (mats[i].kind & kinds) && r < mats[i].rows; r++)
			fake_quant_row(mats[i].w + r * mats[i].cols, q, mats[i].cols, block);
	free(q);
	return 0;
}

/* Build m as `prec` into dir, teacher-force toks and compare with ref. */
static int measure(const char *dir, const nf_model *m, nf_tokenizer *tok, nf_precision prec,
		   const int *toks, int n, const float *ref, int threads, const char *kernel,
		   stats *st)
{
	nf_engine_build_opts o = {.precision = prec, .tokenizer = tok, .threads = threads};
	nf_engine *e = NULL;
	nf_seq *s = NULL;
	int V = m->cfg.vocab_size, err;
	float *lg = malloc(sizeof(float) * (size_t)V);
	if (!lg)
		return nf_error_set(NF_ENOMEM, "out of memory");
	if ((err = nf_engine_build(dir, m, &o)) || (err = nf_engine_open(&e, dir, threads)) ||
	    (kernel && (err = nf_engine_set_kernel(e, kernel))) || (err = nf_seq_new(&s, e)))
		goto done;
	memset(st, 0, sizeof *st);
	for (int p = 0; p < n; p++) {
		if ((err = nf_engine_step(e, &s, &toks[p], &p, 1, lg)))
			goto done;
		const float *r = ref + (size_t)p * (size_t)V;
		double re = rel_error(lg, r, V);
		st->sum += re;
		st->max = re > st->max ? re : st->max;
		st->agree += argmax(lg, V) == argmax(r, V);
		st->n++;
	}
done:
	nf_seq_free(s);
	nf_engine_free(e);
	free(lg);
	return err;
}

static void report(const char *name, const stats *st, const char *kernel)
{
	printf("%-12s kernel=%s positions=%d rel_err_mean=%.4f rel_err_max=%.4f top1=%.4f\n", name,
	       kernel ? kernel : "auto", st->n, st->sum / st->n, st->max, (double)st->agree / st->n);
}

/* n tokens of TEXT, repeated as needed. */
static int tokens_of(nf_tokenizer *tok, int n, int **out)
{
	int *t = NULL, *all = malloc(sizeof(int) * (size_t)n);
	size_t nt = 0;
	int err = nf_tokenizer_encode(tok, TEXT, strlen(TEXT), NF_TOK_PARSE_SPECIAL, &t, &nt);
	if (!err && (!all || nt == 0))
		err = nf_error_set(NF_ENOMEM, "out of memory or empty text");
	for (int i = 0; !err && i < n; i++)
		all[i] = t[(size_t)i % nt];
	free(t);
	if (err)
		free(all);
	else
		*out = all;
	return err;
}

int main(int argc, char **argv)
{
	int n = 256, threads = 2, err = 0, *toks = NULL;
	const char *path = NULL, *kernel = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--positions") == 0 && i + 1 < argc)
			n = (int)strtol(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
			threads = (int)strtol(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--kernel") == 0 && i + 1 < argc)
			kernel = argv[++i];
		else
			path = argv[i];
	}
	if (!path || n < 1) {
		fprintf(stderr, "usage: nf_quant_error MODEL [--positions N] [--threads T] [--kernel NAME]\n");
		return 2;
	}
	nf_model *m = NULL;
	nf_tokenizer *tok = NULL;
	nf_ref_state *rs = NULL;
	float *ref = NULL;
	char tmp[] = "/tmp/nf_quant_error.XXXXXX", dir[64];
	stats st;
	if ((err = nf_ckpt_load(&m, path, NF_CKPT_AUTO)) ||
	    (err = nf_ckpt_load_tokenizer(&tok, path, nf_ckpt_sniff(path), NULL, m->cfg.vocab_size)) ||
	    (err = tokens_of(tok, n, &toks)) || (err = nf_ref_state_new(&rs, m)))
		goto done;
	if (n > m->cfg.max_seq_len)
		n = m->cfg.max_seq_len;
	size_t V = (size_t)m->cfg.vocab_size;
	if (!(ref = malloc(sizeof(float) * V * (size_t)n)) || !mkdtemp(tmp)) {
		err = nf_error_set(NF_ENOMEM, "out of memory or no temporary folder");
		goto done;
	}
	for (int p = 0; p < n; p++)
		memcpy(ref + (size_t)p * V, nf_ref_forward(rs, toks[p], p), sizeof(float) * V);
	snprintf(dir, sizeof dir, "%s/int8", tmp);
	if ((err = measure(dir, m, tok, NF_PREC_INT8_WO, toks, n, ref, threads, kernel, &st)))
		goto done;
	report("int8-wo", &st, kernel);
	fflush(stdout);
	static const struct { const char *name; int kinds; size_t block; } fq[] = {
		{"fakeq-w", K_ALL, 0},         {"fakeq-w-b64", K_ALL, 64}, {"fakeq-w-b32", K_ALL, 32},
		{"fakeq-attn", K_ATTN, 0},     {"fakeq-w13", K_W13, 0},    {"fakeq-w2", K_W2, 0},
		{"fakeq-emb", K_EMB, 0},
	};
	for (size_t i = 0; i < sizeof fq / sizeof fq[0]; i++) {
		nf_model *mq = NULL;
		snprintf(dir, sizeof dir, "%s/fakeq%zu", tmp, i);
		if ((err = nf_ckpt_load(&mq, path, NF_CKPT_AUTO)) ||
		    (err = fake_quant(mq, fq[i].kinds, fq[i].block)) ||
		    (err = measure(dir, mq, tok, NF_PREC_FP32, toks, n, ref, threads, NULL, &st))) {
			nf_model_free(mq);
			goto done;
		}
		nf_model_free(mq);
		report(fq[i].name, &st, NULL);
		fflush(stdout);
	}
done:
	if (err)
		fprintf(stderr, "nf_quant_error: %s\n", nf_error_last());
	nf_fs_remove_tree(tmp);
	free(ref);
	free(toks);
	nf_ref_state_free(rs);
	nf_tokenizer_free(tok);
	nf_model_free(m);
	return err ? 1 : 0;
}
