/*
 * blob.h - the content-addressed blob store of an OCI image layout
 * (LAYOUT/blobs/sha256/<hex>), digests and descriptors.
 *
 * Blobs are written to a temp file inside blobs/sha256/, fsynced and renamed
 * to their digest; a blob that is present already is not written again (the
 * temp file is discarded).  Digest strings from outside are accepted only in
 * the form "sha256:" + 64 lowercase hex digits, so they never name a path
 * outside the store.
 */
#ifndef NF_IMAGES_BLOB_H
#define NF_IMAGES_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/sha256.h"

/* "sha256:" + 64 hex + NUL */
#define NF_OCI_DIGEST_LEN 71
#define NF_OCI_MEDIA_TYPE_MAX 128

/* Largest JSON document (index, manifest, config) we read from a layout. */
#define NF_OCI_JSON_MAX ((size_t)4 << 20)

/* A content descriptor (descriptor.md) without its annotations. Plain value. */
typedef struct nf_oci_desc {
	char media_type[NF_OCI_MEDIA_TYPE_MAX];
	char digest[NF_OCI_DIGEST_LEN + 1]; /* "sha256:<64 hex>" */
	uint64_t size;
} nf_oci_desc;

/* 0 when s is exactly "sha256:" + 64 lowercase hex; else NF_EINPUT (message names s). */
int nf_oci_digest_check(const char *s);

/* out = "sha256:" + the sha256 of the bytes. */
int nf_oci_digest_of(char out[NF_OCI_DIGEST_LEN + 1], const void *data, size_t len);

/* Fill d; media_type is truncated-refused (NF_EINPUT when too long), digest checked. */
int nf_oci_desc_set(nf_oci_desc *d, const char *media_type, const char *digest, uint64_t size);

/* Path of a blob: LAYOUT/blobs/sha256/<hex>.  Digest checked first.  Caller frees *out. */
int nf_oci_blob_path(char **out, const char *layout_dir, const char *digest);

/* True when the blob file exists in the layout (digest must be valid, else false). */
bool nf_oci_blob_exists(const char *layout_dir, const char *digest);

/*
 * Store bytes as a blob: fills *out (media type, digest, size).  A blob already
 * present is left untouched.
 */
int nf_oci_blob_put(nf_oci_desc *out, const char *layout_dir, const char *media_type,
		    const void *data, size_t len);

/*
 * Read a blob named by a descriptor: refuses a blob whose size is not desc->size,
 * larger than max_len, or whose sha256 is not desc->digest.  *out is NUL-terminated
 * (the NUL not counted in *len).  Caller frees *out.
 */
int nf_oci_blob_read(char **out, size_t *len, const char *layout_dir, const nf_oci_desc *desc,
		     size_t max_len);

/*
 * Make the blob `digest` of src_layout present in dst_layout: nothing when it is
 * there already, else a hard link, else a copy whose sha256 and size are verified
 * against `digest`/`size` before it is renamed into place.
 */
int nf_oci_blob_import(const char *dst_layout, const char *src_layout, const char *digest,
		       uint64_t size);

/* A blob being streamed into a layout. */
typedef struct nf_oci_blob_writer nf_oci_blob_writer;

/*
 * Open a temp file in LAYOUT/blobs/sha256/ (created if missing).  When `hash` is
 * false the writer does not hash: the caller passes the digest to commit.
 * Free with nf_oci_blob_writer_free (which discards an uncommitted temp file).
 */
int nf_oci_blob_writer_open(nf_oci_blob_writer **out, const char *layout_dir, bool hash);
int nf_oci_blob_writer_write(nf_oci_blob_writer *w, const void *data, size_t len);
/* Bytes written so far. */
uint64_t nf_oci_blob_writer_size(const nf_oci_blob_writer *w);
/*
 * fsync and rename the temp file to its digest (or discard it when the blob is
 * present already); fills *out.  known_hex: the sha256 (64 hex) of the bytes when
 * the writer was opened with hash=false, else NULL.  The writer may only be freed after.
 */
int nf_oci_blob_writer_commit(nf_oci_desc *out, nf_oci_blob_writer *w, const char *media_type,
			      const char *known_hex);
void nf_oci_blob_writer_free(nf_oci_blob_writer *w);

#endif
