/* test_loadgen_sse.c - the streamed completion parser: a chunked and a plain
 * stream give the same counts whether fed whole, a byte at a time or split at
 * every position; keep-alive comments and role-only chat deltas are no
 * tokens; a stream without usage counts its chunks; timing of the chunks;
 * and hostile answers (non-200, a 2 MiB line, bad JSON, an error event, bad
 * and huge chunk sizes, a 100 KiB header, no [DONE]) fail with a message. */
#include <stdlib.h>
#include <string.h>

#include "factory/loadgen_http.h"
#include "factory/loadgen_sse.h"
#include "tests/tap.h"
#include "util/error.h"

#define HEAD_CHUNKED "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
#define HEAD_PLAIN "HTTP/1.0 200 OK\nContent-Type: text/event-stream\n\n"

static const char *const events[] = {
	": keep-alive\n\n",
	"data: {\"choices\":[{\"index\":0,\"text\":\"Once\"}]}\n\n",
	"data: {\"choices\":[{\"index\":0,\"text\":\" upon\"}]}\r\n\r\n",
	"event: message\ndata: {\"choices\":[{\"index\":0,\"text\":\"\"}]}\n\n", /* empty: no token */
	": ping\n\n",
	"data:{\"choices\":[{\"index\":0,\"text\":\" a time\"}]}\n\n",
	"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":4}}\n\n",
	"data: [DONE]\n\n",
};
#define N_EVENTS (sizeof events / sizeof events[0])

/* The body of events, chunked into pieces of 7 bytes when chunked. */
static char *make_stream(int chunked, int with_usage)
{
	size_t cap = 65536, n = 0;
	char *s = malloc(cap), body[4096] = "";
	size_t bl = 0;
	for (size_t i = 0; i < N_EVENTS; i++) {
		if (!with_usage && strstr(events[i], "usage"))
			continue;
		bl += (size_t)snprintf(body + bl, sizeof body - bl, "%s", events[i]);
	}
	n += (size_t)snprintf(s + n, cap - n, "%s", chunked ? HEAD_CHUNKED : HEAD_PLAIN);
	if (!chunked) {
		n += (size_t)snprintf(s + n, cap - n, "%s", body);
		return s;
	}
	for (size_t off = 0; off < bl; off += 7) {
		size_t len = bl - off < 7 ? bl - off : 7;
		n += (size_t)snprintf(s + n, cap - n, "%zx;ext=1\r\n%.*s\r\n", len, (int)len, body + off);
	}
	snprintf(s + n, cap - n, "0\r\nX-Trailer: 1\r\n\r\n");
	return s;
}

typedef struct outcome {
	int err;
	long tokens, chunks, usage, prompt;
	int done;
	char msg[256];
} outcome;

/* Feed data in pieces of `step` bytes (0: split once at `split`), then finish. */
static outcome feed(const char *data, size_t len, size_t step, size_t split)
{
	nf_lg_stream s;
	outcome o = {0};
	nf_lg_stream_init(&s, 0, false);
	if (step) {
		for (size_t off = 0; off < len && !o.err; off += step)
			o.err = nf_lg_stream_feed(&s, data + off, len - off < step ? len - off : step, 1.0);
	} else {
		o.err = nf_lg_stream_feed(&s, data, split, 1.0);
		if (!o.err)
			o.err = nf_lg_stream_feed(&s, data + split, len - split, 1.0);
	}
	if (!o.err)
		o.err = nf_lg_stream_finish(&s);
	if (o.err)
		snprintf(o.msg, sizeof o.msg, "%s", nf_error_last());
	o.tokens = nf_lg_stream_tokens(&s);
	o.chunks = s.content_chunks;
	o.usage = s.completion_tokens;
	o.prompt = s.prompt_tokens;
	o.done = s.done;
	nf_lg_stream_release(&s);
	return o;
}

static void test_good_streams(void)
{
	for (int chunked = 0; chunked < 2; chunked++) {
		char *st = make_stream(chunked, 1);
		size_t len = strlen(st);
		outcome whole = feed(st, len, len, 0), bytes = feed(st, len, 1, 0);
		int all_splits = 1;
		const char *kind = chunked ? "chunked" : "plain";
		ok(whole.err == 0 && whole.done, "%s stream: complete, ends at [DONE]", kind);
		ok(whole.chunks == 3, "%s: 3 content chunks (comments, empty text not counted)", kind);
		ok(whole.usage == 4 && whole.tokens == 4 && whole.prompt == 5, "%s: usage 4 + 5 tokens", kind);
		ok(bytes.err == 0 && bytes.chunks == 3 && bytes.tokens == 4, "%s: the same a byte at a time", kind);
		for (size_t k = 1; k < len; k++) {
			outcome o = feed(st, len, 0, k);
			all_splits &= o.err == 0 && o.chunks == 3 && o.tokens == 4 && o.done;
		}
		ok(all_splits, "%s: the same split at each of %zu positions", kind, len);
		free(st);
	}
	{
		char *st = make_stream(1, 0);
		outcome o = feed(st, strlen(st), 5, 0);
		ok(o.err == 0 && o.usage == -1 && o.tokens == 3, "no usage chunk: the 3 content chunks are the tokens");
		free(st);
	}
}

