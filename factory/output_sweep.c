/* output_sweep.c - removing what killed builds left beside OUT (see output_sweep.h). */
#define _GNU_SOURCE
#include "factory/output_sweep.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* The longest PID we accept in a name (Linux: at most 4194304). */
#define PID_DIGITS_MAX 10

typedef struct sweep_ctx {
	const char *out;  /* OUT */
	const char *base; /* its last component */
	size_t base_len;
} sweep_ctx;

/* The PID after "<base>.<kind>-" in name, or 0 when name is not such a leftover. */
static long leftover_pid(const sweep_ctx *s, const char *name, const char *kind)
{
	size_t klen = strlen(kind), n = 0;
	long pid = 0;
	if (strncmp(name, s->base, s->base_len) || name[s->base_len] != '.' ||
	    strncmp(name + s->base_len + 1, kind, klen) || name[s->base_len + 1 + klen] != '-')
		return 0;
	for (const char *p = name + s->base_len + 2 + klen; *p; p++, n++) {
		if (*p < '0' || *p > '9' || n == PID_DIGITS_MAX)
			return 0;
		pid = pid * 10 + (*p - '0');
	}
	return n ? pid : 0;
}

/* Whether the build of pid is alive: its partial folder is flocked. */
static bool owner_alive(const sweep_ctx *s, long pid)
{
	char *partial = nf_strdup_printf("%s.partial-%ld", s->out, pid);
	int fd = -1, r = partial ? nf_fs_lock(&fd, partial, LOCK_SH, false, false) : 1;
	free(partial);
	if (fd >= 0)
		close(fd);
	nf_error_clear();
	return r == 1; /* taken or gone: no live owner */
}

static int sweep_child(void *ctx, const char *path, const char *name)
{
	const sweep_ctx *s = ctx;
	static const char *const kinds[] = {"partial", "gates", "old"};
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		long pid = leftover_pid(s, name, kinds[k]);
		if (!pid || owner_alive(s, pid))
			continue;
		/* OUT moved aside by a build killed before the new one took its place */
		if (!strcmp(kinds[k], "old") && !nf_fs_exists(s->out) && rename(path, s->out) == 0)
			return 0;
		(void)nf_fs_remove_tree(path);
		nf_error_clear();
		return 0;
	}
	return 0;
}

int nf_output_sweep(const char *out)
{
	const char *slash = strrchr(out, '/');
	char *parent = !slash ? strdup(".") : slash == out ? strdup("/")
							   : strndup(out, (size_t)(slash - out));
	int err;

	if (!parent)
		return nf_error_set(NF_ENOMEM, "out of memory");
	sweep_ctx s = {.out = out, .base = slash ? slash + 1 : out};
	s.base_len = strlen(s.base);
	err = s.base_len ? nf_fs_each_child(parent, sweep_child, &s) : 0;
	free(parent);
	return err;
}
