/*
 * loadgen_sse.c - the incremental parser of a streamed completion's HTTP
 * response and server-sent events (see loadgen_sse.h).  Bytes go through
 * three layers, each with its own bound: the header block, the chunked
 * transfer coding (when the server uses it), then body lines, of which the
 * "data:" ones are events: "[DONE]" or a JSON chunk.
 */
#include "factory/loadgen_sse.h"

#include <ctype.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

enum { PH_HEAD, PH_BODY, PH_ERROR_BODY, PH_END };
enum { CH_SIZE, CH_DATA, CH_DATA_END, CH_TRAILER };

#define CHUNK_LINE_MAX 256 /* a chunk-size line with extensions, or a trailer */
#define ERROR_BODY_MAX 512 /* of a non-200 answer, quoted in the error */

void nf_lg_stream_init(nf_lg_stream *s, double t0, bool keep_text)
{
	memset(s, 0, sizeof *s);
	s->keep_text = keep_text;
	s->completion_tokens = -1;
	s->prompt_tokens = -1;
	s->t0 = t0;
	s->first = -1;
}

void nf_lg_stream_release(nf_lg_stream *s)
{
	free(s->pending);
	free(s->line);
	free(s->text);
	nf_lg_samples_release(&s->gaps);
	memset(s, 0, sizeof *s);
}

/* Append n bytes to a NUL-terminated buffer of at most max bytes. */
static int buf_put(char **p, size_t *len, size_t *cap, const char *data, size_t n, size_t max,
		   const char *what)
{
	size_t need;
	if (!nf_size_add(&need, *len, n) || need > max)
		return nf_error_set(NF_ENET, "%s is over %zu bytes", what, max);
	if (need + 1 > *cap) {
		size_t c = *cap ? *cap : 256;
		char *q;
		while (c < need + 1)
			c *= 2;
		if (!(q = realloc(*p, c)))
			return nf_error_set(NF_ENOMEM, "out of memory");
		*p = q;
		*cap = c;
	}
	memcpy(*p + *len, data, n);
	*len = need;
	(*p)[need] = '\0';
	return 0;
}

/* "HTTP/1.x NNN reason" into s->status. */
static int parse_status(nf_lg_stream *s, const char *line)
{
	if (strncmp(line, "HTTP/1.", 7) != 0 || !line[7] || line[8] != ' ' ||
	    !isdigit((unsigned char)line[9]) || !isdigit((unsigned char)line[10]) ||
	    !isdigit((unsigned char)line[11]) || (line[12] && line[12] != ' ' && line[12] != '\r'))
		return nf_error_set(NF_ENET, "the answer is not HTTP/1.x: '%.60s'", line);
	s->status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
	return 0;
}

/* Whether header line h is "Transfer-Encoding: ...chunked...". */
static bool is_chunked_header(const char *h, size_t len)
{
	static const char name[] = "transfer-encoding:";
	if (len < sizeof name - 1 || strncasecmp(h, name, sizeof name - 1) != 0)
		return false;
	for (size_t i = sizeof name - 1; i + 7 <= len; i++)
		if (!strncasecmp(h + i, "chunked", 7))
			return true;
	return false;
}

/* The header block (NUL-terminated, without the blank line): status and framing. */
static int parse_headers(nf_lg_stream *s, char *head)
{
	char *nl = strchr(head, '\n');
	int err;
	if (nl)
		*nl = '\0';
	if ((err = parse_status(s, head)) < 0)
		return err;
	while (nl) {
		char *h = nl + 1;
		size_t len;
		nl = strchr(h, '\n');
		len = nl ? (size_t)(nl - h) : strlen(h);
		if (is_chunked_header(h, len))
			s->chunked = true;
	}
	s->phase = s->status == 200 ? PH_BODY : PH_ERROR_BODY;
	return 0;
}

/* A content chunk arrived at t. */
static int on_content(nf_lg_stream *s, const char *text, size_t len, double t)
{
	int err = 0;
	if (s->first < 0)
		s->first = t;
	else
		err = nf_lg_samples_add(&s->gaps, t - s->last);
	s->last = t;
	s->content_chunks++;
	if (!err && s->keep_text && s->text_n + len <= NF_LG_TEXT_MAX)
		err = buf_put(&s->text, &s->text_n, &s->text_cap, text, len, NF_LG_TEXT_MAX, "the text");
	return err;
}

/* The text of choice 0: "text" (completions) or "delta"."content" (chat). */
static const char *chunk_text(json_t *ev, size_t *len)
{
	json_t *c = json_array_get(json_object_get(ev, "choices"), 0), *t;
	if (!json_is_object(c))
		return NULL;
	t = json_object_get(c, "text");
	if (!t)
		t = json_object_get(json_object_get(c, "delta"), "content");
	if (!json_is_string(t) || json_string_length(t) == 0)
		return NULL;
	*len = json_string_length(t);
	return json_string_value(t);
}

