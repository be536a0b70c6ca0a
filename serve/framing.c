/*
 * framing.c - request framing checks on the header fields (framing.h).
 */
#include "serve/framing.h"

#include <string.h>
#include <strings.h>

#include "util/banned.h"

void nf_framing_init(nf_framing *f, const char *version)
{
	memset(f, 0, sizeof *f);
	f->http10 = version && strcmp(version, "HTTP/1.0") == 0;
}

static int is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* Count the codings of one Transfer-Encoding field value (a comma list). */
static void add_codings(nf_framing *f, const char *v)
{
	for (;;) {
		const char *end = strchr(v, ',');
		size_t n = end ? (size_t)(end - v) : strlen(v);
		const char *s = v;
		while (n && is_ows(*s)) {
			s++;
			n--;
		}
		while (n && is_ows(s[n - 1]))
			n--;
		if (n == 0)
			f->n_empty_coding++;
		else if (n == 7 && strncasecmp(s, "chunked", 7) == 0)
			f->n_chunked++;
		else
			f->n_other_coding++;
		if (!end)
			return;
		v = end + 1;
	}
}

void nf_framing_add(nf_framing *f, const char *name, const char *value)
{
	if (strpbrk(name, " \t"))
		f->bad_name = 1;
	if (strcasecmp(name, "Host") == 0)
		f->n_host++;
	else if (strcasecmp(name, "Content-Length") == 0)
		f->n_content_length++;
	else if (strcasecmp(name, "Transfer-Encoding") == 0) {
		f->n_transfer_encoding++;
		add_codings(f, value ? value : "");
	}
}

int nf_framing_check(const nf_framing *f, const char **why)
{
	/* RFC 9112 5.1: a server MUST reject whitespace between name and colon
	 * (MHD keeps "Content-Length " as another field, and reads no body). */
	if (f->bad_name) {
		*why = "a header field name contains whitespace";
		return 400;
	}
	if (f->n_transfer_encoding) {
		/* 6.1: a coding we do not implement is 501; MHD would read such a
		 * body until the peer closes */
		if (f->n_other_coding) {
			*why = "only the chunked transfer coding is implemented";
			return 501;
		}
		if (f->n_chunked != 1 || f->n_empty_coding) {
			*why = "Transfer-Encoding must name chunked exactly once";
			return 400;
		}
		/* 6.3: with both, which one frames the body is the smuggler's choice */
		if (f->n_content_length) {
			*why = "a request must not carry both Content-Length and Transfer-Encoding";
			return 400;
		}
		/* 6.1: HTTP/1.0 has no transfer codings; the framing is faulty */
		if (f->http10) {
			*why = "Transfer-Encoding is not defined for HTTP/1.0";
			return 400;
		}
	}
	/* MHD reads the first of several; an intermediary may take the last */
	if (f->n_content_length > 1) {
		*why = "a request must carry at most one Content-Length";
		return 400;
	}
	/* 3.2: HTTP/1.1 requires exactly one Host; more than one is 400 always */
	if (f->n_host > 1 || (!f->http10 && f->n_host == 0)) {
		*why = f->n_host ? "a request must carry at most one Host" : "an HTTP/1.1 request must carry Host";
		return 400;
	}
	*why = NULL;
	return 0;
}
