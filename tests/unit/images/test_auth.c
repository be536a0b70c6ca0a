/*
 * test_auth.c - registry credentials and challenges (images/auth.h):
 * WWW-Authenticate parsing (good, garbage, hostile), Docker config lookup
 * (base64 auth, username/password, URL keys, broken files), token answers,
 * and that no error message carries a secret.
 */
#include <stdlib.h>
#include <string.h>

#include "images/auth.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/banned.h"

static void challenge_ok(void)
{
	nf_auth_challenge c;
	ok(nf_auth_challenge_parse(&c, "Bearer realm=\"https://auth.example.com/token\",service=\"registry.example.com\",scope=\"repository:team/model:pull,push\"") == 0,
	   "bearer challenge parses");
	is_str(c.realm, "https://auth.example.com/token", "realm");
	is_str(c.service, "registry.example.com", "service");
	is_str(c.scope, "repository:team/model:pull,push", "scope with a comma inside quotes");
	ok(c.scheme == NF_AUTH_BEARER, "scheme bearer");
	nf_auth_challenge_release(&c);
	ok(nf_auth_challenge_parse(&c, "basic realm=\"Registry Realm\"") == 0 && c.scheme == NF_AUTH_BASIC,
	   "basic challenge, scheme case-insensitive");
	nf_auth_challenge_release(&c);
	ok(nf_auth_challenge_parse(&c, "Bearer realm=\"http://127.0.0.1:1/t\", error=\"invalid_token\", service=x") == 0 &&
	   !strcmp(c.service, "x"), "unknown parameters ignored, token values, spaces after commas");
	nf_auth_challenge_release(&c);
	ok(nf_auth_challenge_parse(&c, "Bearer realm=\"https://a/t\\\"x\"") == NF_EINPUT,
	   "a quote in a realm is refused");
	ok(nf_auth_challenge_parse(&c, "Bearer realm=\"https://a/t\",service=\"a\\\"b\"") == 0 &&
	   !strcmp(c.service, "a\"b"), "quoted-pair escape in a value");
	nf_auth_challenge_release(&c);
}

static void challenge_bad(void)
{
	static const char *bad[] = {
		"", "Negotiate abc", "Bearer", "Bearer realm=", "Bearer realm=\"https://a\",,service=x",
		"Bearer realm=\"https://a", "Bearer realm=\"ftp://a/t\"", "Bearer service=\"x\"",
		"Bearer realm=\"https://a\" service=\"x\"", "Bearer realm=\"https://a\",realm=\"https://b\"",
		"Bearer realm=\"https://a\",", "Bearer realm=\"https://a\x01\"", "Bearer=x", "Basic realm=<<<",
		"Bearer realm=\"https://a b\"", NULL,
	};
	for (size_t i = 0; bad[i]; i++) {
		nf_auth_challenge c;
		int err = nf_auth_challenge_parse(&c, bad[i]);
		ok(err == NF_EINPUT && !strchr(nf_error_last(), '\n') && !strchr(nf_error_last(), '\x01'),
		   "refused on one clean line: '%s' -> %s", bad[i], nf_error_last());
		nf_auth_challenge_release(&c);
	}
	nf_auth_challenge c;
	ok(nf_auth_challenge_parse(&c, NULL) == NF_EINPUT, "a missing header is refused");
	char *big = malloc(NF_AUTH_HEADER_MAX + 100);
	memset(big, 'a', NF_AUTH_HEADER_MAX + 99);
	memcpy(big, "Bearer realm=\"https://", 22);
	big[NF_AUTH_HEADER_MAX + 99] = '\0';
	ok(nf_auth_challenge_parse(&c, big) == NF_EINPUT && strlen(nf_error_last()) < 300,
	   "an oversized header is refused with a short message");
	free(big);
}

/* Each refusal names its reason and the byte where the parse stopped. */
static void challenge_reasons(void)
{
	static const struct {
		const char *header, *why;
		size_t at;
	} cases[] = {
		{"Negotiate abc", "unknown scheme", 0},
		{"Bearer=x", "no space after the scheme", 6},
		{"Bearer realm=\"https://a\",,service=x", "expected a parameter name", 25},
		{"Bearer realm", "expected '='", 12},
		{"Bearer realm=\"https://a", "unterminated quoted string", 23},
		{"Bearer realm=\"https://a\",realm=\"https://b\"", "duplicate parameter", 42},
		{"Bearer realm=\"https://a\",", "trailing comma", 25},
		{"Bearer realm=\"https://a\" service=\"x\"", "expected ',' between parameters", 25},
		{"Basic realm=<<<", "empty value", 12},
		{"Bearer service=\"x\"", "Bearer without an http(s) realm", 18},
		{"Bearer realm=\"https://a b\"", "realm is not a URL", 26},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		nf_auth_challenge c;
		char want[128];
		int err = nf_auth_challenge_parse(&c, cases[i].header);
		snprintf(want, sizeof(want), "(%s at byte %zu)", cases[i].why, cases[i].at);
		ok(err == NF_EINPUT && strstr(nf_error_last(), want) && c.realm == NULL &&
			   c.scheme == NF_AUTH_NONE,
		   "'%s' refused %s, nothing kept: %s", cases[i].header, want, nf_error_last());
		nf_auth_challenge_release(&c);
	}
}

