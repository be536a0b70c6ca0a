/*
 * chat.c - a model's chat template: checked over a sample conversation, and
 * one user message through it (chat.h).
 */
#include "engine/chat.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "engine/jinja.h"
#include "util/error.h"
#include "util/banned.h"

#define CHAT_MAX_OUT (4u << 20)

int nf_chat_render_user(char **out, size_t *len, const nf_tokenizer *t, const char *text,
			size_t text_len)
{
	const char *src = nf_tokenizer_chat_template(t);
	nf_jinja *j = NULL;
	json_t *conv = NULL;
	int err;

	*out = NULL;
	if (!src)
		return nf_error_set(NF_EINPUT, "this model has no chat template");
	conv = json_pack("[{s:s, s:s%}]", "role", "user", "content", text, text_len);
	if (!conv)
		return nf_error_set(NF_EINPUT, "the message is not UTF-8 text");
	err = nf_jinja_compile(&j, src, strlen(src), "chat_template");
	if (!err)
		err = nf_jinja_render_chat(out, len, j, conv, nf_tokenizer_bos_text(t),
					   nf_tokenizer_eos_text(t), true, CHAT_MAX_OUT);
	nf_jinja_free(j);
	json_decref(conv);
	return err;
}

/* A conversation that exercises what templates branch on: a system turn,
 * alternating user and assistant turns, and the generation prompt. */
static json_t *sample_conversation(void)
{
	return json_pack("[{s:s,s:s},{s:s,s:s},{s:s,s:s},{s:s,s:s}]", "role", "system", "content",
			 "You are a helpful assistant.", "role", "user", "content", "Hello!", "role",
			 "assistant", "content", "Hi! How can I help?", "role", "user", "content",
			 "What is the capital of France?");
}

/* Render once with a system message and, when that raises (Gemma's
 * templates refuse a system role), once without: a template that renders
 * neither conversation cannot serve chat. */
int nf_chat_template_check(const nf_tokenizer *t, const char *what)
{
	const char *tmpl = nf_tokenizer_chat_template(t);
	nf_jinja *j = NULL;
	json_t *conv = sample_conversation();
	char *out = NULL;
	size_t len;
	int err = !tmpl   ? nf_error_set(NF_EINPUT, "%s: the model has no chat template", what)
		  : !conv ? nf_error_set(NF_ENOMEM, "out of memory")
			  : nf_jinja_compile(&j, tmpl, strlen(tmpl), what);
	if (!err)
		err = nf_jinja_render_chat(&out, &len, j, conv, nf_tokenizer_bos_text(t),
					   nf_tokenizer_eos_text(t), true, CHAT_MAX_OUT);
	if (err == NF_EINPUT && j) {
		char *first = strdup(nf_error_last());
		json_array_remove(conv, 0);
		err = nf_jinja_render_chat(&out, &len, j, conv, nf_tokenizer_bos_text(t),
					   nf_tokenizer_eos_text(t), true, CHAT_MAX_OUT);
		if (err && first)
			nf_error_set(err, "%s", first);
		free(first);
	}
	if (!err && len == 0)
		err = nf_error_set(NF_EINPUT, "%s: the chat template renders a conversation as nothing",
				   what);
	free(out);
	nf_jinja_free(j);
	json_decref(conv);
	return err;
}
