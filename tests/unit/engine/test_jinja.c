/*
 * test_jinja.c - the Jinja interpreter (engine/jinja.h) construct by
 * construct on small templates, with the strings jinja2 gives written out
 * (each checked against jinja2 3.1 configured as transformers does, except
 * where we differ on purpose: integers are 64-bit and overflow is an error,
 * tojson's indent stops at 64, and {% generation %} needs transformers'
 * extension); errors with their line:col; undefined values; whitespace
 * control; the limits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "engine/jinja.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/banned.h"

/* A context every case can use. */
static const char *const CTX =
	"{\"xs\": [1, 2, 3], \"d\": {\"a\": 1, \"b\": [1, \"x\"]}, \"s\": \"h\\u00e9llo\","
	" \"msgs\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \" hi \"},"
	" {\"role\": \"assistant\", \"content\": \"yo\"}], \"empty\": [], \"n\": null, \"t\": true,"
	" \"f\": 2.5, \"uni\": \"\\u65e5\\u672c \\ud83e\\udd99\"}";

/* Render src against CTX with limits l (NULL: defaults); the output, or NULL with the error left. */
static char *render_l(const char *src, const nf_jinja_limits *l, int *code)
{
	nf_jinja *t = NULL;
	nf_jinja_limits def;
	json_t *ctx = json_loads(CTX, 0, NULL);
	char *out = NULL;
	int err = nf_jinja_compile(&t, src, strlen(src), "t.jinja");
	nf_jinja_limits_default(&def);
	if (!err)
		err = nf_jinja_render_ex(&out, NULL, t, ctx, l ? l : &def);
	if (code)
		*code = err;
	nf_jinja_free(t);
	json_decref(ctx);
	return out;
}

static void is_render(const char *src, const char *want, const char *name)
{
	int code = 0;
	char *got = render_l(src, NULL, &code);
	is_str(got, want, "%s", name);
	if (!got)
		diag("error %d: %s", code, nf_error_last());
	free(got);
}

/* src must fail with NF_EINPUT and exactly the message want. */
static void is_error(const char *src, const char *want, const char *name)
{
	int code = 0;
	char *got = render_l(src, NULL, &code);
	ok(!got && code == NF_EINPUT, "%s: refused", name);
	is_str(nf_error_last(), want, "%s: message", name);
	free(got);
}

static void test_basics(void)
{
	is_render("plain text\n", "plain text", "text; one trailing newline dropped");
	is_render("a\n\n", "a\n", "only one trailing newline dropped");
	is_render("{{ 'a\\tb\\n' }}|{{ \"q\\\"\" }}|{{ 'it\\'s' }}|{{ '\\u00e9\\x41' }}|{{ '\\q' }}",
		  "a\tb\n|q\"|it's|\xc3\xa9" "A|\\q", "string escapes");
	is_render("{{ 'a' 'b' }}", "ab", "adjacent strings join");
	is_render("{{ 42 }} {{ -7 }} {{ 1_000 }} {{ 2.5 }} {{ 1.0 }} {{ 1e20 }} {{ 1.5e-7 }} {{ 0.1 + 0.2 }}",
		  "42 -7 1000 2.5 1.0 1e+20 1.5e-07 0.30000000000000004", "numbers print as Python's");
	is_render("{{ true }} {{ False }} {{ none }} {{ None }} {{ n }}", "True False None None None",
		  "booleans and none");
	is_render("{{ xs }} {{ d }} {{ (1, 'a') }} {{ [] }} {{ {} }}",
		  "[1, 2, 3] {'a': 1, 'b': [1, 'x']} (1, 'a') [] {}", "lists, dicts, tuples print as repr");
	is_render("{{ [\"it's\", 'q\"', 'a\\nb'] }}", "[\"it's\", 'q\"', 'a\\nb']", "repr quoting");
	is_render("a{# a comment {{ x }} #}b", "ab", "comments vanish");
}

static void test_whitespace(void)
{
	is_render("{% if true %}\nyes\n{% endif %}\nafter", "yes\nafter", "trim_blocks eats the newline after a tag");
	is_render("x\n    {% if true %}\n    y\n    {% endif %}\nz", "x\n    y\nz",
		  "lstrip_blocks eats the indent before a tag");
	is_render("  {% if true %}x{% endif %}", "x", "lstrip_blocks at the start of the template");
	is_render("a  {% if true %}x{% endif %}", "a  x", "no lstrip after text on the same line");
	is_render("a\n  {# c #}\nb", "a\nb", "comments trimmed like blocks");
	is_render("{{ 'v' }}\nw", "v\nw", "no trim after a variable tag");
	is_render("a   {%- if true -%}   b   {%- endif -%}   c", "abc", "- strips both sides");
	is_render("a \n {{- 'b' -}} \n c", "abc", "{{- and -}} strip");
	is_render("  {%+ if true %}x{% endif %}", "  x", "{%+ keeps the indent");
	is_render("{% if true +%}\nx{% endif %}", "\nx", "+%} keeps the newline");
	is_render("{%- for x in xs -%}\n  {{ x }}\n{%- endfor %}", "123", "the usual template layout");
	is_render("a\r\nb\rc", "a\nb\nc", "newlines normalized");
}

