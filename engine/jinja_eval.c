/*
 * jinja_eval.c - walking the syntax tree: nf_jexec runs a statement,
 * nf_jeval computes an expression; each is a switch over node kinds with
 * one function per kind.  Scoping is jinja2's: a for loop's body gets a
 * fresh frame each iteration (a "set" inside it is gone after it: that is
 * why templates use namespace()), if blocks share their parent's frame,
 * and a macro runs in a frame over the template's globals.
 */
#include "engine/jinja_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

/* Recursion of the evaluator (expressions inside expressions, statements
 * inside statements, macro calls): deeper is an error, never a stack overflow. */
#define MAX_EVAL_DEPTH 1000

int nf_jerr(nf_jctx *c, const nf_jnode *n, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return nf_error_set(NF_EINPUT, "%s:%u:%u: %s", c->what, n ? n->line : 0, n ? n->col : 0, msg);
}

int nf_jerr_mem(nf_jctx *c, const nf_jnode *n)
{
	if (c->arena.over)
		return nf_jerr(c, n, "the render needs more than %zu bytes of memory", c->lim.max_mem);
	return nf_error_set(NF_ENOMEM, "%s: out of memory", c->what);
}

static int undefined_err(nf_jctx *c, const nf_jnode *n, const nf_jv *v)
{
	return nf_jerr(c, n, "'%s' is undefined", v->undef_name ? v->undef_name : "value");
}

/* ---- output ---- */

static int emit(nf_jctx *c, const nf_jnode *at, const char *s, size_t n)
{
	size_t need;
	if (!nf_size_add(&need, c->out_len, n) || need > c->lim.max_out)
		return nf_jerr(c, at, "output longer than %zu bytes", c->lim.max_out);
	if (need + 1 > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 256;
		while (cap < need + 1)
			cap *= 2; /* need <= max_out, far below SIZE_MAX / 2 */
		char *p = realloc(c->out, cap);
		if (!p)
			return nf_error_set(NF_ENOMEM, "%s: out of memory", c->what);
		c->out = p;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, s, n);
	c->out_len += n;
	c->out[c->out_len] = '\0';
	return 0;
}

/* Run body with output going to a string of its own (macros, set blocks). */
static int capture(nf_jctx *c, const nf_jnode *body, nf_jv **out)
{
	char *saved = c->out;
	size_t saved_len = c->out_len, saved_cap = c->out_cap;
	c->out = NULL;
	c->out_len = c->out_cap = 0;
	int err = nf_jexec(c, body);
	if (!err && !(*out = nf_jv_str(c, c->out ? c->out : "", c->out_len)))
		err = nf_jerr_mem(c, body);
	free(c->out);
	c->out = saved;
	c->out_len = saved_len;
	c->out_cap = saved_cap;
	return err;
}

/* ---- scopes ---- */

static nf_jv *lookup(nf_jctx *c, const char *name, size_t n)
{
	for (nf_jframe *f = c->frame; f; f = f->parent) {
		nf_jv *v = nf_jv_dict_get(f->vars, name, n);
		if (v)
			return v;
	}
	return NULL;
}

static int bind(nf_jctx *c, const nf_jnode *at, const char *name, size_t n, nf_jv *v)
{
	if (nf_jv_dict_set(c, c->frame->vars, nf_jv_str(c, name, n), v))
		return nf_jerr_mem(c, at);
	return 0;
}

static int push_frame(nf_jctx *c, nf_jframe *parent, nf_jframe **saved)
{
	nf_jframe *f = nf_jarena_alloc(&c->arena, sizeof(*f));
	if (!f || !(f->vars = nf_jv_new(c, JV_DICT)))
		return -1;
	f->parent = parent;
	*saved = c->frame;
	c->frame = f;
	return 0;
}

