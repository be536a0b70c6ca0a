/*
 * logprobs.c - token logprobs in the two shapes of the OpenAI API.  A
 * token's text is what it decodes to after the token before it (control
 * tokens spelled out: "<|im_end|>"), made valid UTF-8 for the JSON string;
 * "bytes" holds its raw bytes, so a character split across byte tokens is
 * still whole when a client joins them.
 */
#include "serve/logprobs.h"

#include <math.h>
#include <string.h>

#include "serve/sbuf.h"
#include "util/error.h"
#include "util/banned.h"

#define TOKEN_TEXT_MAX 4096

static json_t *token_text(const char *piece, size_t len)
{
	nf_sbuf b;
	json_t *s;
	nf_sbuf_init(&b, 4 * TOKEN_TEXT_MAX);
	if (nf_sbuf_add_utf8(&b, piece, len < TOKEN_TEXT_MAX ? len : TOKEN_TEXT_MAX) < 0) {
		nf_sbuf_release(&b);
		return NULL;
	}
	s = json_stringn(b.data ? b.data : "", b.len);
	nf_sbuf_release(&b);
	return s;
}

static json_t *token_bytes(const char *piece, size_t len)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < len; i++)
		if (json_array_append_new(a, json_integer((unsigned char)piece[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *logprob_value(float lp)
{
	return isnan(lp) ? json_null() : json_real(isinf(lp) ? -9999.0 : (double)lp);
}

/* Characters (UTF-8 sequence starts) of a piece: completions' text_offset. */
static size_t chars_of(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xC0) != 0x80;
	return n;
}

static const char *spelled(const nf_tokenizer *t, int prev, int token, size_t *len)
{
	return nf_tokenizer_decode_flags(t, prev, token, NF_TOK_DECODE_SPECIAL, len);
}

/* {"token", "logprob", "bytes"} of one token. */
static json_t *chat_token(const nf_tokenizer *t, int prev, int token, float lp)
{
	size_t len = 0;
	const char *piece = spelled(t, prev, token, &len);
	return json_pack("{s:o*,s:o,s:o*}", "token", token_text(piece, len), "logprob", logprob_value(lp),
			 "bytes", token_bytes(piece, len));
}

int nf_logprobs_chat_add(json_t *content, const nf_tokenizer *t, nf_logprob_cursor *at,
			 const nf_token_logprob *lp, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		json_t *e = chat_token(t, at->prev, lp[i].token, lp[i].logprob), *top = json_array();
		for (int k = 0; e && top && k < lp[i].n_top; k++)
			json_array_append_new(top, chat_token(t, at->prev, lp[i].top_token[k], lp[i].top_logprob[k]));
		/* the *_new calls take their value's reference even when they fail */
		if (!e || !top) {
			json_decref(e);
			json_decref(top);
			return nf_error_set(NF_ENOMEM, "out of memory");
		}
		if (json_object_set_new(e, "top_logprobs", top) < 0) {
			json_decref(e);
			return nf_error_set(NF_ENOMEM, "out of memory");
		}
		if (json_array_append_new(content, e) < 0)
			return nf_error_set(NF_ENOMEM, "out of memory");
		at->prev = lp[i].token;
	}
	return 0;
}

json_t *nf_logprobs_completion_new(void)
{
	return json_pack("{s:[],s:[],s:[],s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
}

/* completions' top_logprobs entry: {text: logprob} of the alternatives and
 * of the chosen token (OpenAI: up to logprobs + 1 entries). */
static json_t *completion_top(const nf_tokenizer *t, int prev, const nf_token_logprob *lp)
{
	json_t *o = json_object();
	for (int k = 0; o && k <= lp->n_top; k++) {
		int token = k < lp->n_top ? lp->top_token[k] : lp->token;
		float v = k < lp->n_top ? lp->top_logprob[k] : lp->logprob;
		size_t len = 0;
		const char *piece = spelled(t, prev, token, &len);
		json_t *key = token_text(piece, len);
		if (!key || (k == lp->n_top && json_object_get(o, json_string_value(key)))) {
			json_decref(key);
			continue; /* the chosen token is among the alternatives already */
		}
		json_object_set_new(o, json_string_value(key), logprob_value(v));
		json_decref(key);
	}
	return o;
}

int nf_logprobs_completion_add(json_t *o, const nf_tokenizer *t, nf_logprob_cursor *at,
			       const nf_token_logprob *lp, size_t n)
{
	json_t *tokens = json_object_get(o, "tokens"), *lps = json_object_get(o, "token_logprobs");
	json_t *tops = json_object_get(o, "top_logprobs"), *offs = json_object_get(o, "text_offset");
	for (size_t i = 0; i < n; i++) {
		size_t len = 0, plain_len = 0;
		const char *piece = spelled(t, at->prev, lp[i].token, &len);
		int first = isnan(lp[i].logprob);
		if (json_array_append_new(tokens, token_text(piece, len)) < 0 ||
		    json_array_append_new(lps, logprob_value(lp[i].logprob)) < 0 ||
		    json_array_append_new(tops, first ? json_null() : completion_top(t, at->prev, &lp[i])) < 0 ||
		    json_array_append_new(offs, json_integer((json_int_t)at->offset)) < 0)
			return nf_error_set(NF_ENOMEM, "out of memory");
		const char *plain = nf_tokenizer_decode(t, at->prev, lp[i].token, &plain_len);
		at->offset += chars_of(plain, plain_len);
		at->prev = lp[i].token;
	}
	return 0;
}
