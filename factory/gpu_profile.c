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
#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/banned.h"

#define ROOFLINE_MAX_BYTES (1u << 20)

/* The GEMV's static occupancy on the SKU from the kernels' table, if any. */
static int occupancy_of(double *occ, const nf_sku *sku, nf_precision p)
{
	const char *table = getenv("NF_CUDA_KERNELS_TABLE");
	*occ = 1;
	if (!table || !*table)
		return 0;
	int found = nf_roofline_occupancy(occ, table, nf_roofline_gemv_kernel(p), sku->cuda_arch);
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

#define KERNELS_MAX_BYTES (256u << 20)

/* The lowest architecture's PTX of the kernels folder (the Makefile's
 * compute_NN/nf_kernels.ptx), a new path, or NULL. */
static char *lowest_ptx(const char *kdir)
{
	for (int cc = 50; cc <= 130; cc++) {
		char *path = nf_strdup_printf("%s/compute_%d/nf_kernels.ptx", kdir, cc);
		if (!path || nf_fs_exists(path))
			return path;
		free(path);
	}
	return NULL;
}

/* The cubin of NF_CUDA_KERNELS_DIR for p's arch (NULL when the variable is
 * unset) and the PTX beside it (NULL when none): new paths.  The folder is
 * the Makefile's build/cuda: <arch>/nf_kernels.cubin, sm_90a's for sm_90. */
static int kernel_files(char **cubin, char **ptx, const nf_profile *p)
{
	const char *kdir = getenv("NF_CUDA_KERNELS_DIR");
	*cubin = *ptx = NULL;
	if (!kdir || !*kdir)
		return 0;
	for (int suffixed = 0; suffixed < 2 && !*cubin; suffixed++) {
		char *path = nf_strdup_printf("%s/%s%s/nf_kernels.cubin", kdir, p->arch,
					      suffixed ? "a" : "");
		if (!path)
			return nf_error_set(NF_ENOMEM, "out of memory");
		if (nf_fs_exists(path))
			*cubin = path;
		else
			free(path);
	}
	if (!*cubin)
		return nf_error_set(NF_EENV, "NF_CUDA_KERNELS_DIR %s has no %s (nor %sa) cubin for %s: "
				    "make cuda builds them", kdir, p->arch, p->arch, p->name);
	*ptx = lowest_ptx(kdir);
	return 0;
}

int nf_gpu_profile_kernels(const char *dir, const nf_profile *p)
{
	char *cubin = NULL, *ptx = NULL, *cdata = NULL, *pdata = NULL;
	size_t clen = 0, plen = 0;
	int err = kernel_files(&cubin, &ptx, p);

	if (!err && cubin)
		err = nf_fs_read_file(&cdata, &clen, cubin, KERNELS_MAX_BYTES);
	if (!err && ptx)
		err = nf_fs_read_file(&pdata, &plen, ptx, KERNELS_MAX_BYTES);
	if (!err && cdata)
		err = nf_cubin_store(dir, p->arch, cdata, clen, pdata, plen);
	free(cubin);
	free(ptx);
	free(cdata);
	free(pdata);
	return err ? nf_error_wrap(err, "%s: CUDA kernels", p->name) : 0;
}

static int add_file_digest(json_t *prov, const char *key, const char *path)
{
	char hex[NF_SHA256_HEX_LEN + 1];
	int err;
	if (!path)
		return 0;
	if ((err = nf_sha256_file_hex(hex, path)))
		return err;
	return json_object_set_new(prov, key, json_string(hex))
		       ? nf_error_set(NF_ENOMEM, "out of memory") : 0;
}

int nf_gpu_profile_provenance(json_t *prov, const nf_profile *p)
{
	const char *table = getenv("NF_CUDA_KERNELS_TABLE");
	char *cubin = NULL, *ptx = NULL;
	int err = kernel_files(&cubin, &ptx, p);
	if (!err)
		err = add_file_digest(prov, "cuda_cubin_sha256", cubin);
	if (!err)
		err = add_file_digest(prov, "cuda_ptx_sha256", ptx);
	if (!err && table && *table && nf_fs_exists(table))
		err = add_file_digest(prov, "cuda_occupancy_table_sha256", table);
	free(cubin);
	free(ptx);
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
