/*
 * test_gpu_profile_tune.c - a GPU profile's compile where its GPU is, on
 * the fake driver (tests/fakes/libcuda.c, which runs no kernel): the
 * tuner runs for the profile's very SKU and not for a merely compatible
 * GPU or none; its winners become the engine's cuda_tactics.json, marked
 * measured and listed in config.json; a second compile reuses the timing
 * cache and times nothing; a backend opening the engine launches the
 * file's choices; a damaged file is refused in one line naming it; and
 * the gates stay skipped, saying the driver is the fake; a GPU performance
 * gate's decode is put as a fraction of the HBM roofline.  Kernels and
 * timings on a real GPU are tests/gpu/run.sh's.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/cuda/backend.h"
#include "engine/cuda/cubin.h"
#include "engine/engine.h"
#include "factory/gates.h"
#include "factory/gpu_profile.h"
#include "util/error.h"
#include "util/fs.h"
#include "tests/fakes/fake_cuda.h"
#include "tests/tap.h"

static char log_path[1100];

/* The fake driver's log so far (caller frees); the log emptied. */
static char *take_log(void) { return take_log_at(log_path); }

/* A stories260K int8-wo engine of an h100-sxm profile, with a fake cubin. */
static int build_engine(const char *dir)
{
	return fake_sm90_engine(dir, NF_PREC_INT8_WO, "{\"device\":\"h100-sxm\",\"precision\":\"int8-wo\"}");
}

static char *read_text(const char *path)
{
	char *text = NULL;
	size_t len;
	return nf_fs_read_file(&text, &len, path, 1u << 24) == 0 ? text : NULL;
}

static json_t *load_json(const char *dir, const char *name)
{
	char path[1200];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return json_load_file(path, 0, NULL);
}

/* A JSON string's text, "" when it is none. */
static const char *str_of(const json_t *j)
{
	const char *s = json_string_value(j);
	return s ? s : "";
}

static nf_profile h100_profile(void)
{
	nf_profile p = {0};
	snprintf(p.name, sizeof p.name, "h100-sxm-int8-wo-tp1");
	snprintf(p.device, sizeof p.device, "h100-sxm");
	snprintf(p.arch, sizeof p.arch, "sm_90");
	p.is_gpu = 1;
	p.precision = NF_PREC_INT8_WO;
	p.tensor_parallel = 1;
	return p;
}

/* Where no GPU, or a merely compatible one, is: nothing timed, no file,
 * config.json says modelled and why. */
static void test_not_here(const char *dir, const char *cache, const char *var, const char *value,
			  const char *says)
{
	nf_profile p = h100_profile();
	nf_gpu_tune t;
	char path[1200];
	json_t *cfg;

	setenv(var, value, 1);
	if (!strcmp(var, "FAKE_CUDA_NAME"))
		setenv("FAKE_CUDA_MEM_GIB", "141", 1); /* an H200 */
	free(take_log());
	is_int(nf_gpu_profile_tune(&t, dir, &p, cache), 0, "%s=%s: the compile goes on", var, value);
	char *log = take_log();
	ok(!t.measured && t.timed == 0 && strstr(t.why, says) && count_prefix(log, "alloc") == 0 &&
		   count_prefix(log, "launch") == 0,
	   "%s=%s: the tuner does not run (%s)", var, value, t.why);
	free(log);
	snprintf(path, sizeof path, "%s/%s", dir, NF_CUDA_TACTICS_FILE);
	cfg = load_json(dir, "config.json");
	json_t *ct = json_object_get(cfg, "cuda_tactics");
	ok(!nf_fs_exists(path) &&
		   !strcmp(str_of(json_object_get(ct, "source")), "modelled") &&
		   strstr(str_of(json_object_get(ct, "reason")), says),
	   "no tactics file, and config.json says modelled and why");
	json_decref(cfg);
	unsetenv(var);
	unsetenv("FAKE_CUDA_MEM_GIB");
}

/* Every tactic of the file says measured, with a median; the file is in
 * config.json's files and the engine verifies. */
