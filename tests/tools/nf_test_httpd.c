/*
 * nf_test_httpd.c - a loopback HTTP file server for tests (libmicrohttpd).
 *
 *   nf_test_httpd --root DIR [--port N] [--max-seconds S] [--log FILE]
 *                 [--fail-first N [--fail-status CODE]]
 *                 [--throttle-first N [--retry-after S]]
 *                 [--truncate-first N --truncate-after BYTES]
 *                 [--redirect PREFIX] [--no-range]
 *
 * Serves the files under DIR on 127.0.0.1 only (port 0: an ephemeral port),
 * prints the port on the first line of stdout, then serves until SIGTERM or
 * SIGINT, or until --max-seconds (default 60) have passed.
 *
 * Fault injection, counted over all requests in arrival order:
 *   --fail-first N       the first N requests get CODE (default 500);
 *   --throttle-first N   the next N get 429 with "Retry-After: S" (default 1);
 *   --truncate-first N   the next N send only BYTES of the body, then the
 *                        connection is closed (Content-Length is the full size);
 *   --redirect PREFIX    every request gets 302 to PREFIX + path.
 * "Range: bytes=N-" gets 206 with the rest of the file, unless --no-range.
 * --log FILE appends "METHOD PATH STATUS" per request (flushed at once).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/banned.h"

typedef struct server {
	const char *root;
	FILE *log;
	unsigned long fail_first, fail_status;
	unsigned long throttle_first, retry_after;
	unsigned long truncate_first, truncate_after;
	const char *redirect;
	int no_range;
	unsigned long requests; /* only touched by MHD's one polling thread */
} server;

typedef struct body {
	int fd;
	uint64_t base;  /* file offset of the first byte sent */
	uint64_t limit; /* bytes to send before closing */
} body;

static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	body *b = cls;
	ssize_t n;

	if (pos >= b->limit)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if ((uint64_t)max > b->limit - pos)
		max = (size_t)(b->limit - pos);
	n = pread(b->fd, buf, max, (off_t)(b->base + pos));
	if (n <= 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	return n;
}

static void free_body(void *cls)
{
	body *b = cls;
	close(b->fd);
	free(b);
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status, const char *text,
				  const char *hname, const char *hvalue)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	if (hname)
		MHD_add_response_header(r, hname, hvalue);
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static void log_req(server *s, const char *method, const char *url, unsigned status)
{
	if (!s->log)
		return;
	fprintf(s->log, "%s %s %u\n", method, url, status);
	fflush(s->log);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	static int marker;
	server *s = cls;
	unsigned long n;
	char path[4096], hv[96];
	struct stat st;
	struct MHD_Response *r;
	body *b;
	enum MHD_Result ret;
	const char *range;
	uint64_t from = 0;
	unsigned status = 200;
	int fd;

	(void)version;
	(void)upload_data;
	if (*con_cls == NULL) { /* first call for this request: headers only */
		*con_cls = &marker;
		return MHD_YES;
	}
	*upload_data_size = 0;
	n = s->requests++;

	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		log_req(s, method, url, 405);
		return reply_text(conn, 405, "method not allowed\n", NULL, NULL);
	}
	if (n < s->fail_first) {
		log_req(s, method, url, (unsigned)s->fail_status);
		return reply_text(conn, (unsigned)s->fail_status, "injected failure\n", NULL, NULL);
	}
	n -= s->fail_first;
	if (n < s->throttle_first) {
		snprintf(hv, sizeof(hv), "%lu", s->retry_after);
		log_req(s, method, url, 429);
		return reply_text(conn, 429, "slow down\n", MHD_HTTP_HEADER_RETRY_AFTER, hv);
	}
	n -= s->throttle_first;
	if (s->redirect) {
		char loc[4096];
		snprintf(loc, sizeof(loc), "%s%s", s->redirect, url[0] == '/' ? url + 1 : url);
		log_req(s, method, url, 302);
		return reply_text(conn, 302, "moved\n", MHD_HTTP_HEADER_LOCATION, loc);
	}
	if (url[0] != '/' || strstr(url, "..") ||
	    (size_t)snprintf(path, sizeof(path), "%s%s", s->root, url) >= sizeof(path)) {
		log_req(s, method, url, 400);
		return reply_text(conn, 400, "bad path\n", NULL, NULL);
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		log_req(s, method, url, 404);
		return reply_text(conn, 404, "not found\n", NULL, NULL);
	}
	range = s->no_range ? NULL
			    : MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE);
	if (range) {
		char *end = NULL;
		if (strncmp(range, "bytes=", 6) != 0 || range[6] < '0' || range[6] > '9')
			goto bad_range;
		from = strtoull(range + 6, &end, 10);
		if (strcmp(end, "-") != 0)
			goto bad_range;
		if (from >= (uint64_t)st.st_size) {
			close(fd);
			snprintf(hv, sizeof(hv), "bytes */%lld", (long long)st.st_size);
			log_req(s, method, url, 416);
			return reply_text(conn, 416, "range not satisfiable\n",
					  MHD_HTTP_HEADER_CONTENT_RANGE, hv);
		}
		status = 206;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		close(fd);
		return MHD_NO;
	}
	b->fd = fd;
	b->base = from;
	b->limit = (uint64_t)st.st_size - from;
	if (n < s->truncate_first && s->truncate_after < b->limit)
		b->limit = s->truncate_after;
	r = MHD_create_response_from_callback((uint64_t)st.st_size - from, 64 * 1024, read_body,
					      b, free_body);
	if (!r) {
		free_body(b);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	if (status == 206) {
		snprintf(hv, sizeof(hv), "bytes %llu-%lld/%lld", (unsigned long long)from,
			 (long long)st.st_size - 1, (long long)st.st_size);
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, hv);
	}
	log_req(s, method, url, status);
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
bad_range:
	close(fd);
	log_req(s, method, url, 400);
	return reply_text(conn, 400, "only 'Range: bytes=N-' is served\n", NULL, NULL);
}

