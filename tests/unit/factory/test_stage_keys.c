/*
 * test_stage_keys.c - each stage's key changes exactly when an input it
 * reads changes: one precision's tolerance re-keys that profile's gate (and
 * so the package), not the other profile's gate, the reference or convert;
 * the evaluation prompts re-key the reference and every gate; a source's
 * bytes re-key convert; the package follows its stages and runtime.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "factory/plan.h"
#include "factory/recipe.h"
#include "factory/stage_keys.h"
#include "tests/tap.h"
#include "util/error.h"

#define HEX NF_SHA256_HEX_LEN + 1

static const char source[] = "b0a507e7ad0f5bd3b2df9e0d6a1e7f45b0a507e7ad0f5bd3b2df9e0d6a1e7f45";
static const char tok[] = "037cb335abb2eba8b9c5a6c3c1dc9b0a037cb335abb2eba8b9c5a6c3c1dc9b0a";

/* Every key of one recipe: convert, reference, each profile's gate, package. */
typedef struct keys {
	char convert[HEX], reference[HEX], gate[2][HEX], package[HEX];
} keys;

static int parse_with(nf_recipe **out, const char *prompt, const char *int8_tol, const char *perf)
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
		 "gates:\n"
		 "  correctness:\n"
		 "    prompts: [%s]\n"
		 "    precisions: {int8-wo: {max_logit_rel_error: %s}}\n"
		 "  performance: {prompt: hi, min_decode_tokens_per_s: %s}\n"
		 "image: {repository: a/b, tag: t}\n",
		 prompt, int8_tol, perf);
	*out = NULL;
	return nf_recipe_parse(out, "keys.yaml", text, strlen(text), "/recipes");
}

/* The keys of the recipe, with a stand-in compile key per profile (the
 * compile key is build.c's; here it only has to differ per profile). */
static int keys_of(keys *k, const char *prompt, const char *int8_tol, const char *perf,
		   const char *runtime)
{
	nf_recipe *r = NULL;
	nf_plan *plan = NULL;
	int err = parse_with(&r, prompt, int8_tol, perf);
	if (!err)
		err = nf_plan_make(&plan, r);
	if (!err && plan->n_profiles != 2)
		err = nf_error_set(NF_EINPUT, "%zu profiles", plan->n_profiles);
	if (!err)
		err = nf_stage_key_convert(k->convert, r, source, tok);
	if (!err)
		err = nf_stage_key_reference(k->reference, r, k->convert, "");
	for (int i = 0; !err && i < 2; i++) {
		nf_stage *c = nf_plan_stage(plan, NF_STAGE_COMPILE, i);
		snprintf(c->key, sizeof(c->key), "%064d", i + 1);
		err = nf_stage_key_gate(k->gate[i], r, &plan->profiles[i], c->key, k->reference, 0);
		if (!err)
			memcpy(nf_plan_stage(plan, NF_STAGE_GATE, i)->key, k->gate[i], HEX);
	}
	if (!err)
		err = nf_stage_key_package(k->package, r, plan, runtime);
	nf_plan_free(plan);
	nf_recipe_free(r);
	return err;
}

int main(void)
{
	keys base, same, tol, prompt, perf, runtime;
	char other[HEX];
	nf_recipe *r = NULL;

	plan(22);
	is_int(keys_of(&base, "hi", "0.1", "50", ""), 0, "keys of the base recipe");
	is_int(keys_of(&same, "hi", "0.1", "50", ""), 0, "keys again");
	ok(!memcmp(&base, &same, sizeof(base)), "the same inputs give the same keys");
	ok(strcmp(base.gate[0], base.gate[1]), "each profile's gate has its own key");

	is_int(keys_of(&tol, "hi", "0.2", "50", ""), 0, "keys with another int8-wo tolerance");
	is_str(tol.convert, base.convert, "tolerance: convert keeps its key");
	is_str(tol.reference, base.reference, "tolerance: the reference keeps its key");
	is_str(tol.gate[0], base.gate[0], "tolerance: the fp32 gate keeps its key");
	ok(strcmp(tol.gate[1], base.gate[1]), "tolerance: the int8-wo gate is re-keyed");
	ok(strcmp(tol.package, base.package), "tolerance: the package is re-keyed");

	is_int(keys_of(&prompt, "hello", "0.1", "50", ""), 0, "keys with another prompt");
	is_str(prompt.convert, base.convert, "prompt: convert keeps its key");
	ok(strcmp(prompt.reference, base.reference), "prompt: the reference is re-keyed");
	ok(strcmp(prompt.gate[0], base.gate[0]) && strcmp(prompt.gate[1], base.gate[1]),
	   "prompt: both gates are re-keyed");

	is_int(keys_of(&perf, "hi", "0.1", "60", ""), 0, "keys with another decode bound");
	ok(strcmp(perf.gate[0], base.gate[0]) && strcmp(perf.gate[1], base.gate[1]),
	   "performance bound: both gates are re-keyed");
	is_str(perf.reference, base.reference, "performance bound: the reference keeps its key");

	is_int(keys_of(&runtime, "hi", "0.1", "50", "ab"), 0, "keys with a runtime binary");
	ok(strcmp(runtime.package, base.package) && !strcmp(runtime.gate[1], base.gate[1]),
	   "the runtime re-keys the package only");

	if (!ok(parse_with(&r, "hi", "0.1", "50") == 0, "parse"))
		diag("%s", nf_error_last());
	ok(r && !nf_stage_key_convert(other, r, tok, tok) && strcmp(other, base.convert),
	   "another checkpoint re-keys convert");
	ok(r && !nf_stage_key_reference(other, r, base.convert, source) &&
		   strcmp(other, base.reference),
	   "another evaluation text re-keys the reference");
	nf_recipe_free(r);
	return done_testing();
}
