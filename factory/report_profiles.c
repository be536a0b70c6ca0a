/* report_profiles.c - gate results grouped by profile, metrics looked up per profile (see report_profiles.h). */
#include "factory/report_profiles.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

bool nf_report_same_profile(const nf_gate_result *a, const nf_gate_result *b)
{
	if (a->profile_id[0] || b->profile_id[0])
		return strcmp(a->profile_id, b->profile_id) == 0;
	return strcmp(a->profile_name, b->profile_name) == 0;
}

bool nf_report_first_of_profile(const nf_gate_results *rs, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (nf_report_same_profile(rs->items[j], rs->items[i]))
			return false;
	return true;
}

void nf_report_gate_counts(size_t counts[NF_REPORT_VERDICTS], const nf_gate_results *rs)
{
	memset(counts, 0, NF_REPORT_VERDICTS * sizeof(counts[0]));
	for (size_t i = 0; i < rs->n; i++)
		if ((unsigned)rs->items[i]->verdict < NF_REPORT_VERDICTS)
			counts[rs->items[i]->verdict]++;
}

int nf_report_profiles(nf_report_profile **out, size_t *n, const nf_gate_results *rs)
{
	*out = NULL;
	*n = 0;
	if (rs->n == 0)
		return 0;
	/* At most one profile per result. */
	nf_report_profile *ps = calloc(rs->n, sizeof(*ps));
	if (!ps)
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (size_t i = 0; i < rs->n; i++) {
		const nf_gate_result *r = rs->items[i];
		if (!nf_report_first_of_profile(rs, i))
			continue;
		ps[*n].first = r;
		ps[*n].verdict = nf_gate_results_profile_verdict(rs, r->profile_id, r->profile_name);
		(*n)++;
	}
	*out = ps;
	return 0;
}

static const nf_gate_metric *find_metric(const nf_gate_metric *m, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(m[i].name, name) == 0)
			return &m[i];
	return NULL;
}

const nf_gate_metric *nf_report_profile_metric(const nf_gate_results *rs, const nf_gate_result *p,
					       const char *name)
{
	const nf_gate_metric *m;
	/* A gate's summary speaks for the profile (agreement_min over the
	 * prompts); a case's metric only when no summary has it. */
	for (size_t i = 0; i < rs->n; i++)
		if (nf_report_same_profile(rs->items[i], p) &&
		    (m = find_metric(rs->items[i]->metrics, rs->items[i]->n_metrics, name)))
			return m;
	for (size_t i = 0; i < rs->n; i++) {
		const nf_gate_result *r = rs->items[i];
		if (!nf_report_same_profile(r, p))
			continue;
		for (size_t c = 0; c < r->n_cases; c++)
			if ((m = find_metric(r->cases[c].metrics, r->cases[c].n_metrics, name)))
				return m;
	}
	return NULL;
}

const char *nf_report_first_metric_present(const nf_gate_results *rs, const char *const *names)
{
	for (size_t k = 0; names[k]; k++)
		for (size_t i = 0; i < rs->n; i++)
			if (nf_report_profile_metric(rs, rs->items[i], names[k]))
				return names[k];
	return NULL;
}
