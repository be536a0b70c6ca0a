/*
 * nf_loadgen.c - a load generator for nimserve and any OpenAI-compatible
 * server (llama.cpp's llama-server in `make bench`): N concurrent clients each
 * stream R completions one after another; reports aggregate tokens/s, time to
 * first token and inter-token latency (p50/p99).
 *
 *   nf_loadgen (--port P [--host 127.0.0.1] | --url http://IPV4:PORT[/PATH])
 *              [--path /v1/completions] [--clients N] [--requests R]
 *              [--max-tokens T] [--prompt TEXT | --prompts FILE] [--model NAME]
 *              [--ignore-eos] [--timeout S] [--json] [--gaps FILE]
 *              [--chat] [--escapes]
 *
 * --prompts FILE: one prompt per line (at most 256 lines of 4000 bytes);
 * request k of client i sends prompt (i + k * N) mod lines, so every run of the
 * same N and R sends the same prompts in the same order, whatever the server.
 * --ignore-eos adds "ignore_eos":true (llama.cpp; nimserve rejects unknown
 * fields).  --chat sends each prompt as the one user message of a chat
 * completion ({"messages":[{"role":"user","content":PROMPT}]}, path
 * /v1/chat/completions unless --path or --url names one), so the server renders
 * it with its chat template; it asks for the usage chunk with
 * "stream_options":{"include_usage":true}, which chat streams (llama-server's
 * among them) send only when asked.  --escapes decodes \n, \t and \\ in the
 * prompts (a prompt already rendered through a chat template has newlines and
 * must fit on one line of --prompts FILE).  Requests are HTTP/1.0 POSTs of
 * {"model","prompt","max_tokens","temperature":0,"stream":true}; the response
 * may be chunked (llama-server answers HTTP/1.1 chunked) or not, and a stream
 * ends at "data: [DONE]" or when the server closes.  Generated tokens are the
 * usage counts of the final chunk (when a server sends none, the content chunks
 * are counted and the output says how many requests lacked usage).  TTFT runs
 * from connect to the first content chunk; inter-token gaps between content
 * chunks, as the client sees them.  --gaps FILE writes every gap as a line
 * "CLIENT END_MS GAP_MS" (END_MS from the start of the run), to see which steps
 * make the tail.  Exit 0; 1 when any request failed (the first failure is on
 * stderr); 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "util/banned.h"

#define MAX_PROMPTS 256
#define MAX_PROMPT_BYTES 4000

typedef struct samples {
	double *v;
	size_t n, cap;
} samples;

typedef struct client {
	pthread_t th;
	int index;
	int requests;
	long tokens;
	int errors;
	int no_usage;
	samples ttft, itl;
	samples itl_at; /* when each gap ended, seconds from the start (--gaps) */
	char first_error[200];
} client;

/* A growable byte buffer (the raw socket bytes, or the decoded body line). */
typedef struct bytes {
	char *p;
	size_t n, cap;
} bytes;

static const char *g_host = "127.0.0.1", *g_path = "/v1/completions", *g_model = "stories260k";
static int g_port, g_requests = 4, g_max_tokens = 64, g_ignore_eos, g_clients = 1;
static int g_timeout_s = 120;
static int g_chat, g_escapes, g_path_set; /* --chat, --escapes, a path given */
static char *g_req[MAX_PROMPTS]; /* the whole HTTP request for each prompt */
static size_t g_req_len[MAX_PROMPTS];
static int g_nprompts;
static double g_t0; /* when the clients started */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void add(samples *s, double v)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		double *p = realloc(s->v, cap * sizeof *p);
		if (!p)
			return;
		s->v = p;
		s->cap = cap;
	}
	s->v[s->n++] = v;
}

static int bytes_put(bytes *b, const void *data, size_t n)
{
	if (n > ((size_t)1 << 24) || b->n + n + 1 > ((size_t)1 << 24))
		return -1; /* no sane stream line or header is this long */
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;
		while (cap < b->n + n + 1)
			cap *= 2;
		if (!(p = realloc(b->p, cap)))
			return -1;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, n);
	b->n += n;
	b->p[b->n] = '\0';
	return 0;
}

static void bytes_drop(bytes *b, size_t n)
{
	memmove(b->p, b->p + n, b->n - n);
	b->n -= n;
	b->p[b->n] = '\0';
}

static void fail(client *c, const char *fmt, const char *arg)
{
	if (!c->first_error[0])
		snprintf(c->first_error, sizeof c->first_error, fmt, arg);
}

/* The state of one streamed response. */
typedef struct stream {
	client *c;
	double t0, last;
	int got_first, done;
	long usage, chunks;
} stream;

