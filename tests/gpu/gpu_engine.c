/*
 * gpu_engine.c - make an engine folder a GPU profile's engine for the GPU
 * of this machine (tests/gpu/run.sh): config.json's profile.device set to
 * the SKU of GPU 0, and the cubin of its architecture from `make cuda`'s
 * folder stored as its cuda/ part.  Prints the SKU.
 * Usage: gpu_engine ENGINE_DIR CUDA_BUILD_DIR
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/cuda/cubin.h"
#include "engine/cuda/driver.h"
#include "util/error.h"
#include "util/fs.h"

int main(int argc, char **argv)
{
	nf_cuda_driver *d = NULL;
	nf_cuda_device dev;
	const nf_sku *sku;
	char path[4096], *cubin = NULL;
	size_t len;

	if (argc != 3) {
		fprintf(stderr, "usage: gpu_engine ENGINE_DIR CUDA_BUILD_DIR\n");
		return 2;
	}
	if (nf_cuda_driver_open(&d) || nf_cuda_device_query(&dev, d, 0)) {
		fprintf(stderr, "gpu_engine: %s\n", nf_error_last());
		return 4;
	}
	if (!(sku = nf_cuda_device_sku(&dev))) {
		fprintf(stderr, "gpu_engine: %s is no SKU of the device table\n", dev.name);
		return 4;
	}
	/* sm_90 and sm_100 SKUs run the arch-specific cubins (the Makefile's CUDA_ARCHS) */
	snprintf(path, sizeof path, "%s/%s%s/nf_kernels.cubin", argv[2], sku->cuda_arch,
		 sku->sm == 90 || sku->sm == 100 ? "a" : "");
	if (nf_fs_read_file(&cubin, &len, path, 1u << 30) ||
	    nf_cubin_store(argv[1], sku->cuda_arch, cubin, len, NULL, 0) ||
	    nf_engine_config_set(argv[1], "profile", json_pack("{s:s}", "device", sku->name))) {
		fprintf(stderr, "gpu_engine: %s\n", nf_error_last());
		return 4;
	}
	printf("%s\n", sku->name);
	free(cubin);
	nf_cuda_driver_free(d);
	return 0;
}
