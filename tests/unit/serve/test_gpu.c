/*
 * test_gpu.c - nimserve's GPU detection through the CUDA driver loader:
 * without a driver, and with the fake driver (tests/fakes/libcuda.c through
 * NF_LIBCUDA) as an H100, an A10G and a driver whose cuInit fails; and the
 * profile it then selects: the H100 profile on the fake H100, the CPU one
 * with the reason in one line on the A10G.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/gpu.h"
#include "serve/manifest.h"
#include "serve/profile.h"
#include "tests/tap.h"
#include "util/error.h"

#define H64(c) c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c

static const char *manifest =
	"apiVersion: nimfactory/v1\n"
	"kind: ModelManifest\n"
	"model: {name: stories260k, family: llama, version: \"1.0.0\"}\n"
	"recipe_digest: sha256:" H64("a") "\n"
	"serving:\n"
	"  chat_template: chatml\n"
	"  precision_preference: [fp8-e4m3, int8-wo]\n"
	"  tensor_parallel_preference: [1]\n"
	"profiles:\n"
	"  - {id: " H64("1") ", name: h100-sxm-fp8-e4m3-tp1, device: h100-sxm, arch: sm_90, precision: fp8-e4m3, tensor_parallel: 1, engine: engines/h1, gate: skipped}\n"
	"  - {id: " H64("5") ", name: cpu-int8-wo-tp1, device: cpu, arch: \"\", precision: int8-wo, tensor_parallel: 1, engine: engines/c8, gate: passed}\n";

static void fake(const char *path, const char *name, const char *cc, const char *init_error)
{
	setenv("NF_LIBCUDA", path, 1);
	if (name)
		setenv("FAKE_CUDA_NAME", name, 1);
	else
		unsetenv("FAKE_CUDA_NAME");
	if (cc)
		setenv("FAKE_CUDA_CC", cc, 1);
	else
		unsetenv("FAKE_CUDA_CC");
	if (init_error)
		setenv("FAKE_CUDA_INIT_ERROR", init_error, 1);
	else
		unsetenv("FAKE_CUDA_INIT_ERROR");
}

static const char *select_name(const nf_manifest *m, const nf_gpu_list *g, char *why, size_t len)
{
	size_t chosen = 0;
	if (nf_profile_select(&chosen, why, len, m, g, NULL, 0) < 0)
		return "(none)";
	return m->profiles[chosen].name;
}

int main(void)
{
	char path[1024], why[1024];
	nf_gpu_list g;
	nf_manifest *m = NULL;

	snprintf(path, sizeof path, "%s/tests/fakes/libcuda.so.1", tap_env("NF_BUILD", "build"));
	if (nf_manifest_parse(&m, manifest, strlen(manifest), "m.yaml") < 0) {
		ok(0, "parse the manifest: %s", nf_error_last());
		return done_testing();
	}

	fake("/nonexistent/libcuda.so.1", NULL, NULL, NULL);
	nf_gpu_detect(&g);
	ok(g.count == 0 && strstr(g.note, "no NVIDIA driver") && strstr(g.note, ": no GPUs"),
	   "no driver: no GPUs, and why (%s)", g.note);
	is_str(select_name(m, &g, why, sizeof why), "cpu-int8-wo-tp1", "the CPU profile then");

	FILE *f = fopen(path, "rb");
	if (!f) {
		skip("fake driver %s not built", path);
		nf_manifest_free(m);
		return done_testing();
	}
	fclose(f);

	fake(path, NULL, NULL, NULL);
	nf_gpu_detect(&g);
	ok(g.count == 1 && !strcmp(g.gpus[0].name, "NVIDIA H100 80GB HBM3") && g.gpus[0].major == 9 &&
		   g.gpus[0].minor == 0 && g.gpus[0].sku && !strcmp(g.gpus[0].sku, "h100-sxm"),
	   "the fake H100 is found and matched to h100-sxm");
	ok(strstr(g.note, "1 GPU(s) found") && strstr(g.note, "CUDA 12040") &&
		   strstr(g.note, "GPU 0 NVIDIA H100 80GB HBM3 = h100-sxm"),
	   "the note says what was found: %s", g.note);
	is_str(select_name(m, &g, why, sizeof why), "h100-sxm-fp8-e4m3-tp1", "the H100 profile on it");
	ok(strstr(why, "matching GPU") != NULL, "as the matching GPU: %s", why);

	fake(path, "NVIDIA A10G", "86", NULL);
	nf_gpu_detect(&g);
	ok(g.count == 1 && g.gpus[0].sku && !strcmp(g.gpus[0].sku, "a10g"), "an A10G is a10g");
	is_str(select_name(m, &g, why, sizeof why), "cpu-int8-wo-tp1", "the CPU profile on an A10G");

	/* "l4" is in "NVIDIA L40S" as a substring, not as the SKU: the l40s profile
	 * is the matching one although the preferences rank l4's precision first */
	static const char *sibling =
		"apiVersion: nimfactory/v1\n"
		"kind: ModelManifest\n"
		"model: {name: stories260k, family: llama, version: \"1.0.0\"}\n"
		"recipe_digest: sha256:" H64("a") "\n"
		"serving:\n"
		"  chat_template: chatml\n"
		"  precision_preference: [fp8-e4m3, int8-wo]\n"
		"  tensor_parallel_preference: [1]\n"
		"profiles:\n"
		"  - {id: " H64("1") ", name: l4-fp8-e4m3-tp1, device: l4, arch: sm_89, precision: fp8-e4m3, tensor_parallel: 1, engine: engines/l4, gate: skipped}\n"
		"  - {id: " H64("2") ", name: l40s-int8-wo-tp1, device: l40s, arch: sm_89, precision: int8-wo, tensor_parallel: 1, engine: engines/l40s, gate: skipped}\n";
	nf_manifest *ms = NULL;
	fake(path, "NVIDIA L40S", "89", NULL);
	nf_gpu_detect(&g);
	if (nf_manifest_parse(&ms, sibling, strlen(sibling), "s.yaml") == 0) {
		is_str(select_name(ms, &g, why, sizeof why), "l40s-int8-wo-tp1",
		       "an L40S picks the l40s profile over l4's (same sm_89): %s", why);
		nf_manifest_free(ms);
	} else {
		ok(0, "parse the L4/L40S manifest: %s", nf_error_last());
	}

	fake(path, NULL, NULL, "3");
	nf_gpu_detect(&g);
	ok(g.count == 0 && strstr(g.note, "cuInit failed: CUDA error 3 (initialization error): no GPUs"),
	   "a failing cuInit: %s", g.note);
	nf_manifest_free(m);
	return done_testing();
}
