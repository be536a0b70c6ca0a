/*
 * recipe.c - recipe validation: schema tables (one row per key) walked over
 * the YAML tree, filling an nf_recipe (see recipe.h, docs/recipe.md).
 *
 * Adding a key is one row in the table of the mapping it belongs to (plus
 * the struct field it fills).  Each row names the key, its type, whether it
 * is required, its range or allowed names, and optionally a check hook for
 * grammars (names, tags, digests, urls) and path resolution.  The walk stops
 * at the first mistake and reports it as "FILE:LINE:COL: message".
 */
#include "factory/recipe.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "factory/gate_defaults.h"
#include "factory/yaml_tree.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

_Static_assert(sizeof(nf_precision) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(nf_source_format) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(nf_compression) == sizeof(int), "enums are stored as int");

/* ---- names ------------------------------------------------------------ */

static const char *const format_names[] = {"auto", "llama2c", "hf", "gguf", NULL};
static const char *const kind_names[] = {"none", "url", "path", "git", NULL};
static const char *const family_names[] = {"llama", "mistral", "qwen2", NULL};
static const char *const chat_names[] = {"auto", "model", "plain", "llama2", "chatml", NULL};
static const char *const spec_method_names[] = {"none", "lookup", "draft", NULL};
static const char *const compress_names[] = {"none", "gzip", "zstd", NULL};
static const char *const layout_names[] = {"single", "per-device", NULL};

static const char *name_at(const char *const *names, size_t n, int i)
{
	return i >= 0 && (size_t)i < n ? names[i] : "unknown";
}
#define NAME_OF(tbl, i) name_at(tbl, sizeof(tbl) / sizeof(tbl[0]) - 1, (int)(i))

const char *nf_source_format_name(nf_source_format f) { return NAME_OF(format_names, f); }
const char *nf_source_kind_name(nf_source_kind k) { return NAME_OF(kind_names, k); }
const char *nf_chat_template_name(nf_chat_template t) { return NAME_OF(chat_names, t); }
const char *nf_recipe_spec_method_name(nf_recipe_spec_method m) { return NAME_OF(spec_method_names, m); }
const char *nf_compression_name(nf_compression c) { return NAME_OF(compress_names, c); }
const char *nf_image_layout_name(nf_image_layout l) { return NAME_OF(layout_names, l); }
const char *nf_model_family_name(nf_model_family f) { return NAME_OF(family_names, f); }

/* ---- walking context and errors ---------------------------------------- */

struct ctx {
	const char *file;
	const char *dir; /* absolute */
	nf_recipe *r;
	char path[512];  /* where we are: "build.targets[0].precisions" */
	size_t plen;
};

static int cerr(struct ctx *c, const nf_ynode *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int cerr(struct ctx *c, const nf_ynode *at, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return nf_error_set(NF_EINPUT, "%s:%d:%d: %s", c->file, at ? at->line : 1,
			    at ? at->col : 1, msg);
}

static int oom(void) { return nf_error_set(NF_ENOMEM, "recipe: out of memory"); }

static size_t push_key(struct ctx *c, const char *key)
{
	size_t save = c->plen;
	int n = snprintf(c->path + c->plen, sizeof(c->path) - c->plen, "%s%s", c->plen ? "." : "", key);
	if (n > 0)
		c->plen += (size_t)n < sizeof(c->path) - c->plen ? (size_t)n : sizeof(c->path) - c->plen - 1;
	return save;
}

static size_t push_index(struct ctx *c, size_t i)
{
	size_t save = c->plen;
	int n = snprintf(c->path + c->plen, sizeof(c->path) - c->plen, "[%zu]", i);
	if (n > 0)
		c->plen += (size_t)n < sizeof(c->path) - c->plen ? (size_t)n : sizeof(c->path) - c->plen - 1;
	return save;
}

static void pop(struct ctx *c, size_t save)
{
	c->plen = save;
	c->path[save] = '\0';
}

/* " in build.targets[0]" or " at the top level" */
static const char *in_where(struct ctx *c, char *buf, size_t n)
{
	if (c->plen)
		snprintf(buf, n, " in %s", c->path);
	else
		snprintf(buf, n, " at the top level");
	return buf;
}

/* ---- scalars ------------------------------------------------------------ */

enum scalar_kind { SK_NULL, SK_BOOL, SK_INT, SK_FLOAT, SK_STR };

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

/* YAML 1.2 core schema resolution of a plain scalar; quoted ones are strings. */
static enum scalar_kind scalar_kind(const nf_ynode *n)
{
	const char *s = n->str, *p;
	static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
	static const char *const bools[] = {"true", "True", "TRUE", "false", "False", "FALSE"};

	if (!n->plain)
		return SK_STR;
	for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
		if (!strcmp(s, nulls[i]))
			return SK_NULL;
	for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++)
		if (!strcmp(s, bools[i]))
			return SK_BOOL;
	p = s + (*s == '-' || *s == '+');
	if (all_digits(p))
		return SK_INT;
	/* [-+]? ( \.[0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )? */
	{
		const char *q = p;
		int mant = 0;
		while (*q >= '0' && *q <= '9')
			q++, mant = 1;
		if (*q == '.') {
			q++;
			while (*q >= '0' && *q <= '9')
				q++, mant = 1;
		}
		if (mant && (*q == 'e' || *q == 'E')) {
			q++;
			q += (*q == '-' || *q == '+');
			if (!(*q >= '0' && *q <= '9'))
				mant = 0;
			while (*q >= '0' && *q <= '9')
				q++;
		}
		if (mant && !*q)
			return SK_FLOAT;
	}
	if (!strcmp(p, ".inf") || !strcmp(p, ".Inf") || !strcmp(p, ".INF") || !strcmp(s, ".nan") ||
	    !strcmp(s, ".NaN") || !strcmp(s, ".NAN"))
		return SK_FLOAT;
	return SK_STR;
}

static const char *noun(const nf_ynode *n)
{
	if (n->type == NF_YNODE_MAP)
		return "a mapping";
	if (n->type == NF_YNODE_SEQ)
		return "a list";
	switch (scalar_kind(n)) {
	case SK_NULL: return "null";
	case SK_BOOL: return "a boolean";
	case SK_INT: return "an integer";
	case SK_FLOAT: return "a number";
	default: return "a string";
	}
}

static int type_err(struct ctx *c, const nf_ynode *v, const char *want)
{
	return cerr(c, v, "%s: expected %s, got %s", c->path, want, noun(v));
}

/* A string value: any scalar but null and booleans (numbers keep their text). */
static int want_str(struct ctx *c, const nf_ynode *v)
{
	if (v->type != NF_YNODE_SCALAR)
		return type_err(c, v, "a string");
	enum scalar_kind k = scalar_kind(v);
	if (k == SK_NULL || k == SK_BOOL)
		return type_err(c, v, "a string");
	return 0;
}

/* Nearest of names[0..n) to s within cap edits; a name s begins also counts. */
static const char *nearest(const char *s, const char *const *names, size_t n, int cap, int prefix)
{
	const char *best = NULL;
	int best_d = cap + 1;
	size_t len = strlen(s);

	if (prefix && len >= 2)
		for (size_t i = 0; i < n; i++)
			if (!strncmp(names[i], s, len))
				return names[i];
	for (size_t i = 0; i < n; i++) {
		int d = nf_sku_edit_distance(s, names[i], cap);
		if (d < best_d) {
			best_d = d;
			best = names[i];
		}
	}
	return best;
}

static size_t count_names(const char *const *names)
{
	size_t n = 0;
	while (names[n])
		n++;
	return n;
}

static int unknown_value(struct ctx *c, const nf_ynode *v, const char *what,
			 const char *const *names, size_t n, int cap)
{
	const char *near = nearest(v->str, names, n, cap, 1);
	char list[256];
	size_t used = 0;

	if (near)
		return cerr(c, v, "%s: unknown %s '%.64s'; did you mean '%s'?", c->path, what, v->str, near);
	list[0] = '\0';
	for (size_t i = 0; i < n && used < sizeof(list); i++) {
		int k = snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", names[i]);
		if (k < 0)
			break;
		used += (size_t)k;
	}
	return cerr(c, v, "%s: unknown %s '%.64s'; expected one of %s", c->path, what, v->str, list);
}

static const char *const *precision_names(void)
{
	static const char *names[NF_PREC_COUNT + 1];
	if (!names[0])
		for (int i = 0; i < NF_PREC_COUNT; i++)
			names[i] = nf_precision_name((nf_precision)i);
	return names;
}

