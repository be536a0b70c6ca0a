/*
 * sbuf.h - a growable byte buffer with a hard size cap, for building HTTP
 * bodies, prompts and Prometheus text.  Always NUL-terminated.
 */
#ifndef NF_SERVE_SBUF_H
#define NF_SERVE_SBUF_H

#include <stddef.h>

typedef struct nf_sbuf {
	char *data; /* owned; NULL until the first append */
	size_t len;
	size_t cap;
	size_t max; /* appends past this fail with NF_EINPUT */
} nf_sbuf;

void nf_sbuf_init(nf_sbuf *b, size_t max);
void nf_sbuf_release(nf_sbuf *b); /* frees data; the buffer can be reused after init */
int nf_sbuf_add(nf_sbuf *b, const void *data, size_t len);
int nf_sbuf_adds(nf_sbuf *b, const char *s);
int nf_sbuf_printf(nf_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hand the bytes to the caller (free()); the buffer is empty afterwards. */
char *nf_sbuf_detach(nf_sbuf *b, size_t *len);

/* Append bytes as valid UTF-8, each invalid byte replaced by U+FFFD. */
int nf_sbuf_add_utf8(nf_sbuf *b, const char *s, size_t len);
/* Bytes at the end of s[0..len) that start a UTF-8 sequence not yet complete (0..3). */
size_t nf_utf8_incomplete_tail(const char *s, size_t len);

#endif
