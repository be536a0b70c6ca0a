/*
 * spec_gov.c - the speculation governor of spec_gov.h.
 */
#include "serve/spec_gov.h"

#include <math.h>
#include <string.h>

#include "util/banned.h"

void nf_spec_gov_init(nf_spec_gov *g)
{
	memset(g, 0, sizeof *g);
	for (int c = 0; c < NF_SPEC_GOV_CLASSES; c++) {
		g->choice[c] = -1;
		g->interval[c] = NF_SPEC_GOV_PROBE;
	}
}

int nf_spec_gov_class(int n_decode)
{
	int c = 0;
	while (c + 1 < NF_SPEC_GOV_CLASSES && n_decode >= 2 << c)
		c++;
	return c;
}

double nf_spec_gov_cost(const nf_spec_gov *g, int n_decode, int drafted)
{
	int c = nf_spec_gov_class(n_decode), d = drafted != 0;
	return g->tokens[c][d] > 0.0 ? g->seconds[c][d] / g->tokens[c][d] : 0.0;
}

int nf_spec_gov_draft(nf_spec_gov *g, int n_decode)
{
	int c = nf_spec_gov_class(n_decode);
	double with = nf_spec_gov_cost(g, n_decode, 1), without = nf_spec_gov_cost(g, n_decode, 0);
	if (with == 0.0)
		return 1;
	if (without == 0.0)
		return 0;
	int cheaper = with <= without;
	if (cheaper != g->choice[c]) { /* a new choice is tried against soon */
		g->choice[c] = cheaper;
		g->interval[c] = NF_SPEC_GOV_PROBE;
		g->since_probe[c] = 0;
	}
	if (++g->since_probe[c] >= g->interval[c]) {
		g->since_probe[c] = 0;
		if (g->interval[c] < NF_SPEC_GOV_PROBE_MAX)
			g->interval[c] *= 2;
		g->trying[c] = 1;
		return !cheaper;
	}
	g->paused_steps += !cheaper;
	return cheaper;
}

void nf_spec_gov_add(nf_spec_gov *g, int n_decode, int drafted, double seconds, int tokens)
{
	int c = nf_spec_gov_class(n_decode), d = drafted != 0;
	if (n_decode < 1 || tokens < 1 || !(seconds >= 0.0) || !isfinite(seconds))
		return;
	/* a try cheaper than the choice's estimate: try again soon */
	if (g->trying[c] && d != g->choice[c] &&
	    seconds / tokens < nf_spec_gov_cost(g, n_decode, g->choice[c]))
		g->interval[c] = NF_SPEC_GOV_PROBE;
	g->trying[c] = 0;
	g->seconds[c][d] = g->seconds[c][d] * NF_SPEC_GOV_DECAY + seconds;
	g->tokens[c][d] = g->tokens[c][d] * NF_SPEC_GOV_DECAY + (double)tokens;
}
