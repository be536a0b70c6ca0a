/*
 * test_roofline.c - the roofline cost model of a GPU decode step: the bytes
 * of each precision's format, the bandwidth and compute limits, the
 * occupancy derating, the launches, the tactics it picks, the occupancy
 * table reader and the JSON it writes.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/roofline.h"
#include "util/error.h"
#include "util/fs.h"
#include "tests/tap.h"

/* A tiny Llama whose bytes are easy to count by hand. */
static nf_model_config tiny(void)
{
	nf_model_config c = {0};
	c.dim = 64;
	c.hidden_dim = 128;
	c.n_layers = 2;
	c.n_heads = 4;
	c.n_kv_heads = 2; /* kv_dim 32, head 16 */
	c.vocab_size = 256;
	c.max_seq_len = 128;
	c.shared_classifier = true;
	return c;
}

/* SmolLM2-135M's shape. */
static nf_model_config smol(void)
{
	nf_model_config c = {0};
	c.dim = 576;
	c.hidden_dim = 1536;
	c.n_layers = 30;
	c.n_heads = 9;
	c.n_kv_heads = 3;
	c.vocab_size = 49152;
	c.max_seq_len = 8192;
	c.shared_classifier = true;
	return c;
}

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b); }

static void test_bytes(void)
{
	nf_model_config c = tiny();
	nf_roofline r;
	/* per layer: wq, wo 64x64; wk, wv 32x64; w1, w3 128x64; w2 64x128; classifier 256x64 */
	double weights = 2 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 128 * 64) + 256 * 64;
	double rows = 2 * (64 + 64 + 32 + 32 + 128 + 128 + 64) + 256;

	ok(nf_roofline_model(&r, &c, NF_PREC_FP32, NF_KV_F32, nf_sku_find("h100-sxm"), 128, 1) == 0,
	   "model the tiny Llama on h100-sxm");
	ok(near(r.weight_bytes, 4 * weights), "fp32: 4 bytes a weight (%.0f)", r.weight_bytes);
	ok(nf_roofline_model(&r, &c, NF_PREC_INT8_WO, NF_KV_F16, nf_sku_find("h100-sxm"), 128, 1) == 0 &&
		   near(r.weight_bytes, weights + 4 * rows),
	   "int8-wo: a byte a weight and a float scale a row (%.0f)", r.weight_bytes);
	ok(nf_roofline_model(&r, &c, NF_PREC_FP16, NF_KV_F16, nf_sku_find("h100-sxm"), 128, 1) == 0 &&
		   near(r.weight_bytes, 2 * weights), "fp16: 2 bytes a weight");
}

static void test_step(void)
{
	nf_model_config c = tiny();
	const nf_sku *h100 = nf_sku_find("h100-sxm");
	nf_roofline r;
	/* K and V, 2 heads of 16 halves, 128 positions, 2 layers */
	double kv = 2.0 * 128 * 2 * 16 * 2 * 2, launches = 15 * 2 + 3;

	ok(nf_roofline_model(&r, &c, NF_PREC_FP16, NF_KV_F16, h100, 128, 0.5) == 0, "occupancy 0.5");
	const nf_roofline_bucket *b1 = nf_roofline_at(&r, 1);
	ok(b1 && near(b1->bytes, r.weight_bytes + kv), "batch 1 reads the weights and one cache");
	ok(b1 && !b1->compute_bound &&
		   near(b1->step_seconds, b1->bytes / 3350e9 / 0.5 + launches * NF_ROOFLINE_LAUNCH_S),
	   "batch 1: bytes / bandwidth, halved by the occupancy, plus %.0f launches", launches);
	ok(b1 && near(b1->tokens_per_s, 1 / b1->step_seconds), "tokens/s = 1 / step at batch 1");
	const nf_roofline_bucket *b8 = nf_roofline_at(&r, 8);
	ok(b8 && near(b8->bytes, r.weight_bytes + 8 * kv), "batch 8 reads eight caches");
	ok(nf_roofline_at(&r, 3) == NULL, "no bucket 3");
	int rising = 1;
	for (int i = 1; i < NF_ROOFLINE_BUCKETS; i++)
		rising &= r.buckets[i].tokens_per_s > r.buckets[i - 1].tokens_per_s;
	ok(rising, "tokens/s rises with the batch");
}

