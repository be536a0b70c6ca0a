/*
 * jinja_filters.c - the filters ("x | trim") and tests ("x is defined")
 * chat templates use, each with jinja2's meaning, and tojson as transformers
 * replaces it (json.dumps with ensure_ascii=False, so no HTML escaping).
 * One table of filters and one of tests: a name not in them is an error at
 * render time, as in jinja2.
 */
#include "engine/jinja_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

typedef int (*filter_fn)(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names,
			 size_t nargs, nf_jv **out);

#define ARG(pos, name) nf_jarg(args, names, nargs, pos, name)

static int str_of(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **out)
{
	*out = nf_jv_to_str(c, v);
	return *out ? 0 : nf_jerr_mem(c, at);
}

static int done(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **out)
{
	*out = v;
	return v ? 0 : nf_jerr_mem(c, at);
}

/* The items of a list, the keys of a dict, the characters of a string; undefined is empty. */
static int items_of(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **out)
{
	nf_jv *l = nf_jv_new(c, JV_LIST);
	if (v->kind == JV_LIST)
		return done(c, at, v, out);
	if (!l)
		return nf_jerr_mem(c, at);
	if (v->kind == JV_DICT) {
		for (size_t i = 0; i < v->u.d.n; i++)
			if (nf_jv_push(c, l, v->u.d.k[i]))
				return nf_jerr_mem(c, at);
	} else if (v->kind == JV_STR) {
		for (size_t i = 0, k; i < v->u.s.n; i += k) {
			k = nf_utf8_offset(v->u.s.p + i, v->u.s.n - i, 1);
			if (nf_jv_push(c, l, nf_jv_str(c, v->u.s.p + i, k)))
				return nf_jerr_mem(c, at);
		}
	} else if (v->kind != JV_UNDEF) {
		return nf_jerr(c, at, "'%s' object is not iterable", nf_jv_type_name(v));
	}
	*out = l;
	return 0;
}

/* x.a.b or x[0] as the attribute= of map, selectattr and join. */
static nf_jv *attr_path(nf_jctx *c, nf_jv *v, const nf_jv *path)
{
	if (path->kind == JV_INT)
		return v->kind == JV_LIST && path->u.i >= 0 && (size_t)path->u.i < v->u.l.n ? v->u.l.v[path->u.i]
											    : nf_jv_undef(c, "item");
	const char *p = path->u.s.p, *end = p + path->u.s.n;
	while (v && p <= end) {
		const char *dot = memchr(p, '.', (size_t)(end - p));
		size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
		nf_jv *next = v->kind == JV_DICT || v->kind == JV_NS ? nf_jv_dict_get(v, p, n) : NULL;
		v = next ? next : nf_jv_undef(c, "attribute");
		p += n + 1;
	}
	return v;
}

static int f_trim(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names, size_t nargs,
		  nf_jv **out)
{
	nf_jv *s = NULL, *chars = ARG(0, "chars");
	int err = str_of(c, at, v, &s);
	if (err)
		return err;
	if (chars && chars->kind != JV_NONE && chars->kind != JV_STR)
		return nf_jerr(c, at, "trim's chars must be a string");
	return nf_jstrip(c, s, chars, true, true, out) ? nf_jerr_mem(c, at) : 0;
}

static int f_length(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names,
		    size_t nargs, nf_jv **out)
{
	size_t n;
	switch (v->kind) {
	case JV_UNDEF: n = 0; break;
	case JV_STR: n = nf_utf8_count(v->u.s.p, v->u.s.n); break;
	case JV_LIST: n = v->u.l.n; break;
	case JV_DICT:
	case JV_NS: n = v->u.d.n; break;
	default: return nf_jerr(c, at, "object of type '%s' has no len()", nf_jv_type_name(v));
	}
	return done(c, at, nf_jv_int(c, (long long)n), out);
}

