/*
 * registry_http.h - internal to images/registry*.c: the client structure and
 * one HTTP exchange with the registry (retries, authentication, redirects,
 * bounded bodies).  Not for use outside images/.
 */
#ifndef NF_IMAGES_REGISTRY_HTTP_H
#define NF_IMAGES_REGISTRY_HTTP_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

#include "images/auth.h"
#include "images/registry.h"

struct nf_reg_client {
	CURL *h;
	char host[NF_REG_HOST_MAX + 1];
	char *base;              /* "https://host" or "http://host" */
	nf_reg_options o;
	nf_auth_creds creds;
	char *auth_value;        /* "Basic ..." / "Bearer ...": secret */
	char *auth_scope;        /* scope the bearer token was given for */
	nf_auth_scheme scheme;   /* learned from the last challenge */
	nf_auth_challenge chal;  /* the last Bearer challenge (realm, service) */
	nf_reg_stats st;
};

/* One request.  Strings borrowed. */
typedef struct nf_reg_req {
	const char *method;        /* GET HEAD PUT POST PATCH DELETE */
	const char *url;           /* absolute, on the registry's origin */
	const char *scope;         /* token scope ("repository:NAME:pull,push ...") */
	const char *accept;
	const char *content_type;
	const char *content_range;
	const void *body;          /* memory body, or */
	int fd;                    /* a file body when >= 0 (from fd_off, fd_len bytes) */
	uint64_t fd_off, fd_len;
	size_t body_len;
	size_t max_resp;           /* bound for a 2xx body (error bodies keep 16 KiB) */
	bool retry;                /* retry transport errors, 429 and 5xx */
	bool foreign_redirect_ok;  /* blob downloads: follow to another host, no credentials */
	const char *progress_what; /* report upload/download progress under this name */
	uint64_t progress_base, progress_total;
} nf_reg_req;

/* An answer.  Owned strings; release with nf_reg_resp_release. */
typedef struct nf_reg_resp {
	long status;
	char *body;
	size_t len;
	bool truncated;            /* an error body longer than kept */
	char *location, *digest, *ctype, *range, *www_auth, *oci_subject, *api_version;
	long retry_after;          /* seconds, -1 when absent */
	int64_t content_length;    /* -1 when absent */
	size_t header_bytes;
	bool too_big;
	size_t max;
	double t0;
	const nf_reg_req *req;     /* during the transfer */
	nf_reg_client *c;
	double last_progress;
} nf_reg_resp;

/* An nf_reg_req with fd -1 and the rest zero. */
void nf_reg_req_init(nf_reg_req *r, const char *method, const char *url);

/*
 * Do req: answers 401 once with credentials, follows same-origin redirects,
 * retries (when req->retry).  0 with *resp filled whatever the status (the
 * caller judges it); NF_ENET on transport failure after the retries,
 * NF_EENV when credentials are missing or refused, NF_EINPUT on a malformed
 * header, an oversized body or a refused redirect.
 */
int nf_reg_http(nf_reg_resp *resp, nf_reg_client *c, const nf_reg_req *req);
void nf_reg_resp_release(nf_reg_resp *r);

/* "METHOD PATH: registry answered STATUS (CODE: message)" as the error; returns code. */
int nf_reg_status_error(int code, const nf_reg_resp *r, const nf_reg_req *req);

/* printf a URL under c->base (e.g. "/v2/%s/blobs/%s").  NULL on ENOMEM. */
char *nf_reg_url(const nf_reg_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Resolve a Location answer against the registry's origin; refuses another origin. */
int nf_reg_location(char **out, const nf_reg_client *c, const char *location, const char *what);

/* Debug line through opts.log (no secrets in fmt's arguments!). */
void nf_reg_logf(const nf_reg_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sleep the backoff for a failed attempt (0-based), or Retry-After seconds when >= 0. */
void nf_reg_backoff(const nf_reg_client *c, int attempt, long retry_after);

/* "repository:NAME:ACTIONS" scope strings. */
char *nf_reg_scope(const char *name, const char *actions, const char *from);

/*
 * A retried request on repository `name`: *url = c->base + "/v2/NAME/" + the
 * printf'd rest, *scope = nf_reg_scope(name, actions, from), and q initialised
 * with method, *url, *scope and retry.  NF_ENOMEM when a string cannot be made.
 * The caller frees *url and *scope, also on failure.
 */
int nf_reg_repo_req(nf_reg_req *q, char **url, char **scope, const nf_reg_client *c,
		    const char *method, const char *name, const char *actions, const char *from,
		    const char *fmt, ...) __attribute__((format(printf, 9, 10)));

/* Move r's body (an empty NUL-terminated string when it had none) to *out, *len. */
int nf_reg_resp_take_body(char **out, size_t *len, nf_reg_resp *r);


#endif
