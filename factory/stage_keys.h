/*
 * stage_keys.h - the key of each stage of a build: the digest of exactly the
 * inputs the stage reads, so a result stored under its key (factory/cache.h
 * stages/<key>) is reused exactly when nothing it depends on changed.
 *
 * Every key covers the tool's version (NF_VERSION: the code of the stage and
 * its kernels) and the keys of the stages it depends on, so a change flows
 * down the graph: a new source re-keys convert, compile, gate and package; a
 * gate threshold re-keys that profile's gate and the package, nothing else.
 * The compile key is build.c's (it is also the engine's provenance).
 */
#ifndef NF_FACTORY_STAGE_KEYS_H
#define NF_FACTORY_STAGE_KEYS_H

#include <jansson.h>

#include "factory/plan.h"
#include "factory/profile.h"
#include "factory/recipe.h"
#include "util/sha256.h"

/* The digest of {"stage": stage, "tool": "nimfactory <version>", "inputs":
 * inputs}.  Takes ownership of inputs (NULL: out of memory, reported). */
int nf_stage_key(char key[NF_SHA256_HEX_LEN + 1], const char *stage, json_t *inputs);

/* convert: the checkpoint and tokenizer bytes, the source format and the
 * recipe's chat template (convert resolves it against the model's). */
int nf_stage_key_convert(char key[NF_SHA256_HEX_LEN + 1], const nf_recipe *r,
			 const char *source_digest, const char *tok_digest);

/* compile: what an engine is made of (its provenance, which it carries, and
 * the autotune switch): the source and tokenizer, the profile, the int4
 * group and calibration text (calib_digest, NULL for the default) of its
 * precision, a GPU profile's kernels.  *provenance gets the provenance as
 * canonical JSON (caller frees).  A different shape from the other keys,
 * kept so that engines cached before the other stages were keyed stay hits. */
int nf_stage_key_compile(char key[NF_SHA256_HEX_LEN + 1], char **provenance, const nf_recipe *r,
			 const nf_profile *p, const char *source_digest, const char *tok_digest,
			 const char *calib_digest);

/* The float32 reference of the correctness gates: the converted model, the
 * evaluation text's bytes (eval_digest, "" for the shipped text) and the
 * fields of gates.correctness that shape it (prompts, max_tokens,
 * eval_tokens), not its tolerances. */
int nf_stage_key_reference(char key[NF_SHA256_HEX_LEN + 1], const nf_recipe *r,
			   const char *convert_key, const char *eval_digest);

/* The gates of profile p: its engine (compile_key), the reference, the
 * tolerances of p's precision, gates.performance with the ratio bounds of
 * p's precision, and the engine threads the gates measure with. */
int nf_stage_key_gate(char key[NF_SHA256_HEX_LEN + 1], const nf_recipe *r, const nf_profile *p,
		      const char *compile_key, const char *reference_key, int threads);

/* The image: the whole recipe (plan->recipe_digest: image fields, labels and
 * every gate it names), the resolved chat template, every profile's compile
 * and gate keys (plan->stages, filled), the runtime binary's digest ("" for
 * none) and the image's timestamp. */
int nf_stage_key_package(char key[NF_SHA256_HEX_LEN + 1], const nf_recipe *r, const nf_plan *plan,
			 const char *runtime_digest);

#endif
