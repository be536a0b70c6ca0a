/*
 * test_timing_cache.c - the timing cache's file (written, read back, a key
 * of another SKU, driver or cubin a miss, a damaged file a miss with a
 * warning) and the CUDA backend's tuning flow on the fake driver
 * (tests/fakes/libcuda.c), whose CUDA events answer the times the test
 * gives them: warm-up launches, the median of the timed runs, the winner
 * kept and launched, the cache reused without timing again.  No kernel
 * runs on the fake, so no timing here says anything of a GPU: that is
 * reported skipped (tests/gpu/run.sh times them on one).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/cuda/backend.h"
#include "engine/cuda/cubin.h"
#include "engine/cuda/launch.h"
#include "engine/cuda/timing_cache.h"
#include "engine/engine.h"
#include "util/error.h"
#include "util/fs.h"
#include "tests/fakes/fake_cuda.h"
#include "tests/tap.h"

static const nf_tc_key key = {"h100-sxm", 12040,
			      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"};

static nf_tc_shape shape(const char *family, int rows, int cols, int batch)
{
	nf_tc_shape s = {{0}, rows, cols, batch};
	snprintf(s.family, sizeof s.family, "%s", family);
	return s;
}

static nf_tc_tactic tactic(const char *kernel, int tile, double us)
{
	nf_tc_tactic t;
	memset(&t, 0, sizeof t);
	t.tile_rows = tile;
	t.tile_tokens = tile == 4 ? 1 : tile;
	t.split_k = 1;
	t.vector = 4;
	t.median_us = us;
	t.runs = 20;
	snprintf(t.kernel, sizeof t.kernel, "%s", kernel);
	return t;
}

static void test_median(void)
{
	double odd[] = {5, 1, 3}, even[] = {4, 1, 3, 2}, one[] = {7};
	ok(nf_tc_median(odd, 3) == 3 && nf_tc_median(even, 4) == 2.5 && nf_tc_median(one, 1) == 7,
	   "the median of 3, 4 and 1 runs");
}

static int write_text(const char *path, const char *text)
{
	return nf_fs_write_atomic(path, text, strlen(text), 0644);
}

static void test_file(const char *root)
{
	char path[1100], warning[256], *text = NULL;
	nf_timing_cache *c = NULL, *back = NULL;
	nf_tc_shape s1 = shape("gemv_q8", 4096, 4096, 1), s2 = shape("gemv_q8", 4096, 4096, 8);
	nf_tc_tactic t, t1 = tactic("nf_cu_gemv_q8", 4, 21.5), t2 = tactic("nf_cu_gemm_q8", 64, 40.25);
	size_t len;

	snprintf(path, sizeof path, "%s/timing.json", root);
	ok(nf_timing_cache_load(&c, path, &key, warning, sizeof warning) == 0 &&
		   nf_timing_cache_count(c) == 0 && !warning[0],
	   "a missing file is an empty cache, without a warning");
	ok(nf_timing_cache_put(c, &s1, &t1) == 0 && nf_timing_cache_put(c, &s2, &t1) == 0 &&
		   nf_timing_cache_put(c, &s2, &t2) == 0 && nf_timing_cache_count(c) == 2,
	   "a shape put twice is one entry");
	is_int(nf_timing_cache_save(c, path), 0, "write the cache");
	nf_timing_cache_free(c);

	ok(nf_timing_cache_load(&back, path, &key, warning, sizeof warning) == 0 &&
		   nf_timing_cache_count(back) == 2 && !warning[0],
	   "read it back: 2 entries");
	ok(nf_timing_cache_find(back, &s2, &t) && !strcmp(t.kernel, "nf_cu_gemm_q8") &&
		   t.tile_rows == 64 && t.tile_tokens == 64 && t.median_us == 40.25 && t.runs == 20,
	   "the tactic of batch 8 is the one put last, every field");
	nf_tc_shape other = shape("gemv_q8", 4096, 4096, 2);
	ok(!nf_timing_cache_find(back, &other, &t), "another batch is a miss");
	nf_timing_cache_free(back);

	nf_tc_key k2 = key;
	snprintf(k2.sku, sizeof k2.sku, "h200");
	ok(nf_timing_cache_load(&back, path, &k2, warning, sizeof warning) == 0 &&
		   nf_timing_cache_count(back) == 0 && !warning[0],
	   "another SKU's cache: every shape a miss");
	nf_timing_cache_free(back);
	k2 = key;
	k2.driver = 12080;
	ok(nf_timing_cache_load(&back, path, &k2, NULL, 0) == 0 && nf_timing_cache_count(back) == 0,
	   "another driver's: a miss");
	nf_timing_cache_free(back);
	k2 = key;
	k2.cubin_sha256[0] = 'f';
	ok(nf_timing_cache_load(&back, path, &k2, NULL, 0) == 0 && nf_timing_cache_count(back) == 0,
	   "another cubin's: a miss");
	nf_timing_cache_free(back);

	/* damage: a truncated file, an entry with a negative row count */
	if (nf_fs_read_file(&text, &len, path, 1 << 20) == 0) {
		text[len / 2] = '\0';
		write_text(path, text);
		ok(nf_timing_cache_load(&back, path, &key, warning, sizeof warning) == 0 &&
			   nf_timing_cache_count(back) == 0 && strstr(warning, "timing again") &&
			   strstr(warning, path),
		   "a truncated file: empty, and a warning: %s", warning);
		nf_timing_cache_free(back);
	}
	free(text);
	char damaged[600];
	snprintf(damaged, sizeof damaged,
		 "{\"format\": \"nimfactory-timing-cache\", \"version\": 1, \"sku\": \"h100-sxm\","
		 " \"driver\": 12040, \"cubin_sha256\": \"%s\", \"entries\": [{\"family\": \"gemv_q8\","
		 " \"rows\": -4, \"cols\": 8, \"batch\": 1, \"kernel\": \"nf_cu_gemv_q8\", \"tile_rows\": 4,"
		 " \"tile_tokens\": 1, \"split_k\": 1, \"vector\": 4, \"median_us\": 3.0, \"runs\": 5}]}",
		 key.cubin_sha256);
	write_text(path, damaged);
	ok(nf_timing_cache_load(&back, path, &key, warning, sizeof warning) == 0 &&
		   nf_timing_cache_count(back) == 0 && strstr(warning, "entry 0 is damaged"),
	   "rows -4: empty, and a warning: %s", warning);
	nf_timing_cache_free(back);
}

