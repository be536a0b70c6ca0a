/*
 * jinja_parse.c - tokens to a syntax tree, by recursive descent with
 * jinja2's precedence (lowest first): a if b else c, or, and, not,
 * comparisons and in, + -, ~, * / // %, **, unary - +, then postfix
 * (.attr, [key], [a:b:c], calls), filters and tests.  Recursion is bounded
 * by NF_JINJA_MAX_NEST, so hostile nesting is an error, not a crash.
 */
#include "engine/jinja_int.h"

#include <string.h>

#include "util/error.h"
#include "util/banned.h"

typedef struct parser {
	nf_jarena *a;
	const char *what;
	const nf_jtok *t;
	size_t n, i;
	size_t depth;
	int loops; /* for bodies open around here: break and continue need one */
} parser;

/* A growable array of node pointers (and keyword names) in the arena. */
typedef struct nodevec {
	nf_jnode **v;
	const char **names;
	size_t n, cap;
} nodevec;

static int parse_expr(parser *P, nf_jnode **out, bool cond);
static int parse_tuple(parser *P, nf_jnode **out, bool cond);
static int parse_unary(parser *P, nf_jnode **out, bool filters);
static int parse_body(parser *P, nf_jnode **out, const char *const *ends);

static const nf_jtok *cur(const parser *P) { return &P->t[P->i < P->n ? P->i : P->n - 1]; }

/* "WHAT:LINE:COL: message" at token t; fmt has one %s for arg, or none when arg is NULL. */
static int perr_at(parser *P, const nf_jtok *t, const char *fmt, const char *arg)
{
	char msg[256];
	if (arg)
		snprintf(msg, sizeof(msg), fmt, arg);
	else
		snprintf(msg, sizeof(msg), "%s", fmt);
	return nf_error_set(NF_EINPUT, "%s:%u:%u: %s", P->what, t->line, t->col, msg);
}

static int perr(parser *P, const char *fmt, const char *arg) { return perr_at(P, cur(P), fmt, arg); }

static int pmem(parser *P)
{
	return P->a->over ? perr(P, "template too large", NULL)
			  : nf_error_set(NF_ENOMEM, "%s: out of memory", P->what);
}

static const char *tok_desc(const nf_jtok *t)
{
	switch (t->kind) {
	case JT_EOF: return "end of template";
	case JT_TEXT: return "template text";
	case JT_VAR_BEGIN: return "'{{'";
	case JT_VAR_END: return "'}}'";
	case JT_BLOCK_BEGIN: return "'{%'";
	case JT_BLOCK_END: return "'%}'";
	case JT_STRING: return "a string";
	case JT_INT:
	case JT_FLOAT: return "a number";
	default: return t->text;
	}
}

static int unexpected(parser *P)
{
	const nf_jtok *t = cur(P);
	if (t->kind == JT_NAME || t->kind == JT_OP)
		return perr(P, "unexpected '%s'", t->text);
	return perr(P, "unexpected %s", tok_desc(t));
}

static bool is_op(const parser *P, const char *op)
{
	const nf_jtok *t = cur(P);
	return t->kind == JT_OP && strcmp(t->text, op) == 0;
}

static bool is_name(const parser *P, const char *name)
{
	const nf_jtok *t = cur(P);
	return t->kind == JT_NAME && strcmp(t->text, name) == 0;
}

static bool accept_op(parser *P, const char *op)
{
	if (!is_op(P, op))
		return false;
	P->i++;
	return true;
}

static bool accept_name(parser *P, const char *name)
{
	if (!is_name(P, name))
		return false;
	P->i++;
	return true;
}

static int expect_op(parser *P, const char *op)
{
	if (accept_op(P, op))
		return 0;
	const nf_jtok *t = cur(P);
	char msg[96];
	snprintf(msg, sizeof(msg), "expected '%s', got %s%s%s", op, t->kind == JT_NAME || t->kind == JT_OP ? "'" : "",
		 tok_desc(t), t->kind == JT_NAME || t->kind == JT_OP ? "'" : "");
	return perr(P, "%s", msg);
}

