/* auth.c - registry credentials and WWW-Authenticate challenges (see auth.h). */
#include "images/auth.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define PARAM_MAX 1024

void nf_auth_secret_free(char *s)
{
	if (!s)
		return;
	OPENSSL_cleanse(s, strlen(s));
	free(s);
}

void nf_auth_challenge_release(nf_auth_challenge *c)
{
	if (!c)
		return;
	free(c->realm);
	free(c->service);
	free(c->scope);
	memset(c, 0, sizeof(*c));
}

static bool is_tchar(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* Parse error: the header quoted (truncated, control bytes shown as '?'). */
static int bad_challenge(const char *header, size_t pos, const char *why)
{
	char q[81];
	size_t i;
	for (i = 0; i + 1 < sizeof(q) && header[i]; i++)
		q[i] = (header[i] >= 0x20 && header[i] < 0x7f) ? header[i] : '?';
	q[i] = '\0';
	return nf_error_set(NF_EINPUT, "registry sent a malformed WWW-Authenticate header (%s at byte %zu): '%s%s'",
			    why, pos, q, header[i] ? "..." : "");
}

/* Where the parse of one header stands; errors quote the whole header. */
typedef struct challenge_cursor {
	const char *header, *p;
} challenge_cursor;

static int cursor_fail(const challenge_cursor *c, const char *why)
{
	return bad_challenge(c->header, (size_t)(c->p - c->header), why);
}

static size_t token_len(const char *p)
{
	size_t n = 0;
	while (is_tchar((unsigned char)p[n]))
		n++;
	return n;
}

static void skip_blanks(challenge_cursor *c)
{
	while (*c->p == ' ' || *c->p == '\t')
		c->p++;
}

/* The schemes we answer, by name (any case). */
static const struct {
	const char *name;
	nf_auth_scheme scheme;
} known_schemes[] = {
	{"Basic", NF_AUTH_BASIC},
	{"Bearer", NF_AUTH_BEARER},
};

/* The scheme, then the spaces before the first parameter. */
static int parse_scheme(nf_auth_scheme *out, challenge_cursor *c)
{
	size_t n;

	skip_blanks(c);
	n = token_len(c->p);
	*out = NF_AUTH_NONE;
	for (size_t i = 0; i < sizeof(known_schemes) / sizeof(known_schemes[0]); i++)
		if (strlen(known_schemes[i].name) == n && !strncasecmp(c->p, known_schemes[i].name, n))
			*out = known_schemes[i].scheme;
	if (*out == NF_AUTH_NONE)
		return cursor_fail(c, "unknown scheme");
	c->p += n;
	if (*c->p && *c->p != ' ')
		return cursor_fail(c, "no space after the scheme");
	while (*c->p == ' ')
		c->p++;
	return 0;
}

/* A quoted string (c->p at its opening quote) into value (cap bytes with
 * the NUL), \-escapes undone; control bytes refused. */
static int parse_quoted(char *value, size_t cap, challenge_cursor *c)
{
	size_t vn = 0;

	c->p++;
	while (*c->p && *c->p != '"') {
		if (*c->p == '\\' && c->p[1])
			c->p++;
		if ((unsigned char)*c->p < 0x20 || *c->p == 0x7f || vn + 1 >= cap)
			return cursor_fail(c, "bad byte or overlong value");
		value[vn++] = *c->p++;
	}
	if (*c->p != '"')
		return cursor_fail(c, "unterminated quoted string");
	c->p++;
	value[vn] = '\0';
	return 0;
}

/* An unquoted value: token characters, '/' and ':' (a bare URL or scope). */
static int parse_bare(char *value, size_t cap, challenge_cursor *c)
{
	size_t vn = 0;

	while (is_tchar((unsigned char)*c->p) || *c->p == '/' || *c->p == ':') {
		if (vn + 1 >= cap)
			return cursor_fail(c, "overlong value");
		value[vn++] = *c->p++;
	}
	if (vn == 0)
		return cursor_fail(c, "empty value");
	value[vn] = '\0';
	return 0;
}

/* The parameters kept, by name (any case); others (error=, charset=) are
 * allowed and ignored. */
static const struct {
	const char *name;
	size_t offset; /* of the char * in nf_auth_challenge */
} kept_params[] = {
	{"realm", offsetof(nf_auth_challenge, realm)},
	{"service", offsetof(nf_auth_challenge, service)},
	{"scope", offsetof(nf_auth_challenge, scope)},
};

static int keep_param(nf_auth_challenge *out, const char *name, const char *value,
		      const challenge_cursor *c)
{
	for (size_t i = 0; i < sizeof(kept_params) / sizeof(kept_params[0]); i++) {
		char **slot = (char **)((char *)out + kept_params[i].offset);
		if (strcasecmp(name, kept_params[i].name))
			continue;
		if (*slot)
			return cursor_fail(c, "duplicate parameter");
		if (!(*slot = strdup(value)))
			return nf_error_set(NF_ENOMEM, "out of memory");
		return 0;
	}
	return 0;
}

/* The end of the header, or a comma and (after blanks) another pair. */
static int parse_separator(challenge_cursor *c)
{
	skip_blanks(c);
	if (*c->p == ',') {
		c->p++;
		skip_blanks(c);
		if (!*c->p)
			return cursor_fail(c, "trailing comma");
	} else if (*c->p) {
		return cursor_fail(c, "expected ',' between parameters");
	}
	return 0;
}

/* One name=value pair and what follows it; the value kept in out by name. */
static int parse_param(nf_auth_challenge *out, challenge_cursor *c)
{
	char name[32], value[PARAM_MAX];
	size_t n = token_len(c->p);
	int err;

	if (n == 0 || n >= sizeof(name))
		return cursor_fail(c, "expected a parameter name");
	memcpy(name, c->p, n);
	name[n] = '\0';
	c->p += n;
	if (*c->p != '=')
		return cursor_fail(c, "expected '='");
	c->p++;
	if ((err = *c->p == '"' ? parse_quoted(value, sizeof(value), c)
				: parse_bare(value, sizeof(value), c)) ||
	    (err = keep_param(out, name, value, c)))
		return err;
	return parse_separator(c);
}

/* A Bearer challenge says where to fetch the token: an http(s) URL with no
 * blanks, control bytes or quotes. */
static int check_bearer_realm(const nf_auth_challenge *out, const char *header, size_t hlen)
{
	if (!out->realm || (strncmp(out->realm, "https://", 8) && strncmp(out->realm, "http://", 7)))
		return bad_challenge(header, hlen, "Bearer without an http(s) realm");
	for (const char *r = out->realm; *r; r++)
		if ((unsigned char)*r <= 0x20 || *r == 0x7f || *r == '"')
			return bad_challenge(header, hlen, "realm is not a URL");
	return 0;
}

int nf_auth_challenge_parse(nf_auth_challenge *out, const char *header)
{
	challenge_cursor c = {header, header};
	size_t hlen;
	int err;

	memset(out, 0, sizeof(*out));
	if (!header)
		return nf_error_set(NF_EINPUT, "registry answered 401 without a WWW-Authenticate header");
	hlen = strlen(header);
	if (hlen > NF_AUTH_HEADER_MAX)
		return nf_error_set(NF_EINPUT, "registry sent a WWW-Authenticate header of %zu bytes (at most %d)",
				    hlen, NF_AUTH_HEADER_MAX);
	err = parse_scheme(&out->scheme, &c);
	while (!err && *c.p)
		err = parse_param(out, &c);
	if (!err && out->scheme == NF_AUTH_BEARER)
		err = check_bearer_realm(out, header, hlen);
	if (err)
		nf_auth_challenge_release(out);
	return err;
}

void nf_auth_creds_release(nf_auth_creds *c)
{
	if (!c)
		return;
	nf_auth_secret_free(c->user);
	nf_auth_secret_free(c->password);
	c->user = c->password = NULL;
	c->source = "none";
}

static int b64_val(unsigned char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+')
		return 62;
	if (ch == '/')
		return 63;
	return -1;
}

/* Strict base64 (padding optional); *out NUL-terminated, caller wipes. */
static int b64_decode(char **out, size_t *olen, const char *s, size_t len)
{
	char *buf = NULL;
	size_t n = 0, cap;
	unsigned acc = 0;
	int bits = 0;

	*out = NULL;
	while (len > 0 && s[len - 1] == '=')
		len--;
	if (!nf_size_add(&cap, len / 4 * 3, 4))
		return NF_EINPUT;
	buf = malloc(cap);
	if (!buf)
		return NF_ENOMEM;
	for (size_t i = 0; i < len; i++) {
		int v = b64_val((unsigned char)s[i]);
		if (v < 0) {
			OPENSSL_cleanse(buf, cap);
			free(buf);
			return NF_EINPUT;
		}
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf[n++] = (char)((acc >> bits) & 0xff);
		}
	}
	buf[n] = '\0';
	*out = buf;
	*olen = n;
	return 0;
}