static void check_measured(const char *dir)
{
	json_t *tf = load_json(dir, NF_CUDA_TACTICS_FILE), *cfg = load_json(dir, "config.json"), *o;
	json_t *list = json_object_get(tf, "tactics");
	size_t i, bad = 0;
	nf_engine *e = NULL;

	json_array_foreach(list, i, o) {
		json_t *cand = json_object_get(o, "candidates_us");
		json_t *won = json_object_get(cand, str_of(json_object_get(o, "kernel")));
		bad += strcmp(str_of(json_object_get(o, "source")), "measured") != 0 ||
		       json_number_value(json_object_get(o, "median_us")) <= 0 ||
		       json_object_size(cand) < 3 ||
		       json_number_value(won) != json_number_value(json_object_get(o, "median_us"));
	}
	ok(json_array_size(list) > 0 && bad == 0,
	   "%zu tactics, every one source measured with its median and its candidates' (the winner's "
	   "among them)", json_array_size(list));
	ok(json_object_get(json_object_get(cfg, "files"), NF_CUDA_TACTICS_FILE) != NULL &&
		   !strcmp(str_of(json_object_get(json_object_get(cfg, "cuda_tactics"),
							     "source")),
			   "measured"),
	   "config.json lists %s and says measured", NF_CUDA_TACTICS_FILE);
	ok(nf_engine_open(&e, dir, 1) == 0 && nf_engine_verify(e) == 0, "the engine's digests cover it");
	nf_engine_free(e);
	json_decref(tf);
	json_decref(cfg);
}

static void test_measured(const char *dir, const char *dir2, const char *cache)
{
	nf_profile p = h100_profile();
	nf_gpu_tune t;
	char *first, *second, path[1200];

	if (nf_gpu_profile_tune(&t, dir, &p, cache) != 0)
		diag("tune: %s", nf_error_last());
	ok(t.measured && t.timed > 0, "the exact SKU: tuned, %d shapes timed", t.timed);
	check_measured(dir);
	snprintf(path, sizeof path, "%s/cuda-timing", cache);
	ok(nf_fs_is_dir(path), "the timing cache is in the cache folder's cuda-timing/");
	/* another engine of the same model, SKU, driver and cubin */
	if (nf_gpu_profile_tune(&t, dir2, &p, cache) != 0)
		diag("second tune: %s", nf_error_last());
	ok(t.measured && t.timed == 0, "a second compile reuses the timing cache: %d shapes timed",
	   t.timed);
	snprintf(path, sizeof path, "%s/%s", dir, NF_CUDA_TACTICS_FILE);
	first = read_text(path);
	snprintf(path, sizeof path, "%s/%s", dir2, NF_CUDA_TACTICS_FILE);
	second = read_text(path);
	ok(first && second && !strcmp(first, second), "and writes the same tactics");
	free(first);
	free(second);
}

/* Every batch-1 tactic of dir's file rewritten to launch kernel. */
static int force_kernel(const char *dir, const char *kernel)
{
	char path[1200];
	json_t *tf = load_json(dir, NF_CUDA_TACTICS_FILE), *o;
	size_t i;
	int err;
	json_array_foreach(json_object_get(tf, "tactics"), i, o)
		if (json_integer_value(json_object_get(o, "batch")) == 1)
			json_object_set_new(o, "kernel", json_string(kernel));
	snprintf(path, sizeof path, "%s/%s", dir, NF_CUDA_TACTICS_FILE);
	err = json_dump_file(tf, path, 0);
	json_decref(tf);
	return err;
}

/* The decode step nf_engine_use_gpu runs: its GEMV launches of kernel. */
static size_t launches_with(const char *dir, const char *kernel)
{
	nf_engine *e = NULL;
	char prefix[128];
	size_t n = 0;
	free(take_log());
	if (nf_engine_open(&e, dir, 1) == 0 && nf_engine_use_gpu(e, 1) == 0) {
		char *log = take_log();
		snprintf(prefix, sizeof prefix, "launch %s ", kernel);
		n = count_prefix(log, prefix);
		free(log);
	}
	nf_engine_free(e);
	return n;
}