static int expect_kind(parser *P, nf_jtok_kind k, const char *what)
{
	if (cur(P)->kind == k) {
		P->i++;
		return 0;
	}
	const nf_jtok *t = cur(P);
	char msg[96];
	snprintf(msg, sizeof(msg), "expected %s, got %s%s%s", what, t->kind == JT_NAME || t->kind == JT_OP ? "'" : "",
		 tok_desc(t), t->kind == JT_NAME || t->kind == JT_OP ? "'" : "");
	return perr(P, "%s", msg);
}

static nf_jnode *mk(parser *P, nf_jnode_kind k, const nf_jtok *at)
{
	nf_jnode *n = nf_jarena_alloc(P->a, sizeof(*n));
	if (n) {
		n->kind = (uint8_t)k;
		n->line = at->line;
		n->col = at->col;
	}
	return n;
}

static int vec_push(parser *P, nodevec *v, nf_jnode *n, const char *name)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 4;
		nf_jnode **nv = nf_jarena_alloc(P->a, cap * sizeof(*nv));
		const char **nn = nf_jarena_alloc(P->a, cap * sizeof(*nn));
		if (!nv || !nn)
			return pmem(P);
		if (v->n) {
			memcpy(nv, v->v, v->n * sizeof(*nv));
			memcpy(nn, v->names, v->n * sizeof(*nn));
		}
		v->v = nv;
		v->names = nn;
		v->cap = cap;
	}
	v->v[v->n] = n;
	v->names[v->n++] = name;
	return 0;
}

static void vec_into(nf_jnode *n, const nodevec *v)
{
	n->args = v->v;
	n->argnames = v->names;
	n->nargs = v->n;
}

static int enter(parser *P)
{
	if (++P->depth > NF_JINJA_MAX_NEST)
		return perr(P, "nesting too deep", NULL);
	return 0;
}

/* ---- expressions ---- */

static int make_const(parser *P, const nf_jtok *t, nf_jnode **out)
{
	nf_jnode *n = mk(P, JN_CONST, t);
	nf_jv *v = nf_jarena_alloc(P->a, sizeof(*v));
	if (!n || !v)
		return pmem(P);
	n->konst = v;
	*out = n;
	return 0;
}

static int parse_string(parser *P, nf_jnode **out)
{
	const nf_jtok *first = cur(P);
	size_t len = 0, k = P->i;
	for (; k < P->n && P->t[k].kind == JT_STRING; k++) /* 'a' 'b' is 'ab', as in Python */
		len += P->t[k].len;
	char *s = nf_jarena_alloc(P->a, len + 1);
	if (!s || make_const(P, first, out))
		return pmem(P);
	len = 0;
	for (; P->i < k; P->i++) {
		memcpy(s + len, P->t[P->i].text, P->t[P->i].len);
		len += P->t[P->i].len;
	}
	(*out)->konst->kind = JV_STR;
	(*out)->konst->u.s.p = s;
	(*out)->konst->u.s.n = len;
	return 0;
}

static int parse_name_primary(parser *P, nf_jnode **out)
{
	const nf_jtok *t = cur(P);
	static const char *const consts[] = {"true", "True", "false", "False", "none", "None"};
	for (size_t i = 0; i < 6; i++) {
		if (strcmp(t->text, consts[i]) == 0) {
			if (make_const(P, t, out))
				return pmem(P);
			(*out)->konst->kind = i < 4 ? JV_BOOL : JV_NONE;
			(*out)->konst->u.b = i < 2;
			P->i++;
			return 0;
		}
	}
	nf_jnode *n = mk(P, JN_NAME, t);
	if (!n)
		return pmem(P);
	n->name = t->text;
	n->name_len = t->len;
	P->i++;
	*out = n;
	return 0;
}

