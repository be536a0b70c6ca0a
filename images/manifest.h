/*
 * manifest.h - OCI JSON documents: image manifests and image indexes, built
 * and parsed through jansson, written canonically (sorted keys, compact) so
 * the same inputs always give the same bytes and digests.  Parsers take
 * documents from outside: every field is type-checked, digests must be
 * sha256:<64 hex>, sizes non-negative, counts bounded.
 */
#ifndef NF_IMAGES_MANIFEST_H
#define NF_IMAGES_MANIFEST_H

#include <jansson.h>
#include <stddef.h>

#include "images/blob.h"

#define NF_OCI_MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define NF_OCI_MT_INDEX "application/vnd.oci.image.index.v1+json"
#define NF_OCI_MT_CONFIG "application/vnd.oci.image.config.v1+json"
/* Docker's types, accepted when reading a base image. */
#define NF_OCI_MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define NF_OCI_MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"

#define NF_OCI_ANN_REF_NAME "org.opencontainers.image.ref.name"
#define NF_OCI_ANN_TITLE "org.opencontainers.image.title"
#define NF_OCI_ANN_VERSION "org.opencontainers.image.version"
#define NF_OCI_ANN_REVISION "org.opencontainers.image.revision"
#define NF_OCI_ANN_SOURCE "org.opencontainers.image.source"
#define NF_OCI_ANN_CREATED "org.opencontainers.image.created"

/* Most layers / manifests a document we read may list. */
#define NF_OCI_LIST_MAX 4096

/* A key/value pair (annotations, labels).  Borrowed strings. */
typedef struct nf_oci_kv {
	const char *key;
	const char *value;
} nf_oci_kv;

/* A platform (image-index.md).  Borrowed strings; NULL fields are left out. */
typedef struct nf_oci_platform {
	const char *architecture; /* e.g. "amd64" (required when a platform is given) */
	const char *os;           /* e.g. "linux" (required) */
	const char *variant;      /* optional */
} nf_oci_platform;

/* One manifest listed in an image index. */
typedef struct nf_oci_index_entry {
	nf_oci_desc manifest;
	const nf_oci_platform *platform; /* NULL = none */
	const nf_oci_kv *annotations;    /* e.g. a device name; may be NULL */
	size_t n_annotations;
} nf_oci_index_entry;

/* Canonical bytes of j: sorted keys, compact.  Caller frees *out. */
int nf_oci_json_dump(char **out, size_t *len, const json_t *j);

/* Store j canonically as a blob of media_type; fills *out. */
int nf_oci_json_put(nf_oci_desc *out, const char *layout_dir, const char *media_type,
		    const json_t *j);

/*
 * Read the blob named by desc (size and digest verified, at most NF_OCI_JSON_MAX)
 * and parse it as a JSON object.  Caller owns *out (json_decref).
 */
int nf_oci_json_read_blob(json_t **out, const char *layout_dir, const nf_oci_desc *desc);

/* A descriptor as a new JSON object (mediaType, digest, size). NULL on ENOMEM. */
json_t *nf_oci_desc_json(const nf_oci_desc *d);

/* Parse a descriptor object from outside into *out; `what` names it in errors. */
int nf_oci_desc_parse(nf_oci_desc *out, const json_t *j, const char *what);

/* Set every pair of kv into the object obj (later keys win).  Strings must be UTF-8. */
int nf_oci_json_set_kv(json_t *obj, const nf_oci_kv *kv, size_t n, const char *what);

/*
 * An image manifest (schemaVersion 2, mediaType set) with config, layers in
 * order, and annotations (left out when n_annotations == 0).  Caller owns *out.
 */
int nf_oci_manifest_json(json_t **out, const nf_oci_desc *config, const nf_oci_desc *layers,
			 size_t n_layers, const nf_oci_kv *annotations, size_t n_annotations);

/* An image index listing the entries in the order given.  Caller owns *out. */
int nf_oci_index_json(json_t **out, const nf_oci_index_entry *entries, size_t n,
		      const nf_oci_kv *annotations, size_t n_annotations);

/* A parsed manifest from outside.  Free with nf_oci_manifest_free. */
typedef struct nf_oci_manifest {
	nf_oci_desc config;
	nf_oci_desc *layers; /* owned array */
	size_t n_layers;
	json_t *json;        /* the whole document, owned */
} nf_oci_manifest;

/* Parse and check a manifest object (OCI or Docker v2 schema 2). */
int nf_oci_manifest_parse(nf_oci_manifest **out, json_t *j, const char *what);
void nf_oci_manifest_free(nf_oci_manifest *m);

#endif
