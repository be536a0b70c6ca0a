/*
 * grammar_regex.c - the regular expressions structured output accepts
 * (what vLLM and outlines take for guided_regex), parsed to a small syntax
 * tree and emitted into the NFA, matched whole: literals (UTF-8 characters
 * whole), escapes (\d \w \s and their negations, \n \t \r \f \v, escaped
 * punctuation), classes of ASCII characters ([a-z], [^...]), ., groups
 * ((...), (?:...)), |, ?, *, +, {m}, {m,}, {m,n} (lazy forms too: the same
 * language), and ^ / $ at the ends.  Negated classes, negated escapes and .
 * match any non-ASCII character besides; . does not match a newline.
 * Backreferences, lookaround and other assertions are refused with their
 * offset.
 */
#include "engine/grammar_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

enum { RX_LIT, RX_CLASS, RX_CAT, RX_ALT, RX_REPEAT, RX_EMPTY };
#define RX_MAX_COUNT 1000
#define RX_MAX_NODES 65536
#define RX_MAX_NESTING 256

typedef struct rx_node {
	int kind;
	int a, b;          /* children (CAT, ALT), child (REPEAT) */
	int min, max;      /* REPEAT; max -1: unbounded */
	uint8_t lit[4], lit_len;
	uint8_t set[32];   /* CLASS: ASCII bytes in it */
	bool non_ascii;    /* CLASS: every non-ASCII character too */
} rx_node;

typedef struct rx_parser {
	const char *s;
	size_t len, pos;
	rx_node *nodes;
	size_t n_nodes, cap;
	int nesting;
	int err;
} rx_parser;

static int fail(rx_parser *p, size_t at, const char *what)
{
	if (!p->err)
		p->err = nf_error_set(NF_EINPUT, "regex: at %zu: %s", at, what);
	return -1;
}

static int node(rx_parser *p, int kind)
{
	if (p->err)
		return -1;
	if (p->n_nodes >= p->cap)
		return fail(p, p->pos, "the expression is too long");
	rx_node *n = &p->nodes[p->n_nodes];
	memset(n, 0, sizeof *n);
	n->kind = kind;
	return (int)p->n_nodes++;
}

static void set_add(uint8_t *set, int lo, int hi)
{
	for (int c = lo; c <= hi; c++)
		set[c >> 3] |= (uint8_t)(1u << (c & 7));
}

static void set_complement(rx_node *n)
{
	for (int i = 0; i < 16; i++) /* ASCII only: bytes 0-127 */
		n->set[i] = (uint8_t)~n->set[i];
	n->non_ascii = !n->non_ascii;
}

/* \d \w \s (upper case: negated) into a class; 0 when c is none of them. */
static int class_escape(rx_node *n, char c)
{
	uint8_t set[32] = {0};
	switch (c | 0x20) {
	case 'd': set_add(set, '0', '9'); break;
	case 'w': set_add(set, '0', '9'); set_add(set, 'a', 'z'); set_add(set, 'A', 'Z'); set_add(set, '_', '_'); break;
	case 's': set_add(set, ' ', ' '); set_add(set, '\t', '\r'); break;
	default: return 0;
	}
	if (c >= 'A' && c <= 'Z') {
		for (int i = 0; i < 16; i++)
			set[i] = (uint8_t)~set[i];
		n->non_ascii = true;
	}
	for (int i = 0; i < 32; i++)
		n->set[i] |= set[i];
	return 1;
}

/* The byte an escape stands for, or -1 (with the error set) when it is not
 * a single-character escape we take. */
static int escaped_byte(rx_parser *p, char c)
{
	switch (c) {
	case 'n': return '\n';
	case 't': return '\t';
	case 'r': return '\r';
	case 'f': return '\f';
	case 'v': return '\v';
	case '0': return 0;
	}
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return fail(p, p->pos - 1, "this escape is not supported");
	if ((unsigned char)c >= 0x80)
		return fail(p, p->pos - 1, "an escaped non-ASCII byte is not supported");
	return (unsigned char)c;
}

