/* stage_gates.c - gate results saved as a stage result and read back (see stage_gates.h). */
#define _GNU_SOURCE
#include "factory/stage_gates.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* A saved results file is a few KiB; anything far larger is not ours. */
#define STAGE_GATES_MAX_BYTES ((size_t)16 << 20)
/* Bounds on what a saved file may hold, checked before allocating. */
#define STAGE_GATES_MAX_ITEMS 4096

static json_t *jnum(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *jstr_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *metrics_to_json(const nf_gate_metric *m, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++) {
		json_t *o = json_pack("{s:s, s:s, s:o, s:i, s:o, s:b}", "name", m[i].name, "unit",
				      m[i].unit, "value", jnum(m[i].value), "cmp", (int)m[i].cmp,
				      "threshold", jnum(m[i].threshold), "ok", m[i].ok);
		if (!o || json_array_append_new(a, o)) {
			json_decref(a);
			a = NULL;
		}
	}
	return a;
}

static json_t *case_to_json(const nf_gate_case *c)
{
	return json_pack("{s:s, s:o, s:i, s:o, s:o, s:i, s:i, s:i, s:o}", "name", c->name ? c->name : "",
			 "prompt", jstr_or_null(c->prompt), "verdict", (int)c->verdict, "reason",
			 jstr_or_null(c->reason), "seconds", jnum(c->seconds), "prompt_tokens",
			 c->prompt_tokens, "positions", c->positions, "first_mismatch",
			 c->first_mismatch, "metrics", metrics_to_json(c->metrics, c->n_metrics));
}

static json_t *result_to_json(const nf_gate_result *r)
{
	json_t *cases = json_array();
	for (size_t i = 0; cases && i < r->n_cases; i++) {
		json_t *c = case_to_json(&r->cases[i]);
		if (!c || json_array_append_new(cases, c)) {
			json_decref(cases);
			cases = NULL;
		}
	}
	return json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:o, s:o, s:o, s:o}", "profile_id",
			 r->profile_id, "profile_name", r->profile_name, "device", r->device,
			 "precision", r->precision, "kind", (int)r->kind, "verdict", (int)r->verdict,
			 "reason", jstr_or_null(r->reason), "seconds", jnum(r->seconds), "metrics",
			 metrics_to_json(r->metrics, r->n_metrics), "cases", cases);
}

int nf_stage_gates_save(const char *path, const nf_gate_results *rs, const char *profile_id)
{
	json_t *a = json_array();
	char *text = NULL;
	int err = 0;
	for (size_t i = 0; a && i < rs->n; i++) {
		if (strcmp(rs->items[i]->profile_id, profile_id))
			continue;
		json_t *r = result_to_json(rs->items[i]);
		if (!r || json_array_append_new(a, r)) {
			json_decref(a);
			a = NULL;
		}
	}
	if (!a || !(text = json_dumps(a, JSON_COMPACT | JSON_REAL_PRECISION(17))))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	else
		err = nf_fs_write_atomic(path, text, strlen(text), 0644);
	json_decref(a);
	free(text);
	return err;
}

/* A number saved by jnum: null is NaN. */
static double num_of(const json_t *j)
{
	return json_is_number(j) ? json_number_value(j) : NAN;
}

/* A string field copied (NULL stays NULL for null); -1 out of memory or not a string. */
static int str_of(char **dst, const json_t *j, int nullable)
{
	*dst = NULL;
	if (nullable && (!j || json_is_null(j)))
		return 0;
	if (!json_is_string(j) || !(*dst = strdup(json_string_value(j))))
		return -1;
	return 0;
}

/* An integer field within [lo, hi]; -1 otherwise. */
static int int_of(int *dst, const json_t *j, int lo, int hi)
{
	if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > hi)
		return -1;
	*dst = (int)json_integer_value(j);
	return 0;
}

static int metrics_of(nf_gate_metric **out, size_t *n, const json_t *a)
{
	size_t count = json_array_size(a);
	*out = NULL;
	*n = 0;
	if (!json_is_array(a) || count > STAGE_GATES_MAX_ITEMS)
		return -1;
	if (count && !(*out = calloc(count, sizeof(**out))))
		return -1;
	*n = count;
	for (size_t i = 0; i < count; i++) {
		const json_t *m = json_array_get(a, i);
		const json_t *name = json_object_get(m, "name"), *unit = json_object_get(m, "unit");
		int cmp;
		if (!json_is_string(name) || !json_is_string(unit) ||
		    int_of(&cmp, json_object_get(m, "cmp"), NF_GATE_CMP_NONE, NF_GATE_CMP_LE) ||
		    !json_is_boolean(json_object_get(m, "ok")))
			return -1;
		nf_gate_metric_set(&(*out)[i], json_string_value(name), json_string_value(unit),
				   num_of(json_object_get(m, "value")), (nf_gate_cmp)cmp,
				   num_of(json_object_get(m, "threshold")));
		(*out)[i].ok = json_is_true(json_object_get(m, "ok")); /* as it was decided */
	}
	return 0;
}

