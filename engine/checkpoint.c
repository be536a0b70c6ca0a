/*
 * checkpoint.c - checkpoint format names, and loading a whole checkpoint
 * through the reader of its format (ckpt_reader.h).
 */
#include "engine/checkpoint.h"

#include "engine/ckpt_reader.h"

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
	nf_ckpt_reader *r;
	int err = nf_ckpt_open(&r, path, format);
	*out = NULL;
	return err ? err : nf_ckpt_materialize(out, r);
}

/* The loader of one format: its reader, read whole. */
static int load_with(nf_model **out, const char *path,
		     int (*open)(nf_ckpt_reader **, const char *))
{
	nf_ckpt_reader *r;
	int err = open(&r, path);
	*out = NULL;
	return err ? err : nf_ckpt_materialize(out, r);
}

int nf_ckpt_load_llama2c(nf_model **out, const char *path)
{
	return load_with(out, path, nf_ckpt_open_llama2c);
}

int nf_ckpt_load_hf(nf_model **out, const char *path)
{
	return load_with(out, path, nf_ckpt_open_hf);
}

int nf_ckpt_load_gguf(nf_model **out, const char *path)
{
	return load_with(out, path, nf_ckpt_open_gguf);
}
