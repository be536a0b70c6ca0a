/*
 * test_grammar.c - the grammar engine (engine/grammar.h): compile errors say
 * where (the regex offset, the schema's JSON pointer); every construct
 * accepts what it should and rejects the rest (integer ranges exhaustively);
 * and on a small handmade vocabulary the token masks are exactly the tokens
 * that continue a prefix of some sentence, checked against finite languages
 * listed by hand, at every state a depth-first walk reaches.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/grammar.h"
#include "engine/logit_mask.h"
#include "tests/tap.h"
#include "util/error.h"

/* ------------------------------------------------ helpers */

static nf_grammar *schema(const char *text, const nf_grammar_opts *o)
{
	nf_grammar *g = NULL;
	if (nf_grammar_from_schema_text(&g, text, strlen(text), o))
		printf("# schema failed: %s\n", nf_error_last());
	return g;
}

static nf_grammar *regex(const char *re)
{
	nf_grammar *g = NULL;
	if (nf_grammar_from_regex(&g, re, strlen(re), NULL))
		printf("# regex failed: %s\n", nf_error_last());
	return g;
}

static bool matches(nf_grammar *g, const char *s)
{
	bool m = false;
	return g && nf_grammar_match(g, s, strlen(s), &m) == 0 && m;
}

/* Every string of `yes` matches, none of `no` does. */
static void accepts(nf_grammar *g, const char *what, const char *const *yes, const char *const *no)
{
	int bad = 0;
	for (; yes && *yes; yes++)
		if (!matches(g, *yes)) {
			printf("#   should match: %s\n", *yes);
			bad++;
		}
	for (; no && *no; no++)
		if (matches(g, *no)) {
			printf("#   should not match: %s\n", *no);
			bad++;
		}
	ok(g && bad == 0, "%s: accepts and rejects as it should", what);
}

static void compile_error(int err, const char *what, const char *want)
{
	const char *msg = nf_error_last();
	ok(err == NF_EINPUT && strstr(msg, want), "%s: NF_EINPUT naming '%s' (%s)", what, want, msg);
}

/* ------------------------------------------------ errors */

