/*
 * reference.h - the float32 reference forward pass: plain C, one token at a
 * time, straight from nf_model.  Gates compare every engine against it.
 */
#ifndef NF_ENGINE_REFERENCE_H
#define NF_ENGINE_REFERENCE_H

#include "engine/model.h"

typedef struct nf_ref_state nf_ref_state;

int nf_ref_state_new(nf_ref_state **out, const nf_model *m);
void nf_ref_state_free(nf_ref_state *s); /* NULL is fine */

/* Consume `token` at `pos`; returns vocab_size logits owned by the state
 * (valid until the next call), or NULL with the error set. */
const float *nf_ref_forward(nf_ref_state *s, int token, int pos);

#endif