static int case_of(nf_gate_case *c, const json_t *j)
{
	int verdict;
	if (str_of(&c->name, json_object_get(j, "name"), 0) ||
	    str_of(&c->prompt, json_object_get(j, "prompt"), 1) ||
	    str_of(&c->reason, json_object_get(j, "reason"), 1) ||
	    int_of(&verdict, json_object_get(j, "verdict"), NF_VERDICT_PENDING, NF_VERDICT_SKIPPED) ||
	    int_of(&c->prompt_tokens, json_object_get(j, "prompt_tokens"), 0, 1 << 30) ||
	    int_of(&c->positions, json_object_get(j, "positions"), 0, 1 << 30) ||
	    int_of(&c->first_mismatch, json_object_get(j, "first_mismatch"), -1, 1 << 30))
		return -1;
	c->verdict = (nf_verdict)verdict;
	c->seconds = num_of(json_object_get(j, "seconds"));
	return metrics_of(&c->metrics, &c->n_metrics, json_object_get(j, "metrics"));
}

/* One result from its JSON into r (a fresh nf_gate_result_new). */
static int result_of(nf_gate_result *r, const json_t *j)
{
	const json_t *cases = json_object_get(j, "cases");
	int kind, verdict;
	if (str_of(&r->reason, json_object_get(j, "reason"), 1) ||
	    int_of(&kind, json_object_get(j, "kind"), NF_GATE_CORRECTNESS, NF_GATE_PERFORMANCE) ||
	    int_of(&verdict, json_object_get(j, "verdict"), NF_VERDICT_PENDING, NF_VERDICT_SKIPPED) ||
	    !json_is_array(cases) || json_array_size(cases) > STAGE_GATES_MAX_ITEMS)
		return -1;
	r->kind = (nf_gate_kind)kind;
	r->verdict = (nf_verdict)verdict;
	r->seconds = num_of(json_object_get(j, "seconds"));
	if (metrics_of(&r->metrics, &r->n_metrics, json_object_get(j, "metrics")))
		return -1;
	if (json_array_size(cases) &&
	    !(r->cases = calloc(json_array_size(cases), sizeof(*r->cases))))
		return -1;
	for (size_t i = 0; i < json_array_size(cases); i++) {
		r->n_cases = i + 1; /* freed with r, filled or not */
		if (case_of(&r->cases[i], json_array_get(cases, i)))
			return -1;
	}
	return 0;
}

/* The names a result is matched by: replace those nf_gate_result_new copied. */
static int names_of(nf_gate_result *r, const json_t *j)
{
	static const char *const keys[] = {"profile_id", "profile_name", "device", "precision"};
	char **fields[] = {&r->profile_id, &r->profile_name, &r->device, &r->precision};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		free(*fields[i]);
		if (str_of(fields[i], json_object_get(j, keys[i]), 0))
			return -1;
	}
	return 0;
}

int nf_stage_gates_load(nf_gate_results *rs, const char *path)
{
	char *text = NULL;
	size_t len;
	json_t *a = NULL;
	size_t before = rs->n;
	int err = nf_fs_read_file(&text, &len, path, STAGE_GATES_MAX_BYTES);
	if (err)
		return err;
	a = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_array(a) || json_array_size(a) > STAGE_GATES_MAX_ITEMS)
		err = nf_error_set(NF_EINPUT, "%s: not a saved gate result", path);
	for (size_t i = 0; !err && i < json_array_size(a); i++) {
		nf_gate_result *r = NULL;
		if ((err = nf_gate_result_new(&r, NULL, NF_GATE_CORRECTNESS)))
			break;
		if (names_of(r, json_array_get(a, i)) || result_of(r, json_array_get(a, i))) {
			nf_gate_result_free(r);
			err = nf_error_set(NF_EINPUT, "%s: result %zu is damaged", path, i);
		} else {
			err = nf_gate_results_add(rs, r);
		}
	}
	while (err && rs->n > before) /* all or nothing */
		nf_gate_result_free(rs->items[--rs->n]);
	while (err && rs->n > before) /* all or nothing */
		nf_gate_result_free(rs->items[--rs->n]);
	json_decref(a);
	free(text);
	return err;
}
