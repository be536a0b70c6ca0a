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

/* The inputs of the matrices, as an observer sees them (engine/calibrate.h
 * records them): the attention input after rms_att (feeds wq, wk, wv), the
 * input of wo (the heads' outputs), the FFN input after rms_ffn (feeds w1,
 * w3), the input of w2 (silu(w1 x) * w3 x) and the classifier's input
 * after rms_final. */
typedef enum nf_ref_input {
	NF_REF_IN_ATT,
	NF_REF_IN_WO,
	NF_REF_IN_FFN,
	NF_REF_IN_W2,
	NF_REF_IN_CLS,
	NF_REF_IN_COUNT
} nf_ref_input;

/* Called during nf_ref_forward with each matrix input x (n floats, valid
 * only during the call); layer is -1 for NF_REF_IN_CLS. */
typedef void (*nf_ref_observer)(void *ctx, int layer, nf_ref_input which, const float *x, int n);

/* Observe every later nf_ref_forward of s (fn NULL: stop observing). */
void nf_ref_set_observer(nf_ref_state *s, nf_ref_observer fn, void *ctx);

/* Consume `token` at `pos`; returns vocab_size logits owned by the state
 * (valid until the next call), or NULL with the error set. */
const float *nf_ref_forward(nf_ref_state *s, int token, int pos);

#endif