static void test_bounds(void)
{
	nf_model_config c = smol();
	nf_roofline r;
	char s[128];

	/* fp32 on CUDA cores: 67 TFLOP/s against 3.35 TB/s, ridge at 20 flop/byte;
	 * a GEMV at batch b does b/2 flop a byte of fp32 weights */
	ok(nf_roofline_model(&r, &c, NF_PREC_FP32, NF_KV_F32, nf_sku_find("h100-sxm"), 1024, 1) == 0,
	   "SmolLM2 fp32 on h100-sxm");
	ok(!r.buckets[0].compute_bound && r.buckets[6].compute_bound,
	   "fp32: memory-bound at batch 1, compute-bound at 64");
	ok(nf_roofline_model(&r, &c, NF_PREC_FP16, NF_KV_F16, nf_sku_find("h100-sxm"), 1024, 1) == 0,
	   "SmolLM2 fp16 on h100-sxm");
	ok(!r.buckets[6].compute_bound, "fp16 on tensor cores: memory-bound even at 64");
	double f = r.buckets[0].hbm_fraction;
	ok(near(f, r.buckets[0].bytes / 3350e9 / r.buckets[0].step_seconds),
	   "the fraction of the HBM roofline: bytes / bandwidth / step");
	ok(f < 0.2, "SmolLM2 at batch 1: %.0f%% of the HBM roofline, its 453 launches cost the rest",
	   100 * f);
	nf_roofline_summary(s, sizeof s, &r);
	char want[128];
	snprintf(want, sizeof want, "modelled %.0f tok/s at batch 1, %.0f%% of HBM roofline",
		 r.buckets[0].tokens_per_s, 100 * f);
	is_str(s, want, "summary: %s", s);
	nf_model_config t = tiny();
	nf_roofline rt;
	ok(nf_roofline_model(&rt, &t, NF_PREC_FP16, NF_KV_F16, nf_sku_find("h100-sxm"), 128, 1) == 0,
	   "the tiny Llama");
	nf_roofline_summary(s, sizeof s, &rt);
	snprintf(want, sizeof want, "modelled %.0f tok/s at batch 1, %.2f%% of HBM roofline",
		 rt.buckets[0].tokens_per_s, 100 * rt.buckets[0].hbm_fraction);
	ok(rt.buckets[0].hbm_fraction < 0.01 && !strcmp(s, want),
	   "under 1%%, two decimals: %s", s);

	nf_model_config big = smol();
	nf_roofline r7;
	big.dim = 4096, big.hidden_dim = 11008, big.n_layers = 32, big.n_heads = 32;
	big.n_kv_heads = 32, big.vocab_size = 32000, big.shared_classifier = false;
	int err7 = nf_roofline_model(&r7, &big, NF_PREC_FP16, NF_KV_F16, nf_sku_find("h100-sxm"), 1024, 1);
	ok(err7 == 0 && r7.buckets[0].hbm_fraction > 0.75 && r7.buckets[0].tokens_per_s < 3350e9 / 13.4e9,
	   "a 7B Llama at batch 1: %.0f%% of the roofline, under 250 tok/s (%.0f)",
	   100 * r7.buckets[0].hbm_fraction, r7.buckets[0].tokens_per_s);

	nf_roofline h200;
	ok(nf_roofline_model(&h200, &c, NF_PREC_FP16, NF_KV_F16, nf_sku_find("h200"), 1024, 1) == 0 &&
		   h200.buckets[0].tokens_per_s > r.buckets[0].tokens_per_s,
	   "h200's bandwidth models faster than h100-sxm's");

	ok(nf_roofline_model(&r, &c, NF_PREC_FP16, NF_KV_F16, nf_sku_find("cpu"), 1024, 1) == NF_EINPUT,
	   "the CPU is no roofline SKU");
	ok(nf_roofline_model(&r, &c, NF_PREC_BF16, NF_KV_F16, nf_sku_find("t4"), 1024, 1) == NF_EINPUT,
	   "t4 runs no bf16: %s", nf_error_last());
	ok(nf_roofline_model(&r, &c, NF_PREC_FP16, NF_KV_F16, nf_sku_find("l4"), 9000, 1) == NF_EINPUT,
	   "a context past the model's");
	ok(nf_roofline_model(&r, &c, NF_PREC_FP16, NF_KV_F16, nf_sku_find("l4"), 8, 0) == NF_EINPUT,
	   "occupancy 0");
}

