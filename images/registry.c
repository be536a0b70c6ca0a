/*
 * registry.c - the distribution API client's core: references, the client,
 * one HTTP exchange with retries, authentication and redirect rules (see
 * registry.h and registry_http.h).
 */
#define _GNU_SOURCE
#include "images/registry.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "images/registry_http.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/version.h"
#include "util/banned.h"

#define ERROR_BODY_MAX (16 * 1024)
#define HEADERS_MAX (64 * 1024)
#define REDIRECTS_MAX 5
#define TOKEN_BODY_MAX (128 * 1024)

double nf_reg_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- references ---- */

static bool name_component_ok(const char *s, size_t n)
{
	/* [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* */
	size_t i = 0;
	if (n == 0)
		return false;
	while (i < n) {
		size_t run = 0;
		while (i < n && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9'))) {
			i++;
			run++;
		}
		if (run == 0)
			return false;
		if (i == n)
			return true;
		if (s[i] == '.') {
			i++;
		} else if (s[i] == '_') {
			i++;
			if (i < n && s[i] == '_')
				i++;
		} else if (s[i] == '-') {
			while (i < n && s[i] == '-')
				i++;
		} else {
			return false;
		}
		if (i == n)
			return false;
	}
	return true;
}

static bool tag_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > NF_REG_TAG_MAX)
		return false;
	if (!(isalnum((unsigned char)s[0]) || s[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '.' || s[i] == '-'))
			return false;
	return true;
}

static bool host_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '.' || s[i] == '-' || s[i] == ':' ||
		      s[i] == '[' || s[i] == ']'))
			return false;
	return n > 0;
}

int nf_reg_ref_parse(nf_reg_ref *out, const char *s)
{
	const char *slash, *at, *rest, *p;
	size_t hn, nn;

	memset(out, 0, sizeof(*out));
	if (!s || strlen(s) > 1024)
		return nf_error_set(NF_EINPUT, "registry reference is empty or too long");
	slash = strchr(s, '/');
	if (!slash)
		return nf_error_set(NF_EINPUT, "'%.200s' is not a registry reference (want HOST[:PORT]/NAME[:TAG])", s);
	hn = (size_t)(slash - s);
	if (!host_ok(s, hn) || hn > NF_REG_HOST_MAX ||
	    !(memchr(s, '.', hn) || memchr(s, ':', hn) || (hn == 9 && !strncmp(s, "localhost", 9))))
		return nf_error_set(NF_EINPUT, "'%.200s': '%.*s' is not a registry host (want e.g. 127.0.0.1:5000/team/model:1.0)",
				    s, (int)(hn > 100 ? 100 : hn), s);
	memcpy(out->host, s, hn);
	rest = slash + 1;
	at = strchr(rest, '@');
	if (at) {
		if (strlen(at + 1) > NF_OCI_DIGEST_LEN || nf_oci_digest_check(at + 1))
			return nf_error_set(NF_EINPUT, "'%.200s': bad digest after '@'", s);
		memcpy(out->digest, at + 1, strlen(at + 1) + 1);
	}
	nn = at ? (size_t)(at - rest) : strlen(rest);
	/* a tag is after the last ':' that comes after the last '/' */
	p = NULL;
	for (size_t i = 0; i < nn; i++) {
		if (rest[i] == '/')
			p = NULL;
		else if (rest[i] == ':')
			p = rest + i;
	}
	if (p) {
		size_t tn = nn - (size_t)(p + 1 - rest);
		if (tn > NF_REG_TAG_MAX)
			return nf_error_set(NF_EINPUT, "'%.200s': tag longer than %d", s, NF_REG_TAG_MAX);
		memcpy(out->tag, p + 1, tn);
		out->tag[tn] = '\0';
		if (!tag_ok(out->tag))
			return nf_error_set(NF_EINPUT, "'%.200s': bad tag '%s'", s, out->tag);
		nn = (size_t)(p - rest);
	}
	if (nn == 0 || nn > NF_REG_NAME_MAX)
		return nf_error_set(NF_EINPUT, "'%.200s': repository name empty or longer than %d", s,
				    NF_REG_NAME_MAX);
	for (size_t i = 0, start = 0; i <= nn; i++) {
		if (i == nn || rest[i] == '/') {
			if (!name_component_ok(rest + start, i - start))
				return nf_error_set(NF_EINPUT,
						    "'%.200s': bad repository name (lowercase [a-z0-9] components joined by '.', '_', '__' or '-')",
						    s);
			start = i + 1;
		}
	}
	memcpy(out->name, rest, nn);
	out->name[nn] = '\0';
	return 0;
}