/* One class member (a character, a range or a class escape) at p->pos. */
static void class_item(rx_parser *p, rx_node *n)
{
	size_t at = p->pos;
	int lo = (unsigned char)p->s[p->pos++];
	if (lo == '\\') {
		if (p->pos >= p->len) {
			fail(p, at, "the class ends in a lone backslash");
			return;
		}
		char e = p->s[p->pos++];
		if (class_escape(n, e))
			return;
		lo = escaped_byte(p, e);
	}
	if (lo < 0)
		return;
	if (lo >= 0x80) {
		fail(p, at, "non-ASCII characters in a class are not supported");
		return;
	}
	int hi = lo;
	if (p->pos + 1 < p->len && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
		p->pos++;
		at = p->pos;
		hi = (unsigned char)p->s[p->pos++];
		if (hi == '\\' && p->pos < p->len)
			hi = escaped_byte(p, p->s[p->pos++]);
		if (hi < 0)
			return;
		if (hi >= 0x80 || hi < lo) {
			fail(p, at, hi >= 0x80 ? "non-ASCII characters in a class are not supported" :
						 "the range is out of order");
			return;
		}
	}
	set_add(n->set, lo, hi);
}

static int parse_class(rx_parser *p)
{
	size_t open = p->pos++;
	int id = node(p, RX_CLASS);
	if (id < 0)
		return -1;
	bool negate = p->pos < p->len && p->s[p->pos] == '^';
	if (negate)
		p->pos++;
	bool first = true;
	while (!p->err && p->pos < p->len && (p->s[p->pos] != ']' || first)) {
		class_item(p, &p->nodes[id]);
		first = false;
	}
	if (p->err)
		return -1;
	if (p->pos >= p->len)
		return fail(p, open, "the class is not closed");
	p->pos++;
	if (negate)
		set_complement(&p->nodes[id]);
	return id;
}

static size_t utf8_length(unsigned char c)
{
	return c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
}

static int parse_alt(rx_parser *p);

static int parse_group(rx_parser *p)
{
	size_t open = p->pos++;
	if (p->pos < p->len && p->s[p->pos] == '?') {
		if (p->pos + 1 < p->len && p->s[p->pos + 1] == ':')
			p->pos += 2;
		else
			return fail(p, open, "lookaround and group flags are not supported");
	}
	if (++p->nesting > RX_MAX_NESTING)
		return fail(p, open, "groups nest too deep");
	int id = parse_alt(p);
	p->nesting--;
	if (p->err)
		return -1;
	if (p->pos >= p->len || p->s[p->pos] != ')')
		return fail(p, open, "the group is not closed");
	p->pos++;
	return id;
}

static int parse_escape(rx_parser *p)
{
	size_t at = p->pos++;
	if (p->pos >= p->len)
		return fail(p, at, "the expression ends in a lone backslash");
	char c = p->s[p->pos++];
	int id = node(p, RX_CLASS);
	if (id < 0 || class_escape(&p->nodes[id], c))
		return id;
	if (c == 'b' || c == 'B' || c == 'A' || c == 'Z' || c == 'z')
		return fail(p, at, "assertions are not supported");
	if (c >= '1' && c <= '9')
		return fail(p, at, "backreferences are not supported");
	int b = escaped_byte(p, c);
	if (b < 0)
		return -1;
	p->nodes[id].kind = RX_LIT;
	p->nodes[id].lit[0] = (uint8_t)b;
	p->nodes[id].lit_len = 1;
	return id;
}

static int parse_atom(rx_parser *p)
{
	unsigned char c = (unsigned char)p->s[p->pos];
	if (c == '(')
		return parse_group(p);
	if (c == '[')
		return parse_class(p);
	if (c == '\\')
		return parse_escape(p);
	if (c == '*' || c == '+' || c == '?' || c == '{')
		return fail(p, p->pos, "a quantifier follows nothing");
	int id = node(p, RX_CLASS);
	if (id < 0)
		return -1;
	rx_node *n = &p->nodes[id];
	if (c == '.') {
		p->pos++;
		set_add(n->set, 0, 0x7F);
		n->set['\n' >> 3] &= (uint8_t)~(1u << ('\n' & 7));
		n->non_ascii = true;
		return id;
	}
	size_t k = utf8_length(c);
	if (p->pos + k > p->len)
		return fail(p, p->pos, "a UTF-8 character is cut short");
	n->kind = RX_LIT;
	memcpy(n->lit, p->s + p->pos, k);
	n->lit_len = (uint8_t)k;
	p->pos += k;
	return id;
}

