/*
 * inspect.c - `nimfactory inspect PATH`: what a thing is and how it was made.
 *   an engine folder   model, precision, quantization, kernels, provenance
 *   an OCI layout      images, layers, sizes, digests, annotations
 *   a build output     its profiles with gate verdicts, then its OCI layout
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/nimfactory/commands.h"
#include "cmd/nimfactory/registry_cli.h"
#include "engine/arch.h"
#include "engine/engine.h"
#include "images/inspect.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

static const char inspect_usage[] = "usage: nimfactory inspect ENGINE_DIR|OCI_DIR|OUT_DIR|REGISTRY_REF [--json] [--insecure]\n";

static const char *str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "-";
}

static int inspect_engine(const char *dir, int as_json)
{
	nf_engine *e = NULL;
	json_t *cfg = NULL, *tactics = NULL;
	char *tpath = nf_path_join(dir, "tactics.json");
	int err = nf_engine_open(&e, dir, 1);

	if (err)
		goto done;
	cfg = json_loads(nf_engine_config_json(e), 0, NULL);
	if (!cfg) {
		err = nf_error_set(NF_EINPUT, "%s/config.json: not JSON", dir);
		goto done;
	}
	if (as_json) {
		json_dumpf(cfg, stdout, JSON_SORT_KEYS | JSON_INDENT(2));
		fputc('\n', stdout);
		goto done;
	}
	const nf_model_config *c = nf_engine_config(e);
	const json_t *prov = json_object_get(cfg, "provenance");
	const json_t *quant = json_object_get(cfg, "quantization");
	printf("engine      %s\n", dir);
	printf("model       %s: dim %d, hidden %d, %d layers, %d heads (%d kv), vocab %d, context %d\n",
	       nf_arch_get(c->arch)->name, c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size,
	       c->max_seq_len);
	printf("precision   %s", nf_precision_name(nf_engine_precision(e)));
	if (json_is_object(quant))
		printf(" (%s weights, %s scales, activations %s)", str(quant, "weights"),
		       str(quant, "granularity"), str(quant, "activations"));
	printf("\nweights     %llu bytes read per token\n",
	       (unsigned long long)nf_engine_weight_bytes(e));
	printf("kernels     %s on this CPU\n", nf_engine_kernel_name(e));
	tactics = tpath ? json_load_file(tpath, 0, NULL) : NULL;
	if (json_is_object(tactics))
		printf("tactics     %zu GEMM shapes, %s (best family when built: %s)\n",
		       json_array_size(json_object_get(tactics, "tactics")), str(tactics, "method"),
		       str(tactics, "cpu_best"));
	if (json_is_object(prov)) {
		printf("built by    %s\n", str(prov, "tool"));
		printf("profile     %s\n", str(prov, "profile_id"));
		printf("source      sha256:%s\n", str(prov, "source_sha256"));
		printf("tokenizer   sha256:%s\n", str(prov, "tokenizer_sha256"));
	}
done:
	json_decref(cfg);
	json_decref(tactics);
	free(tpath);
	nf_engine_free(e);
	return err;
}

static int inspect_layout(const char *dir, int as_json)
{
	json_t *report = NULL;
	int err = nf_oci_inspect(&report, dir);
	if (!err) {
		if (as_json) {
			json_dumpf(report, stdout, JSON_SORT_KEYS | JSON_INDENT(2));
			fputc('\n', stdout);
		} else {
			err = nf_oci_inspect_print(stdout, report);
		}
	}
	json_decref(report);
	return err;
}

static int inspect_output(const char *dir, int as_json)
{
	char *plan_path = nf_path_join(dir, "plan.json"), *oci = nf_path_join(dir, "oci");
	json_error_t jerr;
	json_t *plan = plan_path ? json_load_file(plan_path, 0, &jerr) : NULL, *p;
	size_t i;
	int err = 0;

	if (!json_is_object(plan)) {
		err = nf_error_set(NF_EINPUT, "%s: %s", plan_path ? plan_path : dir,
				   plan ? "not a plan" : jerr.text);
		goto done;
	}
	if (as_json) {
		json_dumpf(plan, stdout, JSON_SORT_KEYS | JSON_INDENT(2));
		fputc('\n', stdout);
		goto done;
	}
	printf("build output %s (recipe sha256:%s, gates %s)\n\n", dir, str(plan, "recipe_digest"),
	       str(plan, "verdict"));
	json_array_foreach(json_object_get(plan, "profiles"), i, p)
		printf("  %-24s %-8s %s\n", str(p, "name"), str(p, "gate"), str(p, "id"));
	json_array_foreach(json_object_get(plan, "dropped"), i, p)
		printf("  dropped %s %s: %s\n", str(p, "device"), str(p, "precision"), str(p, "reason"));
	printf("\n");
	if (oci && nf_fs_is_dir(oci))
		err = inspect_layout(oci, 0);
	else
		printf("no image (a gate failed)\n");
done:
	json_decref(plan);
	free(plan_path);
	free(oci);
	return err;
}

int nf_cmd_inspect(int argc, char **argv)
{
	static const struct option options[] = {
		{"json", no_argument, NULL, 'J'},
		{"insecure", no_argument, NULL, 'k'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int as_json = 0, insecure = 0, c, err;
	char *probe = NULL;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
		switch (c) {
		case 'J': as_json = 1; break;
		case 'k': insecure = 1; break;
		case 'h': fputs(inspect_usage, stdout); return NF_EXIT_OK;
		default: fputs(inspect_usage, stderr); return NF_EXIT_INPUT;
		}
	}
	if (optind + 1 != argc) {
		fputs(inspect_usage, stderr);
		return NF_EXIT_INPUT;
	}
	const char *path = argv[optind];
	if ((probe = nf_path_join(path, "config.json")) && nf_fs_exists(probe))
		err = inspect_engine(path, as_json);
	else if (free(probe), (probe = nf_path_join(path, "oci-layout")) && nf_fs_exists(probe))
		err = inspect_layout(path, as_json);
	else if (free(probe), (probe = nf_path_join(path, "plan.json")) && nf_fs_exists(probe))
		err = inspect_output(path, as_json);
	else if (nf_cli_is_registry_ref(path))
		err = nf_cli_inspect_ref(path, insecure, as_json);
	else
		err = nf_error_set(NF_EINPUT,
				   "%s: not an engine (config.json), an OCI layout (oci-layout) or a build output (plan.json)",
				   path);
	free(probe);
	return err ? nf_cmd_fail("inspect", err) : NF_EXIT_OK;
}
