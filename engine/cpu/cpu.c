/*
 * cpu.c - the CPU kernel families and the run-time choice among them by CPU
 * features: avx512-bf16, avx512-vnni, then avx2, then scalar.
 */
#include <cpuid.h>
#include <stdatomic.h>
#include <string.h>

#include "engine/cpu/cpu.h"
#include "util/banned.h"

static const nf_backend_ops *const families[] = {
	&nf_cpu_avx512bf16_ops,
	&nf_cpu_avx512_ops,
	&nf_cpu_avx2_ops,
	&nf_cpu_scalar_ops,
	NULL,
};

/* F16C from cpuid leaf 1 (ECX bit 29): clang 14 does not know
 * __builtin_cpu_supports("f16c").  The VEX state the OS must save is
 * checked by the avx2 test beside it, which both compilers know. */
static int has_f16c(void)
{
	unsigned a, b, c, d;
	return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

/* AVX512_BF16 (leaf 7 subleaf 1, EAX bit 5) and GFNI (leaf 7, ECX bit 8)
 * from cpuid for the same reason: clang 14 knows neither name.  The
 * AVX-512 state is checked by the avx512f test beside them. */
static unsigned leaf7_features(void)
{
	unsigned a, b, c, d, have = 0;
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
		have |= (c & (1u << 8)) ? NF_CPU_GFNI : 0;
		if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d))
			have |= (a & (1u << 5)) ? NF_CPU_AVX512BF16 : 0;
	}
	return have;
}

/* Every feature of the enum in cpu.h this CPU has. */
static unsigned detect_features(void)
{
	unsigned have = 0;
	__builtin_cpu_init();
	have |= __builtin_cpu_supports("avx2") ? NF_CPU_AVX2 : 0;
	have |= __builtin_cpu_supports("fma") ? NF_CPU_FMA : 0;
	have |= __builtin_cpu_supports("avx512f") ? NF_CPU_AVX512F : 0;
	have |= __builtin_cpu_supports("avx512bw") ? NF_CPU_AVX512BW : 0;
	have |= __builtin_cpu_supports("avx512vl") ? NF_CPU_AVX512VL : 0;
	have |= __builtin_cpu_supports("avx512vnni") ? NF_CPU_AVX512VNNI : 0;
	have |= has_f16c() ? NF_CPU_F16C : 0;
	have |= leaf7_features();
	return have;
}

/* The features, detected on the first call: cpuid traps to the hypervisor
 * in a VM, and the kernels' availability is asked per tensor.  Threads
 * that race here store the same value. */
#define FEATURES_KNOWN (1u << 31)
static _Atomic unsigned features;

int nf_cpu_has(unsigned mask)
{
	unsigned have = atomic_load_explicit(&features, memory_order_relaxed);
	if (!(have & FEATURES_KNOWN)) {
		have = detect_features() | FEATURES_KNOWN;
		atomic_store_explicit(&features, have, memory_order_relaxed);
	}
	return (have & mask) == mask;
}

const nf_backend_ops *const *nf_cpu_families(void)
{
	return families;
}

const nf_backend_ops *nf_cpu_best(void)
{
	for (size_t i = 0; families[i]; i++)
		if (families[i]->available())
			return families[i];
	return &nf_cpu_scalar_ops;
}

const nf_backend_ops *nf_cpu_find(const char *name)
{
	for (size_t i = 0; families[i]; i++)
		if (strcmp(families[i]->name, name) == 0)
			return families[i]->available() ? families[i] : NULL;
	return NULL;
}
