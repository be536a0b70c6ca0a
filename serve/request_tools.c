/*
 * request_tools.c - a chat request's tools (request.h): the `tools` list
 * and `tool_choice` checked, the conversation's tool turns written as the
 * text our default tools prompt teaches (hermes: serve/toolcall.h), and
 * for `required` or a named function the guide that makes the answer a
 * call whose arguments match the function's parameters.
 *
 * The rewrite works for any chat template, since it leaves only system,
 * user and assistant turns: the tools prompt joins the system message (or
 * opens the conversation as one); an assistant turn's tool_calls become
 * <tool_call> blocks after its content; a tool result becomes a user turn
 * holding <tool_response>...</tool_response>.
 */
#include "serve/request.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "serve/toolcall.h"
#include "util/banned.h"

#define MAX_TOOLS 128

static int bad(nf_api_error *err, int status, const char *param, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int bad(nf_api_error *err, int status, const char *param, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	nf_api_error_set(err, status, "invalid_request_error", NULL, param, "%s", msg);
	return -1;
}

static const char *tool_name(const json_t *tool)
{
	return json_string_value(json_object_get(json_object_get(tool, "function"), "name"));
}

/* tools: [{type: function, function: {name, description?, parameters?, strict?}}],
 * names unique. */
static int check_tools(nf_api_error *err, json_t *tools)
{
	size_t i, n = json_array_size(tools);
	json_t *t;
	if (!json_is_array(tools) || n > MAX_TOOLS)
		return bad(err, 400, "tools", "'tools' must be a list of at most %d functions", MAX_TOOLS);
	json_array_foreach(tools, i, t) {
		json_t *f = json_object_get(t, "function");
		const char *type = json_string_value(json_object_get(t, "type")), *name = tool_name(t);
		json_t *params = json_object_get(f, "parameters");
		if (!json_is_object(t) || !type || strcmp(type, "function") || !json_is_object(f) ||
		    !name || !*name || strlen(name) > 64)
			return bad(err, 400, "tools", "'tools[%zu]' must be {type: function, function: "
				   "{name (1 to 64 characters), ...}}", i);
		if (params && !json_is_object(params) && !json_is_null(params))
			return bad(err, 400, "tools", "'tools[%zu].function.parameters' must be a JSON "
				   "Schema object", i);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(tool_name(json_array_get(tools, j)), name))
				return bad(err, 400, "tools", "two tools are named '%s'", name);
	}
	return 0;
}

/* tool_choice: "none" | "auto" | "required" | {type: function, function: {name}}. */
static int parse_choice(nf_serve_req *r, nf_api_error *err, json_t *v)
{
	const char *s = json_string_value(v);
	if (!v || json_is_null(v)) {
		r->tool_choice = r->tools ? NF_TOOL_CHOICE_AUTO : NF_TOOL_CHOICE_NONE;
		return 0;
	}
	if (s && !strcmp(s, "none"))
		r->tool_choice = NF_TOOL_CHOICE_NONE;
	else if (s && !strcmp(s, "auto"))
		r->tool_choice = NF_TOOL_CHOICE_AUTO;
	else if (s && !strcmp(s, "required"))
		r->tool_choice = NF_TOOL_CHOICE_REQUIRED;
	else if (json_is_object(v) && json_is_string(json_object_get(json_object_get(v, "function"), "name")))
		r->tool_choice = NF_TOOL_CHOICE_NAMED;
	else
		return bad(err, 400, "tool_choice", "'tool_choice' must be none, auto, required or "
			   "{type: function, function: {name}}");
	if (r->tool_choice != NF_TOOL_CHOICE_NONE && !json_array_size(r->tools))
		return bad(err, 400, "tool_choice", "'tool_choice' needs 'tools'");
	if (r->tool_choice == NF_TOOL_CHOICE_NAMED) {
		const char *name = tool_name(v);
		size_t i;
		json_t *t;
		json_array_foreach(r->tools, i, t)
			if (!strcmp(tool_name(t), name))
				r->tool_named = i;
		if (strcmp(tool_name(json_array_get(r->tools, r->tool_named)), name))
			return bad(err, 400, "tool_choice", "'tool_choice' names '%.64s', which is not "
				   "among the tools", name);
	}
	return 0;
}

/* The schema of a call of tool t: {"name": its name, "arguments": its
 * parameters}. */
