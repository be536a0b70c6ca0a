/* test_profile.c - manifest parsing (strict) and profile selection, with fake
 * manifests and fake GPU lists, including GPU profiles that cannot fit here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/gpu.h"
#include "serve/manifest.h"
#include "serve/profile.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/banned.h"

#define H64(c) c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c

static const char *good =
	"apiVersion: nimfactory/v1\n"
	"kind: ModelManifest\n"
	"model: {name: stories260k, family: llama, version: \"1.0.0\"}\n"
	"recipe_digest: sha256:" H64("a") "\n"
	"serving:\n"
	"  chat_template: chatml\n"
	"  precision_preference: [fp8-e4m3, int8-wo, fp32]\n"
	"  tensor_parallel_preference: [2, 1]\n"
	"profiles:\n"
	"  - {id: " H64("1") ", name: h100-fp8-tp1, device: h100-sxm, arch: sm_90, precision: fp8-e4m3, tensor_parallel: 1, engine: engines/h1, gate: skipped}\n"
	"  - {id: " H64("2") ", name: h100-fp8-tp2, device: h100-sxm, arch: sm_90, precision: fp8-e4m3, tensor_parallel: 2, engine: engines/h2, gate: passed}\n"
	"  - {id: " H64("3") ", name: a100-int8-tp1, device: a100-sxm, arch: sm_80, precision: int8-wo, tensor_parallel: 1, engine: engines/a1, gate: passed}\n"
	"  - {id: " H64("4") ", name: cpu-fp32, device: cpu, arch: \"\", precision: fp32, tensor_parallel: 1, engine: /abs/cpu32, gate: passed}\n"
	"  - {id: " H64("5") ", name: cpu-int8, device: cpu, arch: \"\", precision: int8-wo, tensor_parallel: 1, engine: engines/c8, gate: passed}\n"
	"  - {id: " H64("6") ", name: cpu-int8-bad, device: cpu, arch: \"\", precision: int8-wo, tensor_parallel: 1, engine: engines/c8b, gate: failed}\n";

static nf_manifest *load(const char *text)
{
	nf_manifest *m = NULL;
	if (nf_manifest_parse(&m, text, strlen(text), "/img/opt/nim/model_manifest.yaml") < 0)
		return NULL;
	return m;
}

/* good with one substitution */
static int bad(const char *from, const char *to, const char *want)
{
	char buf[8192];
	const char *p = strstr(good, from);
	nf_manifest *m = NULL;
	int rc;
	if (!p)
		return 0;
	snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - good), good, to, p + strlen(from));
	rc = nf_manifest_parse(&m, buf, strlen(buf), "m.yaml");
	nf_manifest_free(m);
	if (rc != NF_EINPUT) {
		diag("no error for %s -> %s", from, to);
		return 0;
	}
	if (!strstr(nf_error_last(), want) || strncmp(nf_error_last(), "m.yaml:", 7)) {
		diag("message: %s", nf_error_last());
		return 0;
	}
	return 1;
}