static int lookup_precision(struct ctx *c, const nf_ynode *v, nf_precision *out)
{
	int err = want_str(c, v);
	if (err < 0)
		return err;
	for (int i = 0; i < NF_PREC_COUNT; i++)
		if (!strcmp(v->str, nf_precision_name((nf_precision)i))) {
			*out = (nf_precision)i;
			return 0;
		}
	return unknown_value(c, v, "precision", precision_names(), NF_PREC_COUNT, 3);
}

static const nf_ynode *map_get(const nf_ynode *map, const char *key)
{
	if (!map || map->type != NF_YNODE_MAP)
		return NULL;
	for (size_t i = 0; i + 1 < map->n; i += 2)
		if (map->kids[i]->type == NF_YNODE_SCALAR && !strcmp(map->kids[i]->str, key))
			return map->kids[i + 1];
	return NULL;
}

/* ---- schema ------------------------------------------------------------- */

enum ftype {
	T_STR,       /* char *; hi = max bytes */
	T_INT,       /* int in [lo, hi] */
	T_NUM,       /* double in [lo, hi] (F_GT: lo exclusive) */
	T_BOOL,      /* bool */
	T_ENUM,      /* int index into names */
	T_MAP,       /* sub-struct at off, walked with sub */
	T_LIST_MAP,  /* array of sub->size elements at off, count at off_n */
	T_STR_LIST,  /* char ** at off, count at off_n; hi = max bytes per item */
	T_PREC_LIST, /* nf_precision[NF_PREC_COUNT] at off, count at off_n; distinct */
	T_TP_LIST,   /* int[NF_RECIPE_MAX_TP] at off, count at off_n; distinct powers of two */
	T_STR_MAP,   /* nf_recipe_label * at off, count at off_n */
	T_CUSTOM,    /* hook does everything */
};

#define F_REQ 1u
#define F_GT 2u

struct schema;
typedef int (*hook_fn)(struct ctx *c, const nf_ynode *v, void *obj);

struct field {
	const char *key;
	enum ftype type;
	unsigned flags;
	double lo, hi;
	size_t nmin, nmax;        /* list/map item counts */
	const char *const *names; /* T_ENUM */
	const struct schema *sub; /* T_MAP, T_LIST_MAP */
	size_t off, off_n;
	hook_fn check; /* after storing (T_STR), or the whole parser (T_CUSTOM) */
};

typedef int (*post_fn)(struct ctx *c, const nf_ynode *map, void *obj, const nf_ynode *const *keys);

struct schema {
	const struct field *fields;
	size_t n_fields;
	size_t size;              /* element size for T_LIST_MAP */
	void (*init)(void *obj);  /* defaults of a T_LIST_MAP element */
	post_fn post;             /* cross-field checks; keys[i] is field i's key node or NULL */
};

#define MAX_FIELDS 16

static int walk_map(struct ctx *c, const nf_ynode *m, const struct schema *s, void *obj);

static int store_str(char **dst, const char *s)
{
	char *d = strdup(s);
	if (!d)
		return oom();
	free(*dst);
	*dst = d;
	return 0;
}

static int count_check(struct ctx *c, const nf_ynode *v, const struct field *f)
{
	if (v->n / (v->type == NF_YNODE_MAP ? 2 : 1) < f->nmin)
		return cerr(c, v, "%s: needs at least %zu item%s", c->path, f->nmin, f->nmin == 1 ? "" : "s");
	if (v->n / (v->type == NF_YNODE_MAP ? 2 : 1) > f->nmax)
		return cerr(c, v, "%s: more than %zu items", c->path, f->nmax);
	return 0;
}

static int parse_int(struct ctx *c, const nf_ynode *v, double lo, double hi, long long *out)
{
	long long x;
	char *end = NULL;

	if (v->type != NF_YNODE_SCALAR || scalar_kind(v) != SK_INT)
		return type_err(c, v, "an integer");
	errno = 0;
	x = strtoll(v->str, &end, 10);
	if (errno || *end || (double)x < lo || (double)x > hi)
		return cerr(c, v, "%s: %.32s is out of range %.0f..%.0f", c->path, v->str, lo, hi);
	*out = x;
	return 0;
}

static int parse_num(struct ctx *c, const nf_ynode *v, const struct field *f, double *out)
{
	double x;
	char *end = NULL;
	enum scalar_kind k;

	if (v->type != NF_YNODE_SCALAR || ((k = scalar_kind(v)) != SK_INT && k != SK_FLOAT))
		return type_err(c, v, "a number");
	errno = 0;
	x = strtod(v->str, &end);
	if (*end || !isfinite(x))
		return cerr(c, v, "%s: %.32s is not a finite number", c->path, v->str);
	if ((f->flags & F_GT) ? !(x > f->lo) : !(x >= f->lo))
		return cerr(c, v, "%s: must be %s %g, got %.32s", c->path,
			    (f->flags & F_GT) ? "greater than" : "at least", f->lo, v->str);
	if (x > f->hi)
		return cerr(c, v, "%s: %.32s is out of range %g..%g", c->path, v->str, f->lo, f->hi);
	*out = x;
	return 0;
}

static int label_cmp(const void *a, const void *b)
{
	return strcmp(((const nf_recipe_label *)a)->key, ((const nf_recipe_label *)b)->key);
}

static int label_key_ok(const char *s)
{
	if (!*s || strlen(s) > 128)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '.' || *s == '_' || *s == '-' || *s == '/'))
			return 0;
	return 1;
}

/* Each kind of field has one walker: it checks node v against row f and
 * stores it at f->off in obj (the struct that holds the field). */
typedef int (*field_walker)(struct ctx *c, const nf_ynode *v, const struct field *f, void *obj);

/* The field's storage in obj, and its count's (lists and maps). */
static void *field_at(void *obj, const struct field *f)
{
	return (char *)obj + f->off;
}

static size_t *count_at(void *obj, const struct field *f)
{
	return (size_t *)(void *)((char *)obj + f->off_n);
}

/* A string of at most f->hi bytes (when hi > 0). */
static int want_short_str(struct ctx *c, const nf_ynode *v, const struct field *f)
{
	int err = want_str(c, v);
	if (err < 0)
		return err;
	if (f->hi > 0 && (double)v->len > f->hi)
		return cerr(c, v, "%s: longer than %.0f bytes", c->path, f->hi);
	return 0;
}

/* A sequence (or, for T_STR_MAP, a mapping) whose item count is in the row's bounds. */
static int want_items(struct ctx *c, const nf_ynode *v, const struct field *f)
{
	bool map = f->type == T_STR_MAP;
	if (v->type != (map ? NF_YNODE_MAP : NF_YNODE_SEQ))
		return type_err(c, v, map ? "a mapping" : "a list");
	return count_check(c, v, f);
}

static int walk_str(struct ctx *c, const nf_ynode *v, const struct field *f, void *obj)
{
	int err;
	if ((err = want_short_str(c, v, f)) < 0 ||
	    (err = store_str((char **)field_at(obj, f), v->str)) < 0)
		return err;
	return f->check ? f->check(c, v, obj) : 0;
}

static int walk_int(struct ctx *c, const nf_ynode *v, const struct field *f, void *obj)
{
	long long x;
	int err;
	if ((err = parse_int(c, v, f->lo, f->hi, &x)) < 0)
		return err;
	*(int *)field_at(obj, f) = (int)x;
	return 0;
}

static int walk_num(struct ctx *c, const nf_ynode *v, const struct field *f, void *obj)
{
	return parse_num(c, v, f, (double *)field_at(obj, f));
}

static int walk_bool(struct ctx *c, const nf_ynode *v, const struct field *f, void *obj)
{
	if (v->type != NF_YNODE_SCALAR || scalar_kind(v) != SK_BOOL)
		return type_err(c, v, "a boolean (true or false)");
	*(bool *)field_at(obj, f) = v->str[0] == 't' || v->str[0] == 'T';
	return 0;
}

static int walk_enum(struct ctx *c, const nf_ynode *v, const struct field *f, void *obj)
{
	int err;
	if ((err = want_str(c, v)) < 0)
		return err;
	for (size_t i = 0; f->names[i]; i++)
		if (!strcmp(v->str, f->names[i])) {
			*(int *)field_at(obj, f) = (int)i;
			return 0;
		}
	return unknown_value(c, v, "value", f->names, count_names(f->names), 2);
}

static int walk_sub_map(struct ctx *c, const nf_ynode *v, const struct field *f, void *obj)
{
	return walk_map(c, v, f->sub, field_at(obj, f));
}

