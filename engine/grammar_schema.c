/*
 * grammar_schema.c - a JSON Schema into the grammar's NFA.  One function per
 * kind of schema; every error names the JSON pointer of the part at fault.
 *
 * What a schema compiles to is a subset of what it validates, chosen so that
 * every answer validates and ends: objects hold their declared properties in
 * declaration order (required ones always, optional ones or not), never
 * others; untyped values nest to max_depth; $ref recursion stops at
 * max_depth (the alternatives that would need more are dropped); number
 * bounds are rounded inward to integers; oneOf is compiled as anyOf (its
 * branches should not overlap).  docs/structured-output.md has the list.
 */
#include "engine/grammar_int.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

typedef struct sc {
	gr_json *j;
	const json_t *root;
	char path[512];
	size_t path_len;
	int ref_depth;
	int err;
} sc;

static gr_frag compile(sc *c, const json_t *s);

static gr_frag fail(sc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static gr_frag fail(sc *c, const char *fmt, ...)
{
	if (!c->err) {
		char what[256];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(what, sizeof what, fmt, ap);
		va_end(ap);
		c->err = nf_error_set(NF_EINPUT, "schema: %s: %s", c->path_len ? c->path : "/", what);
	}
	return gr_never(c->j->nfa);
}

/* Append "/token" (escaped as a JSON pointer) to the path; returns the old
 * length to restore.  A path too long to keep is cut with "...". */
static size_t push(sc *c, const char *token)
{
	size_t old = c->path_len, at = old;
	if (at + 1 < sizeof c->path)
		c->path[at++] = '/';
	for (const char *t = token; *t && at + 5 < sizeof c->path; t++) {
		if (*t == '~' || *t == '/') {
			c->path[at++] = '~';
			c->path[at++] = *t == '~' ? '0' : '1';
		} else {
			c->path[at++] = *t;
		}
	}
	c->path[at] = '\0';
	c->path_len = at;
	return old;
}

static size_t push_index(sc *c, size_t i)
{
	char num[24];
	snprintf(num, sizeof num, "%zu", i);
	return push(c, num);
}

static void pop(sc *c, size_t old)
{
	c->path_len = old;
	c->path[old] = '\0';
}

/* Validation keywords this compiler does not implement: a schema using one
 * is refused rather than answered with text that might not validate. */
static const char *const unsupported[] = {
	"patternProperties", "propertyNames", "minProperties", "maxProperties",
	"multipleOf", "uniqueItems", "contains", "minContains", "maxContains", "prefixItems",
	"additionalItems", "unevaluatedProperties", "unevaluatedItems", "not", "if", "then",
	"else", "dependentRequired", "dependentSchemas", "dependencies", "$dynamicRef",
	"$recursiveRef",
};

static bool check_keywords(sc *c, const json_t *s)
{
	for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++)
		if (json_object_get(s, unsupported[i])) {
			size_t old = push(c, unsupported[i]);
			fail(c, "the keyword %s is not supported", unsupported[i]);
			pop(c, old);
			return false;
		}
	return true;
}

/* A non-negative integer keyword (def when absent), at most 100000. */
static int count_of(sc *c, const json_t *s, const char *key, int def)
{
	const json_t *v = json_object_get(s, key);
	if (!v)
		return def;
	size_t old = push(c, key);
	int r = def;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 100000)
		fail(c, "%s must be an integer in [0, 100000]", key);
	else
		r = (int)json_integer_value(v);
	pop(c, old);
	return r;
}

/* ------------------------------------------------ literals */

static gr_frag literal_of(sc *c, const json_t *v)
{
	char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
	if (!text) {
		c->err = c->err ? c->err : nf_error_set(NF_ENOMEM, "schema: out of memory");
		return gr_never(c->j->nfa);
	}
	gr_frag f = gr_lit(c->j->nfa, text, strlen(text));
	free(text);
	return f;
}

static bool is_type(const json_t *v, const char *t)
{
	if (!strcmp(t, "integer"))
		return json_is_integer(v) || (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v));
	return (!strcmp(t, "number") && json_is_number(v)) || (!strcmp(t, "string") && json_is_string(v)) ||
	       (!strcmp(t, "boolean") && json_is_boolean(v)) || (!strcmp(t, "null") && json_is_null(v)) ||
	       (!strcmp(t, "object") && json_is_object(v)) || (!strcmp(t, "array") && json_is_array(v));
}

/* Whether an enum or const value also satisfies the schema's "type" (both
 * keywords apply; a value of another type would not validate). */
