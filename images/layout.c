/* layout.c - OCI image layout directory and its index.json (see layout.h). */
#include "images/layout.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define LAYOUT_FILE "{\"imageLayoutVersion\":\"1.0.0\"}"
#define REF_MAX 128

int nf_oci_layout_init(const char *dir)
{
	char *blobs = NULL, *lf = NULL, *idx = NULL;
	int err = 0;

	blobs = nf_strdup_printf("%s/blobs/sha256", dir);
	lf = nf_path_join(dir, "oci-layout");
	idx = nf_path_join(dir, "index.json");
	if (!blobs || !lf || !idx) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = nf_fs_mkdir_p(blobs, 0755)))
		goto done;
	if (!nf_fs_exists(lf) &&
	    (err = nf_fs_write_atomic(lf, LAYOUT_FILE, strlen(LAYOUT_FILE), 0644)))
		goto done;
	if (!nf_fs_exists(idx)) {
		const char *empty = "{\"manifests\":[],\"mediaType\":\"" NF_OCI_MT_INDEX
				    "\",\"schemaVersion\":2}";
		err = nf_fs_write_atomic(idx, empty, strlen(empty), 0644);
	}
done:
	free(blobs);
	free(lf);
	free(idx);
	return err;
}

int nf_oci_ref_check(const char *ref)
{
	size_t n = ref ? strlen(ref) : 0;
	if (n == 0 || n > REF_MAX)
		return nf_error_set(NF_EINPUT, "ref name '%.40s' is empty or longer than %d", ref ? ref : "",
				    REF_MAX);
	for (size_t i = 0; i < n; i++) {
		char c = ref[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      strchr("._:/@+-", c)))
			return nf_error_set(NF_EINPUT, "ref name '%.128s': bad character at %zu", ref, i);
	}
	return 0;
}

int nf_oci_layout_read_index(json_t **out, const char *dir)
{
	char *lf = NULL, *idx = NULL, *buf = NULL;
	size_t len = 0;
	json_t *j = NULL, *lj = NULL, *m;
	json_error_t je;
	int err = 0;

	*out = NULL;
	lf = nf_path_join(dir, "oci-layout");
	idx = nf_path_join(dir, "index.json");
	if (!lf || !idx) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = nf_fs_read_file(&buf, &len, lf, 4096)))
		goto done;
	lj = json_loadb(buf, len, 0, &je);
	if (!lj || !json_is_string(json_object_get(lj, "imageLayoutVersion")) ||
	    strcmp(json_string_value(json_object_get(lj, "imageLayoutVersion")), "1.0.0")) {
		err = nf_error_set(NF_EINPUT, "%s: not an OCI layout 1.0.0 file", lf);
		goto done;
	}
	free(buf);
	buf = NULL;
	if ((err = nf_fs_read_file(&buf, &len, idx, NF_OCI_JSON_MAX)))
		goto done;
	j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!j) {
		err = nf_error_set(NF_EINPUT, "%s:%d:%d: %s", idx, je.line, je.column, je.text);
		goto done;
	}
	if (!json_is_object(j) || !json_is_integer(json_object_get(j, "schemaVersion")) ||
	    json_integer_value(json_object_get(j, "schemaVersion")) != 2) {
		err = nf_error_set(NF_EINPUT, "%s: not an image index with schemaVersion 2", idx);
		goto done;
	}
	m = json_object_get(j, "manifests");
	if (!json_is_array(m) || json_array_size(m) > NF_OCI_LIST_MAX) {
		err = nf_error_set(NF_EINPUT, "%s: manifests missing or more than %d", idx,
				   NF_OCI_LIST_MAX);
		goto done;
	}
	for (size_t i = 0; i < json_array_size(m); i++) {
		nf_oci_desc d;
		const json_t *ann = json_object_get(json_array_get(m, i), "annotations");
		if ((err = nf_oci_desc_parse(&d, json_array_get(m, i), idx)))
			goto done;
		if (ann && !json_is_object(ann)) {
			err = nf_error_set(NF_EINPUT, "%s: manifests[%zu].annotations is not an object",
					   idx, i);
			goto done;
		}
	}
	*out = j;
	j = NULL;
done:
	json_decref(j);
	json_decref(lj);
	free(buf);
	free(lf);
	free(idx);
	return err;
}

static const char *entry_ref(const json_t *e)
{
	const json_t *r = json_object_get(json_object_get(e, "annotations"), NF_OCI_ANN_REF_NAME);
	return json_is_string(r) ? json_string_value(r) : NULL;
}

static int cmp_ref(const void *a, const void *b)
{
	const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	const char *rx = entry_ref(x), *ry = entry_ref(y);
	int c;
	if (!rx || !ry)
		return rx ? 1 : ry ? -1 : 0;
	c = strcmp(rx, ry);
	if (c)
		return c;
	return strcmp(json_string_value(json_object_get(x, "digest")),
		      json_string_value(json_object_get(y, "digest")));
}