/* "https://host:port/v1/" -> "host:port" into buf. */
static void normalise_host(char *buf, size_t cap, const char *key)
{
	const char *p = strstr(key, "://");
	size_t n;
	p = p ? p + 3 : key;
	n = strcspn(p, "/");
	if (n >= cap)
		n = cap - 1;
	memcpy(buf, p, n);
	buf[n] = '\0';
}

static int set_creds(nf_auth_creds *out, const char *user, size_t ulen, const char *pass,
		     size_t plen, const char *source)
{
	out->user = strndup(user, ulen);
	out->password = strndup(pass, plen);
	if (!out->user || !out->password) {
		nf_auth_creds_release(out);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	out->source = source;
	return 0;
}

int nf_auth_creds_from_docker_config(nf_auth_creds *out, const char *json, size_t len,
				     const char *host, const char *what)
{
	json_t *root = NULL, *auths, *entry = NULL, *v;
	json_error_t jerr;
	const char *key;
	char *dec = NULL;
	size_t dlen = 0;
	int err = 0;

	memset(out, 0, sizeof(*out));
	out->source = "none";
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(root)) {
		err = nf_error_set(NF_EINPUT, "%s:%d:%d: %s", what, jerr.line, jerr.column,
				   root ? "not a JSON object" : jerr.text);
		goto done;
	}
	auths = json_object_get(root, "auths");
	if (!auths)
		goto done;
	if (!json_is_object(auths)) {
		err = nf_error_set(NF_EINPUT, "%s: \"auths\" is not an object", what);
		goto done;
	}
	json_object_foreach(auths, key, v) {
		char norm[512];
		normalise_host(norm, sizeof(norm), key);
		if (!strcmp(norm, host)) {
			entry = v;
			break;
		}
	}
	if (!entry)
		goto done;
	if (!json_is_object(entry)) {
		err = nf_error_set(NF_EINPUT, "%s: auths entry for %s is not an object", what, host);
		goto done;
	}
	v = json_object_get(entry, "auth");
	if (json_is_string(v) && json_string_length(v) > 0) {
		const char *colon;
		if (b64_decode(&dec, &dlen, json_string_value(v), json_string_length(v)) ||
		    !(colon = memchr(dec, ':', dlen)) || colon == dec) {
			err = nf_error_set(NF_EINPUT,
					   "%s: auths entry for %s: \"auth\" is not base64 of user:password",
					   what, host);
			goto done;
		}
		err = set_creds(out, dec, (size_t)(colon - dec), colon + 1, dlen - (size_t)(colon - dec) - 1,
				"docker config");
		goto done;
	}
	{
		const json_t *u = json_object_get(entry, "username"), *p = json_object_get(entry, "password");
		if (json_is_string(u) && json_is_string(p) && json_string_length(u) > 0) {
			err = set_creds(out, json_string_value(u), json_string_length(u), json_string_value(p),
					json_string_length(p), "docker config");
			goto done;
		}
		if (u || p || v) {
			err = nf_error_set(NF_EINPUT,
					   "%s: auths entry for %s has neither a base64 \"auth\" nor \"username\" and \"password\" strings",
					   what, host);
			goto done;
		}
	}
done:
	if (dec) {
		OPENSSL_cleanse(dec, dlen);
		free(dec);
	}
	json_decref(root);
	return err;
}

