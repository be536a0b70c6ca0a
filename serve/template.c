/*
 * template.c - rendering chat messages through plain, llama2, chatml or the
 * model's own Jinja template.
 */
#include "serve/template.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

static const char *role_name(nf_chat_role r)
{
	return r == NF_ROLE_SYSTEM ? "system" : r == NF_ROLE_USER ? "user" : "assistant";
}

static int render_llama2(nf_sbuf *out, const nf_chat_msg *msgs, size_t n)
{
	const nf_chat_msg *sys = NULL;
	int open = 0; /* an [INST] awaits its [/INST] */
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const nf_chat_msg *m = &msgs[i];
		if (m->role == NF_ROLE_SYSTEM) {
			sys = m; /* folded into the next user turn */
			continue;
		}
		if (m->role == NF_ROLE_USER) {
			if (out->len)
				rc = nf_sbuf_adds(out, " ");
			if (!rc)
				rc = nf_sbuf_adds(out, "[INST] ");
			if (!rc && sys) {
				if (!(rc = nf_sbuf_adds(out, "<<SYS>>\n")) &&
				    !(rc = nf_sbuf_add(out, sys->content, sys->len)))
					rc = nf_sbuf_adds(out, "\n<</SYS>>\n\n");
				sys = NULL;
			}
			if (!rc && !(rc = nf_sbuf_add(out, m->content, m->len)))
				rc = nf_sbuf_adds(out, " [/INST]");
			open = 1;
		} else {
			if (!(rc = nf_sbuf_adds(out, " ")))
				rc = nf_sbuf_add(out, m->content, m->len);
			open = 0;
		}
	}
	(void)open;
	if (!rc && sys) { /* a trailing system message with no user turn after it */
		if (out->len)
			rc = nf_sbuf_adds(out, " ");
		if (!rc && !(rc = nf_sbuf_adds(out, "[INST] <<SYS>>\n")) &&
		    !(rc = nf_sbuf_add(out, sys->content, sys->len)))
			rc = nf_sbuf_adds(out, "\n<</SYS>>\n\n [/INST]");
	}
	return rc;
}

/* The messages as the JSON list a Jinja chat template iterates. */
static json_t *messages_json(const nf_chat_msg *msgs, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++) {
		json_t *m = json_pack("{s:s, s:s%}", "role", role_name(msgs[i].role), "content",
				      msgs[i].content, msgs[i].len);
		if (!m || json_array_append_new(a, m)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static int render_model(nf_sbuf *out, const nf_chat_format *f, const nf_chat_msg *msgs, size_t n)
{
	json_t *conv = messages_json(msgs, n);
	char *text = NULL;
	size_t len = 0;
	int rc;
	if (!conv)
		return nf_error_set(NF_ENOMEM, "out of memory");
	rc = nf_jinja_render_chat(&text, &len, f->jinja, conv, f->bos, f->eos, true,
				  out->max - out->len);
	if (rc == 0)
		rc = nf_sbuf_add(out, text, len);
	free(text);
	json_decref(conv);
	return rc;
}

int nf_template_render(nf_sbuf *out, const nf_chat_format *f, const nf_chat_msg *msgs, size_t n)
{
	int rc = 0;
	switch (f->kind) {
	case NF_CHAT_MODEL:
		if (!f->jinja)
			return nf_error_set(NF_EINTERNAL, "chat template 'model' without a template");
		return render_model(out, f, msgs, n);
	case NF_CHAT_PLAIN:
		for (size_t i = 0; i < n && rc == 0; i++) {
			if (i)
				rc = nf_sbuf_adds(out, "\n");
			if (!rc)
				rc = nf_sbuf_add(out, msgs[i].content, msgs[i].len);
		}
		return rc;
	case NF_CHAT_LLAMA2:
		return render_llama2(out, msgs, n);
	case NF_CHAT_CHATML:
		for (size_t i = 0; i < n && rc == 0; i++)
			if (!(rc = nf_sbuf_printf(out, "<|im_start|>%s\n", role_name(msgs[i].role))) &&
			    !(rc = nf_sbuf_add(out, msgs[i].content, msgs[i].len)))
				rc = nf_sbuf_adds(out, "<|im_end|>\n");
		if (!rc)
			rc = nf_sbuf_adds(out, "<|im_start|>assistant\n");
		return rc;
	}
	return nf_error_set(NF_EINTERNAL, "unknown chat template");
}

const char *nf_template_stop(nf_chat_template t)
{
	return t == NF_CHAT_CHATML ? "<|im_end|>" : NULL;
}
