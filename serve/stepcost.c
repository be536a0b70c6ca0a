/*
 * stepcost.c - the step-time model of stepcost.h.
 */
#include "serve/stepcost.h"

#include <math.h>

#include "util/banned.h"

void nf_stepcost_add(nf_stepcost *c, int tokens, double seconds)
{
	double n = (double)tokens;
	if (tokens <= 0 || !(seconds >= 0.0) || !isfinite(seconds))
		return;
	c->w = c->w * NF_STEPCOST_DECAY + 1.0;
	c->n = c->n * NF_STEPCOST_DECAY + n;
	c->t = c->t * NF_STEPCOST_DECAY + seconds;
	c->nn = c->nn * NF_STEPCOST_DECAY + n * n;
	c->nt = c->nt * NF_STEPCOST_DECAY + n * seconds;
}

int nf_stepcost_fit(const nf_stepcost *c, double *a, double *b)
{
	/* the weighted variance of n, relative: below this every step had
	 * (nearly) one size and the slope says nothing */
	double var = c->w * c->nn - c->n * c->n;
	if (c->w < 8.0 || var <= 1e-6 * c->w * c->nn)
		return 0;
	double slope = (c->w * c->nt - c->n * c->t) / var;
	double icept = (c->t - slope * c->n) / c->w;
	if (!(slope > 0.0) || !isfinite(slope) || !isfinite(icept))
		return 0;
	*a = icept > 0.0 ? icept : 0.0;
	*b = slope;
	return 1;
}

int nf_stepcost_prompt_budget(const nf_stepcost *c, int n_decode, double slack)
{
	double a, b;
	if (!nf_stepcost_fit(c, &a, &b))
		return -1;
	double p = slack * (a / b + (double)n_decode);
	if (!(p >= 1.0))
		return 1;
	return p > 1e6 ? 1000000 : (int)p;
}
