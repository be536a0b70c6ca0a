/*
 * toolcall.h - a model's tool calls found in its output text, for the
 * OpenAI `tools` API: which syntax a model writes its calls in, the calls
 * parsed out of a whole answer, and the same done while the answer streams
 * (content passed on as it comes, a call once it is whole).
 *
 *   hermes   <tool_call>{"name": N, "arguments": {...}}</tool_call>, any
 *            number, text around them (Qwen2.5, Hermes, and our default
 *            prompt for a template that has no tools of its own)
 *   llama3   the whole answer is {"name": N, "parameters": {...}} (or
 *            "arguments"), several joined by ';', after an optional
 *            <|python_tag|> (Llama 3.1's JSON tool calling)
 *   mistral  [TOOL_CALLS] then a JSON array of {"name", "arguments"}
 *
 * A call whose JSON does not parse, whose arguments are not an object or
 * whose name is not one of the request's tools stays text: the client gets
 * what the model wrote rather than a call it cannot make.
 */
#ifndef NF_SERVE_TOOLCALL_H
#define NF_SERVE_TOOLCALL_H

#include <jansson.h>
#include <stddef.h>

#include "serve/sbuf.h"

typedef enum nf_tool_syntax {
	NF_TOOLS_HERMES,
	NF_TOOLS_LLAMA3,
	NF_TOOLS_MISTRAL,
} nf_tool_syntax;

/* The syntax a chat template's source implies (the markers it writes), or
 * hermes when it names none: the syntax of our default tools prompt. */
nf_tool_syntax nf_tool_syntax_of(const char *template_source);
const char *nf_tool_syntax_name(nf_tool_syntax s);

/* One call: its function's name and its arguments as compact JSON text
 * (an object), both owned. */
typedef struct nf_tool_call {
	char *name;
	char *arguments;
} nf_tool_call;

/* The request's tools (the OpenAI `tools` array), which names a call may
 * use; NULL allows any name. */
typedef struct nf_tool_parser {
	nf_tool_syntax syntax;
	const json_t *tools; /* borrowed */
} nf_tool_parser;

/* What an answer holds: the text outside the calls, and the calls. */
typedef struct nf_tool_result {
	nf_sbuf content;
	nf_tool_call *calls;
	size_t n_calls;
} nf_tool_result;

/* Parse a whole answer; *out is initialised here (content capped at
 * max_content bytes: NF_EINPUT past it).  Release with nf_tool_result_release. */
int nf_tool_parse(nf_tool_result *out, const nf_tool_parser *p, const char *text, size_t len,
		  size_t max_content);
void nf_tool_result_release(nf_tool_result *r);

/* ---- streaming ---- */

/* Text that is surely content, and each call once it is whole. */
typedef struct nf_tool_sink {
	int (*content)(void *ctx, const char *text, size_t len);
	int (*call)(void *ctx, const nf_tool_call *call, size_t index);
	void *ctx;
} nf_tool_sink;

typedef struct nf_tool_stream {
	nf_tool_parser p;
	nf_tool_sink sink;
	nf_sbuf held;      /* text that may still become a call */
	size_t n_calls;    /* calls passed to the sink */
	int mode;          /* where the stream is (toolcall.c) */
} nf_tool_stream;

/* held is capped at max_held bytes: a call longer than that is NF_EINPUT. */
void nf_tool_stream_init(nf_tool_stream *s, const nf_tool_parser *p, const nf_tool_sink *sink,
			 size_t max_held);
/* The next piece of the answer; the sink sees what is settled. */
int nf_tool_stream_feed(nf_tool_stream *s, const char *text, size_t len);
/* The answer ended: what was held is settled (a call, or content). */
int nf_tool_stream_finish(nf_tool_stream *s);
void nf_tool_stream_release(nf_tool_stream *s);

/* ---- the default prompt ---- */

/* The system text that offers tools (the OpenAI `tools` array) to a model
 * whose template has no tools of its own, asking for hermes calls; appended
 * to out. */
int nf_tool_prompt(nf_sbuf *out, const json_t *tools);

#endif