int nf_oci_layout_tag(const char *dir, const nf_oci_desc *desc, const char *ref,
		      const nf_oci_platform *platform, const nf_oci_kv *annotations,
		      size_t n_annotations)
{
	json_t *idx = NULL, *arr = NULL, *e = NULL, *ann = NULL, **v = NULL;
	char *path = NULL, *s = NULL;
	size_t n, len = 0, k;
	int err;

	if ((err = nf_oci_ref_check(ref)) || (err = nf_oci_digest_check(desc->digest)))
		return err;
	if ((err = nf_oci_layout_init(dir)))
		return err;
	if ((err = nf_oci_layout_read_index(&idx, dir)))
		goto done;
	e = nf_oci_desc_json(desc);
	ann = json_object();
	if (!e || !ann || json_object_set(e, "annotations", ann)) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = nf_oci_json_set_kv(ann, annotations, n_annotations, "index.json annotation")))
		goto done;
	json_object_set_new(ann, NF_OCI_ANN_REF_NAME, json_string(ref));
	if (platform) {
		json_t *p;
		if (!platform->architecture || !platform->os) {
			err = nf_error_set(NF_EINPUT, "platform for %s needs architecture and os", ref);
			goto done;
		}
		p = json_pack("{s:s, s:s}", "architecture", platform->architecture, "os",
				      platform->os);
		if (p && platform->variant)
			json_object_set_new(p, "variant", json_string(platform->variant));
		if (!p || json_object_set_new(e, "platform", p)) {
			err = nf_error_set(NF_EINPUT, "bad platform for %s", ref);
			goto done;
		}
	}
	/* Keep every other ref, drop the old entry of this one, add ours, sort by ref. */
	arr = json_object_get(idx, "manifests");
	n = json_array_size(arr);
	v = calloc(n + 1, sizeof(*v));
	if (!v) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	for (k = 0, len = 0; k < n; k++) {
		json_t *old = json_array_get(arr, k);
		const char *r = entry_ref(old);
		if (r && !strcmp(r, ref))
			continue;
		v[len++] = old;
	}
	v[len++] = e;
	qsort(v, len, sizeof(*v), cmp_ref);
	{
		json_t *na = json_array();
		if (!na) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
		for (k = 0; k < len; k++)
			json_array_append(na, v[k]);
		json_object_set_new(idx, "manifests", na);
	}
	if (!json_object_get(idx, "mediaType"))
		json_object_set_new(idx, "mediaType", json_string(NF_OCI_MT_INDEX));
	if ((err = nf_oci_json_dump(&s, &len, idx)))
		goto done;
	path = nf_path_join(dir, "index.json");
	if (!path) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	err = nf_fs_write_atomic(path, s, len, 0644);
done:
	free(v);
	free(s);
	free(path);
	json_decref(e);
	json_decref(ann);
	json_decref(idx);
	return err;
}

int nf_oci_layout_resolve(nf_oci_desc *out, const char *dir, const char *ref)
{
	json_t *idx = NULL, *arr;
	int err;
	size_t found = 0, n;

	memset(out, 0, sizeof(*out));
	if ((err = nf_oci_layout_read_index(&idx, dir)))
		return err;
	arr = json_object_get(idx, "manifests");
	n = json_array_size(arr);
	for (size_t i = 0; i < n; i++) {
		const json_t *e = json_array_get(arr, i);
		const char *r = entry_ref(e);
		if (ref && (!r || strcmp(r, ref)))
			continue;
		if (found++ == 0 && (err = nf_oci_desc_parse(out, e, dir)))
			goto done;
	}
	if (found == 0)
		err = nf_error_set(NF_ENOTFOUND, "%s: no image tagged '%.128s'", dir, ref ? ref : "");
	else if (found > 1)
		err = nf_error_set(NF_EINPUT, "%s: %zu images %s'%.128s'; name one", dir, found,
				   ref ? "tagged " : "", ref ? ref : "");
done:
	json_decref(idx);
	return err;
}

int nf_oci_layout_write_index(nf_oci_desc *out, const char *dir,
			      const nf_oci_index_entry *entries, size_t n,
			      const nf_oci_kv *annotations, size_t n_annotations, const char *ref)
{
	json_t *j = NULL;
	int err;

	if (ref && (err = nf_oci_ref_check(ref)))
		return err;
	if ((err = nf_oci_layout_init(dir)))
		return err;
	for (size_t i = 0; i < n; i++)
		if (!nf_oci_blob_exists(dir, entries[i].manifest.digest))
			return nf_error_set(NF_ENOTFOUND, "%s: manifest %s of the index is not in the layout",
					    dir, entries[i].manifest.digest);
	if ((err = nf_oci_index_json(&j, entries, n, annotations, n_annotations)))
		goto done;
	if ((err = nf_oci_json_put(out, dir, NF_OCI_MT_INDEX, j)))
		goto done;
	if (ref)
		err = nf_oci_layout_tag(dir, out, ref, NULL, NULL, 0);
done:
	json_decref(j);
	return err;
}