static void test_backend_takes_file(const char *dir)
{
	/* a decode step: 7 products a layer and the classifier */
	nf_engine *e = NULL;
	size_t want = 0;
	if (nf_engine_open(&e, dir, 1) == 0)
		want = 7 * (size_t)nf_engine_config(e)->n_layers + 1;
	nf_engine_free(e);
	/* one of the two differs from the model's choice, so the file decides */
	ok(force_kernel(dir, "nf_cu_gemv_sk_q8") == 0 && launches_with(dir, "nf_cu_gemv_sk_q8") == want,
	   "a file of split-K GEMVs: every product of the step launches nf_cu_gemv_sk_q8 (%zu)", want);
	ok(force_kernel(dir, "nf_cu_gemv_q8") == 0 && launches_with(dir, "nf_cu_gemv_q8") == want,
	   "a file of plain GEMVs: every product launches nf_cu_gemv_q8");
}

static void expect_refused(const char *dir, const char *text, const char *says)
{
	char path[1200];
	nf_engine *e = NULL;
	int err = 0;
	snprintf(path, sizeof path, "%s/%s", dir, NF_CUDA_TACTICS_FILE);
	if (nf_fs_write_atomic(path, text, strlen(text), 0644) || nf_engine_open(&e, dir, 1))
		ok(0, "write %s: %s", path, nf_error_last());
	else
		err = nf_engine_use_gpu(e, 1);
	ok(err != 0 && strstr(nf_error_last(), path) && strstr(nf_error_last(), says) &&
		   !strchr(nf_error_last(), '\n') && strcmp(nf_engine_kernel_name(e), "cuda") != 0,
	   "%s: refused in one line naming the file, the engine on the CPU: %s", says, nf_error_last());
	nf_engine_free(e);
}

static void test_refused(const char *dir)
{
	expect_refused(dir, "{\"format\": \"nimfactory-cuda-tactics\", \"version\": 1, \"tac", "line");
	expect_refused(dir,
		       "{\"format\": \"nimfactory-cuda-tactics\", \"version\": 1, \"tactics\": [{\"source\": "
		       "\"measured\", \"family\": \"gemv_q8\", \"rows\": 99999, \"cols\": 64, \"batch\": 1, "
		       "\"kernel\": \"nf_cu_gemv_q8\", \"median_us\": 3}]}",
		       "does not have");
	expect_refused(dir,
		       "{\"format\": \"nimfactory-cuda-tactics\", \"version\": 1, \"tactics\": [{\"source\": "
		       "\"modelled\", \"family\": \"gemv_q8\", \"rows\": 64, \"cols\": 64, \"batch\": 1, "
		       "\"kernel\": \"nf_cu_gemv_q8\", \"median_us\": 3}]}",
		       "damaged");
}

/* Under the fake driver the very SKU is "here", but no gate runs on it. */
static void test_gates_skipped(const char *dir)
{
	nf_profile p = h100_profile();
	nf_gate_result *r = NULL;
	nf_gate_correctness_opts co = {0};
	nf_gate_perf_opts po = {0};
	char why[256];

	po.max_tokens = 4;
	ok(!nf_gpu_profile_gates_here(&p, why, sizeof why) && strstr(why, "fake"),
	   "the fake driver is no GPU to gate on: %s", why);
	int err = nf_gate_correctness(&r, &p, dir, &co, NULL);
	ok(!err && r->verdict == NF_VERDICT_SKIPPED && strstr(r->reason, "fake"),
	   "the correctness gate is skipped: %s", r ? r->reason : nf_error_last());
	nf_gate_result_free(r);
	r = NULL;
	err = nf_gate_performance(&r, &p, dir, &po, NULL);
	ok(!err && r->verdict == NF_VERDICT_SKIPPED && strstr(r->reason, "fake"),
	   "the performance gate is skipped: %s", r ? r->reason : nf_error_last());
	nf_gate_result_free(r);
}

