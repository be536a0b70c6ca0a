/*
 * bench.c - on a GPU: decode and prefill tokens/s of an engine through the
 * CUDA backend (nf_engine_use_gpu), and the fraction of the SKU's HBM
 * ceiling a decode step reaches (the engine's weight bytes per step at the
 * datasheet bandwidth, engine/sku.c), as TAP comments.  tests/gpu/run.sh
 * runs it per precision beside PyTorch eager.
 * Usage: bench ENGINE_DIR BATCH DECODE_STEPS PREFILL_TOKENS
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/sku.h"
#include "util/error.h"
#include "util/parse.h"
#include "tests/tap.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const nf_sku *sku_of(const nf_engine *e)
{
	json_t *root = json_loads(nf_engine_config_json(e), 0, NULL);
	const nf_sku *s = nf_sku_find(
		json_string_value(json_object_get(json_object_get(root, "profile"), "device")));
	json_decref(root);
	return s;
}

int main(int argc, char **argv)
{
	long batch, steps, prefill;
	nf_engine *e = NULL;
	nf_seq *seqs[64] = {0};
	int tokens[64], pos[64], *prompt = NULL;
	float *logits = NULL;
	double t0, dt;

	if (argc != 5 || nf_parse_long(&batch, argv[2], 1, 64, "BATCH") ||
	    nf_parse_long(&steps, argv[3], 1, 1 << 20, "DECODE_STEPS") ||
	    nf_parse_long(&prefill, argv[4], 1, 1 << 20, "PREFILL_TOKENS")) {
		fprintf(stderr, "usage: bench ENGINE_DIR BATCH DECODE_STEPS PREFILL_TOKENS\n");
		return 2;
	}
	if (nf_engine_open(&e, argv[1], 0) || nf_engine_use_gpu(e, (int)batch)) {
		printf("1..0 # SKIP not on a GPU: %s\n", nf_error_last());
		return 0;
	}
	const nf_model_config *c = nf_engine_config(e);
	const nf_sku *sku = sku_of(e);
	if (prefill + steps > c->max_seq_len)
		prefill = c->max_seq_len - steps > 1 ? c->max_seq_len - steps : 1;
	logits = calloc((size_t)batch * (size_t)c->vocab_size, sizeof *logits);
	prompt = calloc((size_t)prefill, sizeof *prompt);
	for (long i = 0; i < prefill; i++)
		prompt[i] = (int)(1 + i % (c->vocab_size - 1));
	for (long b = 0; b < batch; b++)
		if (nf_seq_new(&seqs[b], e)) {
			ok(0, "sequence %ld: %s", b, nf_error_last());
			return done_testing();
		}
	t0 = now();
	for (long b = 0; b < batch; b++)
		if (nf_engine_prefill(e, seqs[b], prompt, (size_t)prefill, 0, logits)) {
			ok(0, "prefill: %s", nf_error_last());
			return done_testing();
		}
	dt = now() - t0;
	printf("# prefill: %ld x %ld tokens in %.3f s: %.0f tokens/s\n", batch, prefill, dt,
	       (double)(batch * prefill) / dt);
	t0 = now();
	for (long s = 0; s < steps; s++) {
		for (long b = 0; b < batch; b++)
			tokens[b] = (int)(1 + (s + b) % (c->vocab_size - 1)), pos[b] = (int)(prefill + s);
		if (nf_engine_step(e, seqs, tokens, pos, (size_t)batch, logits)) {
			ok(0, "decode: %s", nf_error_last());
			return done_testing();
		}
	}
	dt = now() - t0;
	double per_s = (double)steps / dt;
	printf("# decode: batch %ld, %ld steps in %.3f s: %.0f tokens/s\n", batch, steps, dt,
	       per_s * (double)batch);
	if (sku && sku->mem_bw_gbs > 0)
		printf("# decode: %.1f%% of %s's HBM ceiling (%.1f GB/s of weights, peak %d GB/s)\n",
		       100.0 * (double)nf_engine_weight_bytes(e) * per_s / (sku->mem_bw_gbs * 1e9),
		       sku->name, (double)nf_engine_weight_bytes(e) * per_s / 1e9, sku->mem_bw_gbs);
	ok(1, "bench ran on %s", nf_engine_kernel_name(e));
	for (long b = 0; b < batch; b++)
		nf_seq_free(seqs[b]);
	nf_engine_free(e);
	free(logits);
	free(prompt);
	return done_testing();
}
