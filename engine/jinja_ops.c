/*
 * jinja_ops.c - binary operators with Python's meaning: + on numbers,
 * strings and lists, * repeating strings and lists, true division /,
 * floor division // and modulo % rounding towards minus infinity, **,
 * ~ joining the str() of both sides, comparisons and "in".  Python's ints
 * do not overflow; ours are 64-bit and say so instead of wrapping.
 */
#include "engine/jinja_int.h"

#include <math.h>
#include <string.h>

#include "util/checked.h"
#include "util/banned.h"

static bool is_num(const nf_jv *v) { return v->kind == JV_BOOL || v->kind == JV_INT || v->kind == JV_FLOAT; }
static bool is_int(const nf_jv *v) { return v->kind == JV_BOOL || v->kind == JV_INT; }
static long long ival(const nf_jv *v) { return v->kind == JV_INT ? v->u.i : v->u.b; }
static double fval(const nf_jv *v) { return v->kind == JV_FLOAT ? v->u.f : (double)ival(v); }

static int type_err(nf_jctx *c, const nf_jnode *n, const char *op, const nf_jv *a, const nf_jv *b)
{
	if (a->kind == JV_UNDEF || b->kind == JV_UNDEF) {
		const nf_jv *u = a->kind == JV_UNDEF ? a : b;
		return nf_jerr(c, n, "'%s' is undefined", u->undef_name ? u->undef_name : "value");
	}
	return nf_jerr(c, n, "unsupported operand type(s) for %s: '%s' and '%s'", op, nf_jv_type_name(a),
		       nf_jv_type_name(b));
}

static int int_op(nf_jctx *c, const nf_jnode *n, int op, long long x, long long y, nf_jv **out)
{
	long long r = 0;
	bool ovf = false;
	switch (op) {
	case JOP_ADD: ovf = __builtin_add_overflow(x, y, &r); break;
	case JOP_SUB: ovf = __builtin_sub_overflow(x, y, &r); break;
	case JOP_MUL: ovf = __builtin_mul_overflow(x, y, &r); break;
	case JOP_FLOORDIV:
	case JOP_MOD:
		if (y == 0)
			return nf_jerr(c, n, "integer division or modulo by zero");
		if (x == (-9223372036854775807LL - 1) && y == -1)
			return nf_jerr(c, n, "integer overflow");
		r = op == JOP_FLOORDIV ? x / y - ((x % y != 0) && ((x < 0) != (y < 0)))
				       : x % y + ((x % y != 0) && ((x < 0) != (y < 0)) ? y : 0);
		break;
	case JOP_POW:
		if (y < 0) {
			*out = nf_jv_float(c, pow((double)x, (double)y));
			return *out ? 0 : nf_jerr_mem(c, n);
		}
		r = 1; /* by squaring: |x| >= 2 overflows within 63 rounds */
		for (long long base = x, e = y; e && !ovf; e >>= 1) {
			if (e & 1)
				ovf = __builtin_mul_overflow(r, base, &r);
			if (e > 1 && !ovf)
				ovf = __builtin_mul_overflow(base, base, &base);
		}
		break;
	}
	if (ovf)
		return nf_jerr(c, n, "integer overflow");
	*out = nf_jv_int(c, r);
	return *out ? 0 : nf_jerr_mem(c, n);
}

static int float_op(nf_jctx *c, const nf_jnode *n, int op, double x, double y, nf_jv **out)
{
	double r = 0;
	if ((op == JOP_DIV || op == JOP_FLOORDIV || op == JOP_MOD) && y == 0)
		return nf_jerr(c, n, "division by zero");
	switch (op) {
	case JOP_ADD: r = x + y; break;
	case JOP_SUB: r = x - y; break;
	case JOP_MUL: r = x * y; break;
	case JOP_DIV: r = x / y; break;
	case JOP_FLOORDIV: r = floor(x / y); break;
	case JOP_MOD: r = fmod(x, y); r += (r != 0 && ((r < 0) != (y < 0))) ? y : 0; break;
	case JOP_POW: r = pow(x, y); break;
	}
	*out = nf_jv_float(c, r);
	return *out ? 0 : nf_jerr_mem(c, n);
}

/* s * k, or list * k: repetition, bounded by the arena. */
static int repeat(nf_jctx *c, const nf_jnode *n, const nf_jv *s, long long k, nf_jv **out)
{
	nf_jv *r = nf_jv_new(c, s->kind);
	nf_jbuf b = {.c = c};
	for (long long i = 0; r && i < k; i++) {
		if (++c->steps > c->lim.max_steps)
			return nf_jerr(c, n, "the render took more than %zu steps", c->lim.max_steps);
		if (s->kind == JV_STR)
			nf_jbuf_add(&b, s->u.s.p, s->u.s.n);
		for (size_t j = 0; s->kind == JV_LIST && r && j < s->u.l.n; j++)
			if (nf_jv_push(c, r, s->u.l.v[j]))
				r = NULL;
	}
	if (!r || b.failed)
		return nf_jerr_mem(c, n);
	if (s->kind == JV_STR) {
		r->u.s.p = b.p ? b.p : "";
		r->u.s.n = b.n;
	}
	*out = r;
	return 0;
}

