/*
 * jinja_methods.c - the Python methods templates call on strings and dicts
 * (strip, split, startswith, replace, items, get, ...), and the global
 * functions: range, namespace, dict, and transformers' raise_exception and
 * strftime_now.  A method is a JV_FUNC value bound to its object, made when
 * the attribute is read and run when it is called.
 */
#include "engine/jinja_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/error.h"
#include "util/banned.h"

enum {
	F_RANGE = 1, F_NAMESPACE, F_DICT, F_RAISE, F_STRFTIME,
	M_STRIP, M_LSTRIP, M_RSTRIP, M_STARTSWITH, M_ENDSWITH, M_SPLIT, M_UPPER, M_LOWER, M_TITLE,
	M_CAPITALIZE, M_REPLACE, M_FIND, M_COUNT, M_JOIN,
	M_ITEMS, M_KEYS, M_VALUES, M_GET,
};

typedef struct named {
	const char *name;
	int id;
} named;

static const named str_methods[] = {
	{"strip", M_STRIP}, {"lstrip", M_LSTRIP}, {"rstrip", M_RSTRIP}, {"startswith", M_STARTSWITH},
	{"endswith", M_ENDSWITH}, {"split", M_SPLIT}, {"upper", M_UPPER}, {"lower", M_LOWER},
	{"title", M_TITLE}, {"capitalize", M_CAPITALIZE}, {"replace", M_REPLACE}, {"find", M_FIND},
	{"count", M_COUNT}, {"join", M_JOIN}, {NULL, 0},
};
static const named dict_methods[] = {
	{"items", M_ITEMS}, {"keys", M_KEYS}, {"values", M_VALUES}, {"get", M_GET}, {NULL, 0},
};
static const named globals[] = {
	{"range", F_RANGE}, {"namespace", F_NAMESPACE}, {"dict", F_DICT},
	{"raise_exception", F_RAISE}, {"strftime_now", F_STRFTIME}, {NULL, 0},
};

static nf_jv *make_func(nf_jctx *c, const named *table, const char *name, nf_jv *self)
{
	for (const named *m = table; m->name; m++) {
		if (strcmp(m->name, name) == 0) {
			nf_jv *f = nf_jv_new(c, JV_FUNC);
			if (f) {
				f->u.fn.id = m->id;
				f->u.fn.name = m->name;
				f->u.fn.self = self;
			}
			return f;
		}
	}
	return NULL;
}

nf_jv *nf_jmethod(nf_jctx *c, nf_jv *obj, const char *name)
{
	if (obj->kind == JV_STR)
		return make_func(c, str_methods, name, obj);
	if (obj->kind == JV_DICT)
		return make_func(c, dict_methods, name, obj);
	return NULL;
}

nf_jv *nf_jglobal(nf_jctx *c, const char *name) { return make_func(c, globals, name, NULL); }

nf_jv *nf_jarg(nf_jv **args, const char **names, size_t nargs, size_t pos, const char *name)
{
	for (size_t i = 0; i < nargs; i++)
		if (names && names[i] ? name && strcmp(names[i], name) == 0 : i == pos)
			return args[i];
	return NULL;
}

/* ---- strings ---- */

/* Python's str.isspace() code points. */
static bool py_space(unsigned long cp)
{
	return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
	       cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
	       cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

/* The code point at s[i] (i at a boundary) and its length; bytes of invalid UTF-8 stand alone. */
static unsigned long cp_at(const char *s, size_t n, size_t i, size_t *len)
{
	*len = nf_utf8_offset(s + i, n - i, 1);
	unsigned char b = (unsigned char)s[i];
	if (*len == 1)
		return b;
	unsigned long cp = b & (0x7f >> *len);
	for (size_t j = 1; j < *len; j++)
		cp = (cp << 6) | ((unsigned char)s[i + j] & 0x3f);
	return cp;
}

/* The last code point before s[end]: its start. */
static size_t cp_before(const char *s, size_t end)
{
	size_t i = end - 1;
	while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80 && end - i < 4)
		i--;
	return i;
}

static bool in_chars(unsigned long cp, const nf_jv *chars)
{
	if (!chars || chars->kind == JV_NONE)
		return py_space(cp);
	for (size_t i = 0, k; i < chars->u.s.n; i += k)
		if (cp_at(chars->u.s.p, chars->u.s.n, i, &k) == cp)
			return true;
	return false;
}

