/* fs.c - file helpers (see fs.h). */
#define _GNU_SOURCE
#include "util/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/banned.h"

char *nf_strdup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

char *nf_path_join(const char *a, const char *b)
{
	size_t la = strlen(a);
	if (la && a[la - 1] == '/')
		return nf_strdup_printf("%s%s", a, b);
	return nf_strdup_printf("%s/%s", a, b);
}

int nf_fs_read_file(char **out, size_t *len, const char *path, size_t max_len)
{
	int fd = -1, err = 0;
	char *buf = NULL;
	struct stat st;
	size_t size, got = 0;

	*out = NULL;
	*len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = errno == ENOENT ? NF_ENOTFOUND : NF_EINPUT;
		nf_error_set(err, "%s: %s", path, strerror(errno));
		goto done;
	}
	if (fstat(fd, &st) < 0) {
		err = nf_error_set(NF_EIO, "%s: %s", path, strerror(errno));
		goto done;
	}
	if (S_ISDIR(st.st_mode)) {
		err = nf_error_set(NF_EINPUT, "%s: is a directory", path);
		goto done;
	}
	if ((uint64_t)st.st_size > max_len) {
		err = nf_error_set(NF_EINPUT, "%s: file is %lld bytes, more than the limit of %zu",
				   path, (long long)st.st_size, max_len);
		goto done;
	}
	size = (size_t)st.st_size;
	buf = malloc(size + 1);
	if (!buf) {
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", path);
		goto done;
	}
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = nf_error_set(NF_EIO, "%s: %s", path, strerror(errno));
			goto done;
		}
		if (n == 0)
			break; /* file shrank under us */
		got += (size_t)n;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	buf = NULL;
done:
	free(buf);
	if (fd >= 0)
		close(fd);
	return err;
}

int nf_fs_errno_code(int e)
{
	return e == ENOSPC || e == EFBIG || e == EDQUOT || e == EACCES || e == EROFS ? NF_EENV
										     : NF_EIO;
}

int nf_fs_write_error(const char *name, int e)
{
	if (e == ENOSPC || e == EDQUOT)
		return nf_error_set(NF_EENV, "%s: the disk is full (%s)", name, strerror(e));
	if (e == EFBIG) /* RLIMIT_FSIZE: the same to us as a full disk */
		return nf_error_set(NF_EENV, "%s: the file size limit is reached (%s)", name,
				    strerror(e));
	return nf_error_set(nf_fs_errno_code(e), "%s: %s", name, strerror(e));
}

int nf_fs_lock(int *fd, const char *path, int how, bool create, bool wait)
{
	int flags = create ? O_RDWR | O_CREAT | O_CLOEXEC : O_RDONLY | O_CLOEXEC | O_NOFOLLOW;
	*fd = open(path, flags, 0644);
	if (*fd < 0)
		return nf_error_set(errno == ENOENT ? NF_ENOTFOUND : nf_fs_errno_code(errno),
				    "%s: %s", path, strerror(errno));
	while (flock(*fd, how | (wait ? 0 : LOCK_NB)) < 0) {
		int e = errno;
		if (e == EINTR)
			continue;
		close(*fd);
		*fd = -1;
		if (e == EWOULDBLOCK && !wait)
			return 1;
		return nf_error_set(NF_EIO, "%s: lock: %s", path, strerror(e));
	}
	return 0;
}

int nf_atomic_open(nf_atomic_file *f, const char *path, int mode)
{
	f->fd = -1;
	f->tmp_path = NULL;
	f->final_path = strdup(path);
	if (!f->final_path)
		return nf_error_set(NF_ENOMEM, "out of memory");
	f->tmp_path = nf_strdup_printf("%s.tmp.%ld", path, (long)getpid());
	if (!f->tmp_path) {
		nf_atomic_abort(f);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	f->fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (f->fd < 0) {
		int e = errno;
		nf_atomic_abort(f);
		return nf_fs_write_error(path, e);
	}
	/* The umask must not change what we produce: set the mode explicitly. */
	if (fchmod(f->fd, (mode_t)mode) < 0) {
		int e = errno;
		nf_atomic_abort(f);
		return nf_error_set(NF_EIO, "%s: %s", path, strerror(e));
	}
	return 0;
}

/* write(2) at the file offset, or pwrite(2) at *off when off is given. */
static int write_loop(int fd, const void *data, size_t len, const uint64_t *off,
		      const char *name)
{
	const char *p = data;
	uint64_t at = off ? *off : 0;
	while (len > 0) {
		ssize_t n = off ? pwrite(fd, p, len, (off_t)at) : write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return nf_fs_write_error(name, errno);
		p += n;
		len -= (size_t)n;
		at += (uint64_t)n;
	}
	return 0;
}

int nf_fs_write_all(int fd, const void *data, size_t len, const char *name)
{
	return write_loop(fd, data, len, NULL, name);
}

int nf_fs_pwrite_all(int fd, const void *data, size_t len, uint64_t off, const char *name)
{
	return write_loop(fd, data, len, &off, name);
}

void nf_fs_fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

int nf_atomic_write(nf_atomic_file *f, const void *data, size_t len)
{
	return nf_fs_write_all(f->fd, data, len, f->final_path);
}

int nf_atomic_pwrite(nf_atomic_file *f, const void *data, size_t len, uint64_t off)
{
	return nf_fs_pwrite_all(f->fd, data, len, off, f->final_path);
}

int nf_atomic_commit(nf_atomic_file *f)
{
	int err = 0;
	if (fsync(f->fd) < 0) /* a delayed allocation can fail here on a full disk */
		err = nf_fs_write_error(f->final_path, errno);
	if (close(f->fd) < 0 && !err)
		err = nf_fs_write_error(f->final_path, errno);
	f->fd = -1;
	if (!err && rename(f->tmp_path, f->final_path) < 0)
		err = nf_error_set(NF_EIO, "%s: rename: %s", f->final_path, strerror(errno));
	if (err)
		unlink(f->tmp_path);
	free(f->tmp_path);
	free(f->final_path);
	f->tmp_path = f->final_path = NULL;
	return err;
}

void nf_atomic_abort(nf_atomic_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	if (f->tmp_path)
		unlink(f->tmp_path);
	free(f->tmp_path);
	free(f->final_path);
	f->fd = -1;
	f->tmp_path = f->final_path = NULL;
}

int nf_fs_write_atomic(const char *path, const void *data, size_t len, int mode)
{
	nf_atomic_file f;
	int err = nf_atomic_open(&f, path, mode);
	if (err)
		return err;
	err = nf_atomic_write(&f, data, len);
	if (err) {
		nf_atomic_abort(&f);
		return err;
	}
	return nf_atomic_commit(&f);
}

int nf_fs_mkdir_p(const char *path, int mode)
{
	char *p = strdup(path);
	int err = 0;
	if (!p)
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (char *s = p + 1;; s++) {
		char c = *s;
		if (c != '/' && c != '\0')
			continue;
		*s = '\0';
		if (mkdir(p, (mode_t)mode) < 0 && errno != EEXIST) {
			err = nf_error_set(nf_fs_errno_code(errno), "%s: mkdir: %s", p, strerror(errno));
			break;
		}
		*s = c;
		if (c == '\0')
			break;
	}
	if (!err && !nf_fs_is_dir(path))
		err = nf_error_set(NF_EINPUT, "%s: not a directory", path);
	free(p);
	return err;
}

int nf_fs_each_child(const char *dir, int (*fn)(void *ctx, const char *path, const char *name),
		     void *ctx)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int err = 0;

	if (!d)
		return nf_error_set(NF_EIO, "%s: %s", dir, strerror(errno));
	while (!err && (de = readdir(d)) != NULL) {
		char *child;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		child = nf_path_join(dir, de->d_name);
		if (!child) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			break;
		}
		err = fn(ctx, child, de->d_name);
		free(child);
	}
	closedir(d);
	return err;
}

