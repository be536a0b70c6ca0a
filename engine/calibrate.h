/*
 * calibrate.h - activation statistics of a float32 model on calibration
 * text, for the quantizers that need them: AWQ (engine/awq.h) reads each
 * matrix input's per-channel mean |x| and a sample of its rows; fp8
 * activations read each input's overall max |x| (scale = max / 448).
 *
 * The float model runs through the engine's own forward pass (forward.h,
 * batched GEMMs on every core: 10-30x the float32 reference's speed) with
 * an observer on every matrix input ("site", nf_ref_input): per layer
 * the attention input (after rms_att), the input of wo, the FFN input
 * (after rms_ffn) and the input of w2, and once the classifier's input
 * (after rms_final).
 */
#ifndef NF_ENGINE_CALIBRATE_H
#define NF_ENGINE_CALIBRATE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/model.h"
#include "engine/reference.h"

/* Rows of each input kept for AWQ's error (memory: rows * channels floats
 * per site). */
#define NF_CALIB_MAX_ROWS 256

typedef struct nf_calib nf_calib;

/* What was recorded for one matrix input; every array is owned by the
 * nf_calib and lives as long as it. */
typedef struct nf_calib_site {
	int n;                 /* channels: dim, or hidden_dim for NF_REF_IN_W2 */
	size_t count;          /* vectors observed (one per token) */
	const float *mean_abs; /* (n) mean over the tokens of |x_c| */
	const float *max_abs;  /* (n) max over the tokens of |x_c| */
	float absmax;          /* max over channels and tokens of |x| */
	const float *rows;     /* (n_rows, n) a sample of the observed vectors */
	size_t n_rows;         /* min(count, the row cap) */
} nf_calib_site;

typedef struct nf_calib_opts {
	size_t max_rows; /* rows kept per site (0: none), at most 1 << 20 */
	int threads;     /* <= 0: every online CPU */
} nf_calib_opts;

/* Run m over tokens[0, n) (each id checked against the vocabulary) in
 * sequences of at most m->cfg.max_seq_len tokens, each from position 0, and
 * record every site.  The row sample keeps, of all tokens, the max_rows
 * whose index hashes lowest: a uniform sample, the same however the
 * tokens are batched.  Caller owns *out (nf_calib_free). */
int nf_calib_run_opts(const nf_model *m, const int *tokens, size_t n, const nf_calib_opts *opts,
		      nf_calib **out);
/* The same over a checkpoint read a layer at a time (ckpt_reader.h):
 * memory holds the embedding and one layer in float32, not the model. */
typedef struct nf_ckpt_reader nf_ckpt_reader;
int nf_calib_run_reader(nf_ckpt_reader *r, const int *tokens, size_t n,
			const nf_calib_opts *opts, nf_calib **out);
/* The same with NF_CALIB_MAX_ROWS rows on every CPU. */
int nf_calib_run(const nf_model *m, const int *tokens, size_t n, nf_calib **out);
void nf_calib_free(nf_calib *c); /* NULL is fine */

/* Layers of the model it was run on. */
int nf_calib_layers(const nf_calib *c);
/* Tokens it was run on. */
size_t nf_calib_tokens(const nf_calib *c);
/* The site `which` of layer `layer` (layer ignored for NF_REF_IN_CLS), or
 * NULL when out of range. */
const nf_calib_site *nf_calib_get(const nf_calib *c, int layer, nf_ref_input which);
/* The per-tensor fp8 e4m3 activation scale of a site: absmax / 448 (the
 * largest e4m3 value), 1 for an input that was always zero; 0 when the site
 * is out of range. */
float nf_calib_fp8_scale(const nf_calib *c, int layer, nf_ref_input which);

/* The calibration text shipped with the tool, for recipes that name none:
 * the United States Declaration of Independence followed by the Gettysburg
 * Address (works of the US government, public domain), NUL-terminated;
 * *len (when not NULL) gets its length. */
const char *nf_calib_default_text(size_t *len);

#endif