/* [a, b], (a, b) or {k: v}: items up to the closing bracket. */
static int parse_seq(parser *P, nf_jnode **out, nf_jnode_kind kind, const char *close)
{
	nodevec v = {0};
	nf_jnode *n = mk(P, kind, cur(P));
	if (!n)
		return pmem(P);
	P->i++;
	while (!is_op(P, close)) {
		nf_jnode *item = NULL;
		int err = parse_expr(P, &item, true);
		if (!err)
			err = vec_push(P, &v, item, NULL);
		if (!err && kind == JN_DICT && !(err = expect_op(P, ":")) && !(err = parse_expr(P, &item, true)))
			err = vec_push(P, &v, item, NULL);
		if (err)
			return err;
		if (!accept_op(P, ","))
			break;
	}
	vec_into(n, &v);
	*out = n;
	return expect_op(P, close);
}

static int parse_paren(parser *P, nf_jnode **out)
{
	const nf_jtok *open = cur(P);
	if (P->i + 1 < P->n && P->t[P->i + 1].kind == JT_OP && strcmp(P->t[P->i + 1].text, ")") == 0)
		return parse_seq(P, out, JN_TUPLE, ")"); /* () */
	P->i++;
	nf_jnode *e = NULL;
	int err = parse_expr(P, &e, true);
	if (err)
		return err;
	if (is_op(P, ",")) { /* (a, b, ...) */
		nodevec v = {0};
		nf_jnode *t = mk(P, JN_TUPLE, open);
		if (!t || vec_push(P, &v, e, NULL))
			return pmem(P);
		while (accept_op(P, ",") && !is_op(P, ")")) {
			if ((err = parse_expr(P, &e, true)) || (err = vec_push(P, &v, e, NULL)))
				return err;
		}
		vec_into(t, &v);
		e = t;
	}
	*out = e;
	return expect_op(P, ")");
}

static int parse_primary(parser *P, nf_jnode **out)
{
	const nf_jtok *t = cur(P);
	switch (t->kind) {
	case JT_NAME:
		return parse_name_primary(P, out);
	case JT_STRING:
		return parse_string(P, out);
	case JT_INT:
	case JT_FLOAT:
		if (make_const(P, t, out))
			return pmem(P);
		(*out)->konst->kind = t->kind == JT_INT ? JV_INT : JV_FLOAT;
		if (t->kind == JT_INT)
			(*out)->konst->u.i = t->i;
		else
			(*out)->konst->u.f = t->f;
		P->i++;
		return 0;
	case JT_OP:
		if (is_op(P, "("))
			return parse_paren(P, out);
		if (is_op(P, "["))
			return parse_seq(P, out, JN_LIST, "]");
		if (is_op(P, "{"))
			return parse_seq(P, out, JN_DICT, "}");
		return unexpected(P);
	default:
		return unexpected(P);
	}
}

/* (args) of a call, filter or test: positional, then name=value. */
static int parse_args(parser *P, nf_jnode *n)
{
	nodevec v = {0};
	int err = 0;
	P->i++; /* ( */
	while (!err && !is_op(P, ")")) {
		const char *kw = NULL;
		nf_jnode *e = NULL;
		if (cur(P)->kind == JT_NAME && P->i + 1 < P->n && P->t[P->i + 1].kind == JT_OP &&
		    strcmp(P->t[P->i + 1].text, "=") == 0) {
			kw = cur(P)->text;
			P->i += 2;
		} else if (v.n && v.names[v.n - 1]) {
			return perr(P, "positional argument after a keyword argument", NULL);
		}
		if (!(err = parse_expr(P, &e, true)))
			err = vec_push(P, &v, e, kw);
		if (!err && !accept_op(P, ","))
			break;
	}
	if (err)
		return err;
	vec_into(n, &v);
	return expect_op(P, ")");
}