static json_t *call_schema(const json_t *t)
{
	json_t *params = json_object_get(json_object_get(t, "function"), "parameters");
	json_t *args = json_is_object(params) ? json_deep_copy(params)
					       : json_pack("{s:s, s:{}}", "type", "object", "properties");
	return json_pack("{s:s, s:{s:{s:s}, s:o}, s:[s,s], s:b}", "type", "object", "properties",
			 "name", "const", tool_name(t), "arguments", args, "required", "name",
			 "arguments", "additionalProperties", 0);
}

/* required or a named function: the answer is one call, as JSON. */
static int choice_guide(nf_serve_req *r, nf_api_error *err)
{
	json_t *any, *t;
	size_t i;
	if (r->guide.kind != NF_GUIDE_NONE)
		return bad(err, 400, "tool_choice", "'tool_choice' %s cannot be combined with "
			   "'response_format' or 'nvext'", r->tool_choice == NF_TOOL_CHOICE_NAMED
								    ? "naming a function" : "required");
	if (!(any = json_array()))
		return bad(err, 500, "", "out of memory");
	json_array_foreach(r->tools, i, t)
		if (r->tool_choice == NF_TOOL_CHOICE_REQUIRED || i == r->tool_named)
			json_array_append_new(any, call_schema(t));
	r->guide.kind = NF_GUIDE_SCHEMA;
	r->guide.value = json_array_size(any) == 1 ? json_incref(json_array_get(any, 0))
						   : json_pack("{s:O}", "anyOf", any);
	json_decref(any);
	return r->guide.value ? 0 : bad(err, 500, "", "out of memory");
}

int nf_serve_req_parse_tools(nf_serve_req *r, nf_api_error *err, json_t *root)
{
	json_t *tools = json_object_get(root, "tools");
	int rc;
	if (tools && !json_is_null(tools)) {
		if ((rc = check_tools(err, tools)) < 0)
			return rc;
		if (json_array_size(tools))
			r->tools = json_incref(tools);
	}
	if ((rc = parse_choice(r, err, json_object_get(root, "tool_choice"))) < 0)
		return rc;
	if (r->tool_choice == NF_TOOL_CHOICE_REQUIRED || r->tool_choice == NF_TOOL_CHOICE_NAMED)
		return choice_guide(r, err);
	return 0;
}

/* ---- the conversation's tool turns as text ---- */