static int walk_list_map(struct ctx *c, const nf_ynode *v, const struct field *f, void *obj)
{
	char *arr;
	int err;
	if ((err = want_items(c, v, f)) < 0)
		return err;
	arr = calloc(v->n ? v->n : 1, f->sub->size); /* v->n <= nmax, checked above */
	if (!arr)
		return oom();
	*(void **)field_at(obj, f) = arr;
	*count_at(obj, f) = v->n;
	for (size_t i = 0; i < v->n; i++) {
		void *el = arr + i * f->sub->size;
		size_t save = push_index(c, i);
		if (f->sub->init)
			f->sub->init(el);
		err = walk_map(c, v->kids[i], f->sub, el);
		pop(c, save);
		if (err < 0)
			return err;
	}
	return 0;
}

static int walk_str_list(struct ctx *c, const nf_ynode *v, const struct field *f, void *obj)
{
	char **arr;
	int err;
	if ((err = want_items(c, v, f)) < 0)
		return err;
	arr = calloc(v->n ? v->n : 1, sizeof(*arr));
	if (!arr)
		return oom();
	*(char ***)field_at(obj, f) = arr;
	*count_at(obj, f) = v->n;
	for (size_t i = 0; i < v->n; i++) {
		size_t save = push_index(c, i);
		if ((err = want_short_str(c, v->kids[i], f)) >= 0)
			err = store_str(&arr[i], v->kids[i]->str);
		pop(c, save);
		if (err < 0)
			return err;
	}
	return 0;
}

static int walk_prec_list(struct ctx *c, const nf_ynode *v, const struct field *f, void *obj)
{
	nf_precision *arr = field_at(obj, f);
	size_t *n = count_at(obj, f);
	int err;
	if ((err = want_items(c, v, f)) < 0)
		return err;
	*n = 0;
	for (size_t i = 0; i < v->n; i++) {
		nf_precision p;
		size_t save = push_index(c, i);
		err = lookup_precision(c, v->kids[i], &p);
		for (size_t j = 0; !err && j < *n; j++)
			if (arr[j] == p)
				err = cerr(c, v->kids[i], "%s: precision '%s' is listed twice", c->path,
					   nf_precision_name(p));
		pop(c, save);
		if (err < 0)
			return err;
		arr[(*n)++] = p; /* distinct, so at most NF_PREC_COUNT */
	}
	return 0;
}

static int walk_tp_list(struct ctx *c, const nf_ynode *v, const struct field *f, void *obj)
{
	int *arr = field_at(obj, f);
	size_t *n = count_at(obj, f);
	int err;
	if ((err = want_items(c, v, f)) < 0)
		return err;
	*n = 0;
	for (size_t i = 0; i < v->n; i++) {
		long long x;
		size_t save = push_index(c, i);
		err = parse_int(c, v->kids[i], 1, 64, &x);
		if (!err && (x & (x - 1)))
			err = cerr(c, v->kids[i], "%s: %lld is not a power of two", c->path, x);
		for (size_t j = 0; !err && j < *n; j++)
			if (arr[j] == (int)x)
				err = cerr(c, v->kids[i], "%s: %lld is listed twice", c->path, x);
		pop(c, save);
		if (err < 0)
			return err;
		arr[(*n)++] = (int)x; /* distinct powers of two in 1..64: at most 7 */
	}
	return 0;
}

/* One label of a T_STR_MAP into arr[*n]: a well-formed key that is not among
 * arr[0..*n), and a string value of at most 4096 bytes. */
static int add_label(struct ctx *c, nf_recipe_label *arr, size_t *n, const nf_ynode *k,
		     const nf_ynode *val)
{
	size_t save;
	int err;
	if (k->type != NF_YNODE_SCALAR || !label_key_ok(k->str))
		return cerr(c, k, "%s: bad key; label keys are 1..128 of [A-Za-z0-9._/-]", c->path);
	for (size_t j = 0; j < *n; j++)
		if (!strcmp(arr[j].key, k->str))
			return cerr(c, k, "duplicate key '%s' in %s", k->str, c->path);
	save = push_key(c, k->str);
	err = want_str(c, val);
	if (!err && val->len > 4096)
		err = cerr(c, val, "%s: longer than 4096 bytes", c->path);
	pop(c, save);
	if (err < 0)
		return err;
	/* counted even when a strdup fails, so that the free routine frees the half-made pair */
	if (!(arr[*n].key = strdup(k->str)) || !(arr[*n].value = strdup(val->str))) {
		(*n)++;
		return oom();
	}
	(*n)++;
	return 0;
}

static int walk_str_map(struct ctx *c, const nf_ynode *v, const struct field *f, void *obj)
{
	nf_recipe_label *arr;
	size_t *n = count_at(obj, f);
	int err;
	if ((err = want_items(c, v, f)) < 0)
		return err;
	arr = calloc(v->n / 2 + 1, sizeof(*arr));
	if (!arr)
		return oom();
	*(nf_recipe_label **)field_at(obj, f) = arr;
	*n = 0;
	for (size_t i = 0; i + 1 < v->n; i += 2)
		if ((err = add_label(c, arr, n, v->kids[i], v->kids[i + 1])) < 0)
			return err;
	qsort(arr, *n, sizeof(*arr), label_cmp);
	return 0;
}

static int walk_custom(struct ctx *c, const nf_ynode *v, const struct field *f, void *obj)
{
	return f->check(c, v, obj);
}

/* The walker of each enum ftype, in its order. */
static const field_walker field_walkers[] = {
	[T_STR] = walk_str,
	[T_INT] = walk_int,
	[T_NUM] = walk_num,
	[T_BOOL] = walk_bool,
	[T_ENUM] = walk_enum,
	[T_MAP] = walk_sub_map,
	[T_LIST_MAP] = walk_list_map,
	[T_STR_LIST] = walk_str_list,
	[T_PREC_LIST] = walk_prec_list,
	[T_TP_LIST] = walk_tp_list,
	[T_STR_MAP] = walk_str_map,
	[T_CUSTOM] = walk_custom,
};

static int walk_field(struct ctx *c, const nf_ynode *v, const struct field *f, void *obj)
{
	if ((size_t)f->type >= sizeof(field_walkers) / sizeof(field_walkers[0]) ||
	    !field_walkers[f->type])
		return nf_error_set(NF_EINTERNAL, "recipe: bad schema row '%s'", f->key);
	return field_walkers[f->type](c, v, f, obj);
}

static int walk_map(struct ctx *c, const nf_ynode *m, const struct schema *s, void *obj)
{
	const nf_ynode *keys[MAX_FIELDS] = {0};
	char where[600];
	int err;

	if (m->type != NF_YNODE_MAP)
		return type_err(c, m, "a mapping");
	for (size_t i = 0; i + 1 < m->n; i += 2) {
		const nf_ynode *k = m->kids[i], *v = m->kids[i + 1];
		const struct field *f = NULL;
		size_t fi, save;

		if (k->type != NF_YNODE_SCALAR)
			return cerr(c, k, "keys must be strings, got %s%s", noun(k),
				    in_where(c, where, sizeof(where)));
		for (fi = 0; fi < s->n_fields; fi++)
			if (!strcmp(k->str, s->fields[fi].key)) {
				f = &s->fields[fi];
				break;
			}
		if (!f) {
			const char *names[MAX_FIELDS];
			const char *near;
			for (size_t j = 0; j < s->n_fields; j++)
				names[j] = s->fields[j].key;
			near = nearest(k->str, names, s->n_fields, 2, 0);
			if (near)
				return cerr(c, k, "unknown key '%.64s'%s; did you mean '%s'?", k->str,
					    in_where(c, where, sizeof(where)), near);
			return cerr(c, k, "unknown key '%.64s'%s", k->str, in_where(c, where, sizeof(where)));
		}
		if (keys[fi])
			return cerr(c, k, "duplicate key '%s'%s (first at line %d)", k->str,
				    in_where(c, where, sizeof(where)), keys[fi]->line);
		keys[fi] = k;
		save = push_key(c, f->key);
		err = walk_field(c, v, f, obj);
		pop(c, save);
		if (err < 0)
			return err;
	}
	for (size_t fi = 0; fi < s->n_fields; fi++)
		if ((s->fields[fi].flags & F_REQ) && !keys[fi])
			return cerr(c, m, "missing required key '%s'%s", s->fields[fi].key,
				    in_where(c, where, sizeof(where)));
	return s->post ? s->post(c, m, obj, keys) : 0;
}