static void test_tactics(void)
{
	nf_model_config c = smol();
	nf_roofline r;
	const nf_roofline_tactic *cls = NULL, *kv = NULL;

	ok(nf_roofline_model(&r, &c, NF_PREC_INT8_WO, NF_KV_F16, nf_sku_find("h100-sxm"), 256, 1) == 0,
	   "SmolLM2 int8-wo tactics");
	is_int(r.n_tactics, 5, "five GEMV shapes: (576,576), (192,576), (1536,576), (576,1536), (49152,576)");
	for (int i = 0; i < r.n_tactics; i++) {
		if (r.tactics[i].rows == 49152)
			cls = &r.tactics[i];
		if (r.tactics[i].rows == 192)
			kv = &r.tactics[i];
	}
	ok(cls && cls->count == 1, "the tied classifier's runs over the embedding, once a step");
	nf_roofline all;
	c.shared_classifier = false;
	ok(nf_roofline_model(&all, &c, NF_PREC_INT8_WO, NF_KV_F16, nf_sku_find("h100-sxm"), 256, 1) == 0,
	   "untied");
	for (int i = 0; i < all.n_tactics; i++)
		if (all.tactics[i].rows == 49152)
			cls = &all.tactics[i];
	ok(cls && cls->split_k == 1 && cls->count == 1,
	   "the classifier fills every SM without split-K (split %d)", cls ? cls->split_k : -1);
	ok(kv && strcmp(kv->kernel, "gemv") && kv->count == 60,
	   "k and v (192 rows, 60 a step) keep more loads in flight than the plain GEMV does (%s)",
	   kv ? kv->kernel : "-");
	ok(kv && kv->seconds > 0 && cls && cls->seconds > kv->seconds, "modelled times");
	ok(kv && cls && (!strcmp(kv->kernel, "gemv_sk") || !strcmp(kv->kernel, "gemv_v32")) &&
		   !strcmp(cls->kernel, "gemv"),
	   "the report names the kernels: k and v %s, the classifier %s", kv ? kv->kernel : "-",
	   cls ? cls->kernel : "-");
}

/* The prefill tactics of roofline.json: modelled GEMM tiles, and cuBLASLt
 * beside them for fp16 weights, skipped with its reason and never the
 * kernel; none for int8 weights (no cuBLASLt candidate). */
static int lists_cublaslt(const char *text, int *chosen, int *skipped, const char **tile)
{
	json_error_t je;
	json_t *root = json_loads(text, 0, &je), *p = json_object_get(root, "prefill_tactics"), *t;
	size_t i, listed = 0;
	*chosen = *skipped = 0;
	json_array_foreach(p, i, t) {
		json_t *c = json_array_get(json_object_get(t, "candidates"), 0);
		const char *kernel = json_string_value(json_object_get(t, "kernel"));
		*chosen += kernel && !strcmp(kernel, "cublaslt");
		if (i == 0)
			*tile = kernel && !strcmp(kernel, "gemm") ? "gemm" : "other";
		if (c && !strcmp(json_string_value(json_object_get(c, "kernel")), "cublaslt")) {
			listed++;
			*skipped += !strcmp(json_string_value(json_object_get(c, "method")), "skipped") &&
				    strstr(json_string_value(json_object_get(c, "reason")), "not timed");
		}
	}
	json_decref(root);
	return (int)listed;
}

static void test_prefill_report(void)
{
	nf_model_config c = smol();
	nf_roofline r;
	char *text = NULL;
	const char *tile = "";
	int chosen, skipped;
	ok(nf_roofline_model(&r, &c, NF_PREC_FP16, NF_KV_F16, nf_sku_find("h100-sxm"), 256, 1) == 0 &&
		   nf_roofline_json(&text, &r) == 0,
	   "SmolLM2 fp16 on an H100 as JSON");
	is_int(text ? lists_cublaslt(text, &chosen, &skipped, &tile) : -1, r.n_tactics,
	       "cuBLASLt listed beside each prefill shape");
	ok(skipped == r.n_tactics && chosen == 0, "skipped with the reason, never chosen");
	ok(!strcmp(tile, "gemm") && r.prefill[0].batch == NF_ROOFLINE_PREFILL,
	   "a prefill of %d tokens models the 64-token tile", NF_ROOFLINE_PREFILL);
	free(text);
	text = NULL;
	ok(nf_roofline_model(&r, &c, NF_PREC_INT8_WO, NF_KV_F16, nf_sku_find("h100-sxm"), 256, 1) == 0 &&
		   nf_roofline_json(&text, &r) == 0 && lists_cublaslt(text, &chosen, &skipped, &tile) == 0,
	   "int8-wo: no cuBLASLt candidate listed");
	free(text);
}