bool nf_reg_host_is_loopback(const char *host)
{
	char h[NF_REG_HOST_MAX + 1];
	size_t n;
	const char *colon;

	if (!host)
		return false;
	if (host[0] == '[') {
		const char *end = strchr(host, ']');
		return end && (size_t)(end - host) == 4 && !strncmp(host, "[::1]", 5) &&
		       (end[1] == '\0' || end[1] == ':');
	}
	colon = strchr(host, ':');
	n = colon ? (size_t)(colon - host) : strlen(host);
	if (n == 0 || n >= sizeof(h))
		return false;
	memcpy(h, host, n);
	h[n] = '\0';
	if (!strcasecmp(h, "localhost"))
		return true;
	if (strncmp(h, "127.", 4))
		return false;
	/* 127.a.b.c with numbers <= 255 */
	int dots = 0;
	for (const char *p = h + 4; *p; p++) {
		if (*p == '.')
			dots++;
		else if (!isdigit((unsigned char)*p))
			return false;
	}
	return dots == 2;
}

/* ---- client ---- */

void nf_reg_options_init(nf_reg_options *o)
{
	memset(o, 0, sizeof(*o));
	o->chunk_size = (uint64_t)64 << 20;
	o->max_retries = 6;
	o->backoff_ms = 100;
	o->max_backoff_ms = 8000;
	o->timeout_s = 60;
}

int nf_reg_client_new(nf_reg_client **out, const char *host, const nf_reg_options *opts)
{
	nf_reg_client *c = NULL;
	int err = 0;

	*out = NULL;
	if (!host || !host_ok(host, strlen(host)) || strlen(host) > NF_REG_HOST_MAX)
		return nf_error_set(NF_EINPUT, "'%.100s' is not a registry host", host ? host : "");
	c = calloc(1, sizeof(*c));
	if (!c)
		return nf_error_set(NF_ENOMEM, "out of memory");
	c->creds.source = "none";
	if (opts)
		c->o = *opts;
	else
		nf_reg_options_init(&c->o);
	if (c->o.chunk_size < 4096)
		c->o.chunk_size = 4096;
	if (c->o.max_retries < 0)
		c->o.max_retries = 0;
	if (c->o.timeout_s <= 0)
		c->o.timeout_s = 60;
	memcpy(c->host, host, strlen(host) + 1);
	if (c->o.insecure && !nf_reg_host_is_loopback(host)) {
		err = nf_error_set(NF_EINPUT,
				   "--insecure (plain HTTP) is allowed only for a loopback registry, not %s",
				   host);
		goto done;
	}
	c->base = nf_strdup_printf("%s://%s", c->o.insecure ? "http" : "https", host);
	c->h = curl_easy_init();
	if (!c->base || !c->h) {
		err = nf_error_set(NF_ENOMEM, "out of memory (curl)");
		goto done;
	}
	if ((err = nf_auth_creds_load(&c->creds, host)))
		goto done;
	nf_reg_logf(c, "registry %s (%s), credentials: %s", host, c->o.insecure ? "http" : "https",
		    c->creds.user ? c->creds.source : "none");
	*out = c;
	c = NULL;
done:
	nf_reg_client_free(c);
	return err;
}

void nf_reg_client_free(nf_reg_client *c)
{
	if (!c)
		return;
	if (c->h)
		curl_easy_cleanup(c->h);
	free(c->base);
	nf_auth_creds_release(&c->creds);
	nf_auth_secret_free(c->auth_value);
	free(c->auth_scope);
	nf_auth_challenge_release(&c->chal);
	free(c);
}

const nf_reg_stats *nf_reg_client_stats(const nf_reg_client *c) { return &c->st; }

void nf_reg_logf(const nf_reg_client *c, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	if (!c->o.log)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	c->o.log(c->o.log_ctx, line);
}

char *nf_reg_url(const nf_reg_client *c, const char *fmt, ...)
{
	char *path = NULL, *url;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&path, fmt, ap) < 0)
		path = NULL;
	va_end(ap);
	if (!path)
		return NULL;
	url = nf_strdup_printf("%s%s", c->base, path);
	free(path);
	return url;
}

