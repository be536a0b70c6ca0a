/*
 * loadgen_sse.h - the client side of one streamed OpenAI completion: an
 * incremental parser of the HTTP response (status, headers, chunked or
 * plain body) and of its server-sent events, fed bytes as they arrive, which
 * times every content chunk.  Works with any OpenAI-compatible server:
 * completions ("text") and chat ("delta.content") chunks, usage in a chunk
 * of its own or in the last one, or no usage at all (content chunks are then
 * counted), SSE comments (keep-alives), CRLF or LF lines.
 *
 * Everything from the server is bounded: the header (64 KiB), one event line
 * (1 MiB), a chunk size (16 MiB), the text kept (1 MiB); past a bound, bad
 * framing, a non-200 status, an error event or an event that is not JSON,
 * the feed fails with NF_ENET and a one-line message in nf_error_last().
 */
#ifndef NF_FACTORY_LOADGEN_SSE_H
#define NF_FACTORY_LOADGEN_SSE_H

#include <stdbool.h>
#include <stddef.h>

#include "factory/loadgen_stats.h"

#define NF_LG_HEADER_MAX ((size_t)64 << 10)
#define NF_LG_LINE_MAX ((size_t)1 << 20)
#define NF_LG_CHUNK_MAX ((size_t)16 << 20)
#define NF_LG_TEXT_MAX ((size_t)1 << 20)

typedef struct nf_lg_stream {
	/* framing (private) */
	int phase;          /* headers, body, error body, done */
	bool chunked;
	int chunk_phase;    /* size line, data, CRLF after data, trailers */
	size_t chunk_left;
	char *pending;      /* header bytes or a partial chunk-size line */
	size_t pending_n, pending_cap;
	char *line;         /* the body line being read */
	size_t line_n, line_cap;
	bool keep_text;     /* collect the content into text (multi-turn chat) */

	/* results */
	int status;         /* HTTP status, 0 until the headers are read */
	bool done;          /* "data: [DONE]" was seen */
	long completion_tokens, prompt_tokens; /* from usage; -1 when none came */
	long content_chunks;
	double t0;          /* when the request began (set by the caller) */
	double first, last; /* times of the first and last content chunk; first < 0: none yet */
	nf_lg_samples gaps; /* seconds between consecutive content chunks */
	char *text;         /* the content, NUL-terminated, when keep_text */
	size_t text_n, text_cap;
} nf_lg_stream;

void nf_lg_stream_init(nf_lg_stream *s, double t0, bool keep_text);
void nf_lg_stream_release(nf_lg_stream *s);

/* Feed n bytes received at time t (seconds, the clock of t0). */
int nf_lg_stream_feed(nf_lg_stream *s, const char *data, size_t n, double t);
/* The server closed the connection: 0 when the stream was complete (ended
 * with [DONE]), else NF_ENET saying what was missing. */
int nf_lg_stream_finish(nf_lg_stream *s);
/* Whether the stream needs no more bytes (after [DONE] or the last chunk). */
bool nf_lg_stream_complete(const nf_lg_stream *s);
/* Output tokens: the usage count, else the content chunks. */
long nf_lg_stream_tokens(const nf_lg_stream *s);

#endif