static void test_statements(void)
{
	is_render("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.length }}"
		  "{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %},{% endfor %}",
		  "1033F,2123,3213L,", "loop variables");
	is_render("{% for x in empty %}{{ x }}{% else %}none{% endfor %}", "none", "for else");
	is_render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=[1, 'x'];",
		  "tuple unpacking over items()");
	is_render("{% for k in d %}{{ k }}{% endfor %}", "ab", "a dict iterates over its keys");
	is_render("{% for ch in s %}{{ ch }}.{% endfor %}", "h.\xc3\xa9.l.l.o.", "a string iterates by character");
	is_render("{% for x in xs if x > 1 %}{{ x }}/{{ loop.length }} {% endfor %}", "2/2 3/2 ",
		  "inline if filters before loop.length");
	is_render("{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 3 %}{% break %}{% endif %}"
		  "{{ x }}{% endfor %}", "1", "break and continue");
	is_render("{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}{% endfor %}",
		  "1x1 1y2 2x1 2y2 ", "nested loops, inner loop variable");
	is_render("{% set c = 0 %}{% for i in xs %}{% set c = c + i %}{{ c }}{% endfor %}{{ c }}", "1230",
		  "a set inside a loop does not leak out of its iteration");
	is_render("{% set ns = namespace(total=0, seen=false) %}{% for i in xs %}{% set ns.total = ns.total + i %}"
		  "{% endfor %}{{ ns.total }}{{ ns.seen }}", "6False", "namespace carries values out of a loop");
	is_render("{% if n %}a{% elif xs|length > 2 %}b{% else %}c{% endif %}", "b", "if/elif/else");
	is_render("{% if false %}a{% elif false %}b{% else %}c{% endif %}", "c", "else");
	is_render("{% set a, b = 1, 'two' %}{{ b }}{{ a }}", "two1", "set with tuple unpacking");
	is_render("{% set x %}[{{ xs|length }}]{% endset %}{{ x }}{{ x }}", "[3][3]", "block set");
	is_render("{% set messages = msgs[1:] %}{{ messages|length }}", "2", "set shadows a context variable");
	is_render("{% macro m(a, b='x') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(2, b='y') }}{{ m(3, 'z') }}",
		  "<1x><2y><3z>", "macros with defaults and keyword arguments");
	is_render("{% generation %}g{% endgeneration %}", "g", "generation renders its body");
}

static void test_expressions(void)
{
	is_render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 / 2 }} {{ -7 % 3 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ 7.5 % 2 }}",
		  "3 -4 3.5 2 2.0 1024 1.5", "arithmetic as Python");
	is_render("{{ 'a' + 'b' }}{{ 'x' ~ 1 ~ none ~ u }}{{ 'ab' * 2 }}{{ [1] + [2] }}", "abx1Noneabab[1, 2]",
		  "+, ~ and * on strings and lists");
	is_render("{{ 1 == 1.0 }}{{ '1' == 1 }}{{ 2 < 3 }}{{ 'a' < 'b' }}{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ xs == [1, 2, 3] }}",
		  "TrueFalseTrueTrueTrueFalseTrue", "comparisons, chained");
	is_render("{{ 'llo' in s }}{{ 2 in xs }}{{ 'a' in d }}{{ 5 not in xs }}{{ 'z' in d }}", "TrueTrueTrueTrueFalse",
		  "in and not in");
	is_render("{{ not n and t }}{{ n or 'dflt' }}{{ 0 or [] or 'last' }}{{ t and 'yes' }}", "Truedfltlastyes",
		  "and/or return an operand");
	is_render("{{ s[1:] }}|{{ s[::-1] }}|{{ s[-2:] }}|{{ s[1] }}|{{ xs[-1] }}|{{ xs[1:] }}|{{ xs[::2] }}|{{ uni[1:] }}",
		  "\xc3\xa9llo|oll\xc3\xa9h|lo|\xc3\xa9|3|[2, 3]|[1, 3]|\xe6\x9c\xac \xf0\x9f\xa6\x99",
		  "slicing and indexing by code point");
	is_render("{{ 'y' if t else 'n' }}{{ 'x' if n }}|", "y|", "conditional expressions");
	is_render("{{ msgs[0].role }}{{ msgs[1]['content'] }}{{ d.b[1] }}{{ xs.0 }}", "system hi x1", "attribute and item access");
	is_render("{{ {'k': 'v', 1: 2}['k'] }}{{ [[1, 2]][0][1] }}", "v2", "literals subscripted");
	is_render("{{ -f }} {{ +3 }} {{ -(1 + 2) * 2 }}", "-2.5 3 -6", "unary operators");
}

