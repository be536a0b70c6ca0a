/*
 * fetch_git.c - nf_fetch_git: a pinned git commit checked out into a cache
 * stage with libgit2.  The remote is mirrored in a bare repository under
 * <cache>/git/<sha256 of url>.git (serialised between processes by flock on a
 * lock file beside it) and fetched only when the commit is not already there;
 * the commit's tree is checked out into a stage keyed by url + commit.  A
 * commit the remote does not have is refused.
 */
#define _GNU_SOURCE
#include "factory/fetch.h"

#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/banned.h"

#define GIT_KEY_TAG "nimfactory git v1\n"

static bool is_commit_hex(const char *s)
{
	size_t n = 0;
	if (!s)
		return false;
	for (; s[n]; n++)
		if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return false;
	return n == 40;
}

static bool is_local_url(const char *url)
{
	return strncmp(url, "file://", 7) == 0 || url[0] == '/';
}

static int git_err(int code, const char *what)
{
	const git_error *ge = git_error_last();
	return nf_error_set(code, "%s: %s", what, ge && ge->message ? ge->message : "libgit2 error");
}

typedef struct progress_ctx {
	const nf_fetch_opts *o;
} progress_ctx;

static int on_transfer(const git_indexer_progress *stats, void *payload)
{
	progress_ctx *p = payload;
	if (p->o->progress)
		p->o->progress(p->o->progress_user, (uint64_t)stats->received_bytes, 0);
	return 0;
}

/* Open the bare mirror at dir, creating it when missing. */
static int open_mirror(git_repository **repo, const char *dir)
{
	if (nf_fs_is_dir(dir) && git_repository_open_bare(repo, dir) == 0)
		return 0;
	(void)nf_fs_remove_tree(dir);
	if (git_repository_init(repo, dir, 1) < 0)
		return git_err(NF_EIO, dir);
	return 0;
}

static int fetch_into(git_repository *repo, const char *url, const char *shown,
		      const nf_fetch_opts *o)
{
	char *refspecs[] = {"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"};
	git_strarray specs = {refspecs, 2};
	git_fetch_options fo;
	git_remote_create_options ro;
	git_remote *remote = NULL;
	progress_ctx pc = {o};
	int err = 0;

	git_fetch_options_init(&fo, GIT_FETCH_OPTIONS_VERSION);
	/*
	 * Our own NIMFACTORY_URL_MIRROR rewrite has been applied; git's insteadOf
	 * from the mirror's config is skipped (libgit2 1.5 also leaks in that
	 * path: regexp match data on a non-match).
	 */
	if (git_remote_create_options_init(&ro, GIT_REMOTE_CREATE_OPTIONS_VERSION) < 0) {
		err = git_err(NF_EINTERNAL, shown);
		goto done;
	}
	ro.repository = repo;
	ro.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
	if (git_remote_create_with_opts(&remote, url, &ro) < 0) {
		err = git_err(NF_EINPUT, shown);
		goto done;
	}
	fo.callbacks.transfer_progress = on_transfer;
	fo.callbacks.payload = &pc;
	fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
	if (git_remote_fetch(remote, &specs, &fo, NULL) < 0) {
		const git_error *ge = git_error_last();
		err = nf_error_set(NF_ENET, "git source %s: fetch failed: %s", shown,
				   ge && ge->message ? ge->message : "libgit2 error");
		goto done;
	}
done:
	git_remote_free(remote);
	return err;
}

static int checkout(const char *dir, git_repository *repo, const git_oid *oid, const char *shown,
		    const char *commit)
{
	git_commit *co = NULL;
	git_tree *tree = NULL;
	git_checkout_options opts;
	int err = 0;

	git_checkout_options_init(&opts, GIT_CHECKOUT_OPTIONS_VERSION);

	if (git_commit_lookup(&co, repo, oid) < 0) {
		err = git_err(NF_ENOTFOUND, commit);
		goto done;
	}
	if (git_commit_tree(&tree, co) < 0) {
		err = git_err(NF_EIO, commit);
		goto done;
	}
	opts.checkout_strategy = GIT_CHECKOUT_FORCE | GIT_CHECKOUT_DONT_UPDATE_INDEX |
				 GIT_CHECKOUT_DONT_WRITE_INDEX;
	opts.target_directory = dir;
	if (git_checkout_tree(repo, (const git_object *)tree, &opts) < 0) {
		err = git_err(NF_EIO, shown);
		nf_error_wrap(err, "git source: checkout of %s", commit);
		goto done;
	}
done:
	git_tree_free(tree);
	git_commit_free(co);
	return err;
}

