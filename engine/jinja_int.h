/*
 * jinja_int.h - what the parts of the Jinja interpreter share: the arena
 * both the syntax tree and a render's values live in, tokens, syntax nodes,
 * values, and the evaluator's state.  Not a public header (engine/jinja.h is).
 */
#ifndef NF_ENGINE_JINJA_INT_H
#define NF_ENGINE_JINJA_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/jinja.h"

/* Nesting of the source (brackets, statements) the parser accepts: deeper
 * input is refused, so no recursion on it can overflow the stack. */
#define NF_JINJA_MAX_NEST 128

/* ---- arena: many small allocations, one free; a byte cap ---- */

typedef struct nf_jarena {
	struct nf_jchunk *head;
	size_t used; /* bytes handed out, the cap applies to this */
	size_t max;
	bool over; /* the cap (not malloc) refused an allocation */
} nf_jarena;

void nf_jarena_init(nf_jarena *a, size_t max);
void nf_jarena_release(nf_jarena *a);
void *nf_jarena_alloc(nf_jarena *a, size_t n); /* zeroed; NULL when refused */
char *nf_jarena_strdup(nf_jarena *a, const char *s, size_t n);

/* ---- tokens ---- */

typedef enum nf_jtok_kind {
	JT_EOF,
	JT_TEXT,        /* template text, after whitespace control */
	JT_VAR_BEGIN,   /* {{ */
	JT_VAR_END,     /* }} */
	JT_BLOCK_BEGIN, /* {% */
	JT_BLOCK_END,   /* %} */
	JT_NAME,
	JT_STRING,      /* text holds the unescaped value */
	JT_INT,
	JT_FLOAT,
	JT_OP,          /* text holds the operator: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : | */
} nf_jtok_kind;

typedef struct nf_jtok {
	nf_jtok_kind kind;
	unsigned line, col;
	const char *text; /* arena, NUL-terminated */
	size_t len;
	long long i;
	double f;
} nf_jtok;

/* Split src into tokens (arena-allocated).  NF_EINPUT "WHAT:LINE:COL: ..." on error. */
int nf_jinja_lex(nf_jtok **out, size_t *n, nf_jarena *a, const char *src, size_t len,
		 const char *what);

/* ---- values ---- */

typedef enum nf_jv_kind {
	JV_UNDEF,
	JV_NONE,
	JV_BOOL,
	JV_INT,
	JV_FLOAT,
	JV_STR,
	JV_LIST,  /* also tuples: jinja renders and compares them alike for our purposes */
	JV_DICT,
	JV_NS,    /* namespace(): a dict whose attributes can be assigned */
	JV_LOOP,  /* the loop variable: a dict of its fields */
	JV_FUNC,  /* a global function, or a method bound to its object */
	JV_MACRO,
} nf_jv_kind;

struct nf_jnode;

typedef struct nf_jv {
	uint8_t kind;
	union {
		bool b;
		long long i;
		double f;
		struct { const char *p; size_t n; } s;
		struct { struct nf_jv **v; size_t n, cap; } l;
		struct { struct nf_jv **k, **v; size_t n, cap; } d; /* DICT, NS, LOOP */
		struct { int id; const char *name; struct nf_jv *self; } fn;
		struct { const struct nf_jnode *node; } m;
	} u;
	const char *undef_name; /* JV_UNDEF: what was missing, for messages */
	bool tuple;             /* JV_LIST made as a tuple: printed (a, b) */
} nf_jv;

/* ---- syntax tree ---- */

