/*
 * gpu_profile.c - a GPU profile built where its GPU is not (gpu_profile.h).
 */
#include "factory/gpu_profile.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cubin.h"
#include "engine/cuda/driver.h"
#include "engine/roofline.h"
#include "engine/sku.h"
#include "engine/wformat.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define ROOFLINE_MAX_BYTES (1u << 20)

/* The GEMV's static occupancy on the SKU from the kernels' table, if any. */
static int occupancy_of(double *occ, const nf_sku *sku, nf_precision p)
{
	const char *table = getenv("NF_CUDA_KERNELS_TABLE");
	const nf_wformat *f = nf_wformat_of(nf_precision_info_of(p)->weights);
	*occ = 1;
	if (!table || !*table || !f)
		return 0;
	int found = nf_roofline_occupancy(occ, table, f->name, sku->cuda_arch);
	return found < 0 ? found : 0;
}

int nf_gpu_profile_model(const char *dir, const nf_model_config *cfg, const nf_profile *p)
{
	const nf_sku *sku = nf_sku_find(p->device);
	nf_roofline r;
	char *text = NULL;
	double occ;
	int err;

	if ((err = occupancy_of(&occ, sku, p->precision)) ||
	    (err = nf_roofline_model(&r, cfg, p->precision, p->kv_cache, sku, cfg->max_seq_len, occ)) ||
	    (err = nf_roofline_json(&text, &r)))
		return nf_error_wrap(err, "%s: roofline model", p->name);
	err = nf_engine_part_add(dir, NF_GPU_ROOFLINE_FILE, text, strlen(text));
	free(text);
	return err;
}

/* "no h100-sxm here", or the GPU that is here and why it still is not run. */
static void where(char *buf, size_t len, const nf_profile *p)
{
	const nf_sku *sku = nf_sku_find(p->device);
	nf_cuda_device dev;
	int exact = 0;
	if (!sku || nf_cuda_find_device(&dev, &exact, sku) != 0)
		snprintf(buf, len, "no %s here", p->device);
	else
		snprintf(buf, len, "%s GPU %d (%s) is here, but this nimfactory has no CUDA backend to run it",
			 exact ? "its" : "a compatible", dev.ordinal, dev.name);
}

/* The summary line of the engine's roofline.json, into buf ("" when none). */
static void modelled(char *buf, size_t len, const char *dir)
{
	char *path = nf_path_join(dir, NF_GPU_ROOFLINE_FILE), *text = NULL;
	size_t n;
	json_t *j = NULL;
	buf[0] = '\0';
	if (path && nf_fs_exists(path) && nf_fs_read_file(&text, &n, path, ROOFLINE_MAX_BYTES) == 0 &&
	    (j = json_loads(text, 0, NULL)) && json_string_value(json_object_get(j, "summary")))
		snprintf(buf, len, "%s", json_string_value(json_object_get(j, "summary")));
	json_decref(j);
	free(text);
	free(path);
}

int nf_gpu_profile_gate(nf_gate_result **out, const nf_profile *p, const char *dir,
			nf_gate_kind kind)
{
	char here[256], model[160], reason[512];

	where(here, sizeof here, p);
	if (kind == NF_GATE_PERFORMANCE) {
		modelled(model, sizeof model, dir ? dir : "");
		snprintf(reason, sizeof reason, "%s; %s", here,
			 model[0] ? model : "no roofline model in the engine");
	} else {
		snprintf(reason, sizeof reason, "%s: its kernels are not held to the float32 reference",
			 here);
	}
	return nf_gate_skipped(out, p, kind, reason);
}