static void regex_errors(void)
{
	static const struct {
		const char *re, *want;
	} cases[] = {
		{"a(b", "at 1: the group is not closed"},
		{"ab)", "at 2: an unmatched ')'"},
		{"a{3,1}", "at 1: the repetition's bounds are out of order"},
		{"x\\1", "at 1: backreferences"},
		{"[z-a]", "at 3: the range is out of order"},
		{"(?=a)", "at 0: lookaround"},
		{"a|*b", "at 2: a quantifier follows nothing"},
		{"a$b", "at 1: an anchor"},
		{"[abc", "at 0: the class is not closed"},
		{"a{2000}", "above 1000"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		nf_grammar *g = NULL;
		int err = nf_grammar_from_regex(&g, cases[i].re, strlen(cases[i].re), NULL);
		compile_error(err, cases[i].re, cases[i].want);
		ok(g == NULL, "%s: no grammar", cases[i].re);
	}
}

static void schema_errors(void)
{
	static const struct {
		const char *schema, *want;
	} cases[] = {
		{"{\"type\":\"object\",\"properties\":{\"a/b\":{\"type\":\"string\",\"uniqueItems\":true}}}",
		 "/properties/a~1b/uniqueItems: the keyword uniqueItems is not supported"},
		{"{\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"x(y\"}}}",
		 "schema: /properties/a/pattern: regex: at 1: the group is not closed"},
		{"{\"type\":\"string\",\"pattern\":\"x\",\"maxLength\":3}", "/pattern: pattern with minLength"},
		{"{\"$ref\":\"#/$defs/missing\"}", "/$ref: cannot resolve #/$defs/missing"},
		{"{\"type\":\"integer\",\"minimum\":5,\"maximum\":3}", "/: the bounds hold no integer"},
		{"{\"properties\":{\"a\":{}},\"required\":[\"a\",\"b\"]}", "/required/1: b is not one"},
		{"{\"type\":\"array\",\"items\":{\"type\":\"strin\"}}", "/items/type: unknown type strin"},
		{"{\"anyOf\":[{\"type\":\"null\"},{\"maxLength\":-1}]}", "/anyOf/1/maxLength: maxLength must be"},
		{"{\"type\": \"object\",}", "schema: 1:"},
		{"{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#/$defs/n\"}},"
		 "\"required\":[\"n\"]}},\"$ref\":\"#/$defs/n\"}",
		 "no string satisfies it"},
		{"{\"allOf\":[{\"type\":\"null\"},{\"type\":\"null\"}]}", "/allOf: allOf is supported with one"},
		{"{\"type\":\"string\",\"enum\":[1,2]}", "/enum: no value is of the schema's type"},
		{"{\"type\":\"string\",\"const\":true}", "/const: the value is not of the schema's type"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		nf_grammar *g = NULL;
		int err = nf_grammar_from_schema_text(&g, cases[i].schema, strlen(cases[i].schema), NULL);
		compile_error(err, cases[i].schema, cases[i].want);
		nf_grammar_free(g);
	}
	nf_grammar *g = NULL;
	int err = nf_grammar_from_choices(&g, NULL, NULL, 0, NULL);
	compile_error(err, "no choices", "the list is empty");
}

/* ------------------------------------------------ constructs */

static void regex_constructs(void)
{
	nf_grammar *g = regex("[a-c]+x?");
	accepts(g, "class, +, ?", (const char *[]){"abx", "c", "cba", NULL},
		(const char *[]){"", "abxx", "d", "x", NULL});
	nf_grammar_free(g);
	g = regex("^\\d{2,3}-\\w*\\s?$");
	accepts(g, "\\d{2,3} \\w* \\s?", (const char *[]){"12-", "123-a_Z9", "99-x\t", NULL},
		(const char *[]){"1-", "1234-", "12-a-", "12-ab  ", NULL});
	nf_grammar_free(g);
	g = regex("(ab|cd)*(?:e|)");
	accepts(g, "groups, | and *", (const char *[]){"", "abcd", "cdabe", "e", NULL},
		(const char *[]){"abc", "ee", "ba", NULL});
	nf_grammar_free(g);
	g = regex(".[^a]\\.");
	accepts(g, ". and [^a] take any UTF-8 character", (const char *[]){"xb.", "\xc3\xa9\xe2\x82\xac.", "ab.", NULL},
		(const char *[]){"\nb.", "xa.", "xb", "\xc3x.", "\xed\xa0\x80x.", NULL});
	nf_grammar_free(g);
	g = regex("caf\xc3\xa9+{1,2}");
	accepts(g, "a UTF-8 literal is repeated whole", (const char *[]){"caf\xc3\xa9", "caf\xc3\xa9\xc3\xa9", NULL},
		(const char *[]){"caf\xc3\xa9\xa9", "caf", NULL});
	nf_grammar_free(g);
	g = regex("a{3}b{2,}c{0,1}");
	accepts(g, "{m} {m,} {m,n}", (const char *[]){"aaabb", "aaabbbbbc", NULL},
		(const char *[]){"aabb", "aaab", "aaabbcc", NULL});
	nf_grammar_free(g);

	const char *list[] = {"yes", "no", "maybe", ""};
	g = NULL;
	ok(nf_grammar_from_choices(&g, list, NULL, 4, NULL) == 0, "choices compile");
	accepts(g, "choices", (const char *[]){"yes", "no", "maybe", "", NULL},
		(const char *[]){"ye", "yesno", "Yes", NULL});
	nf_grammar_free(g);
}

/* Every integer in [-2000, 2000] is accepted exactly when in [lo, hi]. */
static void integer_range(int lo, int hi)
{
	char text[160];
	snprintf(text, sizeof text, "{\"type\":\"integer\",\"minimum\":%d,\"maximum\":%d}", lo, hi);
	nf_grammar *g = schema(text, NULL);
	int bad = 0;
	for (int v = -2000; v <= 2000 && g; v++) {
		char s[16];
		snprintf(s, sizeof s, "%d", v);
		if (matches(g, s) != (v >= lo && v <= hi)) {
			if (bad++ < 3)
				printf("#   %s wrongly %s\n", s, matches(g, s) ? "accepted" : "rejected");
		}
	}
	accepts(g, "integer: no leading zeros, no -0", NULL,
		(const char *[]){"-0", "007", "+1", "1.0", "", NULL});
	ok(g && bad == 0, "integer in [%d, %d]: exactly the range among [-2000, 2000]", lo, hi);
	nf_grammar_free(g);
}

static void numbers(void)
{
	integer_range(-15, 123);
	integer_range(7, 1999);
	integer_range(-1000, -10);
	integer_range(0, 0);
	nf_grammar *g = schema("{\"type\":\"integer\",\"exclusiveMinimum\":-3.5,\"exclusiveMaximum\":3}", NULL);
	accepts(g, "exclusive integer bounds", (const char *[]){"-3", "2", NULL}, (const char *[]){"-4", "3", NULL});
	nf_grammar_free(g);
	g = schema("{\"type\":\"number\",\"minimum\":-2,\"maximum\":3}", NULL);
	accepts(g, "number in [-2, 3]",
		(const char *[]){"3", "3.0", "-2.00", "2.999", "-1.5", "0", "-0.25", NULL},
		(const char *[]){"3.01", "-2.1", "4", "1e2", "-3", "3.", NULL});
	nf_grammar_free(g);
	g = schema("{\"type\":\"number\"}", NULL);
	accepts(g, "any number", (const char *[]){"1e5", "-0.5E-3", "0", "123456789012345678", NULL},
		(const char *[]){"01", "1.", ".5", "1e", "--1", "1234567890123456789", NULL});
	nf_grammar_free(g);
}

static void strings(void)
{
	nf_grammar *g = schema("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", NULL);
	accepts(g, "string of 2..3 characters",
		(const char *[]){"\"ab\"", "\"a\\\"b\"", "\"\xc3\xa9\xe2\x82\xacx\"", "\"\\u00e9\\n\"", "\"\\\\/\"", NULL},
		(const char *[]){"\"a\"", "\"abcd\"", "\"ab\\ud800\"", "\"a\nb\"", "\"a\\x\"", "ab", "\"ab", NULL});
	nf_grammar_free(g);
	g = schema("{\"enum\":[\"red\",1,null,{\"x\":[1,2]}]}", NULL);
	accepts(g, "enum", (const char *[]){"\"red\"", "1", "null", "{\"x\":[1,2]}", NULL},
		(const char *[]){"\"blue\"", "2", "\"null\"", NULL});
	nf_grammar_free(g);
	g = schema("{\"type\":[\"string\",\"integer\"],\"enum\":[\"a\",1,2.0,2.5,null]}", NULL);
	accepts(g, "enum values of the schema's type only", (const char *[]){"\"a\"", "1", "2.0", NULL},
		(const char *[]){"2.5", "null", NULL});
	nf_grammar_free(g);
	g = schema("{\"type\":\"string\",\"pattern\":\"^[a-z\\\"\\\\\\\\]{1,3}\\\\n$\"}", NULL);
	accepts(g, "an anchored pattern, written with JSON's escapes",
		(const char *[]){"\"ab\\n\"", "\"\\\"\\\\\\n\"", NULL},
		(const char *[]){"\"ab\n\"", "\"a\"b\\n\"", "\"abcd\\n\"", "\"AB\\n\"", NULL});
	nf_grammar_free(g);
	nf_grammar_opts capped = {.max_string = 2};
	g = schema("{\"pattern\":\"\\\\d-\\\\d\"}", &capped);
	accepts(g, "a pattern is a search: up to max_string characters either side",
		(const char *[]){"\"1-2\"", "\"ab1-2\"", "\"1-2\\\"x\"", NULL},
		(const char *[]){"\"abc1-2\"", "\"1-\"", "3", NULL});
	nf_grammar_free(g);
	g = schema("{\"const\":\"a\\\"b\"}", NULL);
	accepts(g, "const is written as JSON", (const char *[]){"\"a\\\"b\"", NULL}, (const char *[]){"\"ab\"", NULL});
	nf_grammar_free(g);
}

static void objects(void)
{
	nf_grammar *g = schema("{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
			       "\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"},\"c\":{\"type\":\"null\"}},"
			       "\"required\":[\"b\"]}", NULL);
	accepts(g, "required and optional properties",
		(const char *[]){"{\"b\":true}", "{\"a\":1,\"b\":false}", "{\"b\":true,\"c\":null}",
				 "{ \"a\": 1, \"b\": true, \"c\": null }", NULL},
		(const char *[]){"{}", "{\"a\":1}", "{\"b\":true,}", "{\"c\":null,\"b\":true}",
				 "{\"b\":true,\"d\":1}", "{\"b\":  true}", "{\"b\":true", NULL});
	nf_grammar_free(g);
	nf_grammar_opts compact = {.whitespace = NF_GRAMMAR_WS_NONE};
	g = schema("{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"boolean\"}}}", &compact);
	accepts(g, "no whitespace", (const char *[]){"{\"b\":true}", "{}", NULL},
		(const char *[]){"{\"b\": true}", "{ }", NULL});
	nf_grammar_free(g);
	nf_grammar_opts nl = {.whitespace = NF_GRAMMAR_WS_NEWLINE};
	g = schema("{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"boolean\"}}}", &nl);
	accepts(g, "newline and indent", (const char *[]){"{\n  \"b\": true\n}", NULL},
		(const char *[]){"{\n\n\"b\":true}", "{\n                 \"b\":true}", NULL});
	nf_grammar_free(g);
	g = schema("{\"anyOf\":[{\"type\":\"string\",\"maxLength\":1},{\"type\":\"integer\",\"minimum\":0,\"maximum\":9}]}", NULL);
	accepts(g, "anyOf", (const char *[]){"\"a\"", "7", "\"\"", NULL}, (const char *[]){"10", "\"ab\"", NULL});
	nf_grammar_free(g);
	g = schema("{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":3}", NULL);
	accepts(g, "minItems and maxItems", (const char *[]){"[true]", "[true, false,true]", "[ true ]", NULL},
		(const char *[]){"[]", "[true,true,true,true]", "[true,]", NULL});
	nf_grammar_free(g);
	g = schema("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2}", NULL);
	accepts(g, "minItems without maxItems", (const char *[]){"[1,2]", "[1, 2, 3, -4]", NULL},
		(const char *[]){"[1]", "[]", "[1,2,]", NULL});
	nf_grammar_free(g);
	g = schema("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", NULL);
	accepts(g, "additionalProperties as a schema", (const char *[]){"{}", "{\"x\":1,\"y\":-2}", NULL},
		(const char *[]){"{\"x\":true}", NULL});
	nf_grammar_free(g);
}

static void recursion(void)
{
	nf_grammar_opts o = {.max_depth = 2};
	nf_grammar *g = schema("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{"
			       "\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},"
			       "\"required\":[\"v\",\"kids\"]}},\"$ref\":\"#/$defs/node\"}", &o);
	accepts(g, "$ref recursion to max_depth",
		(const char *[]){"{\"v\":1,\"kids\":[]}", "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[]}]}", NULL},
		(const char *[]){"{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3,\"kids\":[]}]}]}", "{\"v\":1}", NULL});
	nf_grammar_free(g);
	g = NULL;
	ok(nf_grammar_from_json_object(&g, &o) == 0, "json_object compiles");
	accepts(g, "json_object nests to max_depth",
		(const char *[]){"{}", "{\"a\":[1,\"x\"]}", "{\"a\":{}}", "{\"a\":\"x\", \"b\":null}", "{\"\":-1.5e3}", NULL},
		(const char *[]){"[]", "{\"a\":}", "{\"a\":[1,{}]}", "{\"a\":01}", "{\"a\":[[1]]}", "{\"a\":{\"b\":{}}}", "\"x\"", NULL});
	nf_grammar_free(g);
	/* one copy of each nested value per level, not two: depth 8 stays small */
	nf_grammar_opts deep = {.max_depth = 8, .max_nfa_states = 200000};
	g = NULL;
	ok(nf_grammar_from_json_object(&g, &deep) == 0, "json_object at depth 8 fits 200000 NFA states");
	accepts(g, "json_object at depth 8", (const char *[]){"{\"a\":[[[[[[[1]]]]]]]}", NULL},
		(const char *[]){"{\"a\":[[[[[[[[1]]]]]]]]}", NULL});
	nf_grammar_free(g);
}

/* ------------------------------------------------ masks */

/* The bytes of each handmade token; EOS is the last id. */
static const char *const vocab_text[] = {
	"{", "}", "\"", "a", "b", "ab", "\"a", "\":", ":", " ", "1", "12", "2", "22", "-", "0",
	",", "true", "tr", "ue", "x\"", "\xc3\xa9", "\xc3", "\xa9", "null", "\"}", "{\"", "\"b\":",
	"fal", "se", "false}", "1,", "2}", "", "y", "es", "yes", "no", "maybe", "ma", "be",
};
#define N_HAND (int)(sizeof vocab_text / sizeof *vocab_text)

static nf_grammar_vocab *hand_vocab(void)
{
	nf_tok_str toks[N_HAND + 1];
	for (int i = 0; i < N_HAND; i++)
		toks[i] = (nf_tok_str){vocab_text[i], strlen(vocab_text[i])};
	toks[N_HAND] = (nf_tok_str){"", 0};
	int eos = N_HAND;
	nf_grammar_vocab *v = NULL;
	if (nf_grammar_vocab_from_bytes(&v, toks, N_HAND + 1, &eos, 1))
		printf("# vocab failed: %s\n", nf_error_last());
	return v;
}

typedef struct walk {
	const char *const *sentences;
	size_t n_sentences;
	const nf_grammar_vocab *v;
	int states, bad;
} walk;

/* Token t may follow text[0, len): EOS when the text is a sentence, else
 * when text + t's bytes begins some sentence. */
static bool expected(const walk *w, const char *text, size_t len, int t)
{
	size_t tl;
	const char *tb = nf_grammar_vocab_bytes(w->v, t, &tl);
	for (size_t i = 0; i < w->n_sentences; i++) {
		const char *s = w->sentences[i];
		size_t sl = strlen(s);
		if (nf_grammar_vocab_is_eog(w->v, t)) {
			if (sl == len && !memcmp(s, text, len))
				return true;
		} else if (tl > 0 && sl >= len + tl && !memcmp(s, text, len) && !memcmp(s + len, tb, tl)) {
			return true;
		}
	}
	return false;
}

static void check_state(walk *w, nf_grammar_state *s, char *text, size_t len, int depth)
{
	uint32_t mask[4];
	size_t n_allowed = 0;
	if (nf_grammar_state_mask(s, mask, &n_allowed)) {
		w->bad++;
		return;
	}
	w->states++;
	size_t count = 0;
	for (int t = 0; t <= N_HAND; t++) {
		bool allowed = mask[t >> 5] >> (t & 31) & 1u;
		count += allowed;
		if (allowed != expected(w, text, len, t) && w->bad++ < 5)
			printf("#   after '%.*s': token %d ('%s') %s\n", (int)len, text, t,
			       t < N_HAND ? vocab_text[t] : "EOS", allowed ? "wrongly allowed" : "wrongly refused");
	}
	if (count != n_allowed)
		w->bad++;
	if (depth == 0)
		return;
	for (int t = 0; t <= N_HAND; t++) {
		nf_grammar_state *next = NULL;
		size_t tl;
		const char *tb = nf_grammar_vocab_bytes(w->v, t, &tl);
		if (!(mask[t >> 5] >> (t & 31) & 1u))
			continue;
		if (nf_grammar_state_clone(&next, s) || nf_grammar_state_advance(next, t)) {
			w->bad++;
			nf_grammar_state_free(next);
			continue;
		}
		if (t == N_HAND) {
			/* after EOS: finished, nothing more */
			uint32_t none[4];
			size_t n = 1;
			if (!nf_grammar_state_finished(next) || nf_grammar_state_mask(next, none, &n) || n != 0)
				w->bad++;
		} else {
			memcpy(text + len, tb, tl);
			check_state(w, next, text, len + tl, depth - 1);
		}
		nf_grammar_state_free(next);
	}
}

/* Walk every token path from the start, depth tokens deep. */
static void mask_walk(nf_grammar *g, const nf_grammar_vocab *v, const char *what,
		      const char *const *sentences, size_t n, int depth)
{
	walk w = {sentences, n, v, 0, 0};
	char text[256];
	nf_grammar_state *s = NULL;
	if (!g || nf_grammar_state_new(&s, g, v)) {
		ok(0, "%s: state", what);
		return;
	}
	check_state(&w, s, text, 0, depth);
	nf_grammar_state_free(s);
	ok(w.bad == 0 && w.states > 3, "%s: the mask is exactly the tokens that continue a sentence "
	   "(%d states)", what, w.states);
}

#define OBJ_SCHEMA "{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[1,22,\"\xc3\xa9\"]}," \
		   "\"b\":{\"type\":\"boolean\"}},\"required\":[\"a\"]}"

static void masks(void)
{
	nf_grammar_vocab *v = hand_vocab();
	const char *choices[] = {"yes", "no", "maybe", "ab", "a"};
	nf_grammar *g = NULL;
	nf_grammar_from_choices(&g, choices, NULL, 5, NULL);
	mask_walk(g, v, "choices", choices, 5, 6);

	/* the state API around the mask */
	nf_grammar_state *s = NULL;
	uint32_t mask[4];
	size_t n = 0;
	ok(nf_grammar_state_new(&s, g, v) == 0 && nf_grammar_state_mask(s, mask, &n) == 0, "a state");
	is_int(nf_grammar_state_advance(s, 0), NF_EINPUT, "a token the mask refuses: NF_EINPUT");
	is_int(nf_grammar_state_advance(s, N_HAND), NF_EINPUT, "EOS before the text is whole: NF_EINPUT");
	is_int(nf_grammar_state_advance(s, 33), NF_EINPUT, "a token of no bytes: NF_EINPUT");
	ok(nf_grammar_state_advance(s, 3) == 0 && nf_grammar_state_accepting(s), "'a' is whole");
	ok(nf_grammar_state_advance(s, 4) == 0 && nf_grammar_state_accepting(s), "'ab' is whole");
	is_int(nf_grammar_state_advance(s, 4), NF_EINPUT, "'abb' is refused");
	ok(nf_grammar_state_advance(s, N_HAND) == 0 && nf_grammar_state_finished(s),
	   "the state was kept: EOS still ends it");
	nf_grammar_state_free(s);
	nf_grammar_vocab *other = hand_vocab();
	is_int(nf_grammar_state_new(&s, g, other), NF_EINPUT, "another vocabulary: NF_EINPUT");
	nf_grammar_vocab_free(other);
	nf_grammar_free(g);

	nf_grammar_opts compact = {.whitespace = NF_GRAMMAR_WS_NONE};
	g = schema(OBJ_SCHEMA, &compact);
	const char *objects[] = {
		"{\"a\":1}", "{\"a\":22}", "{\"a\":\"\xc3\xa9\"}",
		"{\"a\":1,\"b\":true}", "{\"a\":22,\"b\":true}", "{\"a\":\"\xc3\xa9\",\"b\":true}",
		"{\"a\":1,\"b\":false}", "{\"a\":22,\"b\":false}", "{\"a\":\"\xc3\xa9\",\"b\":false}",
	};
	mask_walk(g, v, "schema (enum, required, optional)", objects, 9, 14);
	nf_grammar_free(g);

	/* a one-mask cache: masks evicted and computed again stay right */
	nf_grammar_opts tiny = {.whitespace = NF_GRAMMAR_WS_NONE, .mask_cache_bytes = 16};
	g = schema(OBJ_SCHEMA, &tiny);
	mask_walk(g, v, "schema with a one-mask cache", objects, 9, 14);
	nf_grammar_free(g);
	nf_grammar_vocab_free(v);
}

/* Random patterns over regex syntax: each compiles or is refused with
 * NF_EINPUT (never another code, never a crash under the sanitizers). */
static void regex_noise(void)
{
	static const char alphabet[] = "ab()[]{}|*+?.\\^$-,0123d:";
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	int bad = 0, compiled = 0;
	for (int i = 0; i < 3000; i++) {
		char re[16];
		size_t len = 1 + i % 14;
		for (size_t k = 0; k < len; k++) {
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			re[k] = alphabet[rng % (sizeof alphabet - 1)];
		}
		nf_grammar *g = NULL;
		int err = nf_grammar_from_regex(&g, re, len, NULL);
		bool m;
		if (err && err != NF_EINPUT && bad++ < 3)
			printf("#   %.*s: %s\n", (int)len, re, nf_error_last());
		if (!err) {
			compiled++;
			bad += nf_grammar_match(g, "ab", 2, &m) != 0;
		}
		nf_grammar_free(g);
	}
	ok(bad == 0 && compiled > 100, "3000 random patterns: compiled (%d) or refused with NF_EINPUT", compiled);
}

static void logit_mask(void)
{
	float logits[70];
	uint32_t allowed[3] = {0xffffffffu, 0x00000005u, 0x20u};
	for (int i = 0; i < 70; i++)
		logits[i] = (float)i;
	nf_logit_mask_apply(logits, 70, allowed);
	int bad = 0;
	for (int i = 0; i < 70; i++) {
		bool keep = i < 32 || i == 32 || i == 34 || i == 69;
		if (keep ? logits[i] != (float)i : !(isinf(logits[i]) && logits[i] < 0))
			bad++;
	}
	ok(bad == 0, "nf_logit_mask_apply: allowed logits kept, the others -inf");
}

int main(void)
{
	regex_errors();
	schema_errors();
	regex_constructs();
	numbers();
	strings();
	objects();
	recursion();
	masks();
	regex_noise();
	logit_mask();
	return done_testing();
}