int nf_jstrip(nf_jctx *c, const nf_jv *s, const nf_jv *chars, bool left, bool right, nf_jv **out)
{
	size_t from = 0, to = s->u.s.n, k;
	while (left && from < to && in_chars(cp_at(s->u.s.p, to, from, &k), chars))
		from += k;
	while (right && to > from) {
		size_t at = cp_before(s->u.s.p, to);
		if (at < from || !in_chars(cp_at(s->u.s.p, to, at, &k), chars) || at + k != to)
			break;
		to = at;
	}
	*out = nf_jv_str(c, s->u.s.p + from, to - from);
	return *out ? 0 : -1;
}

static bool is_lower(char ch) { return ch >= 'a' && ch <= 'z'; }
static bool is_upper(char ch) { return ch >= 'A' && ch <= 'Z'; }

/* mode: 'u' upper, 'l' lower, 'c' capitalize, 't' Python's str.title, 'j' jinja's title filter. */
nf_jv *nf_jcase(nf_jctx *c, const nf_jv *s, char mode)
{
	nf_jv *r = nf_jv_str(c, s->u.s.p, s->u.s.n);
	if (!r)
		return NULL;
	char *p = (char *)r->u.s.p;
	bool word_start = true;
	for (size_t i = 0; i < r->u.s.n; i++) {
		char ch = p[i];
		bool up = mode == 'u' || (mode == 'c' && i == 0) || ((mode == 't' || mode == 'j') && word_start);
		if (up && is_lower(ch))
			p[i] = (char)(ch - 'a' + 'A');
		else if (!up && is_upper(ch) && mode != 'u')
			p[i] = (char)(ch - 'A' + 'a');
		if (mode == 't')
			word_start = !is_lower(ch) && !is_upper(ch) && ((unsigned char)ch < 0x80);
		else if (mode == 'j')
			word_start = strchr(" \t\n\r\f\v-({[<", ch) != NULL && ch;
	}
	return r;
}

static bool has_affix(const nf_jv *s, const nf_jv *a, bool prefix)
{
	if (a->kind == JV_LIST) {
		for (size_t i = 0; i < a->u.l.n; i++)
			if (has_affix(s, a->u.l.v[i], prefix))
				return true;
		return false;
	}
	if (a->kind != JV_STR || a->u.s.n > s->u.s.n)
		return false;
	return memcmp(s->u.s.p + (prefix ? 0 : s->u.s.n - a->u.s.n), a->u.s.p, a->u.s.n) == 0;
}

static const char *find_sub(const char *s, size_t n, const char *sub, size_t m)
{
	for (size_t i = 0; i + m <= n; i++)
		if (memcmp(s + i, sub, m) == 0)
			return s + i;
	return NULL;
}

/* str.split(): on runs of whitespace without sep, else on each sep; at most max splits. */
static int split(nf_jctx *c, const nf_jv *s, const nf_jv *sep, long long max, nf_jv **out)
{
	nf_jv *l = nf_jv_new(c, JV_LIST);
	const char *p = s->u.s.p, *end = p + s->u.s.n;
	if (!l)
		return -1;
	*out = l;
	if (sep && sep->kind == JV_STR) {
		for (const char *hit; max != 0 && (hit = find_sub(p, (size_t)(end - p), sep->u.s.p, sep->u.s.n)); max--) {
			if (nf_jv_push(c, l, nf_jv_str(c, p, (size_t)(hit - p))))
				return -1;
			p = hit + sep->u.s.n;
		}
		return nf_jv_push(c, l, nf_jv_str(c, p, (size_t)(end - p)));
	}
	for (size_t i = 0, k; ; ) {
		while (i < s->u.s.n && py_space(cp_at(p, s->u.s.n, i, &k)))
			i += k;
		if (i >= s->u.s.n)
			return 0;
		size_t start = i;
		while (i < s->u.s.n && (max == 0 || !py_space(cp_at(p, s->u.s.n, i, &k))))
			i += max == 0 ? s->u.s.n - i : k;
		if (max == 0) { /* the rest, less trailing whitespace */
			nf_jv *rest = nf_jv_str(c, p + start, s->u.s.n - start), *t = NULL;
			return rest && !nf_jstrip(c, rest, NULL, false, true, &t) ? nf_jv_push(c, l, t) : -1;
		}
		if (nf_jv_push(c, l, nf_jv_str(c, p + start, i - start)))
			return -1;
		max -= max > 0;
	}
}

