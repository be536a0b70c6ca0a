/*
 * fuzz_recipe.c - libFuzzer target for the recipe parser: any bytes either
 * parse into a recipe (whose canonical JSON and digest must then build) or
 * fail with NF_EINPUT and a "FILE:LINE:COL: message" line.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "factory/recipe.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	nf_recipe *r = NULL;
	int err = nf_recipe_parse(&r, "fuzz.yaml", (const char *)data, size, "/fuzz");

	if (err == 0) {
		char hex[NF_SHA256_HEX_LEN + 1];
		json_t *j = NULL;
		if (nf_recipe_to_json(&j, r) < 0 || nf_recipe_digest(hex, r) < 0)
			abort();
		json_decref(j);
	} else if (err == NF_EINPUT) {
		/* every input error names the file and a position */
		if (strncmp(nf_error_last(), "fuzz.yaml:", 10) != 0 &&
		    strncmp(nf_error_last(), "SOURCE_DATE_EPOCH", 17) != 0)
			abort();
	} else if (err != NF_ENOMEM) {
		abort();
	}
	nf_recipe_free(r);
	return 0;
}