static int parse_subscript(parser *P, nf_jnode **node)
{
	const nf_jtok *t = cur(P);
	nf_jnode *n;
	int err = 0;
	if (accept_op(P, ".")) {
		const nf_jtok *name = cur(P);
		if (name->kind == JT_INT) { /* x.0 is x[0] */
			if (!(n = mk(P, JN_ITEM, t)) || make_const(P, name, &n->b))
				return pmem(P);
			n->b->konst->kind = JV_INT;
			n->b->konst->u.i = name->i;
		} else {
			if (name->kind != JT_NAME)
				return expect_kind(P, JT_NAME, "an attribute name");
			if (!(n = mk(P, JN_ATTR, t)))
				return pmem(P);
			n->name = name->text;
			n->name_len = name->len;
		}
		P->i++;
		n->a = *node;
		*node = n;
		return 0;
	}
	P->i++; /* [ */
	nf_jnode *parts[3] = {NULL, NULL, NULL};
	int nparts = 0;
	bool slice = false;
	for (;;) {
		if (!is_op(P, ":") && !is_op(P, "]") && (err = parse_expr(P, &parts[nparts], true)))
			return err;
		if (nparts < 2 && accept_op(P, ":")) {
			slice = true;
			nparts++;
			continue;
		}
		break;
	}
	if (!(n = mk(P, slice ? JN_SLICE : JN_ITEM, t)))
		return pmem(P);
	n->a = *node;
	if (slice) {
		n->b = parts[0];
		n->c = parts[1];
		n->d = parts[2];
	} else if (!(n->b = parts[0])) {
		return unexpected(P);
	}
	*node = n;
	return expect_op(P, "]");
}

static int parse_postfix(parser *P, nf_jnode **node)
{
	for (;;) {
		int err = 0;
		if (is_op(P, ".") || is_op(P, "[")) {
			err = parse_subscript(P, node);
		} else if (is_op(P, "(")) {
			nf_jnode *c = mk(P, JN_CALL, cur(P));
			if (!c)
				return pmem(P);
			c->a = *node;
			err = parse_args(P, c);
			*node = c;
		} else {
			return 0;
		}
		if (err)
			return err;
	}
}

/* A test's single bare argument ("is sameas false", "is divisibleby 3")? */
static bool bare_test_arg(const parser *P)
{
	const nf_jtok *t = cur(P);
	if (t->kind == JT_STRING || t->kind == JT_INT || t->kind == JT_FLOAT)
		return true;
	if (t->kind == JT_OP)
		return is_op(P, "[") || is_op(P, "{");
	if (t->kind != JT_NAME)
		return false;
	return !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and") && !is_name(P, "if") &&
	       !is_name(P, "in") && !is_name(P, "is") && !is_name(P, "not") && !is_name(P, "recursive");
}

static int parse_filter_or_test(parser *P, nf_jnode **node)
{
	bool test = is_name(P, "is");
	nf_jnode *n = mk(P, test ? JN_TEST : JN_FILTER, cur(P));
	int err;
	if (!n)
		return pmem(P);
	P->i++;
	if (test)
		n->negate = accept_name(P, "not");
	const nf_jtok *name = cur(P);
	if ((err = expect_kind(P, JT_NAME, test ? "a test name" : "a filter name")))
		return err;
	n->name = name->text;
	n->name_len = name->len;
	n->a = *node;
	*node = n;
	if (is_op(P, "("))
		return parse_args(P, n);
	if (test && bare_test_arg(P)) {
		nodevec v = {0};
		nf_jnode *arg = NULL;
		if ((err = parse_unary(P, &arg, false)) || (err = vec_push(P, &v, arg, NULL)))
			return err;
		vec_into(n, &v);
	}
	return 0;
}