static int f_tojson(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names,
		    size_t nargs, nf_jv **out)
{
	nf_jv *ascii = ARG(0, "ensure_ascii"), *indent = ARG(1, "indent"), *seps = ARG(2, "separators"),
	      *sort = ARG(3, "sort_keys");
	nf_jjson_opts o = {.ensure_ascii = ascii && nf_jv_truthy(ascii), .sort_keys = sort && nf_jv_truthy(sort),
			   .indent = -1, .item_sep = ", ", .key_sep = ": "};
	if (indent && indent->kind != JV_NONE) {
		if (indent->kind != JV_INT || indent->u.i > 64)
			return nf_jerr(c, at, "tojson's indent must be an integer up to 64");
		o.indent = indent->u.i < 0 ? 0 : (long)indent->u.i; /* json.dumps: a negative indent is 0 */
		o.item_sep = ",";
	}
	if (seps && seps->kind != JV_NONE) {
		if (seps->kind != JV_LIST || seps->u.l.n != 2 || seps->u.l.v[0]->kind != JV_STR ||
		    seps->u.l.v[1]->kind != JV_STR)
			return nf_jerr(c, at, "tojson's separators must be two strings");
		o.item_sep = nf_jarena_strdup(&c->arena, seps->u.l.v[0]->u.s.p, seps->u.l.v[0]->u.s.n);
		o.key_sep = nf_jarena_strdup(&c->arena, seps->u.l.v[1]->u.s.p, seps->u.l.v[1]->u.s.n);
		if (!o.item_sep || !o.key_sep)
			return nf_jerr_mem(c, at);
	}
	nf_jbuf b = {.c = c};
	const char *bad = NULL;
	if (nf_jv_write_json(&b, v, &o, 0, &bad))
		return nf_jerr(c, at, "Object of type %s is not JSON serializable", bad);
	if (b.too_deep)
		return nf_jerr(c, at, "value nested more than %zu deep", c->lim.max_depth);
	if (b.failed || !(*out = nf_jv_new(c, JV_STR)))
		return nf_jerr_mem(c, at);
	(*out)->u.s.p = b.p ? b.p : "";
	(*out)->u.s.n = b.n;
	return 0;
}

static int casing(nf_jctx *c, const nf_jnode *at, nf_jv *v, char mode, nf_jv **out)
{
	nf_jv *s = NULL;
	int err = str_of(c, at, v, &s);
	return err ? err : done(c, at, nf_jcase(c, s, mode), out);
}

static int f_upper(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names, size_t nargs,
		   nf_jv **out)
{
	return casing(c, at, v, 'u', out);
}

static int f_lower(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names, size_t nargs,
		   nf_jv **out)
{
	return casing(c, at, v, 'l', out);
}

static int f_capitalize(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names,
			size_t nargs, nf_jv **out)
{
	return casing(c, at, v, 'c', out);
}

static int f_title(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names, size_t nargs,
		   nf_jv **out)
{
	return casing(c, at, v, 'j', out);
}

static int first_last(nf_jctx *c, const nf_jnode *at, nf_jv *v, bool last, nf_jv **out)
{
	nf_jv *l = NULL;
	int err = items_of(c, at, v, &l);
	if (err)
		return err;
	if (!l->u.l.n)
		return done(c, at, nf_jv_undef(c, last ? "last item" : "first item"), out);
	return done(c, at, l->u.l.v[last ? l->u.l.n - 1 : 0], out);
}

static int f_first(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names, size_t nargs,
		   nf_jv **out)
{
	return first_last(c, at, v, false, out);
}

static int f_last(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names, size_t nargs,
		  nf_jv **out)
{
	return first_last(c, at, v, true, out);
}

static int f_join(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names, size_t nargs,
		  nf_jv **out)
{
	nf_jv *l = NULL, *sep = ARG(0, "d"), *attr = ARG(1, "attribute"), *s = NULL;
	nf_jbuf b = {.c = c};
	int err = items_of(c, at, v, &l);
	if (!err && sep)
		err = str_of(c, at, sep, &sep);
	for (size_t i = 0; !err && i < l->u.l.n; i++) {
		nf_jv *item = attr ? attr_path(c, l->u.l.v[i], attr) : l->u.l.v[i];
		if (!item || !(s = nf_jv_to_str(c, item)))
			return nf_jerr_mem(c, at);
		if (i && sep)
			nf_jbuf_add(&b, sep->u.s.p, sep->u.s.n);
		nf_jbuf_add(&b, s->u.s.p, s->u.s.n);
	}
	if (err)
		return err;
	if (b.failed || !(*out = nf_jv_new(c, JV_STR)))
		return nf_jerr_mem(c, at);
	(*out)->u.s.p = b.p ? b.p : "";
	(*out)->u.s.n = b.n;
	return 0;
}

static int f_default(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names,
		     size_t nargs, nf_jv **out)
{
	nf_jv *def = ARG(0, "default_value"), *boolean = ARG(1, "boolean");
	bool use = v->kind == JV_UNDEF || (boolean && nf_jv_truthy(boolean) && !nf_jv_truthy(v));
	if (use && !def)
		return done(c, at, nf_jv_str(c, "", 0), out);
	return done(c, at, use ? def : v, out);
}