typedef enum nf_jnode_kind {
	/* statements */
	JN_BODY,     /* args: statements */
	JN_TEXT,     /* name: the text */
	JN_OUTPUT,   /* a: expression */
	JN_IF,       /* a: condition, b: body, c: else (body or JN_IF) */
	JN_FOR,      /* a: target, b: iterable, c: body, d: else, e: filter condition */
	JN_SET,      /* a: target, b: value */
	JN_SET_BLOCK,/* a: target, b: body */
	JN_MACRO,    /* name; args: parameters (JN_NAME, default in a); b: body */
	JN_BREAK,
	JN_CONTINUE,
	/* expressions */
	JN_CONST,    /* konst */
	JN_NAME,     /* name */
	JN_ATTR,     /* a.name */
	JN_ITEM,     /* a[b] */
	JN_SLICE,    /* a[b:c:d], absent parts NULL */
	JN_CALL,     /* a(args) */
	JN_FILTER,   /* a | name(args) */
	JN_TEST,     /* a is [not] name(args) */
	JN_UNARY,    /* op a: '-', '+', 'n' (not) */
	JN_BINARY,   /* a op b */
	JN_AND,
	JN_OR,
	JN_COND,     /* b if a else c */
	JN_LIST,     /* args */
	JN_TUPLE,    /* args */
	JN_DICT,     /* args: keys and values alternating */
} nf_jnode_kind;

/* Binary operators (JN_BINARY op). */
enum {
	JOP_ADD = 1, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW, JOP_CONCAT,
	JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN,
};

typedef struct nf_jnode {
	uint8_t kind;
	int op;
	bool negate; /* JN_TEST: "is not" */
	unsigned line, col;
	struct nf_jnode *a, *b, *c, *d, *e;
	struct nf_jnode **args;
	const char **argnames; /* keyword names of args, NULL for positional ones */
	size_t nargs;
	const char *name;
	size_t name_len;
	nf_jv *konst;
} nf_jnode;

/* Parse tokens into a JN_BODY tree in the arena. */
int nf_jinja_parse(nf_jnode **out, nf_jarena *a, const nf_jtok *toks, size_t n, const char *what);

/* ---- the render ---- */

typedef struct nf_jframe {
	struct nf_jframe *parent;
	nf_jv *vars; /* a JV_DICT */
} nf_jframe;

typedef struct nf_jctx {
	nf_jarena arena;
	nf_jinja_limits lim;
	const char *what;
	size_t steps, depth;
	char *out;
	size_t out_len, out_cap;
	nf_jframe *frame, *globals;
	int jump; /* JN_BREAK or JN_CONTINUE pending, else 0 */
} nf_jctx;

