/* digest.c - content digests of files and folders (see digest.h). */
#define _GNU_SOURCE
#include "factory/digest.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define MAX_ENTRIES 100000
#define MAX_DEPTH 32

typedef struct listing {
	char **lines; /* "hex  rel/path\n" */
	size_t n, cap;
} listing;

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int walk(listing *ls, const char *root, const char *rel, int depth)
{
	char *dir = rel[0] ? nf_path_join(root, rel) : strdup(root);
	struct dirent **names = NULL;
	int n, err = 0;

	if (!dir)
		return nf_error_set(NF_ENOMEM, "out of memory");
	if (depth > MAX_DEPTH) {
		err = nf_error_set(NF_EINPUT, "%s: folders nested deeper than %d", dir, MAX_DEPTH);
		goto done;
	}
	n = scandir(dir, &names, NULL, alphasort);
	if (n < 0) {
		err = nf_error_set(NF_EIO, "%s: cannot list the folder", dir);
		goto done;
	}
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		char *child_rel = NULL, *child = NULL;
		struct stat st;
		if (err || !strcmp(name, ".") || !strcmp(name, ".."))
			goto next;
		child_rel = rel[0] ? nf_path_join(rel, name) : strdup(name);
		child = child_rel ? nf_path_join(root, child_rel) : NULL;
		if (!child) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto next;
		}
		if (lstat(child, &st) < 0) {
			err = nf_error_set(NF_EIO, "%s: cannot stat", child);
		} else if (S_ISDIR(st.st_mode)) {
			err = walk(ls, root, child_rel, depth + 1);
		} else if (S_ISREG(st.st_mode)) {
			char hex[NF_SHA256_HEX_LEN + 1];
			if (ls->n == MAX_ENTRIES) {
				err = nf_error_set(NF_EINPUT, "%s: more than %d files", root, MAX_ENTRIES);
				goto next;
			}
			if (ls->n == ls->cap) {
				size_t cap = ls->cap ? ls->cap * 2 : 64;
				char **p = realloc(ls->lines, cap * sizeof(*p));
				if (!p) {
					err = nf_error_set(NF_ENOMEM, "out of memory");
					goto next;
				}
				ls->lines = p;
				ls->cap = cap;
			}
			err = nf_sha256_file_hex(hex, child);
			if (!err) {
				ls->lines[ls->n] = nf_strdup_printf("%s  %s\n", hex, child_rel);
				if (ls->lines[ls->n])
					ls->n++;
				else
					err = nf_error_set(NF_ENOMEM, "out of memory");
			}
		} else {
			err = nf_error_set(NF_EINPUT, "%s: not a regular file or folder", child);
		}
next:
		free(child_rel);
		free(child);
		free(names[i]);
	}
	free(names);
done:
	free(dir);
	return err;
}

int nf_digest_path(char hex[NF_SHA256_HEX_LEN + 1], const char *path)
{
	listing ls = {0};
	nf_sha256 *h = NULL;
	int err;

	if (!nf_fs_is_dir(path))
		return nf_sha256_file_hex(hex, path);
	err = walk(&ls, path, "", 0);
	if (!err)
		qsort(ls.lines, ls.n, sizeof(*ls.lines), cmp_str);
	if (!err)
		err = nf_sha256_new(&h);
	for (size_t i = 0; !err && i < ls.n; i++)
		err = nf_sha256_update(h, ls.lines[i], strlen(ls.lines[i]));
	if (!err)
		err = nf_sha256_final_hex(h, hex);
	nf_sha256_free(h);
	for (size_t i = 0; i < ls.n; i++)
		free(ls.lines[i]);
	free(ls.lines);
	return err;
}
