/*
 * sampling.h - top-k / top-p selection on a candidate list: keeping the k
 * best (logit, token) pairs in order, the temperature softmax over them, the
 * nucleus cut (the smallest prefix whose mass exceeds top_p, as
 * engine/generate.c's sampler cuts), and the draw from what is left by a
 * uniform coin.  A GPU sampler keeps a list per thread, merges the lists,
 * and runs the rest on one thread: the list is short.
 */
#ifndef NF_KMATH_SAMPLING_H
#define NF_KMATH_SAMPLING_H

#include "engine/kmath/kmath.h"

/* Whether (va, ia) ranks before (vb, ib): the larger value, the lower token
 * on a tie (generate.c's order); a NaN never ranks before anything. */
NF_KM int nf_km_ranks_before(float va, int ia, float vb, int ib)
{
	return va > vb || (va == vb && ia < ib);
}

/* Insert (v, i) into the list val/idx of *n entries, best first, kept to
 * at most k entries (a candidate below the k-th is dropped). */
NF_KM void nf_km_topk_insert(float *val, int *idx, int *n, int k, float v, int i)
{
	int at = *n;
	if (k <= 0 || v != v)
		return;
	if (at == k) {
		if (!nf_km_ranks_before(v, i, val[k - 1], idx[k - 1]))
			return;
		at = k - 1; /* the last one drops out */
	} else {
		(*n)++;
	}
	for (; at > 0 && nf_km_ranks_before(v, i, val[at - 1], idx[at - 1]); at--) {
		val[at] = val[at - 1];
		idx[at] = idx[at - 1];
	}
	val[at] = v;
	idx[at] = i;
}

/* val[0..n) (sorted, best first) into probabilities of temperature t > 0,
 * in place: e^((v - v0) / t) / sum. */
NF_KM void nf_km_sample_softmax(float *val, int n, float t)
{
	float top = val[0], sum = 0.0f;
	for (int i = 0; i < n; i++) {
		val[i] = expf((val[i] - top) / t);
		sum += val[i];
	}
	for (int i = 0; i < n; i++)
		val[i] /= sum;
}

/* The last position kept by top_p over probabilities p[0..n) best first:
 * the first i whose running sum exceeds top_p (n - 1 when none does); *mass
 * is the sum up to it. */
NF_KM int nf_km_sample_topp_last(const float *p, int n, float top_p, float *mass)
{
	float cum = 0.0f;
	for (int i = 0; i < n; i++) {
		cum += p[i];
		if (cum > top_p) {
			*mass = cum;
			return i;
		}
	}
	*mass = cum;
	return n - 1;
}

/* The position drawn from p[0..last] (of total mass `mass`) by a coin in
 * [0, 1): the first whose running sum passes coin * mass. */
NF_KM int nf_km_sample_pick(const float *p, int last, float mass, float coin)
{
	float r = coin * mass, cdf = 0.0f;
	for (int i = 0; i <= last; i++) {
		cdf += p[i];
		if (r < cdf)
			return i;
	}
	return last;
}

#endif