static bool of_type(const json_t *v, const json_t *type)
{
	size_t i;
	const json_t *t;
	if (!type)
		return true;
	if (json_is_string(type))
		return is_type(v, json_string_value(type));
	json_array_foreach(type, i, t)
		if (json_is_string(t) && is_type(v, json_string_value(t)))
			return true;
	return false;
}

static gr_frag compile_enum(sc *c, const json_t *e, const json_t *type)
{
	size_t old = push(c, "enum"), kept = 0;
	gr_frag f = gr_never(c->j->nfa);
	if (!json_is_array(e) || json_array_size(e) == 0)
		fail(c, "enum must be a non-empty array");
	for (size_t i = 0; i < json_array_size(e); i++) {
		const json_t *v = json_array_get(e, i);
		if (!of_type(v, type))
			continue;
		f = gr_alt(c->j->nfa, f, literal_of(c, v));
		kept++;
	}
	if (json_is_array(e) && kept == 0)
		fail(c, "no value is of the schema's type");
	pop(c, old);
	return f;
}

static gr_frag compile_const(sc *c, const json_t *v, const json_t *type)
{
	size_t old = push(c, "const");
	gr_frag f = of_type(v, type) ? literal_of(c, v) : fail(c, "the value is not of the schema's type");
	pop(c, old);
	return f;
}

/* ------------------------------------------------ numbers */