static int parse_unary(parser *P, nf_jnode **out, bool filters)
{
	int err = enter(P);
	if (err)
		return err;
	const nf_jtok *t = cur(P);
	if (is_op(P, "-") || is_op(P, "+")) {
		nf_jnode *n = mk(P, JN_UNARY, t);
		if (!n)
			return pmem(P);
		n->op = t->text[0];
		P->i++;
		if ((err = parse_unary(P, &n->a, false)))
			return err;
		*out = n;
	} else if ((err = parse_primary(P, out))) {
		return err;
	}
	if ((err = parse_postfix(P, out)))
		return err;
	while (filters && (is_op(P, "|") || is_name(P, "is"))) {
		if ((err = parse_filter_or_test(P, out)) || (err = parse_postfix(P, out)))
			return err;
	}
	P->depth--;
	return 0;
}

typedef struct binop {
	const char *tok;
	int op;
} binop;

/* Levels of left-associative binary operators, loosest first. */
static const binop levels[4][5] = {
	{{"+", JOP_ADD}, {"-", JOP_SUB}},
	{{"~", JOP_CONCAT}},
	{{"*", JOP_MUL}, {"/", JOP_DIV}, {"//", JOP_FLOORDIV}, {"%", JOP_MOD}},
	{{"**", JOP_POW}},
};

static int parse_level(parser *P, nf_jnode **out, int level)
{
	if (level == 4)
		return parse_unary(P, out, true);
	int err = parse_level(P, out, level + 1);
	while (!err) {
		const binop *b = NULL;
		for (size_t k = 0; k < 5 && levels[level][k].tok; k++)
			if (is_op(P, levels[level][k].tok))
				b = &levels[level][k];
		if (!b)
			break;
		nf_jnode *n = mk(P, JN_BINARY, cur(P));
		if (!n)
			return pmem(P);
		P->i++;
		n->op = b->op;
		n->a = *out;
		err = parse_level(P, &n->b, level + 1);
		*out = n;
	}
	return err;
}

static int compare_op(parser *P)
{
	static const binop ops[] = {{"==", JOP_EQ}, {"!=", JOP_NE}, {"<", JOP_LT},
				    {"<=", JOP_LE}, {">", JOP_GT}, {">=", JOP_GE}};
	for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
		if (accept_op(P, ops[k].tok))
			return ops[k].op;
	if (accept_name(P, "in"))
		return JOP_IN;
	if (is_name(P, "not") && P->i + 1 < P->n && P->t[P->i + 1].kind == JT_NAME &&
	    strcmp(P->t[P->i + 1].text, "in") == 0) {
		P->i += 2;
		return JOP_NOTIN;
	}
	return 0;
}

/* a < b < c is (a < b) and (b < c), as in Python. */
static int parse_compare(parser *P, nf_jnode **out)
{
	nf_jnode *left = NULL, *result = NULL;
	int err = parse_level(P, &left, 0);
	for (int op; !err;) {
		const nf_jtok *at = cur(P);
		if (!(op = compare_op(P)))
			break;
		nf_jnode *n = mk(P, JN_BINARY, at);
		if (!n)
			return pmem(P);
		n->op = op;
		n->a = left;
		if ((err = parse_level(P, &n->b, 0)))
			return err;
		left = n->b;
		if (result) {
			nf_jnode *both = mk(P, JN_AND, at);
			if (!both)
				return pmem(P);
			both->a = result;
			both->b = n;
			n = both;
		}
		result = n;
	}
	*out = result ? result : left;
	return err;
}

static int parse_not(parser *P, nf_jnode **out)
{
	if (is_name(P, "not")) {
		int err = enter(P);
		nf_jnode *n = mk(P, JN_UNARY, cur(P));
		if (err)
			return err;
		if (!n)
			return pmem(P);
		P->i++;
		n->op = 'n';
		if ((err = parse_not(P, &n->a)))
			return err;
		P->depth--;
		*out = n;
		return 0;
	}
	return parse_compare(P, out);
}

