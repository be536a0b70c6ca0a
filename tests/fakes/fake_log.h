/*
 * fake_log.h - the call log of the fake CUDA libraries (libcuda.c,
 * libcublasLt.c): a line per call appended to $FAKE_CUDA_LOG, which the
 * tests read back (fake_cuda.h).  Included once by each fake.
 */
#ifndef NF_TESTS_FAKE_LOG_H
#define NF_TESTS_FAKE_LOG_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void logf_(const char *fmt, ...)
{
	const char *path = getenv("FAKE_CUDA_LOG");
	FILE *f;
	va_list ap;
	if (!path || !*path || !(f = fopen(path, "a")))
		return;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

#endif
