/* remote_cache.c - stage results shared through an OCI registry (see remote_cache.h). */
#define _GNU_SOURCE
#include "factory/remote_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "factory/fetch.h"
#include "images/layer.h"
#include "images/manifest.h"
#include "images/registry.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define KIND_MAX 32

struct nf_remote_cache {
	nf_reg_client *client;
	nf_reg_ref ref;
	char *ref_text; /* "HOST/NAME" */
	nf_log *log;
	nf_remote_cache_stats st;
	/* The registry did not answer (after the client's retries) or refused our
	 * credentials: every later pull is a miss without asking, so that a
	 * registry that is down costs one stage's retries, not every stage's. */
	bool unreachable;
};

int nf_remote_cache_open(nf_remote_cache **out, const char *ref, bool insecure, nf_log *log)
{
	nf_remote_cache *rc = NULL;
	nf_reg_options o;
	int err;

	*out = NULL;
	if (!(rc = calloc(1, sizeof(*rc))))
		return nf_error_set(NF_ENOMEM, "out of memory");
	rc->log = log ? log : nf_log_default();
	if ((err = nf_reg_ref_parse(&rc->ref, ref)))
		goto done;
	if (rc->ref.tag[0] || rc->ref.digest[0]) {
		err = nf_error_set(NF_EINPUT, "remote cache %.200s: give a repository (HOST/NAME), not a "
				   "tag or digest: each stage is tagged by its key", ref);
		goto done;
	}
	if (!(rc->ref_text = nf_strdup_printf("%s/%s", rc->ref.host, rc->ref.name))) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	nf_reg_options_init(&o);
	o.insecure = insecure;
	if ((err = nf_reg_client_new(&rc->client, rc->ref.host, &o)))
		goto done;
	*out = rc;
	rc = NULL;
done:
	nf_remote_cache_free(rc);
	return err ? nf_error_wrap(err, "remote cache") : 0;
}

void nf_remote_cache_free(nf_remote_cache *rc)
{
	if (!rc)
		return;
	nf_reg_client_free(rc->client);
	free(rc->ref_text);
	free(rc);
}

int nf_remote_cache_ping(nf_remote_cache *rc)
{
	int err = nf_reg_ping(rc->client);
	rc->unreachable = err != 0;
	return err ? nf_error_wrap(err, "remote cache %s", rc->ref_text) : 0;
}

const char *nf_remote_cache_ref(const nf_remote_cache *rc)
{
	return rc->ref_text;
}

const nf_remote_cache_stats *nf_remote_cache_stats_of(const nf_remote_cache *rc)
{
	return &rc->st;
}

int nf_remote_cache_tag(char tag[128], const char *kind, const char *key)
{
	size_t n = kind ? strlen(kind) : 0;
	if (n == 0 || n > KIND_MAX || strspn(kind, "abcdefghijklmnopqrstuvwxyz") != n)
		return nf_error_set(NF_EINPUT, "remote cache: stage kind '%.40s' is not [a-z]{1,%d}",
				    kind ? kind : "(null)", KIND_MAX);
	if (!key || !nf_sha256_is_hex(key))
		return nf_error_set(NF_EINPUT, "remote cache: stage key '%.70s' is not 64 lowercase hex "
				    "digits", key ? key : "(null)");
	snprintf(tag, 128, "%s-%s", kind, key);
	return 0;
}

/* ---- pull ---- */

/* A string annotation of manifest j, or NULL. */
static const char *annotation(const json_t *j, const char *key)
{
	return json_string_value(json_object_get(json_object_get(j, "annotations"), key));
}

/*
 * The one layer of a stage artifact for (kind, key), after checking that the
 * manifest is one: type, kind, key, empty config, one tar+zstd layer within
 * the size bound.
 */
