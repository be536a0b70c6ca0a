/*
 * tokenize.h - vLLM's /tokenize and /detokenize: a prompt to the model's
 * token ids and back, with the tokenizer the completions use.
 *
 *   POST /tokenize   {"model"?, "prompt" | "messages", "add_special_tokens"? (true),
 *                     "add_generation_prompt"? (true), "return_token_strs"? (false)}
 *                 -> {"count", "max_model_len", "tokens": [...], "token_strs": [...] or null}
 *   POST /detokenize {"model"?, "tokens": [...]} -> {"prompt"}
 */
#ifndef NF_SERVE_TOKENIZE_H
#define NF_SERVE_TOKENIZE_H

#include <stddef.h>

#include "engine/tokenizer.h"
#include "serve/request.h"

/* The answer to a body as a new JSON string (*reply, free()), or a negative
 * code with err filled (400 bad body, 404 another model).  messages are
 * rendered through chat, the chat endpoint's format, as a chat request's
 * prompt is (the generation prompt always follows: add_generation_prompt
 * may only be true). */
int nf_serve_tokenize(char **reply, nf_api_error *err, const nf_tokenizer *t, const char *model,
		      int max_model_len, const nf_chat_format *chat, const char *body, size_t len);
int nf_serve_detokenize(char **reply, nf_api_error *err, const nf_tokenizer *t, const char *model,
			const char *body, size_t len);

#endif