static char *take_log(const char *path)
{
	char *text = NULL;
	size_t len;
	if (nf_fs_read_file(&text, &len, path, 1 << 24) != 0)
		text = calloc(1, 1);
	remove(path);
	return text;
}

/* Build a stories260K int8-wo engine with an sm_90 cubin header. */
/* Whether t holds the batch-2 candidates' medians of FAKE_CUDA_ELAPSED_MS
 * below (in any order: the file sorts them by name). */
static int candidates_are(const nf_tc_tactic *t)
{
	static const char *const kernel[] = {"nf_cu_gemv_q8", "nf_cu_gemv_sk_q8", "nf_cu_gemv_v32_q8",
					      "nf_cu_gemm_q8", "nf_cu_gemm_n16_q8"};
	static const double us[] = {5000, 6000, 7000, 2000, 3000};
	int found = 0;
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < t->n_candidates; j++)
			found += !strcmp(t->candidate[j], kernel[i]) && t->candidate_us[j] == us[i];
	return t->n_candidates == 5 && found == 5;
}

static int build_engine(const char *dir) { return fake_sm90_engine(dir, NF_PREC_INT8_WO, NULL); }

static void test_tune(const char *root)
{
	char dir[1100], log[1100], path[1100], want[160], *text;
	nf_engine *e = NULL;
	nf_cuda_driver *d = NULL;
	nf_cuda_backend *b = NULL;
	nf_timing_cache *c = NULL;
	nf_tc_tactic t;
	int timed = -1;

	snprintf(dir, sizeof dir, "%s/engine", root);
	snprintf(log, sizeof log, "%s/fake.log", root);
	snprintf(path, sizeof path, "%s/tune.json", root);
	setenv("NF_WEIGHTS_TILE", "0", 1);
	if (build_engine(dir) || fake_sm90_backend(dir, &e, &d, &b) || nf_timing_cache_new(&c, &key)) {
		ok(0, "a stories260K engine and a backend on the fake driver: %s", nf_error_last());
		goto done;
	}
	/* per shape, 3 runs of each variant: batch 1 the GEMV, its split-K
	 * and 32-byte forms, batches 2 and 4 those, then the 64- and 16-token
	 * GEMMs */
	setenv("FAKE_CUDA_ELAPSED_MS",
	       "4,1,2,5,5,5,6,6,6, 5,5,9,6,6,6,7,7,7,1,7,2,3,3,3, 2,2,2,1,1,1,3,3,3,3,3,3,3,3,3", 1);
	setenv("FAKE_CUDA_LOG", log, 1);
	is_int(nf_cuda_backend_tune(b, c, 2, 3, &timed), 0, "tune on the fake driver: %s",
	       nf_error_last());
	text = take_log(log);
	is_int(timed, 5 * 3, "5 distinct shapes x batches 1, 2, 4 timed");
	snprintf(want, sizeof want, "launch nf_cu_gemv_q8 %u 1 1 128 1 1",
		 nf_cu_launch_gemv(nf_engine_config(e)->dim, 1).grid[0]);
	/* wq's (64, 64) and w2's (64, 172) have this grid */
	is_int(count_lines(text, want), 2 * (2 + 3),
	       "batch 1 of the two shapes of 64 rows: 2 warm-up and 3 timed launches each");
	free(text);
	nf_tc_shape s1 = shape("gemv_q8", 64, 64, 1), s2 = shape("gemv_q8", 64, 64, 2),
		    s4 = shape("gemv_q8", 64, 64, 4);
	int found = nf_timing_cache_find(c, &s1, &t);
	ok(found && !strcmp(t.kernel, "nf_cu_gemv_q8") && t.median_us == 2000 && t.runs == 3,
	   "batch 1: the GEMV, median of 4, 1, 2 ms: %g us", t.median_us);
	ok(nf_timing_cache_find(c, &s2, &t) && !strcmp(t.kernel, "nf_cu_gemm_q8") &&
		   t.median_us == 2000 && t.tile_rows == NF_CU_GEMM_TILE,
	   "batch 2: the GEMM wins, 2 ms against 5");
	ok(candidates_are(&t), "and every candidate's median is kept: GEMV 5, split-K 6, 32-byte 7, "
	   "GEMM 2, 16-token GEMM 3 ms");
	ok(nf_timing_cache_find(c, &s4, &t) && !strcmp(t.kernel, "nf_cu_gemv_sk_q8") &&
		   t.split_k == NF_CU_GEMV_SPLIT && t.tile_rows == 1,
	   "batch 4: the split-K GEMV wins, 1 ms against 2");

	int slots[2] = {0, 1}, tokens[2] = {3, 4}, pos[2] = {0, 0};
	is_int(nf_cuda_backend_decode(b, slots, tokens, pos, 2, NULL, NULL), 0, "decode a batch of 2");
	text = take_log(log);
	snprintf(want, sizeof want, "launch nf_cu_gemm_q8 1 1 1 256 1 1");
	ok(count_lines(text, want) > 0, "and its wq runs the GEMM, as tuned");
	free(text);

	ok(nf_timing_cache_save(c, path) == 0, "save the cache");
	nf_timing_cache_free(c);
	c = NULL;
	ok(nf_timing_cache_load(&c, path, &key, NULL, 0) == 0 &&
		   nf_cuda_backend_tune(b, c, 2, 3, &timed) == 0 && timed == 0,
	   "the next build reads it back and times nothing");
	ok(nf_timing_cache_find(c, &s2, &t) && candidates_are(&t), "with the candidates' medians");
	text = take_log(log);
	ok(!strstr(text, "launch "), "no launch at all");
	free(text);
	skip("timings on a GPU: none here (tests/gpu/run.sh times the kernels on one)");
done:
	unsetenv("FAKE_CUDA_LOG");
	unsetenv("FAKE_CUDA_ELAPSED_MS");
	nf_timing_cache_free(c);
	nf_cuda_backend_free(b);
	nf_cuda_driver_free(d);
	nf_engine_free(e);
}

int main(void)
{
	const char *build = tap_env("NF_BUILD", "build");
	char root[1024], fake[1024];
	snprintf(root, sizeof root, "%s/tmp/test_timing_cache.%d", build, (int)getpid());
	snprintf(fake, sizeof fake, "%s/tests/fakes/libcuda.so.1", build);
	if (nf_fs_mkdir_p(root, 0755)) {
		ok(0, "mkdir %s: %s", root, nf_error_last());
		return done_testing();
	}
	setenv("NF_LIBCUDA", fake, 1);
	test_median();
	test_file(root);
	test_tune(root);
	nf_fs_remove_tree(root);
	return done_testing();
}
