/* cache.c - the local content-addressed cache (see cache.h). */
#define _GNU_SOURCE
#include "factory/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define COPY_CHUNK (1u << 20)

struct nf_cache {
	char *root;
	char *blobs; /* <root>/blobs/sha256 */
	char *stages;
	char *tmp;
	char *locks;    /* <root>/locks: one lock file per stage key */
	char *tmp_lock; /* <root>/tmp.lock: shared by writers creating a temp, exclusive to sweep */
};

struct nf_cache_writer {
	nf_cache *c;
	int fd; /* flocked while we write it: a sweep leaves it alone */
	char *tmp_path;
	nf_sha256 *h;
	uint64_t size;
};

struct nf_cache_stage {
	nf_cache *c;
	int dir_fd; /* the temp folder, flocked while we fill it: a sweep leaves it alone */
	char *tmp_dir;
	char key[NF_SHA256_HEX_LEN + 1];
};

static int errno_code(int e)
{
	return nf_fs_errno_code(e);
}

int nf_cache_default_root(char **out)
{
	const char *v;

	*out = NULL;
	v = getenv("NIMFACTORY_CACHE");
	if (v && *v)
		*out = strdup(v);
	else if ((v = getenv("XDG_CACHE_HOME")) && v[0] == '/')
		*out = nf_path_join(v, "nimfactory");
	else if ((v = getenv("HOME")) && *v)
		*out = nf_path_join(v, ".cache/nimfactory");
	else
		return nf_error_set(NF_EENV, "no cache folder: set NIMFACTORY_CACHE or HOME");
	if (!*out)
		return nf_error_set(NF_ENOMEM, "out of memory");
	return 0;
}

void nf_cache_free(nf_cache *c)
{
	if (!c)
		return;
	free(c->root);
	free(c->blobs);
	free(c->stages);
	free(c->tmp);
	free(c->locks);
	free(c->tmp_lock);
	free(c);
}

/* A temp file or folder whose writer holds no lock on it was left by a
 * process that died (SIGKILL, power): remove it.  ctx: unused. */
static int sweep_one(void *ctx, const char *path, const char *name)
{
	int fd, r;
	(void)ctx;
	(void)name;
	r = nf_fs_lock(&fd, path, LOCK_EX, false, false);
	if (r == 1) /* its writer is alive */
		return 0;
	if (r < 0) { /* gone already, or not ours to judge: leave it */
		nf_error_clear();
		return 0;
	}
	(void)nf_fs_remove_tree(path);
	close(fd);
	nf_error_clear();
	return 0;
}

/* Remove the leftovers of dead writers from tmp/.  Writers hold tmp.lock
 * shared from creating their temp until they have locked it, so the sweep,
 * holding it exclusive, never sees a live temp that is not locked yet.  When
 * another process holds it, the sweep is skipped: the next open sweeps. */
static int sweep_tmp(nf_cache *c)
{
	int fd, r = nf_fs_lock(&fd, c->tmp_lock, LOCK_EX, true, false);
	if (r == 1)
		return 0;
	if (r < 0)
		return nf_error_wrap(r, "cache %s", c->root);
	r = nf_fs_each_child(c->tmp, sweep_one, NULL);
	close(fd);
	return r;
}

/* While a writer creates its temp and locks it: shared, against a sweep. */
static int hold_tmp_lock(int *fd, nf_cache *c)
{
	int r = nf_fs_lock(fd, c->tmp_lock, LOCK_SH, true, true);
	return r < 0 ? nf_error_wrap(r, "cache %s", c->root) : 0;
}