static int check_manifest(nf_oci_desc *layer, const char *body, size_t len, const char *kind,
			  const char *key)
{
	json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	nf_oci_manifest *m = NULL;
	const char *type, *k, *kd;
	int err;

	if (!j)
		return nf_error_set(NF_EINPUT, "its manifest is not JSON");
	if ((err = nf_oci_manifest_parse(&m, j, "manifest")))
		goto done;
	type = json_string_value(json_object_get(j, "artifactType"));
	kd = annotation(j, NF_REMOTE_CACHE_ANN_KIND);
	k = annotation(j, NF_REMOTE_CACHE_ANN_KEY);
	if (!type || strcmp(type, NF_REMOTE_CACHE_ARTIFACT_TYPE))
		err = nf_error_set(NF_EINPUT, "artifactType %.80s is not %s", type ? type : "(none)",
				   NF_REMOTE_CACHE_ARTIFACT_TYPE);
	else if (!kd || strcmp(kd, kind) || !k || strcmp(k, key))
		err = nf_error_set(NF_EINPUT, "it is annotated as another stage (%.32s %.64s)",
				   kd ? kd : "?", k ? k : "?");
	else if (strcmp(m->config.digest, NF_OCI_EMPTY_DIGEST))
		err = nf_error_set(NF_EINPUT, "its config is not the empty descriptor");
	else if (m->n_layers != 1 || strcmp(m->layers[0].media_type, NF_OCI_MT_LAYER_ZSTD))
		err = nf_error_set(NF_EINPUT, "it is not one %s layer", NF_OCI_MT_LAYER_ZSTD);
	else if (m->layers[0].size > NF_REMOTE_CACHE_LAYER_MAX)
		err = nf_error_set(NF_EINPUT, "its layer is %llu bytes, over the %llu we pull",
				   (unsigned long long)m->layers[0].size,
				   (unsigned long long)NF_REMOTE_CACHE_LAYER_MAX);
	else
		*layer = m->layers[0];
done:
	nf_oci_manifest_free(m);
	json_decref(j);
	return err;
}

/* Write data to a new temp file under the cache's tmp/, flocked through *fd
 * (see nf_cache_tmp_make); caller unlinks it, then closes *fd and frees *path. */
static int write_temp(char **path, int *fd, nf_cache *c, const void *data, size_t len)
{
	int err = nf_cache_tmp_make(path, fd, c, "remote-pull", false);
	return err ? err : nf_fs_write_all(*fd, data, len, *path);
}

/* Unpack the layer's bytes into a new stage of c keyed key; *out the stage folder. */
static int unpack_stage(char **out, nf_cache *c, const char *key, const void *data, size_t len)
{
	nf_cache_stage *st = NULL;
	char *archive = NULL, *root = NULL;
	int err, fd = -1;

	if ((err = write_temp(&archive, &fd, c, data, len)))
		goto done;
	if ((err = nf_cache_stage_begin(&st, c, key)))
		goto done;
	/* the real path, so that no folder above the entries is a symlink */
	if (!(root = realpath(nf_cache_stage_dir(st), NULL))) {
		err = nf_error_set(NF_EIO, "%s: realpath: %s", nf_cache_stage_dir(st), strerror(errno));
		goto done;
	}
	if ((err = nf_fetch_extract(root, archive, NULL)))
		goto done;
	err = nf_cache_stage_commit(out, st);
	st = NULL;
done:
	nf_cache_stage_abort(st);
	if (archive)
		unlink(archive);
	if (fd >= 0)
		close(fd);
	free(archive);
	free(root);
	return err;
}

/* A present artifact that cannot be used: warn, count, and call it a miss. */
static int refuse(nf_remote_cache *rc, const char *tag)
{
	nf_log_warn(rc->log, "cache", "remote cache %s:%.20s... not used: %s", rc->ref_text, tag,
		    nf_error_last());
	rc->st.refused++;
	nf_error_clear();
	return NF_ENOTFOUND;
}

int nf_remote_cache_pull(char **out, nf_remote_cache *rc, nf_cache *c, const char *kind,
			 const char *key)
{
	char tag[128], *body = NULL, *data = NULL;
	size_t len = 0, dlen = 0;
	nf_oci_desc mdesc, layer;
	int err;

	*out = NULL;
	if ((err = nf_remote_cache_tag(tag, kind, key)))
		return err;
	if (rc->unreachable) {
		rc->st.misses++;
		return NF_ENOTFOUND;
	}
	err = nf_reg_manifest_get(&body, &len, &mdesc, rc->client, rc->ref.name, tag);
	if (err == NF_ENOTFOUND) {
		rc->st.misses++;
		nf_error_clear();
		goto done;
	}
	rc->unreachable = err == NF_ENET || err == NF_EENV;
	if (!err)
		err = check_manifest(&layer, body, len, kind, key);
	if (!err)
		err = nf_reg_blob_get(&data, &dlen, rc->client, rc->ref.name, &layer,
				      (size_t)NF_REMOTE_CACHE_LAYER_MAX);
	if (!err)
		err = unpack_stage(out, c, key, data, dlen);
	if (err) {
		err = refuse(rc, tag);
		goto done;
	}
	rc->st.pulled++;
done:
	free(body);
	free(data);
	return err;
}

/* ---- push ---- */

