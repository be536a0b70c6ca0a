/*
 * parse.h - bounded number parsing for command-line and configuration values
 * (curl's strparse habit: every parse names its range).
 */
#ifndef NF_UTIL_PARSE_H
#define NF_UTIL_PARSE_H

#include <stdint.h>

/* Whole decimal integer in [min, max]; the whole string must be used.
 * NF_EINPUT with "WHAT: ..." on failure. */
int nf_parse_long(long *out, const char *s, long min, long max, const char *what);
int nf_parse_u64(uint64_t *out, const char *s, uint64_t max, const char *what);
/* Finite decimal number in [min, max]. */
int nf_parse_double(double *out, const char *s, double min, double max, const char *what);

#endif
