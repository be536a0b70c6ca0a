/*
 * template.h - chat templates: a list of messages rendered into the one
 * prompt string the model continues.
 *
 *   plain   contents joined by "\n"
 *   llama2  [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} [INST] {user} [/INST]
 *   chatml  <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
 *   model   the model's own Jinja template (engine/jinja.h), with its
 *           bos_token and eos_token and add_generation_prompt
 */
#ifndef NF_SERVE_TEMPLATE_H
#define NF_SERVE_TEMPLATE_H

#include <stddef.h>

#include "engine/jinja.h"
#include "serve/manifest.h"
#include "serve/sbuf.h"

typedef enum nf_chat_role {
	NF_ROLE_SYSTEM,
	NF_ROLE_USER,
	NF_ROLE_ASSISTANT,
} nf_chat_role;

typedef struct nf_chat_msg {
	nf_chat_role role;
	const char *content; /* borrowed */
	size_t len;
} nf_chat_msg;

/* How a server renders chats: a built-in, or the model's template. */
typedef struct nf_chat_format {
	nf_chat_template kind;
	const nf_jinja *jinja;   /* kind NF_CHAT_MODEL: borrowed */
	const char *bos, *eos;   /* its bos_token and eos_token (NULL: "") */
} nf_chat_format;

/* The format of a built-in template (no Jinja). */
static inline nf_chat_format nf_chat_format_builtin(nf_chat_template t)
{
	return (nf_chat_format){.kind = t};
}

/* Append the rendered prompt to out (bounded by out->max).  NF_EINPUT when
 * the prompt would exceed out->max or the model's template refuses the
 * conversation (raise_exception: its message is nf_error_last()). */
int nf_template_render(nf_sbuf *out, const nf_chat_format *f, const nf_chat_msg *msgs, size_t n);

/* A stop string the template implies (chatml: "<|im_end|>"), or NULL. */
const char *nf_template_stop(nf_chat_template t);

#endif
