/*
 * nf_serve_fixture.c - test fixtures for nimserve.
 *
 *   nf_serve_fixture build OUTDIR [PRECISION] [TEMPLATE] [GGUF NAME]
 *       builds stories260K ($NF_SHARED/models/stories260K), or the GGUF file
 *       served as NAME (its own tokenizer and chat template), into an engine under
 *       OUTDIR/engines/<id> and writes OUTDIR/model_manifest.yaml naming it,
 *       plus a GPU profile (h100-sxm, sm_90) that can never fit a machine without one.
 *   nf_serve_fixture generate ENGINE_DIR MAX_TOKENS PROMPT
 *       prints nf_generate's greedy output (BOS + prompt, argmax, stop at EOS),
 *       the reference a served greedy completion must equal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/checkpoint.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/banned.h"

static int print_piece(void *user, int token, const char *piece, size_t len)
{
	(void)user;
	(void)token;
	fwrite(piece, 1, len, stdout);
	return 0;
}

static int build(const char *out, const char *prec_name, const char *tmpl, const char *gguf,
		 const char *name)
{
	const char *shared = getenv("NF_SHARED") ? getenv("NF_SHARED") : "/work/shared";
	char *ckpt = nf_strdup_printf("%s/models/stories260K/stories260K.bin", shared);
	char *tok = nf_strdup_printf("%s/models/stories260K/tok512.bin", shared);
	char *profile_json = NULL, *engine_dir = NULL, *manifest = NULL, *yaml = NULL;
	char id[NF_SHA256_HEX_LEN + 1], gpu_id[NF_SHA256_HEX_LEN + 1];
	nf_model *m = NULL;
	nf_tokenizer *gguf_tok = NULL;
	nf_engine_build_opts bo;
	int rc = 0;

	memset(&bo, 0, sizeof bo);
	if (!ckpt || !tok || (rc = nf_precision_parse(&bo.precision, prec_name)) < 0)
		goto fail;
	profile_json = nf_strdup_printf("{\"arch\":\"\",\"device\":\"cpu\",\"precision\":\"%s\",\"tensor_parallel\":1}",
					prec_name);
	if (!profile_json || (rc = nf_sha256_hex(id, profile_json, strlen(profile_json))) < 0)
		goto fail;
	if ((rc = nf_sha256_hex(gpu_id, "gpu-h100", 8)) < 0)
		goto fail;
	engine_dir = nf_strdup_printf("%s/engines/%s", out, id);
	manifest = nf_strdup_printf("%s/model_manifest.yaml", out);
	if (!engine_dir || !manifest ||
	    (rc = nf_ckpt_load(&m, gguf ? gguf : ckpt, gguf ? NF_CKPT_GGUF : NF_CKPT_LLAMA2C)) < 0)
		goto fail;
	if (gguf && (rc = nf_ckpt_load_tokenizer(&gguf_tok, gguf, NF_CKPT_GGUF, NULL, m->cfg.vocab_size)) < 0)
		goto fail;
	bo.tokenizer_path = gguf ? NULL : tok;
	bo.tokenizer = gguf_tok;
	bo.profile_json = profile_json;
	bo.threads = 1;
	bo.autotune = 0;
	if ((rc = nf_fs_mkdir_p(out, 0755)) < 0 || (rc = nf_engine_build(engine_dir, m, &bo)) < 0)
		goto fail;
	yaml = nf_strdup_printf(
		"apiVersion: nimfactory/v1\n"
		"kind: ModelManifest\n"
		"model: {name: %s, family: llama, version: \"1.0.0\"}\n"
		"recipe_digest: sha256:%064d\n"
		"serving:\n"
		"  chat_template: %s\n"
		"  precision_preference: [fp8-e4m3, %s, fp32]\n"
		"  tensor_parallel_preference: [1]\n"
		"profiles:\n"
		"  - id: %s\n"
		"    name: h100-sxm-fp8-e4m3-tp1\n"
		"    device: h100-sxm\n"
		"    arch: sm_90\n"
		"    precision: fp8-e4m3\n"
		"    tensor_parallel: 1\n"
		"    engine: engines/%s\n"
		"    gate: skipped\n"
		"  - id: %s\n"
		"    name: cpu-%s-tp1\n"
		"    device: cpu\n"
		"    arch: \"\"\n"
		"    precision: %s\n"
		"    tensor_parallel: 1\n"
		"    engine: engines/%s\n"
		"    gate: passed\n",
		name, 0, tmpl, prec_name, gpu_id, gpu_id, id, prec_name, prec_name, id);
	if (!yaml || (rc = nf_fs_write_atomic(manifest, yaml, strlen(yaml), 0644)) < 0)
		goto fail;
	printf("%s\n", manifest);
	rc = 0;
	goto done;
fail:
	if (rc == 0)
		rc = nf_error_set(NF_ENOMEM, "out of memory");
	fprintf(stderr, "nf_serve_fixture: %s\n", nf_error_last());
done:
	nf_model_free(m);
	nf_tokenizer_free(gguf_tok);
	free(ckpt);
	free(tok);
	free(profile_json);
	free(engine_dir);
	free(manifest);
	free(yaml);
	return rc;
}

static int generate(const char *dir, const char *max_tokens, const char *prompt)
{
	nf_engine *e = NULL;
	nf_gen_params p;
	int rc;
	memset(&p, 0, sizeof p);
	p.max_tokens = (int)strtol(max_tokens, NULL, 10);
	p.temperature = 0;
	p.top_p = 1;
	p.stop_at_eos = 1;
	if ((rc = nf_engine_open(&e, dir, 1)) == 0)
		rc = nf_generate(e, prompt, strlen(prompt), &p, print_piece, NULL, NULL);
	if (rc < 0)
		fprintf(stderr, "nf_serve_fixture: %s\n", nf_error_last());
	nf_engine_free(e);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "build"))
		return build(argv[2], argc > 3 ? argv[3] : "fp32", argc > 4 ? argv[4] : "plain",
			     argc > 6 ? argv[5] : NULL, argc > 6 ? argv[6] : "stories260k") < 0 ? 1 : 0;
	if (argc == 5 && !strcmp(argv[1], "generate"))
		return generate(argv[2], argv[3], argv[4]) < 0 ? 1 : 0;
	fprintf(stderr, "usage: nf_serve_fixture build OUTDIR [PRECISION] [TEMPLATE] [GGUF NAME]\n"
			"       nf_serve_fixture generate ENGINE_DIR MAX_TOKENS PROMPT\n");
	return 2;
}