char *nf_reg_scope(const char *name, const char *actions, const char *from)
{
	if (from)
		return nf_strdup_printf("repository:%s:%s repository:%s:pull", name, actions, from);
	return nf_strdup_printf("repository:%s:%s", name, actions);
}

int nf_reg_repo_req(nf_reg_req *q, char **url, char **scope, const nf_reg_client *c,
		    const char *method, const char *name, const char *actions, const char *from,
		    const char *fmt, ...)
{
	char *rest = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&rest, fmt, ap) < 0)
		rest = NULL;
	va_end(ap);
	*url = rest ? nf_reg_url(c, "/v2/%s/%s", name, rest) : NULL;
	*scope = nf_reg_scope(name, actions, from);
	free(rest);
	if (!*url || !*scope)
		return nf_error_set(NF_ENOMEM, "out of memory");
	nf_reg_req_init(q, method, *url);
	q->scope = *scope;
	q->retry = true;
	return 0;
}

void nf_reg_backoff(const nf_reg_client *c, int attempt, long retry_after)
{
	uint64_t ms = c->o.backoff_ms;
	for (int i = 0; i < attempt && ms < c->o.max_backoff_ms; i++)
		ms *= 2;
	if (retry_after >= 0)
		ms = (uint64_t)retry_after * 1000;
	if (ms > c->o.max_backoff_ms)
		ms = c->o.max_backoff_ms;
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Length of "scheme://authority" of an absolute URL, 0 when it is not one. */
static size_t origin_len(const char *url)
{
	const char *p = strstr(url, "://");
	if (!p || p == url)
		return 0;
	p += 3;
	return (size_t)(p - url) + strcspn(p, "/?#");
}

int nf_reg_location(char **out, const nf_reg_client *c, const char *location, const char *what)
{
	size_t ol, bl = strlen(c->base);

	*out = NULL;
	if (!location || !*location)
		return nf_error_set(NF_EINPUT, "%s: registry answered without a Location header", what);
	for (const char *p = location; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			return nf_error_set(NF_EINPUT, "%s: registry sent a Location with a control byte or space", what);
	if (location[0] == '/' && location[1] != '/') {
		*out = nf_strdup_printf("%s%s", c->base, location);
	} else {
		ol = origin_len(location);
		if (ol != bl || strncasecmp(location, c->base, bl))
			return nf_error_set(NF_EINPUT,
					    "%s: registry sent a Location on another host or scheme (%.*s): refused",
					    what, (int)(ol ? (ol > 100 ? 100 : ol) : 40), location);
		*out = strdup(location);
	}
	return *out ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
}

/* ---- one exchange ---- */

void nf_reg_req_init(nf_reg_req *r, const char *method, const char *url)
{
	memset(r, 0, sizeof(*r));
	r->method = method;
	r->url = url;
	r->fd = -1;
}

/* Free the answer's strings and forget the answer (request, limits and timing stay). */
static void resp_reset(nf_reg_resp *r)
{
	free(r->body);
	free(r->location);
	free(r->digest);
	free(r->ctype);
	free(r->range);
	free(r->www_auth);
	free(r->oci_subject);
	free(r->api_version);
	r->body = r->location = r->digest = r->ctype = r->range = r->www_auth = r->oci_subject =
		r->api_version = NULL;
	r->len = 0;
	r->status = 0;
	r->truncated = r->too_big = false;
	r->retry_after = -1;
	r->content_length = -1;
	r->header_bytes = 0;
}

void nf_reg_resp_release(nf_reg_resp *r)
{
	if (!r)
		return;
	resp_reset(r);
	memset(r, 0, sizeof(*r));
}

int nf_reg_resp_take_body(char **out, size_t *len, nf_reg_resp *r)
{
	if (!r->body && !(r->body = calloc(1, 1)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	*out = r->body;
	*len = r->len;
	r->body = NULL;
	return 0;
}

/* A header value of 1 to max_len characters that is a whole decimal number >= 0. */
static bool header_number(long long *out, const char *v, size_t vl, size_t max_len)
{
	char tmp[32];
	char *end = NULL;
	long long s;

	if (vl == 0 || vl > max_len || vl >= sizeof(tmp))
		return false;
	memcpy(tmp, v, vl);
	tmp[vl] = '\0';
	errno = 0;
	s = strtoll(tmp, &end, 10);
	if (errno || *end != '\0' || s < 0)
		return false;
	*out = s;
	return true;
}

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
	nf_reg_resp *r = ud;
	size_t len = size * n, nl, vl;
	const char *colon, *v;
	char **slot = NULL;

	if (!nf_size_add(&r->header_bytes, r->header_bytes, len) || r->header_bytes > HEADERS_MAX)
		return 0;
	if (len >= 5 && !strncmp(buf, "HTTP/", 5)) {
		/* a new response (after 100 Continue, say): forget the previous headers */
		const char *sp = memchr(buf, ' ', len);
		size_t keep = r->header_bytes;
		resp_reset(r);
		r->header_bytes = keep;
		if (sp && (size_t)(sp - buf) + 4 <= len)
			r->status = strtol(sp + 1, NULL, 10);
		return len;
	}
	colon = memchr(buf, ':', len);
	if (!colon)
		return len;
	nl = (size_t)(colon - buf);
	v = colon + 1;
	vl = len - nl - 1;
	while (vl && (*v == ' ' || *v == '\t')) {
		v++;
		vl--;
	}
	while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
		vl--;
#define HDR(s) (nl == sizeof(s) - 1 && !strncasecmp(buf, s, nl))
	if (HDR("Location"))
		slot = &r->location;
	else if (HDR("Docker-Content-Digest"))
		slot = &r->digest;
	else if (HDR("Content-Type"))
		slot = &r->ctype;
	else if (HDR("Range"))
		slot = &r->range;
	else if (HDR("WWW-Authenticate"))
		slot = &r->www_auth;
	else if (HDR("OCI-Subject"))
		slot = &r->oci_subject;
	else if (HDR("Docker-Distribution-API-Version"))
		slot = &r->api_version;
	else if (HDR("Retry-After")) {
		long long s;
		if (header_number(&s, v, vl, 15))
			r->retry_after = s > 3600 ? 3600 : (long)s;
	} else if (HDR("Content-Length")) {
		long long s;
		if (header_number(&s, v, vl, 23))
			r->content_length = s;
	}
#undef HDR
	if (slot) {
		free(*slot);
		*slot = strndup(v, vl);
		if (!*slot)
			return 0;
	}
	return len;
}

static size_t on_body(char *buf, size_t size, size_t n, void *ud)
{
	nf_reg_resp *r = ud;
	size_t len = size * n, cap = r->max, need;
	bool error = r->status < 200 || r->status >= 300;

	if (error)
		cap = ERROR_BODY_MAX;
	if (!nf_size_add(&need, r->len, len) || need > cap) {
		if (error) {
			r->truncated = true;
			if (r->len >= cap)
				return len;
			len = cap - r->len;
			need = cap;
		} else {
			r->too_big = true;
			return 0;
		}
	}
	char *nb = realloc(r->body, need + 1);
	if (!nb)
		return 0;
	memcpy(nb + r->len, buf, len);
	r->body = nb;
	r->len = need;
	r->body[need] = '\0';
	return size * n;
}

typedef struct body_src {
	const nf_reg_req *req;
	uint64_t pos;
} body_src;

static size_t on_read(char *buf, size_t size, size_t n, void *ud)
{
	body_src *b = ud;
	const nf_reg_req *q = b->req;
	uint64_t total = q->fd >= 0 ? q->fd_len : q->body_len, left;
	size_t want = size * n;

	if (b->pos >= total)
		return 0;
	left = total - b->pos;
	if ((uint64_t)want > left)
		want = (size_t)left;
	if (q->fd >= 0) {
		ssize_t got = pread(q->fd, buf, want, (off_t)(q->fd_off + b->pos));
		if (got <= 0)
			return CURL_READFUNC_ABORT;
		want = (size_t)got;
	} else {
		memcpy(buf, (const char *)q->body + b->pos, want);
	}
	b->pos += want;
	return want;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	nf_reg_resp *r = ud;
	const nf_reg_req *q = r->req;
	double now;
	if (!q || !q->progress_what || !r->c->o.progress)
		return 0;
	now = nf_reg_now();
	if (now - r->last_progress < 0.25)
		return 0;
	r->last_progress = now;
	r->c->o.progress(r->c->o.progress_ctx, q->progress_what,
			 q->progress_base + (uint64_t)(ulnow > 0 ? ulnow : dlnow), q->progress_total,
			 now - r->t0);
	return 0;
}

/* Path part of a URL for log lines and errors (no query: it may carry upload state). */
static void url_path(char *buf, size_t cap, const char *url)
{
	size_t ol = origin_len(url), n;
	const char *p = url + ol;
	n = strcspn(p, "?#");
	if (n >= cap)
		n = cap - 1;
	memcpy(buf, p, n);
	buf[n] = '\0';
}

static bool transient_curl(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return true;
	default:
		return false;
	}
}

/* Append line to *hl; NF_ENOMEM when it cannot, or when line is NULL (a
 * format that could not allocate). */
static int header_add(struct curl_slist **hl, const char *line)
{
	struct curl_slist *t = line ? curl_slist_append(*hl, line) : NULL;
	if (!t)
		return nf_error_set(NF_ENOMEM, "out of memory");
	*hl = t;
	return 0;
}

/* q's headers into *hl (the caller frees it, also on error): those of q
 * that are set, the credentials where wanted (our copy wiped once curl has
 * its own), and an empty Expect so curl never waits for 100-continue. */
static int request_headers(struct curl_slist **hl, const nf_reg_client *c, const nf_reg_req *q,
			   bool with_auth)
{
	const struct {
		const char *name, *value;
	} plain[] = {
		{"Accept", q->accept},
		{"Content-Type", q->content_type},
		{"Content-Range", q->content_range},
	};
	char *line;
	int err;

	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		if (!plain[i].value)
			continue;
		line = nf_strdup_printf("%s: %s", plain[i].name, plain[i].value);
		err = header_add(hl, line);
		free(line);
		if (err)
			return err;
	}
	if (with_auth && c->auth_value) {
		line = nf_strdup_printf("Authorization: %s", c->auth_value);
		err = header_add(hl, line);
		nf_auth_secret_free(line);
		if (err)
			return err;
	}
	return header_add(hl, "Expect:");
}

/* The numeric transfer settings every request shares: no redirects
 * followed, TLS verified, no signals (threads), bounded waits and buffers. */
static const struct {
	CURLoption opt;
	long value;
} fixed_options[] = {
	{CURLOPT_FOLLOWLOCATION, 0L},
	{CURLOPT_SSL_VERIFYPEER, 1L},
	{CURLOPT_SSL_VERIFYHOST, 2L},
	{CURLOPT_NOSIGNAL, 1L},
	{CURLOPT_CONNECTTIMEOUT, 15L},
	{CURLOPT_LOW_SPEED_LIMIT, 1L},
	{CURLOPT_BUFFERSIZE, 256L * 1024},
	{CURLOPT_UPLOAD_BUFFERSIZE, 2L * 1024 * 1024},
};

/* Everything of c's handle but the method: where to, with which headers,
 * and the callbacks that fill resp (curl's message into errbuf). */
static void set_transfer(nf_reg_client *c, nf_reg_resp *resp, const char *url,
			 struct curl_slist *hl, char *errbuf)
{
	for (size_t i = 0; i < sizeof(fixed_options) / sizeof(fixed_options[0]); i++)
		curl_easy_setopt(c->h, fixed_options[i].opt, fixed_options[i].value);
	curl_easy_setopt(c->h, CURLOPT_URL, url);
	curl_easy_setopt(c->h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c->h, CURLOPT_LOW_SPEED_TIME, c->o.timeout_s);
	curl_easy_setopt(c->h, CURLOPT_USERAGENT, "nimfactory/" NF_VERSION);
	curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c->h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c->h, CURLOPT_HEADERDATA, resp);
	curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c->h, CURLOPT_WRITEDATA, resp);
	curl_easy_setopt(c->h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c->h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c->h, CURLOPT_XFERINFODATA, resp);
	curl_easy_setopt(c->h, CURLOPT_NOPROGRESS, resp->req->progress_what ? 0L : 1L);
}

