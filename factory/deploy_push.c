/*
 * deploy_push.c - a chart pushed to an OCI registry the way `helm push` does
 * (see deploy.h): config = the chart metadata (application/vnd.cncf.helm.
 * config.v1+json), one layer = the packaged chart, tag = the chart version,
 * so `helm pull oci://HOST/NAME --version V` and `helm install` find it.
 */
#include "factory/deploy.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "images/manifest.h"
#include "images/registry.h"
#include "util/error.h"
#include "util/banned.h"

/* Upload data as a blob of media_type unless the repository has it; d gets its descriptor. */
static int put_blob(nf_oci_desc *d, nf_reg_client *c, const char *name, const char *media_type,
		    const char *data, size_t len)
{
	char digest[NF_OCI_DIGEST_LEN + 1];
	bool present = false;
	int err = nf_oci_digest_of(digest, data, len);
	if (!err)
		err = nf_oci_desc_set(d, media_type, digest, len);
	if (!err)
		err = nf_reg_blob_exists(&present, c, name, d);
	if (!err && !present)
		err = nf_reg_blob_upload_bytes(c, name, data, len);
	return err;
}

/* The image manifest Helm writes for a chart (keys sorted, compact). */
static char *chart_manifest(const nf_oci_desc *config, const nf_oci_desc *layer, const json_t *meta)
{
	json_t *m = json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:[{s:s, s:s, s:I}], s:{s:O, s:O}}",
			      "schemaVersion", 2, "mediaType", NF_OCI_MT_MANIFEST, "config",
			      "mediaType", config->media_type, "digest", config->digest, "size",
			      (json_int_t)config->size, "layers", "mediaType", layer->media_type,
			      "digest", layer->digest, "size", (json_int_t)layer->size, "annotations",
			      "org.opencontainers.image.title", json_object_get(meta, "name"),
			      "org.opencontainers.image.version", json_object_get(meta, "version"));
	char *text = m ? json_dumps(m, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
	json_decref(m);
	return text;
}

int nf_deploy_chart_push(nf_oci_desc *manifest, json_t **meta_out, nf_reg_client *c,
			 const char *name, const char *dir)
{
	json_t *meta = NULL;
	char *tgz = NULL, *config = NULL, *man = NULL;
	size_t tgz_len = 0;
	nf_oci_desc cd, ld;
	int err = nf_deploy_chart_meta(&meta, dir);

	if (meta_out)
		*meta_out = NULL;
	if (!err)
		err = nf_deploy_chart_package(&tgz, &tgz_len, dir);
	if (!err && !(config = json_dumps(meta, JSON_COMPACT)))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = put_blob(&cd, c, name, NF_DEPLOY_MT_CHART_CONFIG, config, strlen(config));
	if (!err)
		err = put_blob(&ld, c, name, NF_DEPLOY_MT_CHART_CONTENT, tgz, tgz_len);
	if (!err && !(man = chart_manifest(&cd, &ld, meta)))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = nf_reg_manifest_put(NULL, c, name, json_string_value(json_object_get(meta, "version")),
					  NF_OCI_MT_MANIFEST, man, strlen(man));
	if (!err) {
		char digest[NF_OCI_DIGEST_LEN + 1];
		err = nf_oci_digest_of(digest, man, strlen(man));
		if (!err)
			err = nf_oci_desc_set(manifest, NF_OCI_MT_MANIFEST, digest, strlen(man));
	}
	if (!err && meta_out) {
		*meta_out = meta;
		meta = NULL;
	}
	json_decref(meta);
	free(tgz);
	free(config);
	free(man);
	return err;
}