static int f_string(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names,
		    size_t nargs, nf_jv **out)
{
	return str_of(c, at, v, out);
}

/* Python's int() of a string: optional sign, digits and underscores, surrounding whitespace. */
static bool parse_int(const nf_jv *s, long long *out)
{
	char buf[64];
	size_t n = 0;
	const char *p = s->u.s.p, *end = p + s->u.s.n;
	while (p < end && strchr(" \t\n\r\f\v", *p) && *p)
		p++;
	while (end > p && strchr(" \t\n\r\f\v", end[-1]) && end[-1])
		end--;
	for (; p < end && n + 1 < sizeof(buf); p++)
		if (*p != '_')
			buf[n++] = *p;
	if (p != end || n == 0)
		return false;
	buf[n] = '\0';
	char *stop = NULL;
	errno = 0;
	*out = strtoll(buf, &stop, 10);
	return *stop == '\0' && errno == 0 && (buf[0] != '+' && buf[0] != '-' ? buf[0] >= '0' && buf[0] <= '9' : n > 1);
}

static bool parse_float(const nf_jv *s, double *out)
{
	char buf[128];
	if (s->u.s.n == 0 || s->u.s.n >= sizeof(buf))
		return false;
	memcpy(buf, s->u.s.p, s->u.s.n);
	buf[s->u.s.n] = '\0';
	char *stop = NULL;
	*out = strtod(buf, &stop);
	while (*stop && strchr(" \t\n\r\f\v", *stop))
		stop++;
	return stop != buf && *stop == '\0';
}

static int f_int(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names, size_t nargs,
		 nf_jv **out)
{
	nf_jv *def = ARG(0, "default");
	long long i = 0;
	double f = 0;
	if (v->kind == JV_INT || v->kind == JV_BOOL)
		i = v->kind == JV_INT ? v->u.i : v->u.b;
	else if (v->kind == JV_FLOAT && fabs(v->u.f) < 9.2e18)
		i = (long long)v->u.f;
	else if (v->kind == JV_STR && parse_int(v, &i))
		;
	else if (v->kind == JV_STR && parse_float(v, &f) && fabs(f) < 9.2e18)
		i = (long long)f;
	else
		return done(c, at, def ? def : nf_jv_int(c, 0), out);
	return done(c, at, nf_jv_int(c, i), out);
}

static int f_float(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names, size_t nargs,
		   nf_jv **out)
{
	nf_jv *def = ARG(0, "default");
	double f = 0;
	if (v->kind == JV_INT || v->kind == JV_BOOL || v->kind == JV_FLOAT)
		f = v->kind == JV_FLOAT ? v->u.f : (double)(v->kind == JV_INT ? v->u.i : v->u.b);
	else if (!(v->kind == JV_STR && parse_float(v, &f)))
		return done(c, at, def ? def : nf_jv_float(c, 0), out);
	return done(c, at, nf_jv_float(c, f), out);
}

static int f_replace(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names,
		     size_t nargs, nf_jv **out)
{
	nf_jv *s = NULL, *old = ARG(0, "old"), *new_ = ARG(1, "new"), *count = ARG(2, "count");
	int err = str_of(c, at, v, &s);
	if (!err && old)
		err = str_of(c, at, old, &old);
	if (!err && new_)
		err = str_of(c, at, new_, &new_);
	if (err)
		return err;
	if (!old || !new_)
		return nf_jerr(c, at, "replace needs the old and the new text");
	long long n = count && count->kind == JV_INT ? count->u.i : -1;
	return nf_jreplace(c, s, old, new_, n, out) ? nf_jerr_mem(c, at) : 0;
}

static int f_list(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names, size_t nargs,
		  nf_jv **out)
{
	return items_of(c, at, v, out);
}

static int f_items(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names, size_t nargs,
		   nf_jv **out)
{
	if (v->kind == JV_UNDEF)
		return done(c, at, nf_jv_new(c, JV_LIST), out);
	if (v->kind != JV_DICT)
		return nf_jerr(c, at, "Can only get item pairs from a mapping.");
	return done(c, at, nf_jitems(c, v), out);
}

