/*
 * observe.h - the matrix inputs of the forward pass, as an observer sees
 * them (engine/forward.h nf_fwd_set_observer; engine/calibrate.h records
 * them): per layer the attention input after rms_att (feeds wq, wk, wv),
 * the input of wo (the heads' outputs), the FFN input after rms_ffn (feeds
 * w1, w3) and the input of w2 (silu(w1 x) * w3 x); once the classifier's
 * input after rms_final.
 */
#ifndef NF_ENGINE_OBSERVE_H
#define NF_ENGINE_OBSERVE_H

#include <stddef.h>

typedef enum nf_act_site {
	NF_ACT_ATT,
	NF_ACT_WO,
	NF_ACT_FFN,
	NF_ACT_W2,
	NF_ACT_CLS,
	NF_ACT_SITE_COUNT
} nf_act_site;

/* n vectors of width floats, one after the other, in the order of the
 * tokens of the pass (valid only during the call); layer is -1 for
 * NF_ACT_CLS. */
typedef void (*nf_act_observer)(void *ctx, int layer, nf_act_site site, const float *x, size_t n,
				int width);

#endif
