/*
 * manifest.h - the image's model_manifest.yaml: which model, which chat
 * template and preferences, and the engine profiles packed beside it.
 *
 *   apiVersion: nimfactory/v1
 *   kind: ModelManifest
 *   model: {name, family, version}
 *   recipe_digest: sha256:<hex>
 *   serving: {chat_template, precision_preference: [...], tensor_parallel_preference: [...]}
 *   profiles: [{id, name, device, arch, precision, tensor_parallel, engine, gate}]
 *
 * Parsed strictly: unknown keys, wrong types, missing fields and oversized
 * values are NF_EINPUT with "PATH:LINE:COL: what is wrong".
 */
#ifndef NF_SERVE_MANIFEST_H
#define NF_SERVE_MANIFEST_H

#include <stddef.h>

#define NF_MANIFEST_MAX_BYTES (1u << 20)
#define NF_MANIFEST_MAX_PROFILES 256
#define NF_MANIFEST_MAX_PREFS 16
#define NF_MANIFEST_MAX_STR 256
#define NF_MANIFEST_MAX_TP 64

typedef enum nf_chat_template {
	NF_CHAT_PLAIN,
	NF_CHAT_LLAMA2,
	NF_CHAT_CHATML,
	NF_CHAT_MODEL, /* the engine's own Jinja template (tokenizer_config.json) */
} nf_chat_template;

typedef enum nf_gate_state {
	NF_GATE_PASSED,
	NF_GATE_FAILED,
	NF_GATE_SKIPPED,
} nf_gate_state;

typedef struct nf_manifest_profile {
	char *id;          /* 64 lowercase hex */
	char *name;
	char *device;      /* "cpu" or a GPU SKU name ("h100-sxm") */
	char *arch;        /* "" for cpu, "sm_90" for GPUs */
	char *precision;   /* canonical precision name ("int8-wo") */
	int tensor_parallel;
	char *engine;      /* as written in the manifest */
	char *engine_path; /* resolved: absolute, or joined to the manifest's folder */
	nf_gate_state gate;
} nf_manifest_profile;

/* serving.speculative: how nimserve speculates unless told otherwise
 * (docs/recipe.md); every field optional. */
typedef struct nf_manifest_spec {
	char *method;        /* NULL (not named), "none", "lookup" or "draft" */
	int k;               /* tokens drafted per step, 1..16; 0 not named */
	char *draft_profile; /* draft: the id or name of one of the profiles, or NULL */
} nf_manifest_spec;

typedef struct nf_manifest {
	char *path;           /* the file it was read from */
	char *model_name;
	char *model_family;
	char *model_version;
	char *recipe_digest;
	nf_chat_template chat_template;
	char *precision_pref[NF_MANIFEST_MAX_PREFS];
	size_t n_precision_pref;
	int tp_pref[NF_MANIFEST_MAX_PREFS];
	size_t n_tp_pref;
	nf_manifest_spec speculative;
	int max_batch;   /* serving.max_batch: nimserve's default batch; 0 not written */
	int max_context; /* serving.max_context: tokens a sequence may hold; 0 not written */
	nf_manifest_profile *profiles;
	size_t n_profiles;
} nf_manifest;

/* Read and validate the manifest at path.  Caller owns *out (nf_manifest_free). */
int nf_manifest_load(nf_manifest **out, const char *path);
/* The same from bytes; `what` names the source in messages and its folder
 * resolves relative engine paths. */
int nf_manifest_parse(nf_manifest **out, const char *data, size_t len, const char *what);
void nf_manifest_free(nf_manifest *m); /* NULL is fine */

const char *nf_chat_template_name(nf_chat_template t);
int nf_chat_template_parse(nf_chat_template *out, const char *name); /* NF_EINPUT if unknown */
const char *nf_gate_name(nf_gate_state g);

#endif
