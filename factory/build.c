/* build.c - the `nimfactory build` pipeline (see build.h). */
#define _GNU_SOURCE
#include "factory/build.h"
#include "factory/build_ctx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "engine/chat.h"
#include "engine/checkpoint.h"
#include "engine/engine.h"
#include "engine/engine_weights.h"
#include "factory/build_shared.h"
#include "factory/cache.h"
#include "factory/deploy.h"
#include "factory/digest.h"
#include "factory/fetch.h"
#include "factory/gates.h"
#include "factory/plan.h"
#include "factory/plan_fit.h"
#include "factory/recipe.h"
#include "factory/remote_cache.h"
#include "factory/stage_gates.h"
#include "factory/stage_graph.h"
#include "factory/stage_sched.h"
#include "factory/stage_keys.h"
#include "factory/report.h"
#include "factory/gpu_profile.h"
#include "factory/output_sweep.h"
#include "factory/package.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/version.h"
#include "util/banned.h"

/* The autotuner's measurements, kept beside the engine in its cache stage
 * and reported in OUT/reports/tactics/: they describe this host, so the
 * engine itself keeps the reproducible cost-model table. */
#define TACTICS_REPORT "tactics-measured.json"



static void fetch_progress(void *user, uint64_t done, uint64_t total)
{
	nf_log_progress(user, "fetch", done, total);
}

static void source_spec(nf_source_spec *spec, const nf_recipe_source *s)
{
	memset(spec, 0, sizeof(*spec));
	switch (s->kind) {
	case NF_SOURCE_URL: spec->kind = NF_FETCH_URL; break;
	case NF_SOURCE_GIT: spec->kind = NF_FETCH_GIT; break;
	default: spec->kind = NF_FETCH_PATH; break;
	}
	spec->url = s->kind == NF_SOURCE_GIT ? s->git.url : s->url;
	spec->sha256 = s->sha256;
	spec->path = s->path;
	spec->commit = s->git.commit;
	spec->subpath = s->git.path;
	spec->archive = s->archive;
}

/* What a source's fields are, as one string: two recipes whose sources
 * read the same give the same bytes (a pin, a commit or a local path). */
static char *source_identity(const nf_recipe_source *s)
{
	return nf_strdup_printf("%s|%s|%s|%s|%s|%s|%d", nf_source_kind_name(s->kind),
				s->url ? s->url : "", s->path ? s->path : "",
				s->sha256 ? s->sha256 : "", s->git.url ? s->git.url : "",
				s->git.commit ? s->git.commit : "", s->archive);
}

/* Fetch one source and learn its content digest. */
/* A pinned download already in the cache: its fetch stage has nothing to do. */
static int fetch_is_cached(const build_ctx *b, const nf_recipe_source *src)
{
	int hit = src->kind == NF_SOURCE_URL && src->sha256 && !src->archive &&
		  nf_cache_blob_lookup(NULL, b->cache, src->sha256) == 0;
	nf_error_clear();
	return hit;
}

/* The source as an earlier recipe of this build fetched it: 1 when it did. */
static int fetch_from_shared(build_ctx *b, nf_stage *st, const char *identity, char **path,
			     char digest[NF_SHA256_HEX_LEN + 1])
{
	const char *shared_path = NULL;
	if (nf_build_shared_source(b->opts->shared, identity, &shared_path, digest) != 0 ||
	    !(*path = strdup(shared_path)))
		return 0;
	memcpy(st->key, digest, NF_SHA256_HEX_LEN + 1);
	st->cached = 1;
	nf_log_stage_cached(b->log, "fetch", "%s sha256:%.12s (fetched for an earlier recipe)",
			    st->name, digest);
	return 1;
}

static int fetch_one(build_ctx *b, nf_stage *st, const nf_recipe_source *src, char **path,
		     char digest[NF_SHA256_HEX_LEN + 1])
{
	nf_source_spec spec;
	nf_fetch_opts fo;
	double t0 = nf_build_now();
	char *identity = source_identity(src);
	int err;

	if (!identity)
		return nf_error_set(NF_ENOMEM, "out of memory");
	if (fetch_from_shared(b, st, identity, path, digest)) {
		free(identity);
		return 0;
	}
	st->cached = fetch_is_cached(b, src);
	source_spec(&spec, src);
	nf_fetch_opts_init(&fo);
	fo.progress = fetch_progress;
	fo.progress_user = b->log;
	if (!st->cached)
		nf_log_stage_begin(b->log, "fetch", "%s", src->kind == NF_SOURCE_URL ? src->url
							  : src->kind == NF_SOURCE_GIT ? src->git.url
										       : src->path);
	err = nf_fetch_source(path, b->cache, &spec, &fo);
	if (!err) {
		/* A pinned file is known by its pin; anything else is hashed. */
		if (src->sha256 && !src->archive && !nf_fs_is_dir(*path))
			memcpy(digest, src->sha256, NF_SHA256_HEX_LEN + 1);
		else
			err = nf_digest_path(digest, *path);
	}
	if (!err)
		memcpy(st->key, digest, NF_SHA256_HEX_LEN + 1);
	if (!err && b->opts->shared)
		err = nf_build_shared_add_source(b->opts->shared, identity, *path, digest);
	free(identity);
	st->seconds = nf_build_now() - t0;
	if (st->cached && !err)
		nf_log_stage_cached(b->log, "fetch", "%s sha256:%.12s", st->name, digest);
	else if (st->cached)
		nf_log_error(b->log, "fetch", "%s: %s", st->name, nf_error_last());
	else
		nf_log_stage_end(b->log, "fetch", err, "%s sha256:%.12s", st->name, err ? "" : digest);
	return err;
}