/* ---- checks of single values -------------------------------------------- */

static int is_lower_alnum(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'); }

static int hex_lower(char *s, size_t want)
{
	size_t n = 0;
	for (; s[n]; n++) {
		char ch = s[n];
		if (ch >= 'A' && ch <= 'F')
			s[n] = (char)(ch - 'A' + 'a');
		else if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
			return 0;
	}
	return n == want;
}

static int check_model_name(struct ctx *c, const nf_ynode *v, void *obj)
{
	const char *s = v->str;
	int okay = is_lower_alnum(s[0]);
	for (size_t i = 1; okay && s[i]; i++)
		okay = is_lower_alnum(s[i]) || s[i] == '.' || s[i] == '_' || s[i] == '-';
	if (!okay)
		return cerr(c, v, "%s: bad name '%.64s'; use [a-z0-9][a-z0-9._-]*", c->path, s);
	return 0;
}

static int check_sha256(struct ctx *c, const nf_ynode *v, void *obj)
{
	nf_recipe_source *src = obj;
	if (!hex_lower(src->sha256, 64))
		return cerr(c, v, "%s: bad sha256 '%.80s'; expected 64 hex digits", c->path, v->str);
	return 0;
}

static int check_commit(struct ctx *c, const nf_ynode *v, void *obj)
{
	nf_recipe_git *g = obj;
	if (!hex_lower(g->commit, 40))
		return cerr(c, v, "%s: bad commit '%.64s'; expected the full 40-hex-digit commit id",
			    c->path, v->str);
	return 0;
}

static int no_space_or_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

static int has_prefix(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

static int check_url(struct ctx *c, const nf_ynode *v, void *obj)
{
	const char *s = v->str;
	const char *rest = has_prefix(s, "https://") ? s + 8 : has_prefix(s, "http://") ? s + 7 :
			   has_prefix(s, "file://") ? s + 7 : NULL;
	if (!rest || !*rest || !no_space_or_control(s))
		return cerr(c, v, "%s: bad url '%.80s'; expected an https://, http:// or file:// url",
			    c->path, s);
	return 0;
}

static int check_git_url(struct ctx *c, const nf_ynode *v, void *obj)
{
	const char *s = v->str, *colon = strchr(s, ':'), *slash = strchr(s, '/');
	static const char *const schemes[] = {"https://", "http://", "ssh://", "git://", "file://"};
	int okay = 0;

	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (has_prefix(s, schemes[i]) && s[strlen(schemes[i])])
			okay = 1;
	/* scp-like: [user@]host:path */
	if (!okay && colon && colon != s && colon[1] && (!slash || colon < slash))
		okay = 1;
	if (!okay || s[0] == '-' || !no_space_or_control(s))
		return cerr(c, v,
			    "%s: bad git url '%.80s'; expected https://, http://, ssh://, git://, "
			    "file:// or user@host:path",
			    c->path, s);
	return 0;
}

/* A path inside a git repository: relative, no "..". */
static int check_git_path(struct ctx *c, const nf_ynode *v, void *obj)
{
	const char *s = v->str;
	int bad = s[0] == '/' || !*s;
	for (const char *p = s; !bad && *p; p++)
		if (p[0] == '.' && p[1] == '.' && (p == s || p[-1] == '/') && (p[2] == '/' || !p[2]))
			bad = 1;
	if (bad)
		return cerr(c, v, "%s: bad path '%.80s'; expected a relative path inside the repository",
			    c->path, s);
	return 0;
}

/* Resolve a written path against the recipe's folder into a new string. */
static char *resolve_path(const struct ctx *c, const char *written)
{
	if (written[0] == '/')
		return strdup(written);
	while (written[0] == '.' && written[1] == '/') {
		written += 2;
		while (*written == '/')
			written++;
	}
	if (!*written || !strcmp(written, "."))
		return strdup(c->dir);
	return nf_path_join(c->dir, written);
}

static int check_source_path(struct ctx *c, const nf_ynode *v, void *obj)
{
	nf_recipe_source *src = obj;
	if (!*v->str)
		return cerr(c, v, "%s: empty path", c->path);
	free(src->path_written);
	src->path_written = src->path;
	if (!(src->path = resolve_path(c, src->path_written)))
		return oom();
	return 0;
}

/* A text file a recipe names (written as `written`): *resolved gets its
 * path from the recipe's folder; it must be a readable regular file of 1
 * to NF_RECIPE_MAX_EVAL_TEXT bytes. */
static int check_text_file(struct ctx *c, const nf_ynode *v, const char *written, char **resolved)
{
	uint64_t size = 0;
	if (!*v->str)
		return cerr(c, v, "%s: empty path", c->path);
	free(*resolved);
	if (!(*resolved = resolve_path(c, written)))
		return oom();
	if (nf_fs_is_dir(*resolved) || nf_fs_file_size(&size, *resolved) < 0 ||
	    access(*resolved, R_OK) != 0)
		return cerr(c, v, "%s: cannot read '%.200s'", c->path, written);
	if (size == 0 || size > NF_RECIPE_MAX_EVAL_TEXT)
		return cerr(c, v, "%s: '%.200s' is %llu bytes; a text file here has 1 to %u", c->path,
			    written, (unsigned long long)size, NF_RECIPE_MAX_EVAL_TEXT);
	return 0;
}

/* build.quantization.calibration_text (check_text_file). */
static int check_calibration_path(struct ctx *c, const nf_ynode *v, void *obj)
{
	nf_recipe_quant *q = obj;
	free(q->calibration_text_written);
	q->calibration_text_written = q->calibration_text;
	q->calibration_text = NULL;
	return check_text_file(c, v, q->calibration_text_written, &q->calibration_text);
}

/* gates.correctness.eval_text (check_text_file). */
static int check_eval_text(struct ctx *c, const nf_ynode *v, void *obj)
{
	nf_recipe_correctness *cr = obj;
	return check_text_file(c, v, cr->eval_text_written, &cr->eval_text);
}

static int check_tag(struct ctx *c, const nf_ynode *v, void *obj)
{
	const char *s = v->str;
	size_t n = strlen(s);
	int okay = n >= 1 && n <= 128 &&
		   ((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') ||
		    (s[0] >= '0' && s[0] <= '9') || s[0] == '_');
	for (size_t i = 1; okay && i < n; i++)
		okay = (s[i] >= 'A' && s[i] <= 'Z') || is_lower_alnum(s[i]) || s[i] == '_' || s[i] == '.' ||
		       s[i] == '-';
	if (!okay)
		return cerr(c, v, "%s: bad tag '%.80s'; a tag is [A-Za-z0-9_][A-Za-z0-9._-]{0,127}",
			    c->path, s);
	return 0;
}

/* One path component of an OCI name: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* */
static int oci_component(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		size_t start = i;
		while (i < n && is_lower_alnum(s[i]))
			i++;
		if (i == start)
			return 0;
		if (i == n)
			return 1;
		if (s[i] == '.')
			i++;
		else if (s[i] == '_')
			i += (i + 1 < n && s[i + 1] == '_') ? 2 : 1;
		else if (s[i] == '-')
			while (i < n && s[i] == '-')
				i++;
		else
			return 0;
		if (i == n)
			return 0;
	}
	return 0;
}

/* A registry host: [A-Za-z0-9.-]+ with an optional :port. */
static int oci_host(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n && ((s[i] >= 'A' && s[i] <= 'Z') || is_lower_alnum(s[i]) || s[i] == '.' || s[i] == '-'))
		i++;
	if (i == 0 || s[0] == '-' || s[0] == '.' || s[i - 1] == '-' || s[i - 1] == '.')
		return 0;
	if (i == n)
		return 1;
	if (s[i] != ':' || i + 1 == n || n - i - 1 > 5)
		return 0;
	for (i++; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

static int check_repository(struct ctx *c, const nf_ynode *v, void *obj)
{
	const char *s = v->str, *p = s;
	size_t total = strlen(s);
	int okay = total >= 1 && total <= 255, first = 1;

	while (okay) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		int host_like = first && slash && (memchr(p, '.', n) || memchr(p, ':', n) ||
						   (n == 9 && !strncmp(p, "localhost", 9)));
		okay = host_like ? oci_host(p, n) : oci_component(p, n);
		if (!slash)
			break;
		p = slash + 1;
		first = 0;
	}
	if (!okay)
		return cerr(c, v,
			    "%s: bad repository name '%.80s'; use lowercase [a-z0-9] components joined "
			    "by '.', '_', '__' or '-', separated by '/' (optionally after host[:port]/)",
			    c->path, s);
	return 0;
}

static int check_base(struct ctx *c, const nf_ynode *v, void *obj)
{
	nf_recipe_image *im = obj;
	if (!strcmp(im->base_written, "none")) {
		free(im->base_written);
		im->base_written = NULL;
		return 0;
	}
	if (!*im->base_written)
		return cerr(c, v, "%s: empty path (write 'none' for no base image)", c->path);
	free(im->base);
	if (!(im->base = resolve_path(c, im->base_written)))
		return oom();
	return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static int num2(const char *s, int *out)
{
	if (s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9')
		return 0;
	*out = (s[0] - '0') * 10 + (s[1] - '0');
	return 1;
}

/* "YYYY-MM-DDTHH:MM:SSZ" -> seconds since the epoch (1970..9999). */
static int parse_rfc3339(const char *s, int64_t *out)
{
	int yh, yl, mo, d, h, mi, sec;
	static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	if (strlen(s) != 20 || !num2(s, &yh) || !num2(s + 2, &yl) || s[4] != '-' || !num2(s + 5, &mo) ||
	    s[7] != '-' || !num2(s + 8, &d) || s[10] != 'T' || !num2(s + 11, &h) || s[13] != ':' ||
	    !num2(s + 14, &mi) || s[16] != ':' || !num2(s + 17, &sec) || s[19] != 'Z')
		return 0;
	int y = yh * 100 + yl;
	int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || (mo == 2 && d == 29 && !leap) ||
	    h > 23 || mi > 59 || sec > 59)
		return 0;
	*out = days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + sec;
	return 1;
}

static int check_created(struct ctx *c, const nf_ynode *v, void *obj)
{
	nf_recipe_image *im = obj;
	if (!parse_rfc3339(im->created, &im->created_epoch))
		return cerr(c, v, "%s: bad time '%.64s'; expected UTC RFC 3339 like 2026-01-01T00:00:00Z",
			    c->path, v->str);
	return 0;
}

static int check_api_version(struct ctx *c, const nf_ynode *v, void *obj)
{
	if (v->type != NF_YNODE_SCALAR || strcmp(v->str, NF_RECIPE_API_VERSION) != 0) {
		if (v->type == NF_YNODE_SCALAR)
			return cerr(c, v, "unsupported apiVersion '%.64s'; this nimfactory reads %s", v->str,
				    NF_RECIPE_API_VERSION);
		return type_err(c, v, "a string");
	}
	return 0;
}

static int check_kind(struct ctx *c, const nf_ynode *v, void *obj)
{
	int err = want_str(c, v);
	if (err < 0)
		return err;
	if (strcmp(v->str, "Recipe") != 0)
		return cerr(c, v, "kind: unsupported kind '%.64s'; expected Recipe", v->str);
	return 0;
}

static int parse_device(struct ctx *c, const nf_ynode *v, void *obj)
{
	nf_recipe_target *t = obj;
	const nf_sku *sku, *near;
	char list[512];
	size_t used = 0;
	int err;

	if ((err = want_str(c, v)) < 0)
		return err;
	if ((sku = nf_sku_find(v->str))) {
		t->sku = sku;
		return 0;
	}
	if ((near = nf_sku_suggest(v->str)))
		return cerr(c, v, "%s: unknown device '%.64s'; did you mean '%s'?", c->path, v->str, near->name);
	list[0] = '\0';
	for (size_t i = 0; i < nf_sku_count() && used < sizeof(list); i++) {
		int k = snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", nf_sku_at(i)->name);
		if (k < 0)
			break;
		used += (size_t)k;
	}
	return cerr(c, v, "%s: unknown device '%.64s'; known devices: %s", c->path, v->str, list);
}

/* ---- the tables ---------------------------------------------------------- */

#define ROW(k, t, fl, st, m) .key = k, .type = t, .flags = fl, .off = offsetof(st, m)
#define STR(k, fl, max, st, m, chk) {ROW(k, T_STR, fl, st, m), .hi = max, .check = chk}
#define INT(k, fl, lo_, hi_, st, m) {ROW(k, T_INT, fl, st, m), .lo = lo_, .hi = hi_}
#define NUM(k, fl, lo_, hi_, st, m) {ROW(k, T_NUM, fl, st, m), .lo = lo_, .hi = hi_}
#define BOOL(k, fl, st, m) {ROW(k, T_BOOL, fl, st, m)}
#define ENUM(k, fl, tbl, st, m) {ROW(k, T_ENUM, fl, st, m), .names = tbl}
#define MAP(k, fl, sch, st, m) {ROW(k, T_MAP, fl, st, m), .sub = &sch}
#define LIST_MAP(k, fl, a, b, sch, st, m, cnt) \
	{ROW(k, T_LIST_MAP, fl, st, m), .nmin = a, .nmax = b, .sub = &sch, .off_n = offsetof(st, cnt)}
#define LIST(t, k, fl, a, b, max, st, m, cnt) \
	{ROW(k, t, fl, st, m), .nmin = a, .nmax = b, .hi = max, .off_n = offsetof(st, cnt)}
#define CUSTOM(k, fl, fn) {.key = k, .type = T_CUSTOM, .flags = fl, .check = fn}
#define SCHEMA(rows, ...) {.fields = rows, .n_fields = sizeof(rows) / sizeof(rows[0]), __VA_ARGS__}

static int source_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys);
static int model_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys);
static int target_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys);
static int build_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys);
static int quant_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys);
static int correctness_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys);
/* Every field NAN: not written. */
static nf_recipe_tolerance unset_tolerance(void)
{
	return (nf_recipe_tolerance){NAN, NAN, NAN, NAN, NAN};
}

