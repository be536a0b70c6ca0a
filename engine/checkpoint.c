/*
 * checkpoint.c - checkpoint format names and the dispatch from a path to the
 * llama2.c, Hugging Face or GGUF loader (see checkpoint.h).
 */
#include "engine/checkpoint.h"

#include <stdio.h>
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
	else if (name && strcmp(name, "gguf") == 0)
		*out = NF_CKPT_GGUF;
	else
		return nf_error_set(NF_EINPUT,
				    "unknown checkpoint format \"%s\" (auto, llama2c, hf, gguf)",
				    name ? name : "");
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

/* Whether the file starts with the GGUF magic. */
static bool has_gguf_magic(const char *path)
{
	char magic[4];
	FILE *f = fopen(path, "rb");
	bool yes = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
	if (f)
		fclose(f);
	return yes;
}

nf_ckpt_format nf_ckpt_sniff(const char *path)
{
	if (nf_fs_is_dir(path) || ends_with(path, ".safetensors") ||
	    ends_with(path, ".safetensors.index.json"))
		return NF_CKPT_HF;
	return has_gguf_magic(path) ? NF_CKPT_GGUF : NF_CKPT_LLAMA2C;
}

int nf_ckpt_load(nf_model **out, const char *path, nf_ckpt_format format)
{
	*out = NULL;
	if (format == NF_CKPT_AUTO) {
		if (!nf_fs_exists(path))
			return nf_error_set(NF_ENOTFOUND, "%s: no such file or directory", path);
		format = nf_ckpt_sniff(path);
	}
	switch (format) {
	case NF_CKPT_LLAMA2C: return nf_ckpt_load_llama2c(out, path);
	case NF_CKPT_HF: return nf_ckpt_load_hf(out, path);
	case NF_CKPT_GGUF: return nf_ckpt_load_gguf(out, path);
	default: return nf_error_set(NF_EINTERNAL, "bad checkpoint format %d", (int)format);
	}
}
