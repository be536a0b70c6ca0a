/* stage_plan.c - the stage graph's keys and cache state before any work (see stage_plan.h). */
#define _GNU_SOURCE
#include "factory/stage_plan.h"

#include <stdlib.h>
#include <string.h>

#include "factory/digest.h"
#include "factory/package.h"
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

int nf_stage_plan(nf_stage_graph_keys *keys, int *known, nf_plan *plan, const nf_recipe *r,
		  const nf_cache *c, const char *runtime_dir)
{
	char src[NF_SHA256_HEX_LEN + 1], tok[NF_SHA256_HEX_LEN + 1], calib[NF_SHA256_HEX_LEN + 1];
	char eval[NF_SHA256_HEX_LEN + 1], runtime[NF_SHA256_HEX_LEN + 1] = "";
	char *nimserve = nf_package_find_nimserve(runtime_dir);
	int src_known = 0, src_here = 0, tok_known = 0, tok_here = 0;
	size_t fetches = 0;
	int err = source_digest(src, &src_known, &src_here, &r->model.source, c);

	if (!err)
		err = source_digest(tok, &tok_known, &tok_here, &r->model.tokenizer, c);
	*known = src_known && tok_known;
	for (size_t i = 0; !err && i < plan->n_stages; i++)
		if (plan->stages[i].kind == NF_STAGE_FETCH) /* the model's, then the tokenizer's */
			plan->stages[i].cached = fetches++ == 0 ? src_here : tok_here;
	if (err || !*known)
		goto done;
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
done:
	free(nimserve);
	return err;
}