static int stage_fetch(build_ctx *b)
{
	int err = fetch_one(b, nf_plan_stage(b->plan, NF_STAGE_FETCH, -1), &b->recipe->model.source,
			    &b->model_path, b->source_digest);
	if (err || b->recipe->model.tokenizer.kind == NF_SOURCE_NONE)
		return err;
	/* The tokenizer's stage is the second fetch stage. */
	nf_stage *st = nf_plan_stage(b->plan, NF_STAGE_FETCH, -1) + 1;
	return fetch_one(b, st, &b->recipe->model.tokenizer, &b->tok_path, b->tok_digest);
}

/* The profiles that do not fit their device's memory, dropped with their
 * numbers now that the checkpoint's header can be read (as plan does when
 * the checkpoint is at hand), before any key names the profiles. */
static int stage_fit(build_ctx *b)
{
	nf_model_config cfg;
	nf_fit_sizes sz = nf_fit_sizes_of(b->recipe);
	size_t dropped = 0;
	int err = nf_fit_read_shapes(&cfg, b->model_path, b->recipe->model.source.format);
	if (!err)
		err = nf_plan_fit(b->plan, &dropped, &cfg, &sz, nf_fit_host_memory(), b->recipe->file);
	for (size_t i = b->plan->n_dropped - dropped; !err && i < b->plan->n_dropped; i++)
		nf_log_warn(b->log, "plan", "dropped %s %s tp%d: %s", b->plan->dropped[i].device,
			    b->plan->dropped[i].precision, b->plan->dropped[i].tensor_parallel,
			    b->plan->dropped[i].reason);
	return err;
}

/* The model's tokenizer.  A llama2.c tokenizer.bin (the recipe's file,
 * whatever the checkpoint's format) goes into the engines as that file:
 * b->tokenizer stays NULL for it. */
static int load_tokenizer(build_ctx *b, nf_ckpt_format fmt)
{
	int err = nf_ckpt_load_tokenizer(&b->model_tokenizer, b->model_path, fmt, b->tok_path,
					 b->model->cfg.vocab_size);
	if (!err && nf_tokenizer_kind(b->model_tokenizer) != NF_TOK_LLAMA2C)
		b->tokenizer = b->model_tokenizer;
	return err;
}

/* serving.chat_template against what the model brings: "auto" is the
 * model's template when it has one, else plain; "model" needs one. */
static int resolve_chat_template(build_ctx *b)
{
	nf_chat_template t = b->recipe->serving.chat_template;
	bool has = b->tokenizer && nf_tokenizer_chat_template(b->tokenizer);
	if (t == NF_CHAT_MODEL && !has)
		return nf_error_set(NF_EINPUT, "%s: serving.chat_template is model, but the model has "
				    "no chat template", b->recipe->file);
	if (t == NF_CHAT_AUTO)
		t = has ? NF_CHAT_MODEL : NF_CHAT_PLAIN;
	b->plan->chat_template = nf_chat_template_name(t);
	/* a template that cannot render fails the build before any engine is made */
	int err = t == NF_CHAT_MODEL ? nf_chat_template_check(b->tokenizer, "chat_template") : 0;
	return err ? nf_error_wrap(err, "%s", b->model_path) : 0;
}

/* Largest calibration text read (a few thousand tokens are what is used). */
#define CALIB_TEXT_MAX ((size_t)16 << 20)

/* The recipe's calibration text, read once for every profile that needs one. */
static int load_calibration(build_ctx *b)
{
	const char *path = b->recipe->build.quant.calibration_text;
	size_t len;
	int err;
	if (!path)
		return 0;
	if ((err = nf_fs_read_file(&b->calib_text, &len, path, CALIB_TEXT_MAX)))
		return nf_error_wrap(err, "%s: build.quantization.calibration_text", b->recipe->file);
	if (memchr(b->calib_text, '\0', len))
		return nf_error_set(NF_EINPUT, "%s: build.quantization.calibration_text: %s holds a NUL byte",
				    b->recipe->file, path);
	return nf_sha256_hex(b->calib_digest, b->calib_text, len);
}


/* The checkpoint in memory, loaded the first time a stage needs the model
 * (a compile or a gate that is not cached): a rebuild that finds every
 * result in the cache never reads the weights. */
