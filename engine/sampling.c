/*
 * sampling.c - the logit transforms of sampling.h, one function each, and
 * the log-softmax helpers logprobs are read with.
 */
#include "engine/sampling.h"

#include <math.h>
#include <string.h>

#include "util/banned.h"

void nf_sampling_apply_penalties(float *logits, int n, const int *counts, const uint32_t *seen,
				 const nf_sampling_params *p)
{
	int additive = p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
	int repetition = p->repetition_penalty != 1.0f && p->repetition_penalty > 0.0f;
	if (!additive && !repetition)
		return;
	for (int i = 0; i < n; i++) {
		int c = counts ? counts[i] : 0;
		if (repetition && (c > 0 || (seen && nf_mask_has(seen, i))))
			logits[i] = logits[i] > 0 ? logits[i] / p->repetition_penalty
						  : logits[i] * p->repetition_penalty;
		if (c > 0)
			logits[i] -= p->presence_penalty + p->frequency_penalty * (float)c;
	}
}

void nf_sampling_apply_bias(float *logits, int n, const nf_logit_bias *bias, size_t n_bias)
{
	for (size_t i = 0; i < n_bias; i++)
		if (bias[i].token >= 0 && bias[i].token < n)
			logits[bias[i].token] += bias[i].bias;
}

/* The k-th largest (0-based rank k) of x[0, n), reordering x: quickselect
 * with a median-of-three pivot. */
static float kth_largest(float *x, int n, int k)
{
	int lo = 0, hi = n - 1;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		float a = x[lo], b = x[mid], c = x[hi];
		float pivot = a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
		int i = lo, j = hi;
		while (i <= j) {
			while (x[i] > pivot)
				i++;
			while (x[j] < pivot)
				j--;
			if (i <= j) {
				float t = x[i];
				x[i++] = x[j];
				x[j--] = t;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return x[k];
	}
	return x[k];
}

void nf_sampling_top_k(float *logits, int n, int k, float *scratch)
{
	if (k <= 0 || k >= n)
		return;
	memcpy(scratch, logits, (size_t)n * sizeof *scratch);
	for (int i = 0; i < n; i++) /* NaN never survives a comparison: rank it last */
		if (isnan(scratch[i]))
			scratch[i] = -INFINITY;
	float kth = kth_largest(scratch, n, k - 1);
	for (int i = 0; i < n; i++)
		if (!(logits[i] >= kth))
			logits[i] = -INFINITY;
}

void nf_sampling_min_p(float *logits, int n, float min_p, float temperature)
{
	if (!(min_p > 0.0f) || !(temperature > 0.0f))
		return;
	float max = -INFINITY;
	for (int i = 0; i < n; i++)
		if (logits[i] > max)
			max = logits[i];
	float floor_logit = max + temperature * logf(min_p);
	for (int i = 0; i < n; i++)
		if (!(logits[i] >= floor_logit))
			logits[i] = -INFINITY;
}

float nf_sampling_logsumexp(const float *logits, int n)
{
	float max = -INFINITY;
	double sum = 0.0;
	for (int i = 0; i < n; i++)
		if (logits[i] > max)
			max = logits[i];
	if (max == -INFINITY)
		return -INFINITY;
	for (int i = 0; i < n; i++)
		if (logits[i] > -INFINITY)
			sum += exp((double)logits[i] - (double)max);
	return max + (float)log(sum);
}

/* NaN ranks below everything, as it never wins nf_argmax. */
static float rank_of(float v)
{
	return isnan(v) ? -INFINITY : v;
}

int nf_sampling_top_ids(const float *logits, int n, int k, int *ids)
{
	int m = 0;
	if (k > NF_SAMPLING_MAX_TOP)
		k = NF_SAMPLING_MAX_TOP;
	if (k > n)
		k = n;
	if (k <= 0)
		return 0;
	/* insertion into ids[0, m), kept in descending order; an equal logit
	 * ranks after the ones already there (lower id first) */
	for (int i = 0; i < n; i++) {
		float v = rank_of(logits[i]);
		if (m == k && !(v > rank_of(logits[ids[k - 1]])))
			continue;
		int at = m < k ? m++ : k - 1;
		while (at > 0 && v > rank_of(logits[ids[at - 1]])) {
			ids[at] = ids[at - 1];
			at--;
		}
		ids[at] = i;
	}
	return m;
}
