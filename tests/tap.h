/*
 * tap.h - a small TAP producer for C tests, run by prove.
 *
 *   plan_no_plan();              or plan(n);
 *   ok(cond, "name %d", i);
 *   is_int(got, want, "name"); is_str(got, want, "name");
 *   skip("no GPU here");         reports a skipped test, never a pass
 *   return done_testing();
 */
#ifndef NF_TESTS_TAP_H
#define NF_TESTS_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_count;
static int tap_failed;
static int tap_planned = -1;

static inline void plan(int n)
{
	tap_planned = n;
	printf("1..%d\n", n);
}

static inline void plan_no_plan(void) {}

static inline void tap_vreport(int pass, const char *file, int line, const char *fmt, va_list ap)
{
	tap_count++;
	printf("%sok %d - ", pass ? "" : "not ", tap_count);
	vprintf(fmt, ap);
	printf("\n");
	if (!pass) {
		tap_failed++;
		printf("#   Failed test at %s line %d.\n", file, line);
	}
	fflush(stdout);
}

static inline int tap_ok(int pass, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static inline int tap_ok(int pass, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tap_vreport(pass, file, line, fmt, ap);
	va_end(ap);
	return pass;
}

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define is_int(got, want, ...)                                                          \
	do {                                                                            \
		long long tap_g_ = (long long)(got), tap_w_ = (long long)(want);        \
		if (!tap_ok(tap_g_ == tap_w_, __FILE__, __LINE__, __VA_ARGS__))         \
			printf("#          got: %lld\n#     expected: %lld\n", tap_g_, tap_w_); \
	} while (0)

#define is_str(got, want, ...)                                                          \
	do {                                                                            \
		const char *tap_g_ = (got), *tap_w_ = (want);                           \
		int tap_p_ = tap_g_ && tap_w_ && strcmp(tap_g_, tap_w_) == 0;           \
		if (!tap_ok(tap_p_, __FILE__, __LINE__, __VA_ARGS__))                   \
			printf("#          got: '%s'\n#     expected: '%s'\n",             \
			       tap_g_ ? tap_g_ : "(null)", tap_w_ ? tap_w_ : "(null)");     \
	} while (0)

/* A test that cannot run here: reported as skipped, never as passed. */
static inline void skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void skip(const char *fmt, ...)
{
	va_list ap;
	tap_count++;
	printf("ok %d # skip ", tap_count);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static inline void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void diag(const char *fmt, ...)
{
	va_list ap;
	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* Call last: prints the plan if none was given; exit status is the failure count. */
static inline int done_testing(void)
{
	if (tap_planned < 0)
		printf("1..%d\n", tap_count);
	else if (tap_planned != tap_count)
		printf("# planned %d tests but ran %d\n", tap_planned, tap_count);
	fflush(stdout);
	return tap_failed > 255 ? 255 : tap_failed;
}

/* Directory of test data shipped with the repo and of the shared models. */
static inline const char *tap_env(const char *name, const char *fallback)
{
	const char *v = getenv(name);
	return v && *v ? v : fallback;
}

#endif
