/*
 * loadgen_http.c - connections, deadlines and small GETs for the serving
 * benchmark (see loadgen_http.h).
 */
#define _GNU_SOURCE /* getaddrinfo, strcasestr */
#include "factory/loadgen_http.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/parse.h"
#include "util/banned.h"

#define GET_MAX ((size_t)4 << 20)

double nf_lg_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* HOST or [V6] then optional :PORT, up to the path; *rest at the path. */
static int parse_authority(nf_lg_server *out, const char *a, const char **rest)
{
	const char *host = a, *end, *port = NULL;
	long pn = 80;
	size_t hlen;
	if (*a == '[') {
		if (!(end = strchr(a, ']')))
			return -1;
		host = a + 1;
		hlen = (size_t)(end - host);
		end++;
	} else {
		end = a + strcspn(a, ":/");
		hlen = (size_t)(end - a);
	}
	if (hlen == 0 || hlen >= sizeof out->host)
		return -1;
	memcpy(out->host, host, hlen);
	out->host[hlen] = '\0';
	if (*end == ':') {
		char buf[8];
		size_t plen = strcspn(end + 1, "/");
		if (plen == 0 || plen >= sizeof buf)
			return -1;
		memcpy(buf, end + 1, plen);
		buf[plen] = '\0';
		if (nf_parse_long(&pn, buf, 1, 65535, "port") < 0)
			return -1;
		port = end + 1;
		end = port + plen;
	} else if (*end && *end != '/') {
		return -1;
	}
	snprintf(out->port, sizeof out->port, "%ld", pn);
	*rest = end;
	return 0;
}

int nf_lg_server_parse(nf_lg_server *out, const char *url)
{
	const char *path;
	size_t plen;
	memset(out, 0, sizeof *out);
	if (strncmp(url, "http://", 7) != 0)
		return nf_error_set(NF_EINPUT, "%s: not an http:// URL (https is not supported)", url);
	if (parse_authority(out, url + 7, &path) < 0)
		return nf_error_set(NF_EINPUT, "%s: not http://HOST[:PORT][/PATH]", url);
	plen = strlen(path);
	while (plen && path[plen - 1] == '/')
		plen--;
	if (plen >= sizeof out->path || strpbrk(path, " \r\n\t?#"))
		return nf_error_set(NF_EINPUT, "%s: the path is too long or has a space, '?' or '#'", url);
	memcpy(out->path, path, plen);
	out->path[plen] = '\0';
	return 0;
}

/* Milliseconds left to the deadline for poll(), at least 0. */
static int ms_left(double deadline)
{
	double left = (deadline - nf_lg_now()) * 1e3;
	if (left <= 0)
		return 0;
	return left > 1e9 ? 1000000000 : (int)left + 1;
}

/* Wait for events on fd until the deadline: 0 ready, NF_ENET on timeout. */
static int wait_fd(int fd, short events, double deadline, const char *what)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = events};
		int ms = ms_left(deadline), r;
		if (ms == 0)
			return nf_error_set(NF_ENET, "timed out %s", what);
		r = poll(&p, 1, ms);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return nf_error_set(NF_ENET, "poll: %s", strerror(errno));
	}
}

static int connect_one(const struct addrinfo *ai, double deadline)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
	int one = 1, soerr = 0;
	socklen_t sl = sizeof soerr;
	if (fd < 0)
		return nf_error_set(NF_ENET, "socket: %s", strerror(errno));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		nf_error_set(NF_ENET, "cannot connect: %s", strerror(errno));
		close(fd);
		return NF_ENET;
	}
	if (wait_fd(fd, POLLOUT, deadline, "connecting") < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
		if (soerr)
			nf_error_set(NF_ENET, "cannot connect: %s", strerror(soerr));
		close(fd);
		return NF_ENET;
	}
	return fd;
}

int nf_lg_http_connect(int *fd, const nf_lg_server *srv, double deadline)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
	int rc, err = NF_ENET;
	*fd = -1;
	if ((rc = getaddrinfo(srv->host, srv->port, &hints, &res)) != 0)
		return nf_error_set(NF_ENET, "%s: %s", srv->host, gai_strerror(rc));
	for (struct addrinfo *ai = res; ai && *fd < 0; ai = ai->ai_next) {
		int s = connect_one(ai, deadline);
		if (s >= 0)
			*fd = s, err = 0;
	}
	freeaddrinfo(res);
	if (err < 0)
		return nf_error_wrap(err, "%s:%s", srv->host, srv->port);
	return 0;
}

int nf_lg_http_send(int fd, const char *data, size_t len, double deadline)
{
	size_t off = 0;
	while (off < len) {
		ssize_t w = send(fd, data + off, len - off, MSG_NOSIGNAL);
		int err;
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if ((err = wait_fd(fd, POLLOUT, deadline, "sending the request")) < 0)
				return err;
			continue;
		}
		return nf_error_set(NF_ENET, "cannot send the request: %s", strerror(errno));
	}
	return 0;
}

