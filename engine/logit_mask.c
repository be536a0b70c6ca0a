/*
 * logit_mask.c - disallowed tokens' logits to -inf (engine/logit_mask.h).
 * A word at a time: a whole word of allowed tokens (common inside a JSON
 * string) is skipped, a whole word of disallowed ones written without
 * looking at its bits.
 */
#include "engine/logit_mask.h"

#include <math.h>

#include "util/banned.h"

void nf_logit_mask_apply(float *logits, size_t n, const uint32_t *allowed)
{
	for (size_t w = 0; w * 32 < n; w++) {
		uint32_t bits = allowed[w];
		size_t base = w * 32, end = n - base < 32 ? n - base : 32;
		if (bits == 0xffffffffu)
			continue;
		if (bits == 0) {
			/* no bit to look at: a plain store the compiler vectorizes */
			for (size_t k = 0; k < end; k++)
				logits[base + k] = -INFINITY;
			continue;
		}
		for (size_t k = 0; k < end; k++)
			if (!(bits >> k & 1u))
				logits[base + k] = -INFINITY;
	}
}