/* q's method on handle h; a body, where the method sends one, is read from
 * src (q's buffer or file). */
static void set_method(CURL *h, const nf_reg_req *q, body_src *src)
{
	bool has_body = q->fd >= 0 || q->body;
	uint64_t blen = q->fd >= 0 ? q->fd_len : q->body_len;

	if (!strcmp(q->method, "HEAD")) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(q->method, "POST")) {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, src);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
	} else if (!strcmp(q->method, "PUT") || !strcmp(q->method, "PATCH")) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, src);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)(has_body ? blen : 0));
		if (!strcmp(q->method, "PATCH"))
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PATCH");
	} else if (strcmp(q->method, "GET")) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, q->method);
	}
}

/* What curl's result rc means: the status into resp when it answered; an
 * error for an answer over q's limit (not retried); for a failed transfer
 * only the message, since the caller retries by rc. */
static int transfer_result(CURLcode rc, nf_reg_resp *resp, nf_reg_client *c, const nf_reg_req *q,
			   const char *url, const char *errbuf)
{
	char path[256];
	long code = 0;

	if (rc == CURLE_OK) {
		curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &code);
		resp->status = code;
		return 0;
	}
	url_path(path, sizeof(path), url);
	if (resp->too_big)
		return nf_error_set(NF_EINPUT, "%s %s: registry answer is larger than %zu bytes: refused",
				    q->method, path, q->max_resp);
	nf_error_set(NF_ENET, "%s %s%s: %s", q->method, c->host, path,
		     errbuf[0] ? errbuf : curl_easy_strerror(rc));
	return 0;
}

