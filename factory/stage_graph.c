/* stage_graph.c - every key of a plan's stage graph, and what the cache holds (see stage_graph.h). */
#define _GNU_SOURCE
#include "factory/stage_graph.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "factory/stage_keys.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

int nf_stage_graph_keys_fill(nf_stage_graph_keys *keys, nf_plan *plan, const nf_recipe *r,
			     const nf_stage_inputs *in)
{
	nf_stage *convert = nf_plan_stage(plan, NF_STAGE_CONVERT, -1);
	int err = convert ? nf_stage_key_convert(convert->key, r, in->source_digest, in->tok_digest)
			  : nf_error_set(NF_EINPUT, "the plan has no convert stage");
	if (!err)
		err = nf_stage_key_reference(keys->reference, r, convert->key, in->eval_digest);
	nf_stage *reference = nf_plan_stage(plan, NF_STAGE_REFERENCE, -1);
	if (!err && reference)
		memcpy(reference->key, keys->reference, sizeof(reference->key));
	for (size_t i = 0; !err && i < plan->n_profiles; i++) {
		nf_stage *compile = nf_plan_stage(plan, NF_STAGE_COMPILE, (int)i);
		nf_stage *gate = nf_plan_stage(plan, NF_STAGE_GATE, (int)i);
		char *provenance = NULL;
		err = nf_stage_key_compile(compile->key, &provenance, r, &plan->profiles[i],
					   in->source_digest, in->tok_digest, in->calib_digest);
		free(provenance);
		if (!err)
			err = nf_stage_key_gate(gate->key, r, &plan->profiles[i], compile->key,
						keys->reference, in->threads);
	}
	if (!err)
		err = nf_stage_key_package(keys->package, r, plan, in->runtime_digest);
	return err;
}

int nf_stage_timing_write(const char *stage_dir, double seconds)
{
	char *path = nf_path_join(stage_dir, NF_STAGE_TIMING_FILE);
	json_t *j = json_pack("{s:f}", "seconds", seconds);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	int err = path && text ? nf_fs_write_atomic(path, text, strlen(text), 0444)
			       : nf_error_set(NF_ENOMEM, "out of memory");
	json_decref(j);
	free(text);
	free(path);
	return err;
}

double nf_stage_timing_read(const char *stage_dir)
{
	char *path = nf_path_join(stage_dir, NF_STAGE_TIMING_FILE), *text = NULL;
	size_t len;
	double seconds = -1;
	if (path && nf_fs_read_file(&text, &len, path, 4096) == 0) {
		json_t *j = json_loadb(text, len, 0, NULL);
		const json_t *s = json_object_get(j, "seconds");
		if (json_is_number(s) && json_number_value(s) >= 0)
			seconds = json_number_value(s);
		json_decref(j);
	}
	nf_error_clear();
	free(text);
	free(path);
	return seconds;
}

/* 1 when c holds the stage result under key; *seconds its recorded time (-1 without one). */
static int cached(const nf_cache *c, const char *key, double *seconds)
{
	char *dir = NULL;
	if (!key[0] || nf_cache_stage_lookup(&dir, c, key)) {
		nf_error_clear();
		return 0;
	}
	*seconds = nf_stage_timing_read(dir);
	free(dir);
	return 1;
}

void nf_stage_graph_mark_skipped(nf_plan *plan)
{
	nf_stage *reference = nf_plan_stage(plan, NF_STAGE_REFERENCE, -1);
	int gates_run = 0;
	for (size_t i = 0; i < plan->n_stages; i++)
		gates_run |= plan->stages[i].kind == NF_STAGE_GATE && !plan->stages[i].cached &&
			     !plan->stages[i].remote;
	if (reference)
		reference->skipped = !reference->cached && !gates_run;
}

void nf_stage_graph_mark_cached(nf_plan *plan, const nf_cache *c, const char *package_key)
{
	for (size_t i = 0; i < plan->n_stages; i++) {
		nf_stage *st = &plan->stages[i];
		if (st->kind == NF_STAGE_FETCH)
			continue;
		st->cached = cached(c, st->kind == NF_STAGE_PACKAGE ? package_key : st->key, &st->seconds);
	}
	nf_stage_graph_mark_skipped(plan);
}
