/*
 * long_opts.h - the "--name N" options of the benchmark tools, each a whole
 * number from 1 to its maximum, looked up in the tool's table of them
 * rather than in a chain of comparisons per tool.
 */
#ifndef NF_TOOLS_LONG_OPTS_H
#define NF_TOOLS_LONG_OPTS_H

#include <stddef.h>
#include <string.h>

#include "util/error.h"
#include "util/parse.h"

typedef struct long_opt {
	const char *name; /* "--mb" */
	long *dst;
	long max;
} long_opt;

/* The option called `name` in opts[0, n), or NULL. */
static inline const long_opt *long_opt_find(const long_opt *opts, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(opts[i].name, name) == 0)
			return &opts[i];
	return NULL;
}

/* Read argv[1, argc) as options of opts[0, n) with their values: 0;
 * NF_EINPUT with the error set when a value is not a whole number in
 * range; 1 when an argument is none of them or lacks its value (the
 * caller prints its usage). */
static inline int long_opts_parse(const long_opt *opts, size_t n, int argc, char **argv)
{
	for (int i = 1; i < argc; i += 2) {
		const long_opt *o = long_opt_find(opts, n, argv[i]);
		if (!o || i + 1 >= argc)
			return 1;
		int err = nf_parse_long(o->dst, argv[i + 1], 1, o->max, o->name);
		if (err)
			return err;
	}
	return 0;
}

#endif
