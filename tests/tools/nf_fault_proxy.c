/*
 * nf_fault_proxy - a loopback HTTP/1.1 proxy in front of a registry, with
 * fault injection, or a tiny fake registry with hostile answers (tests only).
 *
 *   nf_fault_proxy --upstream 127.0.0.1:PORT [--log FILE] [--max-seconds S]
 *       [--kinds LIST] [--fail N [--fail-status CODE]] [--throttle N [--retry-after S]]
 *       [--drop-after BYTES --drop-count N] [--referrers-api]
 *   nf_fault_proxy --fake MODE [--log FILE] [--max-seconds S]
 *
 * Listens on 127.0.0.1 (ephemeral port, printed on the first line of stdout),
 * one request per connection (answers carry Connection: close), and exits
 * after --max-seconds (default 120) or on SIGTERM.
 *
 * Faults, counted over requests of the --kinds given (comma list of
 * blob-upload, blob-head, blob-get, manifest-put, manifest-get, any; default
 * any): the first --fail N get CODE (default 500), the next --throttle N get
 * 429 with Retry-After: S (default 1).  --drop-after B --drop-count N: blob
 * upload bodies (PATCH/PUT under /blobs/uploads/) are counted as they pass;
 * the request that would carry the count past B has only part of its body read
 * before the client connection is closed, without anything reaching the
 * registry (N times; the count restarts after each drop).
 * --referrers-api: answers GET /v2/NAME/referrers/DIGEST from the registry's
 * tag-scheme index (an empty index when there is none), as a registry with
 * the referrers API would.
 *
 * --fake MODE answers every request itself: GET /v2/ 200 (garbage-auth: 401
 * with a garbage WWW-Authenticate); manifests: bad-digest (Docker-Content-Digest
 * is not the body's), big-json (a 5 MiB manifest), bad-json (not JSON),
 * redirect (307 to the same port under the name "localhost"), bad-blob (a
 * valid manifest whose config blob bytes do not match its digest); referrers
 * and anything else 404.
 *
 * --log FILE: one line per request "METHOD PATH STATUS in=BODYBYTES auth=yes|no"
 * (PATH without the query), flushed at once.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/sha256.h"
#include "util/banned.h"

#define HEAD_MAX (64 * 1024)
#define UPSTREAM_MAX ((size_t)8 << 20)

static struct {
	int up_port;
	const char *fake;
	FILE *log;
	char kinds[256];
	long fail, fail_status, throttle, retry_after;
	long long drop_after, drop_count, blob_bytes;
	bool referrers_api;
	int port;
	pthread_mutex_t mu;
} G = {.fail_status = 500, .retry_after = 1, .mu = PTHREAD_MUTEX_INITIALIZER};

static const char CONFIG[] = "{\"architecture\":\"amd64\",\"os\":\"linux\",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}";

static bool write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0) {
			if (w < 0 && errno == EINTR)
				continue;
			return false;
		}
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static void logline(const char *method, const char *target, int status, long long in, bool auth)
{
	size_t n = strcspn(target, "?");
	pthread_mutex_lock(&G.mu);
	if (G.log) {
		fprintf(G.log, "%s %.*s %d in=%lld auth=%s\n", method, (int)n, target, status, in,
			auth ? "yes" : "no");
		fflush(G.log);
	}
	pthread_mutex_unlock(&G.mu);
}

static void reply(int fd, int status, const char *extra_headers, const char *body, size_t len)
{
	char head[1024];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n", status, len,
			 extra_headers ? extra_headers : "");
	if (n > 0 && (size_t)n < sizeof(head) && write_all(fd, head, (size_t)n) && len)
		write_all(fd, body, len);
}

/* Read and discard (or count) n body bytes; false on EOF. */
static bool drain(int fd, long long n)
{
	char buf[65536];
	while (n > 0) {
		ssize_t r = recv(fd, buf, n > (long long)sizeof(buf) ? sizeof(buf) : (size_t)n, 0);
		if (r <= 0)
			return false;
		n -= r;
	}
	return true;
}

static bool kind_matches(const char *method, const char *path)
{
	char k[32] = "any";
	if (strstr(path, "/blobs/uploads/"))
		snprintf(k, sizeof(k), "blob-upload");
	else if (strstr(path, "/blobs/"))
		snprintf(k, sizeof(k), !strcmp(method, "HEAD") ? "blob-head" : "blob-get");
	else if (strstr(path, "/manifests/"))
		snprintf(k, sizeof(k), !strcmp(method, "PUT") ? "manifest-put" : "manifest-get");
	if (!G.kinds[0] || strstr(G.kinds, "any"))
		return true;
	return strstr(G.kinds, k) != NULL;
}

