/*
 * registry_manifest.c - manifests and indexes on a registry (GET with digest
 * verification, HEAD, PUT), and referrers: the API, else the tag scheme
 * (distribution-spec 1.1, "sha256-<hex>" image index).
 */
#define _GNU_SOURCE
#include "images/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "images/manifest.h"
#include "images/registry_http.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/banned.h"

#define ACCEPT_MANIFESTS                                                                  \
	NF_OCI_MT_MANIFEST ", " NF_OCI_MT_INDEX ", " NF_OCI_MT_DOCKER_MANIFEST ", " \
	NF_OCI_MT_DOCKER_LIST

static bool manifest_type(const char *mt)
{
	return mt && (!strcmp(mt, NF_OCI_MT_MANIFEST) || !strcmp(mt, NF_OCI_MT_INDEX) ||
		      !strcmp(mt, NF_OCI_MT_DOCKER_MANIFEST) || !strcmp(mt, NF_OCI_MT_DOCKER_LIST));
}

/* Content-Type without parameters, into buf. */
static void bare_type(char *buf, size_t cap, const char *ct)
{
	size_t n = ct ? strcspn(ct, "; ") : 0;
	if (n >= cap)
		n = cap - 1;
	if (n)
		memcpy(buf, ct, n);
	buf[n] = '\0';
}

static bool ref_is_digest(const char *ref) { return !strncmp(ref, "sha256:", 7); }

int nf_reg_manifest_get(char **out, size_t *len, nf_oci_desc *desc, nf_reg_client *c,
			const char *name, const char *ref)
{
	nf_reg_req q;
	nf_reg_resp r;
	char *url = NULL, *scope = NULL, dg[NF_OCI_DIGEST_LEN + 1];
	char ct[NF_OCI_MEDIA_TYPE_MAX];
	json_t *j = NULL;
	json_error_t jerr;
	const char *mt;
	int err;

	*out = NULL;
	*len = 0;
	memset(desc, 0, sizeof(*desc));
	if (ref_is_digest(ref) && (err = nf_oci_digest_check(ref)))
		return err;
	if ((err = nf_reg_repo_req(&q, &url, &scope, c, "GET", name, "pull", NULL, "manifests/%s", ref)))
		goto done;
	q.accept = ACCEPT_MANIFESTS;
	q.max_resp = NF_OCI_JSON_MAX;
	if ((err = nf_reg_http(&r, c, &q)))
		goto done;
	if (r.status == 404) {
		err = nf_error_set(NF_ENOTFOUND, "registry %s: manifest %s:%s not found", c->host, name, ref);
		goto resp;
	}
	if (r.status != 200) {
		err = nf_reg_status_error(NF_ENET, &r, &q);
		goto resp;
	}
	if ((err = nf_oci_digest_of(dg, r.body ? r.body : "", r.len)))
		goto resp;
	if (ref_is_digest(ref) && strcmp(dg, ref)) {
		err = nf_error_set(NF_EINPUT, "registry %s: manifest %s@%s: its bytes hash to %.19s...: refused",
				   c->host, name, ref, dg);
		goto resp;
	}
	if (r.digest && strcmp(r.digest, dg)) {
		err = nf_error_set(NF_EINPUT,
				   "registry %s: manifest %s:%s: Docker-Content-Digest %.80s is not the digest of its bytes (%.19s...): refused",
				   c->host, name, ref, r.digest, dg);
		goto resp;
	}
	j = json_loadb(r.body ? r.body : "", r.len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(j)) {
		err = nf_error_set(NF_EINPUT, "registry %s: manifest %s:%s is not a JSON object (line %d column %d)",
				   c->host, name, ref, jerr.line, jerr.column);
		goto resp;
	}
	bare_type(ct, sizeof(ct), r.ctype);
	mt = json_string_value(json_object_get(j, "mediaType"));
	if (!mt)
		mt = ct;
	if (!manifest_type(mt)) {
		err = nf_error_set(NF_EUNSUPPORTED, "registry %s: manifest %s:%s has media type '%.80s'",
				   c->host, name, ref, mt);
		goto resp;
	}
	if (ct[0] && manifest_type(ct) && strcmp(ct, mt)) {
		err = nf_error_set(NF_EINPUT, "registry %s: manifest %s:%s is served as %s but says %.80s",
				   c->host, name, ref, ct, mt);
		goto resp;
	}
	if (!strcmp(mt, NF_OCI_MT_INDEX) || !strcmp(mt, NF_OCI_MT_DOCKER_LIST)) {
		char what[300];
		snprintf(what, sizeof(what), "registry %s: index %s:%s", c->host, name, ref);
		if ((err = nf_reg_index_check(j, what)))
			goto resp;
	} else {
		nf_oci_manifest *m = NULL;
		char what[300];
		snprintf(what, sizeof(what), "registry %s: manifest %s:%s", c->host, name, ref);
		if ((err = nf_oci_manifest_parse(&m, j, what)))
			goto resp;
		nf_oci_manifest_free(m);
	}
	if ((err = nf_oci_desc_set(desc, mt, dg, r.len)))
		goto resp;
	err = nf_reg_resp_take_body(out, len, &r);
resp:
	nf_reg_resp_release(&r);
done:
	json_decref(j);
	free(url);
	free(scope);
	return err;
}