int nf_cache_tmp_make(char **path, int *fd, nf_cache *c, const char *prefix, bool dir)
{
	int tmp_lock = -1, err;

	*fd = -1;
	if (!(*path = nf_strdup_printf("%s/%s.XXXXXX", c->tmp, prefix)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	if ((err = hold_tmp_lock(&tmp_lock, c)) < 0)
		goto done;
	if (dir ? !mkdtemp(*path) : (*fd = mkostemp(*path, O_CLOEXEC)) < 0) {
		err = nf_fs_write_error(*path, errno);
		goto done;
	}
	if (dir && (err = nf_fs_lock(fd, *path, LOCK_EX, false, false)) != 0) {
		rmdir(*path);
		err = err < 0 ? err : nf_error_set(NF_EINTERNAL, "%s: locked by another", *path);
	} else if (!dir && flock(*fd, LOCK_EX | LOCK_NB) < 0) {
		err = nf_error_set(NF_EIO, "%s: lock: %s", *path, strerror(errno));
		close(*fd);
		unlink(*path);
	}
done:
	if (tmp_lock >= 0)
		close(tmp_lock);
	if (err) {
		*fd = -1;
		free(*path);
		*path = NULL;
	}
	return err;
}

int nf_cache_open(nf_cache **out, const char *root)
{
	nf_cache *c = NULL;
	char *git = NULL;
	int err = 0;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (root) {
		c->root = strdup(root);
		if (!c->root) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
	} else if ((err = nf_cache_default_root(&c->root)) < 0) {
		goto done;
	}
	c->blobs = nf_path_join(c->root, "blobs/sha256");
	c->stages = nf_path_join(c->root, "stages");
	c->tmp = nf_path_join(c->root, "tmp");
	c->locks = nf_path_join(c->root, "locks");
	c->tmp_lock = nf_path_join(c->root, "tmp.lock");
	git = nf_path_join(c->root, "git");
	if (!c->blobs || !c->stages || !c->tmp || !c->locks || !c->tmp_lock || !git) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = nf_fs_mkdir_p(c->blobs, 0755)) < 0 ||
	    (err = nf_fs_mkdir_p(c->stages, 0755)) < 0 ||
	    (err = nf_fs_mkdir_p(c->tmp, 0755)) < 0 || (err = nf_fs_mkdir_p(git, 0755)) < 0 ||
	    (err = nf_fs_mkdir_p(c->locks, 0755)) < 0) {
		nf_error_wrap(err, "cache %s", c->root);
		goto done;
	}
	if ((err = sweep_tmp(c)) < 0)
		goto done;
	*out = c;
	c = NULL;
done:
	free(git);
	nf_cache_free(c);
	return err;
}

const char *nf_cache_root(const nf_cache *c)
{
	return c->root;
}

static int check_hex(const char *hex, const char *what)
{
	if (!hex || !nf_sha256_is_hex(hex))
		return nf_error_set(NF_EINPUT, "%s '%s' is not 64 lowercase hex digits", what,
				    hex ? hex : "(null)");
	return 0;
}

int nf_cache_blob_path(char **out, const nf_cache *c, const char *hex)
{
	int err;
	*out = NULL;
	if ((err = check_hex(hex, "sha256")) < 0)
		return err;
	*out = nf_path_join(c->blobs, hex);
	return *out ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
}

int nf_cache_blob_lookup(char **out, const nf_cache *c, const char *hex)
{
	char *path = NULL;
	struct stat st;
	int err;

	if (out)
		*out = NULL;
	if ((err = nf_cache_blob_path(&path, c, hex)) < 0)
		return err;
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
		err = nf_error_set(NF_ENOTFOUND, "sha256:%s is not in the cache %s", hex, c->root);
		free(path);
		return err;
	}
	if (out)
		*out = path;
	else
		free(path);
	return 0;
}

/* ---- blob writer ---- */

void nf_cache_writer_abort(nf_cache_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	if (w->tmp_path)
		unlink(w->tmp_path);
	free(w->tmp_path);
	nf_sha256_free(w->h);
	free(w);
}

int nf_cache_writer_open(nf_cache_writer **out, nf_cache *c)
{
	nf_cache_writer *w = NULL;
	int err = 0;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	w->fd = -1;
	w->c = c;
	if ((err = nf_cache_tmp_make(&w->tmp_path, &w->fd, c, "blob", false)) < 0)
		goto done;
	if ((err = nf_sha256_new(&w->h)) < 0)
		goto done;
	*out = w;
	w = NULL;
done:
	nf_cache_writer_abort(w);
	return err;
}

