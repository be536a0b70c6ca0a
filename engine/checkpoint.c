/*
 * checkpoint.c - checkpoint format names and the dispatch from a path to the
 * llama2.c or Hugging Face loader (see checkpoint.h).
 */
#include "engine/checkpoint.h"

#include <string.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

int nf_ckpt_format_parse(nf_ckpt_format *out, const char *name)
{
	if (name && strcmp(name, "auto") == 0)
		*out = NF_CKPT_AUTO;
	else if (name && (strcmp(name, "llama2c") == 0 || strcmp(name, "llama2.c") == 0))
		*out = NF_CKPT_LLAMA2C;
	else if (name && (strcmp(name, "hf") == 0 || strcmp(name, "safetensors") == 0))
		*out = NF_CKPT_HF;
	else
		return nf_error_set(NF_EINPUT, "unknown checkpoint format \"%s\" (auto, llama2c, hf)",
				    name ? name : "");
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

int nf_ckpt_load(nf_model **out, const char *path, nf_ckpt_format format)
{
	*out = NULL;
	if (format == NF_CKPT_AUTO) {
		if (!nf_fs_exists(path))
			return nf_error_set(NF_ENOTFOUND, "%s: no such file or directory", path);
		format = nf_fs_is_dir(path) || ends_with(path, ".safetensors") ||
				 ends_with(path, ".safetensors.index.json")
			 ? NF_CKPT_HF
			 : NF_CKPT_LLAMA2C;
	}
	switch (format) {
	case NF_CKPT_LLAMA2C: return nf_ckpt_load_llama2c(out, path);
	case NF_CKPT_HF: return nf_ckpt_load_hf(out, path);
	default: return nf_error_set(NF_EINTERNAL, "bad checkpoint format %d", (int)format);
	}
}
