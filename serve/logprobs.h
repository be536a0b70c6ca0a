/*
 * logprobs.h - token logprobs (serve/sched.h's nf_token_logprob) as the
 * OpenAI API returns them: chat's choices[].logprobs.content[] entries
 * ({token, logprob, bytes, top_logprobs}) and completions'
 * choices[].logprobs ({tokens, token_logprobs, top_logprobs, text_offset}).
 */
#ifndef NF_SERVE_LOGPROBS_H
#define NF_SERVE_LOGPROBS_H

#include <jansson.h>
#include <stddef.h>

#include "engine/tokenizer.h"
#include "serve/sched.h"

/* Where a run of tokens continues: the token before the next one (its
 * leading space depends on it; -1 at the start of a text) and, for
 * completions, the text offset (in characters) the next one starts at. */
typedef struct nf_logprob_cursor {
	int prev;
	size_t offset;
} nf_logprob_cursor;

/* Append chat entries for lp[0, n) to the array content. 0 or NF_ENOMEM. */
int nf_logprobs_chat_add(json_t *content, const nf_tokenizer *t, nf_logprob_cursor *at,
			 const nf_token_logprob *lp, size_t n);
/* {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}, or NULL. */
json_t *nf_logprobs_completion_new(void);
/* Append lp[0, n) to such an object (a NAN logprob, the first prompt
 * token's, becomes null with a null top_logprobs entry).  0 or NF_ENOMEM. */
int nf_logprobs_completion_add(json_t *o, const nf_tokenizer *t, nf_logprob_cursor *at,
			       const nf_token_logprob *lp, size_t n);

#endif