static int f_reverse(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names,
		     size_t nargs, nf_jv **out)
{
	nf_jv *l = NULL, *r = nf_jv_new(c, JV_LIST);
	int err = items_of(c, at, v, &l);
	if (err)
		return err;
	for (size_t i = l->u.l.n; r && i > 0; i--)
		if (nf_jv_push(c, r, l->u.l.v[i - 1]))
			r = NULL;
	if (r && v->kind == JV_STR) { /* a string reverses to a string */
		nf_jv *sep = nf_jv_str(c, "", 0), *one[1] = {r};
		return sep ? nf_jcall_builtin(c, at, nf_jmethod(c, sep, "join"), one, NULL, 1, out) : nf_jerr_mem(c, at);
	}
	return done(c, at, r, out);
}

static int f_safe(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names, size_t nargs,
		  nf_jv **out)
{
	return done(c, at, v, out);
}

static int f_abs(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names, size_t nargs,
		 nf_jv **out)
{
	if (v->kind == JV_INT && v->u.i != (-9223372036854775807LL - 1))
		return done(c, at, nf_jv_int(c, v->u.i < 0 ? -v->u.i : v->u.i), out);
	if (v->kind == JV_FLOAT)
		return done(c, at, nf_jv_float(c, fabs(v->u.f)), out);
	return nf_jerr(c, at, "bad operand type for abs(): '%s'", nf_jv_type_name(v));
}

/* jinja2's indent: every line but the first (unless first=True) and blank ones (unless blank=True). */
static int f_indent(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names,
		    size_t nargs, nf_jv **out)
{
	nf_jv *s = NULL, *width = ARG(0, "width"), *first = ARG(1, "first"), *blank = ARG(2, "blank");
	nf_jbuf ind = {.c = c}, b = {.c = c};
	int err = str_of(c, at, v, &s);
	if (err)
		return err;
	if (width && width->kind == JV_STR)
		nf_jbuf_add(&ind, width->u.s.p, width->u.s.n);
	else
		for (long long i = 0; i < (width && width->kind == JV_INT ? width->u.i : 4) && i < 256; i++)
			nf_jbuf_adds(&ind, " ");
	if (first && nf_jv_truthy(first))
		nf_jbuf_add(&b, ind.p, ind.n);
	for (size_t i = 0, line = 0; i < s->u.s.n; line++) {
		const char *nl = memchr(s->u.s.p + i, '\n', s->u.s.n - i);
		size_t len = nl ? (size_t)(nl - s->u.s.p) - i : s->u.s.n - i;
		if (line)
			nf_jbuf_adds(&b, "\n");
		if (line && (len || (blank && nf_jv_truthy(blank))))
			nf_jbuf_add(&b, ind.p, ind.n);
		nf_jbuf_add(&b, s->u.s.p + i, len);
		i += len + 1;
		if (nl && i == s->u.s.n && blank && nf_jv_truthy(blank)) /* "a\n": the empty last line */
			nf_jbuf_add(&b, "\n", 1), nf_jbuf_add(&b, ind.p, ind.n);
		else if (nl && i == s->u.s.n)
			nf_jbuf_add(&b, "\n", 1);
	}
	if (b.failed || ind.failed || !(*out = nf_jv_new(c, JV_STR)))
		return nf_jerr_mem(c, at);
	(*out)->u.s.p = b.p ? b.p : "";
	(*out)->u.s.n = b.n;
	return 0;
}

/* select/reject/selectattr/rejectattr: keep the items whose test (or truth) is want. */
static int select_items(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, size_t nargs, bool attr,
			bool want, nf_jv **out)
{
	nf_jv *l = NULL, *r = nf_jv_new(c, JV_LIST);
	size_t skip = attr ? 1 : 0;
	int err = nf_jv_truthy(v) ? items_of(c, at, v, &l) : items_of(c, at, r, &l); /* jinja2: "if seq:" */
	if (err)
		return err;
	if (!r)
		return nf_jerr_mem(c, at);
	if (attr && (nargs < 1 || (args[0]->kind != JV_STR && args[0]->kind != JV_INT)))
		return nf_jerr(c, at, "selectattr and rejectattr need an attribute name");
	if (nargs > skip && args[skip]->kind != JV_STR)
		return nf_jerr(c, at, "a test name must be a string");
	for (size_t i = 0; i < l->u.l.n; i++) {
		nf_jv *x = attr ? attr_path(c, l->u.l.v[i], args[0]) : l->u.l.v[i];
		bool r_ok = false;
		if (!x)
			return nf_jerr_mem(c, at);
		if (nargs > skip) {
			const char *test = nf_jarena_strdup(&c->arena, args[skip]->u.s.p, args[skip]->u.s.n);
			if (!test)
				return nf_jerr_mem(c, at);
			if ((err = nf_jtest(c, at, test, x, args + skip + 1, nargs - skip - 1, &r_ok)))
				return err;
		} else {
			r_ok = nf_jv_truthy(x);
		}
		if (r_ok == want && nf_jv_push(c, r, l->u.l.v[i]))
			return nf_jerr_mem(c, at);
	}
	*out = r;
	return 0;
}