int nf_auth_creds_load(nf_auth_creds *out, const char *host)
{
	const char *u = getenv("NIMFACTORY_REGISTRY_USER"), *p = getenv("NIMFACTORY_REGISTRY_PASSWORD");
	const char *dir = getenv("DOCKER_CONFIG"), *home = getenv("HOME");
	char *path = NULL, *text = NULL;
	size_t len = 0;
	int err = 0;

	memset(out, 0, sizeof(*out));
	out->source = "none";
	if (u && *u)
		return set_creds(out, u, strlen(u), p ? p : "", p ? strlen(p) : 0, "environment");
	if (dir && *dir)
		path = nf_path_join(dir, "config.json");
	else if (home && *home)
		path = nf_strdup_printf("%s/.docker/config.json", home);
	else
		return 0;
	if (!path)
		return nf_error_set(NF_ENOMEM, "out of memory");
	if (!nf_fs_exists(path))
		goto done;
	if ((err = nf_fs_read_file(&text, &len, path, NF_AUTH_CONFIG_MAX)))
		goto done;
	err = nf_auth_creds_from_docker_config(out, text, len, host, path);
done:
	if (text) {
		OPENSSL_cleanse(text, len);
		free(text);
	}
	free(path);
	return err;
}

int nf_auth_basic_value(char **out, const nf_auth_creds *c)
{
	char *plain = NULL, *v = NULL;
	size_t ulen, plen, n, enc;
	int err = 0;

	*out = NULL;
	if (!c->user)
		return nf_error_set(NF_EINTERNAL, "no credentials");
	ulen = strlen(c->user);
	plen = c->password ? strlen(c->password) : 0;
	if (ulen > NF_AUTH_TOKEN_MAX || plen > NF_AUTH_TOKEN_MAX)
		return nf_error_set(NF_EINPUT, "registry credentials are too long");
	n = ulen + 1 + plen;
	enc = (n + 2) / 3 * 4;
	plain = malloc(n + 1);
	v = malloc(6 + enc + 1);
	if (!plain || !v) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	memcpy(plain, c->user, ulen);
	plain[ulen] = ':';
	if (plen)
		memcpy(plain + ulen + 1, c->password, plen);
	memcpy(v, "Basic ", 6);
	EVP_EncodeBlock((unsigned char *)v + 6, (const unsigned char *)plain, (int)n);
	v[6 + enc] = '\0';
	*out = v;
	v = NULL;
done:
	if (plain) {
		OPENSSL_cleanse(plain, n);
		free(plain);
	}
	free(v);
	return err;
}

