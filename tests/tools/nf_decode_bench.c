/*
 * nf_decode_bench - decode throughput of an engine folder, for `make bench`:
 *
 *   nf_decode_bench ENGINE_DIR [--tokens N] [--threads T] [--kernel NAME]
 *                   [--kv f32|f16|int8] [--context C]
 *       prints: tokens_per_s=<x> cpu_tokens_per_s=<y> kernel=<name> weight_bytes=<n>
 *               ... kv=<kind> context=<C>
 *       --kv: the sequences' KV cache instead of the engine's own;
 *       --context: a prompt of C tokens prefilled first, so the N timed
 *       decode steps attend over C to C + N - 1 earlier positions
 *   nf_decode_bench --synthetic DIR [--precision fp32|int8-wo] [--dim 768]
 *       [--hidden 2048] [--layers 12] [--heads 12] [--kv-heads 12]
 *       [--vocab 32000] [--seq 1024] [--threads T] [--autotune]
 *       builds an engine of a Llama with deterministic pseudo-random weights
 *       (uniform, std ~0.02) and a synthetic tokenizer (default: ~110M).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
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

/* A llama2.c tokenizer of n tokens: <unk> <s> </s>, 256 byte tokens, then "t<i>". */
static int write_tokenizer(const char *path, int n)
{
	size_t cap = (size_t)n * 24 + 64, len = 0;
	unsigned char *buf = malloc(cap);
	int err;
	if (!buf)
		return nf_error_set(NF_ENOMEM, "out of memory");
	int32_t maxlen = 16;
	memcpy(buf, &maxlen, 4);
	len = 4;
	for (int i = 0; i < n; i++) {
		char piece[32];
		int pl;
		if (i == 0)
			pl = snprintf(piece, sizeof piece, "<unk>");
		else if (i == 1)
			pl = snprintf(piece, sizeof piece, "\n<s>\n");
		else if (i == 2)
			pl = snprintf(piece, sizeof piece, "\n</s>\n");
		else if (i < 259)
			pl = snprintf(piece, sizeof piece, "<0x%02X>", i - 3);
		else
			pl = snprintf(piece, sizeof piece, "t%d", i);
		float score = -(float)i;
		int32_t l = pl;
		memcpy(buf + len, &score, 4);
		memcpy(buf + len + 4, &l, 4);
		memcpy(buf + len + 8, piece, (size_t)pl);
		len += 8 + (size_t)pl;
	}
	err = nf_fs_write_atomic(path, buf, len, 0644);
	free(buf);
	return err;
}

static int synthetic(const char *dir, int argc, char **argv)
{
	nf_model_config c = {.dim = 768, .hidden_dim = 2048, .n_layers = 12, .n_heads = 12,
			     .n_kv_heads = 12, .vocab_size = 32000, .max_seq_len = 1024,
			     .norm_eps = 1e-5f, .rope_theta = 10000.0f, .shared_classifier = true};
	nf_engine_build_opts o = {0};
	nf_model *m = NULL;
	char *tok = NULL;
	int err = 0;
	o.precision = NF_PREC_FP32;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
		int bad = 0;
		if (strcmp(a, "--autotune") == 0) {
			o.autotune = 1;
			continue;
		}
		if (strcmp(a, "--precision") == 0)
			bad = nf_precision_parse(&o.precision, v);
		else if (strcmp(a, "--dim") == 0)
			bad = parse_int(v, 2, NF_MODEL_MAX_DIM, &c.dim);
		else if (strcmp(a, "--hidden") == 0)
			bad = parse_int(v, 1, NF_MODEL_MAX_HIDDEN, &c.hidden_dim);
		else if (strcmp(a, "--layers") == 0)
			bad = parse_int(v, 1, NF_MODEL_MAX_LAYERS, &c.n_layers);
		else if (strcmp(a, "--heads") == 0)
			bad = parse_int(v, 1, NF_MODEL_MAX_HEADS, &c.n_heads);
		else if (strcmp(a, "--kv-heads") == 0)
			bad = parse_int(v, 1, NF_MODEL_MAX_HEADS, &c.n_kv_heads);
		else if (strcmp(a, "--vocab") == 0)
			bad = parse_int(v, 260, NF_MODEL_MAX_VOCAB, &c.vocab_size);
		else if (strcmp(a, "--seq") == 0)
			bad = parse_int(v, 1, NF_MODEL_MAX_SEQ, &c.max_seq_len);
		else if (strcmp(a, "--threads") == 0)
			bad = parse_int(v, 0, 1024, &o.threads);
		else
			bad = -1;
		if (bad) {
			fprintf(stderr, "nf_decode_bench: bad option %s %s\n", a, v);
			return 2;
		}
		i++;
	}
	if ((err = nf_model_alloc(&m, &c)))
		goto done;
	uint64_t s = 0x2545F4914F6CDD1Dull;
	float *all = m->mem;
	size_t n = m->mem_len / sizeof(float);
	for (size_t i = 0; i < n; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		/* uniform in [-0.0346, 0.0346]: standard deviation 0.02 */
		all[i] = ((float)(s >> 40) / 16777216.0f * 2.0f - 1.0f) * 0.0346f;
	}
	size_t L = (size_t)c.n_layers, d = (size_t)c.dim;
	for (size_t i = 0; i < L * d; i++)
		m->w.rms_att[i] = m->w.rms_ffn[i] = 1.0f;
	for (size_t i = 0; i < d; i++)
		m->w.rms_final[i] = 1.0f;
	if (!(tok = nf_strdup_printf("%s.tokenizer.bin", dir))) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = write_tokenizer(tok, c.vocab_size)))
		goto done;
	o.tokenizer_path = tok;
	o.provenance_json = "{\"source\": \"synthetic\"}";
	err = nf_engine_build(dir, m, &o);
	remove(tok);
