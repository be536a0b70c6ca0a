/*
 * nf_loadgen.c - a load generator for nimserve (and any OpenAI-compatible
 * server): N concurrent clients each stream R completions; reports aggregate
 * tokens/s, time to first token and inter-token latency (p50/p99).
 *
 *   nf_loadgen --port P [--host 127.0.0.1] [--clients N] [--requests R]
 *              [--max-tokens T] [--prompt TEXT] [--model NAME] [--json]
 *
 * Plain sockets, HTTP/1.0 (the server closes the connection at the end of the
 * stream, so no chunked decoding).  Tokens are counted from the usage in the
 * final chunk; TTFT and inter-token gaps from the arrival of content chunks.
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/banned.h"

typedef struct samples {
	double *v;
	size_t n, cap;
} samples;

typedef struct client {
	pthread_t th;
	int requests;
	long tokens;
	int errors;
	samples ttft, itl;
} client;

static const char *g_host = "127.0.0.1", *g_prompt = "Once upon a time", *g_model = "stories260k";
static int g_port, g_requests = 4, g_max_tokens = 64;

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

/* One streamed request; returns 0 on a complete stream. */
static int one(client *c)
{
	char body[2048], req[4096], buf[65536];
	size_t have = 0;
	int fd = -1, blen, rlen, rc = -1, got_first = 0, done = 0;
	double t0, last = 0;
	struct sockaddr_in sa;
	long usage = -1;

	blen = snprintf(body, sizeof body,
			"{\"model\":\"%s\",\"prompt\":\"%s\",\"max_tokens\":%d,\"temperature\":0,\"stream\":true}",
			g_model, g_prompt, g_max_tokens);
	rlen = snprintf(req, sizeof req,
			"POST /v1/completions HTTP/1.0\r\nHost: %s\r\nContent-Type: application/json\r\n"
			"Content-Length: %d\r\n\r\n%s", g_host, blen, body);
	if (blen <= 0 || rlen <= 0 || (size_t)rlen >= sizeof req)
		return -1;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)g_port);
	if (inet_pton(AF_INET, g_host, &sa.sin_addr) != 1)
		return -1;
	t0 = now();
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		goto done;
	{
		int one_ = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one_, sizeof one_);
	}
	if (write(fd, req, (size_t)rlen) != rlen)
		goto done;
	for (;;) {
		ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
		char *p, *nl;
		double t = now();
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
		buf[have] = '\0';
		/* consume whole lines */
		p = buf;
		while ((nl = strchr(p, '\n'))) {
			*nl = '\0';
			if (!strncmp(p, "HTTP/1.", 7) && !strstr(p, " 200"))
				goto done;
			if (!strncmp(p, "data: [DONE]", 12)) {
				done = 1;
			} else if (!strncmp(p, "data: ", 6)) {
				const char *u = strstr(p, "\"completion_tokens\":");
				const char *tx = strstr(p, "\"text\":\"");
				if (u)
					usage = strtol(u + 20, NULL, 10);
				if (tx && tx[8] != '"') { /* a content chunk */
					if (!got_first) {
						add(&c->ttft, t - t0);
						got_first = 1;
					} else {
						add(&c->itl, t - last);
					}
					last = t;
				}
			}
			p = nl + 1;
		}
		have = (size_t)(buf + have - p);
		memmove(buf, p, have);
		if (have >= sizeof buf - 1)
			have = 0; /* an absurd line: drop it */
	}
	if (done && usage >= 0) {
		c->tokens += usage;
		rc = 0;
	}
done:
	if (fd >= 0)
		close(fd);
	return rc;
}

static void *client_main(void *arg)
{
	client *c = arg;
	for (int i = 0; i < g_requests; i++) {
		if (one(c) < 0)
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

int main(int argc, char **argv)
{
	int clients = 1, json = 0;
	client *cs;
	samples ttft = {0}, itl = {0};
	long tokens = 0;
	int errors = 0, reqs = 0;
	double t0, wall;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--json")) {
			json = 1;
			continue;
		}
		if (!v) {
			fprintf(stderr, "nf_loadgen: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (!strcmp(a, "--port"))
			g_port = (int)strtol(v, NULL, 10);
		else if (!strcmp(a, "--host"))
			g_host = v;
		else if (!strcmp(a, "--clients"))
			clients = (int)strtol(v, NULL, 10);
		else if (!strcmp(a, "--requests"))
			g_requests = (int)strtol(v, NULL, 10);
		else if (!strcmp(a, "--max-tokens"))
			g_max_tokens = (int)strtol(v, NULL, 10);
		else if (!strcmp(a, "--prompt"))
			g_prompt = v;
		else if (!strcmp(a, "--model"))
			g_model = v;
		else {
			fprintf(stderr, "nf_loadgen: unknown option %s\n", a);
			return 2;
		}
	}
	if (g_port <= 0 || g_port > 65535 || clients < 1 || clients > 1024 || g_requests < 1 ||
	    strpbrk(g_prompt, "\"\\") || strpbrk(g_model, "\"\\") || strlen(g_prompt) > 1000) {
		fprintf(stderr, "usage: nf_loadgen --port P [--clients N] [--requests R] [--max-tokens T] "
				"[--prompt TEXT] [--model NAME] [--json]\n");
		return 2;
	}
	cs = calloc((size_t)clients, sizeof *cs);
	if (!cs)
		return 1;
	t0 = now();
	for (int i = 0; i < clients; i++)
		if (pthread_create(&cs[i].th, NULL, client_main, &cs[i]) != 0)
			return 1;
	for (int i = 0; i < clients; i++) {
		pthread_join(cs[i].th, NULL);
		tokens += cs[i].tokens;
		errors += cs[i].errors;
		reqs += cs[i].requests;
		for (size_t k = 0; k < cs[i].ttft.n; k++)
			add(&ttft, cs[i].ttft.v[k]);
		for (size_t k = 0; k < cs[i].itl.n; k++)
			add(&itl, cs[i].itl.v[k]);
		free(cs[i].ttft.v);
		free(cs[i].itl.v);
	}
	wall = now() - t0;
	if (json)
		printf("{\"clients\":%d,\"requests\":%d,\"errors\":%d,\"tokens\":%ld,\"seconds\":%.3f,"
		       "\"tokens_per_second\":%.1f,\"ttft_p50_ms\":%.2f,\"ttft_p99_ms\":%.2f,"
		       "\"itl_p50_ms\":%.3f,\"itl_p99_ms\":%.3f}\n",
		       clients, reqs, errors, tokens, wall, (double)tokens / wall, pct(&ttft, 0.5) * 1e3,
		       pct(&ttft, 0.99) * 1e3, pct(&itl, 0.5) * 1e3, pct(&itl, 0.99) * 1e3);
	else
		printf("clients %d  requests %d  errors %d  tokens %ld  %.2f s  %.1f tok/s  "
		       "TTFT p50 %.2f ms p99 %.2f ms  ITL p50 %.3f ms p99 %.3f ms\n",
		       clients, reqs, errors, tokens, wall, (double)tokens / wall, pct(&ttft, 0.5) * 1e3,
		       pct(&ttft, 0.99) * 1e3, pct(&itl, 0.5) * 1e3, pct(&itl, 0.99) * 1e3);
	free(ttft.v);
	free(itl.v);
	free(cs);
	return errors ? 1 : 0;
}