int nf_auth_token_parse(char **out, const char *body, size_t len)
{
	json_t *root = NULL;
	const json_t *t;
	json_error_t jerr;
	const char *s;
	size_t n;
	int err = 0;

	*out = NULL;
	if (len > NF_AUTH_TOKEN_MAX * 2)
		return nf_error_set(NF_EINPUT, "token server answer is %zu bytes (at most %d)", len,
				    NF_AUTH_TOKEN_MAX * 2);
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(root)) {
		err = nf_error_set(NF_EINPUT, "token server answer is not a JSON object (line %d column %d)",
				   jerr.line, jerr.column);
		goto done;
	}
	t = json_object_get(root, "token");
	if (!json_is_string(t) || json_string_length(t) == 0)
		t = json_object_get(root, "access_token");
	if (!json_is_string(t) || json_string_length(t) == 0) {
		err = nf_error_set(NF_EINPUT, "token server answer has no \"token\" string");
		goto done;
	}
	s = json_string_value(t);
	n = json_string_length(t);
	if (n > NF_AUTH_TOKEN_MAX) {
		err = nf_error_set(NF_EINPUT, "token server sent a token of %zu bytes", n);
		goto done;
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f) {
			err = nf_error_set(NF_EINPUT, "token server sent a token with a byte that is not printable ASCII");
			goto done;
		}
	if (!(*out = strdup(s)))
		err = nf_error_set(NF_ENOMEM, "out of memory");
done:
	json_decref(root);
	return err;
}