int nf_cache_writer_write(nf_cache_writer *w, const void *data, size_t len)
{
	const char *p = data;
	int err;

	if ((err = nf_sha256_update(w->h, data, len)) < 0)
		return err;
	while (len > 0) {
		ssize_t n = write(w->fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return nf_fs_write_error(w->tmp_path, errno);
		p += n;
		len -= (size_t)n;
		w->size += (uint64_t)n;
	}
	return 0;
}

uint64_t nf_cache_writer_size(const nf_cache_writer *w)
{
	return w->size;
}

int nf_cache_writer_reset(nf_cache_writer *w)
{
	int err;
	if (ftruncate(w->fd, 0) < 0 || lseek(w->fd, 0, SEEK_SET) < 0)
		return nf_error_set(NF_EIO, "%s: %s", w->tmp_path, strerror(errno));
	nf_sha256_free(w->h);
	w->h = NULL;
	if ((err = nf_sha256_new(&w->h)) < 0)
		return err;
	w->size = 0;
	return 0;
}

int nf_cache_writer_commit(char *out_hex, char **out_path, nf_cache_writer *w,
			   const char *expect_hex)
{
	char hex[NF_SHA256_HEX_LEN + 1];
	char *final = NULL;
	int err = 0;

	if (out_path)
		*out_path = NULL;
	if (expect_hex && (err = check_hex(expect_hex, "expected sha256")) < 0)
		goto done;
	if ((err = nf_sha256_final_hex(w->h, hex)) < 0)
		goto done;
	if (expect_hex && strcmp(hex, expect_hex) != 0) {
		err = nf_error_set(NF_EINPUT,
				   "sha256 mismatch: expected %s, got %s (%llu bytes); nothing was stored",
				   expect_hex, hex, (unsigned long long)w->size);
		goto done;
	}
	if (fchmod(w->fd, 0444) < 0 || fsync(w->fd) < 0) {
		err = nf_fs_write_error(w->tmp_path, errno);
		goto done;
	}
	if (close(w->fd) < 0) {
		w->fd = -1;
		err = nf_error_set(NF_EIO, "%s: close: %s", w->tmp_path, strerror(errno));
		goto done;
	}
	w->fd = -1;
	final = nf_path_join(w->c->blobs, hex);
	if (!final) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	/* A concurrent writer of the same digest renames identical bytes: harmless. */
	if (rename(w->tmp_path, final) < 0) {
		err = nf_error_set(errno_code(errno), "%s: rename: %s", final, strerror(errno));
		goto done;
	}
	free(w->tmp_path);
	w->tmp_path = NULL;
	nf_fs_fsync_dir(w->c->blobs);
	if (out_hex)
		memcpy(out_hex, hex, sizeof(hex));
	if (out_path) {
		*out_path = final;
		final = NULL;
	}
done:
	free(final);
	nf_cache_writer_abort(w);
	return err;
}

int nf_cache_add_file(char *out_hex, char **out_path, nf_cache *c, const char *file,
		      const char *expect_hex)
{
	nf_cache_writer *w = NULL;
	char *buf = NULL;
	struct stat st;
	int fd = -1, err = 0;

	if (out_path)
		*out_path = NULL;
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = nf_error_set(errno == ENOENT ? NF_ENOTFOUND : NF_EINPUT, "%s: %s", file,
				   strerror(errno));
		goto done;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		err = nf_error_set(NF_EINPUT, "%s: not a regular file", file);
		goto done;
	}
	buf = malloc(COPY_CHUNK);
	if (!buf) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = nf_cache_writer_open(&w, c)) < 0)
		goto done;
	for (;;) {
		ssize_t n = read(fd, buf, COPY_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = nf_error_set(NF_EIO, "%s: %s", file, strerror(errno));
			goto done;
		}
		if (n == 0)
			break;
		if ((err = nf_cache_writer_write(w, buf, (size_t)n)) < 0)
			goto done;
	}
	err = nf_cache_writer_commit(out_hex, out_path, w, expect_hex);
	w = NULL;
	if (err)
		nf_error_wrap(err, "%s", file);
done:
	nf_cache_writer_abort(w);
	free(buf);
	if (fd >= 0)
		close(fd);
	return err;
}

