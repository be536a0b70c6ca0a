/*
 * grammar_nfa.c - the Thompson NFA every grammar front end builds: states,
 * byte-range and epsilon edges, the fragment combinators, counted
 * repetition, and the finishing pass (edges sorted per state, states that
 * cannot reach acceptance marked dead so that the DFA never enters them).
 */
#include "engine/grammar_int.h"

#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

void gr_nfa_init(gr_nfa *n, size_t max_states)
{
	memset(n, 0, sizeof *n);
	n->max_states = max_states;
	n->n_states = 1; /* state 0: the dummy every failed call returns */
	n->start = n->accept = 0;
}

void gr_nfa_release(gr_nfa *n)
{
	free(n->edges);
	free(n->first);
	free(n->live);
	memset(n, 0, sizeof *n);
}

int32_t gr_state(gr_nfa *n)
{
	if (n->err)
		return 0;
	if (n->n_states >= n->max_states) {
		n->err = nf_error_set(NF_EINPUT, "the automaton exceeds %zu states", n->max_states);
		return 0;
	}
	return (int32_t)n->n_states++;
}

static void add_edge(gr_nfa *n, gr_edge e)
{
	if (n->err)
		return;
	if (n->n_edges == n->cap_edges) {
		size_t cap = n->cap_edges ? n->cap_edges * 2 : 1024, bytes;
		gr_edge *p;
		if (!nf_size_mul(&bytes, cap, sizeof *p) || !(p = realloc(n->edges, bytes))) {
			n->err = nf_error_set(NF_ENOMEM, "grammar: out of memory");
			return;
		}
		n->edges = p;
		n->cap_edges = cap;
	}
	n->edges[n->n_edges++] = e;
}

void gr_eps(gr_nfa *n, int32_t a, int32_t b)
{
	add_edge(n, (gr_edge){a, b, 0, 0, 1});
}

void gr_range(gr_nfa *n, int32_t a, int32_t b, uint8_t lo, uint8_t hi)
{
	add_edge(n, (gr_edge){a, b, lo, hi, 0});
}

gr_frag gr_empty(gr_nfa *n)
{
	int32_t s = gr_state(n);
	return (gr_frag){s, s};
}

gr_frag gr_never(gr_nfa *n)
{
	int32_t a = gr_state(n), b = gr_state(n);
	return (gr_frag){a, b};
}

gr_frag gr_bytes(gr_nfa *n, uint8_t lo, uint8_t hi)
{
	int32_t a = gr_state(n), b = gr_state(n);
	gr_range(n, a, b, lo, hi);
	return (gr_frag){a, b};
}

gr_frag gr_lit(gr_nfa *n, const char *s, size_t len)
{
	int32_t in = gr_state(n), cur = in;
	for (size_t i = 0; i < len; i++) {
		int32_t next = gr_state(n);
		gr_range(n, cur, next, (uint8_t)s[i], (uint8_t)s[i]);
		cur = next;
	}
	return (gr_frag){in, cur};
}

gr_frag gr_cat(gr_nfa *n, gr_frag a, gr_frag b)
{
	gr_eps(n, a.out, b.in);
	return (gr_frag){a.in, b.out};
}

gr_frag gr_alt(gr_nfa *n, gr_frag a, gr_frag b)
{
	int32_t in = gr_state(n), out = gr_state(n);
	gr_eps(n, in, a.in);
	gr_eps(n, in, b.in);
	gr_eps(n, a.out, out);
	gr_eps(n, b.out, out);
	return (gr_frag){in, out};
}

gr_frag gr_opt(gr_nfa *n, gr_frag a)
{
	int32_t in = gr_state(n), out = gr_state(n);
	gr_eps(n, in, a.in);
	gr_eps(n, a.out, out);
	gr_eps(n, in, out);
	return (gr_frag){in, out};
}

