/* deploy_sizing.c - the memory a pod serving one engine needs (see deploy.h). */
#include "factory/deploy.h"

#include <stdlib.h>

#include "engine/forward.h"
#include "factory/plan_fit.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* An engine's config.json is a few kB; anything near this is not one. */
#define ENGINE_CONFIG_MAX ((size_t)1 << 20)

/* What nimserve holds beside weights and KV caches: the process, the
 * activation buffers of a forward pass, HTTP and request state. */
#define RUNTIME_BYTES ((uint64_t)256 << 20)

/* Largest dimension believed from a config.json (far above any real model),
 * so the products below stay meaningful. */
#define DIM_MAX (1 << 24)

static int get_dim(int32_t *out, const json_t *model, const char *key, const char *path)
{
	json_t *v = json_object_get(model, key);
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > DIM_MAX)
		return nf_error_set(NF_EINPUT, "%s: model.%s is not a dimension", path, key);
	*out = (int32_t)json_integer_value(v);
	return 0;
}

/* The dimensions the KV cache's size depends on, from config.json's "model". */
static int read_kv_config(nf_model_config *cfg, const char *path)
{
	char *text = NULL;
	size_t len;
	json_error_t je;
	json_t *root = NULL, *model;
	int err = nf_fs_read_file(&text, &len, path, ENGINE_CONFIG_MAX);
	if (err)
		return err;
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	model = json_object_get(root, "model");
	if (!json_is_object(model))
		err = nf_error_set(NF_EINPUT, "%s: no \"model\" object", path);
	if (!err)
		err = get_dim(&cfg->dim, model, "dim", path);
	if (!err)
		err = get_dim(&cfg->n_layers, model, "n_layers", path);
	if (!err)
		err = get_dim(&cfg->n_heads, model, "n_heads", path);
	if (!err)
		err = get_dim(&cfg->n_kv_heads, model, "n_kv_heads", path);
	if (!err)
		err = get_dim(&cfg->max_seq_len, model, "max_seq_len", path);
	if (!err && cfg->dim % cfg->n_heads)
		err = nf_error_set(NF_EINPUT, "%s: dim %d is not divisible by n_heads %d", path, cfg->dim,
				   cfg->n_heads);
	json_decref(root);
	free(text);
	return err;
}

int nf_deploy_profile_memory(uint64_t *mib, const char *engine_dir, nf_kv_kind kv, int max_batch,
			     int max_context)
{
	char *config = nf_path_join(engine_dir, "config.json");
	char *weights = nf_path_join(engine_dir, "weights.safetensors");
	nf_model_config cfg = {0};
	uint64_t wbytes = 0, caches, total;
	int err = config && weights ? 0 : nf_error_set(NF_ENOMEM, "out of memory");

	if (!err)
		err = read_kv_config(&cfg, config);
	if (!err)
		err = nf_fs_file_size(&wbytes, weights);
	if (err)
		goto done;
	if (max_context > 0 && max_context < cfg.max_seq_len)
		cfg.max_seq_len = max_context;
	/* the KV caches as plan's fit counts them (factory/plan_fit.h) */
	if (nf_fit_kv_bytes(&caches, &cfg, kv, max_batch) || !nf_u64_mul(&total, wbytes, 2) ||
	    !nf_u64_add(&total, total, caches) || !nf_u64_add(&total, total, RUNTIME_BYTES) ||
	    !nf_u64_add(&total, total, (1 << 20) - 1)) {
		err = nf_error_set(NF_EINPUT, "%s: the memory of this engine overflows", engine_dir);
		goto done;
	}
	*mib = total >> 20;
done:
	free(config);
	free(weights);
	return err;
}