/* Assign v to a target: a name, or a tuple of names (v must have as many items). */
static int assign(nf_jctx *c, const nf_jnode *target, nf_jv *v)
{
	if (target->kind == JN_NAME)
		return bind(c, target, target->name, target->name_len, v);
	if (v->kind != JV_LIST)
		return nf_jerr(c, target, "cannot unpack a %s into %zu names", nf_jv_type_name(v), target->nargs);
	if (v->u.l.n != target->nargs)
		return nf_jerr(c, target, "%s values to unpack (expected %zu, got %zu)",
			       v->u.l.n > target->nargs ? "too many" : "not enough", target->nargs, v->u.l.n);
	for (size_t i = 0; i < target->nargs; i++) {
		int err = assign(c, target->args[i], v->u.l.v[i]);
		if (err)
			return err;
	}
	return 0;
}

/* ---- expressions ---- */

static int eval_name(nf_jctx *c, const nf_jnode *n, nf_jv **out)
{
	nf_jv *v = lookup(c, n->name, n->name_len);
	if (!v)
		v = nf_jglobal(c, n->name);
	if (!v)
		v = nf_jv_undef(c, n->name);
	*out = v;
	return v ? 0 : nf_jerr_mem(c, n);
}

static int eval_attr(nf_jctx *c, const nf_jnode *n, nf_jv **out)
{
	nf_jv *obj = NULL, *v = NULL;
	int err = nf_jeval(c, n->a, &obj);
	if (err)
		return err;
	if (obj->kind == JV_UNDEF)
		return undefined_err(c, n, obj);
	v = nf_jmethod(c, obj, n->name);
	if (!v && (obj->kind == JV_DICT || obj->kind == JV_NS || obj->kind == JV_LOOP))
		v = nf_jv_dict_get(obj, n->name, n->name_len);
	if (!v)
		v = nf_jv_undef(c, n->name);
	*out = v;
	return v ? 0 : nf_jerr_mem(c, n);
}

/* Python's index: negative counts from the end; false when out of range. */
static bool norm_index(long long i, size_t len, size_t *at)
{
	if (i < 0)
		i += (long long)len;
	if (i < 0 || (unsigned long long)i >= len)
		return false;
	*at = (size_t)i;
	return true;
}

static nf_jv *item_of(nf_jctx *c, nf_jv *obj, nf_jv *key)
{
	size_t at;
	bool int_key = key->kind == JV_INT || key->kind == JV_BOOL;
	long long i = key->kind == JV_INT ? key->u.i : key->kind == JV_BOOL ? key->u.b : 0;
	if (obj->kind == JV_DICT || obj->kind == JV_NS || obj->kind == JV_LOOP) {
		nf_jv *v = nf_jv_dict_find(obj, key);
		return v ? v : nf_jv_undef(c, key->kind == JV_STR ? key->u.s.p : "item");
	}
	if (obj->kind == JV_LIST && int_key && norm_index(i, obj->u.l.n, &at))
		return obj->u.l.v[at];
	if (obj->kind == JV_STR && int_key && norm_index(i, nf_utf8_count(obj->u.s.p, obj->u.s.n), &at)) {
		size_t from = nf_utf8_offset(obj->u.s.p, obj->u.s.n, at);
		size_t to = nf_utf8_offset(obj->u.s.p, obj->u.s.n, at + 1);
		return nf_jv_str(c, obj->u.s.p + from, to - from);
	}
	if (key->kind == JV_STR) {
		nf_jv *m = nf_jmethod(c, obj, key->u.s.p);
		return m ? m : nf_jv_undef(c, key->u.s.p);
	}
	return nf_jv_undef(c, "item");
}

static int eval_item(nf_jctx *c, const nf_jnode *n, nf_jv **out)
{
	nf_jv *obj = NULL, *key = NULL;
	int err = nf_jeval(c, n->a, &obj);
	if (err || (err = nf_jeval(c, n->b, &key)))
		return err;
	if (obj->kind == JV_UNDEF)
		return undefined_err(c, n, obj);
	*out = item_of(c, obj, key);
	return *out ? 0 : nf_jerr_mem(c, n);
}

