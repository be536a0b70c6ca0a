/*
 * sbuf.c - capped growable buffer and UTF-8 repair.
 */
#include "serve/sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

void nf_sbuf_init(nf_sbuf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
}

void nf_sbuf_release(nf_sbuf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

static int reserve(nf_sbuf *b, size_t extra)
{
	size_t need, cap;
	char *p;
	if (!nf_size_add(&need, b->len, extra) || !nf_size_add(&need, need, 1) || need - 1 > b->max)
		return nf_error_set(NF_EINPUT, "buffer limit of %zu bytes exceeded", b->max);
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap = cap > ((size_t)-1) / 2 ? need : cap * 2;
	p = realloc(b->data, cap);
	if (!p)
		return nf_error_set(NF_ENOMEM, "out of memory");
	b->data = p;
	b->cap = cap;
	return 0;
}

int nf_sbuf_add(nf_sbuf *b, const void *data, size_t len)
{
	int rc = reserve(b, len);
	if (rc < 0)
		return rc;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

int nf_sbuf_adds(nf_sbuf *b, const char *s)
{
	return nf_sbuf_add(b, s, strlen(s));
}

int nf_sbuf_printf(nf_sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n, rc;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return nf_error_set(NF_EINTERNAL, "bad format");
	if ((rc = reserve(b, (size_t)n)) < 0)
		return rc;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

char *nf_sbuf_detach(nf_sbuf *b, size_t *len)
{
	char *p = b->data;
	if (!p)
		p = calloc(1, 1);
	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid, or
 * -(needed) if it is a valid prefix cut off by the end. */
static int seq_len(const unsigned char *s, size_t avail)
{
	unsigned c = s[0];
	int n;
	unsigned min;
	unsigned cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		n = 2, min = 0x80, cp = c & 0x1F;
	else if (c >= 0xE0 && c <= 0xEF)
		n = 3, min = 0x800, cp = c & 0x0F;
	else if (c >= 0xF0 && c <= 0xF4)
		n = 4, min = 0x10000, cp = c & 0x07;
	else
		return 0;
	for (int i = 1; i < n; i++) {
		if ((size_t)i >= avail)
			return -n;
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
		/* reject overlongs and surrogates as early as the second byte allows */
		if (i == 1 && n == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F)))
			return 0;
		if (i == 1 && n == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F)))
			return 0;
	}
	if (cp < min || cp > 0x10FFFF)
		return 0;
	return n;
}

int nf_sbuf_add_utf8(nf_sbuf *b, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, start = 0;
	int rc;
	while (i < len) {
		int n = seq_len(p + i, len - i);
		if (n > 0) {
			i += (size_t)n;
			continue;
		}
		if ((rc = nf_sbuf_add(b, s + start, i - start)) < 0 ||
		    (rc = nf_sbuf_add(b, "\xEF\xBF\xBD", 3)) < 0)
			return rc;
		i++;
		start = i;
	}
	return nf_sbuf_add(b, s + start, i - start);
}

size_t nf_utf8_incomplete_tail(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t k = 1; k <= 3 && k <= len; k++) {
		unsigned c = p[len - k];
		if ((c & 0xC0) == 0x80)
			continue; /* continuation byte: look further back */
		if (c >= 0xC2 && c <= 0xF4 && seq_len(p + len - k, k) < 0)
			return k;
		return 0;
	}
	return 0;
}