int nf_build_load_model(build_ctx *b, const char *why)
{
	nf_ckpt_format fmt = nf_fit_ckpt_format(b->recipe->model.source.format, b->model_path);
	double t0 = nf_build_now();
	int err;

	if (b->model)
		return 0;
	if (nf_build_shared_model(b->opts->shared, nf_plan_stage(b->plan, NF_STAGE_CONVERT, -1)->key,
				  &b->model, &b->model_tokenizer) == 0) {
		b->model_borrowed = 1;
		if (b->model_tokenizer && nf_tokenizer_kind(b->model_tokenizer) != NF_TOK_LLAMA2C)
			b->tokenizer = b->model_tokenizer;
		nf_log_stage_cached(b->log, "convert", "the checkpoint loaded for an earlier recipe (%s)",
				    why);
		return resolve_chat_template(b);
	}
	nf_log_stage_begin(b->log, "convert", "loading the checkpoint (%s)", why);
	err = nf_ckpt_load(&b->model, b->model_path, fmt);
	if (!err && fmt == NF_CKPT_LLAMA2C && !b->tok_path)
		err = nf_error_set(NF_EINPUT, "%s: model.tokenizer: this model needs a tokenizer",
				   b->recipe->file);
	if (!err && (fmt != NF_CKPT_LLAMA2C || b->tok_path))
		err = load_tokenizer(b, fmt);
	if (!err)
		err = resolve_chat_template(b);
	nf_plan_stage(b->plan, NF_STAGE_CONVERT, -1)->seconds += nf_build_now() - t0;
	if (!err) {
		const nf_model_config *c = &b->model->cfg;
		nf_log_stage_end(b->log, "convert", 0,
				 "dim %d, hidden %d, %d layers, %d heads (%d kv), vocab %d, context %d",
				 c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads,
				 c->vocab_size, c->max_seq_len);
	} else {
		nf_log_stage_end(b->log, "convert", err, "failed");
	}
	return err;
}


/* The convert stage: keyed by the checkpoint's and tokenizer's bytes; when
 * cached, the model is loaded later only if a stage that follows runs. */
static int stage_convert(build_ctx *b)
{
	nf_stage *st = nf_plan_stage(b->plan, NF_STAGE_CONVERT, -1);
	int err;
	if (!(st->cached = nf_build_convert_from_cache(b, st)) &&
	    ((err = nf_build_load_model(b, "convert")) || (err = nf_build_convert_to_cache(b, st))))
		return err;
	return nf_build_stage_push(b, "convert", st->key);
}

/* The compile stage's folder from the local cache, else pulled from the
 * remote one; *stage_dir NULL when neither has it (or --rebuild). */
static void lookup_compiled(build_ctx *b, const nf_profile *p, const nf_stage *st, char **stage_dir)
{
	char note[300];
	nf_build_found where = nf_build_stage_lookup(b, "compile", st->key, stage_dir);
	if (where != NF_BUILD_MISSING)
		nf_log_stage_cached(b->log, "compile", "%s (key %.12s)%s", p->name, st->key,
				    nf_build_pulled_note(b, where, note, sizeof(note)));
}

/* What compile_engine fills its stage folder from. */
typedef struct compile_fill {
	const nf_profile *p;
	const char *provenance;
} compile_fill;

/* A GPU profile's tactics timed on its very GPU when it is here, else the
 * roofline model's stand (factory/gpu_profile.h). */
static int tune_on_gpu(build_ctx *b, const char *engine_dir, const nf_profile *p)
{
	nf_gpu_tune t;
	int err = nf_gpu_profile_tune(&t, engine_dir, p, nf_cache_root(b->cache));
	if (!err && t.warning[0])
		nf_log_warn(b->log, "compile", "%s", t.warning);
	if (!err && t.measured)
		nf_log_info(b->log, "compile", "%s: tactics measured on its GPU (%d shapes timed, "
			    "%d cuBLASLt; the others from the timing cache)", p->name, t.timed,
			    t.timed_cublaslt);
	else if (!err)
		nf_log_info(b->log, "compile", "%s: tactics modelled: %s", p->name, t.why);
	return err;
}

/* The engine of c->p (and its measured tactics) into a compile stage's folder. */
static int fill_compile(build_ctx *b, const char *dir, const void *arg)
{
	const compile_fill *c = arg;
	const nf_profile *p = c->p;
	char *engine_dir = nf_path_join(dir, "engine"), *report = nf_path_join(dir, TACTICS_REPORT);
	int err = engine_dir && report ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
	nf_engine_build_opts eo = {
		.precision = p->precision,
		.tokenizer_path = b->tokenizer ? NULL : b->tok_path,
		.tokenizer = b->tokenizer,
		.profile_json = p->canonical_json,
		.provenance_json = c->provenance,
		.threads = b->opts->threads,
		/* timing CPU kernels says nothing of a GPU engine: its tactics are modelled */
		.autotune = b->recipe->build.autotune && !p->is_gpu,
		.tactics_report = report,
		.group = b->recipe->build.quant.group_size,
		.calib_text = b->calib_text,
		.kv_cache = p->kv_explicit ? nf_kv_kind_name(p->kv_cache) : NULL,
	};
	if (!err)
		err = nf_engine_build(engine_dir, b->model, &eo);
	if (!err && p->is_gpu && !(err = nf_gpu_profile_model(engine_dir, &b->model->cfg, p)) &&
	    !(err = nf_gpu_profile_kernels(engine_dir, p)))
		err = tune_on_gpu(b, engine_dir, p);
	free(engine_dir);
	free(report);
	return err;
}

/* Quantize and build the engine of p into a new stage; *stage_dir the published folder.
 * It takes the build's thread count, not the scheduler's share of the cores:
 * the engine's tactics record the threads they are for, and an engine must
 * not depend on what else ran beside its compile.  Its time is the fill's. */
