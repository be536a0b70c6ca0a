/*
 * reply_tools.c - the tool calls of a chat answer in OpenAI's shape
 * (reply_tools.h).
 */
#include "serve/reply_tools.h"

#include <stdio.h>
#include <string.h>

#include "util/banned.h"

int nf_reply_tools_on(const nf_serve_req *req)
{
	return req && req->chat && req->tools && req->tool_choice != NF_TOOL_CHOICE_NONE;
}

nf_tool_parser nf_reply_tool_parser(const nf_serve_req *req)
{
	/* auto: the hermes blocks the tools prompt asks for; required or
	 * named: the whole answer is one call as JSON (its guide) */
	nf_tool_syntax s = req->tool_choice == NF_TOOL_CHOICE_AUTO ? NF_TOOLS_HERMES : NF_TOOLS_LLAMA3;
	return (nf_tool_parser){.syntax = s, .tools = req->tools};
}

void nf_reply_call_id(char *buf, size_t n, const char *id_base, int k, size_t index)
{
	/* unique in the answer, stable for a given response id */
	const char *dash = strrchr(id_base, '-');
	snprintf(buf, n, "call_%.24s%02d%02u", dash ? dash + 1 : id_base, k % 100,
		 (unsigned)(index % 100));
}

json_t *nf_reply_tool_call_json(const nf_tool_call *c, const char *id, int with_index, size_t index)
{
	json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function", "function",
			      "name", c->name, "arguments", c->arguments);
	if (o && with_index && json_object_set_new(o, "index", json_integer((json_int_t)index))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *nf_reply_chat_message(const nf_serve_req *req, const char *text, size_t len,
			      const char *id_base, int k, const char **finish)
{
	if (!nf_reply_tools_on(req))
		return json_pack("{s:s, s:s%}", "role", "assistant", "content", text, len);
	nf_tool_parser p = nf_reply_tool_parser(req);
	nf_tool_result r;
	json_t *calls = json_array(), *msg = NULL;
	int err = nf_tool_parse(&r, &p, text, len, len + 1);
	for (size_t i = 0; !err && calls && i < r.n_calls; i++) {
		char id[64];
		nf_reply_call_id(id, sizeof id, id_base, k, i);
		if (json_array_append_new(calls, nf_reply_tool_call_json(&r.calls[i], id, 0, 0)))
			err = -1;
	}
	if (!err && calls) {
		int any = json_array_size(calls) > 0;
		/* content null when the answer is only calls, as OpenAI sends it */
		json_t *content = any && r.content.len == 0 ? json_null()
				  : json_stringn(r.content.data ? r.content.data : "", r.content.len);
		msg = json_pack("{s:s, s:o*}", "role", "assistant", "content", content);
		if (msg && any) {
			json_object_set(msg, "tool_calls", calls);
			if (!strcmp(*finish, "stop")) /* cut short by max_tokens stays "length" */
				*finish = "tool_calls";
		}
	}
	json_decref(calls);
	nf_tool_result_release(&r);
	return msg;
}