/* One transfer without retries; *rc the curl result. */
static int perform(CURLcode *rc, nf_reg_resp *resp, nf_reg_client *c, const nf_reg_req *q,
		   const char *url, bool with_auth)
{
	struct curl_slist *hl = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	body_src src = {q, 0};
	int err;

	resp_reset(resp);
	resp->req = q;
	resp->c = c;
	resp->max = q->max_resp;
	resp->t0 = nf_reg_now();
	resp->last_progress = 0;
	curl_easy_reset(c->h);
	if ((err = request_headers(&hl, c, q, with_auth)))
		goto done;
	set_transfer(c, resp, url, hl, errbuf);
	set_method(c->h, q, &src);
	c->st.requests++;
	*rc = curl_easy_perform(c->h);
	err = transfer_result(*rc, resp, c, q, url, errbuf);
	if (strstr(q->url, "/blobs/uploads/") && (q->fd >= 0 || q->body))
		c->st.blob_bytes_uploaded += src.pos;
done:
	curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(hl);
	resp->req = NULL;
	return err;
}

/* GET realm?service=&scope= with basic credentials; sets c->auth_value. */
static int fetch_token(nf_reg_client *c, const char *scope)
{
	nf_reg_resp tr = {0};
	CURLcode rc = CURLE_OK;
	char *url = NULL, *esc_service = NULL, *esc_scope = NULL, *basic = NULL, *token = NULL;
	char *saved_auth = c->auth_value;
	const char *realm = c->chal.realm;
	size_t ol = origin_len(realm);
	char rhost[NF_REG_HOST_MAX + 1];
	nf_reg_req q;
	int err = 0;

	c->auth_value = NULL;
	/* the realm's host: plain http only where --insecure would be allowed */
	{
		const char *h = strstr(realm, "://") + 3;
		size_t hn = (size_t)(realm + ol - h);
		if (hn >= sizeof(rhost))
			hn = sizeof(rhost) - 1;
		memcpy(rhost, h, hn);
		rhost[hn] = '\0';
	}
	if (!strncmp(realm, "http://", 7) && !(c->o.insecure && nf_reg_host_is_loopback(rhost))) {
		err = nf_error_set(NF_EINPUT,
				   "registry %s sends credentials to a plain-HTTP token realm (%s): refused",
				   c->host, rhost);
		goto done;
	}
	if (c->chal.service && !(esc_service = curl_easy_escape(c->h, c->chal.service, 0))) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (scope && !(esc_scope = curl_easy_escape(c->h, scope, 0))) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	url = nf_strdup_printf("%s%s%s%s%s%s", realm, strchr(realm, '?') ? "&" : "?",
			       esc_service ? "service=" : "", esc_service ? esc_service : "",
			       esc_scope ? (esc_service ? "&scope=" : "scope=") : "",
			       esc_scope ? esc_scope : "");
	if (!url) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (c->creds.user && (err = nf_auth_basic_value(&basic, &c->creds)))
		goto done;
	c->auth_value = basic;
	nf_reg_req_init(&q, "GET", url);
	q.max_resp = TOKEN_BODY_MAX;
	nf_reg_logf(c, "auth: token from %s for scope '%s' (%s)", rhost, scope ? scope : "",
		    c->creds.user ? "with credentials" : "anonymous");
	err = perform(&rc, &tr, c, &q, url, basic != NULL);
	c->auth_value = NULL;
	nf_auth_secret_free(basic);
	basic = NULL;
	if (err)
		goto done;
	if (rc != CURLE_OK) {
		err = nf_error_wrap(NF_ENET, "token server");
		goto done;
	}
	if (tr.status == 401 || tr.status == 403) {
		err = nf_error_set(NF_EENV, "registry %s: the token server refused the credentials (%s, HTTP %ld)",
				   c->host, c->creds.user ? c->creds.source : "none given", tr.status);
		goto done;
	}
	if (tr.status != 200) {
		err = nf_error_set(NF_ENET, "registry %s: token server answered HTTP %ld", c->host, tr.status);
		goto done;
	}
	if ((err = nf_auth_token_parse(&token, tr.body ? tr.body : "", tr.len)))
		goto done;
	c->auth_value = nf_strdup_printf("Bearer %s", token);
	if (!c->auth_value) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	free(c->auth_scope);
	c->auth_scope = scope ? strdup(scope) : NULL;
done:
	if (err) {
		nf_auth_secret_free(c->auth_value);
		c->auth_value = NULL;
	}
	nf_auth_secret_free(saved_auth);
	nf_auth_secret_free(token);
	if (tr.body)
		memset(tr.body, 0, tr.len);
	nf_reg_resp_release(&tr);
	free(url);
	curl_free(esc_service);
	curl_free(esc_scope);
	return err;
}