static int compile_engine(build_ctx *b, const nf_profile *p, const nf_stage *st,
			  const char *provenance, char **stage_dir)
{
	compile_fill c = {p, provenance};
	int err;

	nf_log_stage_begin(b->log, "compile", "%s: quantize and autotune", p->name);
	err = nf_build_stage_store(b, st, st->key, -1, fill_compile, &c, stage_dir);
	nf_log_stage_end(b->log, "compile", err, "%s", p->name);
	return err;
}

/* Take the stage's key lock before computing it: another build computing
 * the same stage (a shared cache) is waited for, and its result used, rather
 * than computed twice.  Looked up again under the lock, since it may have
 * been published since our first look.  *stage_dir set when it was. */
static int claim_compile(build_ctx *b, const nf_profile *p, const nf_stage *st,
			 nf_cache_lock **lock, char **stage_dir)
{
	double t0 = nf_build_now();
	int err = nf_cache_stage_lock(lock, b->cache, st->key, false);
	bool waited = err == 1;
	if (waited) {
		nf_log_info(b->log, "compile", "%s: waiting for another build computing stage %.12s",
			    p->name, st->key);
		err = nf_cache_stage_lock(lock, b->cache, st->key, true);
	}
	if (!err && !b->opts->rebuild && nf_cache_stage_lookup(stage_dir, b->cache, st->key) == 0)
		nf_log_stage_cached(b->log, "compile", "%s (stage %.12s, computed by another build%s)",
				    p->name, st->key, waited ? " while we waited" : "");
	if (waited && !err)
		nf_log_debug(b->log, "compile", "%s: waited %.2f s for stage %.12s", p->name,
			     nf_build_now() - t0, st->key);
	if (err > 0) /* cannot happen when waiting; never a success code to callers */
		err = nf_error_set(NF_EINTERNAL, "stage %.12s: lock not taken", st->key);
	if (err >= 0)
		nf_error_clear();
	return err;
}

/* One profile's compile: found in a cache, or built by a scheduled job. */
typedef struct compile_job {
	build_ctx *b;
	size_t profile;
	char *provenance;
	char *stage_dir; /* the stage folder, found or made */
} compile_job;

/* Key and cache lookup of profile i's compile (serial: the remote client is one connection). */
static int compile_lookup(build_ctx *b, compile_job *j)
{
	nf_profile *p = &b->plan->profiles[j->profile];
	nf_stage *st = nf_plan_stage(b->plan, NF_STAGE_COMPILE, (int)j->profile);
	int err = nf_stage_key_compile(st->key, &j->provenance, b->recipe, p, b->source_digest,
				       b->tok_digest, b->calib_text ? b->calib_digest : NULL);
	if (!err) {
		lookup_compiled(b, p, st, &j->stage_dir);
		st->cached = j->stage_dir != NULL;
	}
	return err ? nf_error_wrap(err, "compile %s", p->name) : 0;
}

/* The scheduled work of a compile, on its own thread. */
static int compile_run(void *arg, int threads)
{
	(void)threads; /* see compile_engine */
	compile_job *j = arg;
	nf_profile *p = &j->b->plan->profiles[j->profile];
	nf_stage *st = nf_plan_stage(j->b->plan, NF_STAGE_COMPILE, (int)j->profile);
	nf_cache_lock *lock = NULL;
	double t0 = nf_build_now();
	/* under the stage's key lock: another build computing it is waited for */
	int err = claim_compile(j->b, p, st, &lock, &j->stage_dir);
	if (!err && j->stage_dir)
		st->cached = 1;
	else if (!err)
		err = compile_engine(j->b, p, st, j->provenance, &j->stage_dir);
	nf_cache_stage_unlock(lock);
	st->seconds = nf_build_now() - t0;
	return err ? nf_error_wrap(err, "compile %s", p->name) : 0;
}

/* The engine's place in the plan, and the stage pushed to --cache-to. */
static int compile_finish(build_ctx *b, const compile_job *j)
{
	nf_profile *p = &b->plan->profiles[j->profile];
	const nf_stage *st = nf_plan_stage(b->plan, NF_STAGE_COMPILE, (int)j->profile);
	int err = 0;
	/* The stage folder holds the engine one level down. */
	if (!(p->engine_dir = nf_path_join(j->stage_dir, "engine")))
		return nf_error_set(NF_ENOMEM, "out of memory");
	if (b->remote_to &&
	    !(err = nf_remote_cache_push(b->remote_to, b->cache, "compile", st->key, j->stage_dir)))
		nf_log_debug(b->log, "cache", "compile %s: stage %.12s in %s", p->name, st->key,
			     nf_remote_cache_ref(b->remote_to));
	return err ? nf_error_wrap(err, "compile %s", p->name) : 0;
}

/* Peak memory of building p's engine, beside the float32 model it reads:
 * the engine's weights in p's format and a KV cache at the model's context
 * (calibration runs the forward pass). */
static uint64_t compile_memory(const build_ctx *b, const nf_profile *p)
{
	uint64_t weights = UINT64_MAX, kv = UINT64_MAX, sum;
	/* the engine's tensors as plan's fit counts them, one float32 sequence's KV cache */
	if (nf_engine_weights_bytes(&weights, &b->model->cfg, p->precision,
				    b->recipe->build.quant.group_size) ||
	    nf_fit_kv_bytes(&kv, &b->model->cfg, NF_KV_F32, 1))
		nf_error_clear();
	return nf_u64_add(&sum, weights, kv) ? sum : UINT64_MAX;
}

