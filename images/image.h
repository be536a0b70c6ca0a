/*
 * image.h - assemble one image in an OCI layout: optional base image (read
 * from another layout or the same one, its JSON blobs size- and digest-
 * checked, its layer blobs linked or copied in), layers appended in order,
 * then the config, the manifest and a tag in index.json.
 *
 *   nf_oci_image_new(&img, "out/oci");
 *   nf_oci_image_set_base(img, "base/oci", "latest");       optional
 *   nf_oci_layer_new / add_* / finish -> nf_oci_layer_desc ld
 *   nf_oci_image_add_layer(img, &ld, "engine h100-fp16");    per layer
 *   nf_oci_image_write(&manifest, img, &spec, ann, n, "h100");
 *   nf_oci_image_free(img);
 */
#ifndef NF_IMAGES_IMAGE_H
#define NF_IMAGES_IMAGE_H

#include "images/blob.h"
#include "images/config.h"
#include "images/layer.h"
#include "images/manifest.h"

typedef struct nf_oci_image nf_oci_image;

/* Start an image in layout_dir (initialised when missing).  Free with nf_oci_image_free. */
int nf_oci_image_new(nf_oci_image **out, const char *layout_dir);

/*
 * Build on the image tagged ref (NULL: the only one) of base_layout: its layers
 * come first, its config supplies what the spec leaves NULL, its history and
 * diff_ids are kept.  A tag naming an image index picks its linux/amd64 entry
 * (else its first).  At most one base; call before adding layers.
 */
int nf_oci_image_set_base(nf_oci_image *img, const char *base_layout, const char *ref);

/* Append a finished layer (stored in this image's layout); created_by is its history text. */
int nf_oci_image_add_layer(nf_oci_image *img, const nf_oci_layer_desc *layer,
			   const char *created_by);

/*
 * Write the config and the manifest (annotations as given, e.g. NF_OCI_ANN_TITLE,
 * _VERSION, _REVISION, _SOURCE, _CREATED and the caller's own keys) and, when
 * ref is not NULL, tag the manifest in index.json (platform from the config).
 * Fills *manifest (its descriptor, for an image index).  May be called again
 * with another spec/ref.
 */
int nf_oci_image_write(nf_oci_desc *manifest, nf_oci_image *img, const nf_oci_config_spec *spec,
		       const nf_oci_kv *annotations, size_t n_annotations, const char *ref);

/* Descriptor of the last written config (valid after nf_oci_image_write). */
const nf_oci_desc *nf_oci_image_config_desc(const nf_oci_image *img);

void nf_oci_image_free(nf_oci_image *img);

/*
 * Resolve ref in a layout down to one image manifest (following an image index
 * to its linux/amd64 entry, else its first), read and check the manifest and
 * its config (sizes and digests verified).  Caller owns *manifest and *config.
 */
int nf_oci_image_load(nf_oci_manifest **manifest, json_t **config, const char *layout_dir,
		      const char *ref);

#endif