int nf_cache_add_data(char *out_hex, char **out_path, nf_cache *c, const void *data,
		      size_t len)
{
	nf_cache_writer *w = NULL;
	int err;

	if (out_path)
		*out_path = NULL;
	if ((err = nf_cache_writer_open(&w, c)) < 0)
		return err;
	if ((err = nf_cache_writer_write(w, data, len)) < 0) {
		nf_cache_writer_abort(w);
		return err;
	}
	return nf_cache_writer_commit(out_hex, out_path, w, NULL);
}

/* ---- stages ---- */

int nf_cache_stage_lookup(char **out, const nf_cache *c, const char *key_hex)
{
	char *path = NULL;
	int err;

	*out = NULL;
	if ((err = check_hex(key_hex, "stage key")) < 0)
		return err;
	path = nf_path_join(c->stages, key_hex);
	if (!path)
		return nf_error_set(NF_ENOMEM, "out of memory");
	if (!nf_fs_is_dir(path)) {
		free(path);
		return nf_error_set(NF_ENOTFOUND, "stage %s is not in the cache %s", key_hex,
				    c->root);
	}
	*out = path;
	return 0;
}

void nf_cache_stage_abort(nf_cache_stage *s)
{
	if (!s)
		return;
	if (s->tmp_dir)
		(void)nf_fs_remove_tree(s->tmp_dir);
	if (s->dir_fd >= 0)
		close(s->dir_fd);
	free(s->tmp_dir);
	free(s);
}

int nf_cache_stage_begin(nf_cache_stage **out, nf_cache *c, const char *key_hex)
{
	nf_cache_stage *s = NULL;
	char prefix[sizeof("stage.") + 12];
	int err = 0;

	*out = NULL;
	if ((err = check_hex(key_hex, "stage key")) < 0)
		return err;
	if (!(s = calloc(1, sizeof(*s))))
		return nf_error_set(NF_ENOMEM, "out of memory");
	s->c = c;
	memcpy(s->key, key_hex, sizeof(s->key));
	snprintf(prefix, sizeof(prefix), "stage.%.12s", key_hex);
	if ((err = nf_cache_tmp_make(&s->tmp_dir, &s->dir_fd, c, prefix, true)) < 0) {
		free(s);
		return err;
	}
	/* mkdtemp makes it 0700; stage outputs are meant to be read by others too. */
	(void)chmod(s->tmp_dir, 0755);
	*out = s;
	return 0;
}

const char *nf_cache_stage_dir(const nf_cache_stage *s)
{
	return s->tmp_dir;
}

static int fsync_tree(const char *path, int depth);

/* ctx: the depth of the folder. */
static int fsync_child(void *ctx, const char *path, const char *name)
{
	(void)name;
	return fsync_tree(path, *(const int *)ctx + 1);
}