/* The float32 model's bytes (convert's peak, resident while engines are built). */
static uint64_t model_memory(const build_ctx *b)
{
	size_t params = 0;
	nf_model_param_count(&params, &b->model->cfg);
	nf_error_clear();
	return (uint64_t)params * sizeof(float);
}

/* The engines not found in a cache, built as scheduled jobs: up to --jobs at
 * once, within what the float32 model leaves of --memory. */
static int compile_missing(build_ctx *b, compile_job *js, size_t n)
{
	nf_stage_job *jobs = calloc(n ? n : 1, sizeof(*jobs));
	uint64_t budget = b->opts->memory ? b->opts->memory : nf_stage_sched_available_memory();
	size_t m = 0;
	int err = jobs ? nf_build_load_model(b, "compile") : nf_error_set(NF_ENOMEM, "out of memory");

	if (!err && budget && model_memory(b) >= budget)
		err = nf_error_set(NF_EINPUT, "convert: the float32 model needs about %.1f MiB, more "
				   "than the memory budget of %.1f MiB (--memory)",
				   model_memory(b) / 1048576.0, budget / 1048576.0);
	for (size_t i = 0; !err && i < n; i++)
		if (!js[i].stage_dir)
			jobs[m++] = (nf_stage_job){.stage = "compile",
						   .name = b->plan->profiles[js[i].profile].name,
						   .memory = compile_memory(b, &b->plan->profiles[js[i].profile]),
						   .run = compile_run,
						   .arg = &js[i]};
	nf_stage_sched_opts so = {
		.max_jobs = b->opts->jobs > 0 ? b->opts->jobs : (int)sysconf(_SC_NPROCESSORS_ONLN),
		.budget = budget ? budget - model_memory(b) : 0,
		.threads = b->opts->threads,
		.log = b->log,
	};
	if (so.max_jobs < 1)
		so.max_jobs = 1;
	if (!err)
		err = nf_stage_sched_run(jobs, m, &so);
	free(jobs);
	return err;
}

/* Every profile's compile: looked up, the missing ones built (in parallel), then placed. */
static int stage_compiles(build_ctx *b)
{
	size_t n = b->plan->n_profiles, missing = 0;
	compile_job *js = calloc(n ? n : 1, sizeof(*js));
	int err = js ? 0 : nf_error_set(NF_ENOMEM, "out of memory");

	for (size_t i = 0; !err && i < n; i++) {
		js[i] = (compile_job){.b = b, .profile = i};
		if (!(err = compile_lookup(b, &js[i])))
			missing += !js[i].stage_dir;
	}
	if (!err && missing)
		err = compile_missing(b, js, n);
	for (size_t i = 0; !err && i < n; i++)
		err = compile_finish(b, &js[i]);
	for (size_t i = 0; js && i < n; i++) {
		free(js[i].provenance);
		free(js[i].stage_dir);
	}
	free(js);
	return err;
}

static int write_json_file(const char *dir, const char *name, json_t *j)
{
	char *path = nf_path_join(dir, name);
	char *text = json_dumps(j, JSON_SORT_KEYS | JSON_INDENT(2));
	int err = path && text ? nf_fs_write_atomic(path, text, strlen(text), 0644)
			       : nf_error_set(NF_ENOMEM, "out of memory");
	free(path);
	free(text);
	return err;
}

/* Engines, measured tactics and the model manifest into the output being assembled. */
static int write_outputs(build_ctx *b)
{
	char *engines = nf_path_join(b->out_tmp, "engines"), *path = NULL, *yaml = NULL;
	size_t len;
	int err = engines ? nf_fs_mkdir_p(engines, 0755) : nf_error_set(NF_ENOMEM, "out of memory");

	char *tactics = nf_path_join(b->out_tmp, "reports/tactics");
	if (!err)
		err = tactics ? nf_fs_mkdir_p(tactics, 0755) : nf_error_set(NF_ENOMEM, "out of memory");
	for (size_t i = 0; !err && i < b->plan->n_profiles; i++) {
		nf_profile *p = &b->plan->profiles[i];
		char *dst = nf_path_join(engines, p->id);
		char *measured = nf_strdup_printf("%s/../" TACTICS_REPORT, p->engine_dir);
		char *report = nf_strdup_printf("%s/%s.json", tactics, p->name);
		err = dst && measured && report ? nf_fs_copy_tree(p->engine_dir, dst)
						: nf_error_set(NF_ENOMEM, "out of memory");
		if (!err && nf_fs_exists(measured))
			err = nf_fs_copy_file(measured, report);
		free(dst);
		free(measured);
		free(report);
	}
	free(tactics);
	if (!err)
		err = nf_package_render_manifest(&yaml, &len, b->recipe, b->plan, NULL);
	if (!err && !(path = nf_path_join(b->out_tmp, "model_manifest.yaml")))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = nf_fs_write_atomic(path, yaml, len, 0644);
	free(engines);
	free(path);
	free(yaml);
	return err;
}


/* Every stage's key, once the sources are fetched: the digests they start
 * from are the sources', the files the recipe names and the runtime's. */
