/* gate_metrics.c - teacher-forced top-1, KL and perplexity (see gate_metrics.h). */
#include "factory/gate_metrics.h"

#include <math.h>

#include "util/banned.h"

double nf_log_sum_exp(const float *x, int n)
{
	double max = -INFINITY, sum = 0;
	for (int i = 0; i < n; i++) {
		if (isnan(x[i]) || x[i] == INFINITY)
			return NAN;
		if (x[i] > max)
			max = x[i];
	}
	if (max == -INFINITY)
		return -INFINITY;
	for (int i = 0; i < n; i++)
		sum += exp((double)x[i] - max); /* exp(-inf) = 0 */
	return max + log(sum);
}

/* Index of the first maximal logit (greedy decoding's choice). */
static int first_argmax(const float *x, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

static int all_finite(const float *x, int n)
{
	for (int i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return 0;
	return 1;
}

/* KL(p || q) with p = softmax(r), q = softmax(e): sum p_i ((r_i - lse_r) - (e_i - lse_e)). */
static double kl_divergence(const float *r, double lse_r, const float *e, double lse_e, int n)
{
	double kl = 0;
	for (int i = 0; i < n; i++) {
		double lp = (double)r[i] - lse_r;
		double p = exp(lp);
		if (p > 0)
			kl += p * (lp - ((double)e[i] - lse_e));
	}
	/* rounding can leave a tiny negative sum for identical distributions */
	return kl > 0 ? kl : 0.0;
}

void nf_tf_add(nf_tf_acc *a, const float *ref_logits, const float *eng_logits, int vocab,
	       int target)
{
	double lse_r = nf_log_sum_exp(ref_logits, vocab);
	int top_e = first_argmax(eng_logits, vocab), top_r = first_argmax(ref_logits, vocab);

	a->positions++;
	a->nll_ref_sum += lse_r - (double)ref_logits[target];
	if (!all_finite(eng_logits, vocab)) {
		/* a broken kernel: infinitely far from the reference */
		a->kl_sum = INFINITY;
		a->nll_sum = INFINITY;
		return;
	}
	if (ref_logits[top_e] == ref_logits[top_r])
		a->agree++;
	double lse_e = nf_log_sum_exp(eng_logits, vocab);
	a->nll_sum += lse_e - (double)eng_logits[target];
	a->kl_sum += kl_divergence(ref_logits, lse_r, eng_logits, lse_e, vocab);
}

void nf_tf_finish(const nf_tf_acc *a, nf_tf_metrics *m)
{
	double n = (double)a->positions;
	if (a->positions == 0) {
		*m = (nf_tf_metrics){0};
		return;
	}
	m->top1_agreement = (double)a->agree / n;
	m->kl_mean = a->kl_sum / n;
	m->perplexity = exp(a->nll_sum / n);
	m->perplexity_ref = exp(a->nll_ref_sum / n);
	m->ppl_ratio = isfinite(m->perplexity) && m->perplexity > 0 ? m->perplexity_ref / m->perplexity
								     : 0.0;
}

void nf_tf_merge(nf_tf_acc *a, const nf_tf_acc *b)
{
	a->kl_sum += b->kl_sum;
	a->nll_sum += b->nll_sum;
	a->nll_ref_sum += b->nll_ref_sum;
	a->agree += b->agree;
	a->positions += b->positions;
}
