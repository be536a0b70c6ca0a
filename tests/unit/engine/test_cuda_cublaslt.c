/*
 * test_cuda_cublaslt.c - cuBLASLt as a reference candidate of the prefill
 * GEMMs, against the fake library (tests/fakes/libcublasLt.c) and the fake
 * driver, which log every call: no library is one line; the description
 * of the TN product (types, layouts, leading dimensions) and the
 * heuristic's algorithms; a refusal is one line; the tactics time each
 * algorithm of each fp16 shape and prefill batch after warm-up and keep the
 * fastest in the timing cache, under its own family; and the decision of
 * docs/cuda-kernels.md: cuBLASLt is never the kernel an engine runs, even
 * when it timed fastest.  Nothing runs on a GPU here (tests/gpu/ does).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/cuda/backend.h"
#include "engine/cuda/cubin.h"
#include "engine/cuda/cublaslt.h"
#include "engine/cuda/timing_cache.h"
#include "engine/engine.h"
#include "util/error.h"
#include "util/fs.h"
#include "tests/fakes/fake_cuda.h"
#include "tests/tap.h"

static char log_path[1100];

/* The fake driver's log so far (caller frees); the log emptied. */
static char *take_log(void) { return take_log_at(log_path); }

/* Whether the lines appear in this order (others between them allowed). */
static int in_order(const char *log, const char *const *lines, size_t n)
{
	const char *at = log;
	for (size_t i = 0; i < n; i++) {
		const char *p = strstr(at, lines[i]);
		if (!p)
			return 0;
		at = p + strlen(lines[i]);
	}
	return 1;
}

static void test_plan(const nf_cublaslt *lt)
{
	nf_lt_plan p;
	char *log;
	free(take_log());
	is_int(nf_lt_plan_init(&p, lt, NF_QUANT_F16, 64, 172, 4, 1 << 20), 0,
	       "describe (64, 172) x 4 fp16: %s", nf_error_last());
	is_int(p.n_algos, 3, "the heuristic's 3 algorithms");
	ok(p.algo[2].workspace == 2048 && p.algo[2].data[0] == 2, "each with its data and workspace");
	nf_lt_plan_release(&p);
	log = take_log();
	static const char *const want[] = {
		"lt create",
		"lt desc compute 68 scale 0",        /* float32 compute and scale */
		"lt desc attr 3 = 1",                /* A transposed: TN */
		"lt desc attr 4 = 0",
		"lt layout type 2 rows 172 cols 64 ld 172", /* W as (cols x rows) halves */
		"lt layout type 2 rows 172 cols 4 ld 172",  /* x in W's type */
		"lt layout type 0 rows 64 cols 4 ld 64",    /* y float32 */
		"lt pref workspace 1048576",
		"lt heuristic requested 8 returned 3",
		"lt destroy pref",
	};
	ok(in_order(log, want, sizeof want / sizeof want[0]), "the call sequence of a TN fp16 product");
	ok(count_prefix(log, "lt destroy") == 6, "and everything made is destroyed");
	free(log);

	setenv("FAKE_CUBLASLT_FAIL", "heuristic", 1);
	ok(nf_lt_plan_init(&p, lt, NF_QUANT_BF16, 64, 172, 4, 1 << 20) == NF_EENV &&
		   strstr(nf_error_last(), "cublasLtMatmulAlgoGetHeuristic") &&
		   !strchr(nf_error_last(), '\n'),
	   "a refused heuristic is one line: %s", nf_error_last());
	nf_lt_plan_release(&p);
	unsetenv("FAKE_CUBLASLT_FAIL");
	ok(nf_lt_plan_init(&p, lt, NF_QUANT_INT8_ROW, 64, 172, 4, 1 << 20) == NF_EINPUT,
	   "int8 weights have no candidate: %s", nf_error_last());
	nf_lt_plan_release(&p);
	free(take_log());
}

static int build_engine(const char *dir) { return fake_sm90_engine(dir, NF_PREC_FP16, NULL); }

/* The tactics time every algorithm of every fp16 shape and prefill batch,
 * keep the fastest, and the backend still launches its own GEMM. */
