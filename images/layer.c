/* layer.c - reproducible streamed tar layers (see layer.h). */
#define _GNU_SOURCE
#include "images/layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "images/compress.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define DEST_MAX 4095
#define READ_BUF ((size_t)1 << 20)
#define TREE_DEPTH_MAX 256

enum ent_type { ENT_DIR, ENT_FILE, ENT_BYTES, ENT_LINK };

struct entry {
	char *path;          /* destination, normalised, owned */
	enum ent_type type;
	unsigned mode;
	char *src;           /* ENT_FILE: source path, owned */
	char *link;          /* ENT_LINK: target, owned */
	unsigned char *data; /* ENT_BYTES, owned */
	uint64_t size;       /* ENT_FILE / ENT_BYTES */
	size_t seq;          /* insertion order, breaks ties when sorting */
};

struct nf_oci_layer {
	char *layout;
	nf_oci_compression comp;
	int64_t epoch;
	struct entry *ents;
	size_t n, cap;
	bool finished;
	/* streaming state */
	nf_sha256 *diff;
	nf_oci_blob_writer *w;
	nf_oci_compressor *comp_w; /* compresses into w */
	unsigned threads;          /* compression threads, 0 = one per CPU */
	uint64_t tar_size;
	bool tar_failed; /* the tar is abandoned: on_write takes nothing more */
};

int nf_oci_compression_parse(nf_oci_compression *out, const char *name)
{
	if (!strcmp(name, "none"))
		*out = NF_OCI_COMPRESS_NONE;
	else if (!strcmp(name, "gzip"))
		*out = NF_OCI_COMPRESS_GZIP;
	else if (!strcmp(name, "zstd"))
		*out = NF_OCI_COMPRESS_ZSTD;
	else
		return nf_error_set(NF_EINPUT, "unknown compression '%.40s' (none, gzip, zstd)", name);
	return 0;
}

const char *nf_oci_compression_name(nf_oci_compression c)
{
	switch (c) {
	case NF_OCI_COMPRESS_GZIP: return "gzip";
	case NF_OCI_COMPRESS_ZSTD: return "zstd";
	default: return "none";
	}
}

const char *nf_oci_compression_media_type(nf_oci_compression c)
{
	switch (c) {
	case NF_OCI_COMPRESS_GZIP: return NF_OCI_MT_LAYER_GZIP;
	case NF_OCI_COMPRESS_ZSTD: return NF_OCI_MT_LAYER_ZSTD;
	default: return NF_OCI_MT_LAYER;
	}
}

