/*
 * jinja_value.c - the values a template computes with, and the arena they
 * live in: Python's None, bool, int, float, str, list and dict, plus
 * jinja2's Undefined, namespaces and callables.  Printing follows Python
 * (str() of a value, repr() inside lists and dicts), JSON follows
 * json.dumps, so the output matches what transformers renders.
 *
 * A render allocates every value in one arena freed at its end: templates
 * cannot mutate lists or dicts (the sandbox is immutable), so values are
 * shared freely and nothing needs counting.
 */
#include "engine/jinja_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/banned.h"

/* ---- arena ---- */

struct nf_jchunk {
	struct nf_jchunk *next;
	size_t size, used;
	max_align_t data[];
};

#define CHUNK_MIN ((size_t)64 << 10)

void nf_jarena_init(nf_jarena *a, size_t max)
{
	memset(a, 0, sizeof(*a));
	a->max = max;
}

void nf_jarena_release(nf_jarena *a)
{
	for (struct nf_jchunk *c = a->head, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	a->head = NULL;
	a->used = 0;
}

void *nf_jarena_alloc(nf_jarena *a, size_t n)
{
	size_t need, total;
	if (!nf_size_add(&need, n, sizeof(max_align_t) - 1))
		return NULL;
	need -= need % sizeof(max_align_t);
	if (!nf_size_add(&total, a->used, need) || total > a->max) {
		a->over = true;
		return NULL;
	}
	struct nf_jchunk *c = a->head;
	if (!c || c->size - c->used < need) {
		size_t size = need > CHUNK_MIN ? need : CHUNK_MIN;
		c = malloc(sizeof(*c) + size);
		if (!c)
			return NULL;
		c->size = size;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	void *p = (char *)c->data + c->used;
	c->used += need;
	a->used = total;
	memset(p, 0, n);
	return p;
}

char *nf_jarena_strdup(nf_jarena *a, const char *s, size_t n)
{
	size_t n1;
	char *p = nf_size_add(&n1, n, 1) ? nf_jarena_alloc(a, n1) : NULL;
	if (p && n)
		memcpy(p, s, n);
	return p;
}

/* ---- constructors ---- */

nf_jv *nf_jv_new(nf_jctx *c, nf_jv_kind k)
{
	nf_jv *v = nf_jarena_alloc(&c->arena, sizeof(*v));
	if (v)
		v->kind = (uint8_t)k;
	return v;
}

nf_jv *nf_jv_str(nf_jctx *c, const char *p, size_t n)
{
	nf_jv *v = nf_jv_new(c, JV_STR);
	char *s = v ? nf_jarena_strdup(&c->arena, p, n) : NULL;
	if (!s)
		return NULL;
	v->u.s.p = s;
	v->u.s.n = n;
	return v;
}

nf_jv *nf_jv_int(nf_jctx *c, long long i)
{
	nf_jv *v = nf_jv_new(c, JV_INT);
	if (v)
		v->u.i = i;
	return v;
}

nf_jv *nf_jv_float(nf_jctx *c, double f)
{
	nf_jv *v = nf_jv_new(c, JV_FLOAT);
	if (v)
		v->u.f = f;
	return v;
}

nf_jv *nf_jv_bool(nf_jctx *c, bool b)
{
	nf_jv *v = nf_jv_new(c, JV_BOOL);
	if (v)
		v->u.b = b;
	return v;
}

nf_jv *nf_jv_undef(nf_jctx *c, const char *name)
{
	nf_jv *v = nf_jv_new(c, JV_UNDEF);
	if (v)
		v->undef_name = name;
	return v;
}

/* Grow an array of pointers to at least n+1 slots. */
static int grow(nf_jctx *c, nf_jv ***arr, size_t n, size_t *cap)
{
	if (n < *cap)
		return 0;
	size_t ncap, bytes;
	if (!nf_size_mul(&ncap, *cap ? *cap : 2, 2) || !nf_size_mul(&bytes, ncap, sizeof(nf_jv *)))
		return -1;
	nf_jv **p = nf_jarena_alloc(&c->arena, bytes);
	if (!p)
		return -1;
	if (n)
		memcpy(p, *arr, n * sizeof(*p));
	*arr = p;
	*cap = ncap;
	return 0;
}

int nf_jv_push(nf_jctx *c, nf_jv *list, nf_jv *item)
{
	if (!item || grow(c, &list->u.l.v, list->u.l.n, &list->u.l.cap))
		return -1;
	list->u.l.v[list->u.l.n++] = item;
	return 0;
}

nf_jv *nf_jv_dict_get(const nf_jv *d, const char *key, size_t n)
{
	for (size_t i = 0; i < d->u.d.n; i++) {
		const nf_jv *k = d->u.d.k[i];
		if (k->kind == JV_STR && k->u.s.n == n && memcmp(k->u.s.p, key, n) == 0)
			return d->u.d.v[i];
	}
	return NULL;
}

static bool key_equal(const nf_jv *a, const nf_jv *b)
{
	if (a->kind == JV_STR || b->kind == JV_STR)
		return a->kind == b->kind && a->u.s.n == b->u.s.n && memcmp(a->u.s.p, b->u.s.p, a->u.s.n) == 0;
	if (a->kind == JV_INT && b->kind == JV_INT)
		return a->u.i == b->u.i;
	return a->kind == b->kind && a->kind == JV_NONE;
}

nf_jv *nf_jv_dict_find(const nf_jv *d, const nf_jv *key)
{
	for (size_t i = 0; i < d->u.d.n; i++)
		if (key_equal(d->u.d.k[i], key))
			return d->u.d.v[i];
	return NULL;
}

int nf_jv_dict_set(nf_jctx *c, nf_jv *d, nf_jv *key, nf_jv *val)
{
	if (!key || !val)
		return -1;
	for (size_t i = 0; i < d->u.d.n; i++) {
		if (key_equal(d->u.d.k[i], key)) {
			d->u.d.v[i] = val;
			return 0;
		}
	}
	size_t cap = d->u.d.cap;
	if (grow(c, &d->u.d.k, d->u.d.n, &cap) || grow(c, &d->u.d.v, d->u.d.n, &d->u.d.cap))
		return -1;
	d->u.d.k[d->u.d.n] = key;
	d->u.d.v[d->u.d.n++] = val;
	return 0;
}

nf_jv *nf_jv_from_json(nf_jctx *c, const json_t *j, size_t depth)
{
	nf_jv *v = NULL;
	if (depth > c->lim.max_depth)
		return NULL;
	switch (json_typeof(j)) {
	case JSON_NULL: return nf_jv_new(c, JV_NONE);
	case JSON_TRUE: return nf_jv_bool(c, true);
	case JSON_FALSE: return nf_jv_bool(c, false);
	case JSON_INTEGER: return nf_jv_int(c, json_integer_value(j));
	case JSON_REAL: return nf_jv_float(c, json_real_value(j));
	case JSON_STRING: return nf_jv_str(c, json_string_value(j), json_string_length(j));
	case JSON_ARRAY:
		if (!(v = nf_jv_new(c, JV_LIST)))
			return NULL;
		for (size_t i = 0; i < json_array_size(j); i++)
			if (nf_jv_push(c, v, nf_jv_from_json(c, json_array_get(j, i), depth + 1)))
				return NULL;
		return v;
	case JSON_OBJECT: {
		const char *k;
		json_t *x;
		if (!(v = nf_jv_new(c, JV_DICT)))
			return NULL;
		json_object_foreach((json_t *)j, k, x)
			if (nf_jv_dict_set(c, v, nf_jv_str(c, k, strlen(k)), nf_jv_from_json(c, x, depth + 1)))
				return NULL;
		return v;
	}
	}
	return NULL;
}

/* ---- predicates ---- */

bool nf_jv_truthy(const nf_jv *v)
{
	switch (v->kind) {
	case JV_UNDEF:
	case JV_NONE: return false;
	case JV_BOOL: return v->u.b;
	case JV_INT: return v->u.i != 0;
	case JV_FLOAT: return v->u.f != 0.0;
	case JV_STR: return v->u.s.n > 0;
	case JV_LIST: return v->u.l.n > 0;
	case JV_DICT: return v->u.d.n > 0;
	default: return true;
	}
}

bool nf_jv_is_str(const nf_jv *v, const char *s)
{
	size_t n = strlen(s);
	return v->kind == JV_STR && v->u.s.n == n && memcmp(v->u.s.p, s, n) == 0;
}

static bool is_num(const nf_jv *v) { return v->kind == JV_BOOL || v->kind == JV_INT || v->kind == JV_FLOAT; }

static double num(const nf_jv *v)
{
	return v->kind == JV_FLOAT ? v->u.f : v->kind == JV_INT ? (double)v->u.i : (double)v->u.b;
}

int nf_jv_equal(nf_jctx *c, const nf_jv *a, const nf_jv *b, size_t depth)
{
	if (depth > c->lim.max_depth)
		return -1;
	if (is_num(a) && is_num(b)) {
		if (a->kind != JV_FLOAT && b->kind != JV_FLOAT)
			return (a->kind == JV_INT ? a->u.i : a->u.b) == (b->kind == JV_INT ? b->u.i : b->u.b);
		return num(a) == num(b);
	}
	if (a->kind != b->kind)
		return 0;
	switch (a->kind) {
	case JV_UNDEF:
	case JV_NONE: return 1;
	case JV_STR: return a->u.s.n == b->u.s.n && memcmp(a->u.s.p, b->u.s.p, a->u.s.n) == 0;
	case JV_LIST:
		if (a->u.l.n != b->u.l.n)
			return 0;
		for (size_t i = 0; i < a->u.l.n; i++) {
			int e = nf_jv_equal(c, a->u.l.v[i], b->u.l.v[i], depth + 1);
			if (e != 1)
				return e;
		}
		return 1;
	case JV_DICT:
		if (a->u.d.n != b->u.d.n)
			return 0;
		for (size_t i = 0; i < a->u.d.n; i++) {
			const nf_jv *o = nf_jv_dict_find(b, a->u.d.k[i]);
			int e = o ? nf_jv_equal(c, a->u.d.v[i], o, depth + 1) : 0;
			if (e != 1)
				return e;
		}
		return 1;
	default: return a == b;
	}
}

const char *nf_jv_type_name(const nf_jv *v)
{
	static const char *const names[] = {"undefined", "NoneType", "bool", "int", "float", "str",
					    "list", "dict", "Namespace", "LoopContext", "function", "Macro"};
	return v->kind < sizeof(names) / sizeof(names[0]) ? names[v->kind] : "object";
}

/* ---- UTF-8 ---- */

static size_t utf8_len(unsigned char b)
{
	return b < 0x80 ? 1 : b >= 0xf0 && b < 0xf8 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
}

static size_t utf8_step(const char *s, size_t n, size_t i)
{
	size_t k = utf8_len((unsigned char)s[i]), j = 1;
	while (j < k && i + j < n && ((unsigned char)s[i + j] & 0xc0) == 0x80)
		j++;
	return j;
}

size_t nf_utf8_count(const char *s, size_t n)
{
	size_t count = 0;
	for (size_t i = 0; i < n; i += utf8_step(s, n, i))
		count++;
	return count;
}

size_t nf_utf8_offset(const char *s, size_t n, size_t cp)
{
	size_t i = 0;
	for (; i < n && cp > 0; cp--)
		i += utf8_step(s, n, i);
	return i;
}

/* Decode the code point at s[*i], advancing *i; invalid bytes give U+FFFD. */
static unsigned long utf8_next(const char *s, size_t n, size_t *i)
{
	unsigned char b = (unsigned char)s[*i];
	size_t k = utf8_step(s, n, *i);
	unsigned long cp = k == 1 ? (b < 0x80 ? b : 0xfffd) : b & (0x7f >> k);
	if (k > 1 && k != utf8_len(b))
		cp = 0xfffd;
	for (size_t j = 1; j < k && cp != 0xfffd; j++)
		cp = (cp << 6) | ((unsigned char)s[*i + j] & 0x3f);
	*i += k;
	return cp;
}

/* ---- text ---- */

void nf_jbuf_add(nf_jbuf *b, const char *s, size_t n)
{
	if (b->failed || !n)
		return;
	size_t need;
	if (!nf_size_add(&need, b->n, n + 1)) {
		b->failed = true;
		return;
	}
	if (need > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < need && nf_size_mul(&cap, cap, 2))
			;
		char *p = cap >= need ? nf_jarena_alloc(&b->c->arena, cap) : NULL;
		if (!p) {
			b->failed = true;
			return;
		}
		if (b->n)
			memcpy(p, b->p, b->n);
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

void nf_jbuf_adds(nf_jbuf *b, const char *s) { nf_jbuf_add(b, s, strlen(s)); }

/* Python's repr(float): the shortest digits that read back the same, fixed
 * notation for exponents -4..15, else d.ddde+XX. */
static void write_float(nf_jbuf *b, double f, bool json)
{
	char e[40], out[64];
	if (isnan(f) || isinf(f)) {
		nf_jbuf_adds(b, isnan(f) ? (json ? "NaN" : "nan") : f > 0 ? (json ? "Infinity" : "inf")
									      : (json ? "-Infinity" : "-inf"));
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(e, sizeof(e), "%.*e", prec - 1, f);
		if (strtod(e, NULL) == f)
			break;
	}
	char digits[24];
	size_t nd = 0;
	const char *p = e;
	bool neg = *p == '-';
	p += neg;
	for (; *p && *p != 'e'; p++)
		if (*p != '.' && nd + 1 < sizeof(digits))
			digits[nd++] = *p;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = '\0';
	int exp = *p == 'e' ? (int)strtol(p + 1, NULL, 10) : 0;
	size_t o = 0;
	if (neg)
		out[o++] = '-';
	if (exp >= -4 && exp < 16) {
		if (exp < 0) {
			o += (size_t)snprintf(out + o, sizeof(out) - o, "0.%.*s%s", -exp - 1, "0000", digits);
		} else {
			for (int i = 0; i <= exp; i++)
				out[o++] = (size_t)i < nd ? digits[i] : '0';
			out[o++] = '.';
			if ((size_t)exp + 1 < nd)
				o += (size_t)snprintf(out + o, sizeof(out) - o, "%s", digits + exp + 1);
			else
				out[o++] = '0';
		}
	} else {
		out[o++] = digits[0];
		if (nd > 1)
			o += (size_t)snprintf(out + o, sizeof(out) - o, ".%s", digits + 1);
		o += (size_t)snprintf(out + o, sizeof(out) - o, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
	}
	nf_jbuf_add(b, out, o);
}

/* Python's repr(str): single quotes unless the text has ' and no ". */
static void write_repr_str(nf_jbuf *b, const char *s, size_t n)
{
	bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
	char q = sq && !dq ? '"' : '\'';
	nf_jbuf_add(b, &q, 1);
	for (size_t i = 0; i < n;) {
		size_t start = i;
		unsigned long cp = utf8_next(s, n, &i);
		char esc[16];
		if (cp == '\\' || cp == (unsigned long)q) {
			esc[0] = '\\';
			esc[1] = (char)cp;
			nf_jbuf_add(b, esc, 2);
		} else if (cp == '\n' || cp == '\r' || cp == '\t') {
			nf_jbuf_adds(b, cp == '\n' ? "\\n" : cp == '\r' ? "\\r" : "\\t");
		} else if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) {
			snprintf(esc, sizeof(esc), "\\x%02lx", cp);
			nf_jbuf_adds(b, esc);
		} else {
			nf_jbuf_add(b, s + start, i - start);
		}
	}
	nf_jbuf_add(b, &q, 1);
}

void nf_jv_write(nf_jbuf *b, const nf_jv *v, bool repr, size_t depth)
{
	char num_buf[32];
	if (depth > b->c->lim.max_depth) {
		b->failed = b->too_deep = true;
		return;
	}
	switch (v->kind) {
	case JV_UNDEF: return;
	case JV_NONE: nf_jbuf_adds(b, "None"); return;
	case JV_BOOL: nf_jbuf_adds(b, v->u.b ? "True" : "False"); return;
	case JV_INT:
		snprintf(num_buf, sizeof(num_buf), "%lld", v->u.i);
		nf_jbuf_adds(b, num_buf);
		return;
	case JV_FLOAT: write_float(b, v->u.f, false); return;
	case JV_STR:
		if (repr)
			write_repr_str(b, v->u.s.p, v->u.s.n);
		else
			nf_jbuf_add(b, v->u.s.p, v->u.s.n);
		return;
	case JV_LIST:
		nf_jbuf_adds(b, v->tuple ? "(" : "[");
		for (size_t i = 0; i < v->u.l.n; i++) {
			if (i)
				nf_jbuf_adds(b, ", ");
			nf_jv_write(b, v->u.l.v[i], true, depth + 1);
		}
		nf_jbuf_adds(b, !v->tuple ? "]" : v->u.l.n == 1 ? ",)" : ")");
		return;
	case JV_DICT:
	case JV_NS:
		nf_jbuf_adds(b, v->kind == JV_NS ? "<Namespace {" : "{");
		for (size_t i = 0; i < v->u.d.n; i++) {
			if (i)
				nf_jbuf_adds(b, ", ");
			nf_jv_write(b, v->u.d.k[i], true, depth + 1);
			nf_jbuf_adds(b, ": ");
			nf_jv_write(b, v->u.d.v[i], true, depth + 1);
		}
		nf_jbuf_adds(b, v->kind == JV_NS ? "}>" : "}");
		return;
	default:
		nf_jbuf_adds(b, "<");
		nf_jbuf_adds(b, nf_jv_type_name(v));
		nf_jbuf_adds(b, ">");
	}
}

nf_jv *nf_jv_to_str(nf_jctx *c, const nf_jv *v)
{
	if (v->kind == JV_STR)
		return (nf_jv *)v;
	nf_jbuf b = {.c = c};
	nf_jv_write(&b, v, false, 0);
	if (b.failed)
		return NULL;
	nf_jv *s = nf_jv_new(c, JV_STR);
	if (s) {
		s->u.s.p = b.p ? b.p : "";
		s->u.s.n = b.n;
	}
	return s;
}

static void write_json_str(nf_jbuf *b, const char *s, size_t n, bool ascii)
{
	nf_jbuf_adds(b, "\"");
	for (size_t i = 0; i < n;) {
		size_t start = i;
		unsigned long cp = utf8_next(s, n, &i);
		char esc[32];
		const char *named = cp == '"' ? "\\\"" : cp == '\\' ? "\\\\" : cp == '\n' ? "\\n" : cp == '\r' ? "\\r"
				  : cp == '\t' ? "\\t" : cp == '\b' ? "\\b" : cp == '\f' ? "\\f" : NULL;
		if (named) {
			nf_jbuf_adds(b, named);
		} else if (cp < 0x20 || (ascii && cp >= 0x7f)) {
			if (cp > 0xffff) { /* a surrogate pair, as json.dumps writes it */
				unsigned long u = cp - 0x10000;
				snprintf(esc, sizeof(esc), "\\u%04lx\\u%04lx", 0xd800 + (u >> 10), 0xdc00 + (u & 0x3ff));
			} else {
				snprintf(esc, sizeof(esc), "\\u%04lx", cp);
			}
			nf_jbuf_adds(b, esc);
		} else if (cp == 0xfffd && i - start == 1) {
			nf_jbuf_adds(b, "\xef\xbf\xbd"); /* an invalid byte: never pass it on */
		} else {
			nf_jbuf_add(b, s + start, i - start);
		}
	}
	nf_jbuf_adds(b, "\"");
}

static void json_newline(nf_jbuf *b, const nf_jjson_opts *o, size_t level)
{
	if (o->indent < 0)
		return;
	nf_jbuf_adds(b, "\n");
	for (size_t i = 0; i < level * (size_t)o->indent && !b->failed; i++)
		nf_jbuf_adds(b, " ");
}

/* A dict key as json.dumps writes it: strings as they are, numbers, bools and None spelled out. */
static int write_json_key(nf_jbuf *b, const nf_jv *k, const nf_jjson_opts *o, const char **bad)
{
	if (k->kind == JV_STR) {
		write_json_str(b, k->u.s.p, k->u.s.n, o->ensure_ascii);
		return 0;
	}
	nf_jbuf kb = {.c = b->c};
	if (k->kind == JV_BOOL || k->kind == JV_NONE)
		nf_jbuf_adds(&kb, k->kind == JV_NONE ? "null" : k->u.b ? "true" : "false");
	else if (k->kind == JV_INT || k->kind == JV_FLOAT)
		nf_jv_write(&kb, k, false, 0);
	else
		return *bad = nf_jv_type_name(k), -1;
	write_json_str(b, kb.p ? kb.p : "", kb.n, false);
	return kb.failed ? (b->failed = true, 0) : 0;
}

static int cmp_keys(const void *x, const void *y)
{
	const nf_jv *a = **(nf_jv *const *const *)x, *b = **(nf_jv *const *const *)y;
	if (a->kind != JV_STR || b->kind != JV_STR)
		return 0;
	size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
	int r = memcmp(a->u.s.p, b->u.s.p, n);
	return r ? r : (a->u.s.n > b->u.s.n) - (a->u.s.n < b->u.s.n);
}

static int write_json_dict(nf_jbuf *b, const nf_jv *v, const nf_jjson_opts *o, size_t depth,
			   const char **bad)
{
	size_t n = v->u.d.n, bytes;
	nf_jv **slots[1], ***order = slots;
	if (n && (!nf_size_mul(&bytes, n, sizeof(*order)) || !(order = nf_jarena_alloc(&b->c->arena, bytes)))) {
		b->failed = true;
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		order[i] = &v->u.d.k[i];
	if (o->sort_keys && n > 1)
		qsort(order, n, sizeof(*order), cmp_keys);
	nf_jbuf_adds(b, "{");
	for (size_t i = 0; i < n; i++) {
		size_t at = (size_t)(order[i] - v->u.d.k);
		if (i)
			nf_jbuf_adds(b, o->item_sep);
		json_newline(b, o, depth + 1);
		if (write_json_key(b, v->u.d.k[at], o, bad))
			return -1;
		nf_jbuf_adds(b, o->key_sep);
		if (nf_jv_write_json(b, v->u.d.v[at], o, depth + 1, bad))
			return -1;
	}
	if (n)
		json_newline(b, o, depth);
	nf_jbuf_adds(b, "}");
	return 0;
}

int nf_jv_write_json(nf_jbuf *b, const nf_jv *v, const nf_jjson_opts *o, size_t depth, const char **bad)
{
	if (depth > b->c->lim.max_depth) {
		b->failed = b->too_deep = true;
		return 0;
	}
	switch (v->kind) {
	case JV_NONE: nf_jbuf_adds(b, "null"); return 0;
	case JV_BOOL: nf_jbuf_adds(b, v->u.b ? "true" : "false"); return 0;
	case JV_INT: nf_jv_write(b, v, false, depth); return 0;
	case JV_FLOAT: write_float(b, v->u.f, true); return 0;
	case JV_STR: write_json_str(b, v->u.s.p, v->u.s.n, o->ensure_ascii); return 0;
	case JV_LIST:
		nf_jbuf_adds(b, "[");
		for (size_t i = 0; i < v->u.l.n; i++) {
			if (i)
				nf_jbuf_adds(b, o->item_sep);
			json_newline(b, o, depth + 1);
			if (nf_jv_write_json(b, v->u.l.v[i], o, depth + 1, bad))
				return -1;
		}
		if (v->u.l.n)
			json_newline(b, o, depth);
		nf_jbuf_adds(b, "]");
		return 0;
	case JV_DICT: return write_json_dict(b, v, o, depth, bad);
	default: *bad = nf_jv_type_name(v); return -1;
	}
}