static void read_usage(nf_lg_stream *s, json_t *ev)
{
	json_t *u = json_object_get(ev, "usage");
	json_t *ct = json_object_get(u, "completion_tokens"), *pt = json_object_get(u, "prompt_tokens");
	if (json_is_integer(ct) && json_integer_value(ct) >= 0 && json_integer_value(ct) < (1L << 40))
		s->completion_tokens = (long)json_integer_value(ct);
	if (json_is_integer(pt) && json_integer_value(pt) >= 0 && json_integer_value(pt) < (1L << 40))
		s->prompt_tokens = (long)json_integer_value(pt);
}

/* One "data:" value: [DONE] or a JSON chunk. */
static int on_event(nf_lg_stream *s, const char *data, size_t len, double t)
{
	json_error_t jerr;
	json_t *ev, *e;
	const char *text;
	size_t tlen = 0;
	int err = 0;
	if (len == 6 && !memcmp(data, "[DONE]", 6)) {
		s->done = true;
		return 0;
	}
	ev = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(ev)) {
		json_decref(ev);
		return nf_error_set(NF_ENET, "an event is not a JSON object: '%.80s'", data);
	}
	if ((e = json_object_get(ev, "error"))) {
		json_t *m = json_object_get(e, "message");
		err = nf_error_set(NF_ENET, "the server sent an error: %.200s",
				   json_is_string(m) ? json_string_value(m) : "(no message)");
	} else {
		read_usage(s, ev);
		if ((text = chunk_text(ev, &tlen)))
			err = on_content(s, text, tlen, t);
	}
	json_decref(ev);
	return err;
}

/* A whole body line (NUL-terminated, no line end): SSE fields other than
 * data (event, id, retry) and comments (":" keep-alives) are ignored. */
static int on_line(nf_lg_stream *s, const char *line, size_t len, double t)
{
	if (s->done || len < 5 || strncmp(line, "data:", 5) != 0)
		return 0;
	line += 5;
	len -= 5;
	if (len && *line == ' ')
		line++, len--;
	return on_event(s, line, len, t);
}

/* Decoded body bytes of a 200 answer: split into lines. */
static int body_bytes(nf_lg_stream *s, const char *data, size_t n, double t)
{
	while (n > 0 && !s->done) {
		const char *nl = memchr(data, '\n', n);
		size_t take = nl ? (size_t)(nl - data) : n;
		int err = buf_put(&s->line, &s->line_n, &s->line_cap, data, take, NF_LG_LINE_MAX,
				  "a line of the event stream");
		if (err < 0)
			return err;
		if (!nl)
			break;
		if (s->line_n && s->line[s->line_n - 1] == '\r')
			s->line[--s->line_n] = '\0';
		if ((err = on_line(s, s->line, s->line_n, t)) < 0)
			return err;
		s->line_n = 0;
		data += take + 1;
		n -= take + 1;
	}
	return 0;
}

static int payload(nf_lg_stream *s, const char *data, size_t n, double t)
{
	if (s->phase == PH_ERROR_BODY) {
		size_t room = ERROR_BODY_MAX - s->text_n;
		return buf_put(&s->text, &s->text_n, &s->text_cap, data, n < room ? n : room,
			       ERROR_BODY_MAX, "the error body");
	}
	return body_bytes(s, data, n, t);
}

/* A chunk-size line: hex digits, then optional ";extensions". */
static int chunk_size_line(nf_lg_stream *s)
{
	size_t size = 0, digits = 0;
	const char *p = s->pending;
	for (; isxdigit((unsigned char)*p); p++, digits++) {
		int d = isdigit((unsigned char)*p) ? *p - '0' : (tolower((unsigned char)*p) - 'a' + 10);
		size = size * 16 + (size_t)d;
		if (size > NF_LG_CHUNK_MAX)
			return nf_error_set(NF_ENET, "a chunk of the answer is over %zu bytes",
					    NF_LG_CHUNK_MAX);
	}
	while (*p == ' ' || *p == '\t')
		p++;
	if (!digits || (*p && *p != ';'))
		return nf_error_set(NF_ENET, "bad chunk size line '%.40s'", s->pending);
	s->chunk_left = size;
	s->chunk_phase = size ? CH_DATA : CH_TRAILER;
	return 0;
}

/* Take one line of chunk framing from data into pending; *used bytes
 * consumed; *whole when the line ended (pending holds it, no line end). */
static int framing_line(nf_lg_stream *s, const char *data, size_t n, size_t *used, bool *whole)
{
	const char *nl = memchr(data, '\n', n);
	size_t take = nl ? (size_t)(nl - data) : n;
	int err = buf_put(&s->pending, &s->pending_n, &s->pending_cap, data, take, CHUNK_LINE_MAX,
			  "a chunk framing line");
	*used = nl ? take + 1 : take;
	*whole = nl != NULL;
	if (!err && nl && s->pending_n && s->pending[s->pending_n - 1] == '\r')
		s->pending[--s->pending_n] = '\0';
	return err;
}

