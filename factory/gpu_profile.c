/*
 * gpu_profile.c - a GPU profile's roofline model, kernels, provenance and
 * gates (gpu_profile.h); its measured tactics are gpu_profile_tune.c's.
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
	/* measured tactics (nf_gpu_profile_tune) where the very GPU is: an
	 * engine compiled without it is not reused where it is */
	nf_cuda_device dev;
	char why[256];
	if (!err && nf_gpu_profile_device(&dev, p, why, sizeof why) &&
	    json_object_set_new(prov, "cuda_tuned_on", json_string(dev.name)))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	free(cubin);
	free(ptx);
	return err;
}

int nf_gpu_profile_gates_here(const nf_profile *p, char *why, size_t len)
{
	nf_cuda_device dev;
	if (!nf_gpu_profile_device(&dev, p, why, len))
		return 0;
	if (nf_gpu_driver_is_fake()) {
		snprintf(why, len, "GPU %d (%s) is the tests' fake CUDA driver %s: no kernel runs there",
			 dev.ordinal, dev.name, getenv("NF_LIBCUDA"));
		return 0;
	}
	return 1;
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

	nf_gpu_profile_gates_here(p, here, sizeof here);
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

/* The value of r's metric `name`, or -1 when r has none. */
static double metric(const nf_gate_result *r, const char *name)
{
	for (size_t i = 0; i < r->n_metrics; i++)
		if (!strcmp(r->metrics[i].name, name))
			return r->metrics[i].value;
	return -1;
}

int nf_gpu_profile_perf_roofline(nf_gate_result *r, const char *dir)
{
	char *path = nf_path_join(dir, NF_GPU_ROOFLINE_FILE), *text = NULL;
	json_t *j = NULL, *b1;
	double tps = metric(r, "decode_tokens_per_s"), bw, bytes;
	nf_gate_metric *m;
	size_t n;
	int err = path ? 0 : nf_error_set(NF_ENOMEM, "out of memory");

	if (!err && (err = nf_fs_read_file(&text, &n, path, ROOFLINE_MAX_BYTES)) == 0 &&
	    !(j = json_loadb(text, n, 0, NULL)))
		err = nf_error_set(NF_EINPUT, "%s is not JSON", path);
	b1 = json_array_get(json_object_get(j, "decode"), 0); /* batch 1: what the gate decodes */
	bw = json_number_value(json_object_get(j, "mem_bw_gbs")) * 1e9;
	bytes = json_number_value(json_object_get(b1, "bytes"));
	if (!err && (tps < 0 || bw <= 0 || bytes <= 0))
		err = nf_error_set(NF_EINPUT, "%s: no batch-1 bytes or bandwidth, or no decode measured",
				   path);
	if (!err && !(m = realloc(r->metrics, (r->n_metrics + 3) * sizeof *m)))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	if (!err) {
		r->metrics = m;
		m += r->n_metrics;
		nf_gate_metric_set(&m[0], "hbm_fraction", "ratio", tps * bytes / bw, NF_GATE_CMP_NONE, 0);
		nf_gate_metric_set(&m[1], "modelled_decode_tokens_per_s", "tokens/s",
				   json_number_value(json_object_get(b1, "tokens_per_s")),
				   NF_GATE_CMP_NONE, 0);
		nf_gate_metric_set(&m[2], "modelled_hbm_fraction", "ratio",
				   json_number_value(json_object_get(b1, "hbm_fraction")),
				   NF_GATE_CMP_NONE, 0);
		r->n_metrics += 3;
	}
	json_decref(j);
	free(text);
	free(path);
	return err;
}
