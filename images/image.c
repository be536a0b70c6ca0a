/* image.c - assemble an image in an OCI layout, optionally on a base (see image.h). */
#include "images/image.h"

#include <stdlib.h>
#include <string.h>

#include "images/layout.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

#define INDEX_DEPTH_MAX 2

struct layer_ent {
	nf_oci_desc blob;
	char diff_id[NF_OCI_DIGEST_LEN + 1];
	char *created_by; /* owned */
};

struct nf_oci_image {
	char *layout;
	json_t *base_config; /* owned; NULL without a base */
	size_t n_base;       /* layers that come from the base (first in `layers`) */
	struct layer_ent *layers;
	size_t n, cap;
	nf_oci_desc config;
};

int nf_oci_image_new(nf_oci_image **out, const char *layout_dir)
{
	nf_oci_image *img;
	int err;
	*out = NULL;
	if ((err = nf_oci_layout_init(layout_dir)))
		return err;
	img = calloc(1, sizeof(*img));
	if (!img || !(img->layout = strdup(layout_dir))) {
		free(img);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	*out = img;
	return 0;
}

void nf_oci_image_free(nf_oci_image *img)
{
	if (!img)
		return;
	for (size_t i = 0; i < img->n; i++)
		free(img->layers[i].created_by);
	free(img->layers);
	json_decref(img->base_config);
	free(img->layout);
	free(img);
}

static int push_layer(nf_oci_image *img, const nf_oci_desc *blob, const char *diff_id,
		      const char *created_by)
{
	struct layer_ent *e;
	if (img->n == img->cap) {
		size_t cap = img->cap ? img->cap * 2 : 8, bytes;
		if (!nf_size_mul(&bytes, cap, sizeof(*e)) || !(e = realloc(img->layers, bytes)))
			return nf_error_set(NF_ENOMEM, "out of memory");
		img->layers = e;
		img->cap = cap;
	}
	e = &img->layers[img->n];
	memset(e, 0, sizeof(*e));
	e->blob = *blob;
	memcpy(e->diff_id, diff_id, sizeof(e->diff_id));
	if (created_by && !(e->created_by = strdup(created_by)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	img->n++;
	return 0;
}

int nf_oci_image_add_layer(nf_oci_image *img, const nf_oci_layer_desc *layer,
			   const char *created_by)
{
	int err;
	if ((err = nf_oci_digest_check(layer->diff_id)) ||
	    (err = nf_oci_digest_check(layer->blob.digest)))
		return err;
	if (!nf_oci_blob_exists(img->layout, layer->blob.digest))
		return nf_error_set(NF_ENOTFOUND, "%s: layer %s is not in the layout", img->layout,
				    layer->blob.digest);
	return push_layer(img, &layer->blob, layer->diff_id, created_by);
}

/* From an index object, the descriptor of its linux/amd64 manifest, else its first. */
static int pick_from_index(nf_oci_desc *out, const json_t *idx, const char *what)
{
	const json_t *arr = json_object_get(idx, "manifests");
	size_t n = json_array_size(arr), pick = 0;
	if (!json_is_array(arr) || n == 0 || n > NF_OCI_LIST_MAX)
		return nf_error_set(NF_EINPUT, "%s: index lists no manifests (or too many)", what);
	for (size_t i = 0; i < n; i++) {
		const json_t *p = json_object_get(json_array_get(arr, i), "platform");
		const char *a = json_string_value(json_object_get(p, "architecture"));
		const char *o = json_string_value(json_object_get(p, "os"));
		if (a && o && !strcmp(a, "amd64") && !strcmp(o, "linux")) {
			pick = i;
			break;
		}
	}
	return nf_oci_desc_parse(out, json_array_get(arr, pick), what);
}

int nf_oci_image_load(nf_oci_manifest **manifest, json_t **config, const char *layout_dir,
		      const char *ref)
{
	nf_oci_desc d;
	json_t *j = NULL;
	nf_oci_manifest *m = NULL;
	int err, depth = 0;

	*manifest = NULL;
	*config = NULL;
	if ((err = nf_oci_layout_resolve(&d, layout_dir, ref)))
		return err;
	for (;;) {
		if ((err = nf_oci_json_read_blob(&j, layout_dir, &d)))
			goto done;
		if (strcmp(d.media_type, NF_OCI_MT_INDEX) && strcmp(d.media_type, NF_OCI_MT_DOCKER_LIST))
			break;
		if (++depth > INDEX_DEPTH_MAX) {
			err = nf_error_set(NF_EINPUT, "%s: image indexes nested deeper than %d",
					   layout_dir, INDEX_DEPTH_MAX);
			goto done;
		}
		if ((err = pick_from_index(&d, j, layout_dir)))
			goto done;
		json_decref(j);
		j = NULL;
	}
	if ((err = nf_oci_manifest_parse(&m, j, layout_dir)))
		goto done;
	if ((err = nf_oci_json_read_blob(config, layout_dir, &m->config)))
		goto done;
	if ((err = nf_oci_config_check(*config, m->n_layers, layout_dir)))
		goto done;
	*manifest = m;
	m = NULL;
done:
	if (err) {
		json_decref(*config);
		*config = NULL;
	}
	nf_oci_manifest_free(m);
	json_decref(j);
	return err;
}

int nf_oci_image_set_base(nf_oci_image *img, const char *base_layout, const char *ref)
{
	nf_oci_manifest *m = NULL;
	json_t *cfg = NULL;
	const json_t *ids, *hist;
	int err;

	if (img->base_config || img->n)
		return nf_error_set(NF_EINTERNAL, "base image set twice or after layers");
	if ((err = nf_oci_image_load(&m, &cfg, base_layout, ref)))
		goto done;
	ids = json_object_get(json_object_get(cfg, "rootfs"), "diff_ids");
	hist = json_object_get(cfg, "history");
	for (size_t i = 0; i < m->n_layers; i++) {
		if ((err = nf_oci_blob_import(img->layout, base_layout, m->layers[i].digest,
					      m->layers[i].size)))
			goto done;
		if ((err = push_layer(img, &m->layers[i], json_string_value(json_array_get(ids, i)),
				      NULL)))
			goto done;
	}
	(void)hist; /* the base's history is carried over through its config */
	img->n_base = m->n_layers;
	img->base_config = cfg;
	cfg = NULL;
done:
	if (err) {
		for (size_t i = 0; i < img->n; i++)
			free(img->layers[i].created_by);
		img->n = 0;
		nf_error_wrap(err, "base image %s", base_layout);
	}
	json_decref(cfg);
	nf_oci_manifest_free(m);
	return err;
}

const nf_oci_desc *nf_oci_image_config_desc(const nf_oci_image *img)
{
	return &img->config;
}

int nf_oci_image_write(nf_oci_desc *manifest, nf_oci_image *img, const nf_oci_config_spec *spec,
		       const nf_oci_kv *annotations, size_t n_annotations, const char *ref)
{
	const char **ids = NULL, **by = NULL;
	nf_oci_desc *blobs = NULL;
	json_t *cfg = NULL, *man = NULL;
	size_t n_new = img->n - img->n_base;
	int err = 0;

	memset(manifest, 0, sizeof(*manifest));
	if (ref && (err = nf_oci_ref_check(ref)))
		return err;
	ids = calloc(n_new + 1, sizeof(*ids));
	by = calloc(n_new + 1, sizeof(*by));
	blobs = calloc(img->n + 1, sizeof(*blobs));
	if (!ids || !by || !blobs) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < n_new; i++) {
		ids[i] = img->layers[img->n_base + i].diff_id;
		by[i] = img->layers[img->n_base + i].created_by;
	}
	for (size_t i = 0; i < img->n; i++)
		blobs[i] = img->layers[i].blob;
	if ((err = nf_oci_config_json(&cfg, img->base_config, spec, ids, by, n_new)))
		goto done;
	if ((err = nf_oci_json_put(&img->config, img->layout, NF_OCI_MT_CONFIG, cfg)))
		goto done;
	if ((err = nf_oci_manifest_json(&man, &img->config, blobs, img->n, annotations,
					n_annotations)))
		goto done;
	if ((err = nf_oci_json_put(manifest, img->layout, NF_OCI_MT_MANIFEST, man)))
		goto done;
	if (ref) {
		nf_oci_platform p = {json_string_value(json_object_get(cfg, "architecture")),
				     json_string_value(json_object_get(cfg, "os")), NULL};
		err = nf_oci_layout_tag(img->layout, manifest, ref, &p, NULL, 0);
	}
done:
	free(ids);
	free(by);
	free(blobs);
	json_decref(cfg);
	json_decref(man);
	return err;
}