int main(void)
{
	nf_manifest *m = load(good);
	nf_gpu_list none, h100x1, h100x2, a100;
	size_t idx = 99;
	char why[1024];
	nf_profile_fit fits[6];

	ok(m != NULL, "good manifest parses: %s", nf_error_last());
	if (!m)
		return done_testing();
	is_int(m->n_profiles, 6, "six profiles");
	is_int(m->chat_template, NF_CHAT_CHATML, "chat template");
	is_str(m->profiles[0].engine_path, "/img/opt/nim/engines/h1", "relative engine path joined to the manifest folder");
	is_str(m->profiles[3].engine_path, "/abs/cpu32", "absolute engine path kept");
	is_int(m->n_tp_pref, 2, "tp preferences");

	ok(bad("chat_template: chatml", "chat_template: jinja", "chat_template"), "unknown template refused");
	ok(bad("kind: ModelManifest", "kind: Recipe", "kind"), "wrong kind refused");
	ok(bad("recipe_digest:", "extra: 1\nrecipe_digest:", "unknown key 'extra'"), "unknown top-level key refused");
	ok(bad("tensor_parallel: 2", "tensor_parallel: two", "integer"), "non-integer tp refused");
	ok(bad("tensor_parallel: 2", "tensor_parallel: 0", "outside"), "tp 0 refused");
	ok(bad("precision: fp32", "precision: fp64", "unknown precision"), "unknown precision refused");
	ok(bad("gate: failed", "gate: maybe", "gate"), "bad gate refused");
	ok(bad("arch: sm_80", "arch: \"\"", "arch"), "GPU profile without arch refused");
	ok(bad("name: a100-int8-tp1", "name: h100-fp8-tp1", "same id or name"), "duplicate profile name refused");
	ok(bad("id: " H64("3"), "id: " H64("1"), "same id or name"), "duplicate id refused");
	ok(bad("id: " H64("3"), "id: XYZ", "64 lowercase hex"), "bad id refused");
	ok(bad("engine: engines/h1,", "", "missing key 'engine'"), "missing engine refused");
	ok(bad("  - {id: " H64("1"), "  - [1, 2]\n  - {id: " H64("1"), "mapping"), "non-mapping profile refused");
	ok(bad("serving:\n", "serving: [\n", ""), "YAML syntax error gives a position");
	/* each phase of the top level: header, model, digest, serving's lists */
	ok(bad("apiVersion: nimfactory/v1", "apiVersion: nimfactory/v2",
	       "apiVersion: expected nimfactory/v1, got 'nimfactory/v2'"), "wrong apiVersion refused");
	ok(bad("kind: ModelManifest", "kind: Recipe", "kind: expected ModelManifest, got 'Recipe'"),
	   "the kind's message names both");
	ok(bad("name: stories260k", "name: \"stories 260k\"", "model.name: only letters"),
	   "a model name with a space refused");
	ok(bad("version: \"1.0.0\"", "version: \"\"", "model.version: must not be empty"),
	   "an empty model version refused");
	ok(bad("sha256:" H64("a"), "sha256:" H64("A"), "recipe_digest: expected sha256:"),
	   "an upper-case recipe digest refused");
	ok(bad("[fp8-e4m3, int8-wo, fp32]", "[fp8-e4m3, int3, fp32]",
	       "serving.precision_preference: unknown precision"), "an unknown preferred precision refused");
	ok(bad("precision_preference: [fp8-e4m3, int8-wo, fp32]", "precision_preference: fp32",
	       "serving.precision_preference: expected a list"), "a preference that is not a list refused");
	ok(bad("[2, 1]", "[2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]",
	       "serving.tensor_parallel_preference: more than 16 entries"), "17 tp preferences refused");
	ok(bad("[2, 1]", "[2, 128]", "serving.tensor_parallel_preference"),
	   "a tp preference above the most refused");
	{ /* serving.speculative: optional; when named, checked against the profiles */
		static const char *tp = "  tensor_parallel_preference: [2, 1]\n";
		char buf[8192];
		const char *p = strstr(good, tp);
		nf_manifest *sm = NULL;
		snprintf(buf, sizeof buf, "%.*s%s  speculative: {method: draft, k: 3, draft_profile: cpu-int8}\n%s",
			 (int)(p - good), good, tp, p + strlen(tp));
		ok(nf_manifest_parse(&sm, buf, strlen(buf), "m.yaml") == 0 && sm->speculative.k == 3 &&
		   !strcmp(sm->speculative.method, "draft") && !strcmp(sm->speculative.draft_profile, "cpu-int8"),
		   "serving.speculative read: %s", nf_error_last());
		nf_manifest_free(sm);
		ok(m->speculative.method == NULL && m->speculative.k == 0 && m->speculative.draft_profile == NULL,
		   "no serving.speculative: nothing named");
		ok(bad(tp, "  speculative: {method: medusa}\n", "expected none, lookup or draft"), "unknown method refused");
		ok(bad(tp, "  speculative: {method: lookup, k: 17}\n", "outside 1..16"), "k past 16 refused");
		ok(bad(tp, "  speculative: {method: draft}\n", "needs a draft_profile"), "draft without a profile refused");
		ok(bad(tp, "  speculative: {method: lookup, draft_profile: cpu-int8}\n", "only with method draft"),
		   "a draft profile without method draft refused");
		ok(bad(tp, "  speculative: {method: draft, draft_profile: cpu-int4}\n", "'cpu-int4' is not one of the profiles"),
		   "an unknown draft profile refused");
	}
	{ /* serving.max_batch and max_context: nimserve's defaults, optional */
		static const char *tp = "  tensor_parallel_preference: [2, 1]\n";
		char buf[8192];
		const char *p = strstr(good, tp);
		nf_manifest *sm = NULL;
		snprintf(buf, sizeof buf, "%.*s%s  max_batch: 8\n  max_context: 1024\n%s", (int)(p - good), good,
			 tp, p + strlen(tp));
		ok(nf_manifest_parse(&sm, buf, strlen(buf), "m.yaml") == 0 && sm->max_batch == 8 &&
			   sm->max_context == 1024,
		   "serving.max_batch and max_context read: %s", nf_error_last());
		nf_manifest_free(sm);
		ok(m->max_batch == 0 && m->max_context == 0, "absent: 0, nimserve's own defaults");
		ok(bad(tp, "  max_batch: 0\n", "serving.max_batch"), "a batch of 0 refused");
		ok(bad(tp, "  max_context: big\n", "serving.max_context"), "a context that is no number refused");
	}
	{
		nf_manifest *x = NULL;
		char *big = malloc(NF_MANIFEST_MAX_BYTES + 2);
		memset(big, '#', NF_MANIFEST_MAX_BYTES + 1);
		big[NF_MANIFEST_MAX_BYTES + 1] = '\0';
		is_int(nf_manifest_parse(&x, big, NF_MANIFEST_MAX_BYTES + 1, "big.yaml"), NF_EINPUT, "oversized manifest refused");
		free(big);
		is_int(nf_manifest_parse(&x, "", 0, "e.yaml"), NF_EINPUT, "empty manifest refused");
		is_int(nf_manifest_parse(&x, "- 1\n- 2\n", 8, "l.yaml"), NF_EINPUT, "list root refused");
	}

	memset(&none, 0, sizeof none);
	snprintf(none.note, sizeof none.note, "no NVIDIA driver: no GPUs");
	h100x1 = none;
	h100x1.count = 1;
	snprintf(h100x1.gpus[0].name, sizeof h100x1.gpus[0].name, "NVIDIA H100 80GB HBM3");
	h100x1.gpus[0].major = 9;
	h100x2 = h100x1;
	h100x2.count = 2;
	h100x2.gpus[1] = h100x1.gpus[0];
	a100 = none;
	a100.count = 1;
	snprintf(a100.gpus[0].name, sizeof a100.gpus[0].name, "NVIDIA A100-SXM4-80GB");
	a100.gpus[0].major = 8;

	/* no GPU: CPU profiles only, int8-wo preferred over fp32; the failed gate never */
	nf_profile_evaluate(fits, m, &none, 0);
	ok(!fits[0].fits && strstr(fits[0].reason, "no GPU with compute capability 9.0 found"),
	   "H100 profile does not fit without a GPU: %s", fits[0].reason);
	ok(!fits[2].fits && strstr(fits[2].reason, "compute capability 8.0"), "A100 profile does not fit");
	ok(!fits[5].fits && strstr(fits[5].reason, "gate failed"), "failed-gate profile does not fit");
	ok(fits[3].fits && fits[4].fits, "CPU profiles fit");
	is_int(nf_profile_select(&idx, why, sizeof why, m, &none, NULL, 0), 0, "select without GPU");
	is_str(m->profiles[idx].name, "cpu-int8", "int8-wo wins by preference");
	ok(strstr(why, "preference #2") != NULL, "reason names the preference: %s", why);

	/* one H100: tp1 fp8 (tp2 needs two) */
	is_int(nf_profile_select(&idx, why, sizeof why, m, &h100x1, NULL, 0), 0, "select with one H100");
	is_str(m->profiles[idx].name, "h100-fp8-tp1", "GPU profile beats CPU");
	nf_profile_evaluate(fits, m, &h100x1, 0);
	ok(!fits[1].fits && strstr(fits[1].reason, "needs 2 GPUs"), "tp2 needs two GPUs: %s", fits[1].reason);
	/* two H100: tp preference [2, 1] picks tp2 */
	is_int(nf_profile_select(&idx, why, sizeof why, m, &h100x2, NULL, 0), 0, "select with two H100");
	is_str(m->profiles[idx].name, "h100-fp8-tp2", "tp preference order");
	/* A100: its own profile */
	is_int(nf_profile_select(&idx, why, sizeof why, m, &a100, NULL, 0), 0, "select with an A100");
	is_str(m->profiles[idx].name, "a100-int8-tp1", "A100 profile chosen");

	/* forced */
	is_int(nf_profile_select(&idx, why, sizeof why, m, &none, "cpu-fp32", 0), 0, "force by name");
	is_str(m->profiles[idx].name, "cpu-fp32", "forced by name");
	ok(strstr(why, "forced") != NULL, "reason says forced");
	is_int(nf_profile_select(&idx, why, sizeof why, m, &none, H64("4"), 0), 0, "force by id");
	is_int(idx, 3, "forced by id");
	is_int(nf_profile_select(&idx, why, sizeof why, m, &none, "h100-fp8-tp1", 0), NF_EINPUT,
	       "forcing a GPU profile without a GPU fails");
	ok(strstr(nf_error_last(), "no GPU with compute capability 9.0 found") &&
	   strstr(nf_error_last(), "cpu-fp32, cpu-int8"), "message lists the reason and the fitting profiles: %s",
	   nf_error_last());
	is_int(nf_profile_select(&idx, why, sizeof why, m, &none, "nope", 0), NF_ENOTFOUND, "unknown forced profile");
	/* check_files: none of these engine folders exist */
	is_int(nf_profile_select(&idx, why, sizeof why, m, &none, NULL, 1), NF_EINPUT, "missing engine folders fit nothing");
	{
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		nf_profile_print(f, m, &none, 0);
		fclose(f);
		ok(buf && strstr(buf, "h100-fp8-tp1") && strstr(buf, "no: no GPU with compute capability 9.0") &&
		   strstr(buf, "cpu-int8 "), "--list-profiles table");
		free(buf);
	}
	{
		nf_gpu_list g;
		nf_gpu_detect(&g);
		if (g.count == 0)
			ok(strstr(g.note, "no GPUs") != NULL, "detection without a driver says so: %s", g.note);
		else
			skip("a GPU is present (%s)", g.note);
	}
	{ /* a megabyte of flow nesting is refused at once (found by fuzz_serve_manifest) */
		size_t n = 500000;
		char *buf = malloc(2 * n);
		nf_manifest *deep = NULL;
		time_t t0 = time(NULL);
		if (buf) {
			memset(buf, '[', n);
			memset(buf + n, ']', n);
			is_int(nf_manifest_parse(&deep, buf, 2 * n, "d.yaml"), NF_EINPUT, "deep nesting: NF_EINPUT");
			ok(strstr(nf_error_last(), "d.yaml:1:") && strstr(nf_error_last(), "nested deeper"),
			   "deep nesting names the position: %s", nf_error_last());
			ok(time(NULL) - t0 < 5, "deep nesting refused quickly");
			nf_manifest_free(deep);
			free(buf);
		}
	}
	nf_manifest_free(m);
	nf_manifest_free(NULL);
	return done_testing();
}