int nf_jreplace(nf_jctx *c, const nf_jv *s, const nf_jv *old, const nf_jv *new, long long count,
		nf_jv **out)
{
	nf_jbuf b = {.c = c};
	const char *p = s->u.s.p, *end = p + s->u.s.n;
	if (old->u.s.n == 0) { /* Python puts new between every character, and at both ends */
		for (size_t i = 0, k; i <= s->u.s.n; i += k) {
			if (count != 0)
				nf_jbuf_add(&b, new->u.s.p, new->u.s.n);
			count -= count > 0;
			k = i < s->u.s.n ? nf_utf8_offset(p + i, s->u.s.n - i, 1) : 1;
			if (i < s->u.s.n)
				nf_jbuf_add(&b, p + i, k);
		}
	} else {
		for (const char *hit; count != 0 && (hit = find_sub(p, (size_t)(end - p), old->u.s.p, old->u.s.n));
		     count -= count > 0) {
			nf_jbuf_add(&b, p, (size_t)(hit - p));
			nf_jbuf_add(&b, new->u.s.p, new->u.s.n);
			p = hit + old->u.s.n;
		}
		nf_jbuf_add(&b, p, (size_t)(end - p));
	}
	if (b.failed || !(*out = nf_jv_new(c, JV_STR)))
		return -1;
	(*out)->u.s.p = b.p ? b.p : "";
	(*out)->u.s.n = b.n;
	return 0;
}

/* ---- calls ---- */

static int want_str(nf_jctx *c, const nf_jnode *at, const nf_jv *v, const char *what)
{
	if (!v || v->kind != JV_STR)
		return nf_jerr(c, at, "%s must be a string, not %s", what, v ? nf_jv_type_name(v) : "nothing");
	return 0;
}

static int want_int(nf_jctx *c, const nf_jnode *at, const nf_jv *v, long long def, long long *out)
{
	*out = def;
	if (!v || v->kind == JV_NONE)
		return 0;
	if (v->kind != JV_INT && v->kind != JV_BOOL)
		return nf_jerr(c, at, "an integer is required, not %s", nf_jv_type_name(v));
	*out = v->kind == JV_INT ? v->u.i : v->u.b;
	return 0;
}

/* str.find: the code point index of sub in s, or -1. */
static long long str_find(const nf_jv *s, const nf_jv *sub)
{
	const char *hit = find_sub(s->u.s.p, s->u.s.n, sub->u.s.p, sub->u.s.n);
	return hit ? (long long)nf_utf8_count(s->u.s.p, (size_t)(hit - s->u.s.p)) : -1;
}

/* str.count: non-overlapping occurrences; the empty string occurs between every character. */
static long long str_count(const nf_jv *s, const nf_jv *sub)
{
	long long k = 0;
	if (!sub->u.s.n)
		return (long long)nf_utf8_count(s->u.s.p, s->u.s.n) + 1;
	for (const char *p = s->u.s.p, *end = p + s->u.s.n, *hit;
	     (hit = find_sub(p, (size_t)(end - p), sub->u.s.p, sub->u.s.n)); k++)
		p = hit + sub->u.s.n;
	return k;
}

/* sep.join(list): the list's strings with sep between them. */
static int str_join(nf_jctx *c, const nf_jnode *at, const nf_jv *sep, const nf_jv *list, nf_jv **out)
{
	nf_jbuf b = {.c = c};
	int err;
	if (!list || list->kind != JV_LIST)
		return nf_jerr(c, at, "join needs a list");
	for (size_t i = 0; i < list->u.l.n; i++) {
		if ((err = want_str(c, at, list->u.l.v[i], "each item joined")))
			return err;
		if (i)
			nf_jbuf_add(&b, sep->u.s.p, sep->u.s.n);
		nf_jbuf_add(&b, list->u.l.v[i]->u.s.p, list->u.l.v[i]->u.s.n);
	}
	if (b.failed || !(*out = nf_jv_new(c, JV_STR)))
		return nf_jerr_mem(c, at);
	(*out)->u.s.p = b.p ? b.p : "";
	(*out)->u.s.n = b.n;
	return 0;
}

