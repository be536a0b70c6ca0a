/*
 * gate_defaults.c - the correctness gate's default thresholds per precision.
 *
 * Columns: min top-1 agreement and max mean KL (nats) on the evaluation
 * text, min perplexity ratio (reference / engine), min greedy agreement on
 * the gate prompts, max logit rel_err on them.
 *
 * fp32 must be the reference itself (the engine's forward pass over the same
 * floats): anything above rounding noise is a bug.  int8-wo was measured on
 * stories260K and SmolLM2-135M (docs/quantization.md): its activations are
 * quantized per token too, and SmolLM2's activation outliers cost it far
 * more than stories260K (top-1 0.88 against 0.97, KL 0.08 against 0.004,
 * perplexity ratio 0.91 against 0.997), so the defaults leave room for the
 * worse of the two and still fail a broken kernel, whose KL is whole nats
 * and whose top-1 agreement falls to chance.  A recipe that wants MLPerf's
 * "99% of float32" writes min_ppl_ratio: 0.99.  The precisions
 * still arriving take their bounds from the literature for quantization of
 * small LLMs, widened by what SmolLM2 showed for int8: fp16 weights are
 * lossless to ~1e-4 KL; bf16 keeps 8 bits of mantissa (KL ~1e-3); fp8
 * e4m3 quantizes activations per tensor, which outliers hurt as they hurt
 * int8 per token; int4 round-to-nearest in groups of 32-128 loses 5-20%
 * perplexity on sub-1B models and AWQ recovers about half of it (Lin et
 * al., AWQ, 2023; Frantar et al., GPTQ, 2022).  A recipe on a model that is more sensitive sets its
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
	{"int8-wo",  {0.80,  0.20,   0.85,   0.70,   0.60}},
	{"fp8-e4m3", {0.80,  0.20,   0.85,   0.60,   0.60}},
	{"int4-awq", {0.75,  0.30,   0.80,   0.50,   0.80}},
	{"int4-wo",  {0.70,  0.40,   0.75,   0.40,   1.00}},
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
