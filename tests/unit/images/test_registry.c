/*
 * test_registry.c - the registry client's parsers (images/registry.h,
 * registry_http.h, artifact.h): references, loopback and --insecure rules,
 * Location handling (other hosts refused), hostile referrers indexes,
 * artifact manifests, gate verdicts, and artifacts attached to a layout.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "images/artifact.h"
#include "images/layout.h"
#include "images/registry.h"
#include "images/registry_http.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

static void refs(void)
{
	nf_reg_ref r;
	ok(nf_reg_ref_parse(&r, "127.0.0.1:5000/team/model:1.0.0") == 0, "host:port/name:tag");
	is_str(r.host, "127.0.0.1:5000", "host");
	is_str(r.name, "team/model", "name");
	is_str(r.tag, "1.0.0", "tag");
	ok(nf_reg_ref_parse(&r, "localhost/a/b/c") == 0 && !r.tag[0] && !strcmp(r.name, "a/b/c"), "localhost, no tag");
	ok(nf_reg_ref_parse(&r, "reg.example.com/my_team/model-x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef") == 0 &&
	   !strcmp(r.digest + 7, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef") && !r.tag[0],
	   "digest reference");
	ok(nf_reg_ref_parse(&r, "[::1]:5000/x:y") == 0 && !strcmp(r.host, "[::1]:5000"), "IPv6 loopback host");
	static const char *bad[] = {
		"model:1", "team/model:1", "127.0.0.1:5000/", "127.0.0.1:5000/Team/model", "127.0.0.1:5000/a//b",
		"127.0.0.1:5000/a/b:", "127.0.0.1:5000/a/b:-x", "127.0.0.1:5000/a/b@sha256:00", "127.0.0.1:5000/a-/b",
		"127.0.0.1:5000/a/b:t@sha256:xyz", "h.com/a b", "h.com/a/../b", "h!x.com/a", NULL,
	};
	for (size_t i = 0; bad[i]; i++)
		ok(nf_reg_ref_parse(&r, bad[i]) == NF_EINPUT && !strchr(nf_error_last(), '\n'), "refused: %s (%s)", bad[i],
		   nf_error_last());
	char long_tag[300] = "h.com/a:";
	memset(long_tag + 8, 'x', 200);
	long_tag[208] = '\0';
	ok(nf_reg_ref_parse(&r, long_tag) == NF_EINPUT, "a tag over 128 chars is refused");
}

static void loopback(void)
{
	ok(nf_reg_host_is_loopback("127.0.0.1:5000"), "127.0.0.1:5000");
	ok(nf_reg_host_is_loopback("127.1.2.3"), "127.1.2.3");
	ok(nf_reg_host_is_loopback("localhost:1"), "localhost");
	ok(nf_reg_host_is_loopback("[::1]:5000"), "[::1]");
	ok(!nf_reg_host_is_loopback("127.0.0.1.evil.com"), "127.0.0.1.evil.com is not");
	ok(!nf_reg_host_is_loopback("10.0.0.1:5000"), "10.0.0.1 is not");
	ok(!nf_reg_host_is_loopback("localhost.example.com"), "localhost.example.com is not");
	nf_reg_options o;
	nf_reg_client *c = NULL;
	nf_reg_options_init(&o);
	o.insecure = true;
	ok(nf_reg_client_new(&c, "registry.example.com", &o) == NF_EINPUT && !c &&
	   strstr(nf_error_last(), "loopback"), "--insecure refused for a remote host: %s", nf_error_last());
	ok(nf_reg_client_new(&c, "127.0.0.1:5000", &o) == 0 && c, "--insecure allowed for loopback");
	char *loc = NULL;
	ok(nf_reg_location(&loc, c, "/v2/a/blobs/uploads/123?_state=x", "t") == 0 &&
	   !strcmp(loc, "http://127.0.0.1:5000/v2/a/blobs/uploads/123?_state=x"), "relative Location resolved");
	free(loc);
	ok(nf_reg_location(&loc, c, "http://127.0.0.1:5000/v2/x", "t") == 0, "same-origin absolute Location");
	free(loc);
	ok(nf_reg_location(&loc, c, "http://127.0.0.1:5001/v2/x", "t") == NF_EINPUT, "another port refused");
	ok(nf_reg_location(&loc, c, "https://127.0.0.1:5000/v2/x", "t") == NF_EINPUT, "another scheme refused");
	ok(nf_reg_location(&loc, c, "http://127.0.0.1:5000.evil.com/v2/x", "t") == NF_EINPUT, "a lookalike host refused");
	ok(nf_reg_location(&loc, c, "//evil.com/v2/x", "t") == NF_EINPUT, "a scheme-relative Location refused");
	ok(nf_reg_location(&loc, c, "/v2/x\r\nSet-Cookie: a", "t") == NF_EINPUT, "control bytes refused");
	ok(nf_reg_location(&loc, c, NULL, "t") == NF_EINPUT, "missing Location refused");
	nf_reg_client_free(c);
	nf_reg_client_free(NULL);
}

static int check_index(const char *s)
{
	json_t *j = json_loads(s, 0, NULL);
	int err = j ? nf_reg_index_check(j, "referrers") : NF_EINPUT;
	json_decref(j);
	return err;
}

static void hostile_index(void)
{
	const char *D = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char good[512];
	snprintf(good, sizeof(good),
		 "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"%s\",\"size\":10,\"artifactType\":\"a/b\",\"annotations\":{}}]}", D);
	ok(check_index(good) == 0, "a good referrers index");
	static const char *bad[] = {
		"[]", "{\"schemaVersion\":1,\"manifests\":[]}", "{\"schemaVersion\":2}",
		"{\"schemaVersion\":2,\"manifests\":{}}", "{\"schemaVersion\":2,\"manifests\":[1]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"x\",\"digest\":\"sha256:../../etc/passwd\",\"size\":1}]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"x\",\"digest\":\"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\",\"size\":-1}]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"x\",\"digest\":\"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\",\"size\":1,\"artifactType\":5}]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"x\",\"digest\":\"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\",\"size\":1,\"annotations\":[]}]}",
		NULL,
	};
	for (size_t i = 0; bad[i]; i++)
		ok(check_index(bad[i]) == NF_EINPUT, "hostile index refused (%zu): %s", i, nf_error_last());
	/* more entries than NF_OCI_LIST_MAX */
	size_t n = NF_OCI_LIST_MAX + 1;
	json_t *j = json_pack("{s:i, s:[]}", "schemaVersion", 2, "manifests");
	for (size_t i = 0; i < n; i++)
		json_array_append_new(json_object_get(j, "manifests"),
				      json_pack("{s:s, s:s, s:i}", "mediaType", "x", "digest", D, "size", 1));
	ok(nf_reg_index_check(j, "referrers") == NF_EINPUT, "more than %d referrers refused", NF_OCI_LIST_MAX);
	json_decref(j);
}

