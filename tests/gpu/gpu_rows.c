/*
 * gpu_rows.c - the device path's rows of logits and prefix copies on a GPU
 * (tests/gpu/run.sh), as TAP, for an engine gpu_engine made this GPU's:
 *   1. every prompt row's logits (nf_engine_prefill_logits) on the GPU
 *      against the same engine on the CPU: the same argmax in every row,
 *      and the largest difference within a bound of the largest logit;
 *   2. the verifier's rows (nf_engine_step_ragged_rows, 4 rows of a run of
 *      4 after a prefix of 8) equal to rows 8..11 of (1) on the GPU;
 *   3. a sequence given the first 8 positions by nf_seq_copy_prefix gives
 *      the same 4 rows, bit for bit (the same kernels on the same cache);
 *   4. a decode token and those 4 rows in one ragged step: each sequence's
 *      rows in their place (the decode row's argmax is token 8's).
 * Usage: gpu_rows ENGINE_DIR
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/error.h"

#define PROMPT 12
#define PREFIX 8

static int tests, failed;

static void check(int cond, const char *fmt, const char *detail)
{
	tests++;
	failed += !cond;
	printf("%sok %d - %s%s\n", cond ? "" : "not ", tests, fmt, detail);
}

static int argmax(const float *v, size_t n)
{
	size_t best = 0;
	for (size_t i = 1; i < n; i++)
		if (v[i] > v[best])
			best = i;
	return (int)best;
}

/* Rows of a and b: whether every argmax agrees; the largest difference
 * relative to the largest logit into *rel. */
static int rows_agree(const float *a, const float *b, int rows, size_t vocab, double *rel)
{
	double diff = 0, top = 1e-30;
	int same = 1;
	for (int r = 0; r < rows; r++) {
		const float *x = a + (size_t)r * vocab, *y = b + (size_t)r * vocab;
		same &= argmax(x, vocab) == argmax(y, vocab);
		for (size_t i = 0; i < vocab; i++) {
			diff = fmax(diff, fabs((double)x[i] - y[i]));
			top = fmax(top, fabs((double)y[i]));
		}
	}
	*rel = diff / top;
	return same;
}

static int prompt_logits(nf_engine *e, const int *prompt, float *out)
{
	nf_seq *s = NULL;
	int err = nf_seq_new(&s, e);
	if (!err)
		err = nf_engine_prefill_logits(e, s, prompt, PROMPT, 0, out);
	nf_seq_free(s);
	return err;
}

/* One ragged step of a decode token (sequence c, one row) and a verifier
 * run (sequence d, 4 rows after a copied prefix): c's row first, then d's
 * 4, each where nf_engine_step_ragged_rows puts it - d's equal to the
 * verifier's rows alone (verify). */
static int mixed_step(nf_engine *gpu, const int *prompt, const float *verify, size_t vocab)
{
	nf_seq *seqs[2] = {NULL, NULL}, *src = NULL;
	int toks[1 + PROMPT - PREFIX], nt[2] = {1, PROMPT - PREFIX}, p0[2] = {PREFIX, PREFIX};
	int rows[2] = {1, PROMPT - PREFIX}, err;
	float *out = calloc((size_t)(1 + PROMPT - PREFIX) * vocab, sizeof(float));
	toks[0] = prompt[PREFIX];
	memcpy(toks + 1, prompt + PREFIX, (PROMPT - PREFIX) * sizeof(int));
	err = !out || nf_seq_new(&src, gpu) || nf_engine_prefill(gpu, src, prompt, PREFIX, 0, NULL) ||
	      nf_seq_new(&seqs[0], gpu) || nf_seq_copy_prefix(seqs[0], src, PREFIX) ||
	      nf_seq_new(&seqs[1], gpu) || nf_seq_copy_prefix(seqs[1], src, PREFIX) ||
	      nf_engine_step_ragged_rows(gpu, seqs, toks, nt, p0, rows, 2, out);
	if (err)
		check(0, "a mixed ragged step: ", nf_error_last());
	else
		check(!memcmp(out + vocab, verify, (PROMPT - PREFIX) * vocab * sizeof(float)) &&
			      argmax(out, vocab) == argmax(verify, vocab),
		      "a decode row and 4 verifier rows in one step, each in its place", "");
	nf_seq_free(seqs[0]);
	nf_seq_free(seqs[1]);
	nf_seq_free(src);
	free(out);
	return err;
}