static double first_set(double a, double b, double c) { return !isnan(a) ? a : !isnan(b) ? b : c; }

/* tolerance[p]: the override, else `default:`, else the precision's defaults. */
static int correctness_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys)
{
	nf_recipe_correctness *cr = obj;
	for (int p = 0; p < NF_PREC_COUNT; p++) {
		nf_recipe_tolerance *t = &cr->tolerance[p];
		const nf_recipe_tolerance *d = &cr->def;
		const nf_gate_bounds *tb = nf_gate_defaults_for(nf_precision_name((nf_precision)p));
		if (!cr->overridden[p])
			*t = unset_tolerance();
		t->min_token_agreement = first_set(t->min_token_agreement, d->min_token_agreement,
						   tb->min_greedy_agreement);
		t->max_logit_rel_error = first_set(t->max_logit_rel_error, d->max_logit_rel_error,
						   tb->max_rel_err);
		t->min_top1_agreement = first_set(t->min_top1_agreement, d->min_top1_agreement,
						  tb->min_top1_agreement);
		t->max_kl_mean = first_set(t->max_kl_mean, d->max_kl_mean, tb->max_kl_mean);
		t->min_ppl_ratio = first_set(t->min_ppl_ratio, d->min_ppl_ratio, tb->min_ppl_ratio);
	}
	return 0;
}

/* Key k of a mapping keyed by precision: a string naming a precision not
 * seen before in this mapping (*p, marked in seen). */
static int precision_key(struct ctx *c, const nf_ynode *k, bool *seen, nf_precision *p)
{
	char where[600];
	int err;
	if (k->type != NF_YNODE_SCALAR)
		return cerr(c, k, "keys must be strings, got %s%s", noun(k),
			    in_where(c, where, sizeof(where)));
	if ((err = lookup_precision(c, k, p)) < 0)
		return err;
	if (seen[*p])
		return cerr(c, k, "duplicate key '%s'%s", k->str, in_where(c, where, sizeof(where)));
	seen[*p] = true;
	return 0;
}

/* A performance ratio bound per precision: {int4-wo: 3.0, ...}, each > 0. */
static int parse_prec_ratios(struct ctx *c, const nf_ynode *v, double *out)
{
	static const struct field row = {.key = "ratio", .type = T_NUM, .flags = F_GT, .lo = 0,
					 .hi = 1e6};
	bool seen[NF_PREC_COUNT] = {0};
	int err;

	if (v->type != NF_YNODE_MAP)
		return type_err(c, v, "a mapping of precision to ratio");
	for (size_t i = 0; i + 1 < v->n; i += 2) {
		const nf_ynode *k = v->kids[i];
		nf_precision p;
		size_t save;
		if ((err = precision_key(c, k, seen, &p)) < 0)
			return err;
		save = push_key(c, k->str);
		err = parse_num(c, v->kids[i + 1], &row, &out[p]);
		pop(c, save);
		if (err < 0)
			return err;
	}
	return 0;
}