int nf_lg_http_recv(int fd, char *buf, size_t cap, size_t *got, double deadline)
{
	*got = 0;
	/* checked before reading too: a server that always has bytes ready must not outlast it */
	if (nf_lg_now() >= deadline)
		return nf_error_set(NF_ENET, "timed out waiting for the answer");
	for (;;) {
		ssize_t r = recv(fd, buf, cap, 0);
		int err;
		if (r >= 0) {
			*got = (size_t)r;
			return 0;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return nf_error_set(NF_ENET, "read: %s", strerror(errno));
		if ((err = wait_fd(fd, POLLIN, deadline, "waiting for the answer")) < 0)
			return err;
	}
}

/* The Host header's value: a bracketed IPv6 address, a name or IPv4, and the port. */
static void host_header(char *out, size_t cap, const nf_lg_server *srv)
{
	bool v6 = strchr(srv->host, ':') != NULL;
	snprintf(out, cap, "%s%s%s:%s", v6 ? "[" : "", srv->host, v6 ? "]" : "", srv->port);
}

char *nf_lg_http_post(const nf_lg_server *srv, const char *path_suffix, const char *body,
		      size_t body_len, size_t *len)
{
	char host[300], *head, *req;
	size_t hlen, total;
	host_header(host, sizeof host, srv);
	head = nf_strdup_printf("POST %s%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
				"Accept: text/event-stream\r\nConnection: close\r\n"
				"Content-Length: %zu\r\n\r\n",
				srv->path, path_suffix, host, body_len);
	if (!head)
		return NULL;
	hlen = strlen(head);
	if (!nf_size_add(&total, hlen, body_len) || !nf_size_add(&total, total, 1) ||
	    !(req = malloc(total))) {
		free(head);
		return NULL;
	}
	memcpy(req, head, hlen);
	memcpy(req + hlen, body, body_len);
	req[hlen + body_len] = '\0';
	*len = hlen + body_len;
	free(head);
	return req;
}

/* Read until the server closes (Connection: close), at most GET_MAX bytes. */
static int read_all(int fd, char **out, size_t *len, double deadline)
{
	size_t cap = 65536, n = 0, got;
	char *buf = malloc(cap + 1), *p;
	int err;
	if (!buf)
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (;;) {
		if (n == cap) {
			if (cap >= GET_MAX) {
				free(buf);
				return nf_error_set(NF_ENET, "the answer is over %zu bytes", GET_MAX);
			}
			if (!(p = realloc(buf, cap * 2 + 1))) {
				free(buf);
				return nf_error_set(NF_ENOMEM, "out of memory");
			}
			buf = p;
			cap *= 2;
		}
		if ((err = nf_lg_http_recv(fd, buf + n, cap - n, &got, deadline)) < 0) {
			free(buf);
			return err;
		}
		if (got == 0)
			break;
		n += got;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

/* Undo the chunked coding of body[0..*n) in place (bounded by *n). */
static int dechunk(char *body, size_t *n)
{
	size_t in = 0, out = 0;
	for (;;) {
		char *e;
		unsigned long size;
		if (in >= *n)
			return nf_error_set(NF_ENET, "the chunked answer is cut short");
		errno = 0;
		size = strtoul(body + in, &e, 16);
		if (e == body + in || errno || size > GET_MAX)
			return nf_error_set(NF_ENET, "bad chunk size in the answer");
		if (!(e = memchr(e, '\n', *n - (size_t)(e - body))))
			return nf_error_set(NF_ENET, "the chunked answer is cut short");
		in = (size_t)(e - body) + 1;
		if (size == 0)
			break;
		if (size > *n - in)
			return nf_error_set(NF_ENET, "the chunked answer is cut short");
		memmove(body + out, body + in, size);
		out += size;
		in += size;
		while (in < *n && (body[in] == '\r' || body[in] == '\n'))
			in++;
	}
	*n = out;
	body[out] = '\0';
	return 0;
}

/* Status 200, then the body's JSON. */
static int parse_get_answer(json_t **out, char *raw, size_t len)
{
	char *end = strstr(raw, "\r\n\r\n"), *body;
	size_t blen;
	json_error_t jerr;
	bool chunked;
	if (!end || strncmp(raw, "HTTP/1.", 7) != 0 || len < 12)
		return nf_error_set(NF_ENET, "the answer is not HTTP/1.x");
	if (strncmp(raw + 8, " 200", 4) != 0)
		return nf_error_set(NF_ENET, "HTTP status %.3s", raw + 9);
	*end = '\0';
	chunked = strcasestr(raw, "\ntransfer-encoding:") && strcasestr(raw, "chunked");
	body = end + 4;
	blen = len - (size_t)(body - raw);
	if (chunked) {
		int err = dechunk(body, &blen);
		if (err < 0)
			return err;
	}
	if (!(*out = json_loadb(body, blen, 0, &jerr)))
		return nf_error_set(NF_ENET, "the answer is not JSON: %s", jerr.text);
	return 0;
}

int nf_lg_http_get_json(json_t **out, const nf_lg_server *srv, const char *path_suffix,
			double timeout_s)
{
	double deadline = nf_lg_now() + timeout_s;
	char host[300], *req = NULL, *raw = NULL;
	size_t len = 0;
	int fd = -1, err;
	*out = NULL;
	host_header(host, sizeof host, srv);
	req = nf_strdup_printf("GET %s%s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n"
			       "Connection: close\r\n\r\n",
			       srv->path, path_suffix, host);
	if (!req) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = nf_lg_http_connect(&fd, srv, deadline)) < 0 ||
	    (err = nf_lg_http_send(fd, req, strlen(req), deadline)) < 0 ||
	    (err = read_all(fd, &raw, &len, deadline)) < 0 ||
	    (err = parse_get_answer(out, raw, len)) < 0)
		goto done;
done:
	if (err < 0)
		nf_error_wrap(err, "GET %s%s", srv->path, path_suffix);
	if (fd >= 0)
		close(fd);
	free(req);
	free(raw);
	return err;
}
