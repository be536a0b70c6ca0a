/*
 * fuzz_serve_manifest.c - libFuzzer target for nimserve's model_manifest.yaml
 * reader (libyaml, strict schema), then profile fitting and selection over
 * what it accepted, with a fake GPU list chosen by the first byte.
 *
 * Properties checked: any bytes either parse into a manifest whose fields
 * are within their documented limits, or fail with NF_EINPUT / NF_ENOMEM and
 * a message that names the file ("fuzz/model_manifest.yaml:..."); selection
 * returns an index in range or an error, never crashes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/gpu.h"
#include "serve/manifest.h"
#include "serve/profile.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WHAT "fuzz/model_manifest.yaml"

static void fake_gpus(nf_gpu_list *g, unsigned sel)
{
	static const struct { const char *name; int major, minor; } kinds[] = {
		{"NVIDIA H100 80GB HBM3", 9, 0}, {"NVIDIA A100-SXM4-80GB", 8, 0},
		{"NVIDIA L4", 8, 9}, {"NVIDIA B200", 10, 0}};
	memset(g, 0, sizeof *g);
	g->count = (int)(sel % 5); /* 0..4 GPUs */
	for (int i = 0; i < g->count; i++) {
		unsigned k = (sel >> (2 + 2 * i)) & 3;
		snprintf(g->gpus[i].name, sizeof g->gpus[i].name, "%s", kinds[k].name);
		g->gpus[i].major = kinds[k].major;
		g->gpus[i].minor = kinds[k].minor;
	}
	snprintf(g->note, sizeof g->note, "fuzz: %d fake GPUs", g->count);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	nf_manifest *m = NULL;
	nf_gpu_list gpus;
	nf_profile_fit *fits = NULL;
	unsigned sel;
	int rc;

	if (size < 1)
		return 0;
	sel = data[0];
	data++;
	size--;
	rc = nf_manifest_parse(&m, (const char *)data, size, WHAT);
	if (rc < 0) {
		if (m)
			abort();
		if (rc != NF_EINPUT && rc != NF_ENOMEM)
			abort();
		if (rc == NF_EINPUT && strncmp(nf_error_last(), WHAT ":", sizeof WHAT) != 0)
			abort();
		return 0;
	}
	if (!m || !m->model_name || !m->recipe_digest || m->n_profiles < 1 ||
	    m->n_profiles > NF_MANIFEST_MAX_PROFILES || m->n_precision_pref > NF_MANIFEST_MAX_PREFS ||
	    m->n_tp_pref > NF_MANIFEST_MAX_PREFS || strlen(m->recipe_digest) != 71)
		abort();
	for (size_t i = 0; i < m->n_profiles; i++) {
		const nf_manifest_profile *p = &m->profiles[i];
		if (!p->id || strlen(p->id) != 64 || !p->name || !p->device || !p->arch ||
		    !p->precision || !p->engine || !p->engine_path || p->tensor_parallel < 1 ||
		    p->tensor_parallel > NF_MANIFEST_MAX_TP || strlen(p->name) > NF_MANIFEST_MAX_STR)
			abort();
	}
	fake_gpus(&gpus, sel);
	fits = calloc(m->n_profiles, sizeof *fits);
	if (fits) {
		char why[1536];
		size_t chosen = (size_t)-1;
		nf_profile_evaluate(fits, m, &gpus, 0);
		rc = nf_profile_select(&chosen, why, sizeof why, m, &gpus, NULL, 0);
		if (rc == 0 && (chosen >= m->n_profiles || !fits[chosen].fits))
			abort();
		/* forcing by the first profile's name */
		rc = nf_profile_select(&chosen, why, sizeof why, m, &gpus, m->profiles[0].name, 0);
		if (rc == 0 && chosen >= m->n_profiles)
			abort();
		{
			FILE *devnull = fopen("/dev/null", "w");
			if (devnull) {
				nf_profile_print(devnull, m, &gpus, 0);
				fclose(devnull);
			}
		}
	}
	free(fits);
	nf_manifest_free(m);
	return 0;
}
