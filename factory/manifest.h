/*
 * manifest.h - model_manifest.yaml: the list of engine profiles an image
 * holds, read by nimserve at start to pick the profile for its machine.
 * Format: docs/serving.md; writer only (nimserve has its own strict reader).
 */
#ifndef NF_FACTORY_MANIFEST_H
#define NF_FACTORY_MANIFEST_H

#include <stddef.h>

#include "factory/profile.h"

typedef struct nf_manifest_info {
	const char *model_name;
	const char *model_family;
	const char *model_version;   /* may be NULL */
	const char *recipe_digest;   /* 64 hex */
	const char *chat_template;   /* "plain" when NULL */
	const char *const *precision_preference; /* may be NULL */
	size_t n_precision_preference;
	const int *tp_preference;    /* may be NULL */
	size_t n_tp_preference;
	const char *engine_prefix;   /* where engines live relative to the manifest: "engines" */
	/* serving.speculative, written when spec_method is not NULL: "none",
	 * "lookup" or "draft"; spec_k 0 leaves k out; spec_draft_profile (draft
	 * only) must name one of the profiles rendered */
	const char *spec_method;
	int spec_k;
	const char *spec_draft_profile;
	/* serving.max_batch and serving.max_context, nimserve's defaults for
	 * --max-batch and --max-context; each written when not 0 */
	int max_batch;
	int max_context;
} nf_manifest_info;

/* Render the manifest as YAML into a new NUL-terminated string (caller frees). */
int nf_manifest_render(char **out, size_t *len, const nf_manifest_info *info,
		       const nf_profile *profiles, size_t n_profiles);

#endif