static int f_select(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names,
		    size_t nargs, nf_jv **out)
{
	return select_items(c, at, v, args, nargs, false, true, out);
}

static int f_reject(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names,
		    size_t nargs, nf_jv **out)
{
	return select_items(c, at, v, args, nargs, false, false, out);
}

static int f_selectattr(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names,
			size_t nargs, nf_jv **out)
{
	return select_items(c, at, v, args, nargs, true, true, out);
}

static int f_rejectattr(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names,
			size_t nargs, nf_jv **out)
{
	return select_items(c, at, v, args, nargs, true, false, out);
}

/* map(attribute='x', default=d) or map('filter', args...). */
static int f_map(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names, size_t nargs,
		 nf_jv **out)
{
	nf_jv *l = NULL, *r = nf_jv_new(c, JV_LIST), *attr = nf_jarg(args, names, nargs, (size_t)-1, "attribute");
	nf_jv *def = nf_jarg(args, names, nargs, (size_t)-1, "default");
	int err = r && !nf_jv_truthy(v) ? items_of(c, at, r, &l) : items_of(c, at, v, &l); /* jinja2: "if seq:" */
	if (err)
		return err;
	if (!r)
		return nf_jerr_mem(c, at);
	if (!attr && (nargs < 1 || args[0]->kind != JV_STR || (names && names[0])))
		return nf_jerr(c, at, "map needs attribute= or a filter name");
	const char *filter = attr ? NULL : nf_jarena_strdup(&c->arena, args[0]->u.s.p, args[0]->u.s.n);
	for (size_t i = 0; i < l->u.l.n; i++) {
		nf_jv *x = NULL;
		if (attr) {
			x = attr_path(c, l->u.l.v[i], attr);
			if (x && x->kind == JV_UNDEF && def)
				x = def;
		} else if (!filter) {
			return nf_jerr_mem(c, at);
		} else if ((err = nf_jfilter(c, at, filter, l->u.l.v[i], args + 1, names ? names + 1 : NULL, nargs - 1, &x))) {
			return err;
		}
		if (nf_jv_push(c, r, x))
			return nf_jerr_mem(c, at);
	}
	*out = r;
	return 0;
}

static int f_unique(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **args, const char **names,
		    size_t nargs, nf_jv **out)
{
	nf_jv *l = NULL, *r = nf_jv_new(c, JV_LIST);
	int err = items_of(c, at, v, &l);
	if (err)
		return err;
	for (size_t i = 0; r && i < l->u.l.n; i++) {
		bool seen = false;
		for (size_t j = 0; j < r->u.l.n && !seen; j++) {
			if (++c->steps > c->lim.max_steps)
				return nf_jerr(c, at, "the render took more than %zu steps", c->lim.max_steps);
			seen = nf_jv_equal(c, l->u.l.v[i], r->u.l.v[j], 0) == 1;
		}
		if (!seen && nf_jv_push(c, r, l->u.l.v[i]))
			r = NULL;
	}
	return done(c, at, r, out);
}

static const struct {
	const char *name;
	filter_fn fn;
} filters[] = {
	{"abs", f_abs}, {"capitalize", f_capitalize}, {"count", f_length}, {"d", f_default},
	{"default", f_default}, {"first", f_first}, {"float", f_float}, {"indent", f_indent},
	{"int", f_int}, {"items", f_items}, {"join", f_join}, {"last", f_last}, {"length", f_length},
	{"list", f_list}, {"lower", f_lower}, {"map", f_map}, {"reject", f_reject},
	{"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse}, {"safe", f_safe},
	{"select", f_select}, {"selectattr", f_selectattr}, {"string", f_string}, {"title", f_title},
	{"tojson", f_tojson}, {"trim", f_trim}, {"unique", f_unique}, {"upper", f_upper},
};

int nf_jfilter(nf_jctx *c, const nf_jnode *at, const char *name, nf_jv *v, nf_jv **args,
	       const char **names, size_t nargs, nf_jv **out)
{
	for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++)
		if (strcmp(filters[i].name, name) == 0)
			return filters[i].fn(c, at, v, args, names, nargs, out);
	return nf_jerr(c, at, "no filter named '%s'", name);
}

