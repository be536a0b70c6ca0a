/*
 * fuzz_safetensors.c - libFuzzer target: the safetensors reader on any
 * bytes (nf_st_open_mem), then every accessor on what it accepted.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	nf_st_file *f = NULL;
	volatile uint8_t sink = 0;

	if (nf_st_open_mem(&f, data, size, "fuzz") != 0)
		return 0;
	for (size_t i = 0; i < nf_st_count(f); i++) {
		const nf_st_tensor *t = nf_st_at(f, i);
		const uint8_t *p = t->data;
		/* accepted tensors lie inside the input: touch both ends */
		if (t->nbytes) {
			if (p < data || p + t->nbytes > data + size)
				abort();
			sink ^= p[0] ^ p[t->nbytes - 1];
		}
		if (nf_st_find(f, t->name) != t)
			abort(); /* names are unique */
		if (nf_dtype_size(t->dtype) == 0 || t->ndim < 0 || t->ndim > NF_ST_MAX_DIMS)
			abort();
	}
	(void)nf_st_metadata(f, "format");
	(void)nf_st_find(f, "");
	nf_st_close(f);
	return 0;
}