static int call_str_method(nf_jctx *c, const nf_jnode *at, int id, nf_jv *s, nf_jv **args,
			   const char **names, size_t nargs, nf_jv **out)
{
	nf_jv *a0 = nf_jarg(args, names, nargs, 0, NULL), *a1 = nf_jarg(args, names, nargs, 1, NULL);
	long long n = -1;
	int err = 0;
	switch (id) {
	case M_STRIP:
	case M_LSTRIP:
	case M_RSTRIP:
		if (a0 && a0->kind != JV_NONE && (err = want_str(c, at, a0, "strip's argument")))
			return err;
		return nf_jstrip(c, s, a0, id != M_RSTRIP, id != M_LSTRIP, out) ? nf_jerr_mem(c, at) : 0;
	case M_STARTSWITH:
	case M_ENDSWITH:
		if (!a0 || (a0->kind != JV_STR && a0->kind != JV_LIST))
			return nf_jerr(c, at, "%s needs a string or a tuple of strings", id == M_STARTSWITH ? "startswith" : "endswith");
		*out = nf_jv_bool(c, has_affix(s, a0, id == M_STARTSWITH));
		break;
	case M_SPLIT:
		if (a0 && a0->kind != JV_NONE && ((err = want_str(c, at, a0, "split's separator")) ||
						  (a0->u.s.n == 0 && (err = nf_jerr(c, at, "empty separator")))))
			return err;
		if ((err = want_int(c, at, nf_jarg(args, names, nargs, 1, "maxsplit"), -1, &n)))
			return err;
		return split(c, s, a0, n, out) ? nf_jerr_mem(c, at) : 0;
	case M_UPPER: *out = nf_jcase(c, s, 'u'); break;
	case M_LOWER: *out = nf_jcase(c, s, 'l'); break;
	case M_TITLE: *out = nf_jcase(c, s, 't'); break;
	case M_CAPITALIZE: *out = nf_jcase(c, s, 'c'); break;
	case M_REPLACE:
		if ((err = want_str(c, at, a0, "replace's old")) || (err = want_str(c, at, a1, "replace's new")) ||
		    (err = want_int(c, at, nf_jarg(args, names, nargs, 2, "count"), -1, &n)))
			return err;
		return nf_jreplace(c, s, a0, a1, n, out) ? nf_jerr_mem(c, at) : 0;
	case M_FIND:
	case M_COUNT:
		if ((err = want_str(c, at, a0, "the substring")))
			return err;
		*out = nf_jv_int(c, id == M_FIND ? str_find(s, a0) : str_count(s, a0));
		break;
	case M_JOIN: return str_join(c, at, s, a0, out);
	}
	return *out ? 0 : nf_jerr_mem(c, at);
}

/* dict.items() as a list of (key, value) pairs. */
nf_jv *nf_jitems(nf_jctx *c, const nf_jv *d)
{
	nf_jv *l = nf_jv_new(c, JV_LIST);
	for (size_t i = 0; l && i < d->u.d.n; i++) {
		nf_jv *pair = nf_jv_new(c, JV_LIST);
		if (pair)
			pair->tuple = true;
		if (!pair || nf_jv_push(c, pair, d->u.d.k[i]) || nf_jv_push(c, pair, d->u.d.v[i]) ||
		    nf_jv_push(c, l, pair))
			return NULL;
	}
	return l;
}

static int call_dict_method(nf_jctx *c, const nf_jnode *at, int id, nf_jv *d, nf_jv **args,
			    const char **names, size_t nargs, nf_jv **out)
{
	nf_jv *a0 = nf_jarg(args, names, nargs, 0, NULL);
	if (id == M_GET) {
		if (!a0)
			return nf_jerr(c, at, "get expected at least 1 argument, got 0");
		*out = nf_jv_dict_find(d, a0);
		if (!*out)
			*out = nf_jarg(args, names, nargs, 1, NULL);
		if (!*out)
			*out = nf_jv_new(c, JV_NONE);
	} else if (id == M_ITEMS) {
		*out = nf_jitems(c, d);
	} else {
		*out = nf_jv_new(c, JV_LIST);
		for (size_t i = 0; *out && i < d->u.d.n; i++)
			if (nf_jv_push(c, *out, id == M_KEYS ? d->u.d.k[i] : d->u.d.v[i]))
				*out = NULL;
	}
	return *out ? 0 : nf_jerr_mem(c, at);
}

