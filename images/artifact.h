/*
 * artifact.h - OCI artifacts that refer to an image (image-spec 1.1): an
 * image manifest whose artifactType names what it carries (e.g. our gate
 * report), whose config is the empty descriptor ({} as
 * application/vnd.oci.empty.v1+json), whose one layer is the payload (the
 * gate report JSON), and whose subject is the image manifest or index it is
 * about.  In a layout an artifact is listed in index.json under the ref name
 * "sha256-<subject hex>.<artifact type>" (the referrers tag scheme, made
 * unique per type), so a later attach of the same type replaces it.
 */
#ifndef NF_IMAGES_ARTIFACT_H
#define NF_IMAGES_ARTIFACT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "images/blob.h"
#include "images/manifest.h"

#define NF_OCI_ARTIFACT_GATE_REPORT "application/vnd.nimfactory.gate-report.v1+json"
#define NF_OCI_ANN_PROMOTE_FORCED "io.nimfactory.promote.forced"

/* A parsed artifact manifest.  Plain value. */
typedef struct nf_oci_artifact {
	char artifact_type[NF_OCI_MEDIA_TYPE_MAX];
	nf_oci_desc subject;
	nf_oci_desc config;
	nf_oci_desc blob;  /* the first (only) layer */
} nf_oci_artifact;

/*
 * The artifact manifest (canonical JSON): schemaVersion 2, image manifest
 * media type, artifactType, empty config, one layer `blob`, subject,
 * annotations (left out when n == 0).  Caller owns *out.
 */
int nf_oci_artifact_json(json_t **out, const nf_oci_desc *subject, const char *artifact_type,
			 const nf_oci_desc *blob, const nf_oci_kv *annotations, size_t n);

/*
 * Attach data (of media_type, e.g. "application/json") to subject (a manifest
 * or index in the layout) as an artifact of artifact_type: writes the empty
 * config, the data blob and the artifact manifest into layout, and lists it in
 * index.json (see above).  Fills *out with the artifact manifest's descriptor.
 * Annotations (may be NULL) go on the manifest.
 */
int nf_oci_artifact_attach(nf_oci_desc *out, const char *layout, const nf_oci_desc *subject,
			   const char *artifact_type, const char *media_type, const void *data,
			   size_t len, const nf_oci_kv *annotations, size_t n);

/*
 * Check a manifest from outside as an artifact: an image manifest with a
 * subject, an artifactType (or a config media type standing for it) and at
 * least one layer.  NF_ENOTFOUND (quietly) when it is a plain image manifest
 * with no subject.  what names it in errors.
 */
int nf_oci_artifact_parse(nf_oci_artifact *out, const json_t *manifest, const char *what);

/*
 * Descriptors (JSON array of {mediaType, digest, size, artifactType,
 * annotations?}) of every artifact in layout's index.json whose subject is
 * subject_digest (and whose type is artifact_type, when not NULL).  Caller
 * owns *out.
 */
int nf_oci_artifact_list(json_t **out, const char *layout, const char *subject_digest,
			 const char *artifact_type);

/*
 * The verdict of a gate report (gates.json: {"verdict": "passed"|"failed"|...}),
 * at most 31 bytes of [a-z_-].  NF_EINPUT when it is not one.
 */
int nf_oci_gate_verdict(char verdict[32], const char *json, size_t len);

#endif