static void docker_config(void)
{
	nf_auth_creds c;
	/* "ci:p@ss:word" */
	const char *cfg = "{\"auths\":{\"https://127.0.0.1:5000/v1/\":{\"auth\":\"Y2k6cEBzczp3b3Jk\"},"
			  "\"other.example.com\":{\"username\":\"u\",\"password\":\"pw\"}}}";
	ok(nf_auth_creds_from_docker_config(&c, cfg, strlen(cfg), "127.0.0.1:5000", "cfg") == 0 && c.user &&
	   !strcmp(c.user, "ci") && !strcmp(c.password, "p@ss:word"), "base64 auth under a URL key; password may hold ':'");
	is_str(c.source, "docker config", "source named");
	nf_auth_creds_release(&c);
	ok(nf_auth_creds_from_docker_config(&c, cfg, strlen(cfg), "other.example.com", "cfg") == 0 &&
	   !strcmp(c.user, "u") && !strcmp(c.password, "pw"), "username and password");
	nf_auth_creds_release(&c);
	ok(nf_auth_creds_from_docker_config(&c, cfg, strlen(cfg), "nowhere:1", "cfg") == 0 && !c.user,
	   "an unknown host: anonymous, not an error");
	const char *badb64 = "{\"auths\":{\"h:1\":{\"auth\":\"c2VjcmV0LXNlY3JldA*=\"}}}";
	ok(nf_auth_creds_from_docker_config(&c, badb64, strlen(badb64), "h:1", "cfg") == NF_EINPUT &&
	   !strstr(nf_error_last(), "c2VjcmV0"), "bad base64 refused without quoting it: %s", nf_error_last());
	const char *nocolon = "{\"auths\":{\"h:1\":{\"auth\":\"c2VjcmV0\"}}}";
	ok(nf_auth_creds_from_docker_config(&c, nocolon, strlen(nocolon), "h:1", "cfg") == NF_EINPUT &&
	   !strstr(nf_error_last(), "secret"), "auth without ':' refused, secret not quoted");
	const char *notobj = "{\"auths\":[1]}";
	ok(nf_auth_creds_from_docker_config(&c, notobj, strlen(notobj), "h:1", "cfg") == NF_EINPUT, "auths not an object");
	const char *garbage = "{\"auths\":";
	ok(nf_auth_creds_from_docker_config(&c, garbage, strlen(garbage), "h:1", "cfg.json") == NF_EINPUT &&
	   strstr(nf_error_last(), "cfg.json:"), "broken JSON names the file: %s", nf_error_last());
	const char *dup = "{\"auths\":{},\"auths\":{}}";
	ok(nf_auth_creds_from_docker_config(&c, dup, strlen(dup), "h:1", "cfg") == NF_EINPUT, "duplicate keys refused");
}

static void env_and_basic(void)
{
	nf_auth_creds c;
	char *v = NULL;
	setenv("NIMFACTORY_REGISTRY_USER", "alice", 1);
	setenv("NIMFACTORY_REGISTRY_PASSWORD", "open sesame", 1);
	ok(nf_auth_creds_load(&c, "127.0.0.1:5000") == 0 && !strcmp(c.user, "alice") &&
	   !strcmp(c.source, "environment"), "environment wins");
	ok(nf_auth_basic_value(&v, &c) == 0, "basic value");
	is_str(v, "Basic YWxpY2U6b3BlbiBzZXNhbWU=", "base64 of user:password");
	nf_auth_secret_free(v);
	nf_auth_creds_release(&c);
	ok(c.user == NULL && c.password == NULL, "released");
	unsetenv("NIMFACTORY_REGISTRY_USER");
	setenv("DOCKER_CONFIG", "/nonexistent-nf-test", 1);
	ok(nf_auth_creds_load(&c, "127.0.0.1:5000") == 0 && !c.user, "no config file: anonymous");
}

static void tokens(void)
{
	char *t = NULL;
	const char *a = "{\"token\":\"abc.def\",\"expires_in\":300}";
	ok(nf_auth_token_parse(&t, a, strlen(a)) == 0 && !strcmp(t, "abc.def"), "token");
	nf_auth_secret_free(t);
	const char *b = "{\"access_token\":\"xyz\"}";
	ok(nf_auth_token_parse(&t, b, strlen(b)) == 0 && !strcmp(t, "xyz"), "access_token");
	nf_auth_secret_free(t);
	const char *bad[] = {"{}", "[]", "{\"token\":1}", "{\"token\":\"a b\"}", "{\"token\":\"\"}", "not json",
			     "{\"token\":\"a\\nb\"}", NULL};
	for (size_t i = 0; bad[i]; i++)
		ok(nf_auth_token_parse(&t, bad[i], strlen(bad[i])) == NF_EINPUT && !t, "token answer refused: %s", bad[i]);
}

int main(void)
{
	plan_no_plan();
	challenge_ok();
	challenge_bad();
	challenge_reasons();
	docker_config();
	env_and_basic();
	tokens();
	return done_testing();
}