/* An assistant turn's tool_calls as <tool_call> blocks after its content. */
static int calls_text(nf_sbuf *out, nf_api_error *err, const char *param, json_t *calls)
{
	size_t i;
	json_t *c;
	if (!json_is_array(calls))
		return bad(err, 400, param, "'%s.tool_calls' must be a list", param);
	json_array_foreach(calls, i, c) {
		json_t *f = json_object_get(c, "function");
		const char *name = json_string_value(json_object_get(f, "name"));
		const char *args = json_string_value(json_object_get(f, "arguments"));
		json_t *parsed = args ? json_loads(args, 0, NULL) : NULL;
		int ok = name && json_is_object(parsed);
		char *a = ok ? json_dumps(parsed, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
		json_decref(parsed);
		if (!ok) {
			free(a);
			return bad(err, 400, param, "'%s.tool_calls[%zu]' must be {id, type: function, "
				   "function: {name, arguments: a JSON object as a string}}", param, i);
		}
		int rc = nf_sbuf_printf(out, "%s<tool_call>\n{\"name\": \"%s\", \"arguments\": %s}\n"
					     "</tool_call>", out->len ? "\n" : "", name, a);
		free(a);
		if (rc < 0)
			return bad(err, 400, "messages", "the conversation exceeds %u bytes",
				   NF_REQ_MAX_PROMPT);
	}
	return 0;
}

/* A message's text content (a string, or text parts joined), appended. */
static int content_text(nf_sbuf *out, nf_api_error *err, const char *param, json_t *content)
{
	size_t i;
	json_t *p;
	if (!content || json_is_null(content))
		return 0;
	if (json_is_string(content))
		return nf_sbuf_add(out, json_string_value(content), json_string_length(content)) < 0
			       ? bad(err, 400, "messages", "the conversation exceeds %u bytes",
				     NF_REQ_MAX_PROMPT)
			       : 0;
	if (!json_is_array(content))
		return bad(err, 400, param, "'%s.content' must be a string or a list of text parts",
			   param);
	json_array_foreach(content, i, p) {
		json_t *text = json_object_get(p, "text");
		if (!json_is_string(text) || (i && nf_sbuf_adds(out, "\n") < 0) ||
		    nf_sbuf_add(out, json_string_value(text), json_string_length(text)) < 0)
			return bad(err, 400, param, "'%s.content[%zu]' must be a text part", param, i);
	}
	return 0;
}

/* One turn as {role, content} without tools: a tool result as the user's,
 * an assistant's calls as text. */
static json_t *plain_turn(nf_api_error *err, json_t *m, size_t idx, int *rc)
{
	const char *role = json_string_value(json_object_get(m, "role"));
	json_t *calls = json_object_get(m, "tool_calls");
	char param[48];
	nf_sbuf text;
	snprintf(param, sizeof param, "messages[%zu]", idx);
	*rc = 0;
	if (!role || (strcmp(role, "tool") && !(calls && !strcmp(role, "assistant"))))
		return json_incref(m); /* not a tool turn: parse_messages checks it */
	nf_sbuf_init(&text, NF_REQ_MAX_PROMPT);
	if (!strcmp(role, "tool")) {
		if (!json_is_string(json_object_get(m, "tool_call_id")))
			*rc = bad(err, 400, param, "'%s.tool_call_id' must be a string", param);
		if (!*rc && (nf_sbuf_adds(&text, "<tool_response>\n") < 0 ||
			     (*rc = content_text(&text, err, param, json_object_get(m, "content"))) < 0 ||
			     nf_sbuf_adds(&text, "\n</tool_response>") < 0))
			*rc = *rc < 0 ? *rc : bad(err, 400, "messages", "the conversation is too long");
	} else if (!(*rc = content_text(&text, err, param, json_object_get(m, "content")))) {
		*rc = calls_text(&text, err, param, calls);
	}
	json_t *turn = *rc < 0 ? NULL
			       : json_pack("{s:s, s:s%}", "role", strcmp(role, "tool") ? "assistant" : "user",
					   "content", text.data ? text.data : "", text.len);
	nf_sbuf_release(&text);
	if (!turn && !*rc)
		*rc = bad(err, 500, "", "out of memory");
	return turn;
}

/* The tools prompt in front: joined to a leading system message, or as one. */
static int offer_tools(json_t *turns, nf_api_error *err, const json_t *tools)
{
	nf_sbuf p;
	json_t *first = json_array_get(turns, 0);
	const char *role = json_string_value(json_object_get(first, "role"));
	int sys = role && (!strcmp(role, "system") || !strcmp(role, "developer"));
	int rc = 0;
	nf_sbuf_init(&p, NF_REQ_MAX_PROMPT);
	if (sys && (rc = content_text(&p, err, "messages[0]", json_object_get(first, "content"))) == 0)
		rc = nf_sbuf_adds(&p, "\n\n") < 0 ? -1 : 0;
	if (!rc && nf_tool_prompt(&p, tools) < 0)
		rc = bad(err, 400, "tools", "the tools prompt exceeds %u bytes", NF_REQ_MAX_PROMPT);
	json_t *s = rc < 0 ? NULL : json_pack("{s:s, s:s%}", "role", "system", "content",
					       p.data ? p.data : "", p.len);
	nf_sbuf_release(&p);
	if (rc < 0)
		return rc < -1 ? rc : bad(err, 400, "messages", "the system message is too long");
	if (!s || (sys ? json_array_set_new(turns, 0, s) : json_array_insert_new(turns, 0, s)))
		return bad(err, 500, "", "out of memory");
	return 0;
}

int nf_serve_req_tool_turns(json_t **out, nf_api_error *err, const nf_serve_req *r, json_t *messages)
{
	json_t *turns = json_array(), *m;
	size_t i;
	int rc = 0;
	*out = NULL;
	if (!json_is_array(messages)) { /* parse_messages says what is wrong */
		json_decref(turns);
		return 0;
	}
	json_array_foreach(messages, i, m) {
		json_t *t = plain_turn(err, m, i, &rc);
		if (rc < 0 || json_array_append_new(turns, t)) {
			json_decref(turns);
			return rc < 0 ? rc : bad(err, 500, "", "out of memory");
		}
	}
	if (r->tools && r->tool_choice != NF_TOOL_CHOICE_NONE && (rc = offer_tools(turns, err, r->tools)) < 0) {
		json_decref(turns);
		return rc;
	}
	*out = turns;
	return 0;
}
