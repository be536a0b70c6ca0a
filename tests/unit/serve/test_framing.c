/* test_framing.c - the request framing rules (serve/framing.h) on header
 * lists as an attacker writes them: several Content-Length fields, both
 * framings, codings other than chunked, Host missing or doubled,
 * whitespace before the colon; and the sound requests they must not catch. */
#include <stddef.h>

#include "serve/framing.h"
#include "tests/tap.h"
#include "util/banned.h"

/* Status for the request line version and a NULL-ended list of name, value. */
static int verdict(const char *version, const char *const *hv, const char **why)
{
	nf_framing f;
	nf_framing_init(&f, version);
	for (size_t i = 0; hv[i]; i += 2)
		nf_framing_add(&f, hv[i], hv[i + 1]);
	return nf_framing_check(&f, why);
}

#define CHECK(version, want, name, ...)                                                   \
	do {                                                                              \
		const char *const hv_[] = {__VA_ARGS__, NULL};                            \
		const char *why_ = NULL;                                                  \
		int got_ = verdict(version, hv_, &why_);                                  \
		is_int(got_, want, "%s", name);                                           \
		ok(got_ == 0 ? why_ == NULL : why_ != NULL, "... %s", got_ ? "says why" : "no reason"); \
	} while (0)

int main(void)
{
	CHECK("HTTP/1.1", 0, "Host and one Content-Length", "Host", "x", "Content-Length", "5");
	CHECK("HTTP/1.1", 0, "Host and chunked", "Host", "x", "Transfer-Encoding", "chunked");
	CHECK("HTTP/1.1", 0, "chunked in any case, with spaces", "host", "x", "transfer-encoding", " Chunked ");
	CHECK("HTTP/1.1", 0, "GET with Host only", "Host", "x", "Accept", "*/*");
	CHECK("HTTP/1.0", 0, "HTTP/1.0 without Host", "Accept", "*/*");

	CHECK("HTTP/1.1", 400, "two different Content-Length", "Host", "x", "Content-Length", "5",
	      "Content-Length", "40");
	CHECK("HTTP/1.1", 400, "the same Content-Length twice", "Host", "x", "Content-Length", "5",
	      "content-length", "5");
	CHECK("HTTP/1.1", 400, "Content-Length and chunked", "Host", "x", "Content-Length", "4",
	      "Transfer-Encoding", "chunked");
	CHECK("HTTP/1.1", 400, "chunked and Content-Length, the other order", "Host", "x",
	      "Transfer-Encoding", "chunked", "Content-Length", "4");
	CHECK("HTTP/1.1", 501, "Transfer-Encoding: gzip", "Host", "x", "Transfer-Encoding", "gzip");
	CHECK("HTTP/1.1", 501, "gzip, chunked", "Host", "x", "Transfer-Encoding", "gzip, chunked");
	CHECK("HTTP/1.1", 501, "chunked then gzip in a second field", "Host", "x", "Transfer-Encoding",
	      "chunked", "Transfer-Encoding", "gzip");
	CHECK("HTTP/1.1", 501, "a coding with parameters", "Host", "x", "Transfer-Encoding", "chunked;x=1");
	CHECK("HTTP/1.1", 400, "chunked twice", "Host", "x", "Transfer-Encoding", "chunked, chunked");
	CHECK("HTTP/1.1", 400, "chunked in two fields", "Host", "x", "Transfer-Encoding", "chunked",
	      "Transfer-Encoding", "chunked");
	CHECK("HTTP/1.1", 400, "an empty Transfer-Encoding", "Host", "x", "Transfer-Encoding", "");
	CHECK("HTTP/1.1", 400, "an empty list element", "Host", "x", "Transfer-Encoding", "chunked,");
	CHECK("HTTP/1.0", 400, "Transfer-Encoding in HTTP/1.0", "Host", "x", "Transfer-Encoding", "chunked");
	CHECK("HTTP/1.1", 400, "HTTP/1.1 without Host", "Content-Length", "5");
	CHECK("HTTP/1.1", 400, "two Host fields", "Host", "a", "Host", "b");
	CHECK("HTTP/1.0", 400, "two Host fields in HTTP/1.0", "Host", "a", "Host", "a");
	CHECK("HTTP/1.1", 400, "whitespace before the colon", "Host", "x", "Content-Length ", "40");
	CHECK("HTTP/1.1", 400, "a tab in a field name", "Host", "x", "X\tY", "1");
	return done_testing();
}
