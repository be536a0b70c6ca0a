/*
 * grammar_json.c - JSON's lexical pieces as NFA fragments: bounded
 * whitespace, strings (one code point per repetition, so minLength and
 * maxLength count characters as validators do), integers and numbers in
 * ranges, and any value nested to a bounded depth (json_object, {}).
 *
 * Bounds that keep every answer finite: an integer has at most 18 digits,
 * a fraction at most 16, an exponent at most 2; `max_string` caps strings
 * the schema leaves unbounded.
 */
#include "engine/grammar_int.h"

#include "util/banned.h"

gr_frag gr_json_ws(gr_json *j)
{
	gr_nfa *n = j->nfa;
	if (j->ws == NF_GRAMMAR_WS_NONE)
		return gr_empty(n);
	gr_frag f = gr_opt(n, gr_lit(n, " ", 1));
	if (j->ws == NF_GRAMMAR_WS_NEWLINE) {
		int32_t in = gr_state(n), out = gr_state(n);
		gr_frag nl = gr_lit(n, "\n", 1);
		int32_t cur = nl.out;
		for (int i = 0; i < 16; i++) {
			int32_t next = gr_state(n);
			gr_eps(n, cur, out);
			gr_range(n, cur, next, ' ', ' ');
			cur = next;
		}
		gr_eps(n, cur, out);
		gr_eps(n, in, nl.in);
		f = gr_alt(n, f, (gr_frag){in, out});
	}
	return f;
}

static gr_frag hex_digit(gr_nfa *n, int32_t a, int32_t b)
{
	gr_range(n, a, b, '0', '9');
	gr_range(n, a, b, 'a', 'f');
	gr_range(n, a, b, 'A', 'F');
	return (gr_frag){a, b};
}

/* \uXXXX of a code point that is not a surrogate (D800-DFFF), so that every
 * escape stands for exactly one character. */
static gr_frag unicode_escape(gr_nfa *n, int32_t in, int32_t out)
{
	int32_t a = gr_state(n), b = gr_state(n), rest1 = gr_state(n), rest2 = gr_state(n);
	gr_range(n, in, a, '\\', '\\');
	gr_range(n, a, b, 'u', 'u');
	/* first digit not d/D: any three more (rest1: one digit read, rest2: two) */
	gr_range(n, b, rest1, '0', '9');
	gr_range(n, b, rest1, 'a', 'c');
	gr_range(n, b, rest1, 'A', 'C');
	gr_range(n, b, rest1, 'e', 'f');
	gr_range(n, b, rest1, 'E', 'F');
	/* d/D then 0-7: below D800 */
	int32_t d = gr_state(n);
	gr_range(n, b, d, 'd', 'd');
	gr_range(n, b, d, 'D', 'D');
	gr_range(n, d, rest2, '0', '7');
	int32_t y = gr_state(n);
	hex_digit(n, rest1, rest2);
	hex_digit(n, rest2, y);
	hex_digit(n, y, out);
	return (gr_frag){in, out};
}

gr_frag gr_json_string_char(gr_nfa *n, void *ctx)
{
	(void)ctx;
	gr_frag u = gr_utf8_char(n, false);
	int32_t in = u.in, out = u.out;
	gr_range(n, in, out, 0x20, 0x21);
	gr_range(n, in, out, 0x23, 0x5B);
	gr_range(n, in, out, 0x5D, 0x7F);
	int32_t esc = gr_state(n);
	gr_range(n, in, esc, '\\', '\\');
	const char *simple = "\"\\/bfnrt";
	for (const char *c = simple; *c; c++)
		gr_range(n, esc, out, (uint8_t)*c, (uint8_t)*c);
	unicode_escape(n, in, out);
	return (gr_frag){in, out};
}

gr_frag gr_json_string(gr_json *j, int min, int max)
{
	gr_nfa *n = j->nfa;
	if (max < 0 && j->max_string > 0)
		max = j->max_string > min ? j->max_string : min;
	gr_frag body = gr_repeat(n, gr_json_string_char, NULL, min, max);
	return gr_cat(n, gr_cat(n, gr_lit(n, "\"", 1), body), gr_lit(n, "\"", 1));
}

static gr_frag digit(gr_nfa *n, void *ctx);

/* [1-9][0-9]{0,17}: the positive integers of at most 18 digits. */
static gr_frag positive(gr_nfa *n)
{
	return gr_cat(n, gr_bytes(n, '1', '9'), gr_repeat(n, digit, NULL, 0, 17));
}

gr_frag gr_json_int_range(gr_json *j, int64_t lo, int64_t hi)
{
	gr_nfa *n = j->nfa;
	gr_frag f = gr_never(n);
	if (lo == -GR_INT_LIMIT && hi == GR_INT_LIMIT) {
		/* unbounded: the plain pattern is the same language, far smaller */
		f = gr_cat(n, gr_opt(n, gr_lit(n, "-", 1)), positive(n));
		return gr_alt(n, f, gr_lit(n, "0", 1));
	}
	if (lo < 0) {
		/* magnitudes of the negatives, canonical: "-0" is not an integer we write */
		uint64_t mag_lo = hi < 0 ? (uint64_t)(-hi) : 1, mag_hi = (uint64_t)(-lo);
		f = gr_alt(n, f, gr_cat(n, gr_lit(n, "-", 1), gr_uint_range(n, mag_lo, mag_hi)));
	}
	if (hi >= 0)
		f = gr_alt(n, f, gr_uint_range(n, (uint64_t)(lo > 0 ? lo : 0), (uint64_t)hi));
	return f;
}