int nf_reg_manifest_head(bool *exists, nf_oci_desc *desc, nf_reg_client *c, const char *name,
			 const char *ref)
{
	nf_reg_req q;
	nf_reg_resp r;
	char *url = NULL, *scope = NULL, ct[NF_OCI_MEDIA_TYPE_MAX];
	int err;

	*exists = false;
	memset(desc, 0, sizeof(*desc));
	if ((err = nf_reg_repo_req(&q, &url, &scope, c, "HEAD", name, "pull,push", NULL, "manifests/%s",
				   ref)))
		goto done;
	q.accept = ACCEPT_MANIFESTS;
	if ((err = nf_reg_http(&r, c, &q)))
		goto done;
	if (r.status == 200) {
		*exists = true;
		bare_type(ct, sizeof(ct), r.ctype);
		if (r.digest && nf_oci_digest_check(r.digest) == 0) {
			snprintf(desc->digest, sizeof(desc->digest), "%s", r.digest);
			snprintf(desc->media_type, sizeof(desc->media_type), "%s", ct);
			desc->size = r.content_length > 0 ? (uint64_t)r.content_length : 0;
		}
		nf_error_clear();
	} else if (r.status != 404) {
		err = nf_reg_status_error(NF_ENET, &r, &q);
	}
	nf_reg_resp_release(&r);
done:
	free(url);
	free(scope);
	return err;
}

int nf_reg_manifest_put(bool *subject_ok, nf_reg_client *c, const char *name, const char *ref,
			const char *media_type, const void *data, size_t len)
{
	nf_reg_req q;
	nf_reg_resp r;
	char *url = NULL, *scope = NULL, dg[NF_OCI_DIGEST_LEN + 1];
	int err;

	if (subject_ok)
		*subject_ok = false;
	if ((err = nf_oci_digest_of(dg, data, len)))
		return err;
	if ((err = nf_reg_repo_req(&q, &url, &scope, c, "PUT", name, "pull,push", NULL, "manifests/%s",
				   ref)))
		goto done;
	q.content_type = media_type;
	q.body = data;
	q.body_len = len;
	q.max_resp = 64 * 1024;
	if ((err = nf_reg_http(&r, c, &q)))
		goto done;
	if (r.status != 201 && r.status != 200) {
		err = nf_reg_status_error(NF_ENET, &r, &q);
	} else if (r.digest && strcmp(r.digest, dg)) {
		err = nf_error_set(NF_EINPUT, "registry %s stored manifest %s:%s as %.80s, not %s: refused",
				   c->host, name, ref, r.digest, dg);
	} else {
		c->st.manifests_put++;
		if (subject_ok && r.oci_subject)
			*subject_ok = true;
	}
	nf_reg_resp_release(&r);
done:
	if (err)
		nf_error_wrap(err, "push manifest %s:%s", name, ref);
	free(url);
	free(scope);
	return err;
}

int nf_reg_index_check(const json_t *j, const char *what)
{
	const json_t *sv, *arr, *e;
	size_t i;
	int err;

	if (!json_is_object(j))
		return nf_error_set(NF_EINPUT, "%s: not a JSON object", what);
	sv = json_object_get(j, "schemaVersion");
	if (!json_is_integer(sv) || json_integer_value(sv) != 2)
		return nf_error_set(NF_EINPUT, "%s: schemaVersion is not 2", what);
	arr = json_object_get(j, "manifests");
	if (!json_is_array(arr) || json_array_size(arr) > NF_OCI_LIST_MAX)
		return nf_error_set(NF_EINPUT, "%s: manifests is not an array of at most %d", what,
				    NF_OCI_LIST_MAX);
	json_array_foreach(arr, i, e) {
		nf_oci_desc d;
		const json_t *at = json_object_get(e, "artifactType"), *ann = json_object_get(e, "annotations");
		if ((err = nf_oci_desc_parse(&d, e, what)))
			return err;
		if (at && (!json_is_string(at) || json_string_length(at) >= NF_OCI_MEDIA_TYPE_MAX))
			return nf_error_set(NF_EINPUT, "%s: manifests[%zu].artifactType is not a media type", what, i);
		if (ann && !json_is_object(ann))
			return nf_error_set(NF_EINPUT, "%s: manifests[%zu].annotations is not an object", what, i);
	}
	return 0;
}

static int filter_into(json_t *out, const json_t *index, const char *artifact_type)
{
	const json_t *e;
	size_t i;
	json_array_foreach(json_object_get(index, "manifests"), i, e) {
		const char *at = json_string_value(json_object_get(e, "artifactType"));
		if (artifact_type && (!at || strcmp(at, artifact_type)))
			continue;
		if (json_array_append(out, (json_t *)e))
			return nf_error_set(NF_ENOMEM, "out of memory");
	}
	return 0;
}

/* Fallback tag of a subject: "sha256-<hex>". */
static void fallback_tag(char tag[80], const char *subject)
{
	snprintf(tag, 80, "sha256-%s", subject + 7);
}

