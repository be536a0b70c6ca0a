/*
 * softmax.h - softmax with a running maximum (online softmax): a state
 * (m, l) is the largest score seen and the sum of e^(score - m) over the
 * scores seen.  A state absorbs one score at a time (a decode split walking
 * its positions), and two states merge (flash-decoding's final reduction
 * over the splits), each side's weighted output sum rescaled by the weight
 * merge returns.  After the last score, softmax(x_i) = e^(x_i - m) / l.
 */
#ifndef NF_KMATH_SOFTMAX_H
#define NF_KMATH_SOFTMAX_H

#include "engine/kmath/kmath.h"

typedef struct nf_km_softmax {
	float m; /* largest score so far; -INFINITY before the first */
	float l; /* sum of e^(score - m) */
} nf_km_softmax;

NF_KM nf_km_softmax nf_km_softmax_empty(void)
{
	nf_km_softmax s = {-INFINITY, 0.0f};
	return s;
}

/* e^(from - to), 0 for an empty side (from = -inf): never NaN. */
NF_KM float nf_km_softmax_rescale(float from, float to)
{
	return from == -INFINITY ? 0.0f : expf(from - to);
}

/* Absorb score x; *old_weight is what the output sum so far must be
 * multiplied by, *x_weight the weight of x's value (e^(x - new m)). */
NF_KM void nf_km_softmax_push(nf_km_softmax *s, float x, float *old_weight, float *x_weight)
{
	float m = x > s->m ? x : s->m;
	*old_weight = nf_km_softmax_rescale(s->m, m);
	*x_weight = expf(x - m);
	s->l = s->l * *old_weight + *x_weight;
	s->m = m;
}

/* The state of a and b together; *wa and *wb rescale the output sums of a
 * and b before they are added. */
NF_KM nf_km_softmax nf_km_softmax_merge(nf_km_softmax a, nf_km_softmax b, float *wa, float *wb)
{
	nf_km_softmax s;
	s.m = a.m > b.m ? a.m : b.m;
	*wa = nf_km_softmax_rescale(a.m, s.m);
	*wb = nf_km_softmax_rescale(b.m, s.m);
	s.l = a.l * *wa + b.l * *wb;
	return s;
}

/* 1 / l, the factor that turns a merged output sum into the weighted
 * average (0 for an empty state). */
NF_KM float nf_km_softmax_norm(nf_km_softmax s) { return s.l > 0.0f ? 1.0f / s.l : 0.0f; }

#endif
