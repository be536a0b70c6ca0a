/*
 * spec_gov.h - whether speculative decoding pays on this host, learnt while
 * serving.  Drafting only pays when k draft steps and a verification of
 * k + 1 rows cost less than the tokens they produce would cost one step at
 * a time: a draft profile whose step is not several times cheaper than the
 * model's (int4 drafting for int8 on a CPU where both are bound by the same
 * overheads) makes decoding slower.  So the scheduler times its
 * decode-only steps, with drafts and without, as seconds per token emitted
 * (the drafting included), per batch-size class, and drafts when that is
 * cheaper; every NF_SPEC_GOV_PROBE steps it tries the other way once, so
 * that an estimate gone stale (the load, how predictable the text is) is
 * renewed.  Speculation never changes the tokens (engine/speculative.h),
 * only what they cost.
 */
#ifndef NF_SERVE_SPEC_GOV_H
#define NF_SERVE_SPEC_GOV_H

#include <stdint.h>

#define NF_SPEC_GOV_PROBE 16      /* steps before the first try of the way not taken */
#define NF_SPEC_GOV_PROBE_MAX 512 /* and at most between two tries */
#define NF_SPEC_GOV_CLASSES 4 /* decoding sequences: 1, 2-3, 4-7, 8 or more */
#define NF_SPEC_GOV_DECAY 0.9 /* weight of the older steps when one is added */

typedef struct nf_spec_gov {
	/* decayed sums of seconds and of tokens emitted, [class][0 without
	 * drafts, 1 with] */
	double seconds[NF_SPEC_GOV_CLASSES][2], tokens[NF_SPEC_GOV_CLASSES][2];
	int choice[NF_SPEC_GOV_CLASSES];   /* 1 drafting, 0 not, -1 not chosen yet */
	int trying[NF_SPEC_GOV_CLASSES];   /* the next step added is a try */
	unsigned interval[NF_SPEC_GOV_CLASSES], since_probe[NF_SPEC_GOV_CLASSES];
	uint64_t paused_steps; /* decoding steps run without drafts because they were cheaper */
} nf_spec_gov;

void nf_spec_gov_init(nf_spec_gov *g);

/* The batch-size class of n_decode decoding sequences, 0..NF_SPEC_GOV_CLASSES - 1. */
int nf_spec_gov_class(int n_decode);

/* 1 when the next decoding step of n_decode sequences should draft:
 * first each way is measured (drafting first), then the cheaper one is
 * taken and the other tried ever more rarely while the choice stands. */
int nf_spec_gov_draft(nf_spec_gov *g, int n_decode);

/* A decode-only step of n_decode sequences, with drafts (drafted 1) or
 * without, took `seconds` (its drafting included) and emitted `tokens`. */
void nf_spec_gov_add(nf_spec_gov *g, int n_decode, int drafted, double seconds, int tokens);

/* Seconds per token emitted with drafts (drafted 1) or without, for
 * n_decode sequences; 0 while not measured. */
double nf_spec_gov_cost(const nf_spec_gov *g, int n_decode, int drafted);

#endif