static void test_tune(const nf_cublaslt *lt, const char *root)
{
	static const nf_tc_key key = {"h100-sxm", 12040, "0123"};
	char dir[1100];
	nf_engine *e = NULL;
	nf_cuda_driver *d = NULL;
	nf_cuda_backend *b = NULL;
	nf_timing_cache *c = NULL;
	nf_tc_tactic t;
	int timed = -1, prompt[4] = {1, 2, 3, 4};
	char *log;

	snprintf(dir, sizeof dir, "%s/engine", root);
	if (build_engine(dir) || fake_sm90_backend(dir, &e, &d, &b) || nf_timing_cache_new(&c, &key)) {
		ok(0, "an fp16 stories260K engine and a backend on the fake driver: %s", nf_error_last());
		goto done;
	}
	free(take_log());
	/* 3 algorithms x 2 timed runs a shape: the last fastest, far under our kernels' 1 ms */
	setenv("FAKE_CUDA_ELAPSED_MS", "0.5,0.5,0.4,0.4,0.1,0.1", 1);
	is_int(nf_cuda_backend_tune_cublaslt(b, c, lt, 1, 2, &timed), 0, "time cuBLASLt: %s",
	       nf_error_last());
	unsetenv("FAKE_CUDA_ELAPSED_MS");
	log = take_log();
	is_int(timed, 5 * 2, "5 distinct fp16 shapes x prefill batches 2 and 4");
	is_int(count_prefix(log, "lt matmul"), 5 * 2 * 3 * (1 + 2),
	       "each algorithm run once to warm up and twice timed");
	is_int(count_prefix(log, "lt heuristic requested 8 returned 3"), 5 * 2, "a heuristic per shape");
	free(log);
	nf_tc_shape s = {"cublaslt_f16", 64, 64, 4};
	memset(&t, 0, sizeof t);
	int found = nf_timing_cache_find(c, &s, &t);
	ok(found && !strcmp(t.kernel, "cublaslt:2") &&
		   t.median_us > 99 && t.median_us < 101,
	   "the fastest algorithm kept, under its own family: %s, %g us", t.kernel, t.median_us);
	ok(nf_cuda_backend_tune_cublaslt(b, c, lt, 1, 2, &timed) == 0 && timed == 0 &&
		   !count_prefix((log = take_log()), "lt "),
	   "cached: nothing timed again");
	free(log);
	/* the next build reads the cache file back whole: cuBLASLt's entries
	 * within the file's bounds (a 0 tile would make it damaged) */
	char path[1200], warning[300];
	nf_timing_cache *back = NULL;
	size_t n = nf_timing_cache_count(c);
	snprintf(path, sizeof path, "%s/lt-cache.json", root);
	ok(nf_timing_cache_save(c, path) == 0 &&
		   nf_timing_cache_load(&back, path, &key, warning, sizeof warning) == 0 &&
		   nf_timing_cache_count(back) == n && !warning[0],
	   "saved and read back: all %zu cuBLASLt entries, no warning (%s)", n, warning);
	nf_timing_cache_free(back);

	is_int(nf_cublaslt_may_choose(), 0, "the decision: cuBLASLt is never an engine's kernel");
	is_int(nf_cuda_backend_prefill(b, 0, prompt, 4, 0, NULL), 0, "a prefill after tuning");
	log = take_log();
	ok(count_prefix(log, "launch nf_cu_gemm") > 0 && count_prefix(log, "lt ") == 0,
	   "runs our GEMM although cuBLASLt timed fastest");
	free(log);
done:
	nf_timing_cache_free(c);
	nf_cuda_backend_free(b);
	nf_cuda_driver_free(d);
	nf_engine_free(e);
}

int main(void)
{
	const char *build = tap_env("NF_BUILD", "build");
	char root[1024], fake[1024], fake_lt[1024], cmd[1200];
	nf_cublaslt *lt = NULL;

	snprintf(root, sizeof root, "%s/tmp/test_cuda_cublaslt.%d", build, (int)getpid());
	snprintf(log_path, sizeof log_path, "%s/fake.log", root);
	snprintf(fake, sizeof fake, "%s/tests/fakes/libcuda.so.1", build);
	snprintf(fake_lt, sizeof fake_lt, "%s/tests/fakes/libcublasLt.so.13", build);
	if (nf_fs_mkdir_p(root, 0755))
		return 1;
	setenv("NF_LIBCUBLASLT", "/nonexistent/libcublasLt.so.13", 1);
	ok(nf_cublaslt_open(&lt) == NF_EENV && !lt && strstr(nf_error_last(), "no cuBLASLt") &&
		   !strchr(nf_error_last(), '\n'),
	   "no library: one line: %s", nf_error_last());
	ok(nf_cublaslt_kind_ok(NF_QUANT_F16, 75) && nf_cublaslt_kind_ok(NF_QUANT_BF16, 80) &&
		   !nf_cublaslt_kind_ok(NF_QUANT_FP8_E4M3, 86) &&
		   nf_cublaslt_kind_ok(NF_QUANT_FP8_E4M3, 89) && !nf_cublaslt_kind_ok(NF_QUANT_INT8_ROW, 90) &&
		   !nf_cublaslt_kind_ok(NF_QUANT_INT4_GROUP, 90),
	   "candidates: fp16, bf16, and fp8 from sm_89");
	setenv("NF_LIBCUBLASLT", fake_lt, 1);
	setenv("NF_LIBCUDA", fake, 1);
	setenv("NF_WEIGHTS_TILE", "0", 1);
	setenv("FAKE_CUDA_LOG", log_path, 1);
	if (nf_cublaslt_open(&lt)) {
		ok(0, "open the fake cuBLASLt: %s", nf_error_last());
		return done_testing();
	}
	ok(!strcmp(nf_cublaslt_path(lt), fake_lt), "the fake opened through NF_LIBCUBLASLT");
	test_plan(lt);
	test_tune(lt, root);
	nf_cublaslt_free(lt);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	if (system(cmd) != 0)
		ok(0, "remove %s", root);
	return done_testing();
}
