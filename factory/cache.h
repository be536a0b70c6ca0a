/*
 * cache.h - the local content-addressed cache.
 *
 * Layout under the root ($NIMFACTORY_CACHE, else $XDG_CACHE_HOME/nimfactory,
 * else ~/.cache/nimfactory):
 *
 *   blobs/sha256/<hex>   immutable files named by the sha256 of their bytes
 *                        (mode 0444); written to tmp/, hashed on the way in,
 *                        fsynced, checked, then renamed into place.
 *   stages/<hex>/        a stage's output folder keyed by the digest of the
 *                        stage's inputs; filled in a temp folder under tmp/ and
 *                        made visible by one rename, so a crash never leaves a
 *                        half-written entry.
 *   git/<hex>.git        bare mirrors of git remotes (keyed by the url), used by
 *                        factory/fetch.
 *   locks/<key>.lock     flock(2) files: one writer per stage key (nf_cache_stage_lock).
 *   tmp/                 temp files and folders (same file system as the rest),
 *                        each flocked by its writer; nf_cache_open removes those
 *                        no live process holds (leftovers of a killed build).
 *   tmp.lock             shared while a writer creates its temp, exclusive to sweep.
 *
 * Two processes writing the same digest at once are fine: each writes its own
 * temp file or folder, and the renames are atomic (the first stage to land
 * wins; the loser's folder is removed and the winner's path is returned).
 */
#ifndef NF_FACTORY_CACHE_H
#define NF_FACTORY_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/sha256.h"

typedef struct nf_cache nf_cache;

/*
 * The default cache root from the environment (see above).  Caller owns *out
 * (free()).  NF_EENV when neither NIMFACTORY_CACHE, XDG_CACHE_HOME nor HOME is set.
 */
int nf_cache_default_root(char **out);

/*
 * Open the cache at root (NULL: nf_cache_default_root), creating its folders.
 * Caller owns *out (nf_cache_free).
 */
int nf_cache_open(nf_cache **out, const char *root);
void nf_cache_free(nf_cache *c);

/* The cache's root folder; owned by c. */
const char *nf_cache_root(const nf_cache *c);

/* "<root>/blobs/sha256/<hex>" (whether or not it exists).  Caller owns *out. */
int nf_cache_blob_path(char **out, const nf_cache *c, const char *hex);

/*
 * 0 and *out = the blob's path when blobs/sha256/<hex> is present, else
 * NF_ENOTFOUND (*out NULL).  out may be NULL to just test.  Caller owns *out.
 */
int nf_cache_blob_lookup(char **out, const nf_cache *c, const char *hex);

/*
 * Adding a blob as a stream: bytes go to a temp file under tmp/ and are hashed
 * as they pass.  Call commit or abort exactly once.
 */
typedef struct nf_cache_writer nf_cache_writer;

/* Caller owns *out (commit or abort frees it). */
int nf_cache_writer_open(nf_cache_writer **out, nf_cache *c);
int nf_cache_writer_write(nf_cache_writer *w, const void *data, size_t len);
/* Bytes written so far. */
uint64_t nf_cache_writer_size(const nf_cache_writer *w);
/* Drop what was written and start again (a retried download). */
int nf_cache_writer_reset(nf_cache_writer *w);
/*
 * fsync, check, and rename into blobs/sha256/<hex>.  When expect_hex is not
 * NULL and the bytes hash to something else, nothing is stored and NF_EINPUT
 * is returned (the message names both digests).  out_hex (may be NULL) gets
 * the digest, *out_path (out_path may be NULL) the blob's path, caller owns it.
 * Always frees w.
 */
int nf_cache_writer_commit(char *out_hex, char **out_path, nf_cache_writer *w,
			   const char *expect_hex);
/* Remove the temp file and free w.  NULL is fine. */
void nf_cache_writer_abort(nf_cache_writer *w);

/*
 * Copy a file into the cache, hashing while copying (one pass).  out_hex (65
 * bytes, may be NULL) gets the digest; out_path (may be NULL) the blob path,
 * caller owns it.  expect_hex as in nf_cache_writer_commit (NULL: no check).
 */
