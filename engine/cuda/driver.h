/*
 * driver.h - the CUDA driver, loaded at run time with dlopen, so that the
 * tools and the image need no CUDA toolkit: the host's libcuda.so.1 comes in
 * through the NVIDIA container toolkit, as for NIM (docs/cuda.md).
 *
 * The driver-API functions nimfactory uses are resolved once into one table
 * (nf_cuda_api), declared here with our own minimal types, so nothing here
 * needs cuda.h.  Every failure - no libcuda, a libcuda without a function we
 * need, no device, a GPU that is not the profile's SKU, a cubin the driver
 * rejects - is one line in nf_error_last() saying why, so the caller can say
 * it and fall back to the CPU profile.
 *
 * NF_LIBCUDA, when set, names the library to open instead of libcuda.so.1
 * (a driver outside the loader's path, or the tests' fake driver).
 */
#ifndef NF_ENGINE_CUDA_DRIVER_H
#define NF_ENGINE_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "engine/sku.h"

/* The driver API's types, as the ABI has them (cuda.h): handles are opaque
 * pointers, a device an int, device memory a 64-bit address. */
typedef int nf_cu_result;      /* CUresult: 0 is CUDA_SUCCESS */
typedef int nf_cu_device;      /* CUdevice */
typedef uint64_t nf_cu_ptr;    /* CUdeviceptr */
typedef struct nf_cu_ctx_st *nf_cu_context;
typedef struct nf_cu_mod_st *nf_cu_module;
typedef struct nf_cu_func_st *nf_cu_function;
typedef struct nf_cu_stream_st *nf_cu_stream;
typedef struct nf_cu_event_st *nf_cu_event;
typedef struct nf_cu_graph_st *nf_cu_graph;
typedef struct nf_cu_graph_exec_st *nf_cu_graph_exec;

/* CUdevice_attribute values we read (cuda.h's enum). */
enum {
	NF_CU_ATTR_MULTIPROCESSOR_COUNT = 16,
	NF_CU_ATTR_COMPUTE_CAPABILITY_MAJOR = 75,
	NF_CU_ATTR_COMPUTE_CAPABILITY_MINOR = 76,
	NF_CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};
enum { NF_CU_STREAM_CAPTURE_MODE_GLOBAL = 0 };
/* CUgraphExecUpdateResultInfo (cuda.h, CUDA 12.0): why an update failed. */
typedef struct nf_cu_graph_update_info {
	int result;
	void *error_node;
	void *error_from_node;
} nf_cu_graph_update_info;

/* The functions, under their exported (versioned) names: cuMemAlloc is
 * cuMemAlloc_v2 in every driver since CUDA 3.2, and so on. */
typedef struct nf_cuda_api {
	nf_cu_result (*cuInit)(unsigned flags);
	nf_cu_result (*cuDriverGetVersion)(int *version);
	nf_cu_result (*cuGetErrorString)(nf_cu_result err, const char **text);
	nf_cu_result (*cuDeviceGetCount)(int *count);
	nf_cu_result (*cuDeviceGet)(nf_cu_device *dev, int ordinal);
	nf_cu_result (*cuDeviceGetName)(char *name, int len, nf_cu_device dev);
	nf_cu_result (*cuDeviceGetAttribute)(int *value, int attr, nf_cu_device dev);
	nf_cu_result (*cuDeviceTotalMem)(size_t *bytes, nf_cu_device dev);
	nf_cu_result (*cuDevicePrimaryCtxRetain)(nf_cu_context *ctx, nf_cu_device dev);
	nf_cu_result (*cuDevicePrimaryCtxRelease)(nf_cu_device dev);
	nf_cu_result (*cuCtxSetCurrent)(nf_cu_context ctx);
	nf_cu_result (*cuCtxSynchronize)(void);
	nf_cu_result (*cuModuleLoadData)(nf_cu_module *mod, const void *image);
	nf_cu_result (*cuModuleUnload)(nf_cu_module mod);
	nf_cu_result (*cuModuleGetFunction)(nf_cu_function *fn, nf_cu_module mod, const char *name);
	nf_cu_result (*cuMemAlloc)(nf_cu_ptr *ptr, size_t bytes);
	nf_cu_result (*cuMemFree)(nf_cu_ptr ptr);
	nf_cu_result (*cuMemcpyHtoD)(nf_cu_ptr dst, const void *src, size_t bytes);
	nf_cu_result (*cuMemcpyDtoH)(void *dst, nf_cu_ptr src, size_t bytes);
	nf_cu_result (*cuMemcpyHtoDAsync)(nf_cu_ptr dst, const void *src, size_t bytes, nf_cu_stream s);
	nf_cu_result (*cuMemcpyDtoHAsync)(void *dst, nf_cu_ptr src, size_t bytes, nf_cu_stream s);
	nf_cu_result (*cuMemcpyDtoDAsync)(nf_cu_ptr dst, nf_cu_ptr src, size_t bytes, nf_cu_stream s);
	nf_cu_result (*cuStreamCreate)(nf_cu_stream *s, unsigned flags);
	nf_cu_result (*cuStreamDestroy)(nf_cu_stream s);
	nf_cu_result (*cuStreamSynchronize)(nf_cu_stream s);
	nf_cu_result (*cuLaunchKernel)(nf_cu_function fn, unsigned gx, unsigned gy, unsigned gz,
				       unsigned bx, unsigned by, unsigned bz, unsigned shared_bytes,
				       nf_cu_stream s, void **params, void **extra);
	nf_cu_result (*cuEventCreate)(nf_cu_event *ev, unsigned flags);
	nf_cu_result (*cuEventDestroy)(nf_cu_event ev);
	nf_cu_result (*cuEventRecord)(nf_cu_event ev, nf_cu_stream s);
	nf_cu_result (*cuEventSynchronize)(nf_cu_event ev);
	nf_cu_result (*cuEventElapsedTime)(float *ms, nf_cu_event start, nf_cu_event end);
	/* CUDA graph capture of a decode step (CUDA 10+; every driver we serve has them) */
	nf_cu_result (*cuStreamBeginCapture)(nf_cu_stream s, int mode);
	nf_cu_result (*cuStreamEndCapture)(nf_cu_stream s, nf_cu_graph *graph);
	nf_cu_result (*cuGraphInstantiateWithFlags)(nf_cu_graph_exec *exec, nf_cu_graph graph,
						    unsigned long long flags);
	nf_cu_result (*cuGraphLaunch)(nf_cu_graph_exec exec, nf_cu_stream s);
	nf_cu_result (*cuGraphExecDestroy)(nf_cu_graph_exec exec);
	nf_cu_result (*cuGraphDestroy)(nf_cu_graph graph);
	/* Optional (CUDA 12.0+; NULL when the driver lacks it): update an
	 * instantiated graph from a new capture of the same nodes, cheaper
	 * than instantiating again.  info: a CUgraphExecUpdateResultInfo. */
	nf_cu_result (*cuGraphExecUpdate)(nf_cu_graph_exec exec, nf_cu_graph graph,
					  nf_cu_graph_update_info *info);
} nf_cuda_api;

