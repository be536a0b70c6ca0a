/*
 * speculative.h - speculative decoding: draft a few tokens cheaply, check
 * them all with one pass of the engine, keep the ones it agrees with.
 *
 * Drafters, both deterministic:
 *   lookup  prompt lookup: the longest n-gram that ends the text so far and
 *           occurred earlier in it; the tokens that followed it there (no
 *           second model; wins where the answer repeats its input, as a
 *           summary or an edit does)
 *   draft   a draft engine with the same vocabulary (a cheaper profile of
 *           the model, or a smaller model), decoding greedily
 *
 * Verification feeds the pending token and the k drafted ones to the
 * engine in one pass (nf_engine_prefill_logits) and walks the k + 1 rows:
 * at row i the sampler picks x from the engine's distribution; x equal to
 * draft i is accepted and the walk goes on, else x is the step's last
 * token.  For a deterministic draft this is the standard accept/reject
 * rule (accept d with probability p(d), else sample from p without d), and
 * it draws one sample per token produced, in order: the output, greedy or
 * sampled with a seed, is the one decoding without speculation gives.
 */
#ifndef NF_ENGINE_SPECULATIVE_H
#define NF_ENGINE_SPECULATIVE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/generate.h"

/* Most tokens drafted per step. */
#define NF_SPEC_MAX_K 16

typedef enum nf_spec_kind {
	NF_SPEC_NONE,
	NF_SPEC_LOOKUP,
	NF_SPEC_DRAFT,
} nf_spec_kind;

/* "none" | "lookup" | "draft"; NF_EINPUT otherwise. */
int nf_spec_kind_parse(nf_spec_kind *out, const char *name);
const char *nf_spec_kind_name(nf_spec_kind k);

typedef struct nf_spec_opts {
	nf_spec_kind kind;
	int k;             /* tokens drafted per step, 1..NF_SPEC_MAX_K */
	int max_ngram;     /* lookup: longest n-gram matched, 1..8 */
	nf_engine *draft;  /* draft: the draft engine (borrowed; same vocabulary) */
} nf_spec_opts;

typedef struct nf_spec_stats {
	uint64_t steps;    /* verification passes */
	uint64_t drafted;  /* tokens proposed */
	uint64_t accepted; /* of those, kept */
	uint64_t produced; /* tokens produced (accepted + one a step) */
	uint64_t draft_passes; /* draft engine passes: k a step, its catch-up
				  included in the first */
} nf_spec_stats;

/* Prompt lookup over ctx[0, n): up to k tokens into draft, the count (0
 * when no n-gram of max_ngram..1 tokens that ends ctx occurred before). */
size_t nf_spec_lookup(const int *ctx, size_t n, int max_ngram, int *draft, size_t k);

/* The standard accept/reject rule (Leviathan et al., Chen et al., 2023)
 * for a draft token d drawn from q, p the target's distribution (n
 * probabilities each): keep d with probability min(1, p(d) / q(d)), else
 * draw from max(0, p - q) renormalised; either way the token emitted is
 * distributed as p, whatever q is.  u_keep, u_draw: uniform in [0, 1).
 * Returns the token emitted (d when *kept), NF_EINPUT for d outside [0, n).
 * The drafters here are deterministic, q a point mass at d: the rule is
 * then "keep d with probability p(d), else draw from p without d", which
 * nf_spec_verify carries out as one draw x from p, d kept when x == d. */
int nf_spec_accept(const float *p, const float *q, int n, int d, double u_keep, double u_draw,
		   int *kept);

/* The verification walk over rows[0, n_drafts] (vocab logits each, the
 * engine's rows for the pending token and the drafts; smp's transforms
 * overwrite them): a token drawn from row i is emitted, and the walk goes
 * on to row i + 1 while it equals drafts[i] and eog() (NULL: never) does
 * not end the answer.  out: room for n_drafts + 1; returns the count
 * emitted, *accepted the drafts kept. */
size_t nf_spec_verify(nf_sampler *smp, float *rows, int vocab, const int *drafts,
		      size_t n_drafts, int (*eog)(void *ctx, int token), void *eog_ctx, int *out,
		      size_t *accepted);

/* One sequence's speculative decoder over engine e. */
typedef struct nf_spec nf_spec;

int nf_spec_new(nf_spec **out, nf_engine *e, nf_seq *seq, const nf_spec_opts *o);
void nf_spec_free(nf_spec *s); /* NULL is fine */

/* The next tokens after ctx[0, n): seq has consumed ctx[0, n - 1) and
 * ctx[n - 1] is its next input.  Drafts, verifies in one pass, and writes
 * the tokens produced (1..k + 1, the last one the engine's own pick) to
 * out (room for NF_SPEC_MAX_K + 1), their count in *n_out.  Stops early
 * after a token that eog() says ends the answer (NULL: never) and never
 * passes max_seq_len. */
int nf_spec_next(nf_spec *s, const int *ctx, size_t n, nf_sampler *smp,
		 int (*eog)(void *ctx, int token), void *eog_ctx, int *out, size_t *n_out);

/* What s has done so far. */
nf_spec_stats nf_spec_get_stats(const nf_spec *s);

#endif