/* The integer bounds of a numeric schema, rounded inward; false on error. */
static bool int_bounds(sc *c, const json_t *s, int64_t *lo, int64_t *hi)
{
	double l = -(double)GR_INT_LIMIT, h = (double)GR_INT_LIMIT;
	static const char *const keys[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
	for (int k = 0; k < 4; k++) {
		const json_t *v = json_object_get(s, keys[k]);
		if (!v || json_is_boolean(v))
			continue;
		if (!json_is_number(v) || !isfinite(json_number_value(v))) {
			size_t old = push(c, keys[k]);
			fail(c, "%s must be a number", keys[k]);
			pop(c, old);
			return false;
		}
		double x = json_number_value(v);
		/* draft 4: exclusiveMinimum/Maximum true make minimum/maximum strict */
		bool strict = k % 2 == 1 || json_is_true(json_object_get(s, keys[k + 1]));
		if (k < 2)
			l = fmax(l, strict ? floor(x) + 1 : ceil(x));
		else
			h = fmin(h, strict ? ceil(x) - 1 : floor(x));
	}
	l = fmax(l, -(double)GR_INT_LIMIT);
	h = fmin(h, (double)GR_INT_LIMIT);
	if (l > h) {
		fail(c, "the bounds hold no integer (number bounds are rounded inward to integers)");
		return false;
	}
	*lo = (int64_t)l;
	*hi = (int64_t)h;
	return true;
}

static bool has_bounds(const json_t *s)
{
	return json_object_get(s, "minimum") || json_object_get(s, "maximum") ||
	       json_object_get(s, "exclusiveMinimum") || json_object_get(s, "exclusiveMaximum");
}

static gr_frag compile_integer(sc *c, const json_t *s)
{
	int64_t lo, hi;
	if (!int_bounds(c, s, &lo, &hi))
		return gr_never(c->j->nfa);
	return gr_json_int_range(c->j, lo, hi);
}

static gr_frag compile_number(sc *c, const json_t *s)
{
	int64_t lo, hi;
	if (!has_bounds(s))
		return gr_json_number(c->j);
	if (!int_bounds(c, s, &lo, &hi))
		return gr_never(c->j->nfa);
	return gr_json_number_range(c->j, lo, hi);
}

/* ------------------------------------------------ strings */

/* A string matching `pattern` (a search, as JSON Schema has it: the sides
 * without ^ or $ take any characters, max_string of them when set). */
static gr_frag compile_pattern(sc *c, const json_t *s, const json_t *pat)
{
	gr_nfa *n = c->j->nfa;
	size_t old = push(c, "pattern");
	gr_frag body = gr_never(n);
	if (!json_is_string(pat)) {
		fail(c, "pattern must be a string");
	} else if (json_object_get(s, "minLength") || json_object_get(s, "maxLength")) {
		fail(c, "pattern with minLength or maxLength is not supported");
	} else {
		const char *re = json_string_value(pat);
		size_t len = json_string_length(pat);
		int free_chars = c->j->max_string > 0 ? c->j->max_string : -1;
		int err = gr_regex_build_json(n, re, len, &body);
		if (err)
			c->err = nf_error_wrap(err, "schema: %s", c->path);
		if (!(len && re[0] == '^'))
			body = gr_cat(n, gr_repeat(n, gr_json_string_char, NULL, 0, free_chars), body);
		if (!(len && re[len - 1] == '$' && !(len >= 2 && re[len - 2] == '\\')))
			body = gr_cat(n, body, gr_repeat(n, gr_json_string_char, NULL, 0, free_chars));
	}
	pop(c, old);
	return gr_cat(n, gr_cat(n, gr_lit(n, "\"", 1), body), gr_lit(n, "\"", 1));
}

static gr_frag compile_string(sc *c, const json_t *s)
{
	const json_t *pat = json_object_get(s, "pattern");
	if (pat)
		return compile_pattern(c, s, pat);
	int min = count_of(c, s, "minLength", 0);
	int max = count_of(c, s, "maxLength", -1);
	if (max >= 0 && max < min)
		return fail(c, "maxLength is below minLength");
	if (max > 4096 || min > 4096)
		return fail(c, "string lengths above 4096 are not supported");
	return gr_json_string(c->j, min, max);
}

/* ------------------------------------------------ arrays */

typedef struct item_ctx {
	sc *c;
	const json_t *items; /* NULL: any value */
} item_ctx;

static gr_frag array_item(gr_nfa *n, void *p)
{
	item_ctx *x = p;
	if (!x->items)
		return gr_json_value(x->c->j, x->c->j->max_depth);
	size_t old = push(x->c, "items");
	gr_frag f = compile(x->c, x->items);
	pop(x->c, old);
	(void)n;
	return f;
}

static gr_frag comma(gr_nfa *n, void *p)
{
	item_ctx *x = p;
	return gr_cat(n, gr_lit(n, ",", 1), gr_json_ws(x->c->j));
}

static gr_frag compile_array(sc *c, const json_t *s)
{
	gr_nfa *n = c->j->nfa;
	const json_t *items = json_object_get(s, "items");
	if (items && !json_is_object(items) && !json_is_boolean(items)) {
		size_t old = push(c, "items");
		fail(c, "items must be a schema (tuple forms are not supported)");
		pop(c, old);
	}
	int min = count_of(c, s, "minItems", 0);
	int max = count_of(c, s, "maxItems", -1);
	if (max >= 0 && max < min)
		return fail(c, "maxItems is below minItems");
	if (max > 256 || min > 256)
		return fail(c, "array lengths above 256 are not supported");
	if (c->err)
		return gr_never(n);
	item_ctx x = {c, items};
	gr_frag f = gr_cat(n, gr_lit(n, "[", 1), gr_json_ws(c->j));
	f = gr_cat(n, f, gr_repeat_sep(n, array_item, &x, comma, min, max));
	f = gr_cat(n, f, gr_json_ws(c->j));
	return gr_cat(n, f, gr_lit(n, "]", 1));
}

/* ------------------------------------------------ objects */

static bool is_required(const json_t *required, const char *key)
{
	size_t i;
	const json_t *v;
	json_array_foreach(required, i, v)
		if (json_is_string(v) && !strcmp(json_string_value(v), key))
			return true;
	return false;
}

/* "key": value, one copy per property. */
static gr_frag member(sc *c, const char *key, const json_t *schema)
{
	gr_nfa *n = c->j->nfa;
	json_t *k = json_string(key);
	gr_frag f = literal_of(c, k);
	json_decref(k);
	f = gr_cat(n, gr_cat(n, f, gr_lit(n, ":", 1)), gr_json_ws(c->j));
	size_t old = push(c, key);
	f = gr_cat(n, f, compile(c, schema));
	pop(c, old);
	return f;
}

static bool check_required(sc *c, const json_t *props, const json_t *required)
{
	size_t i;
	const json_t *v;
	if (!required)
		return true;
	size_t old = push(c, "required");
	if (!json_is_array(required))
		fail(c, "required must be an array");
	json_array_foreach(required, i, v) {
		if (!json_is_string(v) || !json_object_get(props, json_string_value(v))) {
			size_t o2 = push_index(c, i);
			fail(c, "%s is not one of the declared properties",
			     json_is_string(v) ? json_string_value(v) : "a non-string");
			pop(c, o2);
		}
	}
	pop(c, old);
	return !c->err;
}

/* Declared properties in order.  none[i]/some[i]: before property i with no
 * member written yet / with one written (a comma needed). */
static void declared_members(sc *c, const json_t *props, const json_t *required, int32_t open,
			     int32_t close)
{
	gr_nfa *n = c->j->nfa;
	int32_t none = open, some = gr_state(n);
	const char *key;
	const json_t *schema;
	size_t old = push(c, "properties");
	json_object_foreach((json_t *)props, key, schema) {
		gr_frag m = member(c, key, schema);
		gr_frag sep = gr_cat(n, gr_lit(n, ",", 1), gr_json_ws(c->j));
		int32_t next_none = gr_state(n), next_some = gr_state(n);
		gr_eps(n, none, m.in);
		gr_eps(n, some, sep.in);
		gr_eps(n, sep.out, m.in);
		gr_eps(n, m.out, next_some);
		if (!is_required(required, key)) {
			gr_eps(n, none, next_none);
			gr_eps(n, some, next_some);
		}
		none = next_none;
		some = next_some;
	}
	pop(c, old);
	gr_eps(n, none, close);
	gr_eps(n, some, close);
}

typedef struct extra_ctx {
	sc *c;
	const json_t *values;
} extra_ctx;

static gr_frag extra_member(gr_nfa *n, void *p)
{
	extra_ctx *x = p;
	gr_frag f = gr_cat(n, gr_json_string(x->c->j, 0, -1), gr_lit(n, ":", 1));
	f = gr_cat(n, f, gr_json_ws(x->c->j));
	size_t old = push(x->c, "additionalProperties");
	f = gr_cat(n, f, compile(x->c, x->values));
	pop(x->c, old);
	return f;
}

static gr_frag extra_comma(gr_nfa *n, void *p)
{
	extra_ctx *x = p;
	return gr_cat(n, gr_lit(n, ",", 1), gr_json_ws(x->c->j));
}

static gr_frag compile_object(sc *c, const json_t *s)
{
	gr_nfa *n = c->j->nfa;
	const json_t *props = json_object_get(s, "properties");
	const json_t *required = json_object_get(s, "required");
	const json_t *extra = json_object_get(s, "additionalProperties");
	if (props && !json_is_object(props)) {
		size_t old = push(c, "properties");
		fail(c, "properties must be an object");
		pop(c, old);
		return gr_never(n);
	}
	if (!check_required(c, props, required))
		return gr_never(n);
	gr_frag open = gr_cat(n, gr_lit(n, "{", 1), gr_json_ws(c->j));
	gr_frag close = gr_cat(n, gr_json_ws(c->j), gr_lit(n, "}", 1));
	if (props && json_object_size(props) > 0) {
		declared_members(c, props, required, open.out, close.in);
	} else if (json_is_object(extra)) {
		extra_ctx x = {c, extra};
		gr_frag m = gr_repeat_sep(n, extra_member, &x, extra_comma, 0, -1);
		gr_eps(n, open.out, m.in);
		gr_eps(n, m.out, close.in);
	} else if (json_is_false(extra)) {
		gr_eps(n, open.out, close.in);
	} else {
		return gr_json_object(c->j, c->j->max_depth);
	}
	return (gr_frag){open.in, close.out};
}

/* ------------------------------------------------ composition */

static gr_frag compile_alternatives(sc *c, const json_t *list, const char *key)
{
	size_t old = push(c, key);
	gr_frag f = gr_never(c->j->nfa);
	if (!json_is_array(list) || json_array_size(list) == 0)
		fail(c, "%s must be a non-empty array", key);
	for (size_t i = 0; i < json_array_size(list) && !c->err; i++) {
		size_t o2 = push_index(c, i);
		f = gr_alt(c->j->nfa, f, compile(c, json_array_get(list, i)));
		pop(c, o2);
	}
	pop(c, old);
	return f;
}

/* "#", "#/$defs/name", "#/definitions/a~1b": a JSON pointer into the root. */
static const json_t *resolve(sc *c, const char *ref)
{
	if (ref[0] != '#')
		return NULL;
	const json_t *v = c->root;
	const char *p = ref + 1;
	while (v && *p == '/') {
		char tok[256];
		size_t k = 0;
		for (p++; *p && *p != '/'; p++) {
			char ch = *p;
			if (ch == '~' && (p[1] == '0' || p[1] == '1'))
				ch = *++p == '0' ? '~' : '/';
			if (k + 1 >= sizeof tok)
				return NULL;
			tok[k++] = ch;
		}
		tok[k] = '\0';
		if (json_is_array(v)) {
			char *end;
			unsigned long i = strtoul(tok, &end, 10);
			v = *end || !k ? NULL : json_array_get(v, i);
		} else {
			v = json_object_get(v, tok);
		}
	}
	return *p ? NULL : v;
}

static gr_frag compile_ref(sc *c, const json_t *ref)
{
	size_t old = push(c, "$ref");
	const json_t *target = json_is_string(ref) ? resolve(c, json_string_value(ref)) : NULL;
	gr_frag f;
	if (!target) {
		f = fail(c, "cannot resolve %s (only #/... pointers into this schema)",
			 json_is_string(ref) ? json_string_value(ref) : "a non-string");
	} else if (c->ref_depth >= c->j->max_depth) {
		/* the recursion bound: no string here, so the alternatives that
		 * recurse deeper are dropped when the NFA is finished */
		f = gr_never(c->j->nfa);
	} else {
		c->ref_depth++;
		f = compile(c, target);
		c->ref_depth--;
	}
	pop(c, old);
	return f;
}

/* ------------------------------------------------ types */

static gr_frag compile_type(sc *c, const json_t *s, const char *type)
{
	gr_nfa *n = c->j->nfa;
	if (!strcmp(type, "object"))
		return compile_object(c, s);
	if (!strcmp(type, "array"))
		return compile_array(c, s);
	if (!strcmp(type, "string"))
		return compile_string(c, s);
	if (!strcmp(type, "integer"))
		return compile_integer(c, s);
	if (!strcmp(type, "number"))
		return compile_number(c, s);
	if (!strcmp(type, "boolean"))
		return gr_alt(n, gr_lit(n, "true", 4), gr_lit(n, "false", 5));
	if (!strcmp(type, "null"))
		return gr_lit(n, "null", 4);
	size_t old = push(c, "type");
	fail(c, "unknown type %s", type);
	pop(c, old);
	return gr_never(n);
}

/* The type a schema without "type" implies by its keywords; NULL: any value. */
static const char *implied_type(const json_t *s)
{
	if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties") ||
	    json_object_get(s, "required"))
		return "object";
	if (json_object_get(s, "items") || json_object_get(s, "minItems") || json_object_get(s, "maxItems"))
		return "array";
	if (json_object_get(s, "minLength") || json_object_get(s, "maxLength") || json_object_get(s, "pattern"))
		return "string";
	if (has_bounds(s))
		return "number";
	return NULL;
}

