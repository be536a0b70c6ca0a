/*
 * layout.h - an OCI image layout directory (layout.md): the oci-layout file,
 * blobs/sha256/, and index.json listing the tagged manifests or indexes with
 * org.opencontainers.image.ref.name annotations.  index.json is rewritten
 * atomically and canonically, its entries sorted by ref name.
 */
#ifndef NF_IMAGES_LAYOUT_H
#define NF_IMAGES_LAYOUT_H

#include <jansson.h>

#include "images/blob.h"
#include "images/manifest.h"

/* Create dir, blobs/sha256, oci-layout and an empty index.json when missing. */
int nf_oci_layout_init(const char *dir);

/*
 * Read and check index.json of a layout (oci-layout must say 1.0.0, at most
 * NF_OCI_JSON_MAX bytes, manifests an array of at most NF_OCI_LIST_MAX valid
 * descriptors).  Caller owns *out.
 */
int nf_oci_layout_read_index(json_t **out, const char *dir);

/*
 * List desc in index.json under ref (the ref.name annotation), replacing any
 * entry with the same ref; platform may be NULL; extra annotations (may be
 * NULL) are added to the entry.  ref: 1..128 chars of [A-Za-z0-9._:/@+-].
 */
int nf_oci_layout_tag(const char *dir, const nf_oci_desc *desc, const char *ref,
		      const nf_oci_platform *platform, const nf_oci_kv *annotations,
		      size_t n_annotations);

/*
 * Find the descriptor tagged ref in index.json.  ref NULL: the only entry
 * (NF_EINPUT when there are several).  NF_ENOTFOUND when absent.
 */
int nf_oci_layout_resolve(nf_oci_desc *out, const char *dir, const char *ref);

/* 0 when ref is a valid ref name (see nf_oci_layout_tag), else NF_EINPUT. */
int nf_oci_ref_check(const char *ref);

/*
 * Write an image index blob listing entries (one manifest per device, say) and,
 * when ref is not NULL, tag it in index.json.  Fills *out with its descriptor.
 */
int nf_oci_layout_write_index(nf_oci_desc *out, const char *dir,
			      const nf_oci_index_entry *entries, size_t n,
			      const nf_oci_kv *annotations, size_t n_annotations, const char *ref);

#endif