static int parse_ulong(unsigned long *out, const char *s, const char *name)
{
	char *end = NULL;
	errno = 0;
	if (!s || !*s || *s == '-')
		goto bad;
	*out = strtoul(s, &end, 10);
	if (errno || *end)
		goto bad;
	return 0;
bad:
	fprintf(stderr, "nf_test_httpd: %s needs a number, got '%s'\n", name, s ? s : "");
	return -1;
}

int main(int argc, char **argv)
{
	server s = {0};
	unsigned long port = 0, max_seconds = 60;
	const char *log_path = NULL;
	struct sockaddr_in addr;
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;
	sigset_t set;
	struct timespec start, now;

	s.fail_status = 500;
	s.retry_after = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;
		if (!strcmp(a, "--root"))
			s.root = v;
		else if (!strcmp(a, "--log"))
			log_path = v;
		else if (!strcmp(a, "--redirect"))
			s.redirect = v;
		else if (!strcmp(a, "--no-range")) {
			s.no_range = 1;
			continue;
		} else if (!strcmp(a, "--port"))
			bad = parse_ulong(&port, v, a) || port > 65535;
		else if (!strcmp(a, "--max-seconds"))
			bad = parse_ulong(&max_seconds, v, a);
		else if (!strcmp(a, "--fail-first"))
			bad = parse_ulong(&s.fail_first, v, a);
		else if (!strcmp(a, "--fail-status"))
			bad = parse_ulong(&s.fail_status, v, a) || s.fail_status < 100 ||
			      s.fail_status > 599;
		else if (!strcmp(a, "--throttle-first"))
			bad = parse_ulong(&s.throttle_first, v, a);
		else if (!strcmp(a, "--retry-after"))
			bad = parse_ulong(&s.retry_after, v, a);
		else if (!strcmp(a, "--truncate-first"))
			bad = parse_ulong(&s.truncate_first, v, a);
		else if (!strcmp(a, "--truncate-after"))
			bad = parse_ulong(&s.truncate_after, v, a);
		else {
			fprintf(stderr, "nf_test_httpd: unknown option '%s'\n", a);
			return 2;
		}
		if (bad || !v)
			return 2;
		i++;
	}
	if (!s.root) {
		fprintf(stderr, "usage: nf_test_httpd --root DIR [--port N] [--max-seconds S] ...\n");
		return 2;
	}
	if (log_path && !(s.log = fopen(log_path, "a"))) {
		fprintf(stderr, "nf_test_httpd: %s: %s\n", log_path, strerror(errno));
		return 2;
	}
	/* Block the stop signals before MHD starts its thread, then wait for them here. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)port);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, (uint16_t)port,
			     NULL, NULL, on_request, &s, MHD_OPTION_SOCK_ADDR, &addr,
			     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)30, MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "nf_test_httpd: cannot listen on 127.0.0.1:%lu\n", port);
		return 4;
	}
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	printf("%u\n", info ? (unsigned)info->port : 0u);
	fflush(stdout);

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct timespec wait = {1, 0};
		int sig = sigtimedwait(&set, NULL, &wait);
		if (sig > 0)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((unsigned long)(now.tv_sec - start.tv_sec) >= max_seconds) {
			fprintf(stderr, "nf_test_httpd: --max-seconds %lu reached, stopping\n",
				max_seconds);
			break;
		}
	}
	MHD_stop_daemon(d);
	if (s.log)
		fclose(s.log);
	return 0;
}
