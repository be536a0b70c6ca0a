/*
 * cpu.c - the CPU kernel families and the run-time choice among them by CPU
 * features (__builtin_cpu_supports): avx512-vnni, then avx2, then scalar.
 */
#include <string.h>

#include "engine/cpu/cpu.h"
#include "util/banned.h"

static const nf_backend_ops *const families[] = {
	&nf_cpu_avx512_ops,
	&nf_cpu_avx2_ops,
	&nf_cpu_scalar_ops,
	NULL,
};

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
