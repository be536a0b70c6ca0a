/*
 * fuzz_toolcall.c - libFuzzer target for the tool-call parser
 * (serve/toolcall.h): a model's answer, which a client's prompt can steer
 * to any bytes.
 *
 * Input layout: byte 0 % 3 = syntax (hermes, llama3, mistral), byte 1 =
 * the stream's piece size (1..256); the rest is the answer.
 *
 * Properties checked: the whole-answer parse succeeds, every call has a
 * name among the tools and arguments that are a JSON object; streamed in
 * pieces, the content and the calls are those of the whole parse.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/toolcall.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct seen {
	nf_sbuf content, calls;
} seen;

static int on_content(void *ctx, const char *t, size_t n)
{
	return nf_sbuf_add(&((seen *)ctx)->content, t, n);
}

static int on_call(void *ctx, const nf_tool_call *c, size_t index)
{
	(void)index;
	return nf_sbuf_printf(&((seen *)ctx)->calls, "%s %s;", c->name, c->arguments);
}

static json_t *tools(void)
{
	return json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},"
			  "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}]", 0, NULL);
}

static void check_calls(const nf_tool_result *r)
{
	for (size_t i = 0; i < r->n_calls; i++) {
		json_t *a = json_loads(r->calls[i].arguments, 0, NULL);
		if (!json_is_object(a) || (strcmp(r->calls[i].name, "f") && strcmp(r->calls[i].name, "get_weather")))
			abort();
		json_decref(a);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	json_t *t = tools();
	nf_tool_parser p = {.syntax = (nf_tool_syntax)(data[0] % 3), .tools = t};
	size_t step = (size_t)data[1] + 1, len = size - 2;
	const char *text = (const char *)data + 2;
	nf_tool_result r;
	if (nf_tool_parse(&r, &p, text, len, 1 << 20))
		abort();
	check_calls(&r);
	seen s;
	nf_sbuf_init(&s.content, 1 << 20);
	nf_sbuf_init(&s.calls, 1 << 20);
	nf_tool_stream st;
	nf_tool_stream_init(&st, &p, &(nf_tool_sink){on_content, on_call, &s}, 1 << 20);
	for (size_t at = 0; at < len; at += step)
		if (nf_tool_stream_feed(&st, text + at, len - at < step ? len - at : step))
			abort();
	if (nf_tool_stream_finish(&st))
		abort();
	nf_sbuf want;
	nf_sbuf_init(&want, 1 << 20);
	for (size_t i = 0; i < r.n_calls; i++)
		nf_sbuf_printf(&want, "%s %s;", r.calls[i].name, r.calls[i].arguments);
	if (s.content.len != r.content.len ||
	    (r.content.len && memcmp(s.content.data, r.content.data, r.content.len)) ||
	    s.calls.len != want.len || (want.len && memcmp(s.calls.data, want.data, want.len)))
		abort();
	nf_sbuf_release(&want);
	nf_tool_stream_release(&st);
	nf_sbuf_release(&s.content);
	nf_sbuf_release(&s.calls);
	nf_tool_result_release(&r);
	json_decref(t);
	return 0;
}
