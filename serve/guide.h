/*
 * guide.h - structured output in nimserve: what a request constrains its
 * answer to (OpenAI's response_format, NIM's nvext.guided_json,
 * guided_regex and guided_choice, a tool call's arguments), compiled into a
 * grammar (engine/grammar.h) and kept in a small cache keyed by the
 * guide's canonical text, so that the masks of a schema many requests send
 * stay warm.  A compiled guide is reference-counted: the cache holds one
 * reference, every job decoding under it another.
 */
#ifndef NF_SERVE_GUIDE_H
#define NF_SERVE_GUIDE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/grammar.h"
#include "engine/tokenizer.h"

typedef enum nf_guide_kind {
	NF_GUIDE_NONE,
	NF_GUIDE_JSON_OBJECT, /* any JSON object */
	NF_GUIDE_SCHEMA,      /* value: a JSON Schema (object) */
	NF_GUIDE_REGEX,       /* value: the pattern (string) */
	NF_GUIDE_CHOICE,      /* value: the answers (array of strings) */
} nf_guide_kind;

/* What a request asks for; value is a reference the spec owns. */
typedef struct nf_guide_spec {
	nf_guide_kind kind;
	json_t *value;
} nf_guide_spec;

void nf_guide_spec_release(nf_guide_spec *s);

typedef struct nf_guides nf_guides;
typedef struct nf_guide nf_guide;

/* The cache for a model's tokenizer t (its vocabulary read once); at most
 * max_guides compiled guides kept beyond those in use. */
int nf_guides_new(nf_guides **out, const nf_tokenizer *t, size_t max_guides);
void nf_guides_free(nf_guides *g); /* after every guide taken from it is released */

/* The compiled guide of spec (kind not NONE), a new reference: from the
 * cache, or compiled now.  NF_EINPUT with a message naming the part of the
 * schema or pattern that cannot be compiled. */
int nf_guides_get(nf_guide **out, nf_guides *g, const nf_guide_spec *spec);
nf_guide *nf_guide_retain(nf_guide *d);
void nf_guide_release(nf_guide *d); /* NULL is fine */

/* A decoding state at the start of d's language, and the words of the
 * token mask it fills (nf_grammar_state_mask). */
int nf_guide_state_new(nf_grammar_state **out, nf_guide *d);
size_t nf_guide_mask_words(const nf_guide *d);

/* Guides compiled and found in the cache so far. */
void nf_guides_counts(nf_guides *g, uint64_t *compiled, uint64_t *hits);

#endif
