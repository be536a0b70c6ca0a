/*
 * fuzz_serve_request.c - libFuzzer target for nimserve's request bodies:
 * /v1/completions and /v1/chat/completions validation (jansson), chat
 * template rendering, the OpenAI error object, and the stop-string /
 * UTF-8 hold-back that streams the generated text.
 *
 * Input layout: byte 0 bit 0 = chat endpoint, (byte 0 >> 1) % 3 = chat
 * template (plain, llama2, chatml), byte 1 = split stride for feeding the
 * prompt back through the text stream; the rest is the request body.
 *
 * Properties checked: parse either succeeds with every field in range, or
 * fails with a 400/422/500 whose error object is valid JSON; the streamed
 * text is valid UTF-8, never contains a stop string, and equals the text
 * released all at once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/request.h"
#include "serve/sbuf.h"
#include "serve/textstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(const nf_api_error *e)
{
	char *s;
	json_t *o, *err;
	json_error_t jerr;
	if (e->status != 400 && e->status != 422 && e->status != 500)
		abort();
	s = nf_api_error_json(e);
	if (!s)
		abort();
	o = json_loads(s, 0, &jerr);
	err = json_object_get(o, "error");
	if (!json_is_string(json_object_get(err, "message")) ||
	    !json_is_string(json_object_get(err, "type")) || !json_object_get(err, "param") ||
	    !json_object_get(err, "code"))
		abort();
	/* the message survives (no fallback to a fixed text) and names the param */
	if (!strcmp(json_string_value(json_object_get(err, "message")), "invalid request") ||
	    (e->param[0] && !json_is_string(json_object_get(err, "param"))))
		abort();
	json_decref(o);
	free(s);
}

/* Feed text through a textstream in pieces of `stride` bytes, as the
 * scheduler does with decoded tokens, and collect what streaming releases. */
static void check_stream(const nf_serve_req *r, const char *text, size_t len, size_t stride,
			 int valid)
{
	nf_textstream ts;
	nf_sbuf out;
	size_t off = 0;
	int hit = 0;
	nf_textstream_init(&ts, r->stop, r->n_stop, 1u << 22);
	nf_sbuf_init(&out, 1u << 24);
	while (off < len && !hit) {
		size_t n = len - off < stride ? len - off : stride, ready;
		hit = nf_textstream_push(&ts, text + off, n);
		if (hit < 0)
			abort();
		off += n;
		ready = nf_textstream_ready(&ts, 0);
		if (ready > ts.len - ts.released)
			abort();
		if (nf_sbuf_add_utf8(&out, ts.buf + ts.released, ready) < 0)
			abort();
		ts.released += ready;
	}
	{
		size_t rest = nf_textstream_ready(&ts, 1);
		if (ts.released + rest != ts.len)
			abort();
		if (rest && nf_sbuf_add_utf8(&out, ts.buf + ts.released, rest) < 0)
			abort();
		ts.released += rest;
	}
	/* valid UTF-8 (jansson checks), and no stop string in what was sent */
	{
		json_t *j = json_stringn(out.data ? out.data : "", out.len);
		if (!j)
			abort();
		json_decref(j);
	}
	for (size_t i = 0; i < r->n_stop; i++)
		if (ts.len && memmem(ts.buf, ts.len, r->stop[i], strlen(r->stop[i])))
			abort();
	/* streamed in pieces == sanitized in one go, when the text is valid
	 * UTF-8 (pieces cut inside an invalid sequence may be replaced apart) */
	if (valid) {
		nf_sbuf whole;
		nf_sbuf_init(&whole, 1u << 24);
		if (nf_sbuf_add_utf8(&whole, ts.buf ? ts.buf : "", ts.len) < 0)
			abort();
		if (whole.len != out.len || (out.len && memcmp(whole.data, out.data, out.len)))
			abort();
		nf_sbuf_release(&whole);
	}
	nf_sbuf_release(&out);
	nf_textstream_release(&ts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	nf_serve_req *r = NULL;
	nf_api_error e;
	int chat, rc;
	nf_chat_template tmpl;
	size_t stride;

	if (size < 2)
		return 0;
	chat = data[0] & 1;
	tmpl = (nf_chat_template)((data[0] >> 1) % 3);
	stride = 1 + data[1] % 16;
	data += 2;
	size -= 2;
	memset(&e, 0, sizeof e);
	nf_chat_format fmt = nf_chat_format_builtin(tmpl);
	rc = nf_serve_req_parse(&r, &e, (const char *)data, size, chat, &fmt);
	if (rc < 0) {
		if (r)
			abort();
		check_error(&e);
		return 0;
	}
	if (!r || !r->model || !r->prompt || r->prompt_len > NF_REQ_MAX_PROMPT ||
	    strlen(r->prompt) != r->prompt_len || r->n_stop > NF_REQ_MAX_STOP + 1 ||
	    (r->max_tokens != -1 && (r->max_tokens < 1 || r->max_tokens > 1000000)) ||
	    !(r->temperature >= 0 && r->temperature <= 2) || !(r->top_p > 0 && r->top_p <= 1) ||
	    (r->include_usage && !r->stream) || r->chat != chat)
		abort();
	for (size_t i = 0; i < r->n_stop; i++)
		if (!r->stop[i] || !r->stop[i][0] || strlen(r->stop[i]) > NF_REQ_MAX_STOP_LEN)
			abort();
	/* the prompt is valid UTF-8: jansson only accepts valid UTF-8 strings */
	{
		json_t *j = json_stringn(r->prompt, r->prompt_len);
		if (!j)
			abort();
		json_decref(j);
	}
	check_stream(r, r->prompt, r->prompt_len, stride, 1);
	check_stream(r, (const char *)data, size, stride, 0); /* any bytes, as a model may emit */
	nf_serve_req_free(r);
	return 0;
}