/* A slice bound: absent (NULL, none) gives def, else an int. */
static int slice_bound(nf_jctx *c, const nf_jnode *n, long long def, long long *out)
{
	nf_jv *v = NULL;
	int err;
	*out = def;
	if (!n)
		return 0;
	if ((err = nf_jeval(c, n, &v)))
		return err;
	if (v->kind == JV_NONE)
		return 0;
	if (v->kind != JV_INT && v->kind != JV_BOOL)
		return nf_jerr(c, n, "slice indices must be integers or None");
	*out = v->kind == JV_INT ? v->u.i : v->u.b;
	return 0;
}

/* Python's slice.indices(): clamp start and stop for the step's direction. */
static void slice_clamp(long long *start, long long *stop, long long step, long long len, bool has_start,
			bool has_stop)
{
	long long lo = step < 0 ? -1 : 0, hi = step < 0 ? len - 1 : len;
	long long *ends[2] = {start, stop};
	bool given[2] = {has_start, has_stop};
	long long defs[2] = {step < 0 ? hi : lo, step < 0 ? lo : hi};
	for (int k = 0; k < 2; k++) {
		long long *x = ends[k];
		if (!given[k]) {
			*x = defs[k];
			continue;
		}
		if (*x < 0)
			*x = *x + len < lo ? lo : *x + len;
		else if (*x > hi)
			*x = hi;
	}
}

static int eval_slice(nf_jctx *c, const nf_jnode *n, nf_jv **out)
{
	nf_jv *obj = NULL;
	long long start, stop, step;
	int err = nf_jeval(c, n->a, &obj);
	if (err || (err = slice_bound(c, n->b, 0, &start)) || (err = slice_bound(c, n->c, 0, &stop)) ||
	    (err = slice_bound(c, n->d, 1, &step)))
		return err;
	if (obj->kind == JV_UNDEF)
		return undefined_err(c, n, obj);
	if (obj->kind != JV_LIST && obj->kind != JV_STR)
		return nf_jerr(c, n, "'%s' object is not subscriptable", nf_jv_type_name(obj));
	if (step == 0)
		return nf_jerr(c, n, "slice step cannot be zero");
	bool is_str = obj->kind == JV_STR;
	long long len = (long long)(is_str ? nf_utf8_count(obj->u.s.p, obj->u.s.n) : obj->u.l.n);
	slice_clamp(&start, &stop, step, len, n->b != NULL, n->c != NULL);
	nf_jv *r = nf_jv_new(c, is_str ? JV_STR : JV_LIST);
	nf_jbuf b = {.c = c};
	for (long long i = start; r && (step > 0 ? i < stop : i > stop); i += step) {
		if (++c->steps > c->lim.max_steps)
			return nf_jerr(c, n, "the render took more than %zu steps", c->lim.max_steps);
		if (is_str) {
			size_t from = nf_utf8_offset(obj->u.s.p, obj->u.s.n, (size_t)i);
			nf_jbuf_add(&b, obj->u.s.p + from, nf_utf8_offset(obj->u.s.p + from, obj->u.s.n - from, 1));
		} else if (nf_jv_push(c, r, obj->u.l.v[i])) {
			r = NULL;
		}
	}
	if (!r || b.failed)
		return nf_jerr_mem(c, n);
	if (is_str) {
		r->u.s.p = b.p ? b.p : "";
		r->u.s.n = b.n;
	}
	*out = r;
	return 0;
}

/* Evaluate n's arguments into arena arrays. */
static int eval_args(nf_jctx *c, const nf_jnode *n, nf_jv ***args)
{
	*args = NULL;
	if (!n->nargs)
		return 0;
	if (!(*args = nf_jarena_alloc(&c->arena, n->nargs * sizeof(**args))))
		return nf_jerr_mem(c, n);
	for (size_t i = 0; i < n->nargs; i++) {
		int err = nf_jeval(c, n->args[i], &(*args)[i]);
		if (err)
			return err;
	}
	return 0;
}

