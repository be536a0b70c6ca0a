/*
 * libcuda.c - a fake CUDA driver for the tests of engine/cuda/driver.c, built
 * as build/tests/fakes/libcuda.so.1 and loaded through NF_LIBCUDA.  It
 * exports every function the loader resolves, with canned answers: one
 * device, "NVIDIA H100 80GB HBM3", sm_90, 80 GiB, 132 SMs.  The environment
 * changes the answers, so one library serves every path of the tests:
 *   FAKE_CUDA_INIT_ERROR=N  cuInit returns N
 *   FAKE_CUDA_COUNT=N       devices (0: none)
 *   FAKE_CUDA_NAME, FAKE_CUDA_CC (90 for sm_90), FAKE_CUDA_MEM_GIB
 * cuModuleLoadData takes a CUDA ELF (EM_CUDA, 190) whose e_flags name the
 * device's compute capability, as a cubin's do; anything else is
 * rejected as the driver would (200 invalid image, 209 no binary for GPU).
 * Memory is host memory; kernels, streams, events and graphs do nothing:
 * no kernel runs here, and the exported nf_fake_cuda_driver says so to
 * nimfactory, whose gates then stay skipped.
 * What the host asked for is what the tests check:
 *   FAKE_CUDA_LOG=PATH          one line per call appended to PATH:
 *                               "alloc BYTES", "htod BYTES", "dtoh BYTES",
 *                               "dtod-async BYTES",
 *                               "launch NAME GX GY GZ BX BY BZ", "capture begin",
 *                               "capture end", "instantiate", "update", "graph launch"
 *   FAKE_CUDA_FAIL_ALLOC=N      the N-th cuMemAlloc (from 1) since it was set fails
 *                               (out of memory)
 *   FAKE_CUDA_FAIL_LAUNCH=NAME  every launch of kernel NAME fails (700)
 *   FAKE_CUDA_FAIL_DTOD=1       every device-to-device copy fails (700)
 *   FAKE_CUDA_ELAPSED_MS=A,B,.. what cuEventElapsedTime answers, call after
 *                               call, from the start again after the last
 *                               (unset: 1.0)
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_log.h"

typedef int CUresult;

enum {
	OK = 0,
	ERR_INVALID_VALUE = 1,
	ERR_NO_DEVICE = 100,
	ERR_INVALID_DEVICE = 101,
	ERR_INVALID_IMAGE = 200,
	ERR_NO_BINARY_FOR_GPU = 209,
	ERR_NOT_FOUND = 500,
};

/* Marks this library as the fake: nimfactory's gates never run on it
 * (factory/gpu_profile.h, nf_gpu_driver_is_fake). */
int nf_fake_cuda_driver = 1;

static int env_int(const char *name, int fallback)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : fallback;
}

static int cc(void) { return env_int("FAKE_CUDA_CC", 90); }


static int allocs_made;

CUresult cuInit(unsigned flags) { (void)flags; return env_int("FAKE_CUDA_INIT_ERROR", 0); }
CUresult cuDriverGetVersion(int *v) { *v = 12040; return OK; }

CUresult cuGetErrorString(CUresult e, const char **s)
{
	switch (e) {
	case OK: *s = "no error"; return OK;
	case 3: *s = "initialization error"; return OK;
	case ERR_NO_DEVICE: *s = "no CUDA-capable device is detected"; return OK;
	case ERR_INVALID_IMAGE: *s = "device kernel image is invalid"; return OK;
	case ERR_NO_BINARY_FOR_GPU: *s = "no kernel image is available for execution on the device"; return OK;
	case ERR_NOT_FOUND: *s = "named symbol not found"; return OK;
	case 2: *s = "out of memory"; return OK;
	case 700: *s = "an illegal memory access was encountered"; return OK;
	}
	*s = NULL;
	return ERR_INVALID_VALUE;
}

CUresult cuDeviceGetCount(int *n) { *n = env_int("FAKE_CUDA_COUNT", 1); return OK; }

CUresult cuDeviceGet(int *dev, int ordinal)
{
	if (ordinal < 0 || ordinal >= env_int("FAKE_CUDA_COUNT", 1))
		return ERR_INVALID_DEVICE;
	*dev = ordinal;
	return OK;
}

CUresult cuDeviceGetName(char *name, int len, int dev)
{
	const char *n = getenv("FAKE_CUDA_NAME");
	(void)dev;
	snprintf(name, (size_t)len, "%s", n ? n : "NVIDIA H100 80GB HBM3");
	return OK;
}

CUresult cuDeviceGetAttribute(int *v, int attr, int dev)
{
	(void)dev;
	switch (attr) {
	case 16: *v = 132; return OK;            /* multiprocessors */
	case 75: *v = cc() / 10; return OK;      /* compute capability major */
	case 76: *v = cc() % 10; return OK;      /* minor */
	case 97: *v = 227 * 1024; return OK;     /* opt-in shared memory per block */
	}
	return ERR_INVALID_VALUE;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev)
{
	(void)dev;
	*bytes = (size_t)env_int("FAKE_CUDA_MEM_GIB", 80) << 30;
	return OK;
}

static int context_token;
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) { (void)dev; *ctx = &context_token; return OK; }
CUresult cuDevicePrimaryCtxRelease_v2(int dev) { (void)dev; return OK; }
CUresult cuCtxSetCurrent(void *ctx) { return ctx == &context_token ? OK : ERR_INVALID_VALUE; }
CUresult cuCtxSynchronize(void) { return OK; }