static int remove_child(void *ctx, const char *path, const char *name)
{
	(void)ctx;
	(void)name;
	return nf_fs_remove_tree(path);
}

int nf_fs_remove_tree(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : nf_error_set(NF_EIO, "%s: %s", path, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		int err = nf_fs_each_child(path, remove_child, NULL);
		if (err)
			return err;
		if (rmdir(path) < 0)
			return nf_error_set(NF_EIO, "%s: %s", path, strerror(errno));
		return 0;
	}
	if (unlink(path) < 0)
		return nf_error_set(NF_EIO, "%s: %s", path, strerror(errno));
	return 0;
}

bool nf_fs_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

bool nf_fs_is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int nf_fs_file_size(uint64_t *out, const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return nf_error_set(errno == ENOENT ? NF_ENOTFOUND : NF_EIO, "%s: %s", path,
				    strerror(errno));
	*out = (uint64_t)st.st_size;
	return 0;
}

int nf_fs_copy_file(const char *src, const char *dst)
{
	char buf[1 << 16];
	struct stat st;
	int in = -1, err = 0;
	nf_atomic_file out = {.fd = -1};

	if (link(src, dst) == 0)
		return 0;
	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0 || fstat(in, &st) < 0) {
		err = nf_error_set(NF_EIO, "%s: %s", src, strerror(errno));
		goto done;
	}
	if ((err = nf_atomic_open(&out, dst, (int)(st.st_mode & 0777))))
		goto done;
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = nf_error_set(NF_EIO, "%s: %s", src, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		if ((err = nf_atomic_write(&out, buf, (size_t)n)))
			break;
	}
	if (err)
		nf_atomic_abort(&out);
	else
		err = nf_atomic_commit(&out);
done:
	if (in >= 0)
		close(in);
	return err;
}

/* ctx: the destination folder. */
static int copy_child(void *ctx, const char *path, const char *name)
{
	char *to = nf_path_join(ctx, name);
	int err = to ? nf_fs_copy_tree(path, to) : nf_error_set(NF_ENOMEM, "out of memory");
	free(to);
	return err;
}

int nf_fs_copy_tree(const char *src, const char *dst)
{
	struct stat st;

	if (stat(src, &st) < 0)
		return nf_error_set(NF_EIO, "%s: %s", src, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return nf_fs_copy_file(src, dst);
	if (mkdir(dst, st.st_mode & 0777) < 0)
		return nf_error_set(nf_fs_errno_code(errno), "%s: mkdir: %s", dst, strerror(errno));
	return nf_fs_each_child(src, copy_child, (void *)dst);
}

int nf_fs_map_file(const void **base, size_t *size, const char *path)
{
	struct stat st;
	int err = 0, fd = open(path, O_RDONLY | O_CLOEXEC);
	*base = NULL;
	*size = 0;
	if (fd < 0)
		return nf_error_set(errno == ENOENT ? NF_ENOTFOUND : NF_EINPUT, "%s: %s", path,
				    strerror(errno));
	if (fstat(fd, &st) < 0)
		err = nf_error_set(NF_EIO, "%s: %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		err = nf_error_set(NF_EINPUT, "%s: not a regular file", path);
	else if (st.st_size > 0) {
		void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED)
			err = nf_error_set(NF_EIO, "%s: mmap: %s", path, strerror(errno));
		else {
			*base = map;
			*size = (size_t)st.st_size;
		}
	}
	close(fd);
	return err;
}

void nf_fs_unmap_file(const void *base, size_t size)
{
	if (base)
		munmap((void *)base, size);
}
