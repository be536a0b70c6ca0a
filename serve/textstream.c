/*
 * textstream.c - stop strings and the hold-back that streaming needs.
 */
#include "serve/textstream.h"

#include <stdlib.h>
#include <string.h>

#include "serve/sbuf.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

void nf_textstream_init(nf_textstream *t, char *const *stops, size_t n_stops, size_t max)
{
	memset(t, 0, sizeof *t);
	t->stops = stops;
	t->n_stops = n_stops;
	t->max = max;
}

void nf_textstream_release(nf_textstream *t)
{
	free(t->buf);
	t->buf = NULL;
	t->len = t->cap = t->released = 0;
}

int nf_textstream_push(nf_textstream *t, const char *piece, size_t len)
{
	size_t need, from, cut = (size_t)-1;
	if (t->stopped)
		return 1;
	if (!nf_size_add(&need, t->len, len) || !nf_size_add(&need, need, 1) || need > t->max)
		return nf_error_set(NF_EINPUT, "generated text exceeds %zu bytes", t->max);
	if (need > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		char *p;
		while (cap < need)
			cap *= 2;
		if (!(p = realloc(t->buf, cap)))
			return nf_error_set(NF_ENOMEM, "out of memory");
		t->buf = p;
		t->cap = cap;
	}
	if (len)
		memcpy(t->buf + t->len, piece, len);
	from = t->len;
	t->len += len;
	t->buf[t->len] = '\0';
	for (size_t i = 0; i < t->n_stops; i++) {
		size_t sl = strlen(t->stops[i]);
		size_t start = from >= sl ? from - sl + 1 : 0;
		if (start < t->released)
			start = t->released;
		for (size_t p = start; p + sl <= t->len && p < cut; p++)
			if (memcmp(t->buf + p, t->stops[i], sl) == 0) {
				cut = p;
				break;
			}
	}
	if (cut != (size_t)-1) {
		t->len = cut;
		t->buf[cut] = '\0';
		t->stopped = 1;
		return 1;
	}
	return 0;
}

size_t nf_textstream_ready(const nf_textstream *t, int final)
{
	size_t avail = t->len - t->released;
	size_t hold = 0;
	if (final || t->stopped)
		return avail;
	/* the longest tail that is a proper prefix of a stop string */
	for (size_t i = 0; i < t->n_stops; i++) {
		size_t sl = strlen(t->stops[i]);
		for (size_t k = sl - 1; k > hold && k > 0; k--)
			if (k <= avail && memcmp(t->buf + t->len - k, t->stops[i], k) == 0) {
				hold = k;
				break;
			}
	}
	avail -= hold;
	avail -= nf_utf8_incomplete_tail(t->buf + t->released, avail);
	return avail;
}
