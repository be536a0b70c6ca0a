/*
 * tok_unicode.c - what the tokenizer needs to know about Unicode beyond
 * UTF-8, taken from libunistring rather than tables of our own: the NFC,
 * NFD, NFKC and NFKD normalizers, Lowercase and Strip as Hugging Face
 * defines them, and the character classes of its added-token matching
 * (White_Space for lstrip/rstrip, regex's word characters for single_word).
 * Text that is not UTF-8 is handled run by run: stray bytes are copied
 * through unchanged and are neither space nor word.
 */
#include "engine/tok_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unicase.h>
#include <unictype.h>
#include <uninorm.h>
#include <unistr.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

/* A growing output string (always NUL-terminated once anything is in it). */
typedef struct obuf {
	char *p;
	size_t n, cap;
} obuf;

static int obuf_add(obuf *b, const void *s, size_t len)
{
	size_t need;
	if (!nf_size_add(&need, b->n, len + 1))
		return nf_error_set(NF_ENOMEM, "encode: out of memory");
	if (need > b->cap) {
		size_t nc = b->cap ? b->cap : 64;
		char *p;
		while (nc < need)
			if (!nf_size_mul(&nc, nc, 2))
				return nf_error_set(NF_ENOMEM, "encode: out of memory");
		if (!(p = realloc(b->p, nc)))
			return nf_error_set(NF_ENOMEM, "encode: out of memory");
		b->p = p;
		b->cap = nc;
	}
	if (len)
		memcpy(b->p + b->n, s, len);
	b->n += len;
	b->p[b->n] = '\0';
	return 0;
}

/* Length of the valid UTF-8 run at the start of s[0..len). */
static size_t valid_run(const char *s, size_t len)
{
	size_t i = 0, cl;
	while (i < len && (cl = tok_utf8_len(s + i, len - i)))
		i += cl;
	return i;
}

/* fn over each valid run of s, the stray bytes between copied as they are.
 * Normalizing runs apart is exact: a stray byte starts no composition. */
static int by_runs(const char *s, size_t len, char **out, size_t *out_len,
		   int (*fn)(obuf *b, const char *run, size_t n, const void *arg), const void *arg)
{
	obuf b = {0};
	size_t i = 0;
	int err = obuf_add(&b, "", 0);
	while (!err && i < len) {
		size_t r = valid_run(s + i, len - i);
		if (r && (err = fn(&b, s + i, r, arg)))
			break;
		i += r;
		if (i < len)
			err = obuf_add(&b, s + i++, 1);
	}
	if (err) {
		free(b.p);
		return err;
	}
	*out = b.p;
	*out_len = b.n;
	return 0;
}

static int norm_run(obuf *b, const char *s, size_t n, const void *arg)
{
	size_t rl = 0;
	uint8_t *r = u8_normalize(*(const uninorm_t *)arg, (const uint8_t *)s, n, NULL, &rl);
	int err;
	if (!r)
		return nf_error_set(NF_ENOMEM, "encode: Unicode normalization failed");
	err = obuf_add(b, r, rl);
	free(r);
	return err;
}

/* Rust's char::to_lowercase, which Hugging Face applies character by
 * character: the full mapping (U+0130 -> "i\u0307"), but no context, so a
 * final sigma stays σ.  u8_tolower on one character at a time gives exactly
 * that (a lone Σ has no cased letter before it). */
static int lower_run(obuf *b, const char *s, size_t n, const void *arg)
{
	for (size_t i = 0; i < n;) {
		size_t cl = tok_utf8_len(s + i, n - i), rl = 16;
		uint8_t buf[16], *r;
		int err;
		if ((unsigned char)s[i] < 0x80) { /* the common case, without a call */
			char c = s[i] >= 'A' && s[i] <= 'Z' ? (char)(s[i] - 'A' + 'a') : s[i];
			if ((err = obuf_add(b, &c, 1)))
				return err;
			i++;
			continue;
		}
		r = u8_tolower((const uint8_t *)s + i, cl, NULL, NULL, buf, &rl);
		if (!r)
			return nf_error_set(NF_ENOMEM, "encode: lowercasing failed");
		err = obuf_add(b, r, rl);
		if (r != buf)
			free(r);
		if (err)
			return err;
		i += cl;
	}
	return 0;
}

int tok_unicode_normalize(int kind, const char *s, size_t len, char **out, size_t *out_len)
{
	uninorm_t nf = kind == NORM_NFC ? UNINORM_NFC : kind == NORM_NFD ? UNINORM_NFD :
		       kind == NORM_NFKC ? UNINORM_NFKC : UNINORM_NFKD;
	return by_runs(s, len, out, out_len, norm_run, &nf);
}

int tok_unicode_lower(const char *s, size_t len, char **out, size_t *out_len)
{
	return by_runs(s, len, out, out_len, lower_run, NULL);
}

/* ------------------------------------------------------- character classes */

/* The code point ending at s[at], or -1 (at the start, or not UTF-8). */
static long cp_before(const char *s, size_t at, size_t *start)
{
	ucs4_t c;
	const uint8_t *p = at ? u8_prev(&c, (const uint8_t *)s + at, (const uint8_t *)s) : NULL;
	if (!p)
		return -1;
	*start = (size_t)(p - (const uint8_t *)s);
	return (long)c;
}

/* The code point at s[at], or -1 (at the end, or not UTF-8). */
static long cp_at(const char *s, size_t len, size_t at, size_t *cl)
{
	ucs4_t c;
	int n = at < len ? u8_mbtoucr(&c, (const uint8_t *)s + at, len - at) : -1;
	if (n <= 0)
		return -1;
	*cl = (size_t)n;
	return (long)c;
}

/* Rust's char::is_whitespace: the White_Space property. */
static bool is_space(long c)
{
	return c >= 0 && uc_is_property_white_space((ucs4_t)c);
}

/* regex-syntax's word character (\w): alphabetic, marks, decimal digits,
 * connector punctuation, join controls. */
static bool is_word(long c)
{
	ucs4_t u = (ucs4_t)c;
	return c >= 0 && (uc_is_property_alphabetic(u) || uc_is_general_category(u, UC_CATEGORY_M) ||
			  uc_is_general_category(u, UC_CATEGORY_Nd) ||
			  uc_is_general_category(u, UC_CATEGORY_Pc) || uc_is_property_join_control(u));
}

size_t tok_space_before(const char *s, size_t at)
{
	size_t p;
	while (is_space(cp_before(s, at, &p)))
		at = p;
	return at;
}

size_t tok_space_after(const char *s, size_t len, size_t at)
{
	size_t cl;
	while (is_space(cp_at(s, len, at, &cl)))
		at += cl;
	return at;
}

bool tok_word_before(const char *s, size_t at)
{
	size_t p;
	return is_word(cp_before(s, at, &p));
}

bool tok_word_at(const char *s, size_t len, size_t at)
{
	size_t cl;
	return is_word(cp_at(s, len, at, &cl));
}
