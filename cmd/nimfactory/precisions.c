/* precisions.c - `nimfactory precisions`: the precision table, as the
 * engine builds it (engine/precision.c, engine/wformat.h) and as each
 * device serves it (engine/sku.c). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cmd/nimfactory/commands.h"
#include "engine/engine.h"
#include "engine/sku.h"
#include "engine/wformat.h"
#include "util/banned.h"

static const char *const act_names[] = {
	[NF_ACT_F32] = "float32",
	[NF_ACT_Q8] = "int8 per vector",
	[NF_ACT_F8] = "fp8-e4m3, calibrated scale",
};

/* The devices that serve p, comma-separated, into buf. */
static const char *devices(char *buf, size_t cap, nf_precision p)
{
	size_t at = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < nf_sku_count(); i++) {
		const nf_sku *s = nf_sku_at(i);
		if (!nf_sku_supports(s, p))
			continue;
		int n = snprintf(buf + at, cap - at, "%s%s", at ? "," : "", s->name);
		if (n < 0 || (size_t)n >= cap - at)
			break;
		at += (size_t)n;
	}
	return buf;
}

static json_t *precision_json(nf_precision p)
{
	const nf_precision_info *i = nf_precision_info_of(p);
	const nf_wformat *f = nf_wformat_of(i->weights);
	json_t *devs = json_array();
	for (size_t k = 0; k < nf_sku_count(); k++)
		if (nf_sku_supports(nf_sku_at(k), p))
			json_array_append_new(devs, json_string(nf_sku_at(k)->name));
	return json_pack("{s:s, s:s, s:i, s:i, s:s, s:b, s:b, s:s, s:o}", "name", i->name, "weights",
			 f->name, "bits", (int)f->bits, "group", i->group, "activations",
			 act_names[f->act], "awq", i->awq, "calibrated", i->calibrated,
			 "llama_cpp_nearest", i->llama_type, "devices", devs);
}

int nf_cmd_precisions(int argc, char **argv)
{
	int as_json = argc == 2 && !strcmp(argv[1], "--json");
	char buf[512];
	if (argc > 1 && !as_json) {
		fprintf(stderr, "usage: nimfactory precisions [--json]\n");
		return 2;
	}
	if (as_json) {
		json_t *a = json_array();
		for (int p = 0; p < NF_PREC_COUNT; p++)
			json_array_append_new(a, precision_json((nf_precision)p));
		json_dumpf(a, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		putchar('\n');
		json_decref(a);
		return 0;
	}
	printf("%-10s %-9s %4s %5s  %-26s %-6s %s\n", "precision", "weights", "bits", "group",
	       "activations", "llama", "devices");
	for (int p = 0; p < NF_PREC_COUNT; p++) {
		const nf_precision_info *i = nf_precision_info_of((nf_precision)p);
		const nf_wformat *f = nf_wformat_of(i->weights);
		printf("%-10s %-9s %4u %5d  %-26s %-6s %s\n", i->name, f->name, f->bits, i->group,
		       act_names[f->act], i->llama_type, devices(buf, sizeof buf, (nf_precision)p));
	}
	return 0;
}