static int parse_logic(parser *P, nf_jnode **out, bool is_or)
{
	int err = is_or ? parse_logic(P, out, false) : parse_not(P, out);
	while (!err && is_name(P, is_or ? "or" : "and")) {
		nf_jnode *n = mk(P, is_or ? JN_OR : JN_AND, cur(P));
		if (!n)
			return pmem(P);
		P->i++;
		n->a = *out;
		err = is_or ? parse_logic(P, &n->b, false) : parse_not(P, &n->b);
		*out = n;
	}
	return err;
}

static int parse_expr(parser *P, nf_jnode **out, bool cond)
{
	int err = enter(P);
	if (err || (err = parse_logic(P, out, true)))
		return err;
	while (cond && is_name(P, "if")) {
		nf_jnode *n = mk(P, JN_COND, cur(P));
		if (!n)
			return pmem(P);
		P->i++;
		n->b = *out;
		if ((err = parse_logic(P, &n->a, true)))
			return err;
		if (accept_name(P, "else") && (err = parse_expr(P, &n->c, true)))
			return err;
		*out = n;
	}
	P->depth--;
	return 0;
}

/* An expression, or a tuple when commas follow ("a, b" in set and for). */
static int parse_tuple(parser *P, nf_jnode **out, bool cond)
{
	const nf_jtok *at = cur(P);
	int err = parse_expr(P, out, cond);
	if (err || !is_op(P, ","))
		return err;
	nodevec v = {0};
	nf_jnode *t = mk(P, JN_TUPLE, at);
	if (!t || vec_push(P, &v, *out, NULL))
		return pmem(P);
	while (accept_op(P, ",")) {
		if (cur(P)->kind == JT_BLOCK_END || cur(P)->kind == JT_VAR_END || is_op(P, "=") || is_name(P, "in"))
			break;
		nf_jnode *e = NULL;
		if ((err = parse_expr(P, &e, cond)) || (err = vec_push(P, &v, e, NULL)))
			return err;
	}
	vec_into(t, &v);
	*out = t;
	return 0;
}

/* ---- statements ---- */

/* Targets of for and set: a name, "a, b", "(a, b)", or for set "ns.attr". */
static int parse_target(parser *P, nf_jnode **out, bool attr_ok)
{
	nodevec v = {0};
	const nf_jtok *at = cur(P);
	bool paren = accept_op(P, "(");
	int err;
	do {
		const nf_jtok *name = cur(P);
		nf_jnode *n = mk(P, JN_NAME, name);
		if ((err = expect_kind(P, JT_NAME, "a variable name")))
			return err;
		if (!n)
			return pmem(P);
		n->name = name->text;
		n->name_len = name->len;
		if (attr_ok && !paren && !v.n && is_op(P, ".")) {
			nf_jnode *a = mk(P, JN_ATTR, cur(P));
			P->i++;
			const nf_jtok *attr = cur(P);
			if ((err = expect_kind(P, JT_NAME, "an attribute name")))
				return err;
			if (!a)
				return pmem(P);
			a->a = n;
			a->name = attr->text;
			a->name_len = attr->len;
			*out = a;
			return 0;
		}
		if ((err = vec_push(P, &v, n, NULL)))
			return err;
	} while (accept_op(P, ",") && cur(P)->kind == JT_NAME);
	if (paren && (err = expect_op(P, ")")))
		return err;
	if (v.n == 1 && !paren) {
		*out = v.v[0];
		return 0;
	}
	nf_jnode *t = mk(P, JN_TUPLE, at);
	if (!t)
		return pmem(P);
	vec_into(t, &v);
	*out = t;
	return 0;
}

static int end_block(parser *P) { return expect_kind(P, JT_BLOCK_END, "'%}'"); }

