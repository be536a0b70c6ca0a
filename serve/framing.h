/*
 * framing.h - the request framing rules nimserve enforces on top of
 * libmicrohttpd, from the header fields of a request before its body is
 * read.  MHD 0.9.75 takes the first of several Content-Length fields, reads
 * a body of unknown length until the peer closes for any Transfer-Encoding
 * but "chunked", and serves HTTP/1.1 without Host: each lets one party
 * read a different request than another (request smuggling, RFC 9112
 * sections 6.1, 6.3 and 3.2).  Every refusal closes the connection, since
 * where the next request starts is unknown.
 */
#ifndef NF_SERVE_FRAMING_H
#define NF_SERVE_FRAMING_H

typedef struct nf_framing {
	int http10;            /* the request line says HTTP/1.0 */
	int n_host;
	int n_content_length;
	int n_transfer_encoding;
	int n_chunked;         /* "chunked" codings over every Transfer-Encoding field */
	int n_other_coding;    /* any other coding ("gzip", ...) */
	int n_empty_coding;    /* an empty list element or field */
	int bad_name;          /* a field name with whitespace (before the colon) */
} nf_framing;

/* Start with the request line's version ("HTTP/1.0", "HTTP/1.1"). */
void nf_framing_init(nf_framing *f, const char *version);
/* Count one header field. */
void nf_framing_add(nf_framing *f, const char *name, const char *value);
/* 0 when the framing is sound; else the HTTP status to refuse with (400, or
 * 501 for a transfer coding other than chunked) and *why, a static message. */
int nf_framing_check(const nf_framing *f, const char **why);

#endif