/* Answer a 401: parse the challenge, get credentials or a token. */
static int authenticate(nf_reg_client *c, const nf_reg_resp *resp, const nf_reg_req *q)
{
	nf_auth_challenge ch;
	int err;

	if ((err = nf_auth_challenge_parse(&ch, resp->www_auth)))
		return nf_error_wrap(err, "registry %s", c->host);
	if (ch.scheme == NF_AUTH_BASIC) {
		nf_auth_challenge_release(&ch);
		if (!c->creds.user)
			return nf_error_set(NF_EENV,
					    "registry %s asks for credentials: set NIMFACTORY_REGISTRY_USER and NIMFACTORY_REGISTRY_PASSWORD or log in with docker",
					    c->host);
		nf_auth_secret_free(c->auth_value);
		c->auth_value = NULL;
		c->scheme = NF_AUTH_BASIC;
		nf_reg_logf(c, "auth: basic (credentials from %s)", c->creds.source);
		return nf_auth_basic_value(&c->auth_value, &c->creds);
	}
	nf_auth_challenge_release(&c->chal);
	c->chal = ch;
	c->scheme = NF_AUTH_BEARER;
	return fetch_token(c, ch.scope ? ch.scope : q->scope);
}

int nf_reg_status_error(int code, const nf_reg_resp *r, const nf_reg_req *req)
{
	char path[256], detail[256] = "";
	json_t *j = NULL;

	url_path(path, sizeof(path), req->url);
	if (r->body && r->len && (j = json_loadb(r->body, r->len, 0, NULL))) {
		const json_t *e = json_array_get(json_object_get(j, "errors"), 0);
		const char *ec = json_string_value(json_object_get(e, "code"));
		const char *em = json_string_value(json_object_get(e, "message"));
		if (ec) {
			size_t n = 0;
			n = (size_t)snprintf(detail, sizeof(detail), " (%.40s%s%.160s)", ec, em ? ": " : "",
					     em ? em : "");
			for (size_t i = 0; i < n && i < sizeof(detail); i++)
				if ((unsigned char)detail[i] < 0x20 || detail[i] == 0x7f)
					detail[i] = '?';
		}
	}
	json_decref(j);
	return nf_error_set(code, "%s %s%s: registry answered HTTP %ld%s", req->method, "", path,
			    r->status, detail);
}

