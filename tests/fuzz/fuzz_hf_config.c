/*
 * fuzz_hf_config.c - libFuzzer target: Hugging Face config.json parsing and
 * validation on any bytes; what it accepts must satisfy the model limits.
 */
#include <stdint.h>
#include <stdlib.h>

#include "engine/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	nf_model_config c;
	size_t params;
	if (nf_ckpt_hf_config_parse(&c, (const char *)data, size, "fuzz") != 0)
		return 0;
	if (nf_model_config_validate(&c, "fuzz") != 0 || nf_model_param_count(&params, &c) != 0)
		abort();
	return 0;
}