static int lock_mirror(int *fd, const char *path)
{
	*fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (*fd < 0)
		return nf_error_set(NF_EIO, "%s: %s", path, strerror(errno));
	while (flock(*fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			close(*fd);
			*fd = -1;
			return nf_error_set(NF_EIO, "%s: lock: %s", path, strerror(errno));
		}
	}
	return 0;
}

int nf_fetch_git(char **out_dir, nf_cache *c, const char *url, const char *commit,
		 const nf_fetch_opts *o)
{
	nf_fetch_opts defaults;
	char key[NF_SHA256_HEX_LEN + 1], urlkey[NF_SHA256_HEX_LEN + 1];
	char *tagged = NULL, *real = NULL, *mirror = NULL, *lockpath = NULL, *shown = NULL;
	git_repository *repo = NULL;
	nf_cache_stage *st = NULL;
	git_oid oid;
	git_odb *odb = NULL;
	int err = 0, lockfd = -1, inited = 0;

	*out_dir = NULL;
	if (!o) {
		nf_fetch_opts_init(&defaults);
		o = &defaults;
	}
	if (!is_commit_hex(commit))
		return nf_error_set(NF_EINPUT, "git source %s: commit '%s' is not 40 lowercase hex digits",
				    url, commit ? commit : "(none)");
	tagged = nf_strdup_printf(GIT_KEY_TAG "%s\n%s", url, commit);
	if (!tagged)
		return nf_error_set(NF_ENOMEM, "out of memory");
	if ((err = nf_sha256_hex(key, tagged, strlen(tagged))) < 0 ||
	    (err = nf_sha256_hex(urlkey, url, strlen(url))) < 0)
		goto done;
	err = nf_cache_stage_lookup(out_dir, c, key);
	if (err != NF_ENOTFOUND)
		goto done;
	nf_error_clear();
	err = 0;

	if ((err = nf_fetch_rewrite_url(&real, url, o->mirrors)) < 0)
		goto done;
	shown = strcmp(real, url) ? nf_strdup_printf("%s (mirror of %s)", real, url) : strdup(url);
	mirror = nf_strdup_printf("%s/git/%s.git", nf_cache_root(c), urlkey);
	lockpath = nf_strdup_printf("%s/git/%s.lock", nf_cache_root(c), urlkey);
	if (!shown || !mirror || !lockpath) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (git_libgit2_init() < 0) {
		err = nf_error_set(NF_EENV, "libgit2 failed to start");
		goto done;
	}
	inited = 1;
	if (git_oid_fromstr(&oid, commit) < 0) {
		err = git_err(NF_EINPUT, commit);
		goto done;
	}
	if ((err = lock_mirror(&lockfd, lockpath)) < 0)
		goto done;
	if ((err = open_mirror(&repo, mirror)) < 0)
		goto done;
	if (git_repository_odb(&odb, repo) < 0) {
		err = git_err(NF_EIO, mirror);
		goto done;
	}
	if (!git_odb_exists(odb, &oid)) {
		if (o->offline && !is_local_url(real)) {
			err = nf_error_set(NF_ENET,
					   "git source %s (commit %s) is not in the cache %s and the network is off",
					   url, commit, nf_cache_root(c));
			goto done;
		}
		if ((err = fetch_into(repo, real, shown, o)) < 0)
			goto done;
		git_odb_free(odb);
		odb = NULL;
		if (git_repository_odb(&odb, repo) < 0) {
			err = git_err(NF_EIO, mirror);
			goto done;
		}
		if (!git_odb_exists(odb, &oid)) {
			err = nf_error_set(NF_ENOTFOUND,
					   "git source %s: commit %s is not in any branch or tag of the remote; refused",
					   shown, commit);
			goto done;
		}
	}
	if ((err = nf_cache_stage_begin(&st, c, key)) < 0)
		goto done;
	if ((err = checkout(nf_cache_stage_dir(st), repo, &oid, shown, commit)) < 0)
		goto done;
	err = nf_cache_stage_commit(out_dir, st);
	st = NULL;
done:
	nf_cache_stage_abort(st);
	git_odb_free(odb);
	git_repository_free(repo);
	if (lockfd >= 0)
		close(lockfd); /* releases the flock */
	if (inited)
		git_libgit2_shutdown();
	free(tagged);
	free(real);
	free(mirror);
	free(lockpath);
	free(shown);
	return err;
}