static void verdicts(void)
{
	char v[32];
	const char *p = "{\"verdict\":\"passed\",\"profiles\":[]}";
	ok(nf_oci_gate_verdict(v, p, strlen(p)) == 0 && !strcmp(v, "passed"), "passed");
	const char *f = "{\"verdict\":\"failed\"}";
	ok(nf_oci_gate_verdict(v, f, strlen(f)) == 0 && !strcmp(v, "failed"), "failed");
	static const char *bad[] = {"{}", "[]", "{\"verdict\":1}", "{\"verdict\":\"PASS\\n\"}",
				    "{\"verdict\":\"passed\",\"verdict\":\"failed\"}", "{\"verdict\":\"\"}", "x", NULL};
	for (size_t i = 0; bad[i]; i++)
		ok(nf_oci_gate_verdict(v, bad[i], strlen(bad[i])) == NF_EINPUT && !v[0], "bad report refused: %s", bad[i]);
}

static void artifacts(void)
{
	char tmpl[] = "/tmp/nf-test-registry-XXXXXX";
	char *dir = mkdtemp(tmpl), *layout = nf_path_join(dir, "oci");
	nf_oci_desc subject, art, art2, blob;
	json_t *list = NULL, *m = NULL;
	nf_oci_artifact a;
	const char *report = "{\"verdict\":\"passed\"}";

	ok(nf_oci_layout_init(layout) == 0, "layout");
	ok(nf_oci_blob_put(&subject, layout, NF_OCI_MT_MANIFEST, "{\"schemaVersion\":2}", 19) == 0, "a subject blob");
	ok(nf_oci_layout_tag(layout, &subject, "1.0", NULL, NULL, 0) == 0, "tagged");
	ok(nf_oci_artifact_attach(&art, layout, &subject, NF_OCI_ARTIFACT_GATE_REPORT, "application/json", report,
				  strlen(report), NULL, 0) == 0, "attach a gate report");
	ok(nf_oci_artifact_list(&list, layout, subject.digest, NULL) == 0 && json_array_size(list) == 1,
	   "listed as a referrer of the subject");
	is_str(json_string_value(json_object_get(json_array_get(list, 0), "artifactType")), NF_OCI_ARTIFACT_GATE_REPORT,
	       "with its artifactType");
	json_decref(list);
	ok(nf_oci_artifact_attach(&art2, layout, &subject, NF_OCI_ARTIFACT_GATE_REPORT, "application/json", "{\"verdict\":\"failed\"}",
				  20, NULL, 0) == 0, "attach again");
	ok(nf_oci_artifact_list(&list, layout, subject.digest, NULL) == 0 && json_array_size(list) == 1 &&
	   !strcmp(json_string_value(json_object_get(json_array_get(list, 0), "digest")), art2.digest),
	   "a second report of the same type replaces the first");
	json_decref(list);
	ok(nf_oci_layout_resolve(&blob, layout, "1.0") == 0 && !strcmp(blob.digest, subject.digest), "the image tag is kept");
	ok(nf_oci_json_read_blob(&m, layout, &art2) == 0 && nf_oci_artifact_parse(&a, m, "t") == 0, "artifact parses");
	is_str(a.subject.digest, subject.digest, "subject");
	is_str(a.config.digest, NF_OCI_EMPTY_DIGEST, "empty config");
	ok(a.blob.size == 20, "one blob, the report");
	json_decref(m);
	m = json_pack("{s:i, s:s, s:{s:s, s:s, s:i}, s:[]}", "schemaVersion", 2, "mediaType", NF_OCI_MT_MANIFEST,
		      "config", "mediaType", NF_OCI_MT_CONFIG, "digest", subject.digest, "size", 1, "layers");
	ok(nf_oci_artifact_parse(&a, m, "t") == NF_ENOTFOUND, "an image without subject is not an artifact");
	json_object_set_new(m, "subject", json_string("x"));
	ok(nf_oci_artifact_parse(&a, m, "t") == NF_EINPUT, "a bad subject is refused");
	json_decref(m);
	nf_oci_desc ghost = subject;
	ghost.digest[10] = ghost.digest[10] == 'a' ? 'b' : 'a';
	ok(nf_oci_artifact_attach(&art, layout, &ghost, "a/b", "application/json", "{}", 2, NULL, 0) == NF_ENOTFOUND,
	   "a subject that is not in the layout is refused");
	nf_fs_remove_tree(dir);
	free(layout);
}

int main(void)
{
	plan_no_plan();
	refs();
	loopback();
	hostile_index();
	verdicts();
	artifacts();
	return done_testing();
}