static int call_range(nf_jctx *c, const nf_jnode *at, nf_jv **args, size_t nargs, nf_jv **out)
{
	long long v[3] = {0, 0, 1};
	int err = 0;
	if (nargs < 1 || nargs > 3)
		return nf_jerr(c, at, "range expected 1 to 3 arguments, got %zu", nargs);
	for (size_t i = 0; i < nargs && !err; i++)
		err = want_int(c, at, args[i], 0, &v[nargs == 1 ? 1 : i]);
	if (err)
		return err;
	if (v[2] == 0)
		return nf_jerr(c, at, "range() arg 3 must not be zero");
	nf_jv *l = nf_jv_new(c, JV_LIST);
	if (!l)
		return nf_jerr_mem(c, at);
	for (long long i = v[0]; v[2] > 0 ? i < v[1] : i > v[1];) {
		if (++c->steps > c->lim.max_steps)
			return nf_jerr(c, at, "the render took more than %zu steps", c->lim.max_steps);
		if (nf_jv_push(c, l, nf_jv_int(c, i)))
			return nf_jerr_mem(c, at);
		if (__builtin_add_overflow(i, v[2], &i))
			break;
	}
	*out = l;
	return l ? 0 : nf_jerr_mem(c, at);
}

/* namespace(...) and dict(...): a mapping of the keyword arguments (and of a dict given first). */
static int call_mapping(nf_jctx *c, const nf_jnode *at, int kind, nf_jv **args, const char **names,
			size_t nargs, nf_jv **out)
{
	nf_jv *d = nf_jv_new(c, (nf_jv_kind)kind);
	if (!d)
		return nf_jerr_mem(c, at);
	for (size_t i = 0; i < nargs; i++) {
		const nf_jv *a = args[i];
		if (!names || !names[i]) {
			if (i != 0 || a->kind != JV_DICT)
				return nf_jerr(c, at, "expected keyword arguments or one mapping");
			for (size_t k = 0; k < a->u.d.n; k++)
				if (nf_jv_dict_set(c, d, a->u.d.k[k], a->u.d.v[k]))
					return nf_jerr_mem(c, at);
		} else if (nf_jv_dict_set(c, d, nf_jv_str(c, names[i], strlen(names[i])), args[i])) {
			return nf_jerr_mem(c, at);
		}
	}
	*out = d;
	return 0;
}

static int call_strftime(nf_jctx *c, const nf_jnode *at, nf_jv *fmt, nf_jv **out)
{
	char buf[256], f[128];
	struct tm tm;
	time_t now = time(NULL);
	if (!fmt || fmt->kind != JV_STR || fmt->u.s.n >= sizeof(f))
		return nf_jerr(c, at, "strftime_now needs a format string shorter than %zu bytes", sizeof(f));
	memcpy(f, fmt->u.s.p, fmt->u.s.n);
	f[fmt->u.s.n] = '\0';
	if (!localtime_r(&now, &tm))
		return nf_jerr(c, at, "strftime_now: no local time");
	size_t n = strftime(buf, sizeof(buf), f, &tm);
	*out = nf_jv_str(c, buf, n);
	return *out ? 0 : nf_jerr_mem(c, at);
}

int nf_jcall_builtin(nf_jctx *c, const nf_jnode *at, nf_jv *fn, nf_jv **args, const char **names,
		     size_t nargs, nf_jv **out)
{
	int id = fn->u.fn.id;
	nf_jv *a0 = nf_jarg(args, names, nargs, 0, NULL);
	*out = NULL;
	switch (id) {
	case F_RANGE: return call_range(c, at, args, nargs, out);
	case F_NAMESPACE: return call_mapping(c, at, JV_NS, args, names, nargs, out);
	case F_DICT: return call_mapping(c, at, JV_DICT, args, names, nargs, out);
	case F_RAISE: {
		nf_jv *msg = a0 ? nf_jv_to_str(c, a0) : NULL;
		return nf_jerr(c, at, "%.*s", msg ? (int)(msg->u.s.n < 600 ? msg->u.s.n : 600) : 0,
			       msg ? msg->u.s.p : "");
	}
	case F_STRFTIME: return call_strftime(c, at, a0, out);
	default:
		if (id >= M_ITEMS)
			return call_dict_method(c, at, id, fn->u.fn.self, args, names, nargs, out);
		return call_str_method(c, at, id, fn->u.fn.self, args, names, nargs, out);
	}
}
