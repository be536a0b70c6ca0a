/*
 * package.h - the package stage: turn a gated build into an OCI image layout
 * in OUT/oci, with images/ doing the bytes.
 *
 * Layers, bottom up: the recipe's base image (if any); the runtime (nimserve
 * and the shared libraries it loads, when a nimserve binary is found); one
 * layer per distinct weights file (/opt/nim/weights/<sha256>.safetensors:
 * depends only on the source and the quantization, so profiles and recipes
 * that quantize alike share it); one small layer per engine profile
 * (/opt/nim/engines/<id>/: config, tactics, tokenizer, and weights.safetensors
 * as a link to its weights); the model manifest (/opt/nim/model_manifest.yaml).  With image.layout per-device, one image
 * per device (its profiles only) under an image index tagged with the tag.
 */
#ifndef NF_FACTORY_PACKAGE_H
#define NF_FACTORY_PACKAGE_H

#include "factory/log.h"
#include "factory/plan.h"
#include "factory/recipe.h"

#define NF_IMAGE_ROOT "opt/nim"

typedef struct nf_package_opts {
	const nf_recipe *recipe;
	const nf_plan *plan;     /* profiles with engine_dir set and gate verdicts */
	const char *out_dir;     /* OUT: engines/ and model_manifest.yaml are read from it */
	const char *runtime_dir; /* folder holding nimserve; NULL = beside the running binary */
	nf_log *log;
} nf_package_opts;

/* model_manifest.yaml for the profiles of `device` (all when NULL), as the
 * image carries it and OUT keeps it.  Caller frees *yaml. */
int nf_package_render_manifest(char **yaml, size_t *len, const nf_recipe *r, const nf_plan *plan,
			       const char *device);

/* The nimserve binary to ship: runtime_dir/nimserve, else the one beside the
 * running nimfactory; NULL when there is none.  Caller frees. */
char *nf_package_find_nimserve(const char *runtime_dir);

/* Write OUT/oci; key gets the hex digest of what the tag points at. */
int nf_package_image(const nf_package_opts *o, char key[NF_SHA256_HEX_LEN + 1]);

#endif