static gr_frag compile_types(sc *c, const json_t *s)
{
	const json_t *type = json_object_get(s, "type");
	if (!type) {
		const char *t = implied_type(s);
		return t ? compile_type(c, s, t) : gr_json_value(c->j, c->j->max_depth);
	}
	if (json_is_string(type))
		return compile_type(c, s, json_string_value(type));
	gr_frag f = gr_never(c->j->nfa);
	if (!json_is_array(type) || json_array_size(type) == 0) {
		size_t old = push(c, "type");
		fail(c, "type must be a string or a non-empty array");
		pop(c, old);
	}
	for (size_t i = 0; i < json_array_size(type) && !c->err; i++) {
		const json_t *t = json_array_get(type, i);
		if (!json_is_string(t)) {
			size_t old = push(c, "type");
			fail(c, "type must name types as strings");
			pop(c, old);
			break;
		}
		f = gr_alt(c->j->nfa, f, compile_type(c, s, json_string_value(t)));
	}
	return f;
}

static gr_frag compile(sc *c, const json_t *s)
{
	if (c->err)
		return gr_never(c->j->nfa);
	if (json_is_true(s))
		return gr_json_value(c->j, c->j->max_depth);
	if (json_is_false(s))
		return gr_never(c->j->nfa);
	if (!json_is_object(s))
		return fail(c, "a schema must be an object or a boolean");
	if (!check_keywords(c, s))
		return gr_never(c->j->nfa);
	const json_t *v;
	if ((v = json_object_get(s, "$ref")))
		return compile_ref(c, v);
	if ((v = json_object_get(s, "allOf"))) {
		if (!json_is_array(v) || json_array_size(v) != 1) {
			size_t old = push(c, "allOf");
			fail(c, "allOf is supported with one schema only");
			pop(c, old);
			return gr_never(c->j->nfa);
		}
		return compile_alternatives(c, v, "allOf");
	}
	if ((v = json_object_get(s, "const")))
		return compile_const(c, v, json_object_get(s, "type"));
	if ((v = json_object_get(s, "enum")))
		return compile_enum(c, v, json_object_get(s, "type"));
	if ((v = json_object_get(s, "anyOf")))
		return compile_alternatives(c, v, "anyOf");
	if ((v = json_object_get(s, "oneOf")))
		return compile_alternatives(c, v, "oneOf");
	return compile_types(c, s);
}

int gr_schema_build(gr_json *j, const void *schema, gr_frag *out)
{
	sc c = {.j = j, .root = schema};
	*out = compile(&c, schema);
	return c.err ? c.err : j->nfa->err;
}