static void test_undefined(void)
{
	is_render("[{{ nope }}][{{ d.zz }}][{{ d['zz'] }}][{{ xs[9] }}][{{ n.x }}]", "[][][][][]",
		  "missing names, attributes, keys and indexes print nothing");
	is_render("{{ nope is defined }}{{ nope is not defined }}{{ d.zz is undefined }}{{ nope|length }}"
		  "{% if nope %}x{% endif %}{{ nope|default('dflt') }}{{ n|default('kept') }}{{ ''|default('e', true) }}",
		  "FalseTrueTrue0dfltNonee", "undefined is falsy, empty and replaced by default");
	is_render("{% for x in nope %}x{% else %}none{% endfor %}", "none", "undefined iterates as empty");
	is_error("line one\n{{ nope.attr }}", "t.jinja:2:8: 'nope' is undefined", "attribute of undefined fails");
	is_error("{{ nope + 'a' }}", "t.jinja:1:9: 'nope' is undefined", "arithmetic on undefined fails");
}

static void test_methods_filters(void)
{
	is_render("{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|"
		  "{{ ' \\u3000a\\u00a0'.strip() }}", "a b|a|a|a|a", "strip family, Unicode whitespace");
	is_render("{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a b c'.split(' ', 1) }}",
		  "['a', 'b', '', 'c']['a', 'b']['a', 'b c']", "split");
	is_render("{{ s.startswith('h') }}{{ s.endswith(('x', 'lo')) }}{{ 'Hi There'.upper() }}{{ 'Hi'.lower() }}"
		  "{{ 'hello wORLD'.title() }}{{ 'hELLO'.capitalize() }}{{ 'aXa'.replace('a', 'b') }}",
		  "TrueTrueHI THEREhiHello WorldHellobXb", "string methods");
	is_render("{{ s.find('l') }}{{ s.find('z') }}{{ 'aaa'.count('a') }}{{ 'ab'.count('') }}{{ '-'.join(['a', 'b']) }}",
		  "2-133a-b", "find, count, join");
	is_render("{{ d.get('a') }}{{ d.get('zz') }}{{ d.get('zz', 5) }}{{ d.keys()|list }}{{ d.values()|length }}{{ d.items()|list }}",
		  "1None5['a', 'b']2[('a', 1), ('b', [1, 'x'])]", "dict methods");
	is_render("[{{ msgs[1].content|trim }}][{{ xs|length }}{{ s|length }}{{ d|length }}][{{ 'aB'|upper }}{{ 'aB'|lower }}]",
		  "[hi][352][ABab]", "trim, length, upper, lower");
	is_render("{{ xs|first }}{{ xs|last }}{{ 'abc'|first }}{{ xs|join('-') }}{{ msgs|join(',', attribute='role') }}",
		  "13a1-2-3system,user,assistant", "first, last, join");
	is_render("{{ 3|string ~ 'x' }}{{ '42'|int + 1 }}{{ 'x'|int }}{{ 2.9|int }}{{ 'ab cd'|capitalize }}{{ 'a-b'|replace('-', '+') }}",
		  "3x4302Ab cda+b", "string, int, capitalize, replace");
	is_render("{{ 'ab'|list }}{{ d|items|list }}{{ xs|reverse|list }}", "['a', 'b'][('a', 1), ('b', [1, 'x'])][3, 2, 1]",
		  "list, items, reverse");
	is_render("{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }}"
		  "{{ msgs|rejectattr('role', 'in', ['user', 'system'])|map(attribute='role')|join }}"
		  "{{ xs|select('odd')|list }}{{ ['a', 'code', 'b']|reject('equalto', 'code')|join(', ') }}{{ xs|map('string')|join }}",
		  "[' hi ']assistant[1, 3]a, b123", "selectattr, rejectattr, select, reject, map");
	is_render("{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}", "a\n  b\n\n  c|  a\n  b", "indent");
	is_render("{{ d|tojson }}|{{ uni|tojson }}|{{ 'q\"\\\\\\n'|tojson }}|{{ [n, t, f]|tojson }}",
		  "{\"a\": 1, \"b\": [1, \"x\"]}|\"\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\xa6\x99\"|\"q\\\"\\\\\\n\"|[null, true, 2.5]",
		  "tojson: ensure_ascii off, no HTML escaping");
	is_render("{{ {'b': 1, 'a': [1, {}]}|tojson(indent=2, sort_keys=true) }}",
		  "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": 1\n}", "tojson indent and sort_keys");
	is_render("{{ [1]|tojson(indent=-1) }}", "[\n1\n]", "tojson: a negative indent is 0");
	is_render("{{ d|tojson(separators=(',', ':')) }}{{ uni|tojson(ensure_ascii=true) }}",
		  "{\"a\":1,\"b\":[1,\"x\"]}\"\\u65e5\\u672c \\ud83e\\udd99\"", "tojson separators and ensure_ascii");
	is_render("{{ 'x' is string }}{{ d is mapping }}{{ xs is iterable }}{{ xs is sequence }}{{ 3 is number }}"
		  "{{ t is boolean }}{{ n is none }}{{ 3 is odd }}{{ 4 is divisibleby 2 }}{{ 1 is integer }}{{ f is float }}",
		  "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue", "tests");
	is_render("{% for i in range(3) %}{{ i }}{% endfor %}{{ range(1, 7, 2)|list }}", "012[1, 3, 5]", "range");
	is_render("{{ dict(a=1)['a'] }}{{ namespace(x=2).x }}", "12", "dict() and namespace()");
}

