/*
 * report_fixtures.h - hand-made gate results for the report writers' tests
 * (test_report_md.c, test_report_svg.c): profiles, results, cases and
 * metrics appended one by one, so a test states exactly what a build
 * measured.  Allocation failures abort the test: these are fixtures.
 */
#ifndef NF_TESTS_REPORT_FIXTURES_H
#define NF_TESTS_REPORT_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "factory/gates.h"
#include "util/fs.h"

static inline void *fx_grow(void *p, size_t n, size_t size)
{
	void *q = realloc(p, n * size);
	if (!q) {
		fprintf(stderr, "fixture: out of memory\n");
		abort();
	}
	memset((char *)q + (n - 1) * size, 0, size);
	return q;
}

/* A profile whose id is 64 copies of digit, as the planner's sha256 ids look. */
static inline nf_profile fx_profile(char digit, const char *name, const char *device, nf_precision prec)
{
	nf_profile p;
	memset(&p, 0, sizeof(p));
	memset(p.id, digit, 64);
	p.id[64] = '\0';
	snprintf(p.name, sizeof(p.name), "%s", name);
	snprintf(p.device, sizeof(p.device), "%s", device);
	p.precision = prec;
	p.is_gpu = strcmp(device, "cpu") != 0;
	return p;
}

/* A result appended to rs (owned by rs) with verdict v and reason (may be NULL). */
static inline nf_gate_result *fx_result(nf_gate_results *rs, const nf_profile *p, nf_gate_kind kind,
				 nf_verdict v, const char *reason)
{
	nf_gate_result *r = NULL;
	if (nf_gate_result_new(&r, p, kind) < 0 || (reason && nf_gate_set_reason(&r->reason, "%s", reason) < 0))
		abort();
	r->verdict = v;
	r->seconds = 0.25;
	if (nf_gate_results_add(rs, r) < 0)
		abort();
	return r;
}

/* A summary metric of r. */
static inline void fx_metric(nf_gate_result *r, const char *name, const char *unit, double value,
		      nf_gate_cmp cmp, double threshold)
{
	r->metrics = fx_grow(r->metrics, ++r->n_metrics, sizeof(*r->metrics));
	nf_gate_metric_set(&r->metrics[r->n_metrics - 1], name, unit, value, cmp, threshold);
}

/* A case of r with verdict v and reason (may be NULL). */
static inline nf_gate_case *fx_case(nf_gate_result *r, const char *name, nf_verdict v, const char *reason)
{
	r->cases = fx_grow(r->cases, ++r->n_cases, sizeof(*r->cases));
	nf_gate_case *c = &r->cases[r->n_cases - 1];
	c->name = strdup(name);
	c->verdict = v;
	c->first_mismatch = -1;
	c->seconds = 0.125;
	if (!c->name || (reason && nf_gate_set_reason(&c->reason, "%s", reason) < 0))
		abort();
	return c;
}

static inline void fx_case_metric(nf_gate_case *c, const char *name, const char *unit, double value,
			   nf_gate_cmp cmp, double threshold)
{
	c->metrics = fx_grow(c->metrics, ++c->n_metrics, sizeof(*c->metrics));
	nf_gate_metric_set(&c->metrics[c->n_metrics - 1], name, unit, value, cmp, threshold);
}

/* Today's gates: agreement per prompt, decode speed and peak memory. */
static inline void fx_today(nf_gate_results *rs, const nf_profile *p, double agreement, double tok_s,
		     double rss_mib)
{
	nf_gate_result *r = fx_result(rs, p, NF_GATE_CORRECTNESS, NF_VERDICT_PASSED, NULL);
	nf_gate_case *c = fx_case(r, "prompt 1: \"Once\"", NF_VERDICT_PASSED, NULL);
	fx_case_metric(c, "agreement", "ratio", agreement, NF_GATE_CMP_GE, 0.9);
	fx_metric(r, "agreement_min", "ratio", agreement, NF_GATE_CMP_GE, 0.9);
	r = fx_result(rs, p, NF_GATE_PERFORMANCE, NF_VERDICT_PASSED, NULL);
	c = fx_case(r, "decode throughput", NF_VERDICT_PASSED, NULL);
	fx_case_metric(c, "decode_tokens_per_s", "tokens/s", tok_s, NF_GATE_CMP_NONE, 0);
	fx_metric(r, "decode_tokens_per_s", "tokens/s", tok_s, NF_GATE_CMP_NONE, 0);
	fx_metric(r, "engine_peak_rss_mib", "MiB", rss_mib, NF_GATE_CMP_LE, 256);
}

/* Run tests/report_check.py KIND [count] on text, written to dir/name, with
 * the venv's Python (NF_SRC/build/venv, as the e2e tests use it): -1 when it
 * cannot run here (no NF_SRC, no venv, or the validator's library missing),
 * else 0 (valid) or 1. */
static inline int fx_report_check(const char *dir, const char *name, const char *text, const char *kind,
				  int count)
{
	const char *src = getenv("NF_SRC");
	const char *lib = strcmp(kind, "json") == 0 ? "jsonschema" : strcmp(kind, "junit") == 0 ? "xmlschema" : "xml";
	char *py = src ? nf_strdup_printf("%s/build/venv/bin/python", src) : NULL;
	char *path = nf_path_join(dir, name), *cmd = NULL;
	char *probe = py ? nf_strdup_printf("'%s' -c 'import %s' 2>/dev/null", py, lib) : NULL;
	int rc = -1;

	if (py && path && probe && access(py, X_OK) == 0 && system(probe) == 0 &&
	    nf_fs_write_atomic(path, text, strlen(text), 0644) == 0) {
		cmd = count >= 0 ? nf_strdup_printf("'%s' '%s/tests/report_check.py' %s '%s' %d", py, src,
						    kind, path, count)
				 : nf_strdup_printf("'%s' '%s/tests/report_check.py' %s '%s'", py, src, kind, path);
		rc = cmd ? (system(cmd) == 0 ? 0 : 1) : -1;
	}
	free(py);
	free(path);
	free(cmd);
	free(probe);
	return rc;
}

#endif
