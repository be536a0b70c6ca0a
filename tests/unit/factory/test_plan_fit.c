/*
 * test_plan_fit.c - a profile's memory on its device (factory/plan_fit.h):
 * the weights of a known model per precision, counted by hand from its
 * shapes; tensor parallelism splitting weights and KV cache but not the
 * workspace; a profile that does not fit dropped from the plan with its
 * numbers, its stages gone and the rest renumbered; a plan where nothing
 * fits refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_weights.h"
#include "factory/plan_fit.h"
#include "factory/recipe.h"
#include "tests/tap.h"
#include "util/error.h"

/* stories260K (../shared/models/README.md): classifier shared. */
static nf_model_config stories(void)
{
	return (nf_model_config){.arch = NF_ARCH_LLAMA, .dim = 64, .hidden_dim = 172, .n_layers = 5,
				 .n_heads = 8, .n_kv_heads = 4, .vocab_size = 512, .max_seq_len = 512,
				 .norm_eps = 1e-5f, .rope_theta = 10000.0f, .shared_classifier = true};
}

/* A Llama-3-8B-shaped model: 16 GB of fp16 weights. */
static nf_model_config big(void)
{
	return (nf_model_config){.arch = NF_ARCH_LLAMA, .dim = 4096, .hidden_dim = 14336,
				 .n_layers = 32, .n_heads = 32, .n_kv_heads = 8, .vocab_size = 128256,
				 .max_seq_len = 8192, .norm_eps = 1e-5f, .rope_theta = 500000.0f};
}

static void test_weights_per_precision(void)
{
	nf_model_config c = stories();
	/* per layer, the matrices (rows x cols): wq 64x64, wk 32x64, wv 32x64,
	 * wo 64x64, w1 172x64, w2 64x172, w3 172x64; the norms 2 x 64 floats;
	 * outside the layers the embedding 512x64 (a matrix) and the final norm */
	const uint64_t mat = 4096 + 2048 + 2048 + 4096 + 3 * 11008, rows = 64 + 32 + 32 + 64 + 172 + 64 + 172;
	const uint64_t norms = 5 * 2 * 64 * 4 + 64 * 4, emb = 512 * 64, emb_rows = 512;
	uint64_t b = 0;
	size_t params = 0;

	nf_model_param_count(&params, &c);
	is_int(nf_engine_weights_bytes(&b, &c, NF_PREC_FP32, 0), 0, "fp32 sized");
	ok(b == (uint64_t)params * 4 && b == (5 * mat + emb) * 4 + norms,
	   "fp32: every parameter as a float (%llu bytes)", (unsigned long long)b);
	is_int(nf_engine_weights_bytes(&b, &c, NF_PREC_FP16, 0), 0, "fp16 sized");
	ok(b == (5 * mat + emb) * 2 + norms, "fp16: matrices 2 bytes, norms float32 (%llu)",
	   (unsigned long long)b);
	is_int(nf_engine_weights_bytes(&b, &c, NF_PREC_INT8_WO, 0), 0, "int8-wo sized");
	ok(b == 5 * (mat + rows * 4) + emb + emb_rows * 4 + norms,
	   "int8-wo: a byte per weight and a float scale per row (%llu)", (unsigned long long)b);
	/* int4, groups of 32: 16 bytes a block of 32 columns; an f16 scale and
	 * min per (row, group); 64 columns = 2 groups, 172 = 6 blocks */
	uint64_t int4 = 0;
	const int r64[] = {64, 32, 32, 64, 172, 172}; /* the matrices of 64 columns */
	for (size_t i = 0; i < sizeof r64 / sizeof r64[0]; i++)
		int4 += (uint64_t)r64[i] * (2 * 16 + 2 * 4);
	int4 += 64 * (6 * 16 + 6 * 4); /* w2: 172 columns */
	is_int(nf_engine_weights_bytes(&b, &c, NF_PREC_INT4_WO, 32), 0, "int4-wo sized");
	ok(b == 5 * int4 + 512 * (2 * 16 + 2 * 4) + norms,
	   "int4-wo group 32: blocks of 16 bytes and a scale/min per group (%llu)", (unsigned long long)b);
}

static nf_profile profile(const char *device, nf_precision p, int tp)
{
	nf_profile pr = {.precision = p, .tensor_parallel = tp, .kv_cache = nf_kv_kind_default(p)};
	snprintf(pr.device, sizeof pr.device, "%s", device);
	snprintf(pr.name, sizeof pr.name, "%s-%s-tp%d", device, nf_precision_name(p), tp);
	return pr;
}

