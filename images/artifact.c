/* artifact.c - OCI artifacts referring to an image (see artifact.h). */
#include "images/artifact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "images/layout.h"
#include "util/error.h"
#include "util/banned.h"

#define EMPTY_JSON "{}"
#define EMPTY_MT "application/vnd.oci.empty.v1+json"

int nf_oci_artifact_json(json_t **out, const nf_oci_desc *subject, const char *artifact_type,
			 const nf_oci_desc *blob, const nf_oci_kv *annotations, size_t n)
{
	json_t *m = NULL, *cfg = NULL, *layer = NULL, *sub = NULL, *ann = NULL;
	nf_oci_desc empty;
	int err;

	*out = NULL;
	if ((err = nf_oci_desc_set(&empty, EMPTY_MT,
				   "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
				   2)))
		return err;
	if (!artifact_type || !*artifact_type || strlen(artifact_type) >= NF_OCI_MEDIA_TYPE_MAX)
		return nf_error_set(NF_EINPUT, "artifact type missing or too long");
	cfg = nf_oci_desc_json(&empty);
	layer = nf_oci_desc_json(blob);
	sub = nf_oci_desc_json(subject);
	m = json_pack("{s:i, s:s, s:s, s:o, s:[o], s:o}", "schemaVersion", 2, "mediaType",
		      NF_OCI_MT_MANIFEST, "artifactType", artifact_type, "config", cfg, "layers", layer,
		      "subject", sub);
	cfg = layer = sub = NULL; /* stolen by json_pack, even on failure */
	if (!m)
		return nf_error_set(NF_ENOMEM, "out of memory (artifact manifest)");
	if (n) {
		ann = json_object();
		if (!ann || json_object_set_new(m, "annotations", ann)) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
		if ((err = nf_oci_json_set_kv(ann, annotations, n, "artifact annotation")))
			goto done;
	}
	*out = m;
	m = NULL;
done:
	json_decref(m);
	return err;
}

/* "sha256-<hex>.<type>" when it is a valid ref, else "sha256-<hex>.artifact". */
static void layout_ref(char *buf, size_t cap, const char *subject, const char *artifact_type)
{
	snprintf(buf, cap, "sha256-%s.%s", subject + 7, artifact_type);
	if (nf_oci_ref_check(buf)) {
		nf_error_clear();
		snprintf(buf, cap, "sha256-%s.artifact", subject + 7);
	}
}

int nf_oci_artifact_attach(nf_oci_desc *out, const char *layout, const nf_oci_desc *subject,
			   const char *artifact_type, const char *media_type, const void *data,
			   size_t len, const nf_oci_kv *annotations, size_t n)
{
	nf_oci_desc empty, blob;
	json_t *m = NULL;
	char ref[256];
	int err;

	memset(out, 0, sizeof(*out));
	if ((err = nf_oci_digest_check(subject->digest)))
		return err;
	if (!nf_oci_blob_exists(layout, subject->digest))
		return nf_error_set(NF_ENOTFOUND, "%s: subject %s is not in the layout", layout,
				    subject->digest);
	if ((err = nf_oci_blob_put(&empty, layout, EMPTY_MT, EMPTY_JSON, 2)))
		goto done;
	if ((err = nf_oci_blob_put(&blob, layout, media_type, data, len)))
		goto done;
	if ((err = nf_oci_artifact_json(&m, subject, artifact_type, &blob, annotations, n)))
		goto done;
	if ((err = nf_oci_json_put(out, layout, NF_OCI_MT_MANIFEST, m)))
		goto done;
	layout_ref(ref, sizeof(ref), subject->digest, artifact_type);
	{
		nf_oci_kv kv = {"io.nimfactory.artifact.type", artifact_type};
		err = nf_oci_layout_tag(layout, out, ref, NULL, &kv, 1);
	}
done:
	json_decref(m);
	if (err)
		nf_error_wrap(err, "%s: attach %s", layout, artifact_type);
	return err;
}

