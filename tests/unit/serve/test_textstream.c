/* test_textstream.c - what streaming releases when a character arrives in
 * pieces: a 4-byte emoji split over one-byte pieces (as byte-fallback
 * tokens produce it) is held back until whole, beside stop strings that
 * begin with it, and every release, as sent through nf_sbuf_add_utf8, is
 * valid UTF-8 whose concatenation is the text. */
#define _GNU_SOURCE
#include <string.h>

#include "serve/sbuf.h"
#include "serve/textstream.h"
#include "tests/tap.h"
#include "util/banned.h"

#define EMOJI "\xf0\x9f\x98\x80" /* U+1F600 */

/* Take what may be sent now into *sent (as the scheduler does); returns its length. */
static size_t take(nf_textstream *t, nf_sbuf *sent, int final)
{
	size_t n = nf_textstream_ready(t, final);
	nf_sbuf_add_utf8(sent, t->buf + t->released, n);
	t->released += n;
	return n;
}

/* 1 when s[0..len) is valid UTF-8 with no U+FFFD in it. */
static int clean_utf8(const char *s, size_t len)
{
	return nf_utf8_incomplete_tail(s, len) == 0 && !memmem(s, len, "\xef\xbf\xbd", 3);
}

int main(void)
{
	nf_textstream t;
	nf_sbuf sent;
	size_t n;
	int whole_only = 1;

	/* one byte per piece, after some text */
	nf_textstream_init(&t, NULL, 0, 1024);
	nf_sbuf_init(&sent, 1024);
	nf_textstream_push(&t, "Hi ", 3);
	is_int((int)take(&t, &sent, 0), 3, "plain text goes at once");
	for (int i = 0; i < 3; i++) {
		nf_textstream_push(&t, EMOJI + i, 1);
		n = take(&t, &sent, 0);
		if (n != 0)
			whole_only = 0;
	}
	ok(whole_only, "bytes 1-3 of a 4-byte character: nothing released");
	nf_textstream_push(&t, EMOJI + 3, 1);
	is_int((int)take(&t, &sent, 0), 4, "the 4th byte releases the whole character");
	is_str(sent.data, "Hi " EMOJI, "sent text is the text, no U+FFFD");

	/* two pieces of two bytes, then text in the same piece as the end */
	nf_textstream_push(&t, "\xf0\x9f", 2);
	is_int((int)take(&t, &sent, 0), 0, "half of it: nothing released");
	nf_textstream_push(&t, "\x98\x80!", 3);
	is_int((int)take(&t, &sent, 0), 5, "the rest and the text after it together");
	ok(clean_utf8(sent.data, sent.len), "every release was whole characters");
	nf_sbuf_release(&sent);
	nf_textstream_release(&t);

	/* a stop string that begins with the emoji: held back while it may be
	 * one, released whole when it is not */
	{
		char *stops[] = {EMOJI "END"};
		nf_textstream_init(&t, stops, 1, 1024);
		nf_sbuf_init(&sent, 1024);
		for (int i = 0; i < 4; i++) {
			nf_textstream_push(&t, EMOJI + i, 1);
			is_int((int)take(&t, &sent, 0), 0, "stop prefix, byte %d of 4: held", i + 1);
		}
		nf_textstream_push(&t, "E", 1);
		is_int((int)take(&t, &sent, 0), 0, "emoji + E: still a stop prefix");
		nf_textstream_push(&t, "x", 1);
		is_int((int)take(&t, &sent, 0), 6, "emoji + Ex: no stop, released whole");
		is_str(sent.data, EMOJI "Ex", "... as sent");
		nf_textstream_push(&t, "\xf0\x9f\x98", 3);
		nf_textstream_push(&t, "\x80" "END tail", 8);
		ok(t.stopped, "the stop string split inside its first character is found");
		is_int((int)take(&t, &sent, 0), 0, "... and nothing of it is released");
		is_str(sent.data, EMOJI "Ex", "sent text ends before the stop");
		nf_sbuf_release(&sent);
		nf_textstream_release(&t);
	}

	/* the text ends inside a character: the final release is made valid */
	nf_textstream_init(&t, NULL, 0, 1024);
	nf_sbuf_init(&sent, 1024);
	nf_textstream_push(&t, "a\xf0\x9f\x98", 4);
	is_int((int)take(&t, &sent, 0), 1, "an unfinished character is held");
	take(&t, &sent, 1);
	is_str(sent.data, "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
	       "at the end each of its bytes becomes U+FFFD, never half a character");
	nf_sbuf_release(&sent);
	nf_textstream_release(&t);
	return done_testing();
}
