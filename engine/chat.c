/*
 * chat.c - one user message through a model's chat template (chat.h).
 */
#include "engine/chat.h"

#include <jansson.h>
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