static void test_chat_and_timing(void)
{
	const char *st = HEAD_PLAIN
		"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
	const char *a = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n";
	const char *b = "data: {\"choices\":[{\"delta\":{\"content\":\" there\"}}]}\n\n";
	const char *end = "data: [DONE]\n\n";
	nf_lg_stream s;
	nf_lg_stream_init(&s, 0.5, true);
	nf_lg_stream_feed(&s, st, strlen(st), 0.9);
	nf_lg_stream_feed(&s, a, strlen(a), 1.0);
	nf_lg_stream_feed(&s, b, strlen(b), 1.5);
	nf_lg_stream_feed(&s, a, strlen(a), 2.5);
	nf_lg_stream_feed(&s, end, strlen(end), 2.6);
	is_int(nf_lg_stream_finish(&s), 0, "chat stream complete");
	ok(s.content_chunks == 3, "the role-only delta is no token; 3 content chunks");
	ok(s.first == 1.0 && s.gaps.n == 2 && s.gaps.v[0] == 0.5 && s.gaps.v[1] == 1.0,
	   "first chunk at 1.0, gaps 0.5 and 1.0");
	is_str(s.text, "Hi thereHi", "the content is kept for the next turn");
	nf_lg_stream_release(&s);
}

static void expect_fail(const char *data, size_t len, const char *needle, const char *what)
{
	outcome o = feed(data, len, 4096, 0);
	ok(o.err < 0 && strstr(o.msg, needle), "%s: fails with '%s'", what, needle);
	if (!(o.err < 0 && strstr(o.msg, needle)))
		diag("got %d '%s'", o.err, o.msg);
}

static void test_hostile(void)
{
	const char *e404 = "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n\r\n"
			   "{\"error\":{\"message\":\"model x not found\"}}";
	const char *badjson = HEAD_PLAIN "data: {\"choices\":[{\"text\":\"a\"}\n\n";
	const char *errev = HEAD_PLAIN "data: {\"error\":{\"message\":\"overloaded\"}}\n\n";
	const char *nodone = HEAD_PLAIN "data: {\"choices\":[{\"text\":\"a\"}]}\n\n";
	const char *badsize = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
	const char *bigsize = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffff\r\n";
	const char *longchunk = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n";
	const char *nothttp = "SSH-2.0-OpenSSH\r\n\r\n";
	size_t big = (size_t)2 << 20;
	char *huge = malloc(big + 64);
	expect_fail(e404, strlen(e404), "HTTP 404: {\"error\":{\"message\":\"model x not found\"}}", "a 404");
	expect_fail(badjson, strlen(badjson), "not a JSON object", "bad JSON in an event");
	expect_fail(errev, strlen(errev), "overloaded", "an error event");
	expect_fail(nodone, strlen(nodone), "without 'data: [DONE]' (after 1 content chunks)", "no [DONE]");
	expect_fail(badsize, strlen(badsize), "bad chunk size", "a chunk size that is not hex");
	expect_fail(bigsize, strlen(bigsize), "over", "a chunk size over 16 MiB");
	expect_fail(longchunk, strlen(longchunk), "longer than its size", "a chunk longer than its size");
	expect_fail(nothttp, strlen(nothttp), "not HTTP/1.x", "an answer that is not HTTP");
	expect_fail("", 0, "without an answer", "a connection closed at once");
	expect_fail("\n\ndata: [DONE]\n\n", 16, "not HTTP/1.x", "an answer that begins with a blank line");
	memcpy(huge, HEAD_PLAIN "data: ", strlen(HEAD_PLAIN) + 6);
	memset(huge + strlen(HEAD_PLAIN) + 6, 'x', big);
	expect_fail(huge, strlen(HEAD_PLAIN) + 6 + big, "line of the event stream is over", "a 2 MiB line");
	memcpy(huge, "HTTP/1.1 200 OK\r\nX: ", 20);
	memset(huge + 20, 'y', 100000);
	expect_fail(huge, 100020, "header is over", "a 100 KiB header");
	free(huge);
}

static void test_urls(void)
{
	nf_lg_server s;
	is_int(nf_lg_server_parse(&s, "http://127.0.0.1:8000/v1/"), 0, "http://127.0.0.1:8000/v1/");
	ok(!strcmp(s.host, "127.0.0.1") && !strcmp(s.port, "8000") && !strcmp(s.path, "/v1"),
	   "... host, port, path without the slash");
	is_int(nf_lg_server_parse(&s, "http://[::1]"), 0, "http://[::1]");
	ok(!strcmp(s.host, "::1") && !strcmp(s.port, "80") && !strcmp(s.path, ""), "... IPv6, port 80");
	is_int(nf_lg_server_parse(&s, "http://localhost:9"), 0, "a name");
	ok(nf_lg_server_parse(&s, "https://x:1") < 0, "https is refused");
	ok(nf_lg_server_parse(&s, "http://x:0") < 0 && nf_lg_server_parse(&s, "http://x:65536") < 0,
	   "ports 0 and 65536 are refused");
	ok(nf_lg_server_parse(&s, "http://:80") < 0 && nf_lg_server_parse(&s, "http://x:80/a b") < 0,
	   "no host, a space in the path are refused");
}

int main(void)
{
	test_good_streams();
	test_chat_and_timing();
	test_hostile();
	test_urls();
	return done_testing();
}
