/*
 * reply_tools.h - a chat answer's tool calls in OpenAI's shape: the
 * message of a whole answer (content, tool_calls, finish_reason
 * "tool_calls"), and the pieces a stream sends (each call once whole, as
 * one tool_calls delta with its index, id, name and arguments).
 */
#ifndef NF_SERVE_REPLY_TOOLS_H
#define NF_SERVE_REPLY_TOOLS_H

#include <jansson.h>
#include <stddef.h>

#include "serve/request.h"
#include "serve/toolcall.h"

/* Whether req's answer is parsed for calls: chat with tools, tool_choice
 * not none. */
int nf_reply_tools_on(const nf_serve_req *req);
/* How its answer is parsed: hermes blocks (auto), or one call as JSON
 * (required, named: the answer's guide). */
nf_tool_parser nf_reply_tool_parser(const nf_serve_req *req);
/* Call `index` of choice k of the response id_base: "call_..." into buf. */
void nf_reply_call_id(char *buf, size_t n, const char *id_base, int k, size_t index);
/* {id, type: function, function: {name, arguments}} (and index, for a
 * stream's delta). */
json_t *nf_reply_tool_call_json(const nf_tool_call *c, const char *id, int with_index, size_t index);
/* The message of a finished chat choice whose text is [text, text + len):
 * {role, content} or, with calls, {role, content (null when only calls),
 * tool_calls}, *finish then "tool_calls".  NULL on out of memory. */
json_t *nf_reply_chat_message(const nf_serve_req *req, const char *text, size_t len,
			      const char *id_base, int k, const char **finish);

#endif
