/*
 * checkpoint_hf.c - Hugging Face Llama checkpoints (being written).
 */
#include "engine/checkpoint.h"

#include "util/error.h"
#include "util/banned.h"

int nf_ckpt_load_hf(nf_model **out, const char *path)
{
	*out = NULL;
	return nf_error_set(NF_EUNSUPPORTED, "%s: Hugging Face checkpoints are not supported yet", path);
}

int nf_ckpt_write_hf(const char *dir, const nf_model *m, nf_dtype dtype)
{
	return nf_error_set(NF_EUNSUPPORTED, "%s: not supported yet", dir);
}