static int stage_keys(build_ctx *b)
{
	const char *eval = b->recipe->gates.correctness.eval_text;
	char *nimserve = nf_package_find_nimserve(b->opts->runtime_dir);
	char eval_digest[NF_SHA256_HEX_LEN + 1] = "", runtime[NF_SHA256_HEX_LEN + 1] = "";
	int err = eval ? nf_digest_path(eval_digest, eval) : 0;
	if (!err && nimserve && nf_fs_exists(nimserve))
		err = nf_digest_path(runtime, nimserve);
	nf_stage_inputs in = {
		.source_digest = b->source_digest,
		.tok_digest = b->tok_digest,
		.calib_digest = b->calib_text ? b->calib_digest : NULL,
		.eval_digest = eval_digest,
		.runtime_digest = runtime,
		.threads = b->opts->threads,
	};
	if (!err)
		err = nf_stage_graph_keys_fill(&b->keys, b->plan, b->recipe, &in);
	free(nimserve);
	return err;
}


/* The package stage, keyed by everything the image holds.  Its plan entry
 * keeps the image's digest (deploy and plan.json name the image by it). */
static int stage_package(build_ctx *b)
{
	nf_stage *st = nf_plan_stage(b->plan, NF_STAGE_PACKAGE, -1);
	double t0 = nf_build_now();
	nf_package_opts po = {
		.recipe = b->recipe,
		.plan = b->plan,
		.out_dir = b->out_tmp,
		.runtime_dir = b->opts->runtime_dir,
		.log = b->log,
	};
	const char *key = b->keys.package;
	int err;

	if ((st->cached = nf_build_package_from_cache(b, key, st->key))) {
		nf_log_stage_cached(b->log, "package", "key %.12s: image sha256:%.12s", key,
				    st->key);
		return 0;
	}
	nf_log_stage_begin(b->log, "package", "OCI image %s:%s", b->recipe->image.repository,
			   b->recipe->image.tag);
	err = nf_package_image(&po, st->key);
	st->seconds = nf_build_now() - t0;
	if (!err)
		err = nf_build_package_to_cache(b, key, st->key, st->seconds);
	nf_log_stage_end(b->log, "package", err, "%s/oci", b->out_final);
	return err;
}

/* The first profile whose gates did not all run (a GPU profile built where
 * its GPU is not), or NULL. */
static const nf_profile *first_skipped(const nf_plan *plan)
{
	for (size_t i = 0; i < plan->n_profiles; i++)
		if (plan->profiles[i].verdict == NF_VERDICT_SKIPPED)
			return &plan->profiles[i];
	return NULL;
}

/* The reason its performance gate (else any of its gates) gives. */
static const char *skipped_reason(const nf_gate_results *rs, const nf_profile *p)
{
	const char *why = "not run";
	for (size_t i = 0; i < rs->n; i++) {
		const nf_gate_result *r = rs->items[i];
		if (strcmp(r->profile_id, p->id) || r->verdict != NF_VERDICT_SKIPPED || !r->reason)
			continue;
		why = r->reason;
		if (r->kind == NF_GATE_PERFORMANCE)
			break;
	}
	return why;
}

/* After packaging: the chart's values and the plain manifests for the image
 * just made (OUT/helm, OUT/k8s), by its digest. */
static int stage_deploy(build_ctx *b, const char **note)
{
	char digest[sizeof("sha256:") + NF_SHA256_HEX_LEN];
	snprintf(digest, sizeof(digest), "sha256:%s", nf_plan_stage(b->plan, NF_STAGE_PACKAGE, -1)->key);
	return nf_deploy_write_build(b->out_tmp, b->recipe, b->plan, digest, note);
}

/* Put the assembled output in place of OUT in one step: with OUT there, the
 * two folders are exchanged (renameat2 RENAME_EXCHANGE), so at every instant
 * OUT is either the whole old output or the whole new one, and a build killed
 * in between leaves the old one under out_tmp's name for the next build's
 * sweep.  Where the file system cannot exchange, OUT is moved aside first. */
static int swap_output(build_ctx *b)
{
	char *old = NULL;
	int err = 0;
	if (!nf_fs_exists(b->out_final)) {
		if (rename(b->out_tmp, b->out_final) < 0)
			return nf_fs_write_error(b->out_final, errno);
		return 0;
	}
	if (renameat2(AT_FDCWD, b->out_tmp, AT_FDCWD, b->out_final, RENAME_EXCHANGE) == 0) {
		/* out_tmp is now the old output: the build is done whether or not it
		 * goes now (the end of nf_build_run, or the next sweep, retries) */
		(void)nf_fs_remove_tree(b->out_tmp);
		nf_error_clear();
		return 0;
	}
	if (errno != EINVAL && errno != ENOSYS)
		return nf_error_set(NF_EIO, "%s: %s", b->out_final, strerror(errno));
	if (!(old = nf_strdup_printf("%s.old-%ld", b->out_final, (long)getpid())))
		return nf_error_set(NF_ENOMEM, "out of memory");
	if (rename(b->out_final, old) < 0)
		err = nf_error_set(NF_EIO, "%s: cannot move the previous output aside: %s",
				   b->out_final, strerror(errno));
	if (!err && rename(b->out_tmp, b->out_final) < 0) {
		err = nf_error_set(NF_EIO, "%s: %s", b->out_final, strerror(errno));
		rename(old, b->out_final);
	}
	if (!err)
		nf_fs_remove_tree(old);
	free(old);
	return err;
}

