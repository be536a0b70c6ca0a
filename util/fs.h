/*
 * fs.h - file helpers: bounded whole-file reads, atomic writes (temp file in
 * the same folder, fsync, rename), recursive mkdir and removal.
 */
#ifndef NF_UTIL_FS_H
#define NF_UTIL_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Read a whole file into a new NUL-terminated buffer (the NUL is not counted
 * in *len).  Refuses files larger than max_len with NF_EINPUT.
 * Caller owns *out (free()).
 */
int nf_fs_read_file(char **out, size_t *len, const char *path, size_t max_len);

/* Map a regular file read-only and private: *base (NULL for an empty file)
 * and *size.  NF_ENOTFOUND when it does not exist, NF_EINPUT when it cannot
 * be opened or is not a regular file, NF_EIO when it cannot be mapped.
 * Release with nf_fs_unmap_file. */
int nf_fs_map_file(const void **base, size_t *size, const char *path);
void nf_fs_unmap_file(const void *base, size_t size); /* NULL is fine */

/* Write data to path atomically; mode is the file mode (e.g. 0644). */
int nf_fs_write_atomic(const char *path, const void *data, size_t len, int mode);

/* A file being written atomically: bytes go to a temp file beside `path`. */
typedef struct nf_atomic_file {
	int fd;
	char *tmp_path;   /* owned */
	char *final_path; /* owned */
} nf_atomic_file;

/* Open a temp file beside `path`.  On success call commit or abort exactly once. */
int nf_atomic_open(nf_atomic_file *f, const char *path, int mode);
/* Write all of data (retries short writes). */
int nf_atomic_write(nf_atomic_file *f, const void *data, size_t len);
/* Write all of data at byte off of the temp file (the file grows to hold it). */
int nf_atomic_pwrite(nf_atomic_file *f, const void *data, size_t len, uint64_t off);
/* fsync, close and rename over the final path; frees f's strings. */
int nf_atomic_commit(nf_atomic_file *f);
/* close and unlink the temp file; frees f's strings.  Safe after a failed open. */
void nf_atomic_abort(nf_atomic_file *f);

/* write(2) all of data to fd (retries short writes and EINTR); errors name `name`
 * (NF_EENV when the disk is full, else NF_EIO). */
int nf_fs_write_all(int fd, const void *data, size_t len, const char *name);
/* pwrite(2) all of data at off, with nf_fs_write_all's errors. */
int nf_fs_pwrite_all(int fd, const void *data, size_t len, uint64_t off, const char *name);

/* The NF_E* code for a failed write's errno: NF_EENV when the disk (or the
 * file size limit, RLIMIT_FSIZE's EFBIG) is full, or for permission, else NF_EIO. */
int nf_fs_errno_code(int e);

/* Set the last error for a write to `name` that failed with errno e, in
 * words that say the disk is full when it is; returns nf_fs_errno_code(e). */
int nf_fs_write_error(const char *name, int e);

/*
 * flock(2) path: exclusive (LOCK_EX) or shared (LOCK_SH).  create: open it as
 * a lock file, creating it; else open what is there (a file or a folder).
 * 0 and *fd when taken (close(*fd) releases it, and so does the process's
 * death); 1 when wait is false and another open file holds it (*fd -1).
 */
int nf_fs_lock(int *fd, const char *path, int how, bool create, bool wait);

/* fsync a folder so that a rename into it is durable (best effort: errors ignored). */
void nf_fs_fsync_dir(const char *path);

/* Call fn(ctx, "DIR/NAME", NAME) for each entry of folder dir but "." and "..",
 * in readdir order; stops at and returns the first error. */
int nf_fs_each_child(const char *dir, int (*fn)(void *ctx, const char *path, const char *name),
		     void *ctx);

/* mkdir -p with mode for each created directory. */
int nf_fs_mkdir_p(const char *path, int mode);

/* rm -rf; a missing path is not an error. */
int nf_fs_remove_tree(const char *path);

/* Copy a folder tree (regular files and folders) to dst, which must not
 * exist.  Files are hard-linked when possible (cache entries are immutable),
 * else copied; modes are kept. */
int nf_fs_copy_tree(const char *src, const char *dst);

/* Copy one file (hard link when possible), creating dst with src's mode. */
int nf_fs_copy_file(const char *src, const char *dst);

bool nf_fs_exists(const char *path);
bool nf_fs_is_dir(const char *path);

/* Size of a regular file. */
int nf_fs_file_size(uint64_t *out, const char *path);

/* Join two path parts with one '/'; caller frees. NULL on allocation failure. */
char *nf_path_join(const char *a, const char *b);

/* printf into a new string; caller frees.  NULL on failure. */
char *nf_strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
