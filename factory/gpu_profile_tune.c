/*
 * gpu_profile_tune.c - a GPU profile compiled where its very GPU is
 * (gpu_profile.h, nf_gpu_profile_tune): the built engine opened on that
 * device, its matrix products timed through the timing cache kept in
 * nimfactory's cache folder, and the winners written into the engine as
 * cuda_tactics.json, which every backend opening the engine launches.
 */
#include "factory/gpu_profile.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/backend.h"
#include "engine/cuda/cubin.h"
#include "engine/cuda/cublaslt.h"
#include "engine/cuda/driver.h"
#include "engine/cuda/timing_cache.h"
#include "engine/engine.h"
#include "engine/sku.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/banned.h"

/* Warm-up launches and timed runs of each candidate: enough runs for a
 * median that a stray slow one does not move. */
#define TUNE_WARMUP 10
#define TUNE_RUNS 20
/* Sequence slots of the tuning backend: tuning covers every batch bucket
 * up to the prefill pass whatever the slots, so one KV cache (at the
 * model's whole context) is all the memory it needs beyond the weights. */
#define TUNE_SLOTS 1

int nf_gpu_driver_is_fake(void)
{
	const char *lib = getenv("NF_LIBCUDA");
	void *h;
	int fake;
	if (!lib || !*lib || !(h = dlopen(lib, RTLD_NOW | RTLD_LOCAL)))
		return 0;
	fake = dlsym(h, "nf_fake_cuda_driver") != NULL;
	dlclose(h);
	return fake;
}

int nf_gpu_profile_device(nf_cuda_device *dev, const nf_profile *p, char *why, size_t len)
{
	const nf_sku *sku = nf_sku_find(p->device);
	int exact = 0;
	if (!sku || nf_cuda_find_device(dev, &exact, sku) != 0) {
		snprintf(why, len, "no %s here", p->device);
		return 0;
	}
	if (!exact) {
		snprintf(why, len, "a compatible GPU %d (%s) is here, not a %s", dev->ordinal, dev->name,
			 p->device);
		return 0;
	}
	snprintf(why, len, "its GPU %d (%s) is here", dev->ordinal, dev->name);
	return 1;
}

/* What a tuning holds open, released together. */
typedef struct tune_run {
	nf_engine *e;
	nf_cuda_driver *d;
	nf_cuda_backend *b;
	nf_timing_cache *cache;
	char *cache_path;
} tune_run;

static void tune_run_close(tune_run *t)
{
	nf_timing_cache_free(t->cache);
	nf_cuda_backend_free(t->b);
	nf_cuda_driver_free(t->d);
	nf_engine_free(t->e);
	free(t->cache_path);
}

/* The engine dir on device dev, as serving opens it. */
static int open_backend(tune_run *t, const char *dir, const nf_sku *sku, const nf_cuda_device *dev)
{
	nf_cuda_backend_opts o = {0};
	int err;
	if ((err = nf_engine_open(&t->e, dir, 1)) || (err = nf_cuda_driver_open(&t->d)))
		return err;
	o.ordinal = dev->ordinal;
	o.engine_dir = dir;
	o.arch = sku->cuda_arch;
	o.max_batch = TUNE_SLOTS;
	o.kv = nf_engine_kv_cache(t->e);
	return nf_cuda_backend_new(&t->b, t->d, nf_engine_config(t->e), nf_engine_fwd_weights(t->e), &o);
}

/* The timing cache of this SKU, driver and cubin from
 * <cache_root>/cuda-timing/, one file per key so that builds of other
 * kernels or drivers do not overwrite each other's. */
static int open_cache(tune_run *t, const char *dir, const nf_sku *sku, const char *cache_root,
		      char *warning, size_t wlen)
{
	nf_tc_key key = {{0}, nf_cuda_driver_version(t->d), {0}};
	char *cubin = nf_strdup_printf("%s/cuda/%s.cubin", dir, sku->cuda_arch);
	char *folder = nf_path_join(cache_root, "cuda-timing");
	int err = cubin && folder ? 0 : nf_error_set(NF_ENOMEM, "out of memory");

	snprintf(key.sku, sizeof key.sku, "%s", sku->name);
	if (!err && (err = nf_sha256_file_hex(key.cubin_sha256, cubin)))
		err = nf_error_wrap(err, "the engine's cubin");
	if (!err)
		err = nf_fs_mkdir_p(folder, 0755);
	if (!err && !(t->cache_path = nf_strdup_printf("%s/%s-%d-%.16s.json", folder, key.sku,
						       key.driver, key.cubin_sha256)))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = nf_timing_cache_load(&t->cache, t->cache_path, &key, warning, wlen);
	free(cubin);
	free(folder);
	return err;
}

