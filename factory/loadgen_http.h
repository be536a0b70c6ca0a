/*
 * loadgen_http.h - the HTTP/1.1 client of the serving benchmark: a server's
 * address from a URL, one connection per request ("Connection: close"), every
 * step bounded by a deadline (a server that trickles bytes or stops
 * answering fails with NF_ENET when the deadline passes), and GET of a small
 * JSON document (/v1/models).  Plain http only.
 */
#ifndef NF_FACTORY_LOADGEN_HTTP_H
#define NF_FACTORY_LOADGEN_HTTP_H

#include <jansson.h>
#include <stddef.h>

/* Where requests go: host (a name, an IPv4 address or a bracketed IPv6 one in
 * the URL), port, and the URL's path without its trailing '/' ("" for none). */
typedef struct nf_lg_server {
	char host[256];
	char port[8];
	char path[512];
} nf_lg_server;

/* http://HOST[:PORT][/PATH] (port 80 when none).  NF_EINPUT naming the URL. */
int nf_lg_server_parse(nf_lg_server *out, const char *url);

/* Seconds on the monotonic clock. */
double nf_lg_now(void);

/* Connect to the server by the deadline (nf_lg_now() seconds).  *fd owned by the caller. */
int nf_lg_http_connect(int *fd, const nf_lg_server *srv, double deadline);
/* Write all of data by the deadline. */
int nf_lg_http_send(int fd, const char *data, size_t len, double deadline);
/* Read what is there (at most cap bytes), waiting until the deadline:
 * *got 0 at the end of the stream. */
int nf_lg_http_recv(int fd, char *buf, size_t cap, size_t *got, double deadline);

/* A POST of a JSON body to srv's path + path_suffix, asking for an event
 * stream: a new string (caller frees), *len its length. */
char *nf_lg_http_post(const nf_lg_server *srv, const char *path_suffix, const char *body,
		      size_t body_len, size_t *len);

/* GET path_suffix and parse its JSON answer (at most 4 MiB, status 200) into
 * *out (caller decrefs), within timeout_s seconds. */
int nf_lg_http_get_json(json_t **out, const nf_lg_server *srv, const char *path_suffix,
			double timeout_s);

#endif