static int parse_if(parser *P, nf_jnode **out)
{
	static const char *const ends[] = {"elif", "else", "endif", NULL};
	nf_jnode *n = mk(P, JN_IF, cur(P));
	int err = enter(P); /* elif recurses */
	if (err)
		return err;
	if (!n)
		return pmem(P);
	P->i++; /* if or elif */
	if ((err = parse_tuple(P, &n->a, true)) || (err = end_block(P)) || (err = parse_body(P, &n->b, ends)))
		return err;
	*out = n;
	if (is_name(P, "elif")) {
		err = parse_if(P, &n->c);
	} else {
		static const char *const endif[] = {"endif", NULL};
		if (accept_name(P, "else") && ((err = end_block(P)) || (err = parse_body(P, &n->c, endif))))
			return err;
		P->i++; /* endif */
		err = end_block(P);
	}
	P->depth--;
	return err;
}

static int parse_for(parser *P, nf_jnode **out)
{
	static const char *const ends[] = {"else", "endfor", NULL}, *const endfor[] = {"endfor", NULL};
	nf_jnode *n = mk(P, JN_FOR, cur(P));
	int err;
	if (!n)
		return pmem(P);
	P->i++;
	if ((err = parse_target(P, &n->a, false)))
		return err;
	if (!accept_name(P, "in"))
		return perr(P, "expected 'in', got %s", tok_desc(cur(P)));
	if ((err = parse_tuple(P, &n->b, false)))
		return err;
	if (accept_name(P, "if") && (err = parse_expr(P, &n->e, false)))
		return err;
	if (is_name(P, "recursive"))
		return perr(P, "recursive loops are not supported", NULL);
	P->loops++;
	err = end_block(P);
	if (!err)
		err = parse_body(P, &n->c, ends);
	P->loops--;
	if (err)
		return err;
	if (accept_name(P, "else") && ((err = end_block(P)) || (err = parse_body(P, &n->d, endfor))))
		return err;
	P->i++; /* endfor */
	*out = n;
	return end_block(P);
}

static int parse_set(parser *P, nf_jnode **out)
{
	static const char *const ends[] = {"endset", NULL};
	nf_jnode *n = mk(P, JN_SET, cur(P));
	int err;
	if (!n)
		return pmem(P);
	P->i++;
	if ((err = parse_target(P, &n->a, true)))
		return err;
	*out = n;
	if (accept_op(P, "="))
		return (err = parse_tuple(P, &n->b, true)) ? err : end_block(P);
	if (n->a->kind != JN_NAME)
		return perr(P, "expected '='", NULL);
	n->kind = JN_SET_BLOCK;
	if ((err = end_block(P)) || (err = parse_body(P, &n->b, ends)))
		return err;
	P->i++;
	return end_block(P);
}

static int parse_macro(parser *P, nf_jnode **out)
{
	static const char *const ends[] = {"endmacro", NULL};
	nodevec v = {0};
	nf_jnode *n = mk(P, JN_MACRO, cur(P));
	int err;
	if (!n)
		return pmem(P);
	P->i++;
	const nf_jtok *name = cur(P);
	if ((err = expect_kind(P, JT_NAME, "a macro name")) || (err = expect_op(P, "(")))
		return err;
	n->name = name->text;
	n->name_len = name->len;
	int loops = P->loops; /* a macro body is outside any loop */
	P->loops = 0;
	while (!is_op(P, ")")) {
		const nf_jtok *pname = cur(P);
		nf_jnode *p = mk(P, JN_NAME, pname);
		if ((err = expect_kind(P, JT_NAME, "a parameter name")))
			return err;
		if (!p)
			return pmem(P);
		p->name = pname->text;
		p->name_len = pname->len;
		if (accept_op(P, "=") && (err = parse_expr(P, &p->a, true)))
			return err;
		if ((err = vec_push(P, &v, p, NULL)) || !accept_op(P, ","))
			break;
	}
	if (err || (err = expect_op(P, ")")) || (err = end_block(P)) || (err = parse_body(P, &n->b, ends)))
		return err;
	P->loops = loops;
	vec_into(n, &v);
	P->i++;
	(void)accept_name(P, name->text); /* {% endmacro name %} */
	*out = n;
	return end_block(P);
}