/* fsync every file and folder under path (depth first), then path itself. */
static int fsync_tree(const char *path, int depth)
{
	struct stat st;
	int err = 0, fd;

	if (depth > 256)
		return nf_error_set(NF_EINPUT, "%s: folders nested too deep", path);
	if (lstat(path, &st) < 0)
		return nf_error_set(NF_EIO, "%s: %s", path, strerror(errno));
	if (S_ISLNK(st.st_mode))
		return 0;
	if (S_ISDIR(st.st_mode)) {
		if ((err = nf_fs_each_child(path, fsync_child, &depth)))
			return err;
	} else if (!S_ISREG(st.st_mode)) {
		return 0;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return nf_error_set(NF_EIO, "%s: %s", path, strerror(errno));
	if (fsync(fd) < 0 && errno != EINVAL)
		err = nf_error_set(errno_code(errno), "%s: fsync: %s", path, strerror(errno));
	close(fd);
	return err;
}

int nf_cache_stage_commit(char **out, nf_cache_stage *s)
{
	char *final = NULL;
	int err = 0;

	if (out)
		*out = NULL;
	if ((err = fsync_tree(s->tmp_dir, 0)) < 0)
		goto done;
	final = nf_path_join(s->c->stages, s->key);
	if (!final) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (rename(s->tmp_dir, final) < 0) {
		int e = errno;
		/* Someone else published this key first: keep theirs. */
		if (!((e == ENOTEMPTY || e == EEXIST) && nf_fs_is_dir(final))) {
			err = nf_error_set(errno_code(e), "%s: rename: %s", final, strerror(e));
			goto done;
		}
	} else {
		free(s->tmp_dir);
		s->tmp_dir = NULL;
		nf_fs_fsync_dir(s->c->stages);
	}
	if (out) {
		*out = final;
		final = NULL;
	}
done:
	free(final);
	nf_cache_stage_abort(s);
	return err;
}

/* ---- one writer per stage key ---- */

struct nf_cache_lock {
	int fd;
};

int nf_cache_stage_lock(nf_cache_lock **out, nf_cache *c, const char *key_hex, bool wait)
{
	char *path = NULL;
	int fd = -1, err;

	*out = NULL;
	if ((err = check_hex(key_hex, "stage key")) < 0)
		return err;
	if (!(path = nf_strdup_printf("%s/%s.lock", c->locks, key_hex)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	err = nf_fs_lock(&fd, path, LOCK_EX, true, wait);
	free(path);
	if (err)
		return err; /* 1: busy, or an error */
	if (!(*out = malloc(sizeof(**out)))) {
		close(fd);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	(*out)->fd = fd;
	return 0;
}

void nf_cache_stage_unlock(nf_cache_lock *l)
{
	if (!l)
		return;
	close(l->fd); /* releases the flock; the lock file stays for the next writer */
	free(l);
}

/* ---- listing ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_dir(nf_cache *c, const char *dir, const char *kind,
		    int (*fn)(void *user, const nf_cache_entry *e), void *user)
{
	DIR *d = NULL;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int err = 0;

	(void)c;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : nf_error_set(NF_EIO, "%s: %s", dir, strerror(errno));
	while ((de = readdir(d)) != NULL) {
		if (!nf_sha256_is_hex(de->d_name))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 64, bytes;
			char **nn;
			if (!nf_size_mul(&bytes, ncap, sizeof(*names))) {
				err = nf_error_set(NF_ENOMEM, "too many cache entries");
				goto done;
			}
			nn = realloc(names, bytes);
			if (!nn) {
				err = nf_error_set(NF_ENOMEM, "out of memory");
				goto done;
			}
			names = nn;
			cap = ncap;
		}
		names[n] = strdup(de->d_name);
		if (!names[n]) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
		n++;
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n && !err; i++) {
		nf_cache_entry e = {kind, names[i], 0, NULL};
		char *path = nf_path_join(dir, names[i]);
		struct stat st;
		if (!path) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			break;
		}
		if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode))
			e.size = (uint64_t)st.st_size;
		e.path = path;
		err = fn(user, &e);
		free(path);
	}
done:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return err;
}

int nf_cache_foreach(nf_cache *c, int (*fn)(void *user, const nf_cache_entry *e), void *user)
{
	int err = list_dir(c, c->blobs, "blob", fn, user);
	if (err)
		return err;
	return list_dir(c, c->stages, "stage", fn, user);
}

/* ---- verification ---- */

typedef struct verify_ctx {
	size_t n_bad;
	void (*fn)(void *user, const char *path, const char *why);
	void *user;
} verify_ctx;

static int verify_blob(void *user, const nf_cache_entry *e)
{
	verify_ctx *v = user;
	char hex[NF_SHA256_HEX_LEN + 1];
	char why[160];
	int err = nf_sha256_file_hex(hex, e->path);

	if (!err && !strcmp(hex, e->hex))
		return 0;
	if (err)
		snprintf(why, sizeof(why), "%s", nf_error_last());
	else
		snprintf(why, sizeof(why), "its bytes hash to sha256:%s", hex);
	nf_error_clear();
	v->n_bad++;
	if (v->fn)
		v->fn(v->user, e->path, why);
	return 0;
}

int nf_cache_verify_blobs(nf_cache *c, size_t *n_bad,
			  void (*fn)(void *user, const char *path, const char *why), void *user)
{
	verify_ctx v = {0, fn, user};
	int err = list_dir(c, c->blobs, "blob", verify_blob, &v);
	*n_bad = v.n_bad;
	return err;
}