/* One complete body line (NUL-terminated, without its '\n') arrived at t. */
static void on_line(stream *s, char *line, double t)
{
	const char *u, *tx;
	if (!strncmp(line, "data: [DONE]", 12)) {
		s->done = 1;
		return;
	}
	if (strncmp(line, "data: ", 6) != 0)
		return;
	if ((u = strstr(line, "\"completion_tokens\":")))
		s->usage = strtol(u + 20, NULL, 10);
	/* completions carry "text", chat streams "content"; empty ones are not tokens */
	tx = strstr(line, "\"text\":\"");
	if (!tx && (tx = strstr(line, "\"content\":\"")))
		tx += 3;
	if (tx && tx[8] != '"') {
		if (!s->got_first) {
			add(&s->c->ttft, t - s->t0);
			s->got_first = 1;
		} else {
			add(&s->c->itl, t - s->last);
			add(&s->c->itl_at, t - g_t0);
		}
		s->last = t;
		s->chunks++;
	}
}

/* Feed decoded body bytes; complete lines go to on_line. */
static int body_feed(stream *s, bytes *line, const char *data, size_t n, double t)
{
	const char *nl;
	while (n > 0 && !s->done) {
		size_t take;
		nl = memchr(data, '\n', n);
		take = nl ? (size_t)(nl - data) : n;
		if (bytes_put(line, data, take) < 0)
			return -1;
		if (!nl)
			break;
		if (line->n > 0 && line->p[line->n - 1] == '\r')
			line->p[--line->n] = '\0';
		on_line(s, line->p, t);
		line->n = 0;
		data += take + 1;
		n -= take + 1;
	}
	return 0;
}

static int connect_server(void)
{
	struct sockaddr_in sa;
	struct timeval tv = {.tv_sec = g_timeout_s, .tv_usec = 0};
	int fd, one_ = 1;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)g_port);
	if (inet_pton(AF_INET, g_host, &sa.sin_addr) != 1)
		return -1;
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one_, sizeof one_);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One streamed request with prompt number pi; returns 0 on a complete stream. */
static int one(client *c, int pi)
{
	bytes in = {0}, line = {0};
	stream s = {.c = c, .usage = -1};
	int fd = -1, rc = -1, in_body = 0, chunked = 0, eof = 0;
	size_t chunk_left = 0; /* body bytes left in the current chunk */
	int want_size = 1;     /* chunked: the next thing is a chunk-size line */
	const char *req = g_req[pi];
	size_t off = 0, len = g_req_len[pi];

	s.t0 = now();
	if ((fd = connect_server()) < 0) {
		fail(c, "cannot connect: %s", strerror(errno));
		goto done;
	}
	while (off < len) {
		ssize_t w = write(fd, req + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			fail(c, "cannot send the request: %s", strerror(errno));
			goto done;
		}
		off += (size_t)w;
	}
	while (!s.done && !eof) {
		char buf[65536];
		ssize_t r = read(fd, buf, sizeof buf);
		double t = now();
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fail(c, "read: %s", strerror(errno));
			goto done;
		}
		if (r == 0)
			eof = 1;
		if (bytes_put(&in, buf, (size_t)r) < 0) {
			fail(c, "%s", "a header or line over 16 MiB");
			goto done;
		}
		if (!in_body) {
			char *end = strstr(in.p, "\r\n\r\n");
			if (!end) {
				if (eof)
					fail(c, "%s", "the connection closed inside the headers");
				continue;
			}
			*end = '\0';
			if (strncmp(in.p, "HTTP/1.", 7) != 0 || strncmp(in.p + 8, " 200", 4) != 0) {
				char *cr = strchr(in.p, '\r');
				if (cr)
					*cr = '\0';
				fail(c, "status: %s", in.p);
				goto done;
			}
			for (char *h = in.p; (h = strchr(h, '\n')); h++)
				if (!strncasecmp(h + 1, "transfer-encoding:", 18) && strstr(h + 1, "chunked"))
					chunked = 1;
			bytes_drop(&in, (size_t)(end + 4 - in.p));
			in_body = 1;
		}
		if (!chunked) {
			if (body_feed(&s, &line, in.p, in.n, t) < 0)
				goto done;
			in.n = 0;
			continue;
		}
		for (;;) { /* chunked transfer coding */
			if (want_size) {
				char *crlf = strstr(in.p, "\r\n"), *e;
				unsigned long long sz;
				if (!crlf)
					break;
				sz = strtoull(in.p, &e, 16);
				if (e == in.p || sz > ((size_t)1 << 24)) {
					fail(c, "%s", "bad chunk size");
					goto done;
				}
				bytes_drop(&in, (size_t)(crlf + 2 - in.p));
				if (sz == 0) {
					eof = 1; /* the last chunk */
					break;
				}
				chunk_left = (size_t)sz;
				want_size = 0;
			}
			if (chunk_left > 0) {
				size_t take = in.n < chunk_left ? in.n : chunk_left;
				if (take == 0)
					break;
				if (body_feed(&s, &line, in.p, take, t) < 0)
					goto done;
				bytes_drop(&in, take);
				chunk_left -= take;
			}
			if (chunk_left == 0) {
				if (in.n < 2)
					break;
				bytes_drop(&in, 2); /* the CRLF after the chunk data */
				want_size = 1;
			}
		}
	}
	if (!s.done) {
		fail(c, "%s", "the stream ended without data: [DONE]");
		goto done;
	}
	if (s.usage < 0) {
		c->no_usage++;
		s.usage = s.chunks;
	}
	c->tokens += s.usage;
	rc = 0;
