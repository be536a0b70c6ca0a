/*
 * textstream.h - the text a sequence generates, cut at the first stop
 * string, and released for streaming only when it can no longer turn into a
 * stop string and ends on a whole UTF-8 character.
 */
#ifndef NF_SERVE_TEXTSTREAM_H
#define NF_SERVE_TEXTSTREAM_H

#include <stddef.h>

typedef struct nf_textstream {
	char *buf;          /* owned, NUL-terminated once anything is pushed */
	size_t len, cap;
	size_t max;         /* bytes kept at most; more is NF_EINPUT */
	size_t released;    /* bytes handed out so far */
	char *const *stops; /* borrowed */
	size_t n_stops;
	int stopped;        /* a stop string was found (and cut off) */
} nf_textstream;

void nf_textstream_init(nf_textstream *t, char *const *stops, size_t n_stops, size_t max);
void nf_textstream_release(nf_textstream *t);
/* Append a piece.  Returns 1 when a stop string now appears (the text is cut
 * before it), 0 otherwise, negative on error. */
int nf_textstream_push(nf_textstream *t, const char *piece, size_t len);
/* Bytes from t->buf + t->released that may be sent now (all when final). */
size_t nf_textstream_ready(const nf_textstream *t, int final);

#endif
