/*
 * yaml_tree.c - libyaml events into a bounded nf_ynode tree (see yaml_tree.h).
 */
#include "factory/yaml_tree.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

static int perr(const char *file, int line, int col, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int perr(const char *file, int line, int col, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return nf_error_set(NF_EINPUT, "%s:%d:%d: %s", file, line, col, msg);
}

void nf_yaml_free(nf_ynode *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++)
		nf_yaml_free(n->kids[i]);
	free(n->kids);
	free(n->str);
	free(n);
}

/*
 * Refuse what YAML should never see in a recipe, with a precise position:
 * NUL and other control bytes, and malformed UTF-8 (overlong forms,
 * surrogates, code points past U+10FFFF, truncated sequences).
 */
static int prescan(const char *file, const unsigned char *p, size_t len)
{
	int line = 1, col = 1;
	size_t i = 0;

	while (i < len) {
		unsigned c = p[i];
		size_t need;
		uint32_t cp, min;

		if (c < 0x80) {
			if (c == 0)
				return perr(file, line, col, "NUL byte in recipe");
			if (c == '\n' || (c == '\r' && !(i + 1 < len && p[i + 1] == '\n'))) {
				line++;
				col = 1;
				i++;
				continue;
			}
			if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f)
				return perr(file, line, col, "control character 0x%02x in recipe", c);
			i++;
			if (c != '\r')
				col++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			need = 1, cp = c & 0x1f, min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			need = 2, cp = c & 0x0f, min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			need = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return perr(file, line, col, "invalid UTF-8 (byte 0x%02x)", c);
		}
		if (len - i - 1 < need)
			return perr(file, line, col, "invalid UTF-8 (truncated sequence)");
		for (size_t k = 1; k <= need; k++) {
			unsigned cc = p[i + k];
			if ((cc & 0xc0) != 0x80)
				return perr(file, line, col, "invalid UTF-8 (byte 0x%02x)", cc);
			cp = (cp << 6) | (cc & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return perr(file, line, col, "invalid UTF-8 (bad code point)");
		i += need + 1;
		col++;
	}
	return 0;
}

static const char *type_noun(yaml_event_type_t t)
{
	return t == YAML_MAPPING_START_EVENT ? "mapping" : t == YAML_SEQUENCE_START_EVENT ? "list" : "value";
}

/* Append kid to parent's kids, growing the array by doubling (checked). */
static int append(nf_ynode *parent, nf_ynode *kid)
{
	if (parent->n == parent->cap) {
		size_t cap = parent->cap ? parent->cap : 4, bytes;
		nf_ynode **k;
		if (parent->cap && !nf_size_mul(&cap, parent->cap, 2))
			return nf_error_set(NF_ENOMEM, "yaml: too many items");
		if (!nf_size_mul(&bytes, cap, sizeof(*k)))
			return nf_error_set(NF_ENOMEM, "yaml: too many items");
		k = realloc(parent->kids, bytes);
		if (!k)
			return nf_error_set(NF_ENOMEM, "yaml: out of memory");
		parent->kids = k;
		parent->cap = cap;
	}
	parent->kids[parent->n++] = kid;
	return 0;
}

static int parser_error(const char *file, const yaml_parser_t *p)
{
	const char *problem = p->problem ? p->problem : "cannot parse";
	int line = (int)p->problem_mark.line + 1, col = (int)p->problem_mark.column + 1;

	if (p->error == YAML_MEMORY_ERROR)
		return nf_error_set(NF_ENOMEM, "%s: out of memory parsing YAML", file);
	if (p->error == YAML_READER_ERROR)
		return perr(file, 1, 1, "bad YAML: %s (at byte %zu)", problem, p->problem_offset);
	if (p->context)
		return perr(file, line, col, "bad YAML: %s (%s at line %d)", problem, p->context,
			    (int)p->context_mark.line + 1);
	return perr(file, line, col, "bad YAML: %s", problem);
}

/* The tree being built from the parser's events, and its bounds. */
struct ytree {
	const char *file;
	const nf_yaml_limits *lim;
	nf_ynode **stack; /* the open mappings and lists, lim->max_depth of them */
	size_t depth, nodes;
	int docs;
	nf_ynode *root;
};

/* Anchors, aliases and tags make a recipe mean more than it says: refused. */
static int refuse_anchor_or_tag(const struct ytree *t, const yaml_event_t *ev, int line, int col)
{
	const yaml_char_t *anchor = NULL, *tag = NULL;
	switch (ev->type) {
	case YAML_MAPPING_START_EVENT:
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
		break;
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
		break;
	default:
		break;
	}
	if (anchor)
		return perr(t->file, line, col, "anchors and aliases are not allowed in a recipe ('&%.64s')",
			    (const char *)anchor);
	if (tag)
		return perr(t->file, line, col, "YAML tags are not allowed in a recipe ('%.64s')",
			    (const char *)tag);
	return 0;
}

/* A scalar event's string into node, at most lim->max_scalar bytes, no NUL. */
static int take_scalar(nf_ynode *node, const struct ytree *t, const yaml_event_t *ev)
{
	size_t n = ev->data.scalar.length;
	node->type = NF_YNODE_SCALAR;
	if (n > t->lim->max_scalar)
		return perr(t->file, node->line, node->col,
			    "string of %zu bytes, more than the limit of %zu", n, t->lim->max_scalar);
	if (memchr(ev->data.scalar.value, '\0', n))
		return perr(t->file, node->line, node->col, "NUL character in a string");
	node->str = malloc(n + 1);
	if (!node->str)
		return nf_error_set(NF_ENOMEM, "yaml: out of memory");
	memcpy(node->str, ev->data.scalar.value, n);
	node->str[n] = '\0';
	node->len = n;
	node->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	return 0;
}

/* A new node for a mapping, list or scalar event, within the node and depth
 * bounds (*out, caller frees). */
static int new_node(nf_ynode **out, struct ytree *t, const yaml_event_t *ev, int line, int col)
{
	nf_ynode *node;
	int err;
	*out = NULL;
	if (++t->nodes > t->lim->max_nodes)
		return perr(t->file, line, col, "more than %zu YAML nodes", t->lim->max_nodes);
	if (ev->type != YAML_SCALAR_EVENT && t->depth >= t->lim->max_depth)
		return perr(t->file, line, col, "%s nested deeper than %zu levels", type_noun(ev->type),
			    t->lim->max_depth);
	if (!(node = calloc(1, sizeof(*node))))
		return nf_error_set(NF_ENOMEM, "yaml: out of memory");
	*out = node;
	node->line = line;
	node->col = col;
	if (ev->type == YAML_SCALAR_EVENT)
		return (err = take_scalar(node, t, ev)) < 0 ? err : 0;
	node->type = ev->type == YAML_MAPPING_START_EVENT ? NF_YNODE_MAP : NF_YNODE_SEQ;
	return 0;
}

/* A new node made the root or its open parent's last kid; a mapping or a
 * list is opened. */
static int add_node(struct ytree *t, const yaml_event_t *ev, int line, int col)
{
	nf_ynode *node = NULL;
	int err = new_node(&node, t, ev, line, col);
	if (!err && t->depth > 0)
		err = append(t->stack[t->depth - 1], node);
	if (err < 0) {
		nf_yaml_free(node);
		return err;
	}
	if (t->depth == 0)
		t->root = node;
	if (ev->type != YAML_SCALAR_EVENT)
		t->stack[t->depth++] = node;
	return 0;
}

/* One event into the tree: 1 at the end of the stream, 0 to go on, or an error. */
static int take_event(struct ytree *t, const yaml_event_t *ev)
{
	int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1, err;
	if ((err = refuse_anchor_or_tag(t, ev, line, col)) < 0)
		return err;
	switch (ev->type) {
	case YAML_STREAM_END_EVENT:
		return 1;
	case YAML_DOCUMENT_START_EVENT:
		if (++t->docs > 1)
			return perr(t->file, line, col, "a recipe is one YAML document; found a second one");
		return 0;
	case YAML_ALIAS_EVENT:
		return perr(t->file, line, col, "anchors and aliases are not allowed in a recipe ('*%.64s')",
			    (const char *)ev->data.alias.anchor);
	case YAML_MAPPING_START_EVENT:
	case YAML_SEQUENCE_START_EVENT:
	case YAML_SCALAR_EVENT:
		return add_node(t, ev, line, col);
	case YAML_MAPPING_END_EVENT:
	case YAML_SEQUENCE_END_EVENT:
		if (t->depth > 0)
			t->depth--;
		return 0;
	default:
		return 0;
	}
}

/* Every event of the parser into t, until the end of the stream. */
static int take_events(struct ytree *t, yaml_parser_t *parser)
{
	int r = 0;
	while (r == 0) {
		yaml_event_t ev;
		if (!yaml_parser_parse(parser, &ev))
			return parser_error(t->file, parser);
		r = take_event(t, &ev);
		yaml_event_delete(&ev);
	}
	return r < 0 ? r : 0;
}

int nf_yaml_parse(nf_ynode **out, const char *file, const char *data, size_t len,
		  const nf_yaml_limits *lim)
{
	struct ytree t = {.file = file, .lim = lim};
	yaml_parser_t parser;
	int have_parser = 0, err = 0;

	*out = NULL;
	if (len > lim->max_bytes) {
		err = perr(file, 1, 1, "recipe is %zu bytes, more than the limit of %zu", len,
			   lim->max_bytes);
		goto done;
	}
	if ((err = prescan(file, (const unsigned char *)data, len)) < 0)
		goto done;
	t.stack = calloc(lim->max_depth + 1, sizeof(*t.stack));
	if (!t.stack) {
		err = nf_error_set(NF_ENOMEM, "yaml: out of memory");
		goto done;
	}
	if (!yaml_parser_initialize(&parser)) {
		err = nf_error_set(NF_ENOMEM, "yaml: cannot initialise the parser");
		goto done;
	}
	have_parser = 1;
	yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
	yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
	if ((err = take_events(&t, &parser)) < 0)
		goto done;
	/* An empty document ("---" alone) is a null plain scalar: no recipe. */
	if (t.root && t.root->type == NF_YNODE_SCALAR && t.root->plain && t.root->len == 0) {
		nf_yaml_free(t.root);
		t.root = NULL;
	}
	*out = t.root;
	t.root = NULL;
done:
	if (have_parser)
		yaml_parser_delete(&parser);
	nf_yaml_free(t.root);
	free(t.stack);
	return err;
}
