/*
 * fetch.h - getting a recipe's source into the cache: a url pinned by sha256
 * (libcurl), a local path, or a git commit (libgit2); archives unpacked with
 * libarchive's secure-extract flags.  The result is a path ready to read.
 *
 * Environment:
 *   NIMFACTORY_URL_MIRROR="PREFIX=REPLACEMENT [PREFIX=REPLACEMENT ...]"
 *       rewrite urls (git insteadOf style, the longest matching prefix wins),
 *       e.g. "https://huggingface.co/=http://127.0.0.1:8080/".  The sha256
 *       pin still decides what is accepted.
 *   NIMFACTORY_OFFLINE=1   never touch the network; a source missing from the
 *       cache fails with a message saying how to seed it.
 */
#ifndef NF_FACTORY_FETCH_H
#define NF_FACTORY_FETCH_H

#include <stdbool.h>
#include <stdint.h>

#include "factory/cache.h"

typedef enum nf_fetch_kind {
	NF_FETCH_PATH = 0, /* a local file or folder */
	NF_FETCH_URL = 1,  /* http(s), sha256 required */
	NF_FETCH_GIT = 2,  /* git url + 40-hex commit */
} nf_fetch_kind;

/* What to fetch.  All strings are borrowed for the duration of the call. */
typedef struct nf_source_spec {
	nf_fetch_kind kind;
	const char *url;     /* URL and GIT: the remote (GIT also takes file:// and local paths) */
	const char *sha256;  /* URL: required; PATH: optional, checked for a file; 64 lowercase hex */
	const char *path;    /* PATH: the file or folder */
	const char *commit;  /* GIT: 40 lowercase hex digits, checked out exactly */
	const char *subpath; /* GIT, or an archive: optional relative path inside the tree */
	bool archive;        /* URL or PATH: unpack the file (.tar, .tar.gz, .tar.zst, .zip ...) */
} nf_source_spec;

/* Progress: bytes done of total (total 0 when unknown). */
typedef void (*nf_fetch_progress_fn)(void *user, uint64_t done, uint64_t total);

typedef struct nf_fetch_opts {
	bool offline;               /* forbid the network (init: NIMFACTORY_OFFLINE=1) */
	const char *mirrors;        /* rewrite rules (init: NIMFACTORY_URL_MIRROR); borrowed */
	uint64_t max_bytes;         /* largest download accepted (init: 256 GiB) */
	unsigned retries;           /* further attempts after a transient failure (init: 4) */
	unsigned backoff_ms;        /* first pause between attempts, doubled each time (init: 1000) */
	unsigned max_backoff_ms;    /* cap on a pause, also on Retry-After (init: 30000) */
	long connect_timeout_s;     /* init: 15 */
	long low_speed_bytes;       /* abort a transfer slower than this ... (init: 1024 B/s) */
	long low_speed_time_s;      /* ... for this long (init: 60 s) */
	long max_redirects;         /* init: 10 */
	uint64_t max_unpack_bytes;  /* archive: total bytes written (init: 256 GiB) */
	uint64_t max_unpack_entries; /* archive: entries (init: 1000000) */
	nf_fetch_progress_fn progress; /* may be NULL */
	void *progress_user;
} nf_fetch_opts;

/* Defaults, with offline and mirrors read from the environment. */
void nf_fetch_opts_init(nf_fetch_opts *o);

/*
 * Fetch a source; *out_path (caller owns, free()) is a file or folder ready
 * to read:
 *   URL        blobs/sha256/<pin> (no network when already present), or the
 *              unpacked folder (then subpath inside it) when archive is set;
 *   PATH       the path itself (sha256 checked when given for a file), or the
 *              unpacked folder when archive is set;
 *   GIT        the checked-out tree of the commit (a stage folder), subpath inside.
 * o may be NULL (nf_fetch_opts_init).  Errors: NF_EINPUT bad spec or sha256
 * mismatch, NF_ENET download failed or offline with the source not cached
 * (the message says how to seed it), NF_ENOTFOUND missing path or commit.
 */
int nf_fetch_source(char **out_path, nf_cache *c, const nf_source_spec *spec,
		    const nf_fetch_opts *o);

/*
 * Apply mirror rules (a string as NIMFACTORY_URL_MIRROR) to url.  *out is a
 * new string (caller frees), url itself when no rule matches.  NF_EINPUT for a
 * malformed rule.
 */
int nf_fetch_rewrite_url(char **out, const char *url, const char *mirrors);

/*
 * Download url into the cache and check it against sha256 before it becomes
 * visible (no cache lookup, honours offline).  *out_path (may be NULL) gets
 * the blob path, caller owns it.
 */
int nf_fetch_url(char **out_path, nf_cache *c, const char *url, const char *sha256,
		 const nf_fetch_opts *o);

/*
 * Unpack an archive file into the stage keyed by its digest (archive_hex, the
 * sha256 of the file), reusing the stage when it is already there.  Entries
 * that are absolute, contain "..", or are links pointing out of the tree, and
 * device files, are refused; the whole archive is then refused and nothing is
 * kept.  *out_dir (caller owns) is the stage folder.
 */
int nf_fetch_unpack(char **out_dir, nf_cache *c, const char *archive_path,
		    const char *archive_hex, const nf_fetch_opts *o);

/*
 * Extract the archive file into root, an existing empty folder named by its
 * real path, with the same checks as nf_fetch_unpack (nothing outside root,
 * no device files, bounded entries and bytes); for callers that publish the
 * folder themselves (factory/remote_cache.c).  o may be NULL (defaults).
 */
int nf_fetch_extract(const char *root, const char *archive_path, const nf_fetch_opts *o);

/*
 * Check out commit of the git remote url into a stage keyed by url+commit,
 * through a bare mirror under <cache>/git/ (fetched only when the commit is not
 * already there).  *out_dir (caller owns) is the tree's root.
 */
int nf_fetch_git(char **out_dir, nf_cache *c, const char *url, const char *commit,
		 const nf_fetch_opts *o);

#endif
