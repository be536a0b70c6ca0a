/*
 * checked.h - overflow-checked size arithmetic (git's st_add/st_mult, as
 * predicates).  Every size computed from outside input goes through these.
 */
#ifndef NF_UTIL_CHECKED_H
#define NF_UTIL_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* *out = a + b; false on overflow (then *out is unspecified). */
static inline bool nf_size_add(size_t *out, size_t a, size_t b)
{
	return !__builtin_add_overflow(a, b, out);
}

/* *out = a * b; false on overflow. */
static inline bool nf_size_mul(size_t *out, size_t a, size_t b)
{
	return !__builtin_mul_overflow(a, b, out);
}

/* *out = a * b * c; false on overflow. */
static inline bool nf_size_mul3(size_t *out, size_t a, size_t b, size_t c)
{
	size_t ab;
	return nf_size_mul(&ab, a, b) && nf_size_mul(out, ab, c);
}

static inline bool nf_u64_add(uint64_t *out, uint64_t a, uint64_t b)
{
	return !__builtin_add_overflow(a, b, out);
}

static inline bool nf_u64_mul(uint64_t *out, uint64_t a, uint64_t b)
{
	return !__builtin_mul_overflow(a, b, out);
}

#endif