int nf_oci_artifact_parse(nf_oci_artifact *out, const json_t *j, const char *what)
{
	const json_t *sub, *at, *layers, *mt;
	int err;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(j))
		return nf_error_set(NF_EINPUT, "%s: not a JSON object", what);
	mt = json_object_get(j, "mediaType");
	sub = json_object_get(j, "subject");
	if (!sub || (mt && (!json_is_string(mt) || strcmp(json_string_value(mt), NF_OCI_MT_MANIFEST))))
		return NF_ENOTFOUND;
	if ((err = nf_oci_desc_parse(&out->subject, sub, what)))
		return err;
	if ((err = nf_oci_desc_parse(&out->config, json_object_get(j, "config"), what)))
		return err;
	at = json_object_get(j, "artifactType");
	if (at && !json_is_string(at))
		return nf_error_set(NF_EINPUT, "%s: artifactType is not a string", what);
	snprintf(out->artifact_type, sizeof(out->artifact_type), "%s",
		 at ? json_string_value(at) : out->config.media_type);
	if (at && json_string_length(at) >= sizeof(out->artifact_type))
		return nf_error_set(NF_EINPUT, "%s: artifactType too long", what);
	layers = json_object_get(j, "layers");
	if (!json_is_array(layers) || json_array_size(layers) < 1 ||
	    json_array_size(layers) > NF_OCI_LIST_MAX)
		return nf_error_set(NF_EINPUT, "%s: artifact without a blob", what);
	return nf_oci_desc_parse(&out->blob, json_array_get(layers, 0), what);
}

int nf_oci_artifact_list(json_t **out, const char *layout, const char *subject_digest,
			 const char *artifact_type)
{
	json_t *idx = NULL, *list = NULL, *m = NULL;
	const json_t *e;
	size_t i;
	int err;

	*out = NULL;
	if ((err = nf_oci_layout_read_index(&idx, layout)))
		return err;
	if (!(list = json_array())) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	json_array_foreach(json_object_get(idx, "manifests"), i, e) {
		nf_oci_desc d;
		nf_oci_artifact a;
		json_t *dj;
		if ((err = nf_oci_desc_parse(&d, e, layout)))
			goto done;
		if (strcmp(d.media_type, NF_OCI_MT_MANIFEST))
			continue;
		json_decref(m);
		m = NULL;
		if ((err = nf_oci_json_read_blob(&m, layout, &d)))
			goto done;
		err = nf_oci_artifact_parse(&a, m, layout);
		if (err == NF_ENOTFOUND) {
			err = 0;
			continue;
		}
		if (err)
			goto done;
		if (strcmp(a.subject.digest, subject_digest) ||
		    (artifact_type && strcmp(a.artifact_type, artifact_type)))
			continue;
		dj = nf_oci_desc_json(&d);
		if (!dj || json_object_set_new(dj, "artifactType", json_string(a.artifact_type))) {
			json_decref(dj);
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
		if (json_is_object(json_object_get(m, "annotations")))
			json_object_set(dj, "annotations", json_object_get(m, "annotations"));
		json_array_append_new(list, dj);
	}
	*out = list;
	list = NULL;
done:
	json_decref(m);
	json_decref(idx);
	json_decref(list);
	return err;
}

int nf_oci_gate_verdict(char verdict[32], const char *json, size_t len)
{
	json_t *j;
	json_error_t jerr;
	const json_t *v;
	int err = 0;

	verdict[0] = '\0';
	j = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(j)) {
		err = nf_error_set(NF_EINPUT, "gate report: not a JSON object (line %d column %d)", jerr.line,
				   jerr.column);
		goto done;
	}
	v = json_object_get(j, "verdict");
	if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 31) {
		err = nf_error_set(NF_EINPUT, "gate report: no \"verdict\" string");
		goto done;
	}
	for (const char *p = json_string_value(v); *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || *p == '_' || *p == '-')) {
			err = nf_error_set(NF_EINPUT, "gate report: verdict is not a word");
			goto done;
		}
	memcpy(verdict, json_string_value(v), json_string_length(v) + 1);
done:
	json_decref(j);
	return err;
}