done:
	free(tok);
	nf_model_free(m);
	if (err) {
		fprintf(stderr, "nf_decode_bench: %s\n", nf_error_last());
		return nf_error_exit_status(err);
	}
	printf("built %s precision=%s\n", dir, nf_precision_name(o.precision));
	return 0;
}

/* A prompt of n deterministic tokens into s in one prefill (untimed). */
static int prefill_context(nf_engine *e, nf_seq *s, int n, float *logits)
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

int main(int argc, char **argv)
{
	const char *dir = NULL, *kernel = NULL, *kv = NULL;
	int tokens = 128, threads = 0, context = 0, err = 0;
	nf_engine *e = NULL;
	nf_seq *s = NULL, *warm = NULL;
	float *logits = NULL;
	if (argc >= 3 && strcmp(argv[1], "--synthetic") == 0)
		return synthetic(argv[2], argc - 3, argv + 3);
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : "";
		if (strcmp(argv[i], "--tokens") == 0 && parse_int(v, 1, NF_MODEL_MAX_SEQ, &tokens) == 0)
			i++;
		else if (strcmp(argv[i], "--threads") == 0 && parse_int(v, 0, 1024, &threads) == 0)
			i++;
		else if (strcmp(argv[i], "--kernel") == 0 && i + 1 < argc)
			kernel = argv[++i];
		else if (strcmp(argv[i], "--kv") == 0 && i + 1 < argc)
			kv = argv[++i];
		else if (strcmp(argv[i], "--context") == 0 && parse_int(v, 0, NF_MODEL_MAX_SEQ, &context) == 0)
			i++;
		else if (argv[i][0] != '-' && !dir)
			dir = argv[i];
		else {
			fprintf(stderr, "usage: nf_decode_bench ENGINE_DIR [--tokens N] [--threads T] [--kernel NAME]\n"
					"                       [--kv f32|f16|int8] [--context C]\n"
					"       nf_decode_bench --synthetic DIR [--precision P] [...]\n");
			return 2;
		}
	}
	if (!dir) {
		fprintf(stderr, "nf_decode_bench: no engine folder given\n");
		return 2;
	}
	nf_kv_kind kind = NF_KV_F32;
	if ((kv && (err = nf_kv_kind_parse(&kind, kv))) || (err = nf_engine_open(&e, dir, threads)) ||
	    (kernel && (err = nf_engine_set_kernel(e, kernel))) ||
	    (kv && (err = nf_engine_set_kv_cache(e, kind))) || (err = nf_seq_new(&s, e)) ||
	    (err = nf_seq_new(&warm, e)))
		goto done;
	const nf_model_config *c = nf_engine_config(e);
	if (context >= c->max_seq_len) {
		err = nf_error_set(NF_EINPUT, "--context %d leaves no room in max_seq_len %d", context,
				   c->max_seq_len);
		goto done;
	}
	if (tokens > c->max_seq_len - context)
		tokens = c->max_seq_len - context;
	if (!(logits = malloc(sizeof(float) * (size_t)c->vocab_size))) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	int tok = NF_TOKEN_BOS;
	for (int p = 0; p < 8 && p < c->max_seq_len; p++) /* warm caches, pages and threads */
		if ((err = nf_engine_step(e, &warm, &tok, &p, 1, logits)))
			goto done;
	if (context > 0 && (err = prefill_context(e, s, context, logits)))
		goto done;
	double t0 = now_s(), c0 = cpu_s();
	for (int p = context; p < context + tokens; p++) {
		if ((err = nf_engine_step(e, &s, &tok, &p, 1, logits)))
			goto done;
		tok = nf_argmax(logits, c->vocab_size); /* greedy, as nimfactory run */
	}
	double dt = now_s() - t0, dc = cpu_s() - c0;
	/* cpu_tokens_per_s: per second of CPU time of all threads; with one
	 * thread it is the speed when not descheduled (a steadier A/B figure). */
	printf("tokens_per_s=%.2f cpu_tokens_per_s=%.2f kernel=%s weight_bytes=%llu threads=%d precision=%s kv=%s context=%d\n",
	       (double)tokens / dt, (double)tokens / dc, nf_engine_kernel_name(e),
	       (unsigned long long)nf_engine_weight_bytes(e), nf_engine_threads(e),
	       nf_precision_name(nf_engine_precision(e)), nf_kv_kind_name(nf_engine_kv_cache(e)), context);
done:
	free(logits);
	nf_seq_free(s);
	nf_seq_free(warm);
	nf_engine_free(e);
	if (err) {
		fprintf(stderr, "nf_decode_bench: %s\n", nf_error_last());
		return nf_error_exit_status(err);
	}
	return 0;
}