static int parse_simple(parser *P, nf_jnode **out, nf_jnode_kind kind, const char *const *ends)
{
	nf_jnode *n = mk(P, kind, cur(P));
	int err;
	if (!n)
		return pmem(P);
	P->i++;
	*out = n;
	if ((err = end_block(P)) || !ends)
		return err;
	/* generation: only its body matters here (transformers uses it to mark assistant text) */
	if ((err = parse_body(P, out, ends)))
		return err;
	P->i++;
	return end_block(P);
}

static int parse_statement(parser *P, nf_jnode **out)
{
	static const char *const endgen[] = {"endgeneration", NULL};
	const nf_jtok *t = cur(P);
	if (t->kind != JT_NAME)
		return perr(P, "expected a statement name, got %s", tok_desc(t));
	if (is_name(P, "if"))
		return parse_if(P, out);
	if (is_name(P, "for"))
		return parse_for(P, out);
	if (is_name(P, "set"))
		return parse_set(P, out);
	if (is_name(P, "macro"))
		return parse_macro(P, out);
	if ((is_name(P, "break") || is_name(P, "continue")) && !P->loops)
		return perr(P, "'%s' outside a for loop", t->text);
	if (is_name(P, "break"))
		return parse_simple(P, out, JN_BREAK, NULL);
	if (is_name(P, "continue"))
		return parse_simple(P, out, JN_CONTINUE, NULL);
	if (is_name(P, "generation"))
		return parse_simple(P, out, JN_BODY, endgen);
	return perr(P, "unknown or unexpected tag '%s'", t->text);
}

static bool is_end(const parser *P, const char *const *ends)
{
	for (size_t k = 0; ends && ends[k]; k++)
		if (is_name(P, ends[k]))
			return true;
	return false;
}

static int parse_output(parser *P, nf_jnode **out)
{
	nf_jnode *n = mk(P, JN_OUTPUT, cur(P));
	int err;
	if (!n)
		return pmem(P);
	P->i++;
	if ((err = parse_tuple(P, &n->a, true)))
		return err;
	*out = n;
	return expect_kind(P, JT_VAR_END, "'}}'");
}

/* Statements up to a {% NAME %} with NAME in ends (left at NAME), or the end. */
static int parse_body(parser *P, nf_jnode **out, const char *const *ends)
{
	const nf_jtok *start = cur(P);
	nodevec v = {0};
	nf_jnode *body = mk(P, JN_BODY, start);
	int err = enter(P);
	if (err)
		return err;
	if (!body)
		return pmem(P);
	for (;;) {
		const nf_jtok *t = cur(P);
		nf_jnode *n = NULL;
		if (t->kind == JT_EOF) {
			size_t k = 0;
			while (ends && ends[k + 1])
				k++;
			if (ends) /* name the closing tag: {% endif %}, not {% elif %} */
				return perr(P, "unexpected end of template, expected '%s'", ends[k]);
			break;
		}
		if (t->kind == JT_TEXT) {
			if (!(n = mk(P, JN_TEXT, t)))
				return pmem(P);
			n->name = t->text;
			n->name_len = t->len;
			P->i++;
		} else if (t->kind == JT_VAR_BEGIN) {
			err = parse_output(P, &n);
		} else if (t->kind == JT_BLOCK_BEGIN) {
			P->i++;
			if (is_end(P, ends))
				break;
			err = parse_statement(P, &n);
		} else {
			err = unexpected(P);
		}
		if (err || (err = vec_push(P, &v, n, NULL)))
			return err;
	}
	vec_into(body, &v);
	*out = body;
	P->depth--;
	return 0;
}

int nf_jinja_parse(nf_jnode **out, nf_jarena *a, const nf_jtok *toks, size_t n, const char *what)
{
	parser P = {.a = a, .what = what, .t = toks, .n = n};
	return parse_body(&P, out, NULL);
}