/* A bounded decimal count at p->pos, or -1 when there is none. */
static int parse_count(rx_parser *p)
{
	int v = -1;
	while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
		v = (v < 0 ? 0 : v) * 10 + (p->s[p->pos++] - '0');
		if (v > RX_MAX_COUNT)
			return fail(p, p->pos, "a repetition count above 1000");
	}
	return v;
}

static int parse_braces(rx_parser *p, int *min, int *max)
{
	size_t open = p->pos++;
	*min = parse_count(p);
	*max = *min;
	if (p->err)
		return -1;
	if (*min < 0)
		return fail(p, open, "a repetition needs a count");
	if (p->pos < p->len && p->s[p->pos] == ',') {
		p->pos++;
		*max = parse_count(p);
		if (p->err)
			return -1;
	}
	if (p->pos >= p->len || p->s[p->pos] != '}')
		return fail(p, open, "the repetition is not closed");
	p->pos++;
	if (*max >= 0 && *max < *min)
		return fail(p, open, "the repetition's bounds are out of order");
	return 0;
}

static int parse_repeat(rx_parser *p)
{
	int id = parse_atom(p);
	while (!p->err && id >= 0 && p->pos < p->len) {
		char c = p->s[p->pos];
		int min, max;
		if (c == '*' || c == '+' || c == '?') {
			p->pos++;
			min = c == '+';
			max = c == '?' ? 1 : -1;
		} else if (c == '{') {
			if (parse_braces(p, &min, &max))
				return -1;
		} else {
			break;
		}
		if (p->pos < p->len && (p->s[p->pos] == '?' || p->s[p->pos] == '+'))
			p->pos++; /* lazy or possessive: the same language */
		int r = node(p, RX_REPEAT);
		if (r < 0)
			return -1;
		p->nodes[r].a = id;
		p->nodes[r].min = min;
		p->nodes[r].max = max;
		id = r;
	}
	return id;
}

static int binary(rx_parser *p, int kind, int a, int b)
{
	if (a < 0)
		return b;
	int id = node(p, kind);
	if (id >= 0) {
		p->nodes[id].a = a;
		p->nodes[id].b = b;
	}
	return id;
}

static int parse_cat(rx_parser *p)
{
	int id = -1;
	while (!p->err && p->pos < p->len && p->s[p->pos] != '|' && p->s[p->pos] != ')') {
		char c = p->s[p->pos];
		if (c == '^' || c == '$') {
			/* anchors: the match is whole anyway, so only at the ends */
			bool at_end = c == '$' && p->pos + 1 == p->len;
			if (!(c == '^' && p->pos == 0) && !at_end)
				return fail(p, p->pos, "an anchor inside the expression is not supported");
			p->pos++;
			continue;
		}
		int r = parse_repeat(p);
		if (r < 0)
			return -1;
		id = binary(p, RX_CAT, id, r);
	}
	return id < 0 ? node(p, RX_EMPTY) : id;
}

static int parse_alt(rx_parser *p)
{
	int id = parse_cat(p);
	while (!p->err && p->pos < p->len && p->s[p->pos] == '|') {
		p->pos++;
		id = binary(p, RX_ALT, id, parse_cat(p));
	}
	return p->err ? -1 : id;
}

/* ------------------------------------------------ emit */

/* The tree, and whether it is written as the content of a JSON string
 * (JSON Schema's pattern: the regex matches the decoded characters, so '"',
 * '\' and control characters are emitted as their escapes). */
typedef struct rx_emit {
	const rx_node *nodes;
	bool json;
	int id; /* the subtree a repetition copies */
} rx_emit;

static gr_frag emit(gr_nfa *n, const rx_emit *e, int id);

static gr_frag emit_cb(gr_nfa *n, void *ctx)
{
	rx_emit *e = ctx;
	return emit(n, e, e->id);
}

