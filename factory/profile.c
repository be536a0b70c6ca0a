/* profile.c - engine profiles (see profile.h). */
#include "factory/profile.h"

#include <stdlib.h>

#include "util/banned.h"

const char *nf_verdict_name(nf_verdict v)
{
	switch (v) {
	case NF_VERDICT_PASSED: return "passed";
	case NF_VERDICT_FAILED: return "failed";
	case NF_VERDICT_SKIPPED: return "skipped";
	default: return "pending";
	}
}

void nf_profile_release(nf_profile *p)
{
	if (!p)
		return;
	free(p->canonical_json);
	free(p->engine_dir);
	p->canonical_json = NULL;
	p->engine_dir = NULL;
}

const char *nf_profile_kv_suffix(nf_kv_kind kind)
{
	switch (kind) {
	case NF_KV_F32: return "kv32";
	case NF_KV_F16: return "kv16";
	case NF_KV_INT8: return "kv8";
	default: return "kv";
	}
}