static int concat(nf_jctx *c, const nf_jnode *n, const nf_jv *a, const nf_jv *b, nf_jv **out)
{
	nf_jv *r = nf_jv_new(c, a->kind);
	nf_jbuf buf = {.c = c};
	if (!r)
		return nf_jerr_mem(c, n);
	if (a->kind == JV_LIST) {
		for (size_t i = 0; i < a->u.l.n + b->u.l.n; i++)
			if (nf_jv_push(c, r, i < a->u.l.n ? a->u.l.v[i] : b->u.l.v[i - a->u.l.n]))
				return nf_jerr_mem(c, n);
	} else {
		nf_jbuf_add(&buf, a->u.s.p, a->u.s.n);
		nf_jbuf_add(&buf, b->u.s.p, b->u.s.n);
		if (buf.failed)
			return nf_jerr_mem(c, n);
		r->u.s.p = buf.p ? buf.p : "";
		r->u.s.n = buf.n;
	}
	*out = r;
	return 0;
}

static int arith(nf_jctx *c, const nf_jnode *n, int op, nf_jv *a, nf_jv *b, nf_jv **out)
{
	static const char *const sym[] = {"", "+", "-", "*", "/", "//", "%", "**"};
	if (op == JOP_ADD && a->kind == b->kind && (a->kind == JV_STR || a->kind == JV_LIST))
		return concat(c, n, a, b, out);
	if (op == JOP_MUL && (a->kind == JV_STR || a->kind == JV_LIST) && is_int(b))
		return repeat(c, n, a, ival(b), out);
	if (op == JOP_MUL && (b->kind == JV_STR || b->kind == JV_LIST) && is_int(a))
		return repeat(c, n, b, ival(a), out);
	if (!is_num(a) || !is_num(b))
		return type_err(c, n, sym[op], a, b);
	if (is_int(a) && is_int(b) && op != JOP_DIV)
		return int_op(c, n, op, ival(a), ival(b), out);
	return float_op(c, n, op, fval(a), fval(b), out);
}

static int tilde(nf_jctx *c, const nf_jnode *n, nf_jv *a, nf_jv *b, nf_jv **out)
{
	nf_jv *sa = nf_jv_to_str(c, a), *sb = sa ? nf_jv_to_str(c, b) : NULL;
	if (!sb)
		return nf_jerr_mem(c, n);
	return concat(c, n, sa, sb, out);
}

static int order(nf_jctx *c, const nf_jnode *n, int op, nf_jv *a, nf_jv *b, bool *r)
{
	static const char *const sym[] = {"<", "<=", ">", ">="};
	int cmp;
	if (is_num(a) && is_num(b)) {
		if (is_int(a) && is_int(b))
			cmp = (ival(a) > ival(b)) - (ival(a) < ival(b));
		else if (isnan(fval(a)) || isnan(fval(b)))
			return *r = false, 0;
		else
			cmp = (fval(a) > fval(b)) - (fval(a) < fval(b));
	} else if (a->kind == JV_STR && b->kind == JV_STR) {
		size_t k = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
		cmp = memcmp(a->u.s.p, b->u.s.p, k); /* UTF-8 byte order is code point order */
		cmp = cmp ? (cmp > 0) - (cmp < 0) : (a->u.s.n > b->u.s.n) - (a->u.s.n < b->u.s.n);
	} else {
		if (a->kind == JV_UNDEF || b->kind == JV_UNDEF)
			return type_err(c, n, "", a, b);
		return nf_jerr(c, n, "'%s' not supported between instances of '%s' and '%s'", sym[op - JOP_LT],
			       nf_jv_type_name(a), nf_jv_type_name(b));
	}
	*r = op == JOP_LT ? cmp < 0 : op == JOP_LE ? cmp <= 0 : op == JOP_GT ? cmp > 0 : cmp >= 0;
	return 0;
}

/* x in container: substring, list member, dict key. */
static int contains(nf_jctx *c, const nf_jnode *n, nf_jv *x, nf_jv *in, bool *r)
{
	*r = false;
	switch (in->kind) {
	case JV_STR:
		if (x->kind != JV_STR)
			return nf_jerr(c, n, "'in <string>' requires string as left operand, not %s", nf_jv_type_name(x));
		for (size_t i = 0; i + x->u.s.n <= in->u.s.n && !*r; i++)
			*r = memcmp(in->u.s.p + i, x->u.s.p, x->u.s.n) == 0;
		return 0;
	case JV_LIST:
		for (size_t i = 0; i < in->u.l.n && !*r; i++) {
			int e = nf_jv_equal(c, x, in->u.l.v[i], 0);
			if (e < 0)
				return nf_jerr(c, n, "values nested too deep to compare");
			*r = e == 1;
		}
		return 0;
	case JV_DICT:
	case JV_NS:
	case JV_LOOP: *r = nf_jv_dict_find(in, x) != NULL; return 0;
	case JV_UNDEF: return 0; /* jinja2's Undefined iterates as empty */
	default: return nf_jerr(c, n, "argument of type '%s' is not iterable", nf_jv_type_name(in));
	}
}

int nf_jbinary(nf_jctx *c, const nf_jnode *n, int op, nf_jv *a, nf_jv *b, nf_jv **out)
{
	bool r = false;
	int err = 0, e;
	switch (op) {
	case JOP_CONCAT: return tilde(c, n, a, b, out);
	case JOP_EQ:
	case JOP_NE:
		if ((e = nf_jv_equal(c, a, b, 0)) < 0)
			return nf_jerr(c, n, "values nested too deep to compare");
		r = (e == 1) == (op == JOP_EQ);
		break;
	case JOP_LT:
	case JOP_LE:
	case JOP_GT:
	case JOP_GE: err = order(c, n, op, a, b, &r); break;
	case JOP_IN:
	case JOP_NOTIN:
		err = contains(c, n, a, b, &r);
		r = r != (op == JOP_NOTIN);
		break;
	default: return arith(c, n, op, a, b, out);
	}
	if (err)
		return err;
	*out = nf_jv_bool(c, r);
	return *out ? 0 : nf_jerr_mem(c, n);
}