static int connect_upstream(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)G.up_port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

static void hex_of(char hex[65], const char *s, size_t n) { nf_sha256_hex(hex, s, n); }

static void fake(int fd, const char *method, const char *path, bool auth)
{
	char hex[65], chex[65], hdr[512], *man = NULL;
	int status = 404;
	const char *mode = G.fake;

	hex_of(chex, CONFIG, sizeof(CONFIG) - 1);
	if (asprintf(&man,
		     "{\"config\":{\"digest\":\"sha256:%s\",\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"size\":%zu},\"layers\":[],\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"schemaVersion\":2}",
		     chex, sizeof(CONFIG) - 1) < 0)
		man = NULL;
	if (!man)
		return;
	hex_of(hex, man, strlen(man));
	if (!strcmp(path, "/v2/") || !strcmp(path, "/v2")) {
		if (!strcmp(mode, "garbage-auth")) {
			status = 401;
			reply(fd, 401, "WWW-Authenticate: Bearer realm=<<<\x01garbage,,==\r\n", "", 0);
		} else {
			status = 200;
			reply(fd, 200, "Docker-Distribution-API-Version: registry/2.0\r\n", "{}", 2);
		}
	} else if (strstr(path, "/manifests/")) {
		status = 200;
		if (!strcmp(mode, "bad-digest")) {
			reply(fd, 200,
			      "Content-Type: application/vnd.oci.image.manifest.v1+json\r\n"
			      "Docker-Content-Digest: sha256:0000000000000000000000000000000000000000000000000000000000000000\r\n",
			      man, strlen(man));
		} else if (!strcmp(mode, "big-json")) {
			size_t n = (size_t)5 << 20;
			char *big = malloc(n);
			if (big) {
				memset(big, ' ', n);
				big[0] = '{';
				big[n - 1] = '}';
				reply(fd, 200, "Content-Type: application/vnd.oci.image.manifest.v1+json\r\n", big, n);
				free(big);
			}
		} else if (!strcmp(mode, "bad-json")) {
			reply(fd, 200, "Content-Type: application/vnd.oci.image.manifest.v1+json\r\n", "{\"schemaVersion\":2,", 19);
		} else if (!strcmp(mode, "redirect")) {
			status = 307;
			snprintf(hdr, sizeof(hdr), "Location: http://localhost:%d/elsewhere%s\r\n", G.port, path);
			reply(fd, 307, hdr, "", 0);
		} else {
			snprintf(hdr, sizeof(hdr),
				 "Content-Type: application/vnd.oci.image.manifest.v1+json\r\nDocker-Content-Digest: sha256:%s\r\n", hex);
			reply(fd, 200, hdr, !strcmp(method, "HEAD") ? "" : man, !strcmp(method, "HEAD") ? 0 : strlen(man));
		}
	} else if (strstr(path, "/blobs/sha256:") && !strcmp(mode, "bad-blob") && strstr(path, chex)) {
		char *bad = strdup(CONFIG);
		status = 200;
		if (bad) {
			bad[2] = 'X'; /* same size, other bytes */
			reply(fd, 200, "Content-Type: application/octet-stream\r\n", bad, strlen(bad));
			free(bad);
		}
	} else {
		reply(fd, 404, "Content-Type: application/json\r\n", "{\"errors\":[{\"code\":\"NOT_FOUND\",\"message\":\"no\"}]}", 48);
	}
	logline(method, path, status, 0, auth);
	free(man);
}