static int parse_min_decode_speedup(struct ctx *c, const nf_ynode *v, void *obj)
{
	return parse_prec_ratios(c, v, ((nf_recipe_performance *)obj)->min_decode_speedup);
}

static int parse_min_prefill_speedup(struct ctx *c, const nf_ynode *v, void *obj)
{
	return parse_prec_ratios(c, v, ((nf_recipe_performance *)obj)->min_prefill_speedup);
}

static int parse_max_ttft_ratio(struct ctx *c, const nf_ynode *v, void *obj)
{
	return parse_prec_ratios(c, v, ((nf_recipe_performance *)obj)->max_ttft_ratio);
}

static int parse_max_memory_ratio(struct ctx *c, const nf_ynode *v, void *obj)
{
	return parse_prec_ratios(c, v, ((nf_recipe_performance *)obj)->max_memory_ratio);
}

static int parse_max_size_ratio(struct ctx *c, const nf_ynode *v, void *obj)
{
	return parse_prec_ratios(c, v, ((nf_recipe_performance *)obj)->max_size_ratio);
}

static int performance_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys);
static int parse_overrides(struct ctx *c, const nf_ynode *v, void *obj);
static int parse_min_decode_speedup(struct ctx *c, const nf_ynode *v, void *obj);
static int parse_min_prefill_speedup(struct ctx *c, const nf_ynode *v, void *obj);
static int parse_max_ttft_ratio(struct ctx *c, const nf_ynode *v, void *obj);
static int parse_max_memory_ratio(struct ctx *c, const nf_ynode *v, void *obj);
static int parse_max_size_ratio(struct ctx *c, const nf_ynode *v, void *obj);

static const struct field git_rows[] = {
	STR("url", F_REQ, 4096, nf_recipe_git, url, check_git_url),
	STR("commit", F_REQ, 128, nf_recipe_git, commit, check_commit),
	STR("path", 0, 4096, nf_recipe_git, path, check_git_path),
};
static const struct schema git_schema = SCHEMA(git_rows);

/* Order matters: url, path, git are rows 0..2 (source_post). */
static const struct field source_rows[] = {
	STR("url", 0, 4096, nf_recipe_source, url, check_url),
	STR("path", 0, 4096, nf_recipe_source, path, check_source_path),
	MAP("git", 0, git_schema, nf_recipe_source, git),
	STR("sha256", 0, 128, nf_recipe_source, sha256, check_sha256),
	ENUM("format", 0, format_names, nf_recipe_source, format),
	BOOL("archive", 0, nf_recipe_source, archive),
};
static const struct schema source_schema = SCHEMA(source_rows, .post = source_post);

static const struct field model_rows[] = {
	STR("name", F_REQ, 128, nf_recipe_model, name, check_model_name),
	ENUM("family", 0, family_names, nf_recipe_model, family),
	STR("version", 0, 128, nf_recipe_model, version, NULL),
	STR("license", 0, 256, nf_recipe_model, license, NULL),
	MAP("source", F_REQ, source_schema, nf_recipe_model, source),
	MAP("tokenizer", 0, source_schema, nf_recipe_model, tokenizer),
};
static const struct schema model_schema = SCHEMA(model_rows, .post = model_post);

/* `kv_cache: [f16, int8]`: the KV caches each precision is built with. */
static int parse_kv_caches(struct ctx *c, const nf_ynode *v, void *obj)
{
	static const char *const names[NF_KV_KIND_COUNT + 1] = {"f32", "f16", "int8", NULL};
	nf_recipe_target *t = obj;
	if (v->type != NF_YNODE_SEQ)
		return type_err(c, v, "a list of f32, f16, int8");
	if (v->n == 0)
		return cerr(c, v, "%s: an empty list; name at least one of f32, f16, int8", c->path);
	t->n_kv_caches = 0;
	for (size_t i = 0; i < v->n; i++) {
		const nf_ynode *it = v->kids[i];
		size_t save = push_index(c, i);
		nf_kv_kind k = NF_KV_F32;
		int err = want_str(c, it);
		if (!err && nf_kv_kind_parse(&k, it->str))
			err = unknown_value(c, it, "kv_cache", names, NF_KV_KIND_COUNT, 2);
		for (size_t j = 0; !err && j < t->n_kv_caches; j++)
			if (t->kv_caches[j] == k)
				err = cerr(c, it, "%s: kv_cache '%s' is listed twice", c->path, it->str);
		pop(c, save);
		if (err < 0)
			return err;
		t->kv_caches[t->n_kv_caches++] = k; /* distinct, so at most NF_KV_KIND_COUNT */
	}
	return 0;
}

static const struct field target_rows[] = {
	CUSTOM("device", F_REQ, parse_device),
	LIST(T_PREC_LIST, "precisions", F_REQ, 1, NF_PREC_COUNT * 4, 0, nf_recipe_target, precisions,
	     n_precisions),
	LIST(T_TP_LIST, "tensor_parallel", 0, 1, NF_RECIPE_MAX_TP * 4, 0, nf_recipe_target,
	     tensor_parallel, n_tensor_parallel),
	CUSTOM("kv_cache", 0, parse_kv_caches),
};
static const struct schema target_schema =
	SCHEMA(target_rows, .size = sizeof(nf_recipe_target), .post = target_post);

static const struct field quant_rows[] = {
	INT("group_size", 0, 32, 128, nf_recipe_quant, group_size),
	STR("calibration_text", 0, 4096, nf_recipe_quant, calibration_text, check_calibration_path),
};
static const struct schema quant_schema = SCHEMA(quant_rows, .post = quant_post);

static const struct field build_rows[] = {
	LIST_MAP("targets", F_REQ, 1, NF_RECIPE_MAX_TARGETS, target_schema, nf_recipe_build, targets,
		 n_targets),
	BOOL("autotune", 0, nf_recipe_build, autotune),
	MAP("quantization", 0, quant_schema, nf_recipe_build, quant),
};
static const struct schema build_schema = SCHEMA(build_rows, .post = build_post);

static const struct field tolerance_rows[] = {
	NUM("min_token_agreement", 0, 0.0, 1.0, nf_recipe_tolerance, min_token_agreement),
	NUM("max_logit_rel_error", 0, 0.0, INFINITY, nf_recipe_tolerance, max_logit_rel_error),
	NUM("min_top1_agreement", 0, 0.0, 1.0, nf_recipe_tolerance, min_top1_agreement),
	NUM("max_kl_mean", 0, 0.0, INFINITY, nf_recipe_tolerance, max_kl_mean),
	NUM("min_ppl_ratio", 0, 0.0, 100.0, nf_recipe_tolerance, min_ppl_ratio),
};
static const struct schema tolerance_schema = SCHEMA(tolerance_rows);

static const struct field correctness_rows[] = {
	LIST(T_STR_LIST, "prompts", F_REQ, 1, 64, 4096, nf_recipe_correctness, prompts, n_prompts),
	INT("max_tokens", 0, 1, 4096, nf_recipe_correctness, max_tokens),
	STR("eval_text", 0, 4096, nf_recipe_correctness, eval_text_written, check_eval_text),
	INT("eval_tokens", 0, 2, 65536, nf_recipe_correctness, eval_tokens),
	MAP("default", 0, tolerance_schema, nf_recipe_correctness, def),
	CUSTOM("precisions", 0, parse_overrides),
};
static const struct schema correctness_schema = SCHEMA(correctness_rows, .post = correctness_post);

static const struct field performance_rows[] = {
	STR("prompt", F_REQ, 4096, nf_recipe_performance, prompt, NULL),
	INT("max_tokens", 0, 1, 4096, nf_recipe_performance, max_tokens),
	{ROW("min_decode_tokens_per_s", T_NUM, F_GT, nf_recipe_performance, min_decode_tokens_per_s),
	 .lo = 0, .hi = INFINITY},
	{ROW("max_peak_memory_mib", T_NUM, F_GT, nf_recipe_performance, max_peak_memory_mib), .lo = 0,
	 .hi = INFINITY},
	{ROW("min_prefill_tokens_per_s", T_NUM, F_GT, nf_recipe_performance, min_prefill_tokens_per_s),
	 .lo = 0, .hi = INFINITY},
	{ROW("max_ttft_ms", T_NUM, F_GT, nf_recipe_performance, max_ttft_ms), .lo = 0, .hi = INFINITY},
	CUSTOM("min_decode_speedup", 0, parse_min_decode_speedup),
	CUSTOM("min_prefill_speedup", 0, parse_min_prefill_speedup),
	CUSTOM("max_ttft_ratio", 0, parse_max_ttft_ratio),
	CUSTOM("max_memory_ratio", 0, parse_max_memory_ratio),
	CUSTOM("max_size_ratio", 0, parse_max_size_ratio),
};
static const struct schema performance_schema = SCHEMA(performance_rows, .post = performance_post);

