/*
 * chat.h - a model's chat template: the build's check that it renders, and
 * a conversation of one user message through it (the prompt `nimfactory run
 * --chat` feeds the model).
 */
#ifndef NF_ENGINE_CHAT_H
#define NF_ENGINE_CHAT_H

#include <stddef.h>

#include "engine/tokenizer.h"

/* Render [{"role": "user", "content": text}] through t's chat template with
 * add_generation_prompt, bos_token and eos_token.  *out is NUL-terminated,
 * the caller frees it.  NF_EINPUT when t has no template or the template
 * refuses the conversation (with its line:col). */
int nf_chat_render_user(char **out, size_t *len, const nf_tokenizer *t, const char *text,
			size_t text_len);

/* Render t's chat template over a sample conversation (system, user,
 * assistant, user; and without the system turn when the template refuses
 * one, as Gemma's do), as the build checks it before making engines.
 * NF_EINPUT "what:LINE:COL: ..." when it does not compile or render, or
 * when t has no template. */
int nf_chat_template_check(const nf_tokenizer *t, const char *what);

#endif