static gr_frag digit(gr_nfa *n, void *ctx)
{
	(void)ctx;
	return gr_bytes(n, '0', '9');
}

static gr_frag zero(gr_nfa *n, void *ctx)
{
	(void)ctx;
	return gr_lit(n, "0", 1);
}

static gr_frag fraction(gr_nfa *n, gr_emit_fn each)
{
	return gr_cat(n, gr_lit(n, ".", 1), gr_repeat(n, each, NULL, 1, 16));
}

/* Magnitudes m in [a, b] written as I or I.F: I in [a, b - 1] with any
 * fraction, or I = b with a fraction of zeros only. */
static gr_frag magnitude_range(gr_nfa *n, uint64_t a, uint64_t b)
{
	gr_frag f = gr_never(n);
	if (a < b)
		f = gr_alt(n, f, gr_cat(n, gr_uint_range(n, a, b - 1), gr_opt(n, fraction(n, digit))));
	return gr_alt(n, f, gr_cat(n, gr_uint_range(n, b, b), gr_opt(n, fraction(n, zero))));
}

gr_frag gr_json_number_range(gr_json *j, int64_t lo, int64_t hi)
{
	gr_nfa *n = j->nfa;
	gr_frag f = gr_never(n);
	if (lo < 0) {
		uint64_t c = hi < 0 ? (uint64_t)(-hi) : 0, d = (uint64_t)(-lo);
		f = gr_alt(n, f, gr_cat(n, gr_lit(n, "-", 1), magnitude_range(n, c, d)));
	}
	if (hi >= 0)
		f = gr_alt(n, f, magnitude_range(n, (uint64_t)(lo > 0 ? lo : 0), (uint64_t)hi));
	return f;
}

gr_frag gr_json_number(gr_json *j)
{
	gr_nfa *n = j->nfa;
	/* -?(0|[1-9][0-9]{0,17})(.[0-9]{1,16})?, written plainly rather than
	 * as a range: the same language, a fraction of the states */
	gr_frag f = gr_alt(n, gr_lit(n, "0", 1), positive(n));
	f = gr_cat(n, gr_opt(n, gr_lit(n, "-", 1)), f);
	f = gr_cat(n, f, gr_opt(n, fraction(n, digit)));
	gr_frag e = gr_bytes(n, 'e', 'e');
	gr_range(n, e.in, e.out, 'E', 'E');
	gr_frag sign = gr_bytes(n, '+', '+');
	gr_range(n, sign.in, sign.out, '-', '-');
	e = gr_cat(n, gr_cat(n, e, gr_opt(n, sign)), gr_repeat(n, digit, NULL, 1, 2));
	return gr_cat(n, f, gr_opt(n, e));
}

static gr_frag scalar(gr_json *j)
{
	gr_nfa *n = j->nfa;
	gr_frag f = gr_json_string(j, 0, -1);
	f = gr_alt(n, f, gr_json_number(j));
	f = gr_alt(n, f, gr_lit(n, "true", 4));
	f = gr_alt(n, f, gr_lit(n, "false", 5));
	return gr_alt(n, f, gr_lit(n, "null", 4));
}

gr_frag gr_json_value(gr_json *j, int depth)
{
	gr_frag f = scalar(j);
	if (depth > 0) {
		f = gr_alt(j->nfa, f, gr_json_object(j, depth));
		f = gr_alt(j->nfa, f, gr_json_array(j, depth));
	}
	return f;
}

/* Separators and items of the untyped containers. */
typedef struct any_ctx {
	gr_json *j;
	int depth;
} any_ctx;

static gr_frag comma(gr_nfa *n, void *ctx)
{
	any_ctx *a = ctx;
	return gr_cat(n, gr_lit(n, ",", 1), gr_json_ws(a->j));
}

static gr_frag member(gr_nfa *n, void *ctx)
{
	any_ctx *a = ctx;
	gr_frag f = gr_cat(n, gr_json_string(a->j, 0, -1), gr_lit(n, ":", 1));
	f = gr_cat(n, f, gr_json_ws(a->j));
	return gr_cat(n, f, gr_json_value(a->j, a->depth - 1));
}

static gr_frag item(gr_nfa *n, void *ctx)
{
	any_ctx *a = ctx;
	return gr_json_value(a->j, a->depth - 1);
}

static gr_frag container(gr_json *j, int depth, const char *open, const char *close,
			 gr_emit_fn each)
{
	gr_nfa *n = j->nfa;
	any_ctx a = {j, depth};
	gr_frag f = gr_cat(n, gr_lit(n, open, 1), gr_json_ws(j));
	f = gr_cat(n, f, gr_repeat_sep(n, each, &a, comma, 0, -1));
	f = gr_cat(n, f, gr_json_ws(j));
	return gr_cat(n, f, gr_lit(n, close, 1));
}

gr_frag gr_json_object(gr_json *j, int depth)
{
	return container(j, depth, "{", "}", member);
}

gr_frag gr_json_array(gr_json *j, int depth)
{
	return container(j, depth, "[", "]", item);
}
