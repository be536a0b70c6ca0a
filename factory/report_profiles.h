/*
 * report_profiles.h - gate results seen by profile, for the reports that
 * have one row or one point per profile (report.c's JSON and JUnit,
 * report_md.c's table, report_svg.c's chart): which results belong to one
 * profile, and a profile's value of a metric wherever its gates recorded it.
 * Everything is borrowed from the nf_gate_results it was read from.
 */
#ifndef NF_FACTORY_REPORT_PROFILES_H
#define NF_FACTORY_REPORT_PROFILES_H

#include <stdbool.h>
#include <stddef.h>

#include "factory/gates.h"

/* Same profile: by id when either has one, else by name. */
bool nf_report_same_profile(const nf_gate_result *a, const nf_gate_result *b);
/* Whether rs->items[i] is the first result of its profile. */
bool nf_report_first_of_profile(const nf_gate_results *rs, size_t i);

/* How many gates of rs have each verdict, indexed by nf_verdict. */
#define NF_REPORT_VERDICTS 4 /* pending, passed, failed, skipped */
void nf_report_gate_counts(size_t counts[NF_REPORT_VERDICTS], const nf_gate_results *rs);

typedef struct nf_report_profile {
	const nf_gate_result *first; /* its first result: id, name, device, precision */
	nf_verdict verdict;          /* over all its gates */
} nf_report_profile;

/* The distinct profiles of rs in the order first seen: *out a new array
 * (caller frees; NULL when there are none), *n its length. */
int nf_report_profiles(nf_report_profile **out, size_t *n, const nf_gate_results *rs);

/* The metric `name` of profile p: from the summary metrics of its gates
 * first, in order, then from their cases' metrics; NULL when none of its
 * gates measured it (absent, as opposed to a NaN value). */
const nf_gate_metric *nf_report_profile_metric(const nf_gate_results *rs, const nf_gate_result *p,
					       const char *name);

/* The first of names (NULL-terminated) that any profile of rs has; NULL if
 * none has any.  Decides a column or axis once for every profile, so one
 * column never mixes two metrics. */
const char *nf_report_first_metric_present(const nf_gate_results *rs, const char *const *names);

#endif
