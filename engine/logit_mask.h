/*
 * logit_mask.h - constrained sampling's one step before the sampler: the
 * logits of tokens a mask disallows become -inf, so that every sampler
 * (greedy, temperature, top-p) picks among the allowed ones only.  Kept
 * beside the sampler rather than inside it.
 */
#ifndef NF_ENGINE_LOGIT_MASK_H
#define NF_ENGINE_LOGIT_MASK_H

#include <stddef.h>
#include <stdint.h>

/* logits[i] = -inf for every i in [0, n) whose bit (i % 32 of word i / 32)
 * in `allowed` is clear; the allowed ones are left as they are. */
void nf_logit_mask_apply(float *logits, size_t n, const uint32_t *allowed);

#endif
