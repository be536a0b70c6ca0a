/*
 * profile.h - one engine profile: a (device, precision, tensor-parallel)
 * (, KV cache) point of a recipe's build matrix, with its stable id.
 *
 * The id is the sha256 of the profile's canonical JSON (keys sorted, compact):
 *   {"arch":..,"device":..,"family":..,"model":..,"precision":..,
 *    "source_sha256":..,"tensor_parallel":..,"tokenizer_sha256":..}
 * plus "kv_cache" when the profile's KV cache is not its precision's
 * default (nf_kv_kind_default), so the default profiles keep their ids; so the same model built for the same point always gets the same id, on
 * any machine, whatever the recipe's formatting.
 */
#ifndef NF_FACTORY_PROFILE_H
#define NF_FACTORY_PROFILE_H

#include "engine/engine.h"
#include "util/sha256.h"

typedef enum nf_verdict {
	NF_VERDICT_PENDING,
	NF_VERDICT_PASSED,
	NF_VERDICT_FAILED,
	NF_VERDICT_SKIPPED,
} nf_verdict;

const char *nf_verdict_name(nf_verdict v); /* "pending" "passed" "failed" "skipped" */

typedef struct nf_profile {
	char id[NF_SHA256_HEX_LEN + 1];
	char name[96];        /* "cpu-int8-wo-tp1", "cpu-int8-wo-tp1-kv8" */
	char device[64];      /* SKU name */
	char arch[16];        /* CUDA arch ("sm_90"), "" for cpu */
	int is_gpu;
	nf_precision precision;
	int tensor_parallel;
	nf_kv_kind kv_cache;  /* the engine's KV cache */
	int kv_explicit;      /* kv_cache is not the precision's default: named in the
				 id, the name ("-kv8") and the engine's config.json */
	char *canonical_json; /* owned: what the id hashes */
	char *engine_dir;     /* owned: built engine folder (cache or out), NULL until built */
	nf_verdict verdict;   /* overall gate verdict */
} nf_profile;

void nf_profile_release(nf_profile *p);
/* The name's suffix of a KV cache kind: "kv32", "kv16", "kv8". */
const char *nf_profile_kv_suffix(nf_kv_kind kind);

#endif
