/*
 * gate_defaults.h - the correctness gate's default thresholds, one row per
 * precision, keyed by the precision's canonical name (nf_precision_name).
 * A recipe's gates.correctness `default:` and `precisions:` blocks override
 * them field by field (recipe.h).  Where the numbers come from is written
 * beside the table (gate_defaults.c) and in docs/quantization.md.
 */
#ifndef NF_FACTORY_GATE_DEFAULTS_H
#define NF_FACTORY_GATE_DEFAULTS_H

#include <stddef.h>

#include "factory/gates.h" /* nf_gate_bounds */

typedef struct nf_gate_default_row {
	const char *precision;
	nf_gate_bounds bounds;
} nf_gate_default_row;

/* The bounds for a precision name; for a name the table lacks (a precision
 * newer than the table), the loosest row's bounds, never none. */
const nf_gate_bounds *nf_gate_defaults_for(const char *precision);

/* The table itself, for docs and tests: *n rows. */
const nf_gate_default_row *nf_gate_defaults_table(size_t *n);

#endif