int nf_reg_referrers(json_t **out, bool *via_api, nf_reg_client *c, const char *name,
		     const char *subject, const char *artifact_type)
{
	nf_reg_req q;
	nf_reg_resp r = {0};
	char *url = NULL, *scope = NULL, *body = NULL, *esc = NULL, tag[80], what[300];
	json_t *list = NULL, *j = NULL;
	json_error_t jerr;
	nf_oci_desc d;
	size_t len = 0;
	int err;

	*out = NULL;
	if (via_api)
		*via_api = false;
	if ((err = nf_oci_digest_check(subject)))
		return err;
	list = json_array();
	if (artifact_type && !(esc = curl_easy_escape(c->h, artifact_type, 0))) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = nf_reg_repo_req(&q, &url, &scope, c, "GET", name, "pull", NULL, "referrers/%s%s%s",
				   subject, esc ? "?artifactType=" : "", esc ? esc : "")))
		goto done;
	if (!list) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	q.accept = NF_OCI_MT_INDEX;
	q.max_resp = NF_OCI_JSON_MAX;
	if ((err = nf_reg_http(&r, c, &q)))
		goto done;
	snprintf(what, sizeof(what), "registry %s: referrers of %s in %s", c->host, subject, name);
	if (r.status == 200) {
		char ct[NF_OCI_MEDIA_TYPE_MAX];
		bare_type(ct, sizeof(ct), r.ctype);
		if (strcmp(ct, NF_OCI_MT_INDEX)) {
			err = nf_error_set(NF_EINPUT, "%s: served as '%.80s', not an image index", what, ct);
			goto done;
		}
		j = json_loadb(r.body ? r.body : "", r.len, JSON_REJECT_DUPLICATES, &jerr);
		if (!j) {
			err = nf_error_set(NF_EINPUT, "%s: not JSON (line %d column %d)", what, jerr.line,
					   jerr.column);
			goto done;
		}
		if ((err = nf_reg_index_check(j, what)) || (err = filter_into(list, j, artifact_type)))
			goto done;
		if (via_api)
			*via_api = true;
	} else if (r.status == 404) {
		/* no referrers API: the tag scheme */
		fallback_tag(tag, subject);
		err = nf_reg_manifest_get(&body, &len, &d, c, name, tag);
		if (err == NF_ENOTFOUND) {
			nf_error_clear();
			err = 0;
		} else if (err) {
			goto done;
		} else {
			if (strcmp(d.media_type, NF_OCI_MT_INDEX)) {
				err = nf_error_set(NF_EINPUT, "%s: tag %s is not an image index", what, tag);
				goto done;
			}
			j = json_loadb(body, len, 0, NULL);
			if ((err = filter_into(list, j, artifact_type)))
				goto done;
		}
	} else {
		err = nf_reg_status_error(NF_ENET, &r, &q);
		goto done;
	}
	*out = list;
	list = NULL;
done:
	nf_reg_resp_release(&r);
	json_decref(list);
	json_decref(j);
	curl_free(esc);
	free(body);
	free(url);
	free(scope);
	return err;
}

int nf_reg_referrers_tag_add(nf_reg_client *c, const char *name, const char *subject,
			     const json_t *desc)
{
	char tag[80], *body = NULL, *bytes = NULL;
	json_t *idx = NULL, *arr;
	const json_t *e;
	const char *want = json_string_value(json_object_get(desc, "digest"));
	nf_oci_desc d;
	size_t len = 0, blen = 0, i;
	int err;

	if ((err = nf_oci_digest_check(subject)) || !want || (err = nf_oci_digest_check(want)))
		return err ? err : nf_error_set(NF_EINTERNAL, "referrer descriptor without a digest");
	fallback_tag(tag, subject);
	err = nf_reg_manifest_get(&body, &len, &d, c, name, tag);
	if (err == NF_ENOTFOUND) {
		nf_error_clear();
		idx = json_pack("{s:i, s:s, s:[]}", "schemaVersion", 2, "mediaType", NF_OCI_MT_INDEX,
				"manifests");
		if (!idx) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
	} else if (err) {
		goto done;
	} else {
		if (strcmp(d.media_type, NF_OCI_MT_INDEX)) {
			err = nf_error_set(NF_EINPUT, "registry %s: tag %s:%s is not an image index: refusing to overwrite it",
					   c->host, name, tag);
			goto done;
		}
		idx = json_loadb(body, len, 0, NULL);
		if (!idx) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
	}
	arr = json_object_get(idx, "manifests");
	json_array_foreach(arr, i, e) {
		const char *dg = json_string_value(json_object_get(e, "digest"));
		if (dg && !strcmp(dg, want)) {
			nf_reg_logf(c, "referrers tag %s already lists %s", tag, want);
			goto done;
		}
	}
	if (json_array_append(arr, (json_t *)desc)) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = nf_oci_json_dump(&bytes, &blen, idx)))
		goto done;
	err = nf_reg_manifest_put(NULL, c, name, tag, NF_OCI_MT_INDEX, bytes, blen);
done:
	json_decref(idx);
	free(body);
	free(bytes);
	return err;
}
