/*
 * gate_defaults.c - the correctness gate's default thresholds per precision.
 *
 * Columns: min top-1 agreement and max mean KL (nats) on the evaluation
 * text, min perplexity ratio (reference / engine), min greedy agreement on
 * the gate prompts, max logit rel_err on them.
 *
 * fp32 must be the reference itself (the engine's forward pass over the same
 * floats): anything above rounding noise is a bug.  int8-wo was measured on
 * stories260K and SmolLM2-135M (docs/quantization.md): the bounds leave
 * several times the measured loss and still fail a broken kernel, whose KL
 * is whole nats and whose top-1 agreement falls to chance.  The precisions
 * still arriving take their bounds from the literature for weight-only
 * quantization of small LLMs: fp16 weights are lossless to ~1e-4 KL; bf16
 * keeps 8 bits of mantissa (KL ~1e-3); fp8 e4m3 with per-channel scales
 * and an fp8 activation loses ~1% perplexity (the MLPerf 99% target); int4
 * round-to-nearest in groups of 32-128 loses 3-10% perplexity on sub-1B
 * models and AWQ recovers about half of it (Lin et al., AWQ, 2023; Frantar
 * et al., GPTQ, 2022).  A recipe on a model that is more sensitive sets its
 * own in gates.correctness.precisions.
 */
#include "factory/gate_defaults.h"

#include <string.h>

#include "util/banned.h"

static const nf_gate_default_row table[] = {
	/* precision   top1    KL      ppl     greedy  rel_err */
	{"fp32",     {0.999, 1e-4,   0.999,  1.00,   1e-3}},
	{"fp16",     {0.99,  0.005,  0.995,  0.90,   0.02}},
	{"bf16",     {0.98,  0.01,   0.99,   0.90,   0.05}},
	{"int8-wo",  {0.95,  0.02,   0.99,   0.90,   0.10}},
	{"fp8-e4m3", {0.90,  0.05,   0.98,   0.75,   0.25}},
	{"int4-awq", {0.85,  0.10,   0.93,   0.60,   0.40}},
	{"int4-wo",  {0.80,  0.15,   0.90,   0.50,   0.50}},
};

#define N_ROWS (sizeof(table) / sizeof(table[0]))

const nf_gate_bounds *nf_gate_defaults_for(const char *precision)
{
	for (size_t i = 0; precision && i < N_ROWS; i++)
		if (!strcmp(table[i].precision, precision))
			return &table[i].bounds;
	return &table[N_ROWS - 1].bounds; /* the loosest: a new precision is gated, not waved through */
}

const nf_gate_default_row *nf_gate_defaults_table(size_t *n)
{
	*n = N_ROWS;
	return table;
}