gr_frag gr_star(gr_nfa *n, gr_frag a)
{
	int32_t in = gr_state(n), out = gr_state(n);
	gr_eps(n, in, a.in);
	gr_eps(n, a.out, a.in);
	gr_eps(n, a.out, out);
	gr_eps(n, in, out);
	return (gr_frag){in, out};
}

/* Continuation bytes 80-BF, k of them, from a to b. */
static void cont_bytes(gr_nfa *n, int32_t a, int32_t b, int k)
{
	int32_t cur = a;
	for (int i = 0; i < k; i++) {
		int32_t next = i + 1 == k ? b : gr_state(n);
		gr_range(n, cur, next, 0x80, 0xBF);
		cur = next;
	}
}

/* A lead byte range, then one constrained second byte, then k-1 free ones. */
static void utf8_seq(gr_nfa *n, int32_t in, int32_t out, uint8_t lead_lo, uint8_t lead_hi,
		     uint8_t second_lo, uint8_t second_hi, int k)
{
	int32_t a = gr_state(n), b = k > 1 ? gr_state(n) : out;
	gr_range(n, in, a, lead_lo, lead_hi);
	gr_range(n, a, b, second_lo, second_hi);
	if (k > 1)
		cont_bytes(n, b, out, k - 1);
}

gr_frag gr_utf8_char(gr_nfa *n, bool ascii_too)
{
	int32_t in = gr_state(n), out = gr_state(n);
	if (ascii_too)
		gr_range(n, in, out, 0x00, 0x7F);
	/* RFC 3629's table: no overlong forms, no surrogates, nothing past U+10FFFF */
	int32_t two = gr_state(n);
	gr_range(n, in, two, 0xC2, 0xDF);
	gr_range(n, two, out, 0x80, 0xBF);
	utf8_seq(n, in, out, 0xE0, 0xE0, 0xA0, 0xBF, 2);
	utf8_seq(n, in, out, 0xE1, 0xEC, 0x80, 0xBF, 2);
	utf8_seq(n, in, out, 0xED, 0xED, 0x80, 0x9F, 2);
	utf8_seq(n, in, out, 0xEE, 0xEF, 0x80, 0xBF, 2);
	utf8_seq(n, in, out, 0xF0, 0xF0, 0x90, 0xBF, 3);
	utf8_seq(n, in, out, 0xF1, 0xF3, 0x80, 0xBF, 3);
	utf8_seq(n, in, out, 0xF4, 0xF4, 0x80, 0x8F, 3);
	return (gr_frag){in, out};
}

gr_frag gr_repeat(gr_nfa *n, gr_emit_fn emit, void *ctx, int min, int max)
{
	if (max < 0 && min > 0) {
		/* x{m,}: m copies, the last one looping on itself (x+), no extra copy */
		gr_frag whole = gr_empty(n), last = {0, 0};
		for (int i = 0; i < min && !n->err; i++)
			whole = gr_cat(n, whole, last = emit(n, ctx));
		gr_eps(n, last.out, last.in);
		return whole;
	}
	gr_frag whole = gr_empty(n);
	for (int i = 0; i < min && !n->err; i++)
		whole = gr_cat(n, whole, emit(n, ctx));
	if (max < 0)
		return gr_cat(n, whole, gr_star(n, emit(n, ctx)));
	/* x{0,k}: each further copy may be left out, and then so are the rest */
	int32_t out = gr_state(n), cur = whole.out;
	for (int i = min; i < max && !n->err; i++) {
		gr_frag c = emit(n, ctx);
		gr_eps(n, cur, out);
		gr_eps(n, cur, c.in);
		cur = c.out;
	}
	gr_eps(n, cur, out);
	return (gr_frag){whole.in, out};
}

typedef struct sep_ctx {
	gr_emit_fn emit;
	void *ctx;
	gr_frag (*sep)(gr_nfa *, void *);
} sep_ctx;

