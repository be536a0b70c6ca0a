/* manifest.c - OCI manifests and indexes as canonical JSON (see manifest.h). */
#include "images/manifest.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

int nf_oci_json_dump(char **out, size_t *len, const json_t *j)
{
	*out = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
	if (!*out)
		return nf_error_set(NF_ENOMEM, "cannot serialise JSON");
	*len = strlen(*out);
	return 0;
}

int nf_oci_json_put(nf_oci_desc *out, const char *layout_dir, const char *media_type,
		    const json_t *j)
{
	char *s = NULL;
	size_t len = 0;
	int err = nf_oci_json_dump(&s, &len, j);
	if (!err)
		err = nf_oci_blob_put(out, layout_dir, media_type, s, len);
	free(s);
	return err;
}

int nf_oci_json_read_blob(json_t **out, const char *layout_dir, const nf_oci_desc *desc)
{
	char *buf = NULL;
	size_t len = 0;
	json_error_t je;
	int err;

	*out = NULL;
	if ((err = nf_oci_blob_read(&buf, &len, layout_dir, desc, NF_OCI_JSON_MAX)))
		return err;
	*out = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	free(buf);
	if (!*out)
		return nf_error_set(NF_EINPUT, "%s/blobs/sha256/%s:%d:%d: %s", layout_dir,
				    desc->digest + 7, je.line, je.column, je.text);
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return nf_error_set(NF_EINPUT, "%s/blobs/sha256/%s: not a JSON object", layout_dir,
				    desc->digest + 7);
	}
	return 0;
}

json_t *nf_oci_desc_json(const nf_oci_desc *d)
{
	return json_pack("{s:s, s:s, s:I}", "mediaType", d->media_type, "digest", d->digest,
			 "size", (json_int_t)d->size);
}

int nf_oci_desc_parse(nf_oci_desc *out, const json_t *j, const char *what)
{
	const json_t *mt, *dg, *sz;
	memset(out, 0, sizeof(*out));
	if (!json_is_object(j))
		return nf_error_set(NF_EINPUT, "%s: descriptor is not an object", what);
	mt = json_object_get(j, "mediaType");
	dg = json_object_get(j, "digest");
	sz = json_object_get(j, "size");
	if (!json_is_string(mt) || !json_is_string(dg) || !json_is_integer(sz))
		return nf_error_set(NF_EINPUT, "%s: descriptor needs mediaType, digest and size", what);
	if (json_integer_value(sz) < 0)
		return nf_error_set(NF_EINPUT, "%s: negative size", what);
	if (nf_oci_desc_set(out, json_string_value(mt), json_string_value(dg),
			    (uint64_t)json_integer_value(sz)))
		return nf_error_wrap(NF_EINPUT, "%s", what);
	return 0;
}

int nf_oci_json_set_kv(json_t *obj, const nf_oci_kv *kv, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		json_t *v;
		if (!kv[i].key || !kv[i].value || !*kv[i].key)
			return nf_error_set(NF_EINPUT, "%s: empty key or value", what);
		v = json_string(kv[i].value);
		if (!v)
			return nf_error_set(NF_EINPUT, "%s %.100s: value is not UTF-8", what, kv[i].key);
		if (json_object_set_new(obj, kv[i].key, v))
			return nf_error_set(NF_EINPUT, "%s %.100s: key is not UTF-8", what, kv[i].key);
	}
	return 0;
}

static int push_desc(json_t *arr, const nf_oci_desc *d)
{
	json_t *o = nf_oci_desc_json(d);
	if (!o || json_array_append_new(arr, o))
		return nf_error_set(NF_EINPUT, "descriptor %s: cannot be encoded", d->digest);
	return 0;
}

int nf_oci_manifest_json(json_t **out, const nf_oci_desc *config, const nf_oci_desc *layers,
			 size_t n_layers, const nf_oci_kv *annotations, size_t n_annotations)
{
	json_t *m = NULL, *arr = NULL, *ann = NULL, *cfg = NULL;
	int err = 0;

	*out = NULL;
	m = json_object();
	arr = json_array();
	cfg = nf_oci_desc_json(config);
	if (!m || !arr || !cfg) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < n_layers; i++)
		if ((err = push_desc(arr, &layers[i])))
			goto done;
	if (json_object_set_new(m, "schemaVersion", json_integer(2)) ||
	    json_object_set_new(m, "mediaType", json_string(NF_OCI_MT_MANIFEST)) ||
	    json_object_set(m, "config", cfg) || json_object_set(m, "layers", arr)) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (n_annotations) {
		ann = json_object();
		if (!ann) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
		if ((err = nf_oci_json_set_kv(ann, annotations, n_annotations, "manifest annotation")))
			goto done;
		if (json_object_set(m, "annotations", ann)) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
	}
	*out = m;
	m = NULL;
