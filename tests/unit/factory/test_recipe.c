/* test_recipe.c - recipe parsing, defaults, canonical JSON and digest, every
 * bad recipe's exact error, and hostile YAML refused fast with bounded memory. */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/sku.h"
#include "factory/gate_defaults.h"
#include "factory/recipe.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"

static const char *src_dir;

static char *data_path(const char *rel)
{
	return nf_strdup_printf("%s/tests/data/recipes/%s", src_dir, rel);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static nf_recipe *load(const char *rel)
{
	nf_recipe *r = NULL;
	char *p = data_path(rel);
	if (nf_recipe_load(&r, p) < 0)
		diag("load %s: %s", rel, nf_error_last());
	free(p);
	return r;
}

/* Parse from memory; returns the error code, the message is nf_error_last(). */
static int parse_mem(const char *text, size_t len, nf_recipe **out)
{
	nf_recipe *r = NULL;
	int err = nf_recipe_parse(&r, "mem.yaml", text, len, "/recipes");
	if (out)
		*out = r;
	else
		nf_recipe_free(r);
	return err;
}

static const char *minimal =
	"apiVersion: nimfactory/v1\n"
	"kind: Recipe\n"
	"model: {name: tiny, source: {path: m.bin}}\n"
	"build: {targets: [{device: cpu, precisions: [fp32]}]}\n"
	"gates: {correctness: {prompts: [hi]}}\n"
	"image: {repository: a/b, tag: t}\n";

static void test_full(void)
{
	nf_recipe *r = load("good/full.yaml");
	const nf_recipe_correctness *cr;

	ok(r != NULL, "good/full.yaml loads");
	if (!r)
		return;
	is_str(r->model.name, "stories260k", "model.name");
	is_int(r->model.family, NF_FAMILY_LLAMA, "model.family");
	is_str(r->model.version, "1.0.0", "model.version");
	is_str(r->model.license, "MIT", "model.license");
	is_int(r->model.source.kind, NF_SOURCE_URL, "source is a url");
	is_str(r->model.source.url,
	       "https://huggingface.co/karpathy/tinyllamas/resolve/main/stories260K/stories260K.bin",
	       "source.url");
	is_str(r->model.source.sha256, "b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696",
	       "source.sha256");
	is_int(r->model.source.format, NF_FORMAT_LLAMA2C, "source.format llama2c");
	ok(!r->model.source.archive, "source.archive defaults to false");
	is_int(r->model.tokenizer.kind, NF_SOURCE_URL, "tokenizer is a url");
	is_int(r->model.tokenizer.format, NF_FORMAT_AUTO, "tokenizer.format defaults to auto");
	is_str(r->model.tokenizer.sha256, "037cb335abb25d1fa9e8ecae30ed2a3a8ace9302862ebcdc05d51a6bbb10c312",
	       "tokenizer.sha256");

	is_int(r->build.n_targets, 2, "two targets");
	ok(r->build.targets[0].sku == nf_sku_find("cpu"), "targets[0] is cpu");
	is_int(r->build.targets[0].n_precisions, 2, "cpu: two precisions");
	ok(r->build.targets[0].precisions[0] == NF_PREC_FP32 &&
		   r->build.targets[0].precisions[1] == NF_PREC_INT8_WO,
	   "cpu: fp32, int8-wo in order");
	ok(r->build.targets[0].n_tensor_parallel == 1 && r->build.targets[0].tensor_parallel[0] == 1,
	   "cpu: tp [1]");
	is_str(r->build.targets[1].sku->name, "h100-sxm", "targets[1] is h100-sxm");
	is_str(r->build.targets[1].sku->cuda_arch, "sm_90", "h100-sxm is sm_90");
	ok(r->build.targets[1].precisions[0] == NF_PREC_FP16 &&
		   r->build.targets[1].precisions[1] == NF_PREC_FP8_E4M3,
	   "h100: fp16, fp8-e4m3");
	ok(r->build.targets[1].n_tensor_parallel == 2 && r->build.targets[1].tensor_parallel[1] == 2,
	   "h100: tp [1, 2]");
	ok(r->build.autotune, "autotune true");

	cr = &r->gates.correctness;
	is_int(cr->n_prompts, 2, "two prompts");
	is_str(cr->prompts[0], "", "empty prompt kept");
	is_str(cr->prompts[1], "Once upon a time", "second prompt");
	is_int(cr->max_tokens, 48, "correctness.max_tokens");
	ok(cr->def.min_token_agreement == 0.90 && cr->def.max_logit_rel_error == 0.10, "default tolerance");
	ok(cr->overridden[NF_PREC_FP32] && !cr->overridden[NF_PREC_INT8_WO], "fp32 overridden only");
	ok(cr->tolerance[NF_PREC_FP32].min_token_agreement == 1.0 &&
		   cr->tolerance[NF_PREC_FP32].max_logit_rel_error == 0.0001,
	   "fp32 tolerance resolved from the override");
	ok(cr->tolerance[NF_PREC_INT8_WO].min_token_agreement == 0.90 &&
		   cr->tolerance[NF_PREC_INT8_WO].max_logit_rel_error == 0.10,
	   "int8-wo tolerance resolved from the default");

	ok(r->gates.performance.present, "performance gate present");
	is_str(r->gates.performance.prompt, "Once upon a time", "performance.prompt");
	is_int(r->gates.performance.max_tokens, 128, "performance.max_tokens");
	ok(r->gates.performance.min_decode_tokens_per_s == 50.0, "min_decode_tokens_per_s 50");
	ok(r->gates.performance.max_peak_memory_mib == 512.0, "max_peak_memory_mib 512");

	is_int(r->serving.chat_template, NF_CHAT_PLAIN, "chat_template plain");
	ok(r->serving.n_precision_preference == 2 && r->serving.precision_preference[0] == NF_PREC_INT8_WO &&
		   r->serving.precision_preference[1] == NF_PREC_FP32,
	   "precision_preference [int8-wo, fp32]");
	ok(r->serving.n_tensor_parallel_preference == 1 && r->serving.tensor_parallel_preference[0] == 1,
	   "tensor_parallel_preference [1]");

	is_str(r->image.repository, "nimfactory/stories260k", "image.repository");
	is_str(r->image.tag, "0.1.0", "image.tag");
	ok(r->image.n_labels == 1 && !strcmp(r->image.labels[0].key, "org.opencontainers.image.source") &&
		   !strcmp(r->image.labels[0].value, "https://example.invalid/nimfactory"),
	   "image.labels");
	is_int(r->image.compression, NF_COMPRESS_GZIP, "compression gzip");
	is_int(r->image.layout, NF_LAYOUT_SINGLE, "layout single");
	ok(r->image.base == NULL && r->image.base_written == NULL, "base none");
	is_str(r->image.created, "2026-01-01T00:00:00Z", "created as written");
	is_int(r->image.created_epoch, 1767225600, "created_epoch");
	nf_recipe_free(r);
}

static void test_minimal_defaults(void)
{
	nf_recipe *r = load("good/minimal.yaml");
	ok(r != NULL, "good/minimal.yaml loads");
	if (!r)
		return;
	is_int(r->model.source.kind, NF_SOURCE_PATH, "source is a path");
	ok(r->model.source.path && r->model.source.path[0] == '/', "path made absolute");
	ok(r->model.source.path && (strstr(r->model.source.path, "tests/data/recipes/good/models/tiny.bin")),
	   "path resolved against the recipe's folder (%s)", r->model.source.path);
	is_str(r->model.source.path_written, "./models/tiny.bin", "path as written kept");
	ok(r->model.source.sha256 == NULL, "sha256 optional with path");
	is_int(r->model.tokenizer.kind, NF_SOURCE_GIT, "tokenizer from git");
	is_str(r->model.tokenizer.git.commit, "0123456789abcdef0123456789abcdef01234567", "commit lowercased");
	is_str(r->model.tokenizer.git.path, "tok", "git path");
	ok(r->build.autotune, "autotune defaults to true");
	is_int(r->gates.correctness.max_tokens, 32, "correctness.max_tokens defaults to 32");
	ok(r->gates.correctness.tolerance[NF_PREC_FP32].min_token_agreement ==
		   nf_gate_defaults_for("fp32")->min_greedy_agreement &&
		   r->gates.correctness.tolerance[NF_PREC_FP32].min_ppl_ratio ==
		   nf_gate_defaults_for("fp32")->min_ppl_ratio &&
		   r->gates.correctness.tolerance[NF_PREC_INT8_WO].max_kl_mean ==
		   nf_gate_defaults_for("int8-wo")->max_kl_mean,
	   "tolerance defaults: each precision's row of the defaults table");
	ok(r->gates.correctness.eval_text == NULL && r->gates.correctness.eval_tokens == 1024,
	   "eval_text defaults to the shipped text, eval_tokens to 1024");
	ok(!r->gates.performance.present, "no performance gate");
	ok(r->build.targets[0].n_tensor_parallel == 1 && r->build.targets[0].tensor_parallel[0] == 1,
	   "tensor_parallel defaults to [1]");
	ok(r->serving.n_precision_preference == 2 && r->serving.precision_preference[0] == NF_PREC_INT8_WO &&
		   r->serving.precision_preference[1] == NF_PREC_FP32,
	   "precision_preference defaults to the targets' order");
	is_int(r->image.compression, NF_COMPRESS_GZIP, "compression defaults to gzip");
	is_str(r->image.repository, "localhost:5000/nimfactory/tiny", "repository with a registry host");
	ok(r->image.base && r->image.base[0] == '/' && strstr(r->image.base, "/good/../base-image"),
	   "base resolved against the recipe's folder");
	nf_recipe_free(r);
}

static void test_digest(void)
{
	nf_recipe *a = load("good/full.yaml"), *b = load("good/full-reformatted.yaml"), *c = NULL;
	char ha[65] = "", hb[65] = "", hc[65] = "";
	json_t *j = NULL;

	ok(a && b, "both forms load");
	if (!a || !b)
		goto done;
	ok(nf_recipe_digest(ha, a) == 0 && nf_recipe_digest(hb, b) == 0, "digests computed");
	is_str(ha, hb, "formatting, comments, quoting and key order do not change the digest");
	is_int(strlen(ha), 64, "digest is 64 hex");

	/* A real change does. */
	{
		char *p = data_path("good/full.yaml"), *text = NULL, *at;
		size_t len;
		nf_fs_read_file(&text, &len, p, 1 << 20);
		at = text ? strstr(text, "max_tokens: 48") : NULL;
		if (at)
			at[13] = '9';
		ok(at && parse_mem(text, len, &c) == 0, "edited recipe parses");
		if (c)
			nf_recipe_digest(hc, c);
		ok(c && strcmp(ha, hc) != 0, "changing max_tokens changes the digest");
		free(text);
		free(p);
	}

	ok(nf_recipe_to_json(&j, a) == 0 && j, "to_json");
	if (j) {
		json_t *t = json_object_get(json_object_get(j, "build"), "targets");
		ok(json_array_size(t) == 2, "json: two targets");
		is_str(json_string_value(json_object_get(json_array_get(t, 1), "device")), "h100-sxm",
		       "json: device name");
		ok(json_is_true(json_object_get(json_object_get(j, "build"), "autotune")), "json: autotune");
		is_str(json_string_value(json_object_get(json_object_get(j, "image"), "compression")), "gzip",
		       "json: compression");
		ok(json_is_null(json_object_get(json_object_get(json_object_get(j, "model"), "source"), "path")) ||
			   !json_object_get(json_object_get(json_object_get(j, "model"), "source"), "path"),
		   "json: url source has no path");
	}
done:
	json_decref(j);
	nf_recipe_free(a);
	nf_recipe_free(b);
	nf_recipe_free(c);
}

static void test_memory_cases(void)
{
	nf_recipe *r = NULL;

	ok(parse_mem(minimal, strlen(minimal), &r) == 0, "minimal from memory: %s", nf_error_last());
	if (r) {
		is_str(r->model.source.path, "/recipes/m.bin", "path resolved against base_dir");
		is_int(r->image.created_epoch, getenv("SOURCE_DATE_EPOCH") ? r->image.created_epoch : 0,
		       "created defaults to the epoch");
	}
	nf_recipe_free(r);
	r = NULL;

	setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
	ok(parse_mem(minimal, strlen(minimal), &r) == 0 && r && r->image.created_epoch == 1700000000,
	   "SOURCE_DATE_EPOCH fills created");
	nf_recipe_free(r);
	r = NULL;
	setenv("SOURCE_DATE_EPOCH", "soon", 1);
	ok(parse_mem(minimal, strlen(minimal), NULL) == NF_EINPUT &&
		   strstr(nf_error_last(), "SOURCE_DATE_EPOCH"),
	   "a bad SOURCE_DATE_EPOCH is refused");
	unsetenv("SOURCE_DATE_EPOCH");

	/* partial override: the missing field comes from default */
	{
		const char *over =
			"apiVersion: nimfactory/v1\nkind: Recipe\n"
			"model: {name: tiny, source: {path: m.bin}}\n"
			"build: {targets: [{device: cpu, precisions: [fp32]}]}\n"
			"gates: {correctness: {prompts: [hi], precisions: {int8-wo: {min_token_agreement: 0.5}},"
			" default: {max_logit_rel_error: 0.25}}}\n"
			"image: {repository: a/b, tag: t}\n";
		ok(parse_mem(over, strlen(over), &r) == 0 && r, "partial override parses");
		if (r) {
			const nf_recipe_tolerance *t = &r->gates.correctness.tolerance[NF_PREC_INT8_WO];
			ok(t->min_token_agreement == 0.5 && t->max_logit_rel_error == 0.25,
			   "override merged over default (given after it)");
			ok(isnan(r->gates.correctness.def.min_token_agreement) &&
				   t->min_ppl_ratio == nf_gate_defaults_for("int8-wo")->min_ppl_ratio,
			   "a field neither block sets comes from the precision's defaults");
		}
		nf_recipe_free(r);
		r = NULL;
	}

	/* exact messages from memory */
	{
		const char *bad = "apiVersion: nimfactory/v1\nkind: Recipe\nmodel: {name: tiny, sorce: {}}\n";
		ok(parse_mem(bad, strlen(bad), NULL) == NF_EINPUT, "unknown key is NF_EINPUT");
		is_str(nf_error_last(), "mem.yaml:3:21: unknown key 'sorce' in model; did you mean 'source'?",
		       "unknown key message");
		is_int(nf_error_last_code(), NF_EINPUT, "code recorded");
	}
	{
		/* a NUL byte inside the buffer */
		const char bad[] = "apiVersion: nimfactory/v1\nkind: Re\0cipe\n";
		ok(parse_mem(bad, sizeof(bad) - 1, NULL) == NF_EINPUT, "NUL byte refused");
		is_str(nf_error_last(), "mem.yaml:2:9: NUL byte in recipe", "NUL byte position");
	}
	{
		const char bad[] = "apiVersion: nimfactory/v1\nkind: \xc0\xaf\n";
		ok(parse_mem(bad, sizeof(bad) - 1, NULL) == NF_EINPUT &&
			   !strcmp(nf_error_last(), "mem.yaml:2:7: invalid UTF-8 (byte 0xc0)"),
		   "overlong UTF-8 refused: %s", nf_error_last());
	}
	{
		const char bad[] = "apiVersion: nimfactory/v1\nkind: \"\\0\"\n";
		ok(parse_mem(bad, sizeof(bad) - 1, NULL) == NF_EINPUT && strstr(nf_error_last(), "NUL character"),
		   "escaped NUL in a string refused: %s", nf_error_last());
	}
	{
		const char bad[] = "\xff\xfe" "a\0:\0";
		ok(parse_mem(bad, sizeof(bad) - 1, NULL) == NF_EINPUT, "UTF-16 refused: %s", nf_error_last());
	}
	ok(parse_mem("", 0, NULL) == NF_EINPUT && !strcmp(nf_error_last(), "mem.yaml:1:1: empty recipe"),
	   "empty input");
	ok(parse_mem("# only a comment\n\n", 18, NULL) == NF_EINPUT &&
		   !strcmp(nf_error_last(), "mem.yaml:1:1: empty recipe"),
	   "comments only is empty");
	ok(parse_mem("---\n", 4, NULL) == NF_EINPUT && !strcmp(nf_error_last(), "mem.yaml:1:1: empty recipe"),
	   "an empty document is empty");
	ok(parse_mem("just a string\n", 14, NULL) == NF_EINPUT &&
		   !strcmp(nf_error_last(), "mem.yaml:1:1: a recipe must be a mapping, got a string"),
	   "a scalar document");
	nf_recipe_free(NULL);
	ok(1, "nf_recipe_free(NULL) is fine");
}

static void test_bad_files(void)
{
	char *dirp = data_path("bad");
	DIR *d = opendir(dirp);
	struct dirent *e;
	int count = 0;

	ok(d != NULL, "tests/data/recipes/bad exists");
	while (d && (e = readdir(d))) {
		char *p, *text = NULL, *expect, *nl, *want;
		size_t len;
		nf_recipe *r = NULL;
		int err;

		if (!strstr(e->d_name, ".yaml"))
			continue;
		p = nf_strdup_printf("%s/%s", dirp, e->d_name);
		nf_fs_read_file(&text, &len, p, 1 << 20);
		expect = text && !strncmp(text, "# expect: ", 10) ? text + 10 : NULL;
		if (expect && (nl = strchr(expect, '\n')))
			*nl = '\0';
		want = nf_strdup_printf("%s:%s", p, expect ? expect : "(no expectation)");
		err = nf_recipe_load(&r, p);
		ok(err == NF_EINPUT && r == NULL && !strcmp(nf_error_last(), want), "bad/%s", e->d_name);
		if (strcmp(nf_error_last(), want))
			diag("got %s\n# want %s", nf_error_last(), want);
		count++;
		nf_recipe_free(r);
		free(want);
		free(text);
		free(p);
	}
	ok(count >= 15, "at least 15 bad recipes (%d)", count);
	if (d)
		closedir(d);
	free(dirp);
}

/* The gates' new keys: evaluation text, teacher-forced bounds, ratio bounds. */
static void test_gate_keys(void)
{
	char dir[] = "/tmp/nf_test_recipe_gates.XXXXXX";
	nf_recipe *r = NULL;
	const char *text =
		"apiVersion: nimfactory/v1\nkind: Recipe\n"
		"model: {name: tiny, source: {path: m.bin}}\n"
		"build: {targets: [{device: cpu, precisions: [fp32, int8-wo]}]}\n"
		"gates:\n"
		"  correctness:\n"
		"    prompts: [hi]\n"
		"    eval_text: texts/eval.txt\n"
		"    eval_tokens: 300\n"
		"    default: {min_top1_agreement: 0.5, max_kl_mean: 0.3}\n"
		"    precisions: {int8-wo: {min_ppl_ratio: 1.5}}\n"
		"  performance:\n"
		"    prompt: hi\n"
		"    min_prefill_tokens_per_s: 100\n"
		"    max_ttft_ms: 50\n"
		"    min_decode_speedup: {int8-wo: 2.5}\n"
		"    max_size_ratio: {int8-wo: 0.3, fp32: 1.1}\n"
		"image: {repository: a/b, tag: t}\n";
	char *texts = NULL, *eval = NULL;
	json_t *j = NULL;

	ok(mkdtemp(dir) != NULL, "temp dir");
	texts = nf_path_join(dir, "texts");
	eval = nf_path_join(texts, "eval.txt");
	nf_fs_mkdir_p(texts, 0755);
	nf_fs_write_atomic(eval, "Some text.", 10, 0644);
	is_int(nf_recipe_parse(&r, "mem.yaml", text, strlen(text), dir), 0, "gate keys parse: %s",
	       nf_error_last());
	if (r) {
		const nf_recipe_correctness *cr = &r->gates.correctness;
		const nf_recipe_performance *pf = &r->gates.performance;
		is_str(cr->eval_text, eval, "eval_text resolved against the recipe's folder");
		is_str(cr->eval_text_written, "texts/eval.txt", "eval_text as written kept");
		is_int(cr->eval_tokens, 300, "eval_tokens");
		ok(cr->tolerance[NF_PREC_INT8_WO].min_ppl_ratio == 1.5 &&
			   cr->tolerance[NF_PREC_INT8_WO].min_top1_agreement == 0.5 &&
			   cr->tolerance[NF_PREC_FP32].max_kl_mean == 0.3 &&
			   cr->tolerance[NF_PREC_FP32].min_ppl_ratio == nf_gate_defaults_for("fp32")->min_ppl_ratio,
		   "override, then default, then the table, field by field");
		ok(pf->min_prefill_tokens_per_s == 100 && pf->max_ttft_ms == 50, "absolute floors");
		ok(pf->min_decode_speedup[NF_PREC_INT8_WO] == 2.5 && pf->min_decode_speedup[NF_PREC_FP32] == 0 &&
			   pf->max_size_ratio[NF_PREC_INT8_WO] == 0.3 && pf->max_size_ratio[NF_PREC_FP32] == 1.1 &&
			   pf->max_memory_ratio[NF_PREC_INT8_WO] == 0,
		   "ratio bounds per precision, 0 where unset");
		ok(nf_recipe_to_json(&j, r) == 0 && j, "canonical JSON");
		json_t *perf = json_object_get(json_object_get(j, "gates"), "performance");
		json_t *corr = json_object_get(json_object_get(j, "gates"), "correctness");
		ok(json_real_value(json_object_get(json_object_get(perf, "min_decode_speedup"), "int8-wo")) == 2.5 &&
			   !strcmp(json_string_value(json_object_get(corr, "eval_text")), "texts/eval.txt") &&
			   json_is_null(json_object_get(json_object_get(corr, "default"), "min_ppl_ratio")),
		   "the new keys in the canonical JSON, unset defaults as null");
	}
	json_decref(j);
	nf_recipe_free(r);
	unlink(eval);
	rmdir(texts);
	rmdir(dir);
	free(texts);
	free(eval);
}

/* Hostile inputs: refused, quickly (well under a second each). */
static void hostile(const char *name, const char *text, size_t len, const char *want_sub)
{
	double t0 = now_s(), dt;
	int err = parse_mem(text, len, NULL);
	dt = now_s() - t0;
	ok(err == NF_EINPUT && strstr(nf_error_last(), want_sub) && !strncmp(nf_error_last(), "mem.yaml:", 9),
	   "%s refused in %.1f ms: %.120s", name, dt * 1e3, nf_error_last());
	ok(dt < 1.0, "%s: fast", name);
}

static void test_hostile(void)
{
	size_t n = 1 << 21, used = 0;
	char *buf = malloc(n);
	uint32_t x = 12345;

	if (!buf)
		return;
	/* billion laughs */
	used = (size_t)snprintf(buf, n, "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
	for (char k = 'b'; k <= 'j'; k++)
		used += (size_t)snprintf(buf + used, n - used, "%c: &%c [*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c]\n", k, k,
					 k - 1, k - 1, k - 1, k - 1, k - 1, k - 1, k - 1, k - 1, k - 1);
	hostile("billion laughs", buf, used, "anchors and aliases are not allowed");
	hostile("a bare alias", "a: *x\n", 6, "anchors and aliases are not allowed");

	/* 10k-deep nesting, flow and block */
	memset(buf, '[', 10000);
	hostile("10k-deep flow nesting", buf, 10000, "nested deeper than 32 levels");
	used = 0;
	for (int i = 0; i < 40 && used < n - 200; i++)
		used += (size_t)snprintf(buf + used, n - used, "%*sk%d:\n", i, "", i);
	used += (size_t)snprintf(buf + used, n - used, "%*sv: 1\n", 40, "");
	hostile("40-deep block nesting", buf, used, "nested deeper than 32 levels");

	/* over 1 MiB */
	memset(buf, '#', n);
	hostile("2 MiB file", buf, n, "more than the limit of 1048576");

	/* many nodes within the size limit */
	used = (size_t)snprintf(buf, n, "x: [");
	for (int i = 0; i < 20000; i++)
		used += (size_t)snprintf(buf + used, n - used, "1,");
	used += (size_t)snprintf(buf + used, n - used, "1]\n");
	hostile("20k nodes", buf, used, "more than 10000 YAML nodes");

	/* one long scalar */
	used = (size_t)snprintf(buf, n, "x: \"");
	memset(buf + used, 'a', 100000);
	used += 100000;
	buf[used++] = '"';
	hostile("100 KB string", buf, used, "more than the limit of 16384");

	/* random bytes, several seeds */
	for (int s = 0; s < 8; s++) {
		for (size_t i = 0; i < 4096; i++) {
			x = x * 1664525u + 1013904223u;
			buf[i] = (char)(x >> 24);
		}
		hostile("random bytes", buf, 4096, ":");
	}

	/* a second document */
	hostile("two documents", "a: 1\n---\nb: 2\n", 14, "found a second one");
	free(buf);
}

/* serving.speculative: read, and in the digest only when written. */
static void test_speculative(void)
{
	char text[1024], hm[65] = "", hs[65] = "";
	nf_recipe *m = NULL, *r = NULL;
	snprintf(text, sizeof text, "%sserving: {speculative: {method: draft, k: 3, draft_profile: "
		 "cpu-int8-wo-tp1}}\n", minimal);
	ok(parse_mem(text, strlen(text), &r) == 0 && r, "serving.speculative parses");
	ok(r && r->serving.speculative.present && r->serving.speculative.method == NF_RECIPE_SPEC_DRAFT &&
	   r->serving.speculative.k == 3 && !strcmp(r->serving.speculative.draft_profile, "cpu-int8-wo-tp1"),
	   "method, k and draft profile read");
	ok(parse_mem(minimal, strlen(minimal), &m) == 0 && m && !m->serving.speculative.present &&
	   m->serving.speculative.method == NF_RECIPE_SPEC_NONE, "absent: none");
	ok(m && r && nf_recipe_digest(hm, m) == 0 && nf_recipe_digest(hs, r) == 0 && strcmp(hm, hs),
	   "it changes the digest");
	nf_recipe_free(m);
	nf_recipe_free(r);
}

/* serving.max_batch and max_context: what nimserve and plan's fit are sized for. */
static void test_serving_sizes(void)
{
	char text[1024], plain[65] = "", sized[65] = "", same[65] = "";
	nf_recipe *r = NULL;
	ok(parse_mem(minimal, strlen(minimal), &r) == 0 && r && r->serving.max_batch == NF_RECIPE_MAX_BATCH &&
		   r->serving.max_context == 0,
	   "absent: 32 sequences, the model's context");
	ok(r && nf_recipe_digest(plain, r) == 0, "digest of a recipe without them");
	nf_recipe_free(r);
	r = NULL;
	snprintf(text, sizeof text, "%sserving: {max_batch: 32}\n", minimal);
	ok(parse_mem(text, strlen(text), &r) == 0 && nf_recipe_digest(same, r) == 0 && !strcmp(plain, same),
	   "max_batch 32 written: the same recipe, the same digest");
	nf_recipe_free(r);
	r = NULL;
	snprintf(text, sizeof text, "%sserving: {max_batch: 8, max_context: 4096}\n", minimal);
	ok(parse_mem(text, strlen(text), &r) == 0 && r && r->serving.max_batch == 8 &&
		   r->serving.max_context == 4096,
	   "read: %s", nf_error_last());
	ok(r && nf_recipe_digest(sized, r) == 0 && strcmp(plain, sized), "they change the digest");
	nf_recipe_free(r);
	r = NULL;
	snprintf(text, sizeof text, "%sserving: {max_batch: 0}\n", minimal);
	ok(parse_mem(text, strlen(text), &r) != 0 && !r && strstr(nf_error_last(), "serving.max_batch"),
	   "a batch of 0 refused: %s", nf_error_last());
	nf_recipe_free(r);
}

/* The canonical JSON's tables: every tolerance key and every performance
 * bound and ratio the recipe sets comes out under its own key, with its
 * value (a key missing from a table, or two swapped, fails here). */
static void test_json_tables(void)
{
	static const char *tol[] = {"min_token_agreement", "max_logit_rel_error",
				    "min_top1_agreement", "max_kl_mean", "min_ppl_ratio"};
	static const char *bounds[] = {"min_decode_tokens_per_s", "max_peak_memory_mib",
				       "min_prefill_tokens_per_s", "max_ttft_ms"};
	static const char *ratios[] = {"min_decode_speedup", "min_prefill_speedup", "max_ttft_ratio",
				       "max_memory_ratio", "max_size_ratio"};
	char text[2048];
	nf_recipe *r = NULL;
	json_t *j = NULL;
	int n = snprintf(text, sizeof text, "%.*s", (int)(strstr(minimal, "gates:") - minimal), minimal);
	n += snprintf(text + n, sizeof text - (size_t)n,
		      "gates:\n  correctness:\n    prompts: [hi]\n"
		      "    precisions: {int8-wo: {min_token_agreement: 0.5, max_logit_rel_error: 0.25,"
		      " min_top1_agreement: 0.125, max_kl_mean: 0.0625, min_ppl_ratio: 0.75}}\n"
		      "  performance: {prompt: hi, min_decode_tokens_per_s: 1, max_peak_memory_mib: 2,"
		      " min_prefill_tokens_per_s: 3, max_ttft_ms: 4, min_decode_speedup: {int8-wo: 5},"
		      " min_prefill_speedup: {int8-wo: 6}, max_ttft_ratio: {int8-wo: 7},"
		      " max_memory_ratio: {int8-wo: 8}, max_size_ratio: {int8-wo: 9}}\n%s",
		      strstr(minimal, "image:"));
	is_int(parse_mem(text, (size_t)n, &r), 0, "a recipe setting every bound parses");
	ok(r && nf_recipe_to_json(&j, r) == 0 && j, "its canonical JSON");
	json_t *g = json_object_get(j, "gates");
	json_t *t8 = json_object_get(json_object_get(json_object_get(g, "correctness"), "precisions"),
				     "int8-wo");
	json_t *pf = json_object_get(g, "performance");
	double want_tol[] = {0.5, 0.25, 0.125, 0.0625, 0.75};
	for (size_t i = 0; i < 5; i++)
		ok(json_real_value(json_object_get(t8, tol[i])) == want_tol[i], "tolerance %s", tol[i]);
	for (size_t i = 0; i < 4; i++)
		ok(json_real_value(json_object_get(pf, bounds[i])) == (double)(i + 1), "bound %s",
		   bounds[i]);
	for (size_t i = 0; i < 5; i++)
		ok(json_real_value(json_object_get(json_object_get(pf, ratios[i]), "int8-wo")) ==
			   (double)(i + 5),
		   "ratio %s", ratios[i]);
	json_decref(j);
	nf_recipe_free(r);
}

int main(void)
{
	src_dir = tap_env("NF_SRC", ".");
	unsetenv("SOURCE_DATE_EPOCH");
	test_full();
	test_minimal_defaults();
	test_digest();
	test_memory_cases();
	test_bad_files();
	test_gate_keys();
	test_hostile();
	test_speculative();
	test_serving_sizes();
	test_json_tables();
	return done_testing();
}