static const nf_fit_sizes DEFAULT_SIZES = {0, NF_RECIPE_MAX_BATCH, 0};

/* serving.max_batch and max_context size the KV cache and the scores. */
static void test_serving_sizes(void)
{
	nf_model_config c = big();
	nf_profile pr = profile("h100-sxm", NF_PREC_FP16, 1);
	const nf_sku *sku = nf_sku_find("h100-sxm");
	nf_fit_sizes few = {0, 4, 0}, shorter = {0, NF_RECIPE_MAX_BATCH, 2048};
	nf_fit d, f, s;
	if (!ok(sku && !nf_fit_profile(&d, &c, &pr, &DEFAULT_SIZES, sku, 0) &&
			!nf_fit_profile(&f, &c, &pr, &few, sku, 0) &&
			!nf_fit_profile(&s, &c, &pr, &shorter, sku, 0),
		"sized at three serving sizes: %s", nf_error_last()))
		return;
	ok(f.kv * 8 == d.kv && f.weights == d.weights && f.workspace < d.workspace,
	   "4 sequences: an eighth of 32's KV cache, the same weights, less workspace");
	ok(s.kv * 4 == d.kv && s.workspace < d.workspace,
	   "2048 of the model's 8192 positions: a quarter of the KV cache");
	nf_fit_sizes longer = {0, NF_RECIPE_MAX_BATCH, 100000};
	ok(!nf_fit_profile(&s, &c, &pr, &longer, sku, 0) && s.kv == d.kv,
	   "a context beyond the model's sizes the model's (plan refuses it, below)");
}

static void test_tensor_parallel(void)
{
	nf_model_config c = big();
	nf_profile one = profile("h100-sxm", NF_PREC_FP16, 1), two = profile("h100-sxm", NF_PREC_FP16, 2);
	const nf_sku *sku = nf_sku_find("h100-sxm");
	nf_fit a, b;
	uint64_t kv = 0;
	if (!ok(sku && !nf_fit_profile(&a, &c, &one, &DEFAULT_SIZES, sku, 0) &&
			!nf_fit_profile(&b, &c, &two, &DEFAULT_SIZES, sku, 0),
		"h100 tp1 and tp2 sized: %s", nf_error_last()))
		return;
	is_int(nf_fit_kv_bytes(&kv, &c, one.kv_cache, NF_RECIPE_MAX_BATCH), 0, "KV sized");
	ok(a.kv == kv && kv == 2ull * 32 * 8 * 8192 * 128 * 2 * NF_RECIPE_MAX_BATCH,
	   "KV: K and V, 32 layers x 8 heads x 8192 positions x 128 halves, 32 sequences");
	ok(a.weights > 16000000000ull && a.weights < 16100000000ull,
	   "8B in fp16: 16.0-16.1 GB of weights (%llu)", (unsigned long long)a.weights);
	ok(b.weights == (a.weights + 1) / 2 && b.kv == a.kv / 2, "tp2: weights and KV halved per device");
	ok(b.workspace == a.workspace && a.workspace > 0, "tp2: every device holds the whole workspace");
	ok(a.needed == a.weights + a.kv + a.workspace && a.capacity == 80ull << 30 && a.fits,
	   "needed is the sum; h100's 80 GiB from the SKU table; it fits");
}

static int parse(nf_recipe **out, const char *targets)
{
	char text[1024];
	snprintf(text, sizeof text,
		 "apiVersion: nimfactory/v1\nkind: Recipe\n"
		 "model: {name: big, source: {path: m.gguf}}\n"
		 "build:\n  targets:\n%s"
		 "gates: {correctness: {prompts: [hi]}}\n"
		 "image: {repository: a/b, tag: t}\n",
		 targets);
	*out = NULL;
	return nf_recipe_parse(out, "fit.yaml", text, strlen(text), "/recipes");
}

