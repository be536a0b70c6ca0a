/* inspect.c - describe the images of an OCI layout (see inspect.h). */
#include "images/inspect.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "images/blob.h"
#include "images/config.h"
#include "images/layout.h"
#include "images/manifest.h"
#include "util/error.h"
#include "util/banned.h"

#define DEPTH_MAX 2

static int describe(json_t **out, const char *dir, const json_t *entry, int depth);

static int describe_manifest(json_t *o, const char *dir, const json_t *j)
{
	nf_oci_manifest *m = NULL;
	json_t *cfg = NULL, *layers, *c;
	int err;

	if ((err = nf_oci_manifest_parse(&m, (json_t *)j, dir)))
		return err;
	if (json_is_object(json_object_get(j, "subject"))) {
		/* an artifact (artifact.h): its type and subject, no image config */
		json_object_set(o, "artifactType", json_object_get(j, "artifactType"));
		json_object_set(o, "subject", json_object_get(j, "subject"));
		layers = json_array();
		json_object_set_new(o, "layers", layers);
		for (size_t i = 0; i < m->n_layers; i++) {
			json_t *l = nf_oci_desc_json(&m->layers[i]);
			json_object_set_new(l, "present",
					    json_boolean(nf_oci_blob_exists(dir, m->layers[i].digest)));
			json_array_append_new(layers, l);
		}
		goto done;
	}
	if ((err = nf_oci_json_read_blob(&cfg, dir, &m->config)))
		goto done;
	if ((err = nf_oci_config_check(cfg, m->n_layers, dir)))
		goto done;
	c = json_pack("{s:s, s:I}", "digest", m->config.digest, "size", (json_int_t)m->config.size);
	if (!c) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	json_object_set_new(o, "config", c);
	json_object_set(c, "architecture", json_object_get(cfg, "architecture"));
	json_object_set(c, "os", json_object_get(cfg, "os"));
	json_object_set(c, "created", json_object_get(cfg, "created"));
	layers = json_array();
	json_object_set_new(o, "layers", layers);
	for (size_t i = 0; i < m->n_layers; i++) {
		char *p = NULL;
		struct stat st;
		json_t *l = nf_oci_desc_json(&m->layers[i]);
		bool present = false;
		if (!l) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
		if (nf_oci_blob_path(&p, dir, m->layers[i].digest) == 0 && stat(p, &st) == 0 &&
		    S_ISREG(st.st_mode) && (uint64_t)st.st_size == m->layers[i].size)
			present = true;
		free(p);
		json_object_set_new(l, "present", json_boolean(present));
		json_array_append_new(layers, l);
	}
done:
	json_decref(cfg);
	nf_oci_manifest_free(m);
	return err;
}

static int describe(json_t **out, const char *dir, const json_t *entry, int depth)
{
	nf_oci_desc d;
	json_t *o = NULL, *j = NULL, *ann, *ref;
	int err;

	*out = NULL;
	if ((err = nf_oci_desc_parse(&d, entry, dir)))
		return err;
	o = nf_oci_desc_json(&d);
	if (!o)
		return nf_error_set(NF_ENOMEM, "out of memory");
	ann = json_object_get(entry, "annotations");
	ref = json_object_get(ann, NF_OCI_ANN_REF_NAME);
	json_object_set(o, "ref", json_is_string(ref) ? ref : json_null());
	if (json_is_object(json_object_get(entry, "platform")))
		json_object_set(o, "platform", json_object_get(entry, "platform"));
	if ((err = nf_oci_json_read_blob(&j, dir, &d)))
		goto done;
	/* The document's own annotations (a manifest's title, version...), else the entry's. */
	ann = json_object_get(j, "annotations");
	if (!json_is_object(ann))
		ann = json_object_get(entry, "annotations");
	json_object_set_new(o, "annotations", json_is_object(ann) ? json_deep_copy(ann) : json_object());
	if (!strcmp(d.media_type, NF_OCI_MT_INDEX) || !strcmp(d.media_type, NF_OCI_MT_DOCKER_LIST)) {
		const json_t *arr = json_object_get(j, "manifests");
		json_t *subs;
		if (depth >= DEPTH_MAX) {
			err = nf_error_set(NF_EINPUT, "%s: image indexes nested deeper than %d", dir,
					   DEPTH_MAX);
			goto done;
		}
		if (!json_is_array(arr) || json_array_size(arr) > NF_OCI_LIST_MAX) {
			err = nf_error_set(NF_EINPUT, "%s: index %s: bad manifests list", dir, d.digest);
			goto done;
		}
		subs = json_array();
		json_object_set_new(o, "manifests", subs);
		for (size_t i = 0; i < json_array_size(arr); i++) {
			json_t *s = NULL;
			if ((err = describe(&s, dir, json_array_get(arr, i), depth + 1)))
				goto done;
			json_array_append_new(subs, s);
		}
	} else if ((err = describe_manifest(o, dir, j))) {
		goto done;
	}
	*out = o;
	o = NULL;
done:
	json_decref(o);
	json_decref(j);
	return err;
}

