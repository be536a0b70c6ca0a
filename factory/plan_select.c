/* plan_select.c - a plan narrowed to one profile, for `build --profile` (see plan.h). */
#include "factory/plan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

/* "a, b, c": the plan's profile names, for the error message. */
static void profile_names(char *buf, size_t size, const nf_plan *p)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < p->n_profiles; i++) {
		int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", p->profiles[i].name);
		if (n < 0 || (size_t)n >= size - used)
			break;
		used += (size_t)n;
	}
}

/* Keep only profile k, moved to index 0. */
static void keep_profile(nf_plan *p, size_t k)
{
	for (size_t i = 0; i < p->n_profiles; i++)
		if (i != k)
			nf_profile_release(&p->profiles[i]);
	if (k)
		p->profiles[0] = p->profiles[k];
	p->n_profiles = 1;
}

/* Keep the stages of no profile and of profile k (now 0), renumbering their
 * deps through new_index (n_stages entries; SIZE_MAX for a stage that goes;
 * deps always name earlier stages). */
static void keep_stages(nf_plan *p, int k, size_t *new_index)
{
	size_t n = 0;

	for (size_t i = 0; i < p->n_stages; i++) {
		nf_stage s = p->stages[i];
		new_index[i] = SIZE_MAX;
		if (s.kind == NF_STAGE_PACKAGE || (s.profile >= 0 && s.profile != k))
			continue;
		size_t nd = 0;
		for (size_t d = 0; d < s.n_deps; d++)
			if (new_index[s.deps[d]] != SIZE_MAX)
				s.deps[nd++] = new_index[s.deps[d]];
		s.n_deps = nd;
		if (s.profile >= 0)
			s.profile = 0;
		new_index[i] = n;
		p->stages[n++] = s;
	}
	p->n_stages = n;
}

int nf_plan_select_profile(nf_plan *p, const char *name)
{
	for (size_t k = 0; k < p->n_profiles; k++) {
		if (strcmp(p->profiles[k].name, name))
			continue;
		size_t *new_index = calloc(p->n_stages ? p->n_stages : 1, sizeof(*new_index));
		if (!new_index)
			return nf_error_set(NF_ENOMEM, "plan: out of memory");
		keep_stages(p, (int)k, new_index);
		keep_profile(p, k);
		free(new_index);
		return 0;
	}
	char list[1024];
	profile_names(list, sizeof(list), p);
	return nf_error_set(NF_EINPUT, "--profile %.96s: the plan has no such profile; it has: %s",
			    name, list);
}