/* Read the whole upstream answer (bounded); returns its length or -1. */
static ssize_t read_all(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	for (;;) {
		ssize_t r = recv(fd, buf + n, cap - n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			return (ssize_t)n;
		n += (size_t)r;
		if (n == cap)
			return -1;
	}
}

/* GET /v2/NAME/referrers/sha256:HEX from the tag scheme. */
static void referrers(int fd, const char *method, const char *path, bool auth, const char *authline)
{
	const char *r = strstr(path, "/referrers/sha256:");
	char req[4096], *buf = NULL;
	int up = -1, status = 502;
	ssize_t n;
	const char *empty = "{\"manifests\":[],\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"schemaVersion\":2}";
	const char *ctype = "Content-Type: application/vnd.oci.image.index.v1+json\r\n";

	int m = snprintf(req, sizeof(req),
			 "GET %.*s/manifests/sha256-%.64s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/vnd.oci.image.index.v1+json\r\n%sConnection: close\r\n\r\n",
			 (int)(r - path), path, r + 18, authline);
	if (m <= 0 || (size_t)m >= sizeof(req) || (up = connect_upstream()) < 0 ||
	    !write_all(up, req, (size_t)m) || !(buf = malloc(UPSTREAM_MAX)) ||
	    (n = read_all(up, buf, UPSTREAM_MAX - 1)) < 12) {
		reply(fd, 502, NULL, "", 0);
		goto done;
	}
	buf[n] = '\0';
	status = (int)strtol(buf + 9, NULL, 10);
	if (status == 404) {
		status = 200;
		reply(fd, 200, ctype, empty, strlen(empty));
	} else if (status == 200) {
		char *body = strstr(buf, "\r\n\r\n");
		body = body ? body + 4 : buf + n;
		reply(fd, 200, ctype, body, (size_t)(buf + n - body));
	} else {
		reply(fd, status, NULL, "", 0);
	}
done:
	logline(method, path, status, 0, auth);
	if (up >= 0)
		close(up);
	free(buf);
}

static void *serve(void *arg)
{
	int fd = (int)(intptr_t)arg, up = -1, status = 0;
	char *head = malloc(HEAD_MAX + 1), *end = NULL, method[16] = "", *target = NULL, authline[2048] = "";
	size_t have = 0;
	long long cl = 0, in = 0;
	bool auth = false, blob_body;

	if (!head)
		goto done;
	while (!end) {
		ssize_t r = recv(fd, head + have, HEAD_MAX - have, 0);
		if (r <= 0)
			goto done;
		have += (size_t)r;
		head[have] = '\0';
		end = strstr(head, "\r\n\r\n");
		if (!end && have == HEAD_MAX)
			goto done;
	}
	size_t head_len = (size_t)(end + 4 - head);
	if (sscanf(head, "%15s", method) != 1)
		goto done;
	{
		char *sp = strchr(head, ' '), *sp2 = sp ? strchr(sp + 1, ' ') : NULL;
		if (!sp || !sp2)
			goto done;
		target = strndup(sp + 1, (size_t)(sp2 - sp - 1));
		if (!target)
			goto done;
	}
	for (char *l = strstr(head, "\r\n") + 2; l < end; l = strstr(l, "\r\n") + 2) {
		if (!strncasecmp(l, "Content-Length:", 15))
			cl = strtoll(l + 15, NULL, 10);
		if (!strncasecmp(l, "Authorization:", 14)) {
			size_t ln = (size_t)(strstr(l, "\r\n") - l);
			auth = true;
			if (ln + 3 < sizeof(authline))
				snprintf(authline, sizeof(authline), "%.*s\r\n", (int)ln, l);
		}
	}
	if (G.fake) {
		drain(fd, cl - (long long)(have - head_len));
		fake(fd, method, target, auth);
		goto done;
	}
	if (G.referrers_api && !strcmp(method, "GET") && strstr(target, "/referrers/sha256:") &&
	    strlen(strstr(target, "/referrers/sha256:")) >= 18 + 64) {
		referrers(fd, method, target, auth, authline);
		goto done;
	}
	blob_body = strstr(target, "/blobs/uploads/") && cl > 0 &&
		    (!strcmp(method, "PATCH") || !strcmp(method, "PUT"));
	/* faults */
	{
		int fault = 0;
		long long keep = -1;
		pthread_mutex_lock(&G.mu);
		if (kind_matches(method, target)) {
			if (G.fail > 0) {
				G.fail--;
				fault = (int)G.fail_status;
			} else if (G.throttle > 0) {
				G.throttle--;
				fault = 429;
			}
		}
		if (!fault && blob_body && G.drop_count > 0) {
			if (G.blob_bytes + cl > G.drop_after) {
				keep = G.drop_after - G.blob_bytes;
				G.drop_count--;
				G.blob_bytes = 0;
			} else {
				G.blob_bytes += cl;
			}
		}
		pthread_mutex_unlock(&G.mu);
		if (fault) {
			char h[64];
			drain(fd, cl - (long long)(have - head_len));
			snprintf(h, sizeof(h), "Retry-After: %ld\r\n", G.retry_after);
			reply(fd, fault, fault == 429 ? h : NULL, "", 0);
			logline(method, target, fault, 0, auth);
			goto done;
		}
		if (keep >= 0) {
			long long got = (long long)(have - head_len);
			if (got < keep)
				drain(fd, keep - got);
			logline(method, target, -1, keep, auth); /* -1: dropped */
			shutdown(fd, SHUT_RDWR);
			goto done;
		}
	}
	/* forward: the head without Connection headers, then the body, then the answer */
	if ((up = connect_upstream()) < 0) {
		reply(fd, 502, NULL, "", 0);
		goto done;
	}
	{
		char *line_end = strstr(head, "\r\n");
		if (!write_all(up, head, (size_t)(line_end + 2 - head)))
			goto done;
		for (char *l = line_end + 2; l < end; l = strstr(l, "\r\n") + 2) {
			size_t ln = (size_t)(strstr(l, "\r\n") + 2 - l);
			if (!strncasecmp(l, "Connection:", 11) || !strncasecmp(l, "Keep-Alive:", 11))
				continue;
			if (!write_all(up, l, ln))
				goto done;
		}
		if (!write_all(up, "Connection: close\r\n\r\n", 21))
			goto done;
		size_t extra = have - head_len;
		if (extra && !write_all(up, head + head_len, extra))
			goto done;
		in = (long long)extra;
		char buf[65536];
		while (in < cl) {
			ssize_t r = recv(fd, buf, cl - in > (long long)sizeof(buf) ? sizeof(buf) : (size_t)(cl - in), 0);
			if (r <= 0 || !write_all(up, buf, (size_t)r))
				goto done;
			in += r;
		}
		bool first = true;
		for (;;) {
			ssize_t r = recv(up, buf, sizeof(buf), 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			if (first && r > 12) {
				status = (int)strtol(buf + 9, NULL, 10);
				first = false;
			}
			if (!write_all(fd, buf, (size_t)r))
				break;
		}
	}
	logline(method, target, status, in, auth);
done:
	if (up >= 0)
		close(up);
	close(fd);
	free(head);
	free(target);
	return NULL;
}

static long num(const char *s)
{
	char *e = NULL;
	long long v = strtoll(s, &e, 10);
	if (!*s || *e || v < 0) {
		fprintf(stderr, "nf_fault_proxy: '%s' is not a number\n", s);
		exit(2);
	}
	return (long)v;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	long max_seconds = 120;
	int ls;

	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(o, "--referrers-api")) {
			G.referrers_api = true;
			continue;
		}
		if (!v) {
			fprintf(stderr, "nf_fault_proxy: %s needs a value (see the source header)\n", o);
			return 2;
		}
		i++;
		if (!strcmp(o, "--upstream")) {
			if (strncmp(v, "127.0.0.1:", 10)) {
				fprintf(stderr, "nf_fault_proxy: upstream must be 127.0.0.1:PORT\n");
				return 2;
			}
			G.up_port = (int)num(v + 10);
		} else if (!strcmp(o, "--fake")) {
			G.fake = v;
		} else if (!strcmp(o, "--log")) {
			G.log = fopen(v, "a");
		} else if (!strcmp(o, "--max-seconds")) {
			max_seconds = num(v);
		} else if (!strcmp(o, "--kinds")) {
			snprintf(G.kinds, sizeof(G.kinds), "%s", v);
		} else if (!strcmp(o, "--fail")) {
			G.fail = num(v);
		} else if (!strcmp(o, "--fail-status")) {
			G.fail_status = num(v);
		} else if (!strcmp(o, "--throttle")) {
			G.throttle = num(v);
		} else if (!strcmp(o, "--retry-after")) {
			G.retry_after = num(v);
		} else if (!strcmp(o, "--drop-after")) {
			G.drop_after = num(v);
		} else if (!strcmp(o, "--drop-count")) {
			G.drop_count = num(v);
		} else {
			fprintf(stderr, "nf_fault_proxy: unknown option %s\n", o);
			return 2;
		}
	}
	if (!G.fake && !G.up_port) {
		fprintf(stderr, "usage: nf_fault_proxy --upstream 127.0.0.1:PORT | --fake MODE [...]\n");
		return 2;
	}
	ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 64) ||
	    getsockname(ls, (struct sockaddr *)&a, &al)) {
		perror("nf_fault_proxy");
		return 4;
	}
	G.port = ntohs(a.sin_port);
	printf("%d\n", G.port);
	fflush(stdout);
	signal(SIGPIPE, SIG_IGN);
	alarm((unsigned)max_seconds); /* bounded lifetime: SIGALRM ends the process */
	for (;;) {
		pthread_t t;
		pthread_attr_t at;
		int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			return 4;
		}
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &at, serve, (void *)(intptr_t)fd))
			close(fd);
		pthread_attr_destroy(&at);
	}
}