/* The escape JSON writes for byte c inside a string. */
static size_t json_escape(char *out, uint8_t c)
{
	static const char short_form[] = {['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r',
					  ['\t'] = 't', ['"'] = '"', ['\\'] = '\\'};
	if (c < sizeof short_form && short_form[c]) {
		out[0] = '\\';
		out[1] = short_form[c];
		return 2;
	}
	return (size_t)snprintf(out, 7, "\\u%04x", c);
}

static bool json_special(int c)
{
	return c < 0x20 || c == '"' || c == '\\';
}

/* Bytes [lo, hi] from a to b, the JSON-special ones as their escapes. */
static void json_range(gr_nfa *n, int32_t a, int32_t b, int lo, int hi)
{
	for (int c = lo; c <= hi; c++) {
		if (json_special(c)) {
			char esc[8];
			gr_frag f = gr_lit(n, esc, json_escape(esc, (uint8_t)c));
			gr_eps(n, a, f.in);
			gr_eps(n, f.out, b);
			continue;
		}
		int end = c;
		while (end + 1 <= hi && !json_special(end + 1))
			end++;
		gr_range(n, a, b, (uint8_t)c, (uint8_t)end);
		c = end;
	}
}

static void edge(gr_nfa *n, const rx_emit *e, int32_t a, int32_t b, int lo, int hi)
{
	if (e->json)
		json_range(n, a, b, lo, hi);
	else
		gr_range(n, a, b, (uint8_t)lo, (uint8_t)hi);
}

static gr_frag emit_lit(gr_nfa *n, const rx_emit *e, const rx_node *x)
{
	int32_t in = gr_state(n), cur = in;
	for (int i = 0; i < x->lit_len; i++) {
		int32_t next = gr_state(n);
		edge(n, e, cur, next, x->lit[i], x->lit[i]);
		cur = next;
	}
	return (gr_frag){in, cur};
}

static gr_frag emit_class(gr_nfa *n, const rx_emit *e, const rx_node *x)
{
	int32_t in = gr_state(n), out = gr_state(n);
	for (int c = 0; c < 128; c++) {
		if (!(x->set[c >> 3] & (1u << (c & 7))))
			continue;
		int hi = c;
		while (hi + 1 < 128 && (x->set[(hi + 1) >> 3] & (1u << ((hi + 1) & 7))))
			hi++;
		edge(n, e, in, out, c, hi);
		c = hi;
	}
	if (x->non_ascii) {
		gr_frag u = gr_utf8_char(n, false);
		gr_eps(n, in, u.in);
		gr_eps(n, u.out, out);
	}
	return (gr_frag){in, out};
}

static gr_frag emit(gr_nfa *n, const rx_emit *e, int id)
{
	const rx_node *x = &e->nodes[id];
	switch (x->kind) {
	case RX_LIT: return emit_lit(n, e, x);
	case RX_CLASS: return emit_class(n, e, x);
	case RX_CAT: return gr_cat(n, emit(n, e, x->a), emit(n, e, x->b));
	case RX_ALT: return gr_alt(n, emit(n, e, x->a), emit(n, e, x->b));
	case RX_REPEAT: {
		rx_emit sub = {e->nodes, e->json, x->a};
		return gr_repeat(n, emit_cb, &sub, x->min, x->max);
	}
	default: return gr_empty(n);
	}
}

static int build(gr_nfa *n, const char *re, size_t len, bool json, gr_frag *out)
{
	/* every node but the empty ones consumes a byte, and so does every
	 * '|' or group that could hold an empty one */
	rx_parser p = {re, len, 0, NULL, 0, 0, 0, 0};
	p.cap = len < RX_MAX_NODES / 2 ? len * 2 + 2 : RX_MAX_NODES;
	if (!(p.nodes = malloc(p.cap * sizeof *p.nodes)))
		return nf_error_set(NF_ENOMEM, "regex: out of memory");
	int root = parse_alt(&p);
	if (!p.err && p.pos < p.len)
		fail(&p, p.pos, "an unmatched ')'");
	if (!p.err) {
		rx_emit e = {p.nodes, json, root};
		*out = emit(n, &e, root);
	}
	free(p.nodes);
	return p.err ? p.err : n->err;
}

int gr_regex_build(gr_nfa *n, const char *re, size_t len, gr_frag *out)
{
	return build(n, re, len, false, out);
}

int gr_regex_build_json(gr_nfa *n, const char *re, size_t len, gr_frag *out)
{
	return build(n, re, len, true, out);
}
