/*
 * gpu.c - GPU detection for profile selection, through the CUDA driver
 * loader (engine/cuda/driver.h): the same dlopen, table and messages that
 * `nimfactory run` and the engine's cubin loading use.
 */
#include "serve/gpu.h"

#include <stdio.h>
#include <string.h>

#include "engine/cuda/driver.h"
#include "util/error.h"
#include "util/banned.h"

/* ", GPU 0 NVIDIA H100 80GB HBM3 = h100-sxm" for each GPU found. */
static void describe(char *buf, size_t len, const nf_gpu_list *l)
{
	size_t used = strlen(buf);
	for (int i = 0; i < l->count && used < len; i++) {
		const nf_gpu *g = &l->gpus[i];
		int w = snprintf(buf + used, len - used, "%sGPU %d %s = %s", i ? ", " : ": ", i, g->name,
				 g->sku ? g->sku : "no SKU of the table");
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

int nf_gpu_detect(nf_gpu_list *out)
{
	nf_cuda_driver *d = NULL;
	int n = 0;

	memset(out, 0, sizeof *out);
	if (nf_cuda_driver_open(&d) || nf_cuda_device_count(&n, d)) {
		snprintf(out->note, sizeof out->note, "%s: no GPUs", nf_error_last());
		goto done;
	}
	for (int i = 0; i < n && out->count < NF_GPU_MAX; i++) {
		nf_cuda_device dev;
		nf_gpu *g = &out->gpus[out->count];
		const nf_sku *sku;
		if (nf_cuda_device_query(&dev, d, i))
			continue; /* a device the driver will not describe is one we cannot use */
		snprintf(g->name, sizeof g->name, "%s", dev.name);
		g->major = dev.major;
		g->minor = dev.minor;
		sku = nf_cuda_device_sku(&dev);
		g->sku = sku ? sku->name : NULL;
		out->count++;
	}
	snprintf(out->note, sizeof out->note, "%d GPU(s) found through the NVIDIA driver (%s, CUDA %d)",
		 out->count, nf_cuda_driver_path(d), nf_cuda_driver_version(d));
	describe(out->note, sizeof out->note, out);
done:
	nf_cuda_driver_free(d);
	return 0;
}