/* One step of the chunked decoder over data: *used bytes consumed. */
static int chunk_step(nf_lg_stream *s, const char *data, size_t n, double t, size_t *used)
{
	bool whole;
	int err;
	if (s->chunk_phase == CH_DATA) {
		*used = n < s->chunk_left ? n : s->chunk_left;
		s->chunk_left -= *used;
		if (!s->chunk_left)
			s->chunk_phase = CH_DATA_END;
		return payload(s, data, *used, t);
	}
	if ((err = framing_line(s, data, n, used, &whole)) < 0 || !whole)
		return err;
	if (s->chunk_phase == CH_SIZE)
		err = chunk_size_line(s);
	else if (s->chunk_phase == CH_DATA_END && s->pending_n)
		err = nf_error_set(NF_ENET, "a chunk is longer than its size");
	else if (s->chunk_phase == CH_DATA_END)
		s->chunk_phase = CH_SIZE;
	else if (s->pending_n == 0) /* the blank line after the trailers */
		s->phase = PH_END;
	s->pending_n = 0;
	return err;
}

static int body(nf_lg_stream *s, const char *data, size_t n, double t)
{
	if (!s->chunked)
		return payload(s, data, n, t);
	while (n > 0 && s->phase != PH_END && !s->done) {
		size_t used = 0;
		int err = chunk_step(s, data, n, t, &used);
		if (err < 0)
			return err;
		data += used;
		n -= used;
	}
	return 0;
}

/* Where the header block ends in pending, looking from `from`: *end at the
 * first line end of the blank line, *skip the bytes of that blank line;
 * false when it has not arrived yet. */
static bool header_end(const nf_lg_stream *s, size_t from, size_t *end, size_t *skip)
{
	const char *p = s->pending;
	for (size_t i = from; i < s->pending_n; i++) {
		if (p[i] != '\n')
			continue;
		if (i + 1 < s->pending_n && p[i + 1] == '\n') {
			*end = i, *skip = 2;
			return true;
		}
		if (i + 2 < s->pending_n && p[i + 1] == '\r' && p[i + 2] == '\n') {
			*end = i, *skip = 3;
			return true;
		}
	}
	return false;
}

/* Header bytes: collect to the blank line, then hand the rest to body(). */
static int head(nf_lg_stream *s, const char *data, size_t n, double t)
{
	size_t from = s->pending_n > 3 ? s->pending_n - 3 : 0, skip = 0, end = 0, rest_n;
	char *rest;
	int err = buf_put(&s->pending, &s->pending_n, &s->pending_cap, data, n, NF_LG_HEADER_MAX,
			  "the response header");
	if (err < 0 || !header_end(s, from, &end, &skip))
		return err;
	/* the body bytes that came with the header, copied: pending is reused by chunking */
	rest_n = s->pending_n - (end + skip);
	if (!(rest = malloc(rest_n + 1)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	memcpy(rest, s->pending + end + skip, rest_n);
	s->pending[end] = '\0';
	for (char *c = s->pending; (c = strchr(c, '\r'));)
		*c = ' '; /* CRLF headers read as LF ones */
	err = parse_headers(s, s->pending);
	s->pending_n = 0;
	if (!err)
		err = body(s, rest, rest_n, t);
	free(rest);
	return err;
}

int nf_lg_stream_feed(nf_lg_stream *s, const char *data, size_t n, double t)
{
	if (s->phase == PH_HEAD)
		return head(s, data, n, t);
	if (s->phase == PH_END || s->done)
		return 0;
	return body(s, data, n, t);
}

bool nf_lg_stream_complete(const nf_lg_stream *s)
{
	/* an error answer is complete once there is enough of it to quote */
	return s->done || s->phase == PH_END ||
	       (s->phase == PH_ERROR_BODY && s->text_n >= ERROR_BODY_MAX);
}

int nf_lg_stream_finish(nf_lg_stream *s)
{
	if (s->phase == PH_HEAD)
		return nf_error_set(NF_ENET, s->pending_n ? "the connection closed inside the headers"
							  : "the server closed the connection without an answer");
	if (s->phase == PH_ERROR_BODY || s->status != 200) {
		for (size_t i = 0; i < s->text_n; i++)
			if ((unsigned char)s->text[i] < 0x20)
				s->text[i] = ' ';
		return nf_error_set(NF_ENET, "HTTP %d: %.200s", s->status, s->text ? s->text : "");
	}
	if (!s->done && s->line_n) { /* a last line without its line end */
		int err = on_line(s, s->line, s->line_n, s->last);
		s->line_n = 0;
		if (err < 0)
			return err;
	}
	if (!s->done)
		return nf_error_set(NF_ENET, "the stream ended without 'data: [DONE]' (after %ld content chunks)",
				    s->content_chunks);
	return 0;
}

long nf_lg_stream_tokens(const nf_lg_stream *s)
{
	return s->completion_tokens >= 0 ? s->completion_tokens : s->content_chunks;
}
