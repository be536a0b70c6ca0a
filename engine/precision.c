/*
 * precision.c - names of the engine precisions and which ones the CPU
 * backend can build and run.
 */
#include <string.h>

#include "engine/engine.h"
#include "util/error.h"
#include "util/banned.h"

static const char *const prec_names[NF_PREC_COUNT] = {
	[NF_PREC_FP32] = "fp32",     [NF_PREC_FP16] = "fp16",
	[NF_PREC_BF16] = "bf16",     [NF_PREC_INT8_WO] = "int8-wo",
	[NF_PREC_INT4_AWQ] = "int4-awq", [NF_PREC_FP8_E4M3] = "fp8-e4m3",
};

const char *nf_precision_name(nf_precision p)
{
	if ((int)p < 0 || p >= NF_PREC_COUNT)
		return "unknown";
	return prec_names[p];
}

int nf_precision_parse(nf_precision *out, const char *name)
{
	if (!name)
		return nf_error_set(NF_EINPUT, "precision: missing");
	for (int i = 0; i < NF_PREC_COUNT; i++) {
		if (strcmp(name, prec_names[i]) == 0) {
			*out = (nf_precision)i;
			return 0;
		}
	}
	return nf_error_set(NF_EINPUT,
			    "unknown precision '%s' (expected fp32, fp16, bf16, int8-wo, int4-awq, fp8-e4m3)",
			    name);
}

int nf_precision_cpu_supported(nf_precision p)
{
	return p == NF_PREC_FP32 || p == NF_PREC_INT8_WO;
}
