/*
 * test_cuda_driver.c - the CUDA driver loader without a GPU: a missing
 * driver, a library that is not a driver, and the fake driver
 * (tests/fakes/libcuda.c, through NF_LIBCUDA) for the symbol table, the
 * device queries, the match to the SKU table and every message of the
 * fallback to the CPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/driver.h"
#include "util/error.h"
#include "tests/tap.h"

static char fake_path[4096];

static void use_fake(void)
{
	setenv("NF_LIBCUDA", fake_path, 1);
	unsetenv("FAKE_CUDA_INIT_ERROR");
	unsetenv("FAKE_CUDA_COUNT");
	unsetenv("FAKE_CUDA_NAME");
	unsetenv("FAKE_CUDA_CC");
	unsetenv("FAKE_CUDA_MEM_GIB");
}

static int contains(const char *s, const char *part) { return s && strstr(s, part) != NULL; }

static void test_no_driver(void)
{
	nf_cuda_driver *d = NULL;
	setenv("NF_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
	int err = nf_cuda_driver_open(&d);
	ok(err == NF_EENV && !d, "no libcuda: NF_EENV, nothing opened");
	ok(contains(nf_error_last(), "no NVIDIA driver") && !strchr(nf_error_last(), '\n'),
	   "no libcuda: one line saying so (%s)", nf_error_last());

	/* a real library that is not a driver: the first missing function is named */
	setenv("NF_LIBCUDA", "libm.so.6", 1);
	err = nf_cuda_driver_open(&d);
	ok(err == NF_EENV && contains(nf_error_last(), "libm.so.6 lacks cuInit"),
	   "a library without the driver API: %s", nf_error_last());
}

static void test_fake_device(void)
{
	nf_cuda_driver *d = NULL;
	nf_cuda_device dev;
	int n = -1;

	use_fake();
	if (nf_cuda_driver_open(&d)) {
		ok(0, "open the fake driver: %s", nf_error_last());
		return;
	}
	is_int(nf_cuda_driver_version(d), 12040, "cuDriverGetVersion through the table");
	ok(nf_cuda_device_count(&n, d) == 0 && n == 1, "one device");
	ok(nf_cuda_device_query(&dev, d, 0) == 0, "query device 0");
	is_str(dev.name, "NVIDIA H100 80GB HBM3", "its name");
	ok(dev.major == 9 && dev.minor == 0, "compute capability 9.0");
	is_int(dev.sm_count, 132, "132 SMs");
	ok(dev.memory_bytes == 80ull << 30, "80 GiB");
	ok(nf_cuda_device_sku(&dev) == nf_sku_find("h100-sxm"), "matched to h100-sxm");
	ok(nf_cuda_device_query(&dev, d, 1) == NF_EENV && contains(nf_error_last(), "cuDeviceGet failed"),
	   "a device that is not there: %s", nf_error_last());

	/* every slot was resolved: a call through the graph slots reaches the fake */
	const nf_cuda_api *api = nf_cuda_driver_api(d);
	nf_cu_graph g = NULL;
	ok(api->cuStreamEndCapture(NULL, &g) == 0 && g, "graph capture functions resolved");
	char text[160];
	is_str(nf_cuda_error_text(text, sizeof text, d, 209),
	       "CUDA error 209 (no kernel image is available for execution on the device)",
	       "errors in the driver's words");
	is_str(nf_cuda_error_text(text, sizeof text, d, 12345), "CUDA error 12345",
	       "an error the driver has no words for");
	nf_cuda_driver_free(d);
}

typedef struct named {
	const char *name;
	int cc, gib;
	const char *sku; /* NULL: no SKU of the table */
} named;