/* The modelled variant depends on the shape: split-K for decode's few-row,
 * long-K products, the plain GEMV for tall ones and for rows too short to
 * split, the 16-token tile for a short prefill, the 64-token tile for a
 * long one; and on the GPU (fewer SMs fill with fewer rows). */
static void test_variants(void)
{
	const nf_sku *h100 = nf_sku_find("h100-sxm"), *l4 = nf_sku_find("l4");
	nf_roofline_gpu g = {h100->sm_count, h100->mem_bw_gbs * 1e9, h100->fp16_tflops * 1e12, 1};
	double sec = 0;
	/* fp16: 2 bytes a weight */
	is_int(nf_roofline_variant(&g, 512, 8192, 512.0 * 8192 * 2, 1, 0, &sec), NF_CU_VAR_GEMV_SK,
	       "decode (512, 8192) on an H100: split-K");
	ok(sec > 0 && sec < nf_roofline_variant_seconds(NF_CU_VAR_GEMV, &g, 512, 8192, 512.0 * 8192 * 2, 1),
	   "modelled faster than the GEMV");
	is_int(nf_roofline_variant(&g, 128256, 4096, 128256.0 * 4096 * 2, 1, 0, NULL), NF_CU_VAR_GEMV,
	       "decode (128256, 4096), a classifier: the GEMV fills every SM alone");
	is_int(nf_roofline_variant(&g, 512, 64, 512.0 * 64 * 2, 1, 0, NULL), NF_CU_VAR_GEMV,
	       "decode (512, 64): rows too short to split or to keep two chunks a lane in flight");
	is_int(nf_roofline_variant(&g, 512, 1536, 512.0 * 1536 * 2, 1, 0, NULL) != NF_CU_VAR_GEMV, 1,
	       "decode (512, 1536): fewer rows than the SMs' warps, more loads in flight (%s)",
	       nf_cu_variant_of(nf_roofline_variant(&g, 512, 1536, 512.0 * 1536 * 2, 1, 0, NULL)).name);
	is_int(nf_roofline_variant(&g, 4096, 4096, 4096.0 * 4096 * 2, 8, 1, NULL), NF_CU_VAR_GEMM_N16,
	       "a prefill of 8 tokens: the 16-token tile");
	is_int(nf_roofline_variant(&g, 4096, 4096, 4096.0 * 4096 * 2, 512, 1, NULL), NF_CU_VAR_GEMM,
	       "a prefill of 512 tokens: the 64-token tile");
	is_int(nf_roofline_variant(&g, 4096, 4096, 4096.0 * 4096 * 2, 8, 0, NULL) <= NF_CU_VAR_GEMV_V32, 1,
	       "a decode batch of 8 stays a GEMV");
	/* 4096 rows fill an L4's 58 SMs (16 warps each) but not an H100's 132 */
	if (l4) {
		nf_roofline_gpu small = {l4->sm_count, l4->mem_bw_gbs * 1e9, l4->fp16_tflops * 1e12, 1};
		int on_h100 = nf_roofline_variant(&g, 1536, 8192, 1536.0 * 8192 * 2, 1, 0, NULL);
		int on_l4 = nf_roofline_variant(&small, 1536, 8192, 1536.0 * 8192 * 2, 1, 0, NULL);
		ok(on_h100 != NF_CU_VAR_GEMV && on_l4 == NF_CU_VAR_GEMV,
		   "(1536, 8192): %s on an H100 (%d SMs), the GEMV on an L4 (%d SMs)",
		   nf_cu_variant_of((nf_cu_variant)on_h100).name, h100->sm_count, l4->sm_count);
	} else {
		skip("no l4 in the device table");
	}
}