int nf_cache_add_file(char *out_hex, char **out_path, nf_cache *c, const char *file,
		      const char *expect_hex);

/* The same for bytes in memory. */
int nf_cache_add_data(char *out_hex, char **out_path, nf_cache *c, const void *data,
		      size_t len);

/*
 * Stage outputs.  key_hex is 64 lowercase hex digits (the digest of the
 * stage's inputs).
 *
 * lookup: 0 and *out = "<root>/stages/<key>" when the finished folder exists,
 * else NF_ENOTFOUND (*out NULL).  Caller owns *out.
 */
int nf_cache_stage_lookup(char **out, const nf_cache *c, const char *key_hex);

/*
 * begin: a new empty temp folder to fill (nf_cache_stage_dir).  Then exactly
 * one of commit (publish it as stages/<key>) or abort (remove it).
 * Caller owns *out (commit or abort frees it).
 */
typedef struct nf_cache_stage nf_cache_stage;
int nf_cache_stage_begin(nf_cache_stage **out, nf_cache *c, const char *key_hex);
/* The temp folder to fill; owned by s, valid until commit or abort. */
const char *nf_cache_stage_dir(const nf_cache_stage *s);
/*
 * fsync the folder's files, rename it to stages/<key>.  If another writer
 * published the key first, ours is removed and theirs is used.  *out (may be
 * NULL) gets the final path, caller owns it.  Always frees s (on failure the
 * temp folder is removed).
 */
int nf_cache_stage_commit(char **out, nf_cache_stage *s);
/* Remove the temp folder and free s.  NULL is fine. */
void nf_cache_stage_abort(nf_cache_stage *s);

/*
 * One writer per stage key across processes: a build about to compute a
 * stage takes its key's lock (flock(2) on locks/<key>.lock), looks the stage
 * up again (another build may have published it while we waited), computes
 * and commits it, then unlocks.  A second build wanting the same stage waits
 * for the first instead of computing it twice.  The kernel drops the lock of
 * a process that dies, so a killed build never blocks the next one.
 *
 * 0 and *out when taken (release with nf_cache_stage_unlock); 1 when wait is
 * false and another process (or another nf_cache_lock of this one: flock
 * locks are per open file) holds it, *out NULL; negative on error.
 */
typedef struct nf_cache_lock nf_cache_lock;
int nf_cache_stage_lock(nf_cache_lock **out, nf_cache *c, const char *key_hex, bool wait);
/* NULL is fine. */
void nf_cache_stage_unlock(nf_cache_lock *l);

/*
 * Check every blob against its name (the sha256 of its bytes).  fn is
 * called for each one that fails (path, and the message), and its count is
 * returned in *n_bad.  Temp leftovers under tmp/ are not entries and are not
 * looked at.
 */
int nf_cache_verify_blobs(nf_cache *c, size_t *n_bad,
			  void (*fn)(void *user, const char *path, const char *why), void *user);

/*
 * A new temp file (dir false) or folder under tmp/, named "<prefix>.XXXXXX",
 * for a writer of the cache that is not a blob or a stage (an archive being
 * unpacked, a layout being pushed).  *fd holds a flock on it (for a file, the
 * file's own descriptor, open for writing), so that no sweep removes it while
 * *fd is open: remove the temp, then close *fd.  Caller owns *path.
 */
int nf_cache_tmp_make(char **path, int *fd, nf_cache *c, const char *prefix, bool dir);

/* One entry of the cache, for listing. */
typedef struct nf_cache_entry {
	const char *kind; /* "blob" or "stage" */
	const char *hex;  /* the digest or stage key */
	uint64_t size;    /* bytes for a blob, 0 for a stage */
	const char *path; /* full path */
} nf_cache_entry;

/*
 * Call fn for every blob then every stage, each group sorted by digest.  A
 * non-zero return from fn stops the walk and is returned.
 */
int nf_cache_foreach(nf_cache *c, int (*fn)(void *user, const nf_cache_entry *e),
		     void *user);

#endif