done:
	if (fd >= 0)
		close(fd);
	free(in.p);
	free(line.p);
	return rc;
}

static void *client_main(void *arg)
{
	client *c = arg;
	for (int k = 0; k < g_requests; k++) {
		int pi = (int)(((long)c->index + (long)k * g_clients) % g_nprompts);
		if (one(c, pi) < 0)
			c->errors++;
		c->requests++;
	}
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(samples *s, double p)
{
	size_t i;
	if (!s->n)
		return 0;
	qsort(s->v, s->n, sizeof *s->v, cmp);
	i = (size_t)(p * (double)(s->n - 1) + 0.5);
	return s->v[i];
}

/* JSON string body of text (without quotes) into out; -1 when it does not fit. */
static int json_escape(char *out, size_t cap, const char *text)
{
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
		char tmp[8];
		int n;
		if (*p == '"' || *p == '\\')
			n = snprintf(tmp, sizeof tmp, "\\%c", *p);
		else if (*p < 0x20)
			n = snprintf(tmp, sizeof tmp, "\\u%04x", *p);
		else
			n = snprintf(tmp, sizeof tmp, "%c", *p);
		if (n <= 0 || o + (size_t)n >= cap)
			return -1;
		memcpy(out + o, tmp, (size_t)n);
		o += (size_t)n;
	}
	out[o] = '\0';
	return 0;
}

