/*
 * auth.h - registry credentials and authentication challenges.
 *
 * Credentials come from the environment (NIMFACTORY_REGISTRY_USER and
 * NIMFACTORY_REGISTRY_PASSWORD) or from Docker's config.json
 * ($DOCKER_CONFIG/config.json, else ~/.docker/config.json: "auths" entries
 * with a base64 "auth" of "user:password", or "username" and "password").
 * A WWW-Authenticate challenge (RFC 7235: Basic or Bearer with realm,
 * service, scope) is parsed strictly: anything else is refused with a
 * one-line error.  Secrets are never put in an error message or a log line;
 * nf_auth_creds_release wipes them.
 */
#ifndef NF_IMAGES_AUTH_H
#define NF_IMAGES_AUTH_H

#include <stddef.h>

/* Longest WWW-Authenticate header / token / credential we accept. */
#define NF_AUTH_HEADER_MAX 4096
#define NF_AUTH_TOKEN_MAX (64 * 1024)
#define NF_AUTH_CONFIG_MAX (1 << 20)

typedef enum nf_auth_scheme {
	NF_AUTH_NONE = 0,
	NF_AUTH_BASIC = 1,
	NF_AUTH_BEARER = 2,
} nf_auth_scheme;

/* A parsed challenge.  Strings owned; release with nf_auth_challenge_release. */
typedef struct nf_auth_challenge {
	nf_auth_scheme scheme;
	char *realm;   /* Bearer: an http(s) URL; Basic: may be NULL */
	char *service; /* may be NULL */
	char *scope;   /* may be NULL */
} nf_auth_challenge;

/*
 * Parse one WWW-Authenticate value: scheme then comma-separated name=value
 * pairs (value a token or a quoted string with \-escapes).  Unknown schemes,
 * duplicate or malformed parameters, control bytes, a Bearer challenge
 * without an http(s) realm: NF_EINPUT with a one-line message (the header is
 * quoted, truncated, never more than 80 bytes).
 */
int nf_auth_challenge_parse(nf_auth_challenge *out, const char *header);
void nf_auth_challenge_release(nf_auth_challenge *c);

/* Credentials for one registry host.  Strings owned; wiped on release. */
typedef struct nf_auth_creds {
	char *user;     /* NULL: anonymous */
	char *password;
	const char *source; /* static text: "environment", "docker config" or "none" */
} nf_auth_creds;

/*
 * Find credentials for host ("host" or "host:port"): the environment first,
 * then the Docker config file.  None found is not an error (user NULL).
 * A malformed config file is (NF_EINPUT, naming the file, never a secret).
 */
int nf_auth_creds_load(nf_auth_creds *out, const char *host);

/*
 * Look host up in a Docker config.json held in memory (what: its name in
 * errors).  Keys may be "host", "host:port", "https://host/v1/" and the like.
 * Not found: 0 with out->user NULL.
 */
int nf_auth_creds_from_docker_config(nf_auth_creds *out, const char *json, size_t len,
				     const char *host, const char *what);

void nf_auth_creds_release(nf_auth_creds *c);

/* "Basic base64(user:password)" for an Authorization header.  Caller wipes and frees. */
int nf_auth_basic_value(char **out, const nf_auth_creds *c);

/*
 * Pull the bearer token out of a token server's JSON answer ("token", else
 * "access_token"): at most NF_AUTH_TOKEN_MAX bytes of printable ASCII.
 * Caller wipes and frees *out.
 */
int nf_auth_token_parse(char **out, const char *body, size_t len);

/* Overwrite then free a secret string (NULL is fine). */
void nf_auth_secret_free(char *s);

#endif