int nf_reg_http(nf_reg_resp *resp, nf_reg_client *c, const nf_reg_req *req)
{
	nf_reg_req q = *req;
	char *url = strdup(req->url), *next = NULL;
	bool auth_done = false, foreign = false;
	int redirects = 0, attempt = 0, err = 0;
	CURLcode rc;
	char path[256];

	memset(resp, 0, sizeof(*resp));
	if (!url)
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (;;) {
		q.url = url;
		if ((err = perform(&rc, resp, c, &q, url, !foreign)))
			goto done;
		url_path(path, sizeof(path), url);
		if (rc != CURLE_OK) {
			nf_reg_logf(c, "%s %s -> %s", q.method, path, curl_easy_strerror(rc));
			if (q.retry && transient_curl(rc) && attempt < c->o.max_retries) {
				nf_reg_backoff(c, attempt++, -1);
				c->st.retries++;
				continue;
			}
			err = nf_error_last_code() == NF_ENET ? NF_ENET : nf_error_set(NF_ENET, "%s %s: %s", q.method, path, curl_easy_strerror(rc));
			goto done;
		}
		nf_reg_logf(c, "%s %s -> %ld", q.method, path, resp->status);
		if (resp->status == 401 && !foreign) {
			if (auth_done) {
				err = nf_error_set(NF_EENV,
						   "registry %s refused the credentials (%s) for %s %s: HTTP 401",
						   c->host, c->creds.user ? c->creds.source : "none given", q.method, path);
				goto done;
			}
			auth_done = true;
			if ((err = authenticate(c, resp, &q)))
				goto done;
			continue;
		}
		if (resp->status == 301 || resp->status == 302 || resp->status == 303 ||
		    resp->status == 307 || resp->status == 308) {
			if (++redirects > REDIRECTS_MAX) {
				err = nf_error_set(NF_ENET, "%s %s: more than %d redirects", q.method, path, REDIRECTS_MAX);
				goto done;
			}
			if ((err = nf_reg_location(&next, c, resp->location, path))) {
				size_t ol;
				if (!q.foreign_redirect_ok || !resp->location ||
				    !(ol = origin_len(resp->location)))
					goto done;
				/* a blob download elsewhere (a CDN): no credentials follow */
				if (strncmp(resp->location, "https://", 8) &&
				    !(c->o.insecure && strncmp(resp->location, "http://", 7) == 0)) {
					err = nf_error_set(NF_EINPUT, "%s %s: redirect to a plain-HTTP host refused", q.method, path);
					goto done;
				}
				nf_error_clear();
				err = 0;
				next = strdup(resp->location);
				if (!next) {
					err = nf_error_set(NF_ENOMEM, "out of memory");
					goto done;
				}
				foreign = true;
				nf_reg_logf(c, "%s %s: redirected to another host, without credentials", q.method, path);
			}
			free(url);
			url = next;
			next = NULL;
			if (resp->status == 303)
				q.method = "GET";
			continue;
		}
		if (q.retry && (resp->status == 429 || resp->status >= 500) && attempt < c->o.max_retries) {
			nf_reg_backoff(c, attempt++, resp->status == 429 ? resp->retry_after : -1);
			c->st.retries++;
			continue;
		}
		break;
	}
done:
	free(url);
	free(next);
	if (err)
		nf_reg_resp_release(resp);
	return err;
}

int nf_reg_ping(nf_reg_client *c)
{
	nf_reg_req q;
	nf_reg_resp r;
	char *url = nf_reg_url(c, "/v2/");
	int err;

	if (!url)
		return nf_error_set(NF_ENOMEM, "out of memory");
	nf_reg_req_init(&q, "GET", url);
	q.max_resp = 64 * 1024;
	q.retry = true;
	if ((err = nf_reg_http(&r, c, &q)))
		goto done;
	if (r.status != 200) {
		err = nf_reg_status_error(r.status == 404 ? NF_EUNSUPPORTED : NF_ENET, &r, &q);
		nf_error_wrap(err, "registry %s does not speak the distribution API v2", c->host);
		goto done;
	}
	if (r.api_version && strcmp(r.api_version, "registry/2.0")) {
		err = nf_error_set(NF_EUNSUPPORTED, "registry %s: unknown API version '%.40s'", c->host,
				   r.api_version);
		goto done;
	}
done:
	nf_reg_resp_release(&r);
	free(url);
	return err;
}