static void test_sku_match(void)
{
	static const named cases[] = {
		{"NVIDIA H100 80GB HBM3", 90, 80, "h100-sxm"},
		{"NVIDIA H100 PCIe", 90, 80, "h100-pcie"},
		{"NVIDIA H200", 90, 141, "h200"},
		{"NVIDIA A100-SXM4-40GB", 80, 40, "a100-sxm-40gb"},
		{"NVIDIA A100-SXM4-80GB", 80, 80, "a100-sxm-80gb"},
		{"NVIDIA L4", 89, 23, "l4"},
		{"NVIDIA L40S", 89, 45, "l40s"},
		{"NVIDIA A10G", 86, 23, "a10g"},
		{"Tesla T4", 75, 15, "t4"},
		{"NVIDIA B200", 100, 180, "b200"},
		{"NVIDIA GeForce RTX 4090", 89, 24, NULL},
		{"NVIDIA H100 80GB HBM3", 89, 80, NULL}, /* a name that lies about its arch */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		nf_cuda_device dev = {.major = cases[i].cc / 10, .minor = cases[i].cc % 10,
				      .memory_bytes = (uint64_t)cases[i].gib << 30};
		snprintf(dev.name, sizeof dev.name, "%s", cases[i].name);
		const nf_sku *s = nf_cuda_device_sku(&dev);
		is_str(s ? s->name : "(none)", cases[i].sku ? cases[i].sku : "(none)",
		       "%s sm_%d %d GiB", cases[i].name, cases[i].cc, cases[i].gib);
	}
}

static void test_check(void)
{
	nf_cuda_device dev = {.major = 9, .minor = 0, .memory_bytes = 80ull << 30};
	int exact = -1;
	snprintf(dev.name, sizeof dev.name, "NVIDIA H100 80GB HBM3");
	ok(nf_cuda_device_check(&exact, &dev, nf_sku_find("h100-sxm")) == 0 && exact == 1,
	   "h100-sxm on an H100 SXM: exact");
	ok(nf_cuda_device_check(&exact, &dev, nf_sku_find("h200")) == 0 && exact == 0,
	   "h200 on an H100: runs (same sm_90 cubin), not exact");
	ok(nf_cuda_device_check(&exact, &dev, nf_sku_find("a10g")) == NF_EENV, "a10g on an H100: no");
	is_str(nf_error_last(), "GPU 0 is NVIDIA H100 80GB HBM3 (sm_90), the profile's a10g needs sm_86: its cubin will not load",
	       "and says why in one line");
	ok(nf_cuda_device_check(&exact, &dev, nf_sku_find("cpu")) == NF_EINPUT, "cpu is no GPU SKU");
}

static void test_find_device(void)
{
	nf_cuda_device dev;
	int exact = 0;

	use_fake();
	ok(nf_cuda_find_device(&dev, &exact, nf_sku_find("h100-sxm")) == 0 && exact &&
		   dev.ordinal == 0,
	   "h100-sxm found on the fake H100");
	ok(nf_cuda_find_device(&dev, &exact, nf_sku_find("b200")) == NF_EENV &&
		   contains(nf_error_last(), "no GPU here for b200 (sm_100): GPU 0 NVIDIA H100 80GB HBM3 (sm_90)"),
	   "b200 on an H100: %s", nf_error_last());

	setenv("FAKE_CUDA_NAME", "NVIDIA A10G", 1);
	setenv("FAKE_CUDA_CC", "86", 1);
	ok(nf_cuda_find_device(&dev, &exact, nf_sku_find("a10g")) == 0 && exact, "a10g on an A10G");

	use_fake();
	setenv("FAKE_CUDA_COUNT", "0", 1);
	ok(nf_cuda_find_device(&dev, &exact, nf_sku_find("h100-sxm")) == NF_EENV &&
		   contains(nf_error_last(), "the driver sees no GPU, h100-sxm needs one"),
	   "no device: %s", nf_error_last());

	use_fake();
	setenv("FAKE_CUDA_INIT_ERROR", "100", 1);
	ok(nf_cuda_find_device(&dev, &exact, nf_sku_find("h100-sxm")) == NF_EENV &&
		   contains(nf_error_last(), "cuInit failed: CUDA error 100 (no CUDA-capable device is detected)"),
	   "cuInit fails: %s", nf_error_last());
}

int main(void)
{
	snprintf(fake_path, sizeof fake_path, "%s/tests/fakes/libcuda.so.1",
		 tap_env("NF_BUILD", "build"));
	test_no_driver();
	test_sku_match();
	test_check();
	FILE *f = fopen(fake_path, "rb");
	if (!f) {
		skip("fake driver %s not built (make %s)", fake_path, fake_path);
		return done_testing();
	}
	fclose(f);
	test_fake_device();
	test_find_device();
	return done_testing();
}