int main(int argc, char **argv)
{
	nf_engine *gpu = NULL, *cpu = NULL;
	nf_seq *a = NULL, *b = NULL;
	int prompt[PROMPT], n4 = PROMPT - PREFIX, p8 = PREFIX, rows = n4, rc = 1;
	float *on_gpu = NULL, *on_cpu = NULL, *verify = NULL, *copied = NULL;
	char detail[160];
	double rel;

	if (argc != 2) {
		fprintf(stderr, "usage: gpu_rows ENGINE_DIR\n");
		return 2;
	}
	if (nf_engine_open(&gpu, argv[1], 1) || nf_engine_use_gpu(gpu, 8) ||
	    nf_engine_open(&cpu, argv[1], 1)) {
		printf("1..0 # SKIP the engine on this GPU: %s\n", nf_error_last());
		rc = 0;
		goto done;
	}
	size_t vocab = (size_t)nf_engine_config(gpu)->vocab_size;
	on_gpu = calloc(PROMPT * vocab, sizeof(float));
	on_cpu = calloc(PROMPT * vocab, sizeof(float));
	verify = calloc((size_t)n4 * vocab, sizeof(float));
	copied = calloc((size_t)n4 * vocab, sizeof(float));
	if (!on_gpu || !on_cpu || !verify || !copied)
		goto done;
	for (int i = 0; i < PROMPT; i++)
		prompt[i] = 1 + (i * 37) % ((int)vocab - 1);

	if (prompt_logits(gpu, prompt, on_gpu) || prompt_logits(cpu, prompt, on_cpu)) {
		check(0, "every prompt row's logits: ", nf_error_last());
		goto done;
	}
	int same = rows_agree(on_gpu, on_cpu, PROMPT, vocab, &rel);
	snprintf(detail, sizeof detail, "(largest difference %.2g of the largest logit)", rel);
	check(same && rel < 2e-2, "every prompt row on the GPU has the CPU's argmax ", detail);

	if (nf_seq_new(&a, gpu) || nf_engine_prefill(gpu, a, prompt, PREFIX, 0, NULL) ||
	    nf_engine_step_ragged_rows(gpu, &a, prompt + PREFIX, &n4, &p8, &rows, 1, verify)) {
		check(0, "the verifier's rows: ", nf_error_last());
		goto done;
	}
	same = rows_agree(verify, on_gpu + PREFIX * vocab, n4, vocab, &rel);
	snprintf(detail, sizeof detail, "(largest difference %.2g)", rel);
	check(same && rel < 1e-4, "4 verifier rows equal the prompt's rows 8..11 ", detail);

	if (nf_seq_new(&b, gpu) || nf_seq_copy_prefix(b, a, PREFIX) ||
	    nf_engine_step_ragged_rows(gpu, &b, prompt + PREFIX, &n4, &p8, &rows, 1, copied)) {
		check(0, "a copied prefix: ", nf_error_last());
		goto done;
	}
	check(!memcmp(copied, verify, (size_t)n4 * vocab * sizeof(float)),
	      "a sequence given the prefix by a device copy gives the same rows, bit for bit", "");
	if (mixed_step(gpu, prompt, verify, vocab))
		goto done;
	rc = 0;
done:
	nf_seq_free(a);
	nf_seq_free(b);
	nf_engine_free(gpu);
	nf_engine_free(cpu);
	free(on_gpu);
	free(on_cpu);
	free(verify);
	free(copied);
	if (tests)
		printf("1..%d\n", tests);
	return rc || failed;
}
