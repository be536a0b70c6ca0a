/* escape.c - UTF-8 cleaning and XML / TAP escaping (see escape.h). */
#include "factory/escape.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/banned.h"

typedef struct sbuf {
	char *p;
	size_t len, cap;
	int failed;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
	size_t need;
	if (b->failed)
		return;
	if (!nf_size_add(&need, b->len, n) || !nf_size_add(&need, need, 1)) {
		b->failed = 1;
		return;
	}
	if (need > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < need) {
			if (!nf_size_mul(&cap, cap, 2)) {
				b->failed = 1;
				return;
			}
		}
		char *p = realloc(b->p, cap);
		if (!p) {
			b->failed = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static char *sb_finish(sbuf *b)
{
	sb_put(b, "", 0);
	if (b->failed) {
		free(b->p);
		return NULL;
	}
	return b->p;
}

/*
 * Decode one code point from s (n > 0 bytes left).  Returns the bytes
 * consumed (at least 1); *cp is 0xFFFD for anything that is not well-formed
 * UTF-8 (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF).
 */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
	uint32_t c = s[0], min;
	size_t need, i;

	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if ((c & 0xE0) == 0xC0) {
		need = 1, c &= 0x1F, min = 0x80;
	} else if ((c & 0xF0) == 0xE0) {
		need = 2, c &= 0x0F, min = 0x800;
	} else if ((c & 0xF8) == 0xF0) {
		need = 3, c &= 0x07, min = 0x10000;
	} else {
		*cp = 0xFFFD;
		return 1;
	}
	if (n <= need) {
		*cp = 0xFFFD;
		return 1;
	}
	for (i = 1; i <= need; i++) {
		if ((s[i] & 0xC0) != 0x80) {
			*cp = 0xFFFD;
			return 1;
		}
		c = (c << 6) | (s[i] & 0x3F);
	}
	if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
		*cp = 0xFFFD;
		return 1;
	}
	*cp = c;
	return need + 1;
}

static void sb_cp(sbuf *b, uint32_t c)
{
	char u[4];
	if (c < 0x80) {
		u[0] = (char)c;
		sb_put(b, u, 1);
	} else if (c < 0x800) {
		u[0] = (char)(0xC0 | (c >> 6));
		u[1] = (char)(0x80 | (c & 0x3F));
		sb_put(b, u, 2);
	} else if (c < 0x10000) {
		u[0] = (char)(0xE0 | (c >> 12));
		u[1] = (char)(0x80 | ((c >> 6) & 0x3F));
		u[2] = (char)(0x80 | (c & 0x3F));
		sb_put(b, u, 3);
	} else {
		u[0] = (char)(0xF0 | (c >> 18));
		u[1] = (char)(0x80 | ((c >> 12) & 0x3F));
		u[2] = (char)(0x80 | ((c >> 6) & 0x3F));
		u[3] = (char)(0x80 | (c & 0x3F));
		sb_put(b, u, 4);
	}
}

char *nf_escape_utf8(const char *s, size_t len)
{
	sbuf b = {0};
	const unsigned char *u = (const unsigned char *)(s ? s : "");
	size_t i = 0;

	if (!s)
		len = 0;
	while (i < len) {
		uint32_t c;
		size_t k = utf8_next(u + i, len - i, &c);
		sb_cp(&b, c == 0 ? 0xFFFD : c);
		i += k;
	}
	return sb_finish(&b);
}

char *nf_escape_xml(const char *s, int attr)
{
	sbuf b = {0};
	const unsigned char *u = (const unsigned char *)(s ? s : "");
	size_t len = strlen((const char *)u), i = 0;

	while (i < len) {
		uint32_t c;
		i += utf8_next(u + i, len - i, &c);
		switch (c) {
		case '&': sb_put(&b, "&amp;", 5); break;
		case '<': sb_put(&b, "&lt;", 4); break;
		case '>': sb_put(&b, "&gt;", 4); break;
		case '"': sb_put(&b, "&quot;", 6); break;
		case '\'': sb_put(&b, "&apos;", 6); break;
		case '\t':
			if (attr)
				sb_put(&b, "&#9;", 4);
			else
				sb_cp(&b, c);
			break;
		case '\n':
			if (attr)
				sb_put(&b, "&#10;", 5);
			else
				sb_cp(&b, c);
			break;
		case '\r': sb_put(&b, "&#13;", 5); break;
		default:
			/* XML 1.0 Char: no C0 controls but the three above, no
			 * U+FFFE/U+FFFF; drop DEL and C1 controls too. */
			if (c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0xFFFE || c == 0xFFFF)
				break;
			sb_cp(&b, c);
		}
	}
	return sb_finish(&b);
}

char *nf_escape_tap(const char *s)
{
	sbuf b = {0};
	const unsigned char *u = (const unsigned char *)(s ? s : "");
	size_t len = strlen((const char *)u), i = 0;

	while (i < len) {
		uint32_t c;
		i += utf8_next(u + i, len - i, &c);
		if (c < 0x20 || c == 0x7F)
			sb_put(&b, " ", 1);
		else if (c == '#')
			sb_put(&b, "\\#", 2);
		else if (c == '\\')
			sb_put(&b, "\\\\", 2);
		else
			sb_cp(&b, c);
	}
	return sb_finish(&b);
}
