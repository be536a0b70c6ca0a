/*
 * toolcall.c - tool calls out of a model's answer (toolcall.h).
 */
#define _DEFAULT_SOURCE /* reallocarray */
#include "serve/toolcall.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

static const char HERMES_OPEN[] = "<tool_call>";
static const char HERMES_CLOSE[] = "</tool_call>";
static const char PYTHON_TAG[] = "<|python_tag|>";
static const char MISTRAL_OPEN[] = "[TOOL_CALLS]";

nf_tool_syntax nf_tool_syntax_of(const char *src)
{
	if (!src)
		return NF_TOOLS_HERMES;
	if (strstr(src, HERMES_OPEN))
		return NF_TOOLS_HERMES;
	if (strstr(src, MISTRAL_OPEN))
		return NF_TOOLS_MISTRAL;
	if (strstr(src, PYTHON_TAG) || strstr(src, "ipython"))
		return NF_TOOLS_LLAMA3;
	return NF_TOOLS_HERMES;
}

const char *nf_tool_syntax_name(nf_tool_syntax s)
{
	static const char *const names[] = {"hermes", "llama3", "mistral"};
	return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

/* ---- one call ---- */

static bool name_allowed(const nf_tool_parser *p, const char *name)
{
	size_t i;
	json_t *t;
	if (!p->tools)
		return true;
	json_array_foreach(p->tools, i, t) {
		const char *n = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
		if (n && strcmp(n, name) == 0)
			return true;
	}
	return false;
}

/* The arguments of a call object: an object, or a string holding one (some
 * models write them encoded); new reference, or NULL. */
static json_t *arguments_of(const json_t *o)
{
	json_t *a = json_object_get(o, "arguments");
	if (!a)
		a = json_object_get(o, "parameters");
	if (json_is_object(a))
		return json_incref(a);
	if (json_is_string(a)) {
		json_t *d = json_loads(json_string_value(a), JSON_REJECT_DUPLICATES, NULL);
		if (json_is_object(d))
			return d;
		json_decref(d);
	}
	return NULL;
}

/* o as a call: 1 and *out filled, 0 when it is not one we can make, or
 * NF_ENOMEM. */
static int call_from_json(nf_tool_call *out, const json_t *o, const nf_tool_parser *p)
{
	const char *name = json_string_value(json_object_get(o, "name"));
	if (!json_is_object(o) || !name || !*name || !name_allowed(p, name))
		return 0;
	json_t *args = arguments_of(o);
	if (!args)
		return 0;
	out->name = strdup(name);
	out->arguments = json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(args);
	if (!out->name || !out->arguments) {
		free(out->name);
		free(out->arguments);
		return nf_error_set(NF_ENOMEM, "tool call: out of memory");
	}
	return 1;
}

static void call_release(nf_tool_call *c)
{
	free(c->name);
	free(c->arguments);
}

/* One JSON value at the start of [s, s + len) (after blanks); *used gets
 * the bytes it took.  NULL when there is none. */
static json_t *json_prefix(const char *s, size_t len, size_t *used)
{
	json_error_t e;
	size_t skip = 0;
	while (skip < len && strchr(" \t\r\n", s[skip]))
		skip++;
	json_t *v = json_loadb(s + skip, len - skip,
			       JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
	*used = v ? skip + (size_t)e.position : 0;
	return v;
}

static bool blank(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!strchr(" \t\r\n", s[i]))
			return false;
	return true;
}

/* ---- whole answers ---- */

static int add_call(nf_tool_result *r, nf_tool_call *c)
{
	nf_tool_call *n = reallocarray(r->calls, r->n_calls + 1, sizeof *n);
	if (!n) {
		call_release(c);
		return nf_error_set(NF_ENOMEM, "tool call: out of memory");
	}
	r->calls = n;
	r->calls[r->n_calls++] = *c;
	return 0;
}

/* The calls of a JSON value: one call object, or (mistral) an array of
 * them; all or none. */
static int calls_of(nf_tool_result *r, const json_t *v, const nf_tool_parser *p)
{
	size_t first = r->n_calls, i, n = json_is_array(v) ? json_array_size(v) : 1;
	int err = 0, ok = n > 0;
	for (i = 0; i < n && ok && !err; i++) {
		nf_tool_call c;
		int got = call_from_json(&c, json_is_array(v) ? json_array_get(v, i) : v, p);
		if (got < 0)
			err = got;
		else if (!got)
			ok = 0;
		else
			err = add_call(r, &c);
	}
	if (err || !ok) {
		while (r->n_calls > first)
			call_release(&r->calls[--r->n_calls]);
		return err ? err : 0;
	}
	return 1;
}

/* The calls in JSON text [s, s + len): every value in it a call (values
 * separated by sep, 0 for none), nothing else; 1, 0 (not calls), or an error. */
static int calls_in(nf_tool_result *r, const char *s, size_t len, char sep,
		    const nf_tool_parser *p)
{
	size_t at = 0, first = r->n_calls;
	int got = 0;
	while (at < len) {
		size_t used;
		json_t *v = json_prefix(s + at, len - at, &used);
		got = v ? calls_of(r, v, p) : 0;
		json_decref(v);
		if (got <= 0)
			break;
		at += used;
		while (at < len && strchr(" \t\r\n", s[at]))
			at++;
		if (at < len && sep && s[at] == sep)
			at++;
		else if (at < len)
			got = 0;
		if (!got)
			break;
	}
	if (got <= 0)
		while (r->n_calls > first)
			call_release(&r->calls[--r->n_calls]);
	return got;
}

static const char *find(const char *s, size_t len, const char *what)
{
	size_t n = strlen(what);
	for (size_t i = 0; n <= len && i <= len - n; i++)
		if (memcmp(s + i, what, n) == 0)
			return s + i;
	return NULL;
}

/* hermes: every <tool_call>...</tool_call> (the last may be cut off by the
 * end of the answer); what is not a call stays content. */
static int parse_hermes(nf_tool_result *r, const nf_tool_parser *p, const char *s, size_t len)
{
	const size_t on = sizeof HERMES_OPEN - 1, cn = sizeof HERMES_CLOSE - 1;
	while (len > 0) {
		const char *open = find(s, len, HERMES_OPEN);
		if (!open)
			return nf_sbuf_add(&r->content, s, len);
		int err = nf_sbuf_add(&r->content, s, (size_t)(open - s));
		size_t rest = len - (size_t)(open - s) - on;
		const char *body = open + on, *close = find(body, rest, HERMES_CLOSE);
		size_t blen = close ? (size_t)(close - body) : rest;
		size_t whole = on + blen + (close ? cn : 0);
		int got = err ? err : calls_in(r, body, blen, 0, p);
		if (got < 0)
			return got;
		if (!got && (err = nf_sbuf_add(&r->content, open, whole)))
			return err;
		len -= (size_t)(open - s) + whole;
		s = open + whole;
	}
	return 0;
}

/* llama3: the whole answer is calls, or it is content. */
static int parse_llama3(nf_tool_result *r, const nf_tool_parser *p, const char *s, size_t len)
{
	const char *t = s;
	size_t n = len, pn = sizeof PYTHON_TAG - 1;
	while (n && strchr(" \t\r\n", *t))
		t++, n--;
	if (n >= pn && memcmp(t, PYTHON_TAG, pn) == 0)
		t += pn, n -= pn;
	int got = n ? calls_in(r, t, n, ';', p) : 0;
	if (got < 0)
		return got;
	return got ? 0 : nf_sbuf_add(&r->content, s, len);
}

/* mistral: content, then [TOOL_CALLS] and one array of calls. */
static int parse_mistral(nf_tool_result *r, const nf_tool_parser *p, const char *s, size_t len)
{
	const char *m = find(s, len, MISTRAL_OPEN);
	if (!m)
		return nf_sbuf_add(&r->content, s, len);
	size_t before = (size_t)(m - s), mn = sizeof MISTRAL_OPEN - 1, used = 0;
	int err = nf_sbuf_add(&r->content, s, before);
	json_t *v = err ? NULL : json_prefix(m + mn, len - before - mn, &used);
	int got = json_is_array(v) ? calls_of(r, v, p) : 0;
	json_decref(v);
	if (err || got < 0)
		return err ? err : got;
	if (!got)
		return nf_sbuf_add(&r->content, m, len - before);
	size_t after = before + mn + used;
	return blank(s + after, len - after) ? 0 : nf_sbuf_add(&r->content, s + after, len - after);
}

int nf_tool_parse(nf_tool_result *out, const nf_tool_parser *p, const char *text, size_t len,
		  size_t max_content)
{
	memset(out, 0, sizeof *out);
	nf_sbuf_init(&out->content, max_content);
	switch (p->syntax) {
	case NF_TOOLS_LLAMA3: return parse_llama3(out, p, text, len);
	case NF_TOOLS_MISTRAL: return parse_mistral(out, p, text, len);
	default: return parse_hermes(out, p, text, len);
	}
}

void nf_tool_result_release(nf_tool_result *r)
{
	for (size_t i = 0; i < r->n_calls; i++)
		call_release(&r->calls[i]);
	free(r->calls);
	nf_sbuf_release(&r->content);
	memset(r, 0, sizeof *r);
}

/* ---- streaming ---- */

enum {
	STREAM_CONTENT, /* passing text on, holding back what may start a marker */
	STREAM_CALL,    /* inside a hermes call: held until it closes */
	STREAM_HOLD,    /* the rest may be calls (llama3, mistral): held to the end */
	STREAM_START,   /* llama3: nothing but blanks yet */
};

void nf_tool_stream_init(nf_tool_stream *s, const nf_tool_parser *p, const nf_tool_sink *sink,
			 size_t max_held)
{
	memset(s, 0, sizeof *s);
	s->p = *p;
	s->sink = *sink;
	nf_sbuf_init(&s->held, max_held);
	s->mode = p->syntax == NF_TOOLS_LLAMA3 ? STREAM_START : STREAM_CONTENT;
}

/* Pass a parsed piece on: its content, then its calls. */
static int emit(nf_tool_stream *s, const char *text, size_t len)
{
	nf_tool_result r;
	int err = nf_tool_parse(&r, &s->p, text, len, (size_t)-1);
	if (!err && r.content.len)
		err = s->sink.content(s->sink.ctx, r.content.data, r.content.len);
	for (size_t i = 0; i < r.n_calls && !err; i++)
		err = s->sink.call(s->sink.ctx, &r.calls[i], s->n_calls++);
	nf_tool_result_release(&r);
	return err;
}

/* Drop the first n bytes of held. */
static void consume(nf_tool_stream *s, size_t n)
{
	memmove(s->held.data, s->held.data + n, s->held.len - n);
	s->held.len -= n;
	s->held.data[s->held.len] = '\0';
}

/* The longest tail of [t, t + len) that begins marker m (and so may be
 * the start of it). */
static size_t marker_tail(const char *t, size_t len, const char *m)
{
	size_t mn = strlen(m);
	for (size_t k = mn - 1 < len ? mn - 1 : len; k > 0; k--)
		if (memcmp(t + len - k, m, k) == 0)
			return k;
	return 0;
}

/* Settle what held can settle now, in the current mode. */
static int advance(nf_tool_stream *s)
{
	const char *marker = s->p.syntax == NF_TOOLS_MISTRAL ? MISTRAL_OPEN : HERMES_OPEN;
	for (;;) {
		const char *h = s->held.data ? s->held.data : "";
		size_t len = s->held.len;
		if (s->mode == STREAM_START) {
			if (blank(h, len))
				return 0;
			size_t skip = 0;
			while (strchr(" \t\r\n", h[skip]))
				skip++;
			size_t pn = sizeof PYTHON_TAG - 1, rest = len - skip;
			bool tag = memcmp(h + skip, PYTHON_TAG, rest < pn ? rest : pn) == 0;
			if (tag && rest < pn)
				return 0; /* may still become the tag */
			s->mode = tag || h[skip] == '{' ? STREAM_HOLD : STREAM_CONTENT;
			continue;
		}
		if (s->mode == STREAM_HOLD || len == 0)
			return 0;
		if (s->mode == STREAM_CALL) {
			const char *close = find(h, len, HERMES_CLOSE);
			if (!close)
				return 0;
			size_t whole = (size_t)(close - h) + sizeof HERMES_CLOSE - 1;
			int err = emit(s, h, whole);
			if (err)
				return err;
			consume(s, whole);
			s->mode = STREAM_CONTENT;
			continue;
		}
		/* content: llama3 calls only open an answer; the others have markers */
		const char *open = s->p.syntax == NF_TOOLS_LLAMA3 ? NULL : find(h, len, marker);
		size_t safe = open ? (size_t)(open - h)
				   : s->p.syntax == NF_TOOLS_LLAMA3 ? len
								    : len - marker_tail(h, len, marker);
		if (safe) {
			int err = s->sink.content(s->sink.ctx, h, safe);
			if (err)
				return err;
			consume(s, safe);
		}
		if (!open)
			return 0;
		s->mode = s->p.syntax == NF_TOOLS_MISTRAL ? STREAM_HOLD : STREAM_CALL;
	}
}

int nf_tool_stream_feed(nf_tool_stream *s, const char *text, size_t len)
{
	int err = nf_sbuf_add(&s->held, text, len);
	if (err)
		return nf_error_set(NF_EINPUT, "tool call: a call is longer than %zu bytes",
				    s->held.max);
	return advance(s);
}

int nf_tool_stream_finish(nf_tool_stream *s)
{
	int err = s->held.len ? emit(s, s->held.data, s->held.len) : 0;
	s->held.len = 0;
	return err;
}

void nf_tool_stream_release(nf_tool_stream *s) { nf_sbuf_release(&s->held); }

/* ---- the default prompt ---- */

int nf_tool_prompt(nf_sbuf *out, const json_t *tools)
{
	size_t i;
	json_t *t;
	int err = nf_sbuf_adds(out,
			       "# Tools\n\nYou may call functions to answer the user. The "
			       "functions are described in JSON Schema inside <tools></tools>:\n"
			       "<tools>\n");
	json_array_foreach(tools, i, t) {
		char *line = json_dumps(t, JSON_COMPACT | JSON_PRESERVE_ORDER);
		if (!line)
			return nf_error_set(NF_ENOMEM, "tool prompt: out of memory");
		if (!err)
			err = nf_sbuf_add(out, line, strlen(line));
		if (!err)
			err = nf_sbuf_adds(out, "\n");
		free(line);
	}
	if (!err)
		err = nf_sbuf_adds(out,
				   "</tools>\n\nTo call a function, write one JSON object with its "
				   "name and arguments inside <tool_call></tool_call> tags, one pair "
				   "of tags per call:\n<tool_call>\n"
				   "{\"name\": \"function name\", \"arguments\": {\"argument\": "
				   "\"value\"}}\n</tool_call>");
	return err;
}