static void test_occupancy(void)
{
	char path[] = "/tmp/nf_occXXXXXX";
	int fd = mkstemp(path);
	/* docs/cuda-kernels.md's layout: a table per architecture under its heading */
	const char *doc =
		"# CUDA kernels\n\nSome text | with a bar.\n\n### sm_80\n\n"
		"| kernel | block | registers | spill (st/ld) | shared | blocks/SM | occupancy |\n"
		"| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n"
		"| nf_cu_gemv_q8 | 128 | 35 | 0/0 | 0 | 12 | 75% |\n"
		"| nf_cu_gemv_f16 | 128 | 28 | 0/0 | 0 | 16 | 100% |\n"
		"| nf_cu_gemv_bf16 | 128 | 58 | 0/0 | 0 | 8 | 50% |\n"
		"\n### sm_90a\n\n"
		"| kernel | block | registers | spill (st/ld) | shared | blocks/SM | occupancy |\n"
		"| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n"
		"| `nf_cu_gemv_q8` | 128 | 38 | 0/0 | 0 | 12 | 62.5% |\n"
		"\n| kernel | arch | occupancy |\n|---|---|---|\n| nf_cu_gemv_q4 | sm_89 | 0.875 |\n";
	double occ = 0;

	ok(fd >= 0 && write(fd, doc, strlen(doc)) == (ssize_t)strlen(doc), "write a kernels table");
	close(fd);
	is_str(nf_roofline_gemv_kernel(NF_PREC_INT8_WO), "nf_cu_gemv_q8", "int8-wo's GEMV kernel");
	is_str(nf_roofline_gemv_kernel(NF_PREC_INT4_AWQ), "nf_cu_gemv_q4", "int4-awq's");
	ok(nf_roofline_occupancy(&occ, path, "nf_cu_gemv_q8", "sm_90") == 1 && occ == 0.625,
	   "q8 GEMV on sm_90: the sm_90a table's 62.5%%");
	ok(nf_roofline_occupancy(&occ, path, "nf_cu_gemv_q8", "sm_80") == 1 && occ == 0.75,
	   "on sm_80: its own table's 75%%");
	ok(nf_roofline_occupancy(&occ, path, "nf_cu_gemv_f16", "sm_80") == 1 && occ == 1,
	   "f16 is not bf16's row (100%%, not 50%%)");
	ok(nf_roofline_occupancy(&occ, path, "nf_cu_gemv_q4", "sm_89") == 1 && occ == 0.875,
	   "a table with an arch column, a fraction: 0.875");
	ok(nf_roofline_occupancy(&occ, path, "nf_cu_gemv_q8", "sm_8") == 0 && occ == 1, "sm_8 is not sm_80");
	ok(nf_roofline_occupancy(&occ, path, "nf_cu_gemv_f8", "sm_90") == 0 && occ == 1,
	   "no row: full occupancy");
	ok(nf_roofline_occupancy(&occ, "/nonexistent/cuda-kernels.md", "nf_cu_gemv_q8", "sm_90") == 0 &&
		   occ == 1,
	   "no table: full occupancy");
	FILE *f = fopen(path, "w");
	fputs("### sm_90\n| kernel | occupancy |\n|--|--|\n| nf_cu_gemv_q8 | lots |\n", f);
	fclose(f);
	ok(nf_roofline_occupancy(&occ, path, "nf_cu_gemv_q8", "sm_90") == NF_EINPUT && occ == 1,
	   "a cell that is no number: %s", nf_error_last());
	unlink(path);
	const char *src = getenv("NF_SRC");
	char doc_path[1024];
	snprintf(doc_path, sizeof doc_path, "%s/docs/cuda-kernels.md", src ? src : ".");
	if (nf_fs_exists(doc_path))
		ok(nf_roofline_occupancy(&occ, doc_path, "nf_cu_gemv_f16", "sm_90") == 1 && occ > 0 && occ <= 1,
		   "docs/cuda-kernels.md has the f16 GEMV's occupancy on sm_90a (%g)", occ);
	else
		skip("no docs/cuda-kernels.md at %s", doc_path);
}

static void test_write(void)
{
	nf_model_config c = tiny();
	nf_roofline r;
	char path[] = "/tmp/nf_roofXXXXXX";
	int fd = mkstemp(path);
	json_t *j;

	close(fd);
	ok(nf_roofline_model(&r, &c, NF_PREC_FP8_E4M3, NF_KV_F16, nf_sku_find("l4"), 64, 1) == 0 &&
		   nf_roofline_write(path, &r) == 0,
	   "write the model of fp8 on l4");
	j = json_load_file(path, 0, NULL);
	ok(j && !strcmp(json_string_value(json_object_get(j, "method")), "modelled"),
	   "method: modelled");
	ok(j && json_array_size(json_object_get(j, "decode")) == NF_ROOFLINE_BUCKETS &&
		   json_integer_value(json_object_get(json_array_get(json_object_get(j, "decode"), 6),
						      "batch")) == 64,
	   "seven buckets, the last batch 64");
	ok(j && json_real_value(json_object_get(j, "peak_tflops")) == 242, "l4's fp8 peak, 242 TFLOP/s");
	json_decref(j);
	unlink(path);
}

int main(void)
{
	test_bytes();
	test_step();
	test_bounds();
	test_tactics();
	test_variants();
	test_prefill_report();
	test_occupancy();
	test_write();
	return done_testing();
}
