/*
 * inspect.h - read an OCI layout and describe it: every tagged manifest (and
 * the manifests of tagged image indexes), with config, layers (media type,
 * size, digest) and annotations.  Every JSON blob read is bounded and its size
 * and digest verified; layer blobs are checked for presence and size only.
 */
#ifndef NF_IMAGES_INSPECT_H
#define NF_IMAGES_INSPECT_H

#include <jansson.h>
#include <stdio.h>

/*
 * A report object:
 *   {"layout": DIR, "manifests": [ {"ref": "h100" | null, "mediaType", "digest",
 *     "size", "annotations": {...}, "platform"?: {...},
 *     "config"?: {"digest", "size", "architecture", "os", "created"},
 *     "layers"?: [{"mediaType", "digest", "size", "present": bool}],
 *     "manifests"?: [ ...the same, for an image index... ] } ] }
 * Caller owns *out.
 */
int nf_oci_inspect(json_t **out, const char *layout_dir);

/* Print a report from nf_oci_inspect as indented text. */
int nf_oci_inspect_print(FILE *f, const json_t *report);

#endif