/* The stage folder as one tar+zstd layer in the layout folder. */
static int make_layer(nf_oci_layer_desc *ld, const char *layout, const char *stage_dir)
{
	nf_oci_layer *l = NULL;
	/* epoch 0: the same stage gives the same blob on every runner */
	int err = nf_oci_layer_new(&l, layout, NF_OCI_COMPRESS_ZSTD, 0);
	if (!err)
		err = nf_oci_layer_add_tree(l, stage_dir, "");
	if (!err)
		err = nf_oci_layer_finish(ld, l);
	nf_oci_layer_free(l);
	return err;
}

/* Upload the blob d (a file of layout, or the bytes given) unless the registry has it. */
static int upload_blob(nf_remote_cache *rc, const char *layout, const nf_oci_desc *d,
		       const void *bytes, size_t len)
{
	char *path = NULL;
	bool present = false;
	int err = nf_reg_blob_exists(&present, rc->client, rc->ref.name, d);
	if (err || present)
		return err;
	if (bytes)
		return nf_reg_blob_upload_bytes(rc->client, rc->ref.name, bytes, len);
	if ((err = nf_oci_blob_path(&path, layout, d->digest)))
		return err;
	err = nf_reg_blob_upload_file(rc->client, rc->ref.name, path, d);
	free(path);
	return err;
}

/* The artifact manifest of a stage layer, put under tag. */
static int put_manifest(nf_remote_cache *rc, const char *tag, const char *kind, const char *key,
			const nf_oci_desc *layer, const nf_oci_desc *empty)
{
	nf_oci_kv ann[] = {{NF_REMOTE_CACHE_ANN_KIND, kind}, {NF_REMOTE_CACHE_ANN_KEY, key}};
	json_t *m = NULL;
	char *text = NULL;
	size_t len = 0;
	int err = nf_oci_manifest_json(&m, empty, layer, 1, ann, 2);

	if (!err && json_object_set_new(m, "artifactType", json_string(NF_REMOTE_CACHE_ARTIFACT_TYPE)))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = nf_oci_json_dump(&text, &len, m);
	if (!err)
		err = nf_reg_manifest_put(NULL, rc->client, rc->ref.name, tag, NF_OCI_MT_MANIFEST, text,
					  len);
	json_decref(m);
	free(text);
	return err;
}

int nf_remote_cache_push(nf_remote_cache *rc, nf_cache *c, const char *kind, const char *key,
			 const char *stage_dir)
{
	char tag[128], *layout = NULL;
	nf_oci_desc present_desc, empty;
	nf_oci_layer_desc ld;
	bool present = false;
	int err, layout_lock = -1;

	if ((err = nf_remote_cache_tag(tag, kind, key)))
		return err;
	if ((err = nf_reg_manifest_head(&present, &present_desc, rc->client, rc->ref.name, tag)))
		goto done;
	if (present) {
		rc->st.present++;
		goto done;
	}
	if ((err = nf_cache_tmp_make(&layout, &layout_lock, c, "remote-push", true)))
		goto done;
	if ((err = make_layer(&ld, layout, stage_dir)) ||
	    (err = nf_oci_desc_set(&empty, NF_OCI_MT_EMPTY, NF_OCI_EMPTY_DIGEST, 2)) ||
	    (err = upload_blob(rc, layout, &ld.blob, NULL, 0)) ||
	    (err = upload_blob(rc, layout, &empty, "{}", 2)) ||
	    (err = put_manifest(rc, tag, kind, key, &ld.blob, &empty)))
		goto done;
	rc->st.pushed++;
done:
	if (layout)
		(void)nf_fs_remove_tree(layout);
	if (layout_lock >= 0)
		close(layout_lock);
	free(layout);
	return err ? nf_error_wrap(err, "remote cache %s: push %s stage %.12s", rc->ref_text, kind,
				   key) : 0;
}

int nf_remote_cache_has(bool *present, nf_remote_cache *rc, const char *kind, const char *key)
{
	char tag[128];
	nf_oci_desc desc;
	int err;

	*present = false;
	if ((err = nf_remote_cache_tag(tag, kind, key)))
		return err;
	if (rc->unreachable)
		return nf_error_set(NF_ENET, "remote cache %s: unreachable", rc->ref_text);
	/* a HEAD of the tag: the manifest's presence, no blob is read */
	if ((err = nf_reg_manifest_head(present, &desc, rc->client, rc->ref.name, tag))) {
		rc->unreachable = err == NF_ENET || err == NF_EENV;
		return nf_error_wrap(err, "remote cache %s: look up %s stage %.12s", rc->ref_text,
				     kind, key);
	}
	return 0;
}
