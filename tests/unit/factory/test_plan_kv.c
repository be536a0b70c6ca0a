/*
 * test_plan_kv.c - a target's `kv_cache` list: parsed and checked in the
 * recipe, multiplying the profiles in the plan; a cache other than the
 * precision's default is in the profile's identity and name ("-kv8"), and
 * a recipe without the key plans exactly the profiles (ids) it did before.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "factory/plan.h"
#include "factory/recipe.h"
#include "tests/tap.h"
#include "util/error.h"

/* A recipe whose cpu target has `kv` as its kv_cache line ("" for none). */
static int parse_with(nf_recipe **out, const char *kv)
{
	char text[1024];
	snprintf(text, sizeof text,
		 "apiVersion: nimfactory/v1\n"
		 "kind: Recipe\n"
		 "model: {name: tiny, source: {path: m.bin}}\n"
		 "build:\n"
		 "  targets:\n"
		 "    - device: cpu\n"
		 "      precisions: [fp32, int8-wo]\n"
		 "%s"
		 "gates: {correctness: {prompts: [hi]}}\n"
		 "image: {repository: a/b, tag: t}\n",
		 kv);
	*out = NULL;
	return nf_recipe_parse(out, "kv.yaml", text, strlen(text), "/recipes");
}

static const nf_profile *find(const nf_plan *p, const char *name)
{
	for (size_t i = 0; i < p->n_profiles; i++)
		if (strcmp(p->profiles[i].name, name) == 0)
			return &p->profiles[i];
	return NULL;
}

static void test_expansion(void)
{
	nf_recipe *r0 = NULL, *r = NULL;
	nf_plan *p0 = NULL, *p = NULL;
	is_int(parse_with(&r0, ""), 0, "recipe without kv_cache: %s", nf_error_last());
	is_int(parse_with(&r, "      kv_cache: [f16, int8]\n"), 0, "recipe with kv_cache [f16, int8]: %s",
	       nf_error_last());
	if (!r0 || !r)
		goto done;
	ok(r0->build.targets[0].n_kv_caches == 0, "no key: no list (each precision's default)");
	ok(r->build.targets[0].n_kv_caches == 2 && r->build.targets[0].kv_caches[1] == NF_KV_INT8,
	   "the list in recipe order");
	if (nf_plan_make(&p0, r0) || nf_plan_make(&p, r)) {
		ok(0, "plan: %s", nf_error_last());
		goto done;
	}
	is_int(p0->n_profiles, 2, "without the key: fp32 and int8-wo");
	is_int(p->n_profiles, 4, "with [f16, int8]: each precision twice");
	const nf_profile *fp32 = find(p0, "cpu-fp32-tp1"), *i8 = find(p0, "cpu-int8-wo-tp1");
	const nf_profile *i8_16 = find(p, "cpu-int8-wo-tp1"), *i8_8 = find(p, "cpu-int8-wo-tp1-kv8");
	const nf_profile *fp32_16 = find(p, "cpu-fp32-tp1-kv16"), *fp32_8 = find(p, "cpu-fp32-tp1-kv8");
	ok(fp32 && i8 && i8_16 && i8_8 && fp32_16 && fp32_8,
	   "names: cpu-int8-wo-tp1 (f16 is int8-wo's default), cpu-int8-wo-tp1-kv8, cpu-fp32-tp1-kv16, cpu-fp32-tp1-kv8");
	if (!(fp32 && i8 && i8_16 && i8_8 && fp32_16 && fp32_8))
		goto done;
	ok(strcmp(i8->id, i8_16->id) == 0 && strstr(i8->canonical_json, "kv_cache") == NULL,
	   "a default cache keeps the profile's id and canonical JSON");
	ok(strcmp(i8_8->id, i8->id) != 0 && strstr(i8_8->canonical_json, "\"kv_cache\":\"int8\"") &&
		   i8_8->kv_explicit && i8_8->kv_cache == NF_KV_INT8,
	   "int8 KV: its own id, \"kv_cache\":\"int8\" in the canonical JSON");
	ok(fp32_16->kv_explicit && fp32_16->kv_cache == NF_KV_F16 && !i8_16->kv_explicit &&
		   i8_16->kv_cache == NF_KV_F16,
	   "f16 is explicit for fp32 (whose default is f32), implicit for int8-wo");
	size_t compiles = 0;
	for (size_t i = 0; i < p->n_stages; i++)
		compiles += p->stages[i].kind == NF_STAGE_COMPILE;
	is_int(compiles, 4, "a compile stage per profile");
	json_t *j = NULL;
	ok(nf_plan_to_json(&j, p) == 0 && j &&
		   strcmp(json_string_value(json_object_get(
				  json_array_get(json_object_get(j, "profiles"), 1), "kv_cache")),
			  "int8") == 0,
	   "plan.json gives each profile's kv_cache");
	json_decref(j);
	char d0[NF_SHA256_HEX_LEN + 1], d1[NF_SHA256_HEX_LEN + 1];
	ok(nf_recipe_digest(d0, r0) == 0 && nf_recipe_digest(d1, r) == 0 && strcmp(d0, d1) != 0,
	   "the list is part of the recipe's digest");
done:
	nf_plan_free(p0);
	nf_plan_free(p);
	nf_recipe_free(r0);
	nf_recipe_free(r);
}

static void refused(const char *line, const char *want, const char *what)
{
	nf_recipe *r = NULL;
	int err = parse_with(&r, line);
	ok(err == NF_EINPUT && strstr(nf_error_last(), want), "%s: %s", what, nf_error_last());
	nf_recipe_free(r);
}

int main(void)
{
	unsetenv("SOURCE_DATE_EPOCH");
	test_expansion();
	refused("      kv_cache: [f16, int4]\n", "kv_cache", "an unknown cache refused");
	refused("      kv_cache: [int8, int8]\n", "listed twice", "a cache listed twice refused");
	refused("      kv_cache: []\n", "an empty list", "an empty list refused");
	refused("      kv_cache: int8\n", "a list", "a scalar refused");
	return done_testing();
}
