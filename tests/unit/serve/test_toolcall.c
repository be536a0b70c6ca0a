/* test_toolcall.c - tool calls out of model answers: each syntax's calls
 * with the text around them, what stays text (bad JSON, unknown names,
 * arguments that are not an object), and the streaming parser, fed in
 * pieces of every size, giving what the whole-answer parser gives. */
#define _GNU_SOURCE
#include <string.h>

#include "serve/toolcall.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/banned.h"

static json_t *tools;

static nf_tool_parser parser(nf_tool_syntax s)
{
	return (nf_tool_parser){.syntax = s, .tools = tools};
}

/* Parse text whole; check its content and its calls ("name args" each). */
static void check(nf_tool_syntax syn, const char *text, const char *content, int n,
		  const char *const *calls, const char *what)
{
	nf_tool_result r;
	nf_tool_parser p = parser(syn);
	int err = nf_tool_parse(&r, &p, text, strlen(text), 1 << 16);
	is_int(err, 0, "%s: parses", what);
	is_str(r.content.data ? r.content.data : "", content, "%s: content", what);
	is_int((int)r.n_calls, n, "%s: %d calls", what, n);
	for (int i = 0; i < n && i < (int)r.n_calls; i++) {
		char got[256];
		snprintf(got, sizeof got, "%s %s", r.calls[i].name, r.calls[i].arguments);
		is_str(got, calls[i], "%s: call %d", what, i);
	}
	nf_tool_result_release(&r);
}

/* What a stream gives: content concatenated, calls as "name args;" */
typedef struct seen {
	nf_sbuf content, calls;
	size_t next_index;
	int bad_index;
} seen;

static int on_content(void *ctx, const char *t, size_t n)
{
	return nf_sbuf_add(&((seen *)ctx)->content, t, n);
}

static int on_call(void *ctx, const nf_tool_call *c, size_t index)
{
	seen *s = ctx;
	s->bad_index |= index != s->next_index++;
	return nf_sbuf_printf(&s->calls, "%s %s;", c->name, c->arguments);
}

/* Feed text in pieces of `step` bytes; 1 when the stream gives what the
 * whole-answer parser gives. */
static int stream_matches(nf_tool_syntax syn, const char *text, size_t step)
{
	nf_tool_parser p = parser(syn);
	seen s = {0};
	nf_sbuf_init(&s.content, 1 << 16);
	nf_sbuf_init(&s.calls, 1 << 16);
	nf_tool_stream st;
	nf_tool_stream_init(&st, &p, &(nf_tool_sink){on_content, on_call, &s}, 1 << 16);
	size_t len = strlen(text);
	int err = 0;
	for (size_t at = 0; at < len && !err; at += step)
		err = nf_tool_stream_feed(&st, text + at, len - at < step ? len - at : step);
	if (!err)
		err = nf_tool_stream_finish(&st);
	nf_tool_result r;
	nf_sbuf want_calls;
	nf_sbuf_init(&want_calls, 1 << 16);
	nf_tool_parse(&r, &p, text, len, 1 << 16);
	for (size_t i = 0; i < r.n_calls; i++)
		nf_sbuf_printf(&want_calls, "%s %s;", r.calls[i].name, r.calls[i].arguments);
	int same = !err && !s.bad_index &&
		   strcmp(s.content.data ? s.content.data : "", r.content.data ? r.content.data : "") == 0 &&
		   strcmp(s.calls.data ? s.calls.data : "", want_calls.data ? want_calls.data : "") == 0;
	if (!same)
		diag("step %zu: content '%s' calls '%s'", step, s.content.data ? s.content.data : "",
		     s.calls.data ? s.calls.data : "");
	nf_tool_result_release(&r);
	nf_tool_stream_release(&st);
	nf_sbuf_release(&s.content);
	nf_sbuf_release(&s.calls);
	nf_sbuf_release(&want_calls);
	return same;
}

static void syntaxes(void)
{
	is_int(nf_tool_syntax_of("{{ '<tool_call>' }}"), NF_TOOLS_HERMES, "a template with <tool_call>");
	is_int(nf_tool_syntax_of("[TOOL_CALLS] {{ tools }}"), NF_TOOLS_MISTRAL, "[TOOL_CALLS]");
	is_int(nf_tool_syntax_of("<|start_header_id|>ipython"), NF_TOOLS_LLAMA3, "ipython");
	is_int(nf_tool_syntax_of("{% for m in messages %}"), NF_TOOLS_HERMES, "none: ours");
	is_int(nf_tool_syntax_of(NULL), NF_TOOLS_HERMES, "no template: ours");
}