/* ---- tests ---- */

static bool num_kind(const nf_jv *v) { return v->kind == JV_INT || v->kind == JV_FLOAT || v->kind == JV_BOOL; }

static int compare_test(nf_jctx *c, const nf_jnode *at, int op, nf_jv *v, nf_jv **args, size_t nargs,
			bool *out)
{
	nf_jv *r = NULL;
	if (nargs < 1)
		return nf_jerr(c, at, "the test needs a value to compare with");
	int err = nf_jbinary(c, at, op, v, args[0], &r);
	if (!err)
		*out = r->u.b;
	return err;
}

static int str_case_test(nf_jctx *c, const nf_jnode *at, nf_jv *v, bool upper, bool *out)
{
	nf_jv *s = nf_jv_to_str(c, v);
	bool cased = false, ok = true;
	if (!s)
		return nf_jerr_mem(c, at);
	for (size_t i = 0; i < s->u.s.n; i++) {
		char ch = s->u.s.p[i];
		bool lo = ch >= 'a' && ch <= 'z', up = ch >= 'A' && ch <= 'Z';
		cased = cased || lo || up;
		ok = ok && !(upper ? lo : up);
	}
	*out = cased && ok;
	return 0;
}

int nf_jtest(nf_jctx *c, const nf_jnode *at, const char *name, nf_jv *v, nf_jv **args, size_t nargs,
	     bool *out)
{
	static const struct {
		const char *name;
		int op;
	} cmp[] = {{"eq", JOP_EQ}, {"equalto", JOP_EQ}, {"==", JOP_EQ}, {"ne", JOP_NE}, {"!=", JOP_NE},
		   {"lt", JOP_LT}, {"lessthan", JOP_LT}, {"<", JOP_LT}, {"le", JOP_LE}, {"<=", JOP_LE},
		   {"gt", JOP_GT}, {"greaterthan", JOP_GT}, {">", JOP_GT}, {"ge", JOP_GE}, {">=", JOP_GE},
		   {"in", JOP_IN}};
	int k = v->kind;
	for (size_t i = 0; i < sizeof(cmp) / sizeof(cmp[0]); i++)
		if (strcmp(cmp[i].name, name) == 0)
			return compare_test(c, at, cmp[i].op, v, args, nargs, out);
	if (!strcmp(name, "defined") || !strcmp(name, "undefined"))
		*out = (k != JV_UNDEF) == (name[0] == 'd');
	else if (!strcmp(name, "none"))
		*out = k == JV_NONE;
	else if (!strcmp(name, "boolean"))
		*out = k == JV_BOOL;
	else if (!strcmp(name, "true") || !strcmp(name, "false"))
		*out = k == JV_BOOL && v->u.b == (name[0] == 't');
	else if (!strcmp(name, "integer"))
		*out = k == JV_INT;
	else if (!strcmp(name, "float"))
		*out = k == JV_FLOAT;
	else if (!strcmp(name, "number"))
		*out = num_kind(v);
	else if (!strcmp(name, "string"))
		*out = k == JV_STR;
	else if (!strcmp(name, "mapping"))
		*out = k == JV_DICT;
	else if (!strcmp(name, "iterable") || !strcmp(name, "sequence")) /* Undefined iterates (as empty) */
		*out = k == JV_STR || k == JV_LIST || k == JV_DICT || k == JV_UNDEF;
	else if (!strcmp(name, "callable"))
		*out = k == JV_FUNC || k == JV_MACRO;
	else if (!strcmp(name, "sameas"))
		*out = nargs >= 1 && (args[0] == v || (args[0]->kind == k && (k == JV_NONE || (k == JV_BOOL && args[0]->u.b == v->u.b))));
	else if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
		long long d = !strcmp(name, "divisibleby") ? (nargs >= 1 && args[0]->kind == JV_INT ? args[0]->u.i : 0) : 2;
		if ((k != JV_INT && k != JV_BOOL) || d == 0)
			return nf_jerr(c, at, "the '%s' test needs integers (and a non-zero divisor)", name);
		long long x = k == JV_INT ? v->u.i : v->u.b, r = d == -1 ? 0 : x % d; /* a bool is an int */
		*out = name[0] == 'o' ? r != 0 : r == 0;
	} else if (!strcmp(name, "lower") || !strcmp(name, "upper"))
		return str_case_test(c, at, v, name[0] == 'u', out);
	else
		return nf_jerr(c, at, "no test named '%s'", name);
	return 0;
}
