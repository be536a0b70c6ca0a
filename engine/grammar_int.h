/*
 * grammar_int.h - the grammar's internals shared by its files: the NFA
 * builder (grammar_nfa.c), the JSON pieces (grammar_json.c), integer ranges
 * (grammar_intrange.c), the front ends (grammar_regex.c, grammar_schema.c),
 * the lazy DFA (grammar_dfa.c) and the masks (grammar_mask.c).
 */
#ifndef NF_ENGINE_GRAMMAR_INT_H
#define NF_ENGINE_GRAMMAR_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/grammar.h"

/* ------------------------------------------------------------ the NFA */

/* An edge: on a byte in [lo, hi], or an epsilon edge (eps). */
typedef struct gr_edge {
	int32_t from, to;
	uint8_t lo, hi, eps;
} gr_edge;

/* A piece of automaton with one way in and one way out. */
typedef struct gr_frag {
	int32_t in, out;
} gr_frag;

/* The builder.  Errors are sticky: after the first failure (err != 0, the
 * message in nf_error_last) every call is a no-op returning state 0, so the
 * front ends check once at the end rather than after every edge. */
typedef struct gr_nfa {
	size_t n_states, max_states;
	gr_edge *edges;
	size_t n_edges, cap_edges;
	int err;
	/* after gr_nfa_finish: edges sorted by `from`, CSR offsets */
	uint32_t *first;  /* n_states + 1 */
	bool *live;       /* can reach the accepting state */
	int32_t start, accept;
} gr_nfa;

void gr_nfa_init(gr_nfa *n, size_t max_states);
void gr_nfa_release(gr_nfa *n);
int32_t gr_state(gr_nfa *n);
void gr_eps(gr_nfa *n, int32_t a, int32_t b);
void gr_range(gr_nfa *n, int32_t a, int32_t b, uint8_t lo, uint8_t hi);
/* Fragments. */
gr_frag gr_empty(gr_nfa *n);                       /* "" */
gr_frag gr_never(gr_nfa *n);                       /* no string */
gr_frag gr_bytes(gr_nfa *n, uint8_t lo, uint8_t hi); /* one byte in [lo, hi] */
gr_frag gr_lit(gr_nfa *n, const char *s, size_t len);
gr_frag gr_cat(gr_nfa *n, gr_frag a, gr_frag b);
gr_frag gr_alt(gr_nfa *n, gr_frag a, gr_frag b);
gr_frag gr_opt(gr_nfa *n, gr_frag a);
gr_frag gr_star(gr_nfa *n, gr_frag a);
/* One UTF-8 character (any code point but surrogates), or one whose first
 * byte is not ASCII (the non-ASCII characters, for negated classes). */
gr_frag gr_utf8_char(gr_nfa *n, bool ascii_too);

/* Builds a fresh copy of the same sub-automaton each call: what repetition
 * with counts needs. */
typedef gr_frag (*gr_emit_fn)(gr_nfa *n, void *ctx);
/* emit{min, max} (max < 0: unbounded). */
gr_frag gr_repeat(gr_nfa *n, gr_emit_fn emit, void *ctx, int min, int max);
/* emit (sep emit){min-1, max-1}, or nothing when min is 0. */
gr_frag gr_repeat_sep(gr_nfa *n, gr_emit_fn emit, void *ctx, gr_frag (*sep)(gr_nfa *, void *),
		      int min, int max);

/* Close the automaton at `whole` (its in the start, its out accepting):
 * sort the edges and mark the live states.  NF_EINPUT when the language is
 * empty. */
int gr_nfa_finish(gr_nfa *n, gr_frag whole, const char *what);

/* ------------------------------------------------ JSON's lexical pieces */

typedef struct gr_json {
	gr_nfa *nfa;
	int ws;          /* NF_GRAMMAR_WS_* (resolved) */
	int max_string;  /* 0: unbounded */
	int max_depth;
} gr_json;

gr_frag gr_json_ws(gr_json *j);
/* A JSON string of min..max characters (max < 0: unbounded, then the
 * default cap applies). */