/* A module is a copy of nothing: a distinct token per load. */
CUresult cuModuleLoadData(void **mod, const void *image)
{
	const unsigned char *p = image;
	uint16_t machine;
	uint32_t flags;
	if (memcmp(p, "\177ELF", 4) != 0 || p[4] != 2)
		return ERR_INVALID_IMAGE;
	memcpy(&machine, p + 18, 2);
	memcpy(&flags, p + 48, 4);
	if (machine != 190)
		return ERR_INVALID_IMAGE;
	/* the SM: e_flags' second byte from ELF ABI version 8 (CUDA 12.8), the first before */
	if ((int)(p[8] >= 8 ? (flags >> 8) & 0xff : flags & 0xff) != cc())
		return ERR_NO_BINARY_FOR_GPU;
	*mod = malloc(1);
	return *mod ? OK : ERR_INVALID_VALUE;
}
CUresult cuModuleUnload(void *mod) { free(mod); return OK; }
CUresult cuModuleGetFunction(void **fn, void *mod, const char *name)
{
	(void)mod;
	*fn = (void *)name;
	return strncmp(name, "nf_", 3) == 0 ? OK : ERR_NOT_FOUND;
}

CUresult cuMemAlloc_v2(uint64_t *ptr, size_t n)
{
	int fail_at = env_int("FAKE_CUDA_FAIL_ALLOC", 0);
	allocs_made = fail_at ? allocs_made + 1 : 0;
	if (fail_at && allocs_made == fail_at)
		return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
	*ptr = (uint64_t)(uintptr_t)calloc(1, n ? n : 1);
	logf_("alloc %zu", n);
	return *ptr ? OK : 2;
}
CUresult cuMemFree_v2(uint64_t ptr) { free((void *)(uintptr_t)ptr); return OK; }
CUresult cuMemcpyHtoD_v2(uint64_t d, const void *s, size_t n) { logf_("htod %zu", n); memcpy((void *)(uintptr_t)d, s, n); return OK; }
CUresult cuMemcpyDtoH_v2(void *d, uint64_t s, size_t n) { logf_("dtoh %zu", n); memcpy(d, (void *)(uintptr_t)s, n); return OK; }
CUresult cuMemcpyHtoDAsync_v2(uint64_t d, const void *s, size_t n, void *st) { (void)st; logf_("htod-async %zu", n); memcpy((void *)(uintptr_t)d, s, n); return OK; }
CUresult cuMemcpyDtoHAsync_v2(void *d, uint64_t s, size_t n, void *st) { (void)st; logf_("dtoh-async %zu", n); memcpy(d, (void *)(uintptr_t)s, n); return OK; }
CUresult cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, void *st)
{
	(void)st;
	logf_("dtod-async %zu", n);
	if (env_int("FAKE_CUDA_FAIL_DTOD", 0))
		return 700; /* illegal address */
	memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
	return OK;
}

static int stream_token, event_token, graph_token, exec_token;
CUresult cuStreamCreate(void **s, unsigned f) { (void)f; *s = &stream_token; return OK; }
CUresult cuStreamDestroy_v2(void *s) { (void)s; return OK; }
CUresult cuStreamSynchronize(void *s) { (void)s; return OK; }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
			unsigned bz, unsigned sh, void *s, void **params, void **extra)
{
	const char *fail = getenv("FAKE_CUDA_FAIL_LAUNCH");
	(void)sh; (void)s; (void)params; (void)extra;
	/* a function is its name (cuModuleGetFunction above) */
	logf_("launch %s %u %u %u %u %u %u", (const char *)f, gx, gy, gz, bx, by, bz);
	return fail && !strcmp(fail, (const char *)f) ? 700 : OK; /* 700: illegal address */
}
CUresult cuEventCreate(void **e, unsigned f) { (void)f; *e = &event_token; return OK; }
CUresult cuEventDestroy_v2(void *e) { (void)e; return OK; }
CUresult cuEventRecord(void *e, void *s) { (void)e; (void)s; return OK; }
CUresult cuEventSynchronize(void *e) { (void)e; return OK; }
static unsigned elapsed_calls;
CUresult cuEventElapsedTime(float *ms, void *a, void *b)
{
	const char *list = getenv("FAKE_CUDA_ELAPSED_MS"), *p = list;
	unsigned n = 0, want;
	(void)a; (void)b;
	*ms = 1.0f;
	if (!list || !*list)
		return OK;
	for (const char *q = list; *q; q++)
		n += *q == ',';
	want = elapsed_calls++ % (n + 1);
	for (unsigned i = 0; i < want; i++)
		p = strchr(p, ',') + 1;
	*ms = strtof(p, NULL);
	return OK;
}
CUresult cuStreamBeginCapture_v2(void *s, int mode) { (void)s; (void)mode; logf_("capture begin"); return OK; }
CUresult cuStreamEndCapture(void *s, void **g) { (void)s; *g = &graph_token; logf_("capture end"); return OK; }
CUresult cuGraphInstantiateWithFlags(void **x, void *g, unsigned long long f) { (void)g; (void)f; *x = &exec_token; logf_("instantiate"); return OK; }
CUresult cuGraphExecUpdate_v2(void *x, void *g, void *info) { (void)x; (void)g; (void)info; logf_("update"); return OK; }
CUresult cuGraphLaunch(void *x, void *s) { (void)x; (void)s; logf_("graph launch"); return OK; }
CUresult cuGraphExecDestroy(void *x) { (void)x; return OK; }
CUresult cuGraphDestroy(void *g) { (void)g; return OK; }
