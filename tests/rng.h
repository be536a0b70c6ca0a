/*
 * rng.h - the deterministic random numbers of tests and test tools
 * (splitmix64), so that a failing case can be replayed from its seed.
 */
#ifndef NF_TESTS_RNG_H
#define NF_TESTS_RNG_H

#include <stdint.h>

static inline uint64_t nf_test_rng(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Uniform in [-a, a). */
static inline float nf_test_unif(uint64_t *s, double a)
{
	return (float)(((double)(nf_test_rng(s) >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0) * a);
}

#endif