static void hermes(void)
{
	const char *one[] = {"get_weather {\"city\":\"Paris\",\"unit\":\"c\"}"};
	check(NF_TOOLS_HERMES,
	      "Let me look.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
	      "{\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>",
	      "Let me look.", 1, one, "hermes: one call after text");
	const char *two[] = {"get_weather {\"city\":\"Oslo\"}", "get_time {}"};
	check(NF_TOOLS_HERMES,
	      "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}</tool_call>\n"
	      "<tool_call>{\"name\":\"get_time\",\"arguments\":\"{}\"}</tool_call>",
	      "\n", 2, two, "hermes: two calls, arguments as a string");
	check(NF_TOOLS_HERMES, "<tool_call>{\"name\":\"rm\",\"arguments\":{}}</tool_call>",
	      "<tool_call>{\"name\":\"rm\",\"arguments\":{}}</tool_call>", 0, NULL,
	      "hermes: a name not among the tools stays text");
	check(NF_TOOLS_HERMES, "<tool_call>{\"name\":\"get_time\",\"arguments\":[1]}</tool_call>",
	      "<tool_call>{\"name\":\"get_time\",\"arguments\":[1]}</tool_call>", 0, NULL,
	      "hermes: arguments that are not an object stay text");
	check(NF_TOOLS_HERMES, "a <tool_call>{\"name\": </tool_call> b",
	      "a <tool_call>{\"name\": </tool_call> b", 0, NULL, "hermes: bad JSON stays text");
	const char *cut[] = {"get_time {\"tz\":\"UTC\"}"};
	check(NF_TOOLS_HERMES, "<tool_call>{\"name\":\"get_time\",\"arguments\":{\"tz\":\"UTC\"}}",
	      "", 1, cut, "hermes: a call the end of the answer cut short of its tag");
	check(NF_TOOLS_HERMES, "no calls at all, a <toolbox>", "no calls at all, a <toolbox>", 0,
	      NULL, "hermes: text");
}

static void llama3_mistral(void)
{
	const char *two[] = {"get_weather {\"city\":\"Rome\"}", "get_time {}"};
	check(NF_TOOLS_LLAMA3,
	      "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}; "
	      "{\"name\": \"get_time\", \"parameters\": {}}",
	      "", 2, two, "llama3: two calls after the python tag");
	check(NF_TOOLS_LLAMA3, "{\"name\": \"get_time\", \"parameters\": {}} and then text",
	      "{\"name\": \"get_time\", \"parameters\": {}} and then text", 0, NULL,
	      "llama3: a call followed by text is text");
	check(NF_TOOLS_LLAMA3, "Rome is sunny.", "Rome is sunny.", 0, NULL, "llama3: text");
	const char *one[] = {"get_weather {\"city\":\"Lima\"}"};
	check(NF_TOOLS_MISTRAL,
	      "Sure. [TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}]",
	      "Sure. ", 1, one, "mistral: an array of calls after text");
	check(NF_TOOLS_MISTRAL, "[TOOL_CALLS] [{\"name\": \"nope\", \"arguments\": {}}]",
	      "[TOOL_CALLS] [{\"name\": \"nope\", \"arguments\": {}}]", 0, NULL,
	      "mistral: an unknown name leaves the whole array as text");
}

static void streaming(void)
{
	static const struct {
		nf_tool_syntax syn;
		const char *text;
	} cases[] = {
		{NF_TOOLS_HERMES, "Let me look.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
				  "{\"city\": \"Paris\"}}\n</tool_call> done <tool"},
		{NF_TOOLS_HERMES, "a <toolbox> and <tool_call>{\"name\":\"get_time\",\"arguments\":{}}"
				  "</tool_call><tool_call>{\"name\":\"get_time\",\"arguments\":{}}"},
		{NF_TOOLS_HERMES, "<tool_call>{bad}</tool_call> text"},
		{NF_TOOLS_LLAMA3, "  <|python_tag|>{\"name\": \"get_time\", \"parameters\": {}}"},
		{NF_TOOLS_LLAMA3, "<|python_ta is not the tag"},
		{NF_TOOLS_LLAMA3, "plain text { with braces }"},
		{NF_TOOLS_MISTRAL, "ok [TOOL_CALLS] [{\"name\": \"get_time\", \"arguments\": {}}]"},
		{NF_TOOLS_MISTRAL, "[TOOL_CALL is not it"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int all = 1;
		for (size_t step = 1; step <= 13; step++)
			all &= stream_matches(cases[i].syn, cases[i].text, step);
		ok(all, "stream %zu (%s) in pieces of 1..13 bytes gives the whole parse", i,
		   nf_tool_syntax_name(cases[i].syn));
	}
	/* a call longer than what the stream may hold */
	nf_tool_parser p = parser(NF_TOOLS_HERMES);
	seen s = {0};
	nf_sbuf_init(&s.content, 1024);
	nf_sbuf_init(&s.calls, 1024);
	nf_tool_stream st;
	nf_tool_stream_init(&st, &p, &(nf_tool_sink){on_content, on_call, &s}, 32);
	int err = nf_tool_stream_feed(&st, "<tool_call>{\"name\": \"get_weather\", \"arguments\"", 48);
	is_int(err, NF_EINPUT, "a held call past the cap is refused: %s", nf_error_last());
	nf_tool_stream_release(&st);
	nf_sbuf_release(&s.content);
	nf_sbuf_release(&s.calls);
}

static void prompt(void)
{
	nf_sbuf b;
	nf_sbuf_init(&b, 1 << 16);
	is_int(nf_tool_prompt(&b, tools), 0, "the default tools prompt renders");
	ok(b.data && strstr(b.data, "<tools>\n{\"type\":\"function\",\"function\":{\"name\":\"get_weather\""),
	   "it lists each tool as JSON");
	ok(b.data && strstr(b.data, "<tool_call>") && strstr(b.data, "</tool_call>"),
	   "it asks for hermes tags");
	nf_sbuf_release(&b);
}

int main(void)
{
	tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
			   "\"parameters\":{\"type\":\"object\"}}},"
			   "{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}]",
			   0, NULL);
	syntaxes();
	hermes();
	llama3_mistral();
	streaming();
	prompt();
	json_decref(tools);
	return done_testing();
}
