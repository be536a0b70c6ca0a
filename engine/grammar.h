/*
 * grammar.h - structured output: a grammar compiled from a JSON Schema, "any
 * JSON object", a regular expression or a list of choices into one byte-level
 * automaton, and the token masks that keep decoding inside it.
 *
 * The automaton is a Thompson NFA (bounded in size; schema recursion through
 * $ref and the nesting of untyped values expanded to a bounded depth, so the
 * language is regular) determinized lazily: a DFA state is the set of NFA
 * states it stands for, built the first time a byte leads to it.  A token
 * mask is the set of vocabulary tokens whose bytes the DFA accepts from a
 * state, found by walking a trie of the vocabulary's token bytes with the DFA
 * (dead branches pruned), and cached per DFA state.  End-of-generation tokens
 * are allowed exactly where the automaton accepts.  docs/structured-output.md
 * lists what each compiler supports.
 *
 * The text a grammar constrains is the concatenation of the chosen tokens'
 * bytes as nf_grammar_vocab_bytes gives them (each token's bytes in the
 * middle of a text: no leading space dropped).
 *
 * Thread safety: a grammar may be shared by states on several threads (its
 * lazily built automaton and mask cache are behind a mutex); a state is used
 * by one thread at a time.
 */
#ifndef NF_ENGINE_GRAMMAR_H
#define NF_ENGINE_GRAMMAR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/tokenizer.h"

typedef struct nf_grammar nf_grammar;
typedef struct nf_grammar_vocab nf_grammar_vocab;
typedef struct nf_grammar_state nf_grammar_state;

/* Whitespace allowed between JSON tokens: always bounded, so that a model
 * cannot loop on it. */
enum {
	NF_GRAMMAR_WS_DEFAULT = 0, /* NF_GRAMMAR_WS_SPACE */
	NF_GRAMMAR_WS_NONE = 1,    /* compact JSON only */
	NF_GRAMMAR_WS_SPACE = 2,   /* nothing or one space */
	NF_GRAMMAR_WS_NEWLINE = 3, /* nothing, one space, or a newline and up to 16 spaces */
};

/* Compile options; a zeroed struct (or NULL) gives the defaults. */
typedef struct nf_grammar_opts {
	int max_depth;        /* nesting of untyped values (json_object, {}) and
			       * $ref recursion; 0: 4, at most 8 */
	int max_string;       /* characters of a string without maxLength; 0: unbounded */
	int whitespace;       /* NF_GRAMMAR_WS_* */
	size_t max_nfa_states; /* 0: 1 << 20; larger grammars are refused (NF_EINPUT) */
	size_t max_dfa_states; /* 0: 1 << 18; past it an advance fails (NF_ENOMEM) */
	size_t mask_cache_bytes; /* 0: 64 MiB of cached masks, oldest evicted first */
} nf_grammar_opts;

/* A JSON Schema (borrowed for the call).  NF_EINPUT "schema: /json/pointer:
 * what" for a schema it cannot compile (unsupported keyword, bad value,
 * unresolvable $ref, an empty language). */
int nf_grammar_from_schema(nf_grammar **out, const json_t *schema, const nf_grammar_opts *o);
/* The same from JSON text (len bytes); a syntax error says line:col. */
int nf_grammar_from_schema_text(nf_grammar **out, const char *json, size_t len,
				const nf_grammar_opts *o);
/* Any JSON object (response_format json_object), nested to max_depth. */
int nf_grammar_from_json_object(nf_grammar **out, const nf_grammar_opts *o);
/* A regular expression matched whole (anchored): literals, escapes, classes,
 * ., groups, |, ?, *, +, {m,n}.  NF_EINPUT "regex: at N: what" (N the byte
 * offset) for what it cannot compile. */
int nf_grammar_from_regex(nf_grammar **out, const char *re, size_t len, const nf_grammar_opts *o);
/* Exactly one of n strings (n >= 1; lens[i] bytes each; lens NULL: NUL-terminated). */
int nf_grammar_from_choices(nf_grammar **out, const char *const *choices, const size_t *lens,
			    size_t n, const nf_grammar_opts *o);
void nf_grammar_free(nf_grammar *g); /* NULL is fine; after every state on it is freed */

/* Whether the bytes s[0, len) are a whole sentence of the grammar (*matches).
 * 0, or NF_ENOMEM when the automaton outgrows max_dfa_states. */
int nf_grammar_match(nf_grammar *g, const char *s, size_t len, bool *matches);

/* The vocabulary as bytes: every token's bytes (control tokens and tokens of
 * no bytes are never allowed by a mask) and its end-of-generation tokens.
 * Build it once per tokenizer and share it between grammars; it borrows
 * nothing from t. */
int nf_grammar_vocab_new(nf_grammar_vocab **out, const nf_tokenizer *t);
/* From n byte strings (copied) and n_eog end-of-generation ids. */
int nf_grammar_vocab_from_bytes(nf_grammar_vocab **out, const nf_tok_str *tokens, int n,
				const int *eog, size_t n_eog);
void nf_grammar_vocab_free(nf_grammar_vocab *v);
int nf_grammar_vocab_size(const nf_grammar_vocab *v);
/* The bytes token `id` adds to the text ("" for control tokens and ids out
 * of range); owned by the vocabulary. */
const char *nf_grammar_vocab_bytes(const nf_grammar_vocab *v, int id, size_t *len);
bool nf_grammar_vocab_is_eog(const nf_grammar_vocab *v, int id);

/* Words of a token mask over v: bit (id % 32) of word id / 32 set = allowed. */
size_t nf_grammar_mask_words(const nf_grammar_vocab *v);

/* A decoding position in grammar g over vocabulary v (both borrowed; they
 * must outlive the state).  A grammar keeps its mask cache for the first
 * vocabulary it is used with: another one is NF_EINPUT. */
int nf_grammar_state_new(nf_grammar_state **out, nf_grammar *g, const nf_grammar_vocab *v);
void nf_grammar_state_free(nf_grammar_state *s); /* NULL is fine */
/* A copy of s at the same position (n > 1 answers from one prompt, drafts
 * that may be rolled back). */
int nf_grammar_state_clone(nf_grammar_state **out, const nf_grammar_state *s);
/* The tokens allowed next into mask (nf_grammar_mask_words words); their
 * count in *n_allowed (may be NULL).  After an end-of-generation token
 * nothing is allowed.  NF_ENOMEM when the automaton outgrows its bound. */
int nf_grammar_state_mask(nf_grammar_state *s, uint32_t *mask, size_t *n_allowed);
/* Consume a token: NF_EINPUT when the mask would not have allowed it (the
 * state is unchanged then). */
int nf_grammar_state_advance(nf_grammar_state *s, int token);
/* The text so far is a whole sentence (end-of-generation is allowed). */
bool nf_grammar_state_accepting(const nf_grammar_state *s);
/* An end-of-generation token was consumed. */
bool nf_grammar_state_finished(const nf_grammar_state *s);

#endif