static const struct field gates_rows[] = {
	MAP("correctness", F_REQ, correctness_schema, nf_recipe_gates, correctness),
	MAP("performance", 0, performance_schema, nf_recipe_gates, performance),
};
static const struct schema gates_schema = SCHEMA(gates_rows);

static int speculative_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys);
static const struct field speculative_rows[] = {
	ENUM("method", F_REQ, spec_method_names, nf_recipe_speculative, method),
	INT("k", 0, 1, 16, nf_recipe_speculative, k),
	STR("draft_profile", 0, 95, nf_recipe_speculative, draft_profile, NULL),
};
static const struct schema speculative_schema = SCHEMA(speculative_rows, .post = speculative_post);

static const struct field serving_rows[] = {
	ENUM("chat_template", 0, chat_names, nf_recipe_serving, chat_template),
	LIST(T_PREC_LIST, "precision_preference", 0, 1, NF_PREC_COUNT * 4, 0, nf_recipe_serving,
	     precision_preference, n_precision_preference),
	LIST(T_TP_LIST, "tensor_parallel_preference", 0, 1, NF_RECIPE_MAX_TP * 4, 0, nf_recipe_serving,
	     tensor_parallel_preference, n_tensor_parallel_preference),
	MAP("speculative", 0, speculative_schema, nf_recipe_serving, speculative),
	INT("max_batch", 0, 1, 4096, nf_recipe_serving, max_batch),
	INT("max_context", 0, 1, 1 << 24, nf_recipe_serving, max_context),
};
static const struct schema serving_schema = SCHEMA(serving_rows);

static const struct field image_rows[] = {
	STR("repository", F_REQ, 255, nf_recipe_image, repository, check_repository),
	STR("tag", F_REQ, 128, nf_recipe_image, tag, check_tag),
	LIST(T_STR_MAP, "labels", 0, 0, 64, 0, nf_recipe_image, labels, n_labels),
	ENUM("compression", 0, compress_names, nf_recipe_image, compression),
	ENUM("layout", 0, layout_names, nf_recipe_image, layout),
	STR("base", 0, 4096, nf_recipe_image, base_written, check_base),
	STR("created", 0, 64, nf_recipe_image, created, check_created),
};
static const struct schema image_schema = SCHEMA(image_rows);

static const struct field top_rows[] = {
	CUSTOM("apiVersion", F_REQ, check_api_version),
	CUSTOM("kind", F_REQ, check_kind),
	MAP("model", F_REQ, model_schema, nf_recipe, model),
	MAP("build", F_REQ, build_schema, nf_recipe, build),
	MAP("gates", F_REQ, gates_schema, nf_recipe, gates),
	MAP("serving", 0, serving_schema, nf_recipe, serving),
	MAP("image", F_REQ, image_schema, nf_recipe, image),
};
static const struct schema top_schema = SCHEMA(top_rows);

/* ---- cross-field checks ------------------------------------------------- */

static int source_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys)
{
	nf_recipe_source *src = obj;
	const nf_ynode *first = NULL, *second = NULL;
	static const nf_source_kind kinds[3] = {NF_SOURCE_URL, NF_SOURCE_PATH, NF_SOURCE_GIT};

	/* rows 0..2 are url, path, git; row 3 is sha256 */
	for (int i = 0; i < 3; i++) {
		const nf_ynode *k = keys[i];
		if (!k)
			continue;
		if (!first || k->line < first->line || (k->line == first->line && k->col < first->col)) {
			second = first;
			first = k;
			src->kind = kinds[i];
		} else if (!second || k->line < second->line ||
			   (k->line == second->line && k->col < second->col)) {
			second = k;
		}
	}
	if (second)
		return cerr(c, second, "%s: give exactly one of url, path, git (found both '%s' and '%s')",
			    c->path, first->str, second->str);
	if (!first)
		return cerr(c, m, "%s: needs one of url, path, git", c->path);
	if (src->kind == NF_SOURCE_URL && !src->sha256)
		return cerr(c, m, "%s: url without sha256; pin the download with sha256: <64 hex digits>",
			    c->path);
	if (src->kind == NF_SOURCE_GIT && src->sha256)
		return cerr(c, keys[3], "%s: sha256 does not apply to a git source (its commit pins it)",
			    c->path);
	return 0;
}

static int model_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys)
{
	nf_recipe_model *md = obj;
	if (md->source.format == NF_FORMAT_LLAMA2C && md->tokenizer.kind == NF_SOURCE_NONE)
		return cerr(c, m,
			    "missing required key 'tokenizer' in %s (a llama2c checkpoint does not hold "
			    "its tokenizer)",
			    c->path);
	if (md->source.format == NF_FORMAT_GGUF && md->tokenizer.kind != NF_SOURCE_NONE)
		return cerr(c, keys[5] ? keys[5] : m,
			    "%s.tokenizer: a gguf checkpoint holds its tokenizer; remove this key",
			    c->path);
	return 0;
}

static int target_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys)
{
	nf_recipe_target *t = obj;
	if (t->n_tensor_parallel == 0) {
		t->tensor_parallel[0] = 1;
		t->n_tensor_parallel = 1;
	}
	return 0;
}

static int quant_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys)
{
	nf_recipe_quant *q = obj;
	const nf_ynode *g = map_get(m, "group_size");
	if (g && q->group_size != 32 && q->group_size != 64 && q->group_size != 128)
		return cerr(c, g, "%s.group_size: %d (expected 32, 64 or 128)", c->path, q->group_size);
	(void)keys;
	return 0;
}

static int build_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys)
{
	nf_recipe_build *b = obj;
	const nf_ynode *list = map_get(m, "targets");

	for (size_t i = 1; i < b->n_targets; i++)
		for (size_t j = 0; j < i; j++)
			if (b->targets[i].sku == b->targets[j].sku) {
				const nf_ynode *at = map_get(list->kids[i], "device");
				return cerr(c, at ? at : list->kids[i],
					    "%s.targets[%zu]: device '%s' is already a target (%s.targets[%zu])",
					    c->path, i, b->targets[i].sku->name, c->path, j);
			}
	/* A precision the device's hardware cannot run is a mistake in the recipe. */
	for (size_t i = 0; i < b->n_targets; i++) {
		const nf_recipe_target *t = &b->targets[i];
		const nf_ynode *precs = map_get(list->kids[i], "precisions");
		for (size_t k = 0; k < t->n_precisions; k++) {
			const char *name = nf_precision_name(t->precisions[k]);
			const nf_ynode *at = precs;
			if (nf_sku_supports(t->sku, t->precisions[k]))
				continue;
			for (size_t q = 0; precs && q < precs->n; q++)
				if (precs->kids[q]->str && !strcmp(precs->kids[q]->str, name))
					at = precs->kids[q];
			return cerr(c, at ? at : list->kids[i],
				    "%s.targets[%zu]: device '%s' cannot run %s", c->path, i,
				    t->sku->name, name);
		}
	}
	return 0;
}

static int parse_overrides(struct ctx *c, const nf_ynode *v, void *obj)
{
	nf_recipe_correctness *cr = obj;
	int err;

	if (v->type != NF_YNODE_MAP)
		return type_err(c, v, "a mapping");
	for (size_t i = 0; i + 1 < v->n; i += 2) {
		const nf_ynode *k = v->kids[i];
		nf_precision p;
		size_t save;

		if ((err = precision_key(c, k, cr->overridden, &p)) < 0)
			return err;
		cr->tolerance[p] = unset_tolerance();
		save = push_key(c, k->str);
		err = walk_map(c, v->kids[i + 1], &tolerance_schema, &cr->tolerance[p]);
		pop(c, save);
		if (err < 0)
			return err;
	}
	return 0;
}

