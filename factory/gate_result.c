/* gate_result.c - gate results, metrics and the list of results (see gates.h). */
#include "factory/gates.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

const char *nf_gate_kind_name(nf_gate_kind k)
{
	return k == NF_GATE_PERFORMANCE ? "performance" : "correctness";
}

const char *nf_gate_cmp_symbol(nf_gate_cmp c)
{
	return c == NF_GATE_CMP_GE ? ">=" : c == NF_GATE_CMP_LE ? "<=" : "";
}

static void copy_trunc(char *dst, size_t size, const char *src)
{
	size_t n = src ? strlen(src) : 0;
	if (n >= size)
		n = size - 1;
	if (n)
		memcpy(dst, src, n);
	dst[n] = '\0';
}

void nf_gate_metric_set(nf_gate_metric *m, const char *name, const char *unit, double value,
			nf_gate_cmp cmp, double threshold)
{
	memset(m, 0, sizeof(*m));
	copy_trunc(m->name, sizeof(m->name), name);
	copy_trunc(m->unit, sizeof(m->unit), unit);
	m->value = value;
	m->cmp = cmp;
	m->threshold = cmp == NF_GATE_CMP_NONE ? 0.0 : threshold;
	/* NaN never passes a bound. */
	if (cmp == NF_GATE_CMP_GE)
		m->ok = value >= threshold;
	else if (cmp == NF_GATE_CMP_LE)
		m->ok = value <= threshold;
	else
		m->ok = true;
}

static void case_release(nf_gate_case *c)
{
	free(c->name);
	free(c->prompt);
	free(c->reason);
	free(c->metrics);
	memset(c, 0, sizeof(*c));
}

void nf_gate_result_free(nf_gate_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_cases; i++)
		case_release(&r->cases[i]);
	free(r->cases);
	free(r->metrics);
	free(r->profile_id);
	free(r->profile_name);
	free(r->device);
	free(r->precision);
	free(r->reason);
	free(r);
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

int nf_gate_result_new(nf_gate_result **out, const nf_profile *p, nf_gate_kind kind)
{
	nf_gate_result *r = NULL;
	const char *device = p ? p->device : "";
	const char *prec = p ? nf_precision_name(p->precision) : "";

	*out = NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return nf_error_set(NF_ENOMEM, "out of memory for a gate result");
	r->kind = kind;
	r->verdict = NF_VERDICT_PASSED;
	r->profile_id = dup_or_empty(p ? p->id : NULL);
	if (!prec)
		prec = "";
	r->device = strdup(device);
	r->precision = strdup(prec);
	if (p && p->name[0])
		r->profile_name = strdup(p->name);
	else
		r->profile_name = nf_strdup_printf("%s-%s", device, prec);
	if (!r->profile_id || !r->device || !r->precision || !r->profile_name) {
		nf_gate_result_free(r);
		return nf_error_set(NF_ENOMEM, "out of memory for a gate result");
	}
	*out = r;
	return 0;
}

int nf_gate_set_reason(char **dst, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	free(*dst);
	*dst = strdup(buf);
	return *dst ? 0 : nf_error_set(NF_ENOMEM, "out of memory for a gate reason");
}

int nf_gate_skipped(nf_gate_result **out, const nf_profile *profile, nf_gate_kind kind,
		    const char *reason)
{
	nf_gate_result *r = NULL;
	int rc = nf_gate_result_new(&r, profile, kind);
	if (rc < 0)
		return rc;
	r->verdict = NF_VERDICT_SKIPPED;
	rc = nf_gate_set_reason(&r->reason, "%s", reason ? reason : "not run");
	if (rc < 0) {
		nf_gate_result_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

const char *nf_gate_gpu_skip_reason(void)
{
	/* Even with a GPU present this build has no CUDA backend to run it. */
	if (access("/dev/nvidiactl", F_OK) == 0)
		return "GPU present but this build has no CUDA backend";
	return "no GPU on this machine";
}

void nf_gate_results_init(nf_gate_results *rs) { memset(rs, 0, sizeof(*rs)); }

int nf_gate_results_add(nf_gate_results *rs, nf_gate_result *r)
{
	if (!r)
		return nf_error_set(NF_EINTERNAL, "adding a NULL gate result");
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 8, bytes;
		nf_gate_result **items;
		if (!nf_size_mul(&bytes, cap, sizeof(*items))) {
			nf_gate_result_free(r);
			return nf_error_set(NF_ENOMEM, "too many gate results");
		}
		items = realloc(rs->items, bytes);
		if (!items) {
			nf_gate_result_free(r);
			return nf_error_set(NF_ENOMEM, "out of memory for gate results");
		}
		rs->items = items;
		rs->cap = cap;
	}
	rs->items[rs->n++] = r;
	return 0;
}

void nf_gate_results_release(nf_gate_results *rs)
{
	if (!rs)
		return;
	for (size_t i = 0; i < rs->n; i++)
		nf_gate_result_free(rs->items[i]);
	free(rs->items);
	nf_gate_results_init(rs);
}

/* Failed wins; then a skipped gate (one that did not run is never passed);
 * passed only when every gate ran and passed; no gates at all: skipped. */
static nf_verdict combine(nf_verdict acc, nf_verdict v)
{
	if (acc == NF_VERDICT_FAILED || v == NF_VERDICT_FAILED)
		return NF_VERDICT_FAILED;
	if (acc == NF_VERDICT_SKIPPED || v == NF_VERDICT_SKIPPED)
		return NF_VERDICT_SKIPPED;
	return NF_VERDICT_PASSED;
}

nf_verdict nf_gate_results_verdict(const nf_gate_results *rs)
{
	nf_verdict acc = NF_VERDICT_PENDING;
	for (size_t i = 0; rs && i < rs->n; i++)
		acc = acc == NF_VERDICT_PENDING ? rs->items[i]->verdict : combine(acc, rs->items[i]->verdict);
	return acc == NF_VERDICT_PENDING ? NF_VERDICT_SKIPPED : acc;
}

nf_verdict nf_gate_results_profile_verdict(const nf_gate_results *rs, const char *profile_id,
					   const char *profile_name)
{
	nf_verdict acc = NF_VERDICT_PENDING;
	for (size_t i = 0; rs && i < rs->n; i++) {
		const nf_gate_result *r = rs->items[i];
		bool match = (profile_id && *profile_id) ? strcmp(r->profile_id, profile_id) == 0
							 : profile_name && strcmp(r->profile_name, profile_name) == 0;
		if (match)
			acc = acc == NF_VERDICT_PENDING ? r->verdict : combine(acc, r->verdict);
	}
	return acc == NF_VERDICT_PENDING ? NF_VERDICT_SKIPPED : acc;
}
