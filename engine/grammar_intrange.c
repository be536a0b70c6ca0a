/*
 * grammar_intrange.c - the exact digit automaton of the integers in [a, b]:
 * split by digit count, then per count the classic range-to-regex recursion
 * on the leading digit (a's digit then anything at or above a's rest, the
 * digits strictly between then any digits, b's digit then anything at or
 * below b's rest), with whole free tails collapsed to [0-9]{k}.
 */
#include "engine/grammar_int.h"

#include <stdio.h>
#include <string.h>

#include "util/banned.h"

static gr_frag any_digits(gr_nfa *n, size_t k)
{
	gr_frag f = gr_empty(n);
	for (size_t i = 0; i < k; i++)
		f = gr_cat(n, f, gr_bytes(n, '0', '9'));
	return f;
}

static bool all_of(const char *s, size_t k, char c)
{
	for (size_t i = 0; i < k; i++)
		if (s[i] != c)
			return false;
	return true;
}

/* Digit strings x <= y of the same length k: every string between them. */
static gr_frag same_length(gr_nfa *n, const char *x, const char *y, size_t k)
{
	if (k == 0)
		return gr_empty(n);
	if (all_of(x + 1, k - 1, '0') && all_of(y + 1, k - 1, '9'))
		return gr_cat(n, gr_bytes(n, (uint8_t)x[0], (uint8_t)y[0]), any_digits(n, k - 1));
	if (x[0] == y[0])
		return gr_cat(n, gr_lit(n, x, 1), same_length(n, x + 1, y + 1, k - 1));
	char nines[24], zeros[24];
	memset(nines, '9', sizeof nines);
	memset(zeros, '0', sizeof zeros);
	gr_frag low = gr_cat(n, gr_lit(n, x, 1), same_length(n, x + 1, nines, k - 1));
	gr_frag high = gr_cat(n, gr_lit(n, y, 1), same_length(n, zeros, y + 1, k - 1));
	gr_frag f = gr_alt(n, low, high);
	if (x[0] + 1 <= y[0] - 1)
		f = gr_alt(n, f, gr_cat(n, gr_bytes(n, (uint8_t)(x[0] + 1), (uint8_t)(y[0] - 1)),
					any_digits(n, k - 1)));
	return f;
}

static size_t digits_of(uint64_t v)
{
	size_t d = 1;
	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

gr_frag gr_uint_range(gr_nfa *n, uint64_t a, uint64_t b)
{
	gr_frag f = gr_never(n);
	uint64_t p = 1; /* 10^(k-1) */
	for (size_t k = 1; k < digits_of(a); k++)
		p *= 10;
	for (size_t k = digits_of(a); k <= digits_of(b); k++, p *= 10) {
		uint64_t lo = a > p ? a : (k == 1 ? a : p);
		uint64_t top = k >= 20 ? UINT64_MAX : p * 10 - 1;
		uint64_t hi = b < top ? b : top;
		char x[24], y[24];
		snprintf(x, sizeof x, "%0*llu", (int)k, (unsigned long long)lo);
		snprintf(y, sizeof y, "%0*llu", (int)k, (unsigned long long)hi);
		f = gr_alt(n, f, same_length(n, x, y, k));
	}
	return f;
}