/* Error at a node: NF_EINPUT "WHAT:LINE:COL: message". */
int nf_jerr(nf_jctx *c, const nf_jnode *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Out of memory or over the memory cap, as an error code with its message. */
int nf_jerr_mem(nf_jctx *c, const nf_jnode *n);

/* Values (jinja_value.c).  All allocate in c->arena and return NULL when it refuses. */
nf_jv *nf_jv_new(nf_jctx *c, nf_jv_kind k);
nf_jv *nf_jv_str(nf_jctx *c, const char *p, size_t n);
nf_jv *nf_jv_int(nf_jctx *c, long long i);
nf_jv *nf_jv_float(nf_jctx *c, double f);
nf_jv *nf_jv_bool(nf_jctx *c, bool b);
nf_jv *nf_jv_undef(nf_jctx *c, const char *name);
int nf_jv_push(nf_jctx *c, nf_jv *list, nf_jv *item);                 /* 0 or -1 */
int nf_jv_dict_set(nf_jctx *c, nf_jv *d, nf_jv *key, nf_jv *val);     /* 0 or -1 */
nf_jv *nf_jv_dict_get(const nf_jv *d, const char *key, size_t n);     /* NULL if absent */
nf_jv *nf_jv_dict_find(const nf_jv *d, const nf_jv *key);
nf_jv *nf_jv_from_json(nf_jctx *c, const json_t *j, size_t depth);
bool nf_jv_truthy(const nf_jv *v);
bool nf_jv_is_str(const nf_jv *v, const char *s);
/* Python ==, with ints, floats and bools compared as numbers; depth-bounded (-1 too deep). */
int nf_jv_equal(nf_jctx *c, const nf_jv *a, const nf_jv *b, size_t depth);
/* str(v) as Python prints it (lists and dicts by repr); NULL when refused. */
nf_jv *nf_jv_to_str(nf_jctx *c, const nf_jv *v);
/* Append to a growable arena buffer. */
typedef struct nf_jbuf {
	nf_jctx *c;
	char *p;
	size_t n, cap;
	bool failed;
	bool too_deep;
} nf_jbuf;
void nf_jbuf_add(nf_jbuf *b, const char *s, size_t n);
void nf_jbuf_adds(nf_jbuf *b, const char *s);
/* str/repr of v appended to b. */
void nf_jv_write(nf_jbuf *b, const nf_jv *v, bool repr, size_t depth);
/* json.dumps(v, ensure_ascii, indent (<0: none), separators, sort_keys) appended to b;
 * -1 when v holds something JSON cannot, with *bad the kind name. */
typedef struct nf_jjson_opts {
	bool ensure_ascii, sort_keys;
	long indent;
	const char *item_sep, *key_sep;
} nf_jjson_opts;
int nf_jv_write_json(nf_jbuf *b, const nf_jv *v, const nf_jjson_opts *o, size_t depth,
		     const char **bad);
const char *nf_jv_type_name(const nf_jv *v);
/* Code points of UTF-8 s (invalid bytes count one each). */
size_t nf_utf8_count(const char *s, size_t n);
/* Byte offset of code point i in s (n when i is past the end). */
size_t nf_utf8_offset(const char *s, size_t n, size_t i);

/* Evaluation (jinja_eval.c). */
int nf_jeval(nf_jctx *c, const nf_jnode *n, nf_jv **out);
int nf_jexec(nf_jctx *c, const nf_jnode *n);
/* Call a macro or function value with evaluated arguments. */
int nf_jcall_value(nf_jctx *c, const nf_jnode *at, nf_jv *fn, nf_jv **args, const char **names,
		   size_t nargs, nf_jv **out);

/* a op b for JN_BINARY's operators (jinja_ops.c). */
int nf_jbinary(nf_jctx *c, const nf_jnode *n, int op, nf_jv *a, nf_jv *b, nf_jv **out);

/* Built-ins (jinja_builtins.c): each returns 0, or an error through nf_jerr at `at`. */
int nf_jfilter(nf_jctx *c, const nf_jnode *at, const char *name, nf_jv *v, nf_jv **args,
	       const char **names, size_t nargs, nf_jv **out);
int nf_jtest(nf_jctx *c, const nf_jnode *at, const char *name, nf_jv *v, nf_jv **args,
	     size_t nargs, bool *out);
/* obj.name: a method bound to obj, or NULL when obj has no such method. */
nf_jv *nf_jmethod(nf_jctx *c, nf_jv *obj, const char *name);
/* The argument at position pos, or the keyword argument name (NULL: none). */
nf_jv *nf_jarg(nf_jv **args, const char **names, size_t nargs, size_t pos, const char *name);
/* Python's str.strip/lstrip/rstrip: chars NULL or none strips whitespace.  -1 on memory. */
int nf_jstrip(nf_jctx *c, const nf_jv *s, const nf_jv *chars, bool left, bool right, nf_jv **out);
/* Case mapping of ASCII letters: 'u' upper, 'l' lower, 'c' capitalize, 't' str.title, 'j' jinja's title. */
nf_jv *nf_jcase(nf_jctx *c, const nf_jv *s, char mode);
/* Python's str.replace (count < 0: all).  -1 on memory. */
int nf_jreplace(nf_jctx *c, const nf_jv *s, const nf_jv *old, const nf_jv *new_, long long count,
		nf_jv **out);
/* dict.items(): a list of [key, value] pairs; NULL on memory. */
nf_jv *nf_jitems(nf_jctx *c, const nf_jv *d);
/* A global function by name (range, namespace, raise_exception, ...), or NULL. */
nf_jv *nf_jglobal(nf_jctx *c, const char *name);
int nf_jcall_builtin(nf_jctx *c, const nf_jnode *at, nf_jv *fn, nf_jv **args, const char **names,
		     size_t nargs, nf_jv **out);

#endif