static int call_macro(nf_jctx *c, const nf_jnode *at, nf_jv *fn, nf_jv **args, const char **names,
		      size_t nargs, nf_jv **out)
{
	const nf_jnode *m = fn->u.m.node;
	nf_jframe *saved = NULL;
	int err = 0;
	if (push_frame(c, c->globals, &saved))
		return nf_jerr_mem(c, at);
	for (size_t p = 0; p < m->nargs && !err; p++) {
		const nf_jnode *param = m->args[p];
		nf_jv *v = NULL;
		for (size_t i = 0; i < nargs; i++)
			if (names[i] ? strcmp(names[i], param->name) == 0 : i == p)
				v = args[i];
		if (!v && param->a)
			err = nf_jeval(c, param->a, &v);
		else if (!v && !(v = nf_jv_undef(c, param->name)))
			err = nf_jerr_mem(c, at);
		if (!err)
			err = bind(c, param, param->name, param->name_len, v);
	}
	for (size_t i = 0; i < nargs && !err; i++)
		if (!names[i] && i >= m->nargs)
			err = nf_jerr(c, at, "macro '%s' takes not more than %zu argument(s)", m->name, m->nargs);
	if (!err)
		err = capture(c, m->b, out);
	c->frame = saved;
	return err;
}

int nf_jcall_value(nf_jctx *c, const nf_jnode *at, nf_jv *fn, nf_jv **args, const char **names,
		   size_t nargs, nf_jv **out)
{
	if (fn->kind == JV_MACRO)
		return call_macro(c, at, fn, args, names, nargs, out);
	if (fn->kind == JV_FUNC)
		return nf_jcall_builtin(c, at, fn, args, names, nargs, out);
	if (fn->kind == JV_UNDEF)
		return undefined_err(c, at, fn);
	return nf_jerr(c, at, "'%s' object is not callable", nf_jv_type_name(fn));
}

static int eval_call(nf_jctx *c, const nf_jnode *n, nf_jv **out)
{
	nf_jv *fn = NULL, **args = NULL;
	int err = nf_jeval(c, n->a, &fn);
	if (err || (err = eval_args(c, n, &args)))
		return err;
	return nf_jcall_value(c, n, fn, args, n->argnames, n->nargs, out);
}

static int eval_filter(nf_jctx *c, const nf_jnode *n, nf_jv **out)
{
	nf_jv *v = NULL, **args = NULL;
	int err = nf_jeval(c, n->a, &v);
	if (err || (err = eval_args(c, n, &args)))
		return err;
	return nf_jfilter(c, n, n->name, v, args, n->argnames, n->nargs, out);
}

static int eval_test(nf_jctx *c, const nf_jnode *n, nf_jv **out)
{
	nf_jv *v = NULL, **args = NULL;
	bool r = false;
	int err = nf_jeval(c, n->a, &v);
	if (err || (err = eval_args(c, n, &args)) || (err = nf_jtest(c, n, n->name, v, args, n->nargs, &r)))
		return err;
	*out = nf_jv_bool(c, r != n->negate);
	return *out ? 0 : nf_jerr_mem(c, n);
}

static int eval_unary(nf_jctx *c, const nf_jnode *n, nf_jv **out)
{
	nf_jv *v = NULL;
	int err = nf_jeval(c, n->a, &v);
	if (err)
		return err;
	if (n->op == 'n')
		*out = nf_jv_bool(c, !nf_jv_truthy(v));
	else if (v->kind == JV_INT || v->kind == JV_BOOL)
		*out = nf_jv_int(c, (n->op == '-' ? -1 : 1) * (v->kind == JV_INT ? v->u.i : v->u.b));
	else if (v->kind == JV_FLOAT)
		*out = nf_jv_float(c, n->op == '-' ? -v->u.f : v->u.f);
	else if (v->kind == JV_UNDEF)
		return undefined_err(c, n, v);
	else
		return nf_jerr(c, n, "bad operand type for unary %c: '%s'", n->op, nf_jv_type_name(v));
	if (v->kind == JV_INT && v->u.i == (-9223372036854775807LL - 1) && n->op == '-')
		return nf_jerr(c, n, "integer overflow");
	return *out ? 0 : nf_jerr_mem(c, n);
}