/* An opened driver: the library handle and its resolved table. */
typedef struct nf_cuda_driver nf_cuda_driver;

/* Open NF_LIBCUDA or libcuda.so.1, resolve every function of nf_cuda_api and
 * call cuInit.  NF_EENV with one line when there is no driver, it lacks a
 * function, or cuInit fails.  Caller owns *out (nf_cuda_driver_free). */
int nf_cuda_driver_open(nf_cuda_driver **out);
void nf_cuda_driver_free(nf_cuda_driver *d); /* NULL is fine */

/* The resolved table (borrowed; lives as long as d). */
const nf_cuda_api *nf_cuda_driver_api(const nf_cuda_driver *d);
/* The library opened ("libcuda.so.1" or NF_LIBCUDA's path; borrowed). */
const char *nf_cuda_driver_path(const nf_cuda_driver *d);
/* cuDriverGetVersion: 12040 for CUDA 12.4. */
int nf_cuda_driver_version(const nf_cuda_driver *d);

/* "CUDA error 209 (no kernel image is available for execution on the
 * device)" into buf; the driver's text when it has one. */
const char *nf_cuda_error_text(char *buf, size_t len, const nf_cuda_driver *d, nf_cu_result rc);

/* Make device `ordinal`'s primary context current on this thread (retained:
 * release it with nf_cuda_context_release), so that modules, memory and
 * streams can be made.  NF_EENV with one line when the driver refuses. */
int nf_cuda_context_retain(nf_cu_context *out, const nf_cuda_driver *d, int ordinal);
void nf_cuda_context_release(const nf_cuda_driver *d, int ordinal);

/* What a device is, read from the driver. */
typedef struct nf_cuda_device {
	int ordinal;
	char name[128];        /* "NVIDIA H100 80GB HBM3" */
	int major, minor;      /* compute capability */
	int sm_count;          /* streaming multiprocessors */
	int shared_per_block;  /* opt-in shared memory per block, bytes */
	uint64_t memory_bytes;
} nf_cuda_device;

/* The number of devices (0 is not an error). */
int nf_cuda_device_count(int *count, const nf_cuda_driver *d);
/* Read device `ordinal`; NF_EENV with one line when the driver refuses. */
int nf_cuda_device_query(nf_cuda_device *out, const nf_cuda_driver *d, int ordinal);

/* The SKU of the device table this device is: the same compute capability,
 * the SKU's family ("h100" of "h100-sxm") a word of the device's name, the
 * PCIe variant only when the name says PCIe, and of what is left the one
 * whose memory is nearest.  NULL when none is. */
const nf_sku *nf_cuda_device_sku(const nf_cuda_device *dev);

/* Whether the device can run an engine built for `want` (its cubin's arch):
 * 0 when the compute capability is the SKU's, and then *exact says whether
 * the device is that very SKU (not only the same architecture).  Otherwise
 * NF_EENV, one line naming the device and what the profile needs. */
int nf_cuda_device_check(int *exact, const nf_cuda_device *dev, const nf_sku *want);

/* Find a device on this machine for a profile built for `want`: open the
 * driver, look at every device, keep the first that passes
 * nf_cuda_device_check (preferring the exact SKU).  0 and *out filled, or
 * NF_EENV with the one line that says why none can (no driver, no device,
 * the devices present and what they are).  The driver is closed again. */
int nf_cuda_find_device(nf_cuda_device *out, int *exact, const nf_sku *want);

#endif
