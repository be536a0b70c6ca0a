/* parse.c - bounded number parsing (see parse.h). */
#include "util/parse.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "util/error.h"
#include "util/banned.h"

int nf_parse_long(long *out, const char *s, long min, long max, const char *what)
{
	char *end = NULL;
	long v;
	errno = 0;
	v = strtol(s, &end, 10);
	if (!*s || *end || errno == ERANGE || v < min || v > max)
		return nf_error_set(NF_EINPUT, "%s: '%s' is not a whole number from %ld to %ld", what,
				    s, min, max);
	*out = v;
	return 0;
}

int nf_parse_u64(uint64_t *out, const char *s, uint64_t max, const char *what)
{
	char *end = NULL;
	unsigned long long v;
	errno = 0;
	if (*s == '-' || *s == '+' || !*s)
		goto bad;
	v = strtoull(s, &end, 10);
	if (*end || errno == ERANGE || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	return nf_error_set(NF_EINPUT, "%s: '%s' is not a whole number from 0 to %llu", what, s,
			    (unsigned long long)max);
}

int nf_parse_double(double *out, const char *s, double min, double max, const char *what)
{
	char *end = NULL;
	double v;
	errno = 0;
	v = strtod(s, &end);
	if (!*s || *end || errno == ERANGE || !isfinite(v) || v < min || v > max)
		return nf_error_set(NF_EINPUT, "%s: '%s' is not a number from %g to %g", what, s, min,
				    max);
	*out = v;
	return 0;
}
