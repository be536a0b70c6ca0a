/* test_manifest.c - model_manifest.yaml rendering: valid YAML with the fields nimserve reads. */
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "factory/manifest.h"
#include "util/error.h"
#include "tests/tap.h"

/* Parse the YAML back and return 1 when it is one well-formed document. */
static int parses(const char *text, size_t len)
{
	yaml_parser_t p;
	yaml_document_t doc;
	int good;
	yaml_parser_initialize(&p);
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	good = yaml_parser_load(&p, &doc) && yaml_document_get_root_node(&doc) != NULL;
	if (good)
		yaml_document_delete(&doc);
	yaml_parser_delete(&p);
	return good;
}

int main(void)
{
	nf_profile profiles[2];
	memset(profiles, 0, sizeof(profiles));
	memset(profiles[0].id, 'a', 64);
	memcpy(profiles[0].name, "cpu-fp32-tp1", 13);
	memcpy(profiles[0].device, "cpu", 4);
	profiles[0].precision = NF_PREC_FP32;
	profiles[0].tensor_parallel = 1;
	profiles[0].verdict = NF_VERDICT_PASSED;
	memset(profiles[1].id, 'b', 64);
	memcpy(profiles[1].name, "h100-sxm-fp8-e4m3-tp2", 22);
	memcpy(profiles[1].device, "h100-sxm", 9);
	memcpy(profiles[1].arch, "sm_90", 6);
	profiles[1].precision = NF_PREC_FP8_E4M3;
	profiles[1].tensor_parallel = 2;
	profiles[1].verdict = NF_VERDICT_SKIPPED;

	const char *prefs[] = {"int8-wo", "fp32"};
	int tps[] = {1};
	char digest[65];
	memset(digest, 'c', 64);
	digest[64] = 0;
	nf_manifest_info info = {
		.model_name = "stories260k", .model_family = "llama", .model_version = "1.0.0",
		.recipe_digest = digest, .chat_template = "plain",
		.precision_preference = prefs, .n_precision_preference = 2,
		.tp_preference = tps, .n_tp_preference = 1, .engine_prefix = "engines",
	};
	char *yaml = NULL;
	size_t len = 0;
	is_int(nf_manifest_render(&yaml, &len, &info, profiles, 2), 0, "render");
	ok(yaml && len == strlen(yaml), "length matches");
	ok(parses(yaml, len), "output parses as YAML");
	ok(strstr(yaml, "apiVersion: \"nimfactory/v1\"") != NULL, "apiVersion");
	ok(strstr(yaml, "kind: \"ModelManifest\"") != NULL, "kind");
	ok(strstr(yaml, "recipe_digest: \"sha256:cccc") != NULL, "recipe digest with algorithm");
	ok(strstr(yaml, "precision_preference: [\"int8-wo\", \"fp32\"]") != NULL, "preferences in order");
	ok(strstr(yaml, "engine: \"engines/aaaa") != NULL, "engine path relative to the manifest");
	ok(strstr(yaml, "tensor_parallel: 2") != NULL, "tp as an integer");
	ok(strstr(yaml, "arch: \"sm_90\"") != NULL, "arch for GPU profiles");
	ok(strstr(yaml, "gate: \"skipped\"") != NULL, "verdict recorded");
	char *again = NULL;
	size_t len2 = 0;
	nf_manifest_render(&again, &len2, &info, profiles, 2);
	ok(again && len2 == len && !memcmp(yaml, again, len), "rendering is deterministic");
	free(yaml);
	free(again);

	/* serving.max_batch and max_context: written when the recipe sets them */
	info.max_batch = 8;
	info.max_context = 1024;
	is_int(nf_manifest_render(&yaml, &len, &info, profiles, 2), 0, "render with serving sizes");
	ok(yaml && parses(yaml, len) && strstr(yaml, "\n  max_batch: 8\n  max_context: 1024\n"),
	   "serving.max_batch and max_context written");
	free(yaml);
	info.max_batch = info.max_context = 0;

	/* serving.speculative: written when named, its draft profile one of the image's */
	info.spec_method = "draft";
	info.spec_k = 3;
	info.spec_draft_profile = "h100-sxm-fp8-e4m3-tp2";
	yaml = NULL;
	is_int(nf_manifest_render(&yaml, &len, &info, profiles, 2), 0, "render with speculation");
	ok(yaml && parses(yaml, len) &&
	   strstr(yaml, "  speculative: {method: \"draft\", k: 3, draft_profile: \"h100-sxm-fp8-e4m3-tp2\"}\n"),
	   "serving.speculative written after the preferences");
	free(yaml);
	yaml = NULL;
	info.spec_draft_profile = "cpu-int4-tp1";
	is_int(nf_manifest_render(&yaml, &len, &info, profiles, 2), NF_EINPUT,
	       "a draft profile the image lacks refused");
	ok(yaml == NULL && strstr(nf_error_last(), "'cpu-int4-tp1' is not one of the image's profiles"),
	   "and said: %s", nf_error_last());
	return done_testing();
}