/* Decode \n, \t and \\ in place (--escapes); another backslash stays. */
static void unescape(char *text)
{
	char *o = text;
	for (const char *p = text; *p; p++) {
		if (p[0] == '\\' && (p[1] == 'n' || p[1] == 't' || p[1] == '\\')) {
			p++;
			*o++ = *p == 'n' ? '\n' : *p == 't' ? '\t' : '\\';
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
}

/* The JSON body of a request for the escaped prompt esc into out (cap
 * bytes; NULL, 0 to measure): snprintf's count. */
static int request_body(char *out, size_t cap, const char *esc)
{
	const char *eos = g_ignore_eos ? ",\"ignore_eos\":true" : "";
	if (g_chat)
		return snprintf(out, cap,
				"{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],"
				"\"max_tokens\":%d,\"temperature\":0,\"stream\":true,"
				"\"stream_options\":{\"include_usage\":true}%s}",
				g_model, esc, g_max_tokens, eos);
	return snprintf(out, cap,
			"{\"model\":\"%s\",\"prompt\":\"%s\",\"max_tokens\":%d,\"temperature\":0,"
			"\"stream\":true%s}",
			g_model, esc, g_max_tokens, eos);
}

static int add_prompt(const char *text)
{
	static char esc[MAX_PROMPT_BYTES * 6 + 1], raw[MAX_PROMPT_BYTES + 1];
	char head[512];
	int blen, hlen;
	size_t total;
	char *r;
	if (g_nprompts == MAX_PROMPTS || strlen(text) > MAX_PROMPT_BYTES)
		return -1;
	memcpy(raw, text, strlen(text) + 1);
	if (g_escapes)
		unescape(raw);
	if (json_escape(esc, sizeof esc, raw) < 0)
		return -1;
	/* the body first, for Content-Length */
	blen = request_body(NULL, 0, esc);
	hlen = snprintf(head, sizeof head,
			"POST %s HTTP/1.0\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
			"Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n",
			g_path, g_host, g_port, blen);
	if (blen <= 0 || hlen <= 0 || (size_t)hlen >= sizeof head)
		return -1;
	total = (size_t)hlen + (size_t)blen;
	if (!(r = malloc(total + 1)))
		return -1;
	memcpy(r, head, (size_t)hlen);
	request_body(r + hlen, (size_t)blen + 1, esc);
	g_req[g_nprompts] = r;
	g_req_len[g_nprompts] = total;
	g_nprompts++;
	return 0;
}

static int load_prompts(const char *path)
{
	FILE *f = fopen(path, "r");
	char *ln = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0, lineno = 0;
	if (!f) {
		fprintf(stderr, "nf_loadgen: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((n = getline(&ln, &cap, f)) >= 0) {
		lineno++;
		while (n > 0 && (ln[n - 1] == '\n' || ln[n - 1] == '\r'))
			ln[--n] = '\0';
		if (n == 0)
			continue;
		if (add_prompt(ln) < 0) {
			fprintf(stderr, "nf_loadgen: %s:%d: more than %d prompts or one over %d bytes\n",
				path, lineno, MAX_PROMPTS, MAX_PROMPT_BYTES);
			rc = -1;
			break;
		}
	}
	free(ln);
	fclose(f);
	if (rc == 0 && g_nprompts == 0) {
		fprintf(stderr, "nf_loadgen: %s: no prompts\n", path);
		rc = -1;
	}
	return rc;
}

/* http://IPV4:PORT[/PATH] */
static int parse_url(const char *url)
{
	static char host[64], path[1024];
	const char *h, *colon, *slash;
	char *e;
	long port;
	if (strncmp(url, "http://", 7) != 0)
		return -1;
	h = url + 7;
	colon = strchr(h, ':');
	if (!colon || (size_t)(colon - h) >= sizeof host)
		return -1;
	memcpy(host, h, (size_t)(colon - h));
	host[colon - h] = '\0';
	port = strtol(colon + 1, &e, 10);
	if (e == colon + 1 || port <= 0 || port > 65535 || (*e && *e != '/'))
		return -1;
	slash = e;
	if (*slash) {
		if (strlen(slash) >= sizeof path)
			return -1;
		memcpy(path, slash, strlen(slash) + 1);
		if (strcmp(path, "/") != 0)
			g_path = path, g_path_set = 1;
	}
	g_host = host;
	g_port = (int)port;
	return 0;
}

static int num(int *out, const char *v, long lo, long hi)
{
	char *e;
	long x;
	errno = 0;
	x = strtol(v, &e, 10);
	if (errno || e == v || *e || x < lo || x > hi)
		return -1;
	*out = (int)x;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: nf_loadgen (--port P [--host IPV4] | --url http://IPV4:PORT[/PATH]) "
			"[--path PATH] [--clients N] [--requests R] [--max-tokens T]\n"
			"                  [--prompt TEXT | --prompts FILE] [--model NAME] "
			"[--ignore-eos] [--timeout S] [--json] [--gaps FILE]\n"
			"                  [--chat] [--escapes]\n");
}

int main(int argc, char **argv)
{
	const char *prompt = "Once upon a time", *prompts_file = NULL, *gaps_file = NULL;
	FILE *gaps = NULL;
	int json = 0, rc = 1, bad = 0;
	client *cs = NULL;
	samples ttft = {0}, itl = {0};
	long tokens = 0;
	int errors = 0, reqs = 0, no_usage = 0;
	const char *first_error = NULL;
	struct in_addr ia;
	double wall;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--json")) {
			json = 1;
			continue;
		}
		if (!strcmp(a, "--ignore-eos")) {
			g_ignore_eos = 1;
			continue;
		}
		if (!strcmp(a, "--chat")) {
			g_chat = 1;
			continue;
		}
		if (!strcmp(a, "--escapes")) {
			g_escapes = 1;
			continue;
		}
		if (!v) {
			fprintf(stderr, "nf_loadgen: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (!strcmp(a, "--port"))
			bad |= num(&g_port, v, 1, 65535);
		else if (!strcmp(a, "--host"))
			g_host = v;
		else if (!strcmp(a, "--url"))
			bad |= parse_url(v);
		else if (!strcmp(a, "--path"))
			g_path = v, g_path_set = 1;
		else if (!strcmp(a, "--clients"))
			bad |= num(&g_clients, v, 1, 1024);
		else if (!strcmp(a, "--requests"))
			bad |= num(&g_requests, v, 1, 1000000);
		else if (!strcmp(a, "--max-tokens"))
			bad |= num(&g_max_tokens, v, 1, 1000000);
		else if (!strcmp(a, "--timeout"))
			bad |= num(&g_timeout_s, v, 1, 86400);
		else if (!strcmp(a, "--prompt"))
			prompt = v;
		else if (!strcmp(a, "--prompts"))
			prompts_file = v;
		else if (!strcmp(a, "--model"))
			g_model = v;
		else if (!strcmp(a, "--gaps"))
			gaps_file = v;
		else {
			fprintf(stderr, "nf_loadgen: unknown option %s\n", a);
			usage();
			return 2;
		}
	}
	if (g_chat && !g_path_set)
		g_path = "/v1/chat/completions";
	if (bad || g_port == 0 || inet_pton(AF_INET, g_host, &ia) != 1 || g_path[0] != '/' ||
	    strpbrk(g_path, " \r\n") ||
	    strpbrk(g_model, "\"\\") || strlen(g_model) > 200 || strlen(g_host) > 63) {
		usage();
		return 2;
	}
	if (prompts_file ? load_prompts(prompts_file) < 0 : add_prompt(prompt) < 0) {
		if (!prompts_file)
			fprintf(stderr, "nf_loadgen: the prompt is over %d bytes\n", MAX_PROMPT_BYTES);
		rc = 2;
		goto done;
	}
	if (!(cs = calloc((size_t)g_clients, sizeof *cs)))
		goto done;
	if (gaps_file && !(gaps = fopen(gaps_file, "w"))) {
		fprintf(stderr, "nf_loadgen: cannot write %s\n", gaps_file);
		rc = 2;
		goto done;
	}
	g_t0 = now();
	for (int i = 0; i < g_clients; i++) {
		cs[i].index = i;
		if (pthread_create(&cs[i].th, NULL, client_main, &cs[i]) != 0) {
			fprintf(stderr, "nf_loadgen: cannot start client %d\n", i);
			exit(1);
		}
	}
	for (int i = 0; i < g_clients; i++) {
		pthread_join(cs[i].th, NULL);
		tokens += cs[i].tokens;
		errors += cs[i].errors;
		reqs += cs[i].requests;
		no_usage += cs[i].no_usage;
		if (!first_error && cs[i].first_error[0])
			first_error = cs[i].first_error;
		for (size_t k = 0; k < cs[i].ttft.n; k++)
			add(&ttft, cs[i].ttft.v[k]);
		for (size_t k = 0; k < cs[i].itl.n; k++) {
			add(&itl, cs[i].itl.v[k]);
			if (gaps)
				fprintf(gaps, "%d %.3f %.3f\n", i, cs[i].itl_at.v[k] * 1e3,
					cs[i].itl.v[k] * 1e3);
		}
		free(cs[i].ttft.v);
		free(cs[i].itl.v);
		free(cs[i].itl_at.v);
	}
	wall = now() - g_t0;
	if (first_error)
		fprintf(stderr, "nf_loadgen: %d of %d requests failed; first: %s\n", errors, reqs,
			first_error);
	if (json)
		printf("{\"clients\":%d,\"requests\":%d,\"errors\":%d,\"tokens\":%ld,"
		       "\"tokens_per_request\":%.1f,\"requests_without_usage\":%d,\"seconds\":%.3f,"
		       "\"tokens_per_second\":%.1f,\"ttft_p50_ms\":%.2f,\"ttft_p99_ms\":%.2f,"
		       "\"itl_p50_ms\":%.3f,\"itl_p99_ms\":%.3f}\n",
		       g_clients, reqs, errors, tokens, reqs > errors ? (double)tokens / (reqs - errors) : 0.0,
		       no_usage, wall, (double)tokens / wall, pct(&ttft, 0.5) * 1e3, pct(&ttft, 0.99) * 1e3,
		       pct(&itl, 0.5) * 1e3, pct(&itl, 0.99) * 1e3);
	else
		printf("clients %d  requests %d  errors %d  tokens %ld  %.2f s  %.1f tok/s  "
		       "TTFT p50 %.2f ms p99 %.2f ms  ITL p50 %.3f ms p99 %.3f ms\n",
		       g_clients, reqs, errors, tokens, wall, (double)tokens / wall, pct(&ttft, 0.5) * 1e3,
		       pct(&ttft, 0.99) * 1e3, pct(&itl, 0.5) * 1e3, pct(&itl, 0.99) * 1e3);
	rc = errors ? 1 : 0;
done:
	if (gaps && fclose(gaps) != 0) {
		fprintf(stderr, "nf_loadgen: cannot write %s\n", gaps_file);
		rc = 1;
	}
	free(ttft.v);
	free(itl.v);
	free(cs);
	for (int i = 0; i < g_nprompts; i++)
		free(g_req[i]);
	return rc;
}
