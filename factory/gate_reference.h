/*
 * gate_reference.h - the float32 reference of a build's correctness gates,
 * computed once and shared by every profile's gate.
 *
 * What it holds:
 *   - the evaluation text cut into windows: each window is the tokens the
 *     tokenizer adds in front of a text (BOS, where the model has one) and
 *     then up to max_seq_len - that many text tokens, the text's tokens
 *     consumed in order until eval_tokens of them are used;
 *   - for each gate prompt, its tokens and the reference's greedy
 *     continuation (up to max_tokens tokens; it stops after an
 *     end-of-generation token or BOS, and at the end of the context);
 *   - the reference's logits (vocab floats) at every position that
 *     predicts a token: in window order, positions 0 .. n-2 of each window,
 *     then each prompt's continuation positions.
 *
 * The logits come from the engine's batched forward pass over the float32
 * model (nf_fwd_weights_from_model: the same arithmetic as an fp32 engine,
 * a prefill per window instead of the token-by-token engine/reference.c),
 * are written to a file in tmp_dir as they are computed and mapped back
 * read-only, so memory stays bounded by what the pages in use need.  Rows
 * are float32 when all of them take at most NF_GATE_REF_F32_MAX bytes
 * (exact KL: an fp32 engine scores KL 0) and IEEE half above that (a
 * rounding of about 1e-3 relative on each logit, so KL carries noise of
 * that order; the file stays at half the size).
 */
#ifndef NF_FACTORY_GATE_REFERENCE_H
#define NF_FACTORY_GATE_REFERENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/model.h"
#include "engine/tokenizer.h"
#include "factory/log.h"

#define NF_GATE_REF_F32_MAX ((uint64_t)512 << 20)

typedef struct nf_gate_ref_opts {
	const char *eval_text;      /* borrowed; NULL = the shipped default (eval_text.h) */
	size_t eval_len;            /* bytes of eval_text */
	int eval_tokens;            /* text tokens to evaluate, >= 2 (fewer when the text is shorter) */
	const char *const *prompts; /* borrowed; may be NULL when n_prompts is 0 */
	size_t n_prompts;
	int max_tokens;             /* continuation per prompt, >= 1 */
	const char *tmp_dir;        /* existing folder for the logits file (removed by free) */
	uint64_t f32_max_bytes;     /* rows beyond this many bytes are stored as half; 0 =
				       NF_GATE_REF_F32_MAX */
	int threads;                /* 0 = all cores */
} nf_gate_ref_opts;

typedef struct nf_gate_ref_window {
	const int *tokens; /* into the reference's token array */
	int n_tokens;      /* >= 2: positions 0 .. n_tokens-2 predict the next */
	size_t first_row;  /* row of position 0 */
} nf_gate_ref_window;

typedef struct nf_gate_ref_prompt {
	char *text;       /* owned: the prompt as the recipe wrote it */
	int *tokens;      /* owned: the prompt (BOS included), then the continuation */
	int n_prompt;     /* tokens of the prompt, >= 1 */
	int n_continued;  /* continuation tokens, >= 1; the engine is fed all
			     but the last, and predicts each from position
			     n_prompt - 1 on */
	size_t first_row; /* row of position n_prompt - 1 */
} nf_gate_ref_prompt;

typedef struct nf_gate_ref {
	nf_model_config cfg;        /* of the model the reference was run on */
	int *eval_tokens;           /* owned: every window's tokens, one after the other */
	nf_gate_ref_window *windows; /* owned */
	size_t n_windows;
	size_t text_tokens;         /* text tokens evaluated (positions of the windows) */
	nf_gate_ref_prompt *prompts; /* owned, one per gate prompt */
	size_t n_prompts;
	size_t n_rows;
	bool half;                  /* rows stored as IEEE half */
	char *path;                 /* owned: the logits file */
	bool keep_file;             /* the file is a cache stage's: free leaves it */
	const void *map;
	size_t map_size;
	double seconds;             /* time it took to compute */
} nf_gate_ref;

/* Tokenize, run the float32 model m and write the rows (see above).  tok is
 * the model's tokenizer (borrowed).  Caller owns *out. */
int nf_gate_ref_new(nf_gate_ref **out, const nf_model *m, const nf_tokenizer *tok,
		    const nf_gate_ref_opts *o, nf_log *log);
void nf_gate_ref_free(nf_gate_ref *r); /* NULL is fine; removes the file */

/*
 * The reference as a stage result (factory/gate_reference_cache.c): what a
 * stage folder holds of it, so that a build whose gates change (a threshold)
 * reuses the reference instead of loading the model and computing it again.
 */
#define NF_GATE_REF_META "reference.json"  /* dimensions, tokens, rows */
#define NF_GATE_REF_LOGITS "logits"        /* the rows, as computed */

/* Write r into the stage folder dir being made (the logits copied). */
int nf_gate_ref_save(const nf_gate_ref *r, const char *dir);

/* The reference saved in dir, its logits mapped in place (free leaves the
 * file).  NF_EINPUT naming dir for anything malformed or inconsistent.
 * Caller owns *out. */
int nf_gate_ref_load(nf_gate_ref **out, const char *dir);

/* Logits row `row` (< n_rows): a pointer into the mapping for float32
 * rows, or scratch (vocab floats) filled from the half ones. */
const float *nf_gate_ref_row(const nf_gate_ref *r, size_t row, float *scratch);

#endif