static void test_drop(void)
{
	nf_recipe *r = NULL;
	nf_plan *p = NULL;
	nf_model_config c = big();
	size_t dropped = 0;
	if (!ok(!parse(&r, "    - {device: t4, precisions: [fp16]}\n"
			   "    - {device: h100-sxm, precisions: [fp16]}\n") &&
		    !nf_plan_make(&p, r),
		"recipe and plan: %s", nf_error_last()))
		goto done;
	size_t stages = p->n_stages;
	is_int(nf_plan_fit(p, &dropped, &c, &DEFAULT_SIZES, 0, "fit.yaml"), 0, "sized: %s", nf_error_last());
	is_int((int)dropped, 1, "one profile dropped");
	is_int((int)p->n_profiles, 1, "one left");
	is_str(p->profiles[0].name, "h100-sxm-fp16-tp1", "the h100 one");
	if (!ok(p->n_dropped == 1, "the dropped point is listed"))
		goto done;
	is_str(p->dropped[0].device, "t4", "the t4 one");
	diag("%s", p->dropped[0].reason);
	ok(strstr(p->dropped[0].reason, "needs ") && strstr(p->dropped[0].reason, "(weights 15.") &&
		   strstr(p->dropped[0].reason, ", KV 32.0, workspace ") &&
		   strstr(p->dropped[0].reason, ") > 16.0 GiB on t4"),
	   "the reason has the numbers: %s", p->dropped[0].reason);
	ok(p->fits && p->fits[0].fits && p->fits[0].capacity == 80ull << 30, "the fit kept is the h100's");
	is_int((int)p->n_stages, (int)stages - 2, "its compile and gate went");
	nf_stage *compile = nf_plan_stage(p, NF_STAGE_COMPILE, 0), *gate = nf_plan_stage(p, NF_STAGE_GATE, 0);
	nf_stage *pkg = nf_plan_stage(p, NF_STAGE_PACKAGE, -1);
	ok(compile && gate && pkg && &p->stages[gate->deps[0]] == compile && pkg->n_deps == 1 &&
		   &p->stages[pkg->deps[0]] == gate && !nf_plan_stage(p, NF_STAGE_COMPILE, 1),
	   "the rest renumbered: package after the h100 gate after its compile");
	nf_plan_free(p);
	p = NULL;
	nf_recipe_free(r);
	r = NULL;

	if (!ok(!parse(&r, "    - {device: t4, precisions: [fp16, int8-wo]}\n") && !nf_plan_make(&p, r),
		"a t4-only recipe: %s", nf_error_last()))
		goto done;
	c.max_seq_len = 131072; /* the KV cache alone is far beyond 16 GiB */
	ok(nf_plan_fit(p, &dropped, &c, &DEFAULT_SIZES, 0, "fit.yaml") == NF_EINPUT &&
		   strstr(nf_error_last(), "nothing to build: no profile fits its device"),
	   "nothing fits: refused (%s)", nf_error_last());
	nf_fit_sizes capped = {0, 8, 4096};
	ok(nf_plan_fit(p, &dropped, &c, &capped, 0, "fit.yaml") == 0 && dropped == 1 &&
		   p->n_profiles == 1 && p->profiles[0].precision == NF_PREC_INT8_WO,
	   "8 sequences of 4096 tokens: int8-wo fits the t4, fp16's 15 GiB of weights do not (%s)",
	   nf_error_last());
	nf_fit_sizes beyond = {0, 8, 262144};
	ok(nf_plan_fit(p, &dropped, &c, &beyond, 0, "fit.yaml") == NF_EINPUT &&
		   strstr(nf_error_last(), "serving.max_context 262144 is more than the model's context "
					   "(131072 tokens)"),
	   "a max_context beyond the model's is refused: %s", nf_error_last());
done:
	nf_plan_free(p);
	nf_recipe_free(r);
}

static void test_cpu_capacity(void)
{
	nf_model_config c = stories();
	nf_profile pr = profile("cpu", NF_PREC_FP32, 1);
	nf_fit f;
	char line[200];
	ok(!nf_fit_profile(&f, &c, &pr, &DEFAULT_SIZES, nf_sku_find("cpu"), 1 << 20) && !f.fits &&
		   f.capacity == 1 << 20,
	   "the CPU's capacity is the host memory given (1 MiB: stories260K's 21 MiB do not fit)");
	nf_fit_describe(line, sizeof line, &f, "cpu");
	ok(strstr(line, "MiB (weights 1.0, KV 20.0, workspace") && strstr(line, "> 1.0 MiB on cpu"),
	   "small figures in MiB: %s", line);
	ok(!nf_fit_profile(&f, &c, &pr, &DEFAULT_SIZES, nf_sku_find("cpu"), 0) && f.fits && !f.capacity,
	   "an unknown host memory: it fits (nothing to compare)");
	ok(nf_fit_host_memory() > 0, "the host's memory is read");
}

int main(void)
{
	test_weights_per_precision();
	test_tensor_parallel();
	test_serving_sizes();
	test_drop();
	test_cpu_capacity();
	return done_testing();
}