done:
	json_decref(m);
	json_decref(arr);
	json_decref(ann);
	json_decref(cfg);
	return err;
}

int nf_oci_index_json(json_t **out, const nf_oci_index_entry *entries, size_t n,
		      const nf_oci_kv *annotations, size_t n_annotations)
{
	json_t *idx = NULL, *arr = NULL, *ann = NULL;
	int err = 0;

	*out = NULL;
	idx = json_object();
	arr = json_array();
	if (!idx || !arr) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		const nf_oci_index_entry *e = &entries[i];
		json_t *d = nf_oci_desc_json(&e->manifest);
		if (!d || json_array_append_new(arr, d)) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
		if (e->platform) {
			json_t *p;
			if (!e->platform->architecture || !e->platform->os) {
				err = nf_error_set(NF_EINPUT, "index entry %zu: platform needs architecture and os", i);
				goto done;
			}
			p = json_pack("{s:s, s:s}", "architecture", e->platform->architecture, "os",
				      e->platform->os);
			if (p && e->platform->variant)
				json_object_set_new(p, "variant", json_string(e->platform->variant));
			if (!p || json_object_set_new(d, "platform", p)) {
				err = nf_error_set(NF_EINPUT, "index entry %zu: bad platform", i);
				goto done;
			}
		}
		if (e->n_annotations) {
			json_t *a = json_object();
			if (!a || json_object_set_new(d, "annotations", a)) {
				err = nf_error_set(NF_ENOMEM, "out of memory");
				goto done;
			}
			if ((err = nf_oci_json_set_kv(a, e->annotations, e->n_annotations,
						      "index entry annotation")))
				goto done;
		}
	}
	if (json_object_set_new(idx, "schemaVersion", json_integer(2)) ||
	    json_object_set_new(idx, "mediaType", json_string(NF_OCI_MT_INDEX)) ||
	    json_object_set(idx, "manifests", arr)) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (n_annotations) {
		ann = json_object();
		if (!ann || json_object_set(idx, "annotations", ann)) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
		if ((err = nf_oci_json_set_kv(ann, annotations, n_annotations, "index annotation")))
			goto done;
	}
	*out = idx;
	idx = NULL;
done:
	json_decref(idx);
	json_decref(arr);
	json_decref(ann);
	return err;
}

void nf_oci_manifest_free(nf_oci_manifest *m)
{
	if (!m)
		return;
	free(m->layers);
	json_decref(m->json);
	free(m);
}

int nf_oci_manifest_parse(nf_oci_manifest **out, json_t *j, const char *what)
{
	nf_oci_manifest *m = NULL;
	const json_t *sv, *mt, *layers;
	int err = 0;

	*out = NULL;
	if (!json_is_object(j))
		return nf_error_set(NF_EINPUT, "%s: manifest is not an object", what);
	sv = json_object_get(j, "schemaVersion");
	if (!json_is_integer(sv) || json_integer_value(sv) != 2)
		return nf_error_set(NF_EINPUT, "%s: schemaVersion is not 2", what);
	mt = json_object_get(j, "mediaType");
	if (mt && (!json_is_string(mt) || (strcmp(json_string_value(mt), NF_OCI_MT_MANIFEST) &&
					   strcmp(json_string_value(mt), NF_OCI_MT_DOCKER_MANIFEST))))
		return nf_error_set(NF_EINPUT, "%s: not an image manifest (mediaType %.80s)", what,
				    json_is_string(mt) ? json_string_value(mt) : "?");
	layers = json_object_get(j, "layers");
	if (!json_is_array(layers) || json_array_size(layers) > NF_OCI_LIST_MAX)
		return nf_error_set(NF_EINPUT, "%s: layers missing or more than %d", what,
				    NF_OCI_LIST_MAX);
	m = calloc(1, sizeof(*m));
	if (!m)
		return nf_error_set(NF_ENOMEM, "out of memory");
	if ((err = nf_oci_desc_parse(&m->config, json_object_get(j, "config"), what)))
		goto done;
	m->n_layers = json_array_size(layers);
	m->layers = calloc(m->n_layers ? m->n_layers : 1, sizeof(*m->layers));
	if (!m->layers) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < m->n_layers; i++)
		if ((err = nf_oci_desc_parse(&m->layers[i], json_array_get(layers, i), what)))
			goto done;
	m->json = json_incref(j);
	*out = m;
	m = NULL;
done:
	nf_oci_manifest_free(m);
	return err;
}
