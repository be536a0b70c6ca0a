/*
 * gpu.c - GPU detection through the CUDA driver API reached with dlopen:
 * cuInit, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName,
 * cuDeviceComputeCapability.  No CUDA headers needed.
 */
#include "serve/gpu.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "util/banned.h"

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_count_fn)(int *);
typedef int (*cu_get_fn)(int *, int);
typedef int (*cu_name_fn)(char *, int, int);
typedef int (*cu_cc_fn)(int *, int *, int);

int nf_gpu_detect(nf_gpu_list *out)
{
	void *h = NULL;
	cu_init_fn cu_init;
	cu_count_fn cu_count;
	cu_get_fn cu_get;
	cu_name_fn cu_name;
	cu_cc_fn cu_cc;
	int n = 0, rc;

	memset(out, 0, sizeof *out);
	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(out->note, sizeof out->note, "no NVIDIA driver (%s): no GPUs",
			 e ? e : "libcuda.so.1 not found");
		goto done;
	}
	*(void **)&cu_init = dlsym(h, "cuInit");
	*(void **)&cu_count = dlsym(h, "cuDeviceGetCount");
	*(void **)&cu_get = dlsym(h, "cuDeviceGet");
	*(void **)&cu_name = dlsym(h, "cuDeviceGetName");
	*(void **)&cu_cc = dlsym(h, "cuDeviceComputeCapability");
	if (!cu_init || !cu_count || !cu_get || !cu_name || !cu_cc) {
		snprintf(out->note, sizeof out->note, "libcuda.so.1 lacks the driver API: no GPUs");
		goto done;
	}
	if ((rc = cu_init(0)) != 0) {
		snprintf(out->note, sizeof out->note, "cuInit failed (CUDA error %d): no GPUs", rc);
		goto done;
	}
	if ((rc = cu_count(&n)) != 0 || n < 0) {
		snprintf(out->note, sizeof out->note, "cuDeviceGetCount failed (CUDA error %d): no GPUs", rc);
		goto done;
	}
	for (int i = 0; i < n && out->count < NF_GPU_MAX; i++) {
		nf_gpu *g = &out->gpus[out->count];
		int dev = 0;
		if (cu_get(&dev, i) != 0 || cu_name(g->name, (int)sizeof g->name - 1, dev) != 0 ||
		    cu_cc(&g->major, &g->minor, dev) != 0)
			continue;
		g->name[sizeof g->name - 1] = '\0';
		out->count++;
	}
	snprintf(out->note, sizeof out->note, "%d GPU(s) found through the NVIDIA driver", out->count);
done:
	if (h)
		dlclose(h);
	return 0;
}
