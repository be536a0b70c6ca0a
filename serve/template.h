/*
 * template.h - chat templates: a list of messages rendered into the one
 * prompt string the model continues.
 *
 *   plain   contents joined by "\n"
 *   llama2  [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} [INST] {user} [/INST]
 *   chatml  <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
 */
#ifndef NF_SERVE_TEMPLATE_H
#define NF_SERVE_TEMPLATE_H

#include <stddef.h>

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

/* Append the rendered prompt to out (bounded by out->max). */
int nf_template_render(nf_sbuf *out, nf_chat_template t, const nf_chat_msg *msgs, size_t n);

/* A stop string the template implies (chatml: "<|im_end|>"), or NULL. */
const char *nf_template_stop(nf_chat_template t);

#endif