static int eval_binary(nf_jctx *c, const nf_jnode *n, nf_jv **out)
{
	nf_jv *a = NULL, *b = NULL;
	int err = nf_jeval(c, n->a, &a);
	if (err || (err = nf_jeval(c, n->b, &b)))
		return err;
	return nf_jbinary(c, n, n->op, a, b, out);
}

/* and/or give one of their operands, as in Python. */
static int eval_logic(nf_jctx *c, const nf_jnode *n, nf_jv **out)
{
	int err = nf_jeval(c, n->a, out);
	if (err || nf_jv_truthy(*out) == (n->kind == JN_OR))
		return err;
	return nf_jeval(c, n->b, out);
}

static int eval_cond(nf_jctx *c, const nf_jnode *n, nf_jv **out)
{
	nf_jv *cond = NULL;
	int err = nf_jeval(c, n->a, &cond);
	if (err)
		return err;
	if (nf_jv_truthy(cond))
		return nf_jeval(c, n->b, out);
	if (n->c)
		return nf_jeval(c, n->c, out);
	*out = nf_jv_undef(c, "if-expression without else");
	return *out ? 0 : nf_jerr_mem(c, n);
}

static int eval_list(nf_jctx *c, const nf_jnode *n, nf_jv **out)
{
	nf_jv **items = NULL, *l = nf_jv_new(c, JV_LIST);
	int err = eval_args(c, n, &items);
	if (err)
		return err;
	for (size_t i = 0; l && i < n->nargs; i++)
		if (nf_jv_push(c, l, items[i]))
			l = NULL;
	if (l)
		l->tuple = n->kind == JN_TUPLE;
	*out = l;
	return l ? 0 : nf_jerr_mem(c, n);
}

static int eval_dict(nf_jctx *c, const nf_jnode *n, nf_jv **out)
{
	nf_jv **items = NULL, *d = nf_jv_new(c, JV_DICT);
	int err = eval_args(c, n, &items);
	if (err)
		return err;
	for (size_t i = 0; d && i + 1 < n->nargs; i += 2)
		if (nf_jv_dict_set(c, d, items[i], items[i + 1]))
			d = NULL;
	*out = d;
	return d ? 0 : nf_jerr_mem(c, n);
}

static int enter(nf_jctx *c, const nf_jnode *n)
{
	if (++c->steps > c->lim.max_steps)
		return nf_jerr(c, n, "the render took more than %zu steps", c->lim.max_steps);
	if (++c->depth > MAX_EVAL_DEPTH)
		return nf_jerr(c, n, "expressions or calls nested more than %d deep", MAX_EVAL_DEPTH);
	return 0;
}

int nf_jeval(nf_jctx *c, const nf_jnode *n, nf_jv **out)
{
	int err = enter(c, n);
	if (err)
		return err;
	switch (n->kind) {
	case JN_CONST: *out = n->konst; break;
	case JN_NAME: err = eval_name(c, n, out); break;
	case JN_ATTR: err = eval_attr(c, n, out); break;
	case JN_ITEM: err = eval_item(c, n, out); break;
	case JN_SLICE: err = eval_slice(c, n, out); break;
	case JN_CALL: err = eval_call(c, n, out); break;
	case JN_FILTER: err = eval_filter(c, n, out); break;
	case JN_TEST: err = eval_test(c, n, out); break;
	case JN_UNARY: err = eval_unary(c, n, out); break;
	case JN_BINARY: err = eval_binary(c, n, out); break;
	case JN_AND:
	case JN_OR: err = eval_logic(c, n, out); break;
	case JN_COND: err = eval_cond(c, n, out); break;
	case JN_LIST:
	case JN_TUPLE: err = eval_list(c, n, out); break;
	case JN_DICT: err = eval_dict(c, n, out); break;
	default: err = nf_jerr(c, n, "not an expression");
	}
	c->depth--;
	return err;
}

