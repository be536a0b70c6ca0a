/*
 * driver.c - the CUDA driver loaded with dlopen (see driver.h): one table of
 * the functions we resolve, the device queries, and the match of a device
 * to the SKU table.
 */
#define _GNU_SOURCE /* RTLD_* and dlerror under -std=c11 */
#include "engine/cuda/driver.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

struct nf_cuda_driver {
	void *handle;
	char path[256];
	int version;
	nf_cuda_api api;
};

/* Every function of nf_cuda_api and the name the driver exports it under. */
static const struct {
	const char *symbol;
	size_t offset;
} api_symbols[] = {
#define SYM(field, symbol) {symbol, offsetof(nf_cuda_api, field)}
	SYM(cuInit, "cuInit"),
	SYM(cuDriverGetVersion, "cuDriverGetVersion"),
	SYM(cuGetErrorString, "cuGetErrorString"),
	SYM(cuDeviceGetCount, "cuDeviceGetCount"),
	SYM(cuDeviceGet, "cuDeviceGet"),
	SYM(cuDeviceGetName, "cuDeviceGetName"),
	SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
	SYM(cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
	SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
	SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
	SYM(cuCtxSetCurrent, "cuCtxSetCurrent"),
	SYM(cuCtxSynchronize, "cuCtxSynchronize"),
	SYM(cuModuleLoadData, "cuModuleLoadData"),
	SYM(cuModuleUnload, "cuModuleUnload"),
	SYM(cuModuleGetFunction, "cuModuleGetFunction"),
	SYM(cuMemAlloc, "cuMemAlloc_v2"),
	SYM(cuMemFree, "cuMemFree_v2"),
	SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
	SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
	SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
	SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
	SYM(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
	SYM(cuStreamCreate, "cuStreamCreate"),
	SYM(cuStreamDestroy, "cuStreamDestroy_v2"),
	SYM(cuStreamSynchronize, "cuStreamSynchronize"),
	SYM(cuLaunchKernel, "cuLaunchKernel"),
	SYM(cuEventCreate, "cuEventCreate"),
	SYM(cuEventDestroy, "cuEventDestroy_v2"),
	SYM(cuEventRecord, "cuEventRecord"),
	SYM(cuEventSynchronize, "cuEventSynchronize"),
	SYM(cuEventElapsedTime, "cuEventElapsedTime"),
	SYM(cuStreamBeginCapture, "cuStreamBeginCapture_v2"),
	SYM(cuStreamEndCapture, "cuStreamEndCapture"),
	SYM(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"),
	SYM(cuGraphLaunch, "cuGraphLaunch"),
	SYM(cuGraphExecDestroy, "cuGraphExecDestroy"),
	SYM(cuGraphDestroy, "cuGraphDestroy"),
#undef SYM
};

#define N_SYMBOLS (sizeof api_symbols / sizeof api_symbols[0])

static int resolve_all(nf_cuda_driver *d)
{
	for (size_t i = 0; i < N_SYMBOLS; i++) {
		void *sym = dlsym(d->handle, api_symbols[i].symbol);
		if (!sym)
			return nf_error_set(NF_EENV, "%s lacks %s (a driver older than CUDA 11.4?)",
					    d->path, api_symbols[i].symbol);
		/* POSIX: a function's address fits a void * (dlsym's contract) */
		memcpy((char *)&d->api + api_symbols[i].offset, &sym, sizeof sym);
	}
	/* optional: the CUDA backend instantiates a graph again without it */
	void *update = dlsym(d->handle, "cuGraphExecUpdate_v2");
	memcpy(&d->api.cuGraphExecUpdate, &update, sizeof update);
	return 0;
}

const char *nf_cuda_error_text(char *buf, size_t len, const nf_cuda_driver *d, nf_cu_result rc)
{
	const char *text = NULL;
	if (d && d->api.cuGetErrorString && d->api.cuGetErrorString(rc, &text) != 0)
		text = NULL;
	if (text)
		snprintf(buf, len, "CUDA error %d (%s)", rc, text);
	else
		snprintf(buf, len, "CUDA error %d", rc);
	return buf;
}

static int driver_call_failed(const nf_cuda_driver *d, const char *what, nf_cu_result rc)
{
	char text[160];
	return nf_error_set(NF_EENV, "%s: %s failed: %s", d->path, what,
			    nf_cuda_error_text(text, sizeof text, d, rc));
}

int nf_cuda_driver_open(nf_cuda_driver **out)
{
	const char *path = getenv("NF_LIBCUDA");
	nf_cuda_driver *d = calloc(1, sizeof *d);
	nf_cu_result rc;
	int err = 0;

	*out = NULL;
	if (!d)
		return nf_error_set(NF_ENOMEM, "cuda: out of memory");
	snprintf(d->path, sizeof d->path, "%s", path && *path ? path : "libcuda.so.1");
	d->handle = dlopen(d->path, RTLD_NOW | RTLD_LOCAL);
	if (!d->handle) {
		const char *why = dlerror();
		err = nf_error_set(NF_EENV, "no NVIDIA driver: %s", why ? why : d->path);
		goto done;
	}
	if ((err = resolve_all(d)))
		goto done;
	if ((rc = d->api.cuInit(0)) != 0) {
		err = driver_call_failed(d, "cuInit", rc);
		goto done;
	}
	if ((rc = d->api.cuDriverGetVersion(&d->version)) != 0) {
		err = driver_call_failed(d, "cuDriverGetVersion", rc);
		goto done;
	}
done:
	if (err) {
		nf_cuda_driver_free(d);
		return err;
	}
	*out = d;
	return 0;
}

void nf_cuda_driver_free(nf_cuda_driver *d)
{
	if (!d)
		return;
	if (d->handle)
		dlclose(d->handle);
	free(d);
}

const nf_cuda_api *nf_cuda_driver_api(const nf_cuda_driver *d) { return &d->api; }
const char *nf_cuda_driver_path(const nf_cuda_driver *d) { return d->path; }
int nf_cuda_driver_version(const nf_cuda_driver *d) { return d->version; }

int nf_cuda_device_count(int *count, const nf_cuda_driver *d)
{
	nf_cu_result rc = d->api.cuDeviceGetCount(count);
	if (rc != 0)
		return driver_call_failed(d, "cuDeviceGetCount", rc);
	if (*count < 0)
		*count = 0;
	return 0;
}

int nf_cuda_context_retain(nf_cu_context *out, const nf_cuda_driver *d, int ordinal)
{
	nf_cu_device dev = 0;
	nf_cu_result rc;

	*out = NULL;
	if ((rc = d->api.cuDeviceGet(&dev, ordinal)) != 0)
		return driver_call_failed(d, "cuDeviceGet", rc);
	if ((rc = d->api.cuDevicePrimaryCtxRetain(out, dev)) != 0)
		return driver_call_failed(d, "cuDevicePrimaryCtxRetain", rc);
	if ((rc = d->api.cuCtxSetCurrent(*out)) != 0) {
		d->api.cuDevicePrimaryCtxRelease(dev);
		*out = NULL;
		return driver_call_failed(d, "cuCtxSetCurrent", rc);
	}
	return 0;
}

void nf_cuda_context_release(const nf_cuda_driver *d, int ordinal)
{
	nf_cu_device dev = 0;
	if (d && d->api.cuDeviceGet(&dev, ordinal) == 0)
		d->api.cuDevicePrimaryCtxRelease(dev);
}

static int read_attribute(int *value, const nf_cuda_driver *d, nf_cu_device dev, int attr)
{
	nf_cu_result rc = d->api.cuDeviceGetAttribute(value, attr, dev);
	char what[64];
	if (rc == 0)
		return 0;
	snprintf(what, sizeof what, "cuDeviceGetAttribute(%d)", attr);
	return driver_call_failed(d, what, rc);
}

int nf_cuda_device_query(nf_cuda_device *out, const nf_cuda_driver *d, int ordinal)
{
	nf_cu_device dev = 0;
	size_t bytes = 0;
	nf_cu_result rc;
	int err;

	memset(out, 0, sizeof *out);
	out->ordinal = ordinal;
	if ((rc = d->api.cuDeviceGet(&dev, ordinal)) != 0)
		return driver_call_failed(d, "cuDeviceGet", rc);
	if ((rc = d->api.cuDeviceGetName(out->name, (int)sizeof out->name - 1, dev)) != 0)
		return driver_call_failed(d, "cuDeviceGetName", rc);
	out->name[sizeof out->name - 1] = '\0';
	if ((rc = d->api.cuDeviceTotalMem(&bytes, dev)) != 0)
		return driver_call_failed(d, "cuDeviceTotalMem", rc);
	out->memory_bytes = bytes;
	if ((err = read_attribute(&out->major, d, dev, NF_CU_ATTR_COMPUTE_CAPABILITY_MAJOR)) ||
	    (err = read_attribute(&out->minor, d, dev, NF_CU_ATTR_COMPUTE_CAPABILITY_MINOR)) ||
	    (err = read_attribute(&out->sm_count, d, dev, NF_CU_ATTR_MULTIPROCESSOR_COUNT)) ||
	    (err = read_attribute(&out->shared_per_block, d, dev,
				  NF_CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)))
		return err;
	return 0;
}

/* ---- which SKU a device is ---- */

/* Whether `word` (lowercase) appears in `name` as a whole word, ignoring
 * case: "l4" is in "NVIDIA L4" but not in "NVIDIA L40S". */
static int has_word(const char *name, const char *word, size_t n)
{
	for (const char *p = name; *p; p++) {
		size_t i = 0;
		if (p != name && isalnum((unsigned char)p[-1]))
			continue;
		while (i < n && p[i] && tolower((unsigned char)p[i]) == word[i])
			i++;
		if (i == n && !isalnum((unsigned char)p[n]))
			return 1;
	}
	return 0;
}

/* The SKU's family, the name before its first '-' ("h100" of "h100-sxm"). */
static size_t family_of(char *buf, size_t len, const nf_sku *sku)
{
	size_t n = strcspn(sku->name, "-");
	if (n == 0 || n >= len)
		return 0;
	memcpy(buf, sku->name, n);
	buf[n] = '\0';
	return n;
}

static int is_pcie(const nf_sku *sku) { return strstr(sku->name, "pcie") != NULL; }

/* Whether the device may be this SKU: compute capability, family, variant. */
static int may_be(const nf_cuda_device *dev, const nf_sku *sku)
{
	char fam[32];
	size_t n;
	if (sku->kind != NF_SKU_GPU || sku->sm != dev->major * 10 + dev->minor)
		return 0;
	if (!(n = family_of(fam, sizeof fam, sku)) || !has_word(dev->name, fam, n))
		return 0;
	/* "NVIDIA H100 PCIe" says so; the SXM parts' names do not ("NVIDIA H100 80GB HBM3") */
	return is_pcie(sku) == has_word(dev->name, "pcie", 4);
}

const nf_sku *nf_cuda_device_sku(const nf_cuda_device *dev)
{
	const nf_sku *best = NULL;
	double best_gap = 0, gib = (double)dev->memory_bytes / (1024.0 * 1024 * 1024);

	for (size_t i = 0; i < nf_sku_count(); i++) {
		const nf_sku *s = nf_sku_at(i);
		double gap;
		if (!may_be(dev, s))
			continue;
		/* "a100-sxm-40gb" or "-80gb": the table's GiB beside the device's */
		gap = s->memory_gib > gib ? s->memory_gib - gib : gib - s->memory_gib;
		if (!best || gap < best_gap) {
			best = s;
			best_gap = gap;
		}
	}
	return best;
}

int nf_cuda_device_check(int *exact, const nf_cuda_device *dev, const nf_sku *want)
{
	int cc = dev->major * 10 + dev->minor;
	*exact = 0;
	if (!want || want->kind != NF_SKU_GPU)
		return nf_error_set(NF_EINPUT, "%s is not a GPU of the device table",
				    want ? want->name : "(null)");
	if (cc != want->sm)
		return nf_error_set(NF_EENV,
				    "GPU %d is %s (sm_%d), the profile's %s needs %s: its cubin will not load",
				    dev->ordinal, dev->name, cc, want->name, want->cuda_arch);
	*exact = nf_cuda_device_sku(dev) == want;
	return 0;
}

/* ---- one call for profile selection ---- */

/* "GPU 0 NVIDIA A10G (sm_86), GPU 1 ..." for the message when none fits. */
static void describe_devices(char *buf, size_t len, const nf_cuda_device *devs, int n)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; i < n && used < len; i++) {
		int w = snprintf(buf + used, len - used, "%sGPU %d %s (sm_%d)", i ? ", " : "",
				 devs[i].ordinal, devs[i].name, devs[i].major * 10 + devs[i].minor);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

#define MAX_DEVICES 16

static int pick_device(nf_cuda_device *out, int *exact, const nf_cuda_device *devs, int n,
		       const nf_sku *want)
{
	int found = -1;
	for (int i = 0; i < n; i++) {
		int e = 0;
		if (nf_cuda_device_check(&e, &devs[i], want) == 0 && (found < 0 || (e && !*exact))) {
			found = i;
			*exact = e;
		}
	}
	if (found < 0) {
		char list[512];
		describe_devices(list, sizeof list, devs, n);
		return nf_error_set(NF_EENV, "no GPU here for %s (%s): %s", want->name,
				    want->cuda_arch, list);
	}
	*out = devs[found];
	return 0;
}

int nf_cuda_find_device(nf_cuda_device *out, int *exact, const nf_sku *want)
{
	nf_cuda_driver *d = NULL;
	nf_cuda_device devs[MAX_DEVICES];
	int n = 0, err;

	*exact = 0;
	if (!want || want->kind != NF_SKU_GPU)
		return nf_error_set(NF_EINPUT, "%s is not a GPU of the device table",
				    want ? want->name : "(null)");
	if ((err = nf_cuda_driver_open(&d)) || (err = nf_cuda_device_count(&n, d)))
		goto done;
	if (n == 0) {
		err = nf_error_set(NF_EENV, "%s: the driver sees no GPU, %s needs one", d->path,
				   want->name);
		goto done;
	}
	if (n > MAX_DEVICES)
		n = MAX_DEVICES;
	for (int i = 0; i < n && !err; i++)
		err = nf_cuda_device_query(&devs[i], d, i);
	if (!err)
		err = pick_device(out, exact, devs, n, want);
done:
	nf_cuda_driver_free(d);
	return err;
}