/* A draft profile with method draft, and only then. */
static int speculative_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys)
{
	nf_recipe_speculative *sp = obj;
	int draft = sp->method == NF_RECIPE_SPEC_DRAFT;
	sp->present = true;
	if (draft && !sp->draft_profile)
		return cerr(c, m, "%s: method draft needs a draft_profile (the name of the profile that "
			    "drafts, e.g. cpu-int8-wo-tp1)", c->path);
	if (!draft && sp->draft_profile)
		return cerr(c, keys[2], "%s.draft_profile: only with method draft", c->path);
	return 0;
}

static int performance_post(struct ctx *c, const nf_ynode *m, void *obj, const nf_ynode *const *keys)
{
	((nf_recipe_performance *)obj)->present = true;
	return 0;
}

/* Serving preferences: defaults from the targets, or check what is listed is built. */
static int serving_resolve(struct ctx *c, const nf_ynode *root)
{
	nf_recipe *r = c->r;
	nf_recipe_serving *sv = &r->serving;
	const nf_ynode *sn = map_get(root, "serving");
	const nf_ynode *pl = map_get(sn, "precision_preference");
	const nf_ynode *tl = map_get(sn, "tensor_parallel_preference");
	bool built_p[NF_PREC_COUNT] = {0};
	bool built_tp[65] = {0};
	nf_precision order[NF_PREC_COUNT];
	size_t n_order = 0;

	for (size_t i = 0; i < r->build.n_targets; i++) {
		const nf_recipe_target *t = &r->build.targets[i];
		for (size_t j = 0; j < t->n_precisions; j++)
			if (!built_p[t->precisions[j]]) {
				built_p[t->precisions[j]] = true;
				order[n_order++] = t->precisions[j];
			}
		for (size_t j = 0; j < t->n_tensor_parallel; j++)
			built_tp[t->tensor_parallel[j]] = true;
	}
	if (sv->n_precision_preference == 0) {
		memcpy(sv->precision_preference, order, n_order * sizeof(order[0]));
		sv->n_precision_preference = n_order;
	}
	for (size_t i = 0; pl && i < sv->n_precision_preference; i++)
		if (!built_p[sv->precision_preference[i]])
			return cerr(c, pl->kids[i],
				    "serving.precision_preference[%zu]: '%s' is not built by any target", i,
				    nf_precision_name(sv->precision_preference[i]));
	if (sv->n_tensor_parallel_preference == 0) {
		for (int d = 1; d <= 64; d *= 2)
			if (built_tp[d])
				sv->tensor_parallel_preference[sv->n_tensor_parallel_preference++] = d;
	}
	for (size_t i = 0; tl && i < sv->n_tensor_parallel_preference; i++)
		if (!built_tp[sv->tensor_parallel_preference[i]])
			return cerr(c, tl->kids[i],
				    "serving.tensor_parallel_preference[%zu]: %d is not built by any target", i,
				    sv->tensor_parallel_preference[i]);
	return 0;
}

static int resolve_created(nf_recipe *r)
{
	const char *e = getenv("SOURCE_DATE_EPOCH");
	char *end = NULL;
	unsigned long long x;

	if (r->image.created || !e || !*e)
		return 0;
	errno = 0;
	x = strtoull(e, &end, 10);
	if (!all_digits(e) || errno || *end || x > 253402300799ull)
		return nf_error_set(NF_EINPUT, "SOURCE_DATE_EPOCH: '%.32s' is not a number of seconds "
						"since 1970 (up to year 9999)", e);
	r->image.created_epoch = (int64_t)x;
	return 0;
}

/* ---- load, parse, free -------------------------------------------------- */

static void recipe_defaults(nf_recipe *r)
{
	r->model.family = NF_FAMILY_LLAMA;
	r->build.autotune = true;
	r->gates.correctness.max_tokens = 32;
	r->gates.correctness.eval_tokens = 1024;
	r->gates.correctness.def = unset_tolerance();
	r->gates.performance.max_tokens = 128;
	r->serving.chat_template = NF_CHAT_AUTO;
	r->serving.max_batch = NF_RECIPE_MAX_BATCH;
	r->image.compression = NF_COMPRESS_GZIP;
	r->image.layout = NF_LAYOUT_SINGLE;
}

static void source_release(nf_recipe_source *s)
{
	free(s->url);
	free(s->path);
	free(s->path_written);
	free(s->git.url);
	free(s->git.commit);
	free(s->git.path);
	free(s->sha256);
}

void nf_recipe_free(nf_recipe *r)
{
	if (!r)
		return;
	free(r->file);
	free(r->dir);
	free(r->model.name);
	free(r->model.version);
	free(r->model.license);
	source_release(&r->model.source);
	source_release(&r->model.tokenizer);
	free(r->build.targets);
	free(r->build.quant.calibration_text);
	free(r->build.quant.calibration_text_written);
	for (size_t i = 0; i < r->gates.correctness.n_prompts; i++)
		free(r->gates.correctness.prompts[i]);
	free(r->gates.correctness.prompts);
	free(r->gates.correctness.eval_text);
	free(r->gates.correctness.eval_text_written);
	free(r->gates.performance.prompt);
	free(r->serving.speculative.draft_profile);
	free(r->image.repository);
	free(r->image.tag);
	for (size_t i = 0; i < r->image.n_labels; i++) {
		free(r->image.labels[i].key);
		free(r->image.labels[i].value);
	}
	free(r->image.labels);
	free(r->image.base);
	free(r->image.base_written);
	free(r->image.created);
	free(r);
}

static char *absolute_dir(const char *base_dir)
{
	char cwd[4096];

	if (base_dir && base_dir[0] == '/')
		return strdup(base_dir);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	if (!base_dir || !*base_dir || !strcmp(base_dir, "."))
		return strdup(cwd);
	return nf_path_join(cwd, base_dir);
}

int nf_recipe_parse(nf_recipe **out, const char *file, const char *data, size_t len,
		    const char *base_dir)
{
	static const nf_yaml_limits lim = {
		.max_bytes = NF_RECIPE_MAX_BYTES,
		.max_depth = NF_RECIPE_MAX_DEPTH,
		.max_nodes = NF_RECIPE_MAX_NODES,
		.max_scalar = NF_RECIPE_MAX_SCALAR,
	};
	nf_ynode *root = NULL;
	nf_recipe *r = NULL;
	struct ctx c = {0};
	const nf_ynode *api;
	int err;

	*out = NULL;
	if (!file)
		file = "<recipe>";
	r = calloc(1, sizeof(*r));
	if (!r || !(r->file = strdup(file)) || !(r->dir = absolute_dir(base_dir))) {
		err = oom();
		goto done;
	}
	recipe_defaults(r);
	c.file = file;
	c.dir = r->dir;
	c.r = r;
	if ((err = nf_yaml_parse(&root, file, data, len, &lim)) < 0)
		goto done;
	if (!root) {
		err = nf_error_set(NF_EINPUT, "%s:1:1: empty recipe", file);
		goto done;
	}
	if (root->type != NF_YNODE_MAP) {
		err = cerr(&c, root, "a recipe must be a mapping, got %s", noun(root));
		goto done;
	}
	/* apiVersion first: a recipe for another version fails on that, not on its keys. */
	if ((api = map_get(root, "apiVersion"))) {
		size_t save = push_key(&c, "apiVersion");
		err = check_api_version(&c, api, r);
		pop(&c, save);
		if (err < 0)
			goto done;
	}
	if ((err = walk_map(&c, root, &top_schema, r)) < 0)
		goto done;
	if ((err = serving_resolve(&c, root)) < 0)
		goto done;
	if ((err = resolve_created(r)) < 0)
		goto done;
	*out = r;
	r = NULL;
done:
	nf_yaml_free(root);
	nf_recipe_free(r);
	return err;
}

int nf_recipe_load(nf_recipe **out, const char *path)
{
	char *data = NULL, *dir = NULL, *slash;
	size_t len = 0;
	uint64_t size = 0;
	int err;

	*out = NULL;
	if ((err = nf_fs_file_size(&size, path)) == 0 && size > NF_RECIPE_MAX_BYTES) {
		err = nf_error_set(NF_EINPUT, "%s:1:1: recipe is %llu bytes, more than the limit of %u",
				   path, (unsigned long long)size, NF_RECIPE_MAX_BYTES);
		goto done;
	}
	if ((err = nf_fs_read_file(&data, &len, path, NF_RECIPE_MAX_BYTES)) < 0)
		goto done;
	if (!(dir = strdup(path))) {
		err = oom();
		goto done;
	}
	slash = strrchr(dir, '/');
	if (!slash)
		dir[0] = '\0';
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	err = nf_recipe_parse(out, path, data, len, dir);
done:
	free(data);
	free(dir);
	return err;
}