/* After a performance gate on the GPU: the measured decode as a fraction
 * of the SKU's HBM roofline, beside roofline.json's model. */
static void test_perf_roofline(const char *dir)
{
	nf_profile p = h100_profile();
	nf_engine *e = NULL;
	nf_gate_result *r = NULL;
	json_t *rl = NULL, *b1;
	double want = -1, got = -1, modelled = -1;

	if (nf_engine_open(&e, dir, 1) || nf_gpu_profile_model(dir, nf_engine_config(e), &p) ||
	    nf_gate_result_new(&r, &p, NF_GATE_PERFORMANCE) ||
	    !(r->metrics = calloc(1, sizeof *r->metrics))) {
		ok(0, "a roofline.json and a gate result: %s", nf_error_last());
		goto done;
	}
	nf_gate_metric_set(&r->metrics[0], "decode_tokens_per_s", "tokens/s", 5000, NF_GATE_CMP_NONE, 0);
	r->n_metrics = 1;
	rl = load_json(dir, NF_GPU_ROOFLINE_FILE);
	b1 = json_array_get(json_object_get(rl, "decode"), 0);
	want = 5000 * json_number_value(json_object_get(b1, "bytes")) /
	       (json_number_value(json_object_get(rl, "mem_bw_gbs")) * 1e9);
	is_int(nf_gpu_profile_perf_roofline(r, dir), 0, "add the roofline figures");
	for (size_t i = 0; i < r->n_metrics; i++) {
		if (!strcmp(r->metrics[i].name, "hbm_fraction"))
			got = r->metrics[i].value;
		if (!strcmp(r->metrics[i].name, "modelled_hbm_fraction"))
			modelled = r->metrics[i].value;
	}
	ok(r->n_metrics == 4 && want > 0 && got > want * 0.999 && got < want * 1.001,
	   "5000 tok/s is %.4g of the HBM roofline (weights and cache a step over the bandwidth)", got);
	ok(modelled == json_number_value(json_object_get(b1, "hbm_fraction")),
	   "beside the model's %.4g", modelled);
done:
	json_decref(rl);
	nf_gate_result_free(r);
	nf_engine_free(e);
}

int main(void)
{
	const char *build = tap_env("NF_BUILD", "build");
	char root[1024], dir[1100], dir2[1100], cache[1100], fake[1024], cmd[1200];

	snprintf(root, sizeof root, "%s/tmp/test_gpu_profile_tune.%d", build, (int)getpid());
	snprintf(dir, sizeof dir, "%s/engine", root);
	snprintf(dir2, sizeof dir2, "%s/engine2", root);
	snprintf(cache, sizeof cache, "%s/cache", root);
	snprintf(log_path, sizeof log_path, "%s/fake.log", root);
	snprintf(fake, sizeof fake, "%s/tests/fakes/libcuda.so.1", build);
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", cache);
	if (system(cmd) != 0)
		return 1;
	if (build_engine(dir) || build_engine(dir2)) {
		ok(0, "build two stories260K h100-sxm engines: %s", nf_error_last());
		return done_testing();
	}
	setenv("NF_WEIGHTS_TILE", "0", 1);
	setenv("NF_LIBCUDA", fake, 1);
	/* no cuBLASLt: a real one on the fake driver would only add noise
	 * (and an int8-wo engine has no cuBLASLt candidate) */
	setenv("NF_LIBCUBLASLT", "/nonexistent/libcublasLt.so.13", 1);
	setenv("FAKE_CUDA_LOG", log_path, 1);
	test_not_here(dir, cache, "FAKE_CUDA_COUNT", "0", "no h100-sxm here");
	test_not_here(dir, cache, "FAKE_CUDA_NAME", "NVIDIA H200", "compatible");
	test_measured(dir, dir2, cache);
	test_backend_takes_file(dir);
	test_refused(dir);
	test_gates_skipped(dir);
	test_perf_roofline(dir2);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	if (system(cmd) != 0)
		ok(0, "remove %s", root);
	return done_testing();
}