gr_frag gr_json_string(gr_json *j, int min, int max);
/* One character of a string's content (gr_emit_fn; ctx unused). */
gr_frag gr_json_string_char(gr_nfa *n, void *ctx);
/* Integers in [lo, hi] in canonical form (no leading zeros, no "-0"). */
gr_frag gr_json_int_range(gr_json *j, int64_t lo, int64_t hi);
/* Numbers in [lo, hi] (integer bounds), with an optional fraction. */
gr_frag gr_json_number_range(gr_json *j, int64_t lo, int64_t hi);
/* Any JSON number (bounded digits, an exponent). */
gr_frag gr_json_number(gr_json *j);
/* Any JSON value / object nested at most `depth` more levels. */
gr_frag gr_json_value(gr_json *j, int depth);
gr_frag gr_json_object(gr_json *j, int depth);
gr_frag gr_json_array(gr_json *j, int depth);
/* The bound of integer digits without a bound from the schema. */
#define GR_INT_LIMIT 999999999999999999LL /* 10^18 - 1 */

/* Non-negative integers [a, b] in canonical decimal (grammar_intrange.c). */
gr_frag gr_uint_range(gr_nfa *n, uint64_t a, uint64_t b);

/* ------------------------------------------------ front ends */

int gr_regex_build(gr_nfa *n, const char *re, size_t len, gr_frag *out);
/* The same as the content of a JSON string: the regex matches the decoded
 * characters, so '"', '\\' and control characters are emitted escaped. */
int gr_regex_build_json(gr_nfa *n, const char *re, size_t len, gr_frag *out);
int gr_schema_build(gr_json *j, const void *schema /* json_t */, gr_frag *out);

/* ------------------------------------------------ the grammar */

/* A DFA state: its NFA states (sorted) in the set pool. */
typedef struct gr_dstate {
	uint32_t set_off, set_len;
	uint32_t hash;
	int32_t mask_slot; /* -1: no cached mask */
	bool accept;
} gr_dstate;

#define GR_DEAD (-1)
#define GR_UNKNOWN (-2)

struct nf_grammar {
	gr_nfa nfa;
	pthread_mutex_t lock;
	/* bytes with the same edges everywhere share a class */
	uint8_t byte_class[256];
	int n_classes;
	uint8_t class_byte[256]; /* a representative byte per class */
	/* the DFA */
	gr_dstate *ds;
	size_t n_ds, cap_ds, max_ds;
	int32_t *trans;            /* n_ds x n_classes, GR_UNKNOWN until computed */
	int32_t *set_pool;
	size_t set_used, set_cap;
	int32_t *table;            /* open addressing: set -> DFA state, -1 empty */
	size_t table_cap;
	int32_t start;
	/* closure scratch */
	uint32_t *mark;
	uint32_t mark_gen;
	int32_t *stack, *buf;
	/* masks (grammar_mask.c) */
	const nf_grammar_vocab *vocab;
	uint32_t *masks;           /* n_slots x mask words */
	int32_t *slot_owner;       /* DFA state per slot, -1 free */
	size_t n_slots, next_slot;
	size_t mask_cache_bytes;
	int32_t *walk;             /* trie walk: DFA state per trie node */
};

/* The vocabulary's trie for the mask walk (grammar_vocab.c): node bytes,
 * parents, subtree ends, token offsets and ids; returns the node count. */
size_t gr_vocab_nodes(const nf_grammar_vocab *v, const uint8_t **byte, const int32_t **parent,
		      const int32_t **end, const uint32_t **tok, const int32_t **ids);
const int32_t *gr_vocab_eog(const nf_grammar_vocab *v, size_t *n);

/* Wrap a finished NFA into a grammar (takes the NFA over). */
int gr_grammar_new(nf_grammar **out, gr_nfa *nfa, const nf_grammar_opts *o);
/* The DFA state after byte b from state s (GR_DEAD: none); NF_ENOMEM via
 * *err when the DFA is full.  Caller holds the lock. */
int32_t gr_dfa_step(nf_grammar *g, int32_t s, uint8_t b, int *err);
/* Release the DFA and masks. */
void gr_dfa_release(nf_grammar *g);

#endif
