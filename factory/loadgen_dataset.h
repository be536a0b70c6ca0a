/*
 * loadgen_dataset.h - what a serving benchmark sends: prompts made from a
 * seeded generator, a shared prefix, multi-turn conversations, or a JSON-lines
 * file.  The same spec and seed give the same requests on every run, so the
 * loads of a sweep, and two servers, see the same work.
 *
 *   random:IN,OUT          prompts of IN words on average (uniform in
 *                          [IN/2, 3*IN/2], words from a fixed list of common
 *                          English words, about a token each), max_tokens
 *                          uniform in [OUT/2, 3*OUT/2]
 *   prefix:SHARED,IN,OUT   every prompt starts with the same SHARED words,
 *                          then IN words of its own; max_tokens OUT
 *   multiturn:TURNS        chat conversations of TURNS user messages; each
 *                          turn sends the conversation so far, the answers
 *                          included (the endpoint must be chat)
 *   jsonl:FILE             a line per request: {"prompt": "..."} or
 *                          {"messages": [...]}, optionally "max_tokens"; the
 *                          lines are used in order, again from the first when
 *                          there are more requests than lines
 */
#ifndef NF_FACTORY_LOADGEN_DATASET_H
#define NF_FACTORY_LOADGEN_DATASET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One unit of work: a request, or a conversation of several. */
typedef struct nf_lg_item {
	char *prompt;      /* a prompt (completions) or the one user message (chat); or NULL */
	json_t *messages;  /* a whole chat conversation (jsonl), or NULL */
	json_t *turns;     /* multiturn: an array of user messages, or NULL */
	long max_tokens;   /* 0: the run's default */
} nf_lg_item;

typedef struct nf_lg_dataset {
	nf_lg_item *items; /* owned */
	size_t n_items;
	size_t turns;      /* requests per item: TURNS for multiturn, else 1 */
	bool needs_chat;   /* some item is a conversation */
	bool has_prompts;  /* some item is a plain prompt */
} nf_lg_dataset;

/* The dataset of spec (see above) for `requests` requests, from seed.
 * NF_EINPUT naming the spec or FILE:LINE on bad input. */
int nf_lg_dataset_make(nf_lg_dataset **out, const char *spec, size_t requests, uint64_t seed);
/* One item per prompt, in order (the prompts are copied). */
int nf_lg_dataset_prompts(nf_lg_dataset **out, const char *const *prompts, size_t n);
void nf_lg_dataset_free(nf_lg_dataset *ds); /* NULL is fine */

/* The item of unit of work j (items are reused in order when there are fewer). */
const nf_lg_item *nf_lg_dataset_item(const nf_lg_dataset *ds, size_t j);
/* Units of work for `requests` requests: ceil(requests / turns). */
size_t nf_lg_dataset_units(const nf_lg_dataset *ds, size_t requests);

#endif
