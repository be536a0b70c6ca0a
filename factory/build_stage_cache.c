/*
 * build_stage_cache.c - the stage results a build keeps in the cache (see
 * build_ctx.h): how each is looked up (locally, then --cache-from), what
 * convert, gate and package leave in their folders, and the one way every
 * stage folder is made (nf_build_stage_store).
 */
#define _GNU_SOURCE
#include "factory/build_ctx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/chat.h"
#include "factory/stage_estimate.h"
#include "factory/stage_gates.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

double nf_build_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The folder of stage (kind, key) from the local cache, else pulled from
 * the remote one; *dir NULL when neither has it (or --rebuild). */
nf_build_found nf_build_stage_lookup(build_ctx *b, const char *kind, const char *key, char **dir)
{
	*dir = NULL;
	if (b->opts->rebuild)
		return NF_BUILD_MISSING;
	if (nf_cache_stage_lookup(dir, b->cache, key) == 0)
		return NF_BUILD_LOCAL;
	nf_error_clear();
	if (b->remote_from && nf_remote_cache_pull(dir, b->remote_from, b->cache, kind, key) == 0)
		return NF_BUILD_PULLED;
	nf_error_clear();
	return NF_BUILD_MISSING;
}

/* " (pulled from REF)" after a stage that came from the remote cache, else "". */
const char *nf_build_pulled_note(build_ctx *b, nf_build_found f, char *buf, size_t size)
{
	if (f != NF_BUILD_PULLED)
		return "";
	snprintf(buf, size, " (pulled from %s)", nf_remote_cache_ref(b->remote_from));
	return buf;
}

/* Push the finished stage (kind, key) to --cache-to, made or found. */
int nf_build_stage_push(build_ctx *b, const char *kind, const char *key)
{
	char *dir = NULL;
	int err;
	if (!b->remote_to)
		return 0;
	if (!(err = nf_cache_stage_lookup(&dir, b->cache, key)))
		err = nf_remote_cache_push(b->remote_to, b->cache, kind, key, dir);
	free(dir);
	return err;
}

int nf_build_stage_store(build_ctx *b, const nf_stage *st, const char *key, double seconds,
			 nf_build_fill_fn fill, const void *arg, char **out)
{
	nf_cache_stage *cs = NULL;
	char scale[NF_SHA256_HEX_LEN + 1];
	double t0 = nf_build_now();
	int err = nf_cache_stage_begin(&cs, b->cache, key);
	if (!err)
		err = fill(b, nf_cache_stage_dir(cs), arg);
	if (seconds < 0)
		seconds = nf_build_now() - t0;
	if (!err)
		err = nf_stage_timing_write(nf_cache_stage_dir(cs), seconds);
	if (!err) {
		err = nf_cache_stage_commit(out, cs);
		cs = NULL;
	}
	nf_cache_stage_abort(cs);
	/* an estimate for later plans: losing it costs nothing but the estimate */
	if (!err && (nf_stage_scale_key(scale, b->plan, st, b->source_digest) ||
		     nf_stage_timing_record(b->cache, scale, seconds))) {
		nf_log_debug(b->log, "cache", "%s: timing not recorded: %s", st->name, nf_error_last());
		nf_error_clear();
	}
	return err;
}

/* The name of the chat template a cached convert resolved, as the static
 * string nf_chat_template_name gives; NULL when it is none of them. */
static const char *chat_template_named(const char *name)
{
	for (nf_chat_template t = NF_CHAT_MODEL; t <= NF_CHAT_CHATML; t++)
		if (!strcmp(nf_chat_template_name(t), name))
			return nf_chat_template_name(t);
	return NULL;
}

/* What a convert stage leaves in the cache: the chat template it resolved
 * (the package needs it; the weights themselves go into each engine). */
#define CONVERT_RESULT "chat_template"

int nf_build_convert_from_cache(build_ctx *b, const nf_stage *st)
{
	char *dir = NULL, *path = NULL, *text = NULL, note[300];
	size_t len;
	int found = 0;
	nf_build_found where = nf_build_stage_lookup(b, "convert", st->key, &dir);
	if (where == NF_BUILD_MISSING)
		goto done;
	if ((path = nf_path_join(dir, CONVERT_RESULT)) &&
	    !nf_fs_read_file(&text, &len, path, 64) &&
	    (b->plan->chat_template = chat_template_named(text)))
		found = 1;
	if (found)
		nf_log_stage_cached(b->log, "convert", "key %.12s%s", st->key,
				    nf_build_pulled_note(b, where, note, sizeof(note)));
done:
	nf_error_clear();
	free(dir);
	free(path);
	free(text);
	return found;
}

static int fill_convert(build_ctx *b, const char *dir, const void *arg)
{
	char *path = nf_path_join(dir, CONVERT_RESULT);
	int err = path ? nf_fs_write_atomic(path, b->plan->chat_template,
					    strlen(b->plan->chat_template), 0644)
		       : nf_error_set(NF_ENOMEM, "out of memory");
	free(path);
	return err;
}

int nf_build_convert_to_cache(build_ctx *b, const nf_stage *st)
{
	return nf_build_stage_store(b, st, st->key, st->seconds, fill_convert, NULL, NULL);
}

/* The gates of profile i from the cache: 1 when found (its results added),
 * 0 when they must run (absent, --rebuild, or a damaged entry). */
