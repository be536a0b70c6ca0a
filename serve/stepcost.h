/*
 * stepcost.h - what a forward step costs, learnt while serving: the time of
 * a step of n tokens fitted as a + b*n by least squares over the recent
 * steps (older ones forgotten exponentially, so the fit follows the machine
 * and the context lengths).  a is what every step pays (reading the
 * weights: large when decode is memory-bound), b what each token adds.
 *
 * The scheduler sizes the prompt chunks a step carries with it: a step
 * with n_decode decoding sequences may add p prompt tokens as long as
 *     a + b*(n_decode + p) <= (1 + slack) * (a + b*n_decode),
 * i.e. p <= slack * (a/b + n_decode): the decoding sequences' inter-token
 * latency grows by at most `slack` while a prompt is prefilled.  When the
 * weights dominate (a/b large) that allows big chunks; when the batch is
 * compute-bound it keeps them small.
 */
#ifndef NF_SERVE_STEPCOST_H
#define NF_SERVE_STEPCOST_H

typedef struct nf_stepcost {
	double w, n, t, nn, nt; /* decayed sums of 1, n, t, n*n, n*t */
} nf_stepcost;

/* Weight of the previous observations when a new one arrives. */
#define NF_STEPCOST_DECAY 0.97

/* Record a step of `tokens` tokens that took `seconds`. */
void nf_stepcost_add(nf_stepcost *c, int tokens, double seconds);

/* The fit (seconds, seconds per token); 0 while it is not determined: too
 * few steps, steps all of one size, or a fit that is not a + b*n with
 * a >= 0 and b > 0. */
int nf_stepcost_fit(const nf_stepcost *c, double *a, double *b);

/* Prompt tokens a step with n_decode decoding sequences may carry (the
 * bound above, at least 1); -1 while the fit is not determined. */
int nf_stepcost_prompt_budget(const nf_stepcost *c, int n_decode, double slack);

#endif