int nf_oci_layer_new(nf_oci_layer **out, const char *layout_dir, nf_oci_compression comp,
		     int64_t epoch)
{
	nf_oci_layer *l;
	*out = NULL;
	if (epoch < 0)
		return nf_error_set(NF_EINPUT, "layer epoch %lld is negative", (long long)epoch);
	if (comp != NF_OCI_COMPRESS_NONE && comp != NF_OCI_COMPRESS_GZIP &&
	    comp != NF_OCI_COMPRESS_ZSTD)
		return nf_error_set(NF_EINPUT, "unknown compression %d", (int)comp);
	l = calloc(1, sizeof(*l));
	if (!l)
		return nf_error_set(NF_ENOMEM, "out of memory");
	l->layout = strdup(layout_dir);
	if (!l->layout) {
		free(l);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	l->comp = comp;
	l->epoch = epoch;
	*out = l;
	return 0;
}

static void entry_release(struct entry *e)
{
	free(e->path);
	free(e->src);
	free(e->link);
	free(e->data);
}

void nf_oci_layer_free(nf_oci_layer *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		entry_release(&l->ents[i]);
	free(l->ents);
	free(l->layout);
	nf_sha256_free(l->diff);
	nf_oci_compressor_free(l->comp_w);
	nf_oci_blob_writer_free(l->w);
	free(l);
}

/*
 * Normalise a destination path: prefix and rel joined with '/', one leading
 * '/' dropped, trailing '/' dropped, components checked.  rel may be NULL.
 * "" (the root) is allowed only when allow_root.  Caller frees *out.
 */
static int dest_join(char **out, const char *prefix, const char *rel, bool allow_root)
{
	char *s = NULL;
	size_t len, i, start;
	*out = NULL;
	while (*prefix == '/')
		prefix++;
	if (rel && *rel)
		s = *prefix ? nf_path_join(prefix, rel) : strdup(rel);
	else
		s = strdup(prefix);
	if (!s)
		return nf_error_set(NF_ENOMEM, "out of memory");
	len = strlen(s);
	while (len > 0 && s[len - 1] == '/')
		s[--len] = '\0';
	if (len > DEST_MAX) {
		free(s);
		return nf_error_set(NF_EINPUT, "destination path is %zu bytes, more than %d", len,
				    DEST_MAX);
	}
	if (len == 0) {
		free(s);
		if (!allow_root)
			return nf_error_set(NF_EINPUT, "empty destination path");
		*out = strdup("");
		return *out ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
	}
	for (start = 0, i = 0; i <= len; i++) {
		if (i == len || s[i] == '/') {
			size_t c = i - start;
			if (c == 0 || (c == 1 && s[start] == '.') ||
			    (c == 2 && s[start] == '.' && s[start + 1] == '.')) {
				int err = nf_error_set(NF_EINPUT,
						       "destination path '%.200s': empty, '.' or '..' component",
						       s);
				free(s);
				return err;
			}
			start = i + 1;
		}
	}
	*out = s;
	return 0;
}

/* Append an entry; takes ownership of e's pointers (released on failure). */
static int push_any(nf_oci_layer *l, struct entry *e, bool internal)
{
	if (l->finished && !internal) {
		entry_release(e);
		return nf_error_set(NF_EINTERNAL, "layer changed after finish");
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64, bytes;
		struct entry *ne;
		if (!nf_size_mul(&bytes, cap, sizeof(*ne)) || !(ne = realloc(l->ents, bytes))) {
			entry_release(e);
			return nf_error_set(NF_ENOMEM, "out of memory");
		}
		l->ents = ne;
		l->cap = cap;
	}
	e->seq = l->n;
	l->ents[l->n++] = *e;
	return 0;
}

static int push(nf_oci_layer *l, struct entry *e)
{
	return push_any(l, e, false);
}

static unsigned file_mode(unsigned src_mode, unsigned mode)
{
	if (mode)
		return mode & 0777;
	return (src_mode & 0111) ? 0755 : 0644;
}

int nf_oci_layer_add_dir(nf_oci_layer *l, const char *dest, unsigned mode)
{
	struct entry e = {0};
	int err = dest_join(&e.path, dest, NULL, false);
	if (err)
		return err;
	e.type = ENT_DIR;
	e.mode = mode ? (mode & 0777) : 0755;
	return push(l, &e);
}

int nf_oci_layer_add_bytes(nf_oci_layer *l, const char *dest, const void *data, size_t len,
			   unsigned mode)
{
	struct entry e = {0};
	int err = dest_join(&e.path, dest, NULL, false);
	if (err)
		return err;
	e.type = ENT_BYTES;
	e.mode = mode ? (mode & 0777) : 0644;
	e.size = len;
	e.data = malloc(len ? len : 1);
	if (!e.data) {
		entry_release(&e);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	if (len)
		memcpy(e.data, data, len);
	return push(l, &e);
}

int nf_oci_layer_add_symlink(nf_oci_layer *l, const char *dest, const char *target)
{
	struct entry e = {0};
	int err = dest_join(&e.path, dest, NULL, false);
	if (err)
		return err;
	if (!*target || strlen(target) > DEST_MAX) {
		entry_release(&e);
		return nf_error_set(NF_EINPUT, "symlink %s: empty or too long target", dest);
	}
	e.type = ENT_LINK;
	e.mode = 0777;
	e.link = strdup(target);
	if (!e.link) {
		entry_release(&e);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	return push(l, &e);
}

static int add_src_file(nf_oci_layer *l, const char *src, const struct stat *st, char *path,
			unsigned mode)
{
	struct entry e = {0};
	e.path = path;
	e.type = ENT_FILE;
	e.mode = file_mode((unsigned)st->st_mode, mode);
	e.size = (uint64_t)st->st_size;
	e.src = strdup(src);
	if (!e.src) {
		entry_release(&e);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	return push(l, &e);
}

int nf_oci_layer_add_file(nf_oci_layer *l, const char *src_path, const char *dest, unsigned mode)
{
	struct stat st;
	char *path = NULL;
	int err;
	if (stat(src_path, &st) < 0)
		return nf_error_set(errno == ENOENT ? NF_ENOTFOUND : NF_EIO, "%s: %s", src_path,
				    strerror(errno));
	if (!S_ISREG(st.st_mode))
		return nf_error_set(NF_EINPUT, "%s: not a regular file", src_path);
	if ((err = dest_join(&path, dest, NULL, false)))
		return err;
	return add_src_file(l, src_path, &st, path, mode);
}

static int readlink_alloc(char **out, const char *path, size_t hint)
{
	size_t cap = hint + 1 > 64 ? hint + 1 : 64;
	*out = NULL;
	for (;;) {
		char *buf = malloc(cap);
		ssize_t n;
		if (!buf)
			return nf_error_set(NF_ENOMEM, "out of memory");
		n = readlink(path, buf, cap);
		if (n < 0) {
			free(buf);
			return nf_error_set(NF_EIO, "%s: readlink: %s", path, strerror(errno));
		}
		if ((size_t)n < cap) {
			buf[n] = '\0';
			*out = buf;
			return 0;
		}
		free(buf);
		if (cap > DEST_MAX + 1)
			return nf_error_set(NF_EINPUT, "%s: symlink target too long", path);
		cap *= 2;
	}
}

static int walk(nf_oci_layer *l, const char *src, const char *dest, int depth)
{
	DIR *d = NULL;
	struct dirent *de;
	int err = 0;

	if (depth > TREE_DEPTH_MAX)
		return nf_error_set(NF_EINPUT, "%s: directory tree deeper than %d", src,
				    TREE_DEPTH_MAX);
	d = opendir(src);
	if (!d)
		return nf_error_set(errno == ENOENT ? NF_ENOTFOUND : NF_EIO, "%s: %s", src,
				    strerror(errno));
	while ((errno = 0, de = readdir(d)) != NULL) {
		char *child = NULL, *cdest = NULL;
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		child = nf_path_join(src, de->d_name);
		if (!child) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
		if ((err = dest_join(&cdest, dest, de->d_name, false))) {
			nf_error_wrap(err, "%s", child);
			free(child);
			goto done;
		}
		if (lstat(child, &st) < 0) {
			err = nf_error_set(NF_EIO, "%s: %s", child, strerror(errno));
		} else if (S_ISDIR(st.st_mode)) {
			struct entry e = {0};
			e.type = ENT_DIR;
			e.mode = 0755;
			const char *dpath = cdest; /* stays valid: the layer owns it after push */
			e.path = cdest;
			cdest = NULL;
			err = push(l, &e);
			if (!err)
				err = walk(l, child, dpath, depth + 1);
		} else if (S_ISREG(st.st_mode)) {
			err = add_src_file(l, child, &st, cdest, 0);
			cdest = NULL;
		} else if (S_ISLNK(st.st_mode)) {
			struct entry e = {0};
			e.type = ENT_LINK;
			e.mode = 0777;
			e.path = cdest;
			cdest = NULL;
			err = readlink_alloc(&e.link, child, (size_t)st.st_size);
			if (err)
				entry_release(&e);
			else
				err = push(l, &e);
		} else {
			err = nf_error_set(NF_EUNSUPPORTED,
					   "%s: not a file, directory or symlink; cannot go in a layer",
					   child);
		}
		free(cdest);
		free(child);
		if (err)
			goto done;
	}
	if (errno) {
		err = nf_error_set(NF_EIO, "%s: readdir: %s", src, strerror(errno));
		goto done;
	}
done:
	closedir(d);
	return err;
}

int nf_oci_layer_add_tree(nf_oci_layer *l, const char *src_dir, const char *dest_prefix)
{
	struct stat st;
	char *root = NULL;
	int err;

	if (stat(src_dir, &st) < 0)
		return nf_error_set(errno == ENOENT ? NF_ENOTFOUND : NF_EIO, "%s: %s", src_dir,
				    strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return nf_error_set(NF_EINPUT, "%s: not a directory", src_dir);
	if ((err = dest_join(&root, dest_prefix, NULL, true)))
		return err;
	if (*root) {
		struct entry e = {0};
		const char *dpath = root;
		e.type = ENT_DIR;
		e.mode = 0755;
		e.path = root;
		if ((err = push(l, &e)))
			return err;
		return walk(l, src_dir, dpath, 0);
	}
	err = walk(l, src_dir, root, 0);
	free(root);
	return err;
}

/* ---- finishing: sort, parents, stream ---- */

static int cmp_entry(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = strcmp(x->path, y->path);
	if (c)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Add an implicit directory for every ancestor of every entry, then sort and merge. */
static int normalise(nf_oci_layer *l)
{
	size_t n0 = l->n, i, o;
	int err;

	for (i = 0; i < n0; i++) {
		char *p = l->ents[i].path; /* stable: entries own their strings */
		for (char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
			struct entry e = {0};
			e.type = ENT_DIR;
			e.mode = 0755;
			e.path = strndup(p, (size_t)(s - p));
			if (!e.path)
				return nf_error_set(NF_ENOMEM, "out of memory");
			if ((err = push_any(l, &e, true)))
				return err;
		}
	}
	if (l->n > 1)
		qsort(l->ents, l->n, sizeof(*l->ents), cmp_entry);
	err = 0;
	for (i = 0, o = 0; i < l->n; i++) {
		if (o > 0 && !strcmp(l->ents[o - 1].path, l->ents[i].path)) {
			if (l->ents[o - 1].type == ENT_DIR && l->ents[i].type == ENT_DIR) {
				entry_release(&l->ents[i]);
				continue;
			}
			err = nf_error_set(NF_EINPUT, "layer path '%.200s' added twice%s",
					   l->ents[i].path,
					   (l->ents[o - 1].type == ENT_DIR || l->ents[i].type == ENT_DIR)
						   ? " (as a directory and as a non-directory)" : "");
			break;
		}
		l->ents[o++] = l->ents[i];
	}
	/* On error keep the rest, so that every entry is still owned exactly once. */
	for (; i < l->n; i++)
		l->ents[o++] = l->ents[i];
	l->n = o;
	return err;
}

/* The uncompressed tar: hash it (diff_id), then store or compress it. */
static int feed(nf_oci_layer *l, const void *data, size_t len)
{
	int err;
	if ((err = nf_sha256_update(l->diff, data, len)))
		return err;
	if (!nf_u64_add(&l->tar_size, l->tar_size, len))
		return nf_error_set(NF_EINTERNAL, "tar size overflow");
	return nf_oci_compressor_write(l->comp_w, data, len);
}

static la_ssize_t on_write(struct archive *a, void *ctx, const void *buf, size_t len)
{
	const nf_oci_layer *l = ctx;
	if (l->tar_failed) {
		archive_set_error(a, EIO, "the layer's tar was abandoned");
		return -1;
	}
	if (feed(ctx, buf, len)) {
		archive_set_error(a, EIO, "%s", nf_error_last());
		return -1;
	}
	return (la_ssize_t)len;
}

static int ar_err(struct archive *a, const char *what, const char *path)
{
	return nf_error_set(NF_EIO, "%s %.200s: %s", what, path,
			    archive_error_string(a) ? archive_error_string(a) : "libarchive error");
}

/* Stream one source file's bytes into the archive; it must still have its size. */
static int copy_file(struct archive *a, const struct entry *e, unsigned char *buf)
{
	struct stat st;
	uint64_t left = e->size;
	int fd, err = 0;

	fd = open(e->src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return nf_error_set(NF_EIO, "%s: %s", e->src, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != e->size) {
		err = nf_error_set(NF_EINPUT, "%s: changed while the layer was being written", e->src);
		goto done;
	}
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	while (left > 0) {
		size_t want = left > READ_BUF ? READ_BUF : (size_t)left;
		ssize_t n = read(fd, buf, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = nf_error_set(NF_EIO, "%s: %s", e->src, strerror(errno));
			goto done;
		}
		if (n == 0) {
			err = nf_error_set(NF_EINPUT, "%s: shrank while the layer was being written",
					   e->src);
			goto done;
		}
		if (archive_write_data(a, buf, (size_t)n) != n) {
			err = ar_err(a, "writing", e->path);
			goto done;
		}
		left -= (uint64_t)n;
	}
done:
	close(fd);
	return err;
}

static int write_entries(nf_oci_layer *l, struct archive *a)
{
	struct archive_entry *ae = NULL;
	unsigned char *buf = NULL;
	int err = 0;

	ae = archive_entry_new();
	buf = malloc(READ_BUF);
	if (!ae || !buf) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < l->n; i++) {
		const struct entry *e = &l->ents[i];
		int r;
		archive_entry_clear(ae);
		archive_entry_set_pathname(ae, e->path);
		archive_entry_set_mtime(ae, (time_t)l->epoch, 0);
		archive_entry_set_uid(ae, 0);
		archive_entry_set_gid(ae, 0);
		archive_entry_set_perm(ae, (mode_t)e->mode);
		switch (e->type) {
		case ENT_DIR:
			archive_entry_set_filetype(ae, AE_IFDIR);
			archive_entry_set_size(ae, 0);
			break;
		case ENT_LINK:
			archive_entry_set_filetype(ae, AE_IFLNK);
			archive_entry_set_symlink(ae, e->link);
			archive_entry_set_size(ae, 0);
			break;
		case ENT_FILE:
		case ENT_BYTES:
			if (e->size > (uint64_t)INT64_MAX) {
				err = nf_error_set(NF_EINPUT, "%s: too large", e->path);
				goto done;
			}
			archive_entry_set_filetype(ae, AE_IFREG);
			archive_entry_set_size(ae, (la_int64_t)e->size);
			break;
		}
		r = archive_write_header(a, ae);
		if (r < ARCHIVE_WARN) {
			err = ar_err(a, "tar header for", e->path);
			goto done;
		}
		if (e->type == ENT_BYTES && e->size > 0 &&
		    archive_write_data(a, e->data, (size_t)e->size) != (la_ssize_t)e->size) {
			err = ar_err(a, "writing", e->path);
			goto done;
		}
		if (e->type == ENT_FILE && (err = copy_file(a, e, buf)))
			goto done;
	}
done:
	archive_entry_free(ae);
	free(buf);
	return err;
}

static int sink_blob(void *ctx, const void *data, size_t len)
{
	return nf_oci_blob_writer_write(ctx, data, len);
}

int nf_oci_layer_set_threads(nf_oci_layer *l, unsigned threads)
{
	if (threads > NF_OCI_COMPRESS_THREADS_MAX)
		return nf_error_set(NF_EINPUT, "%u compression threads, more than %d", threads,
				    NF_OCI_COMPRESS_THREADS_MAX);
	l->threads = threads;
	return 0;
}

/* Give up on a tar that failed half-way.  libarchive 3.6 frees its client
 * buffer only in archive_write_close, not in archive_write_free, even after
 * archive_write_fail: close it too, and make on_write refuse the trailer
 * that close would otherwise push into the abandoned blob. */
static void abandon_tar(nf_oci_layer *l, struct archive *a)
{
	l->tar_failed = true;
	archive_write_fail(a);
	(void)archive_write_close(a);
}

int nf_oci_layer_finish(nf_oci_layer_desc *out, nf_oci_layer *l)
{
	struct archive *a = NULL;
	char diff_hex[NF_SHA256_HEX_LEN + 1];
	bool opened = false;
	int err = 0;

	memset(out, 0, sizeof(*out));
	if (l->finished)
		return nf_error_set(NF_EINTERNAL, "layer finished twice");
	l->finished = true;
	if ((err = normalise(l)))
		goto done;
	if ((err = nf_sha256_new(&l->diff)))
		goto done;
	if ((err = nf_oci_blob_writer_open(&l->w, l->layout, l->comp != NF_OCI_COMPRESS_NONE)))
		goto done;
	if ((err = nf_oci_compressor_new(&l->comp_w, l->comp, l->threads, sink_blob, l->w)))
		goto done;
	a = archive_write_new();
	if (!a) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(a, 0) != ARCHIVE_OK) {
		err = ar_err(a, "setting up", "tar");
		goto done;
	}
	if (archive_write_open2(a, l, NULL, on_write, NULL, NULL) != ARCHIVE_OK) {
		err = ar_err(a, "opening", "tar");
		goto done;
	}
	opened = true;
	if ((err = write_entries(l, a)))
		goto done;
	opened = false;
	if (archive_write_close(a) != ARCHIVE_OK) {
		err = ar_err(a, "closing", "tar");
		goto done;
	}
	if ((err = nf_oci_compressor_finish(l->comp_w)))
		goto done;
	if ((err = nf_sha256_final_hex(l->diff, diff_hex)))
		goto done;
	if ((err = nf_oci_blob_writer_commit(&out->blob, l->w, nf_oci_compression_media_type(l->comp),
					     l->comp == NF_OCI_COMPRESS_NONE ? diff_hex : NULL)))
		goto done;
	snprintf(out->diff_id, sizeof(out->diff_id), "sha256:%s", diff_hex);
	out->tar_size = l->tar_size;
	out->entries = l->n;
done:
	if (a) {
		if (opened)
			abandon_tar(l, a);
		archive_write_free(a);
	}
	if (err)
		memset(out, 0, sizeof(*out));
	return err;
}