static int prepare_output(build_ctx *b)
{
	const char *out = b->opts->out_dir;
	char *parent;
	int err;

	if (b->opts->out_parent)
		b->out_final = nf_strdup_printf("%s/%s", b->opts->out_parent, b->recipe->model.name);
	else
		b->out_final = out ? strdup(out) : nf_strdup_printf("out/%s", b->recipe->model.name);
	if (!b->out_final)
		return nf_error_set(NF_ENOMEM, "out of memory");
	while (strlen(b->out_final) > 1 && b->out_final[strlen(b->out_final) - 1] == '/')
		b->out_final[strlen(b->out_final) - 1] = '\0';
	if (b->opts->shared && (err = nf_build_shared_claim_output(b->opts->shared, b->out_final)))
		return err;
	b->out_tmp = nf_strdup_printf("%s.partial-%ld", b->out_final, (long)getpid());
	parent = strdup(b->out_final);
	if (!b->out_tmp || !parent) {
		free(parent);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	char *slash = strrchr(parent, '/');
	err = 0;
	if (slash && slash != parent) {
		*slash = '\0';
		err = nf_fs_mkdir_p(parent, 0755);
	}
	free(parent);
	if (!err)
		err = nf_fs_remove_tree(b->out_tmp);
	if (!err)
		err = nf_fs_mkdir_p(b->out_tmp, 0755);
	if (!err && (err = nf_fs_lock(&b->out_tmp_lock, b->out_tmp, LOCK_EX, false, false)) == 1)
		err = nf_error_set(NF_EINTERNAL, "%s: locked by another process", b->out_tmp);
	if (!err)
		err = nf_output_sweep(b->out_final);
	return err;
}

/* --cache-from and --cache-to: one client each (they may name the same repository). */
static int open_remote_caches(build_ctx *b)
{
	const nf_build_opts *o = b->opts;
	int err = 0;
	if (o->cache_from)
		err = nf_remote_cache_open(&b->remote_from, o->cache_from, o->cache_insecure, b->log);
	if (!err && o->cache_to)
		err = nf_remote_cache_open(&b->remote_to, o->cache_to, o->cache_insecure, b->log);
	/* Before any stage: a cache we cannot pull from only costs time, one we
	 * were asked to push to and cannot is an error now, not after a compile. */
	if (!err && b->remote_from && nf_remote_cache_ping(b->remote_from))
		nf_log_warn(b->log, "cache", "%s; nothing will be pulled", nf_error_last());
	if (!err && b->remote_to)
		err = nf_remote_cache_ping(b->remote_to);
	return err;
}

/* One line on what the remote caches did, for the build log (and the tests). */
static void log_remote_caches(build_ctx *b)
{
	if (b->remote_from) {
		const nf_remote_cache_stats *s = nf_remote_cache_stats_of(b->remote_from);
		nf_log_info(b->log, "cache", "from %s: %u pulled, %u missing, %u refused",
			    nf_remote_cache_ref(b->remote_from), s->pulled, s->misses, s->refused);
	}
	if (b->remote_to) {
		const nf_remote_cache_stats *s = nf_remote_cache_stats_of(b->remote_to);
		nf_log_info(b->log, "cache", "to %s: %u pushed, %u already there",
			    nf_remote_cache_ref(b->remote_to), s->pushed, s->present);
	}
}

/* The recipe, its plan (narrowed to --profile), the dropped points warned. */
static int phase_plan(build_ctx *b)
{
	const nf_build_opts *o = b->opts;
	nf_log_stage_begin(b->log, "recipe", "%s", o->recipe_path);
	int err = nf_recipe_load(&b->recipe, o->recipe_path);
	if (!err)
		err = nf_plan_make(&b->plan, b->recipe);
	nf_log_stage_end(b->log, "recipe", err, "%s: %zu profiles, %zu dropped, recipe sha256:%.12s",
			 err ? o->recipe_path : b->recipe->model.name, b->plan ? b->plan->n_profiles : 0,
			 b->plan ? b->plan->n_dropped : 0, b->plan ? b->plan->recipe_digest : "");
	if (!err && o->profile)
		err = nf_plan_select_profile(b->plan, o->profile);
	for (size_t i = 0; !err && i < b->plan->n_dropped; i++)
		nf_log_warn(b->log, "plan", "dropped %s %s tp%d: %s", b->plan->dropped[i].device,
			    b->plan->dropped[i].precision, b->plan->dropped[i].tensor_parallel,
			    b->plan->dropped[i].reason);
	return err;
}

/* The local cache, the remote ones, OUT being assembled. */
static int phase_open(build_ctx *b, char **cache_root)
{
	int err = 0;
	if (b->opts->cache_dir)
		*cache_root = strdup(b->opts->cache_dir);
	else
		err = nf_cache_default_root(cache_root);
	if (!err && !*cache_root)
		err = nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = nf_cache_open(&b->cache, *cache_root);
	if (!err)
		err = open_remote_caches(b);
	return err ? err : prepare_output(b);
}

/* Every stage up to the gates, each found in a cache or run. */
static int phase_stages(build_ctx *b)
{
	int err = stage_fetch(b);
	if (!err)
		err = stage_fit(b);
	if (!err)
		err = load_calibration(b);
	if (!err)
		err = stage_keys(b);
	if (!err)
		err = stage_convert(b);
	if (!err)
		err = stage_compiles(b);
	return err ? err : nf_build_stage_gates(b);
}

/* plan.json, last, so that it holds every stage's key and time, package included. */
static int write_plan(build_ctx *b)
{
	json_t *plan = NULL;
	int err = nf_plan_to_json(&plan, b->plan);
	if (!err && json_object_set_new(plan, "verdict", json_string(nf_verdict_name(
								  nf_gate_results_verdict(&b->results)))))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = write_json_file(b->out_tmp, "plan.json", plan);
	json_decref(plan);
	return err;
}

/* Reports, engines, the image (unless a gate failed, was skipped, or one
 * profile was asked for), deployment files, plan.json, OUT swapped in; the
 * error a failed or skipped gate makes, once OUT holds its reports. */
static int phase_outputs(build_ctx *b, const char **deploy_note)
{
	const nf_build_opts *o = b->opts;
	int gate_failed = nf_gate_results_verdict(&b->results) == NF_VERDICT_FAILED;
	const nf_profile *skipped = first_skipped(b->plan);
	nf_report_meta meta = {.model = b->recipe->model.name, .recipe = b->plan->recipe_digest,
			       .skipped_gates = skipped != NULL,
			       .allow_skipped_gates = o->allow_skipped_gates};
	/* --profile makes no image: nothing to refuse */
	int refused = !gate_failed && skipped && !o->allow_skipped_gates && !o->profile;
	int image = !gate_failed && !refused && !o->profile;
	if (nf_log_get_format(b->log) != NF_LOG_FMT_JSON) /* keep JSON-lines logs pure */
		nf_report_print_table(stderr, &b->results);
	int err = nf_report_write(b->out_tmp, &b->results, &meta);
	if (!err)
		err = write_outputs(b);
	if (!err && image)
		err = stage_package(b);
	if (!err && image)
		err = stage_deploy(b, deploy_note);
	if (!err)
		err = write_plan(b);
	if (!err)
		err = swap_output(b);
	if (!err && gate_failed)
		err = nf_error_set(NF_EGATE, "a gate failed; reports in %s/reports; no image was made",
				   b->out_final);
	if (!err && refused)
		err = nf_error_set(NF_EGATE,
				   "the gates of %s were skipped (%s); no image was made: "
				   "--allow-skipped-gates packages profiles whose gates did not run",
				   skipped->name, skipped_reason(&b->results, skipped));
	return err;
}

/* The build's last line: what it made and where. */
static void log_result(build_ctx *b, double t0, const char *deploy_note)
{
	if (b->opts->profile)
		nf_log_info(b->log, "build", "built and gated %s in %.1f s: reports in %s/reports; no "
			    "image for one profile", b->opts->profile, nf_build_now() - t0, b->out_final);
	else
		nf_log_info(b->log, "build", "built %s in %.1f s: image %s/oci (%s:%s)%s%s",
			    b->recipe->model.name, nf_build_now() - t0, b->out_final,
			    b->recipe->image.repository, b->recipe->image.tag,
			    deploy_note ? "; " : "", deploy_note ? deploy_note : "");
}

/* Everything the build holds, OUT's temporary folder removed; the model
 * handed to the next recipe of a shared build. */
static void release(build_ctx *b)
{
	if (b->out_tmp && nf_fs_exists(b->out_tmp))
		nf_fs_remove_tree(b->out_tmp);
	if (b->out_tmp_lock >= 0)
		close(b->out_tmp_lock);
	nf_gate_results_release(&b->results);
	nf_gate_ref_free(b->ref);
	nf_gate_result_free(b->perf_fp32);
	if (b->gate_tmp)
		nf_fs_remove_tree(b->gate_tmp);
	free(b->gate_tmp);
	free(b->gated_now);
	if (b->model && !b->model_borrowed && b->opts->shared) /* for the next recipe; freed by shared */
		nf_build_shared_add_model(b->opts->shared,
					  nf_plan_stage(b->plan, NF_STAGE_CONVERT, -1)->key, b->model,
					  b->model_tokenizer);
	else if (!b->model_borrowed) {
		nf_model_free(b->model);
		nf_tokenizer_free(b->model_tokenizer); /* b->tokenizer is the same one, or NULL */
	}
	free(b->calib_text);
	free(b->model_path);
	free(b->tok_path);
	free(b->out_final);
	free(b->out_tmp);
	nf_cache_free(b->cache);
	nf_remote_cache_free(b->remote_from);
	nf_remote_cache_free(b->remote_to);
	nf_plan_free(b->plan);
	nf_recipe_free(b->recipe);
}

int nf_build_run(const nf_build_opts *o)
{
	build_ctx b = {.opts = o, .log = o->log ? o->log : nf_log_default(), .out_tmp_lock = -1};
	char *cache_root = NULL;
	double t0 = nf_build_now();
	const char *deploy_note = NULL;
	int err;

	nf_gate_results_init(&b.results);
	err = phase_plan(&b);
	if (!err)
		err = phase_open(&b, &cache_root);
	if (!err)
		err = phase_stages(&b);
	if (!err)
		err = phase_outputs(&b, &deploy_note);
	if (b.out_tmp && nf_fs_exists(b.out_tmp))
		nf_fs_remove_tree(b.out_tmp);
	log_remote_caches(&b);
	if (!err)
		log_result(&b, t0, deploy_note);
	release(&b);
	free(cache_root);
	return err;
}
