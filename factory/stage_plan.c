/* stage_plan.c - the stage graph's keys and cache state before any work (see stage_plan.h). */
#define _GNU_SOURCE
#include "factory/stage_plan.h"

#include <stdlib.h>
#include <string.h>

#include "factory/digest.h"
#include "factory/package.h"
#include "factory/plan_fit.h"
#include "factory/stage_estimate.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* A source's content digest as its fetch stage will give it, and whether it
 * is at hand (in the cache, or a local path): *known 0 when only fetching
 * can tell. */
static int source_digest(char hex[NF_SHA256_HEX_LEN + 1], int *known, int *at_hand,
			 const nf_recipe_source *s, const nf_cache *c)
{
	*known = *at_hand = 0;
	hex[0] = '\0';
	if (s->kind == NF_SOURCE_NONE)
		return *known = *at_hand = 1, 0;
	if (s->kind == NF_SOURCE_PATH && s->path && nf_fs_exists(s->path) && !s->archive) {
		*known = *at_hand = 1;
		return nf_digest_path(hex, s->path);
	}
	if (s->kind == NF_SOURCE_URL && s->sha256 && !s->archive) {
		memcpy(hex, s->sha256, NF_SHA256_HEX_LEN + 1);
		*known = 1;
		*at_hand = nf_cache_blob_lookup(NULL, c, s->sha256) == 0;
		nf_error_clear();
	}
	return 0;
}

/* The sha256 of a file the recipe names, "" (or NULL for calibration) when it names none. */
static int file_digest(char hex[NF_SHA256_HEX_LEN + 1], const char *path)
{
	hex[0] = '\0';
	return path ? nf_digest_path(hex, path) : 0;
}

/* Where the checkpoint at hand is: its local path, or its blob in c.  NULL
 * (no error) when it is not at hand. */
static char *source_path(const nf_recipe_source *s, const nf_cache *c)
{
	char *path = NULL;
	if (s->kind == NF_SOURCE_PATH && s->path)
		return strdup(s->path);
	if (s->kind == NF_SOURCE_URL && s->sha256 && nf_cache_blob_lookup(&path, c, s->sha256))
		nf_error_clear();
	return path;
}

/* Size the profiles from the checkpoint's header when it is at hand, and
 * drop those that do not fit (plan->fits stays NULL when it is not). */
static int fit_profiles(nf_plan *plan, nf_model_config *cfg, int *shapes, const nf_recipe *r,
			const nf_cache *c, uint64_t host_memory)
{
	char *path = source_path(&r->model.source, c);
	size_t dropped;
	int err = 0;
	*shapes = 0;
	if (path && !nf_fit_read_shapes(cfg, path, r->model.source.format))
		*shapes = 1;
	else if (path) /* the build will say so at its fetch; plan goes on without the fit */
		nf_log_warn(nf_log_default(), "plan", "%s: fit unknown", nf_error_last());
	nf_error_clear();
	if (*shapes) {
		nf_fit_sizes sz = nf_fit_sizes_of(r);
		err = nf_plan_fit(plan, &dropped, cfg, &sz, host_memory, r->file);
	}
	free(path);
	return err;
}

/* Mark the stages that are not local but that remote holds.  A registry
 * that cannot be asked costs the remote column, not the plan: warned. */
static void mark_remote(nf_plan *plan, const nf_stage_graph_keys *keys, nf_remote_cache *remote)
{
	int err = 0;
	for (size_t i = 0; !err && i < plan->n_stages; i++) {
		nf_stage *st = &plan->stages[i];
		const char *key = st->kind == NF_STAGE_PACKAGE ? keys->package : st->key;
		bool present = false;
		/* the reference is kept in the local cache only (its rows are the size of
		 * the model's vocabulary times the evaluated tokens) */
		if (st->cached || st->kind == NF_STAGE_FETCH || st->kind == NF_STAGE_REFERENCE || !key[0])
			continue;
		if (!(err = nf_remote_cache_has(&present, remote, nf_stage_kind_name(st->kind), key)))
			st->remote = present;
	}
	if (err)
		nf_log_warn(nf_log_default(), "plan", "%s: no stage marked remote", nf_error_last());
	nf_error_clear();
	nf_stage_graph_mark_skipped(plan);
}

int nf_stage_plan(nf_stage_graph_keys *keys, int *known, nf_plan *plan, const nf_recipe *r,
		  const nf_stage_plan_opts *o)
{
	const nf_cache *c = o->cache;
	const char *runtime_dir = o->runtime_dir;
	nf_model_config cfg;
	int shapes = 0;
	char src[NF_SHA256_HEX_LEN + 1], tok[NF_SHA256_HEX_LEN + 1], calib[NF_SHA256_HEX_LEN + 1];
	char eval[NF_SHA256_HEX_LEN + 1], runtime[NF_SHA256_HEX_LEN + 1] = "";
	char *nimserve = nf_package_find_nimserve(runtime_dir);
	int src_known = 0, src_here = 0, tok_known = 0, tok_here = 0;
	size_t fetches = 0;
	int err = source_digest(src, &src_known, &src_here, &r->model.source, c);

	if (!err)
		err = source_digest(tok, &tok_known, &tok_here, &r->model.tokenizer, c);
	if (!err && src_here)
		err = fit_profiles(plan, &cfg, &shapes, r, c, o->host_memory);
	*known = src_known && tok_known;
	for (size_t i = 0; !err && i < plan->n_stages; i++)
		if (plan->stages[i].kind == NF_STAGE_FETCH) /* the model's, then the tokenizer's */
			plan->stages[i].cached = fetches++ == 0 ? src_here : tok_here;
	if (err || !*known)
		goto estimate;
	if ((err = file_digest(calib, r->build.quant.calibration_text)) ||
	    (err = file_digest(eval, r->gates.correctness.eval_text)))
		goto done;
	if (nimserve && nf_fs_exists(nimserve) && (err = nf_digest_path(runtime, nimserve)))
		goto done;
	nf_stage_inputs in = {
		.source_digest = src,
		.tok_digest = tok,
		.calib_digest = r->build.quant.calibration_text ? calib : NULL,
		.eval_digest = eval,
		.runtime_digest = runtime,
	};
	if (!(err = nf_stage_graph_keys_fill(keys, plan, r, &in)))
		nf_stage_graph_mark_cached(plan, c, keys->package);
	if (!err && o->remote)
		mark_remote(plan, keys, o->remote);
estimate:
	if (!err)
		nf_stage_estimate(plan, r, c, src_known ? src : NULL, shapes ? &cfg : NULL);
done:
	free(nimserve);
	return err;
}
