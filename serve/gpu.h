/*
 * gpu.h - which NVIDIA GPUs this machine has, asked of the driver through
 * engine/cuda/driver.h (libcuda loaded with dlopen, so nimserve starts where
 * there is no driver at all; NF_LIBCUDA names another library).
 */
#ifndef NF_SERVE_GPU_H
#define NF_SERVE_GPU_H

#define NF_GPU_MAX 16

typedef struct nf_gpu {
	char name[128]; /* "NVIDIA H100 80GB HBM3" */
	int major, minor; /* compute capability */
	const char *sku;  /* the device table's name for it ("h100-sxm"), or NULL */
} nf_gpu;

typedef struct nf_gpu_list {
	nf_gpu gpus[NF_GPU_MAX];
	int count;
	char note[256]; /* how detection went, for the log ("no NVIDIA driver: ...") */
} nf_gpu_list;

/* Detect GPUs.  A missing driver or a failing cuInit is not an error: the
 * list is empty and `note` says why.  Always returns 0. */
int nf_gpu_detect(nf_gpu_list *out);

#endif