/* ---- statements ---- */

static int exec_body(nf_jctx *c, const nf_jnode *n)
{
	for (size_t i = 0; i < n->nargs && !c->jump; i++) {
		int err = nf_jexec(c, n->args[i]);
		if (err)
			return err;
	}
	return 0;
}

static int exec_output(nf_jctx *c, const nf_jnode *n)
{
	nf_jv *v = NULL, *s;
	int err = nf_jeval(c, n->a, &v);
	if (err)
		return err;
	if (!(s = nf_jv_to_str(c, v)))
		return nf_jerr_mem(c, n);
	return emit(c, n, s->u.s.p, s->u.s.n);
}

static int exec_if(nf_jctx *c, const nf_jnode *n)
{
	nf_jv *cond = NULL;
	int err = nf_jeval(c, n->a, &cond);
	if (err)
		return err;
	if (nf_jv_truthy(cond))
		return nf_jexec(c, n->b);
	return n->c ? nf_jexec(c, n->c) : 0;
}

/* The items a for loop walks: a list's items, a dict's keys, a string's characters. */
static int iter_items(nf_jctx *c, const nf_jnode *at, nf_jv *v, nf_jv **out)
{
	nf_jv *l = nf_jv_new(c, JV_LIST);
	if (!l)
		return nf_jerr_mem(c, at);
	*out = l;
	switch (v->kind) {
	case JV_LIST: *out = v; return 0;
	case JV_UNDEF: return 0;
	case JV_DICT:
		for (size_t i = 0; i < v->u.d.n; i++)
			if (nf_jv_push(c, l, v->u.d.k[i]))
				return nf_jerr_mem(c, at);
		return 0;
	case JV_STR:
		for (size_t i = 0; i < v->u.s.n;) {
			size_t k = nf_utf8_offset(v->u.s.p + i, v->u.s.n - i, 1);
			if (nf_jv_push(c, l, nf_jv_str(c, v->u.s.p + i, k)))
				return nf_jerr_mem(c, at);
			i += k;
		}
		return 0;
	default: return nf_jerr(c, at, "'%s' object is not iterable", nf_jv_type_name(v));
	}
}

/* Keep the items for which the loop's "if" holds (loop.length counts only those). */
static int loop_filter(nf_jctx *c, const nf_jnode *n, nf_jv **items)
{
	nf_jv *kept = nf_jv_new(c, JV_LIST);
	nf_jframe *saved = NULL;
	int err = 0;
	if (!kept || push_frame(c, c->frame, &saved))
		return nf_jerr_mem(c, n);
	for (size_t i = 0; i < (*items)->u.l.n && !err; i++) {
		nf_jv *cond = NULL, *item = (*items)->u.l.v[i];
		if (!(err = assign(c, n->a, item)) && !(err = nf_jeval(c, n->e, &cond)) && nf_jv_truthy(cond) &&
		    nf_jv_push(c, kept, item))
			err = nf_jerr_mem(c, n);
	}
	c->frame = saved;
	*items = kept;
	return err;
}

static int set_field(nf_jctx *c, nf_jv *d, const char *k, nf_jv *v)
{
	return nf_jv_dict_set(c, d, nf_jv_str(c, k, strlen(k)), v);
}

