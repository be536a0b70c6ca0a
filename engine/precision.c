/*
 * precision.c - the engine precisions as one table: names, how each stores
 * its matrices, what its build needs, and which ones the CPU backend can
 * build and run.
 */
#include <string.h>

#include "engine/engine.h"
#include "util/error.h"
#include "util/banned.h"

static const nf_precision_info precisions[NF_PREC_COUNT] = {
	[NF_PREC_FP32] = {"fp32", NF_QUANT_NONE, 0, 0, 0, "F32"},
	[NF_PREC_FP16] = {"fp16", NF_QUANT_F16, 0, 0, 0, "F16"},
	[NF_PREC_BF16] = {"bf16", NF_QUANT_BF16, 0, 0, 0, "BF16"},
	[NF_PREC_INT8_WO] = {"int8-wo", NF_QUANT_INT8_ROW, 0, 0, 0, "Q8_0"},
	[NF_PREC_INT4_WO] = {"int4-wo", NF_QUANT_INT4_GROUP, 32, 0, 0, "Q4_1"},
	[NF_PREC_INT4_AWQ] = {"int4-awq", NF_QUANT_INT4_GROUP, 32, 1, 1, "Q4_1"},
	[NF_PREC_FP8_E4M3] = {"fp8-e4m3", NF_QUANT_FP8_E4M3, 0, 0, 1, "Q8_0"},
};

const nf_precision_info *nf_precision_info_of(nf_precision p)
{
	if ((int)p < 0 || p >= NF_PREC_COUNT)
		return NULL;
	return &precisions[p];
}

const char *nf_precision_name(nf_precision p)
{
	const nf_precision_info *i = nf_precision_info_of(p);
	return i ? i->name : "unknown";
}

int nf_precision_parse(nf_precision *out, const char *name)
{
	if (!name)
		return nf_error_set(NF_EINPUT, "precision: missing");
	for (int i = 0; i < NF_PREC_COUNT; i++) {
		if (strcmp(name, precisions[i].name) == 0) {
			*out = (nf_precision)i;
			return 0;
		}
	}
	return nf_error_set(NF_EINPUT,
			    "unknown precision '%s' (expected fp32, fp16, bf16, int8-wo, int4-wo, int4-awq, fp8-e4m3)",
			    name);
}

int nf_precision_cpu_supported(nf_precision p)
{
	return nf_precision_info_of(p) != NULL;
}

int nf_precision_group(nf_precision p, int requested)
{
	const nf_precision_info *i = nf_precision_info_of(p);
	if (!i || i->weights != NF_QUANT_INT4_GROUP)
		return 0;
	return requested ? requested : i->group;
}