int nf_build_gate_from_cache(build_ctx *b, size_t i)
{
	nf_profile *p = &b->plan->profiles[i];
	nf_stage *st = nf_plan_stage(b->plan, NF_STAGE_GATE, (int)i);
	char *dir = NULL, *path = NULL, note[300];
	int found = 0;
	nf_build_found where = nf_build_stage_lookup(b, "gate", st->key, &dir);

	if (where != NF_BUILD_MISSING && (path = nf_path_join(dir, NF_STAGE_GATES_FILE)) &&
	    !nf_stage_gates_load(&b->results, path))
		found = 1;
	nf_error_clear();
	if (found) {
		p->verdict = nf_gate_results_profile_verdict(&b->results, p->id, p->name);
		st->cached = 1;
		nf_log_stage_cached(b->log, "gate", "%s (key %.12s)%s: %s", p->name, st->key,
				    nf_build_pulled_note(b, where, note, sizeof(note)), nf_verdict_name(p->verdict));
	}
	free(dir);
	free(path);
	return found;
}

static int fill_gate(build_ctx *b, const char *dir, const void *arg)
{
	const nf_profile *p = arg;
	char *path = nf_path_join(dir, NF_STAGE_GATES_FILE);
	int err = path ? nf_stage_gates_save(path, &b->results, p->id)
		       : nf_error_set(NF_ENOMEM, "out of memory");
	free(path);
	return err;
}

int nf_build_gate_to_cache(build_ctx *b, size_t i)
{
	const nf_stage *st = nf_plan_stage(b->plan, NF_STAGE_GATE, (int)i);
	return nf_build_stage_store(b, st, st->key, st->seconds, fill_gate, &b->plan->profiles[i],
				    NULL);
}

/* What a package stage leaves in the cache: the OCI layout as written, and
 * the digest its tag points at (deploy names the image by it). */
#define PACKAGE_LAYOUT "oci"
#define PACKAGE_DIGEST "image-digest"

/* OUT/oci restored byte for byte from the cache: 1 when it was there. */
int nf_build_package_from_cache(build_ctx *b, const char *key, char image[NF_SHA256_HEX_LEN + 1])
{
	char *dir = NULL, *src = NULL, *dst = NULL, *digest = NULL, *text = NULL;
	size_t len;
	int found = 0;
	if (b->opts->rebuild || nf_cache_stage_lookup(&dir, b->cache, key))
		goto done;
	src = nf_path_join(dir, PACKAGE_LAYOUT);
	dst = nf_path_join(b->out_tmp, PACKAGE_LAYOUT);
	digest = nf_path_join(dir, PACKAGE_DIGEST);
	if (!src || !dst || !digest ||
	    nf_fs_read_file(&text, &len, digest, NF_SHA256_HEX_LEN) || len != NF_SHA256_HEX_LEN)
		goto done;
	if (nf_fs_copy_tree(src, dst)) {
		nf_fs_remove_tree(dst); /* packaged again below, from nothing */
		goto done;
	}
	memcpy(image, text, NF_SHA256_HEX_LEN + 1);
	found = 1;
done:
	nf_error_clear();
	free(dir);
	free(src);
	free(dst);
	free(digest);
	free(text);
	return found;
}

/* The image's layout as OUT holds it, and the digest its tag points at. */
static int fill_package(build_ctx *b, const char *dir, const void *arg)
{
	const char *image = arg;
	char *src = nf_path_join(b->out_tmp, PACKAGE_LAYOUT), *dst = nf_path_join(dir, PACKAGE_LAYOUT);
	char *digest = nf_path_join(dir, PACKAGE_DIGEST);
	int err = src && dst && digest ? nf_fs_copy_tree(src, dst)
				       : nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = nf_fs_write_atomic(digest, image, strlen(image), 0444);
	free(src);
	free(dst);
	free(digest);
	return err;
}

int nf_build_package_to_cache(build_ctx *b, const char *key, const char *image, double seconds)
{
	return nf_build_stage_store(b, nf_plan_stage(b->plan, NF_STAGE_PACKAGE, -1), key, seconds,
				    fill_package, image, NULL);
}

int nf_build_reference_from_cache(build_ctx *b, nf_stage *st)
{
	char *dir = NULL;
	int found = 0;
	/* local only: the reference is not pushed to --cache-from's registry */
	if (!b->opts->rebuild && !nf_cache_stage_lookup(&dir, b->cache, st->key)) {
		if (!nf_gate_ref_load(&b->ref, dir))
			found = 1;
		else
			nf_log_warn(b->log, "gate", "%s; computing it again", nf_error_last());
	}
	nf_error_clear();
	if (found) {
		st->cached = 1;
		st->seconds = nf_stage_timing_read(dir);
		nf_log_stage_cached(b->log, "gate", "float32 reference (key %.12s): %zu rows",
				    st->key, b->ref->n_rows);
	}
	free(dir);
	return found;
}

static int fill_reference(build_ctx *b, const char *dir, const void *arg)
{
	(void)arg;
	return nf_gate_ref_save(b->ref, dir);
}

int nf_build_reference_to_cache(build_ctx *b, const nf_stage *st)
{
	return nf_build_stage_store(b, st, st->key, b->ref->seconds, fill_reference, NULL, NULL);
}
