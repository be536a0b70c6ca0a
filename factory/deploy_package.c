/* deploy_package.c - a chart folder as the .tgz `helm package` makes (see deploy.h). */
#define _GNU_SOURCE
#include "factory/deploy.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* Bounds on what a chart may hold: ours is a dozen small files. */
#define CHART_FILES_MAX 256
#define CHART_FILE_MAX ((size_t)1 << 20)
#define CHART_TGZ_MAX ((size_t)16 << 20)
#define CHART_DEPTH_MAX 4

typedef struct file_list {
	char *rel[CHART_FILES_MAX]; /* paths under the chart folder */
	size_t n;
	const char *root;
	int depth;
	const char *prefix; /* the folder being listed, relative; "" at the top */
} file_list;

static int list_files(file_list *l, const char *dir, const char *prefix);

static int list_child(void *user, const char *path, const char *name)
{
	file_list *l = user;
	char *rel = *l->prefix ? nf_strdup_printf("%s/%s", l->prefix, name) : strdup(name);
	if (!rel)
		return nf_error_set(NF_ENOMEM, "out of memory");
	if (nf_fs_is_dir(path)) {
		int err = list_files(l, path, rel);
		free(rel);
		return err;
	}
	if (l->n == CHART_FILES_MAX) {
		free(rel);
		return nf_error_set(NF_EINPUT, "%s: more than %d files", l->root, CHART_FILES_MAX);
	}
	l->rel[l->n++] = rel;
	return 0;
}

static int list_files(file_list *l, const char *dir, const char *prefix)
{
	const char *saved = l->prefix;
	int err;
	if (l->depth >= CHART_DEPTH_MAX)
		return nf_error_set(NF_EINPUT, "%s: chart folders nested too deep", dir);
	l->depth++;
	l->prefix = prefix;
	err = nf_fs_each_child(dir, list_child, l);
	l->prefix = saved;
	l->depth--;
	return err;
}

static int cmp_chart_first(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	int cx = !strcmp(x, "Chart.yaml"), cy = !strcmp(y, "Chart.yaml");
	return cx != cy ? cy - cx : strcmp(x, y);
}

typedef struct mem_out {
	char *data;
	size_t len, cap;
} mem_out;

static la_ssize_t on_write(struct archive *a, void *user, const void *buf, size_t n)
{
	mem_out *m = user;
	if (m->len + n > CHART_TGZ_MAX) {
		archive_set_error(a, EFBIG, "the packaged chart is over %zu bytes", CHART_TGZ_MAX);
		return -1;
	}
	if (m->len + n > m->cap) {
		size_t cap = m->cap ? m->cap : 16384;
		while (cap < m->len + n)
			cap *= 2;
		char *d = realloc(m->data, cap);
		if (!d) {
			archive_set_error(a, ENOMEM, "out of memory");
			return -1;
		}
		m->data = d;
		m->cap = cap;
	}
	memcpy(m->data + m->len, buf, n);
	m->len += n;
	return (la_ssize_t)n;
}

/* One file as NAME/rel: fixed time, owner and mode, so equal charts give equal bytes. */
static int add_file(struct archive *a, struct archive_entry *ae, const char *dir,
		    const char *name, const char *rel)
{
	char *path = nf_path_join(dir, rel), *entry = nf_strdup_printf("%s/%s", name, rel), *data = NULL;
	size_t len = 0;
	int err = path && entry ? nf_fs_read_file(&data, &len, path, CHART_FILE_MAX)
				: nf_error_set(NF_ENOMEM, "out of memory");
	if (!err) {
		archive_entry_clear(ae);
		archive_entry_set_pathname(ae, entry);
		archive_entry_set_filetype(ae, AE_IFREG);
		archive_entry_set_perm(ae, 0644);
		archive_entry_set_size(ae, (la_int64_t)len);
		archive_entry_set_mtime(ae, 0, 0);
		if (archive_write_header(a, ae) != ARCHIVE_OK ||
		    (len && archive_write_data(a, data, len) != (la_ssize_t)len))
			err = nf_error_set(NF_EIO, "%s: %s", entry, archive_error_string(a));
	}
	free(path);
	free(entry);
	free(data);
	return err;
}

static int write_tgz(mem_out *m, const char *dir, const char *name, file_list *l)
{
	struct archive *a = archive_write_new();
	struct archive_entry *ae = archive_entry_new();
	int err = 0;
	if (!a || !ae)
		err = nf_error_set(NF_ENOMEM, "out of memory");
	/* no time in the gzip header either */
	else if (archive_write_set_format_ustar(a) != ARCHIVE_OK ||
		 archive_write_add_filter_gzip(a) != ARCHIVE_OK ||
		 archive_write_set_options(a, "gzip:!timestamp") != ARCHIVE_OK ||
		 archive_write_open2(a, m, NULL, on_write, NULL, NULL) != ARCHIVE_OK)
		err = nf_error_set(NF_EINTERNAL, "libarchive: %s", archive_error_string(a));
	for (size_t i = 0; !err && i < l->n; i++)
		err = add_file(a, ae, dir, name, l->rel[i]);
	if (!err && archive_write_close(a) != ARCHIVE_OK)
		err = nf_error_set(NF_EIO, "libarchive: %s", archive_error_string(a));
	archive_entry_free(ae);
	archive_write_free(a);
	return err;
}

int nf_deploy_chart_package(char **tgz, size_t *len, const char *dir)
{
	file_list l = {.n = 0, .root = dir, .depth = 0, .prefix = ""};
	json_t *meta = NULL;
	mem_out m = {0};
	int err = nf_deploy_chart_meta(&meta, dir);

	*tgz = NULL;
	*len = 0;
	if (!err)
		err = list_files(&l, dir, "");
	if (!err) {
		qsort(l.rel, l.n, sizeof(l.rel[0]), cmp_chart_first);
		err = write_tgz(&m, dir, json_string_value(json_object_get(meta, "name")), &l);
	}
	if (!err) {
		*tgz = m.data;
		*len = m.len;
		m.data = NULL;
	}
	free(m.data);
	for (size_t i = 0; i < l.n; i++)
		free(l.rel[i]);
	json_decref(meta);
	return err;
}