/* cuBLASLt's fastest algorithm per prefill shape, the figure the GEMMs are
 * held to, when the library loads here (its absence costs nothing). */
static int time_cublaslt(tune_run *t, int *timed)
{
	nf_cublaslt *lt = NULL;
	int err;
	*timed = 0;
	if (nf_cublaslt_open(&lt) != 0)
		return 0;
	err = nf_cuda_backend_tune_cublaslt(t->b, t->cache, lt, TUNE_WARMUP, TUNE_RUNS, timed);
	nf_cublaslt_free(lt);
	return err;
}

/* The winners into the engine, and config.json saying where they came from. */
static int store_tactics(const tune_run *t, const char *dir)
{
	char *text = NULL;
	int err = nf_cuda_backend_tactics_json(&text, t->b, t->cache);
	if (!err)
		err = nf_engine_part_add(dir, NF_CUDA_TACTICS_FILE, text, strlen(text));
	free(text);
	if (!err)
		err = nf_engine_config_set(dir, "cuda_tactics",
					   json_pack("{s:s, s:s}", "source", "measured", "file",
						     NF_CUDA_TACTICS_FILE));
	return err;
}

static int tune_here(nf_gpu_tune *out, const char *dir, const nf_profile *p, const nf_sku *sku,
		     const nf_cuda_device *dev, const char *cache_root)
{
	tune_run t = {0};
	int err;

	if ((err = open_backend(&t, dir, sku, dev)) ||
	    (err = open_cache(&t, dir, sku, cache_root, out->warning, sizeof out->warning)) ||
	    (err = nf_cuda_backend_tune(t.b, t.cache, TUNE_WARMUP, TUNE_RUNS, &out->timed)) ||
	    (err = time_cublaslt(&t, &out->timed_cublaslt)) ||
	    (err = nf_timing_cache_save(t.cache, t.cache_path)))
		goto done;
	err = store_tactics(&t, dir);
	out->measured = !err;
done:
	tune_run_close(&t);
	return err ? nf_error_wrap(err, "%s: tactics on %s", p->name, dev->name) : 0;
}

/* Why nothing is timed for p here (into why), or 0 when its very GPU is
 * here and the engine has the cubin to time on it. */
static int why_modelled(char *why, size_t len, nf_cuda_device *dev, const char *dir,
			const nf_profile *p, const nf_sku *sku)
{
	char *cubin;
	int have;
	if (!nf_gpu_profile_device(dev, p, why, len))
		return 1;
	if (!(cubin = nf_strdup_printf("%s/cuda/%s.cubin", dir, sku->cuda_arch)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	have = nf_fs_exists(cubin);
	free(cubin);
	if (!have)
		snprintf(why, len, "its GPU %d (%s) is here, but the engine has no %s cubin to time "
			 "(NF_CUDA_KERNELS_DIR names the kernels `make cuda` builds)", dev->ordinal,
			 dev->name, sku->cuda_arch);
	return !have;
}

int nf_gpu_profile_tune(nf_gpu_tune *out, const char *dir, const nf_profile *p,
			const char *cache_root)
{
	const nf_sku *sku = nf_sku_find(p->device);
	nf_cuda_device dev;
	int modelled;

	memset(out, 0, sizeof *out);
	if (!sku)
		return nf_error_set(NF_EINPUT, "%s: %s is no device of the table", p->name, p->device);
	if ((modelled = why_modelled(out->why, sizeof out->why, &dev, dir, p, sku)) < 0)
		return modelled;
	if (modelled)
		return nf_engine_config_set(dir, "cuda_tactics",
					    json_pack("{s:s, s:s}", "source", "modelled", "reason",
						      out->why));
	return tune_here(out, dir, p, sku, &dev, cache_root);
}