static gr_frag sep_then_item(gr_nfa *n, void *p)
{
	sep_ctx *s = p;
	gr_frag a = s->sep(n, s->ctx);
	return gr_cat(n, a, s->emit(n, s->ctx));
}

gr_frag gr_repeat_sep(gr_nfa *n, gr_emit_fn emit, void *ctx, gr_frag (*sep)(gr_nfa *, void *),
		      int min, int max)
{
	sep_ctx s = {emit, ctx, sep};
	if (max == 0)
		return gr_empty(n);
	gr_frag first = emit(n, ctx), some;
	if (max < 0 && min <= 1) {
		/* x (sep x)*: one copy of x, its end leading back through sep to its
		 * start (each nesting level would otherwise double the automaton) */
		gr_frag back = sep(n, ctx);
		gr_eps(n, first.out, back.in);
		gr_eps(n, back.out, first.in);
		some = first;
	} else {
		some = gr_cat(n, first, gr_repeat(n, sep_then_item, &s, min > 0 ? min - 1 : 0,
						  max < 0 ? -1 : max - 1));
	}
	return min > 0 ? some : gr_opt(n, some);
}

static int cmp_edge(const void *a, const void *b)
{
	const gr_edge *x = a, *y = b;
	return x->from < y->from ? -1 : x->from > y->from;
}

/* Reverse reachability from the accepting state: a reverse CSR of the
 * edges (rstart[s] .. rstart[s + 1] index the states with an edge into s). */
static int mark_live(gr_nfa *n)
{
	size_t ns = n->n_states;
	uint32_t *rstart = calloc(ns + 1, sizeof *rstart);
	uint32_t *cursor = calloc(ns + 1, sizeof *cursor);
	int32_t *rfrom = malloc((n->n_edges + 1) * sizeof *rfrom);
	int32_t *stack = malloc(ns * sizeof *stack);
	int err = 0;
	if (!rstart || !cursor || !rfrom || !stack) {
		err = nf_error_set(NF_ENOMEM, "grammar: out of memory");
		goto done;
	}
	for (size_t i = 0; i < n->n_edges; i++)
		rstart[n->edges[i].to + 1]++;
	for (size_t s = 0; s < ns; s++)
		rstart[s + 1] += rstart[s];
	memcpy(cursor, rstart, (ns + 1) * sizeof *cursor);
	for (size_t i = 0; i < n->n_edges; i++)
		rfrom[cursor[n->edges[i].to]++] = n->edges[i].from;
	size_t top = 0;
	n->live[n->accept] = true;
	stack[top++] = n->accept;
	while (top) {
		int32_t s = stack[--top];
		for (uint32_t k = rstart[s]; k < rstart[s + 1]; k++) {
			int32_t f = rfrom[k];
			if (!n->live[f]) {
				n->live[f] = true;
				stack[top++] = f;
			}
		}
	}
done:
	free(rstart);
	free(cursor);
	free(rfrom);
	free(stack);
	return err;
}

int gr_nfa_finish(gr_nfa *n, gr_frag whole, const char *what)
{
	if (n->err)
		return nf_error_wrap(n->err, "%s", what);
	n->start = whole.in;
	n->accept = whole.out;
	if (n->n_edges) /* a grammar of "" alone has none, and no array */
		qsort(n->edges, n->n_edges, sizeof *n->edges, cmp_edge);
	n->first = calloc(n->n_states + 1, sizeof *n->first);
	n->live = calloc(n->n_states, sizeof *n->live);
	if (!n->first || !n->live)
		return nf_error_set(NF_ENOMEM, "grammar: out of memory");
	for (size_t i = 0; i < n->n_edges; i++)
		n->first[n->edges[i].from + 1]++;
	for (size_t s = 0; s < n->n_states; s++)
		n->first[s + 1] += n->first[s];
	int err = mark_live(n);
	if (err)
		return err;
	if (!n->live[n->start])
		return nf_error_set(NF_EINPUT, "%s: no string satisfies it (within the depth bound)", what);
	return 0;
}