static nf_jv *loop_value(nf_jctx *c, nf_jv *items, size_t i)
{
	size_t n = items->u.l.n;
	nf_jv *l = nf_jv_new(c, JV_LOOP), *none = nf_jv_new(c, JV_NONE);
	if (!l || !none || set_field(c, l, "index", nf_jv_int(c, (long long)i + 1)) ||
	    set_field(c, l, "index0", nf_jv_int(c, (long long)i)) ||
	    set_field(c, l, "revindex", nf_jv_int(c, (long long)(n - i))) ||
	    set_field(c, l, "revindex0", nf_jv_int(c, (long long)(n - i - 1))) ||
	    set_field(c, l, "first", nf_jv_bool(c, i == 0)) || set_field(c, l, "last", nf_jv_bool(c, i + 1 == n)) ||
	    set_field(c, l, "length", nf_jv_int(c, (long long)n)) || set_field(c, l, "depth", nf_jv_int(c, 1)) ||
	    set_field(c, l, "depth0", nf_jv_int(c, 0)) ||
	    set_field(c, l, "previtem", i ? items->u.l.v[i - 1] : nf_jv_undef(c, "previtem")) ||
	    set_field(c, l, "nextitem", i + 1 < n ? items->u.l.v[i + 1] : nf_jv_undef(c, "nextitem")))
		return NULL;
	return l;
}

static int exec_for(nf_jctx *c, const nf_jnode *n)
{
	nf_jv *seq = NULL, *items = NULL;
	int err = nf_jeval(c, n->b, &seq);
	if (err || (err = iter_items(c, n->b, seq, &items)) || (n->e && (err = loop_filter(c, n, &items))))
		return err;
	for (size_t i = 0; i < items->u.l.n && !err; i++) {
		nf_jframe *saved = NULL;
		nf_jv *loop = loop_value(c, items, i);
		if (++c->steps > c->lim.max_steps)
			return nf_jerr(c, n, "the render took more than %zu steps", c->lim.max_steps);
		if (!loop || push_frame(c, c->frame, &saved))
			return nf_jerr_mem(c, n);
		if (!(err = bind(c, n, "loop", 4, loop)) && !(err = assign(c, n->a, items->u.l.v[i])))
			err = nf_jexec(c, n->c);
		c->frame = saved;
		if (c->jump == JN_BREAK) {
			c->jump = 0;
			break;
		}
		c->jump = 0;
	}
	if (!err && items->u.l.n == 0 && n->d)
		err = nf_jexec(c, n->d);
	return err;
}

static int exec_set(nf_jctx *c, const nf_jnode *n)
{
	nf_jv *v = NULL;
	int err = n->kind == JN_SET ? nf_jeval(c, n->b, &v) : capture(c, n->b, &v);
	if (err)
		return err;
	if (n->a->kind != JN_ATTR)
		return assign(c, n->a, v);
	nf_jv *ns = lookup(c, n->a->a->name, n->a->a->name_len);
	if (!ns || ns->kind != JV_NS)
		return nf_jerr(c, n->a, "cannot assign attribute on non-namespace object");
	if (nf_jv_dict_set(c, ns, nf_jv_str(c, n->a->name, n->a->name_len), v))
		return nf_jerr_mem(c, n);
	return 0;
}

static int exec_macro(nf_jctx *c, const nf_jnode *n)
{
	nf_jv *m = nf_jv_new(c, JV_MACRO);
	if (!m)
		return nf_jerr_mem(c, n);
	m->u.m.node = n;
	return bind(c, n, n->name, n->name_len, m);
}

int nf_jexec(nf_jctx *c, const nf_jnode *n)
{
	int err = enter(c, n);
	if (err)
		return err;
	switch (n->kind) {
	case JN_BODY: err = exec_body(c, n); break;
	case JN_TEXT: err = emit(c, n, n->name, n->name_len); break;
	case JN_OUTPUT: err = exec_output(c, n); break;
	case JN_IF: err = exec_if(c, n); break;
	case JN_FOR: err = exec_for(c, n); break;
	case JN_SET:
	case JN_SET_BLOCK: err = exec_set(c, n); break;
	case JN_MACRO: err = exec_macro(c, n); break;
	case JN_BREAK:
	case JN_CONTINUE: c->jump = n->kind; break;
	default: err = nf_jerr(c, n, "not a statement");
	}
	c->depth--;
	return err;
}