int nf_oci_inspect(json_t **out, const char *layout_dir)
{
	json_t *idx = NULL, *rep = NULL, *list;
	const json_t *arr;
	int err;

	*out = NULL;
	if ((err = nf_oci_layout_read_index(&idx, layout_dir)))
		return err;
	rep = json_pack("{s:s, s:[]}", "layout", layout_dir, "manifests");
	if (!rep) {
		err = nf_error_set(NF_EINPUT, "%s: path is not UTF-8", layout_dir);
		goto done;
	}
	list = json_object_get(rep, "manifests");
	arr = json_object_get(idx, "manifests");
	for (size_t i = 0; i < json_array_size(arr); i++) {
		json_t *s = NULL;
		if ((err = describe(&s, layout_dir, json_array_get(arr, i), 0)))
			goto done;
		json_array_append_new(list, s);
	}
	*out = rep;
	rep = NULL;
done:
	json_decref(rep);
	json_decref(idx);
	return err;
}

static void print_entry(FILE *f, const json_t *e, int indent)
{
	const json_t *ann = json_object_get(e, "annotations"), *v, *p;
	const char *k;
	const json_t *ref = json_object_get(e, "ref");
	fprintf(f, "%*s%s %s %s (%lld bytes)\n", indent, "",
		json_is_string(ref) ? json_string_value(ref) : "-",
		json_string_value(json_object_get(e, "mediaType")),
		json_string_value(json_object_get(e, "digest")),
		(long long)json_integer_value(json_object_get(e, "size")));
	p = json_object_get(e, "platform");
	if (p)
		fprintf(f, "%*s  platform: %s/%s\n", indent, "",
			json_string_value(json_object_get(p, "os")) ? json_string_value(json_object_get(p, "os")) : "?",
			json_string_value(json_object_get(p, "architecture")) ? json_string_value(json_object_get(p, "architecture")) : "?");
	json_object_foreach((json_t *)ann, k, v)
		fprintf(f, "%*s  %s = %s\n", indent, "", k,
			json_is_string(v) ? json_string_value(v) : "?");
	if (json_is_string(v = json_object_get(e, "artifactType")))
		fprintf(f, "%*s  artifact %s about %s\n", indent, "", json_string_value(v),
			json_is_string(json_object_get(json_object_get(e, "subject"), "digest"))
				? json_string_value(json_object_get(json_object_get(e, "subject"), "digest"))
				: "?");
	if ((v = json_object_get(e, "config")))
		fprintf(f, "%*s  config %s (%lld bytes) %s/%s created %s\n", indent, "",
			json_string_value(json_object_get(v, "digest")),
			(long long)json_integer_value(json_object_get(v, "size")),
			json_is_string(json_object_get(v, "os")) ? json_string_value(json_object_get(v, "os")) : "?",
			json_is_string(json_object_get(v, "architecture")) ? json_string_value(json_object_get(v, "architecture")) : "?",
			json_is_string(json_object_get(v, "created")) ? json_string_value(json_object_get(v, "created")) : "?");
	if ((v = json_object_get(e, "layers"))) {
		for (size_t i = 0; i < json_array_size(v); i++) {
			const json_t *l = json_array_get(v, i);
			fprintf(f, "%*s  layer %zu %s %s (%lld bytes)%s\n", indent, "", i,
				json_string_value(json_object_get(l, "mediaType")),
				json_string_value(json_object_get(l, "digest")),
				(long long)json_integer_value(json_object_get(l, "size")),
				json_is_true(json_object_get(l, "present")) ? "" : " MISSING");
		}
	}
	if ((v = json_object_get(e, "manifests")))
		for (size_t i = 0; i < json_array_size(v); i++)
			print_entry(f, json_array_get(v, i), indent + 4);
}

int nf_oci_inspect_print(FILE *f, const json_t *report)
{
	const json_t *arr = json_object_get(report, "manifests");
	fprintf(f, "layout %s: %zu image(s)\n",
		json_string_value(json_object_get(report, "layout")) ? json_string_value(json_object_get(report, "layout")) : "?",
		json_array_size(arr));
	for (size_t i = 0; i < json_array_size(arr); i++)
		print_entry(f, json_array_get(arr, i), 2);
	if (ferror(f))
		return nf_error_set(NF_EIO, "cannot print the report");
	return 0;
}
