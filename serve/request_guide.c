/*
 * request_guide.c - what a request constrains its answer to (request.h):
 * OpenAI's response_format (text, json_object, json_schema) and NIM's
 * nvext.guided_json, guided_regex and guided_choice, one at most.
 */
#include "serve/request.h"

#include <string.h>

#include "util/banned.h"

#define MAX_CHOICES 256

static int bad(nf_api_error *err, const char *param, const char *msg)
{
	nf_api_error_set(err, 400, "invalid_request_error", NULL, param, "%s", msg);
	return -1;
}

/* response_format: {"type": "text" | "json_object" | "json_schema",
 * "json_schema": {"name", "schema", "strict", "description"}}. */
static int response_format(nf_guide_spec *g, nf_api_error *err, json_t *v)
{
	const char *type = json_string_value(json_object_get(v, "type"));
	if (!json_is_object(v) || !type)
		return bad(err, "response_format", "'response_format' must be an object with a type");
	if (!strcmp(type, "text"))
		return 0;
	if (!strcmp(type, "json_object")) {
		g->kind = NF_GUIDE_JSON_OBJECT;
		return 0;
	}
	if (strcmp(type, "json_schema"))
		return bad(err, "response_format.type",
			   "'response_format.type' must be text, json_object or json_schema");
	json_t *js = json_object_get(v, "json_schema"), *schema = json_object_get(js, "schema");
	json_t *strict = json_object_get(js, "strict"), *name = json_object_get(js, "name");
	if (!json_is_object(js) || !json_is_string(name) || json_string_length(name) > 64)
		return bad(err, "response_format.json_schema",
			   "'response_format.json_schema' must be an object with a name of at most 64 "
			   "characters");
	if (strict && !json_is_boolean(strict) && !json_is_null(strict))
		return bad(err, "response_format.json_schema.strict", "'strict' must be a boolean");
	if (!json_is_object(schema))
		return bad(err, "response_format.json_schema.schema",
			   "'response_format.json_schema.schema' must be a JSON Schema object");
	g->kind = NF_GUIDE_SCHEMA;
	g->value = json_incref(schema);
	return 0;
}

/* guided_json: a schema, or a string holding one. */
static int guided_json(nf_guide_spec *g, nf_api_error *err, json_t *v)
{
	json_t *schema = json_is_string(v) ? json_loads(json_string_value(v), 0, NULL)
					   : json_incref(v);
	if (!json_is_object(schema)) {
		json_decref(schema);
		return bad(err, "nvext.guided_json",
			   "'nvext.guided_json' must be a JSON Schema object or a string holding one");
	}
	g->kind = NF_GUIDE_SCHEMA;
	g->value = schema;
	return 0;
}

static int guided_choice(nf_guide_spec *g, nf_api_error *err, json_t *v)
{
	size_t i, n = json_array_size(v);
	json_t *c;
	if (!json_is_array(v) || n == 0 || n > MAX_CHOICES)
		return bad(err, "nvext.guided_choice",
			   "'nvext.guided_choice' must be an array of 1 to 256 strings");
	json_array_foreach(v, i, c)
		if (!json_is_string(c) || json_string_length(c) == 0)
			return bad(err, "nvext.guided_choice",
				   "'nvext.guided_choice' must hold non-empty strings");
	g->kind = NF_GUIDE_CHOICE;
	g->value = json_incref(v);
	return 0;
}

/* nvext: NIM's extensions; the guided_* ones are read, one at most. */
static int nvext(nf_guide_spec *g, nf_api_error *err, json_t *v)
{
	const char *k;
	json_t *x;
	int given = 0, rc = 0;
	if (!json_is_object(v))
		return bad(err, "nvext", "'nvext' must be an object");
	json_object_foreach(v, k, x) {
		if (json_is_null(x))
			continue;
		if (given++)
			return bad(err, "nvext", "'nvext' may hold one guided_* field");
		if (!strcmp(k, "guided_json")) {
			rc = guided_json(g, err, x);
		} else if (!strcmp(k, "guided_regex")) {
			if (!json_is_string(x) || json_string_length(x) == 0)
				return bad(err, "nvext.guided_regex",
					   "'nvext.guided_regex' must be a non-empty string");
			g->kind = NF_GUIDE_REGEX;
			g->value = json_incref(x);
		} else if (!strcmp(k, "guided_choice")) {
			rc = guided_choice(g, err, x);
		} else {
			char param[64];
			snprintf(param, sizeof param, "nvext.%.50s", k);
			nf_api_error_set(err, 400, "invalid_request_error", NULL, param,
					 "unknown field 'nvext.%.100s' (guided_json, guided_regex, "
					 "guided_choice)", k);
			return -1;
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

int nf_serve_req_parse_guide(nf_guide_spec *g, nf_api_error *err, json_t *root)
{
	json_t *rf = json_object_get(root, "response_format"), *nv = json_object_get(root, "nvext");
	nf_guide_spec ext = {0};
	int rc = 0;
	*g = (nf_guide_spec){0};
	if (rf && !json_is_null(rf))
		rc = response_format(g, err, rf);
	if (rc >= 0 && nv && !json_is_null(nv))
		rc = nvext(&ext, err, nv);
	if (rc >= 0 && g->kind != NF_GUIDE_NONE && ext.kind != NF_GUIDE_NONE)
		rc = bad(err, "nvext", "'response_format' and 'nvext.guided_*' cannot both be given");
	if (rc >= 0 && ext.kind != NF_GUIDE_NONE) {
		*g = ext;
		ext = (nf_guide_spec){0};
	}
	nf_guide_spec_release(&ext);
	if (rc < 0)
		nf_guide_spec_release(g);
	return rc;
}