static void test_errors(void)
{
	is_error("{{ 1 + }}", "t.jinja:1:8: unexpected '}}'", "expression cut short");
	is_error("{{ 1 +", "t.jinja:1:1: unclosed variable tag", "tag cut short");
	is_error("ok\n  {% if x %}\nno end", "t.jinja:3:7: unexpected end of template, expected 'endif'",
		 "an if without endif");
	is_error("{% frobnicate %}", "t.jinja:1:4: unknown or unexpected tag 'frobnicate'", "unknown tag");
	is_error("{% for x in xs %}{% endif %}", "t.jinja:1:21: unknown or unexpected tag 'endif'", "mismatched end tag");
	is_error("{{ 'abc }}", "t.jinja:1:4: unterminated string", "unterminated string");
	is_error("a\n{{ x $ y }}", "t.jinja:2:6: unexpected character '$'", "a character Jinja has no use for");
	is_error("{{ x", "t.jinja:1:1: unclosed variable tag", "unclosed tag");
	is_error("{# never closed", "t.jinja:1:1: unclosed comment", "unclosed comment");
	is_error("{{ f(a=1, 2) }}", "t.jinja:1:11: positional argument after a keyword argument", "argument order");
	is_error("{{ 99999999999999999999 }}", "t.jinja:1:4: integer literal too large", "huge integer literal");
	is_error("\n\n   {{ raise_exception('Conversation roles must alternate') }}",
		 "t.jinja:3:22: Conversation roles must alternate", "raise_exception names the call");
	is_error("{% if t %}{% break %}{% endif %}", "t.jinja:1:14: 'break' outside a for loop", "break outside a loop");
	is_error("{% for x in xs %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}",
		 "t.jinja:1:36: 'continue' outside a for loop", "continue in a macro in a loop");
	is_error("{{ xs|frob }}", "t.jinja:1:6: no filter named 'frob'", "unknown filter");
	is_error("{{ 1 / 0 }}", "t.jinja:1:6: division by zero", "division by zero");
	is_error("{{ 'a' + 1 }}", "t.jinja:1:8: unsupported operand type(s) for +: 'str' and 'int'", "type error");
	is_error("{{ 9223372036854775807 + 1 }}", "t.jinja:1:24: integer overflow", "no silent wrap-around");
	is_error("{{ none() }}", "t.jinja:1:8: 'NoneType' object is not callable", "calling a non-function");
	is_error("{% set x = 1 %}{% set x.a = 2 %}", "t.jinja:1:24: cannot assign attribute on non-namespace object",
		 "attribute assignment needs a namespace");
	is_error("{% for a, b in xs %}{% endfor %}", "t.jinja:1:8: cannot unpack a int into 2 names", "unpacking");
	is_error("{{ d|tojson(indent=65) }}", "t.jinja:1:5: tojson's indent must be an integer up to 64", "tojson indent");
}

