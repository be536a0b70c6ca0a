/*
 * kv_kind.c - the names of the KV cache kinds (config.json's and the
 * recipe's "kv_cache").
 */
#include <string.h>

#include "engine/kv_kind.h"
#include "util/error.h"
#include "util/banned.h"

static const char *const kv_names[NF_KV_KIND_COUNT] = {
	[NF_KV_F32] = "f32", [NF_KV_F16] = "f16", [NF_KV_INT8] = "int8",
};

const char *nf_kv_kind_name(nf_kv_kind kind)
{
	if ((int)kind < 0 || kind >= NF_KV_KIND_COUNT)
		return "unknown";
	return kv_names[kind];
}

int nf_kv_kind_parse(nf_kv_kind *out, const char *name)
{
	if (!name)
		return nf_error_set(NF_EINPUT, "kv_cache: missing");
	for (int i = 0; i < NF_KV_KIND_COUNT; i++)
		if (strcmp(name, kv_names[i]) == 0) {
			*out = (nf_kv_kind)i;
			return 0;
		}
	return nf_error_set(NF_EINPUT, "unknown kv_cache '%s' (expected f32, f16, int8)", name);
}