static void test_limits(void)
{
	nf_jinja_limits l;
	int code = 0;
	char *got;
	nf_jinja_limits_default(&l);
	l.max_out = 10;
	got = render_l("{% for i in range(100) %}{{ i }}{% endfor %}", &l, &code);
	ok(!got && code == NF_EINPUT && strstr(nf_error_last(), "t.jinja:1:26: output longer than 10 bytes"),
	   "output cap: %s", nf_error_last());
	nf_jinja_limits_default(&l);
	l.max_steps = 1000;
	got = render_l("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", &l, &code);
	ok(!got && code == NF_EINPUT && strstr(nf_error_last(), "took more than 1000 steps"), "step cap: %s",
	   nf_error_last());
	got = render_l("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", NULL, &code);
	ok(!got && code == NF_EINPUT && strstr(nf_error_last(), "nested more than"), "unbounded macro recursion: %s",
	   nf_error_last());
	nf_jinja_limits_default(&l);
	l.max_mem = (size_t)1 << 20;
	got = render_l("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
		       &l, &code);
	ok(!got && code == NF_EINPUT && strstr(nf_error_last(), "more than 1048576 bytes of memory"), "memory cap: %s",
	   nf_error_last());
	nf_jinja_limits_default(&l);
	l.max_depth = 8;
	got = render_l("{% set ns = namespace(v=[]) %}{% for i in range(20) %}{% set ns.v = [ns.v] %}{% endfor %}"
		       "{{ ns.v|tojson }}", &l, &code);
	ok(!got && code == NF_EINPUT && strstr(nf_error_last(), "nested more than 8 deep"), "value depth cap: %s",
	   nf_error_last());

	/* hostile nesting is refused at compile time, not by the stack */
	size_t n = 100000;
	char *deep = malloc(2 * n + 16);
	nf_jinja *t = NULL;
	memcpy(deep, "{{ ", 3);
	memset(deep + 3, '(', n);
	deep[3 + n] = '1';
	memset(deep + 4 + n, ')', n);
	memcpy(deep + 4 + 2 * n, " }}", 4);
	is_int(nf_jinja_compile(&t, deep, strlen(deep), "deep"), NF_EINPUT, "100000 open parentheses refused");
	ok(strstr(nf_error_last(), "deep:1:") && strstr(nf_error_last(), "nesting too deep"), "%s", nf_error_last());
	size_t k = 0;
	for (size_t i = 0; i < 20000; i++)
		k += (size_t)snprintf(deep + k, 2 * n + 16 - k, "{%% if x %%}");
	is_int(nf_jinja_compile(&t, deep, k, "deep"), NF_EINPUT, "20000 nested ifs refused");
	k = (size_t)snprintf(deep, 2 * n + 16, "{{ 1");
	for (size_t i = 0; i < 50000; i++)
		k += (size_t)snprintf(deep + k, 2 * n + 16 - k, " + 1");
	memcpy(deep + k, " }}", 4);
	got = render_l(deep, NULL, &code);
	ok(!got && code == NF_EINPUT && strstr(nf_error_last(), "nested more than"),
	   "a 50000-term sum fails cleanly: %s", nf_error_last());
	free(deep);
	nf_jinja_free(NULL);
}

static void test_chat(void)
{
	static const char tmpl[] = "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ eos_token }}"
				   "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";
	nf_jinja *t = NULL;
	json_t *msgs = json_loads("[{\"role\": \"user\", \"content\": \"hi\"}]", 0, NULL);
	char *out = NULL;
	size_t len = 0;
	is_int(nf_jinja_compile(&t, tmpl, sizeof(tmpl) - 1, "chat"), 0, "compile a chat template");
	is_int(nf_jinja_render_chat(&out, &len, t, msgs, "<s>", "</s>", true, 1 << 20), 0, "render_chat");
	is_str(out, "<s><user>hi</s><assistant>", "render_chat passes the tokens and the flag");
	is_int(len, strlen("<s><user>hi</s><assistant>"), "length returned");
	free(out);
	is_int(nf_jinja_render_chat(&out, &len, t, msgs, NULL, NULL, false, 1 << 20), 0, "no tokens");
	is_str(out, "<user>hi", "NULL tokens render as empty");
	free(out);
	json_t *not_obj = json_array();
	is_int(nf_jinja_render(&out, &len, t, not_obj, 100), NF_EINPUT, "a context that is not an object");
	ok(out == NULL, "no output on error");
	json_decref(not_obj);
	json_decref(msgs);
	nf_jinja_free(t);
}

int main(void)
{
	test_basics();
	test_whitespace();
	test_statements();
	test_expressions();
	test_undefined();
	test_methods_filters();
	test_errors();
	test_limits();
	test_chat();
	return done_testing();
}
