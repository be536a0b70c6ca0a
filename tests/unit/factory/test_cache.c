/*
 * test_cache.c - the content-addressed cache: blobs (add, lookup, read-only,
 * checked on insert, concurrent writers) and stage folders (begin, commit,
 * lookup, abort, a second writer of the same key), the per-key lock across
 * processes (and after one dies), the sweep of a killed writer's temps, and
 * blob verification.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "factory/cache.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/banned.h"

#define ABC_HEX "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

static int count_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	if (!d)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static int count_sub(const char *root, const char *sub)
{
	char *p = nf_path_join(root, sub);
	int n = count_dir(p);
	free(p);
	return n;
}

static int count_entry(void *user, const nf_cache_entry *e)
{
	int *n = user;
	(void)e;
	(*n)++;
	return 0;
}

static void test_default_root(void)
{
	char *r = NULL;

	setenv("NIMFACTORY_CACHE", "/x/nf", 1);
	is_int(nf_cache_default_root(&r), 0, "default root from NIMFACTORY_CACHE");
	is_str(r, "/x/nf", "NIMFACTORY_CACHE wins");
	free(r);
	unsetenv("NIMFACTORY_CACHE");
	setenv("XDG_CACHE_HOME", "/x/xdg", 1);
	nf_cache_default_root(&r);
	is_str(r, "/x/xdg/nimfactory", "XDG_CACHE_HOME/nimfactory");
	free(r);
	unsetenv("XDG_CACHE_HOME");
	setenv("HOME", "/x/home", 1);
	nf_cache_default_root(&r);
	is_str(r, "/x/home/.cache/nimfactory", "~/.cache/nimfactory");
	free(r);
}

static void test_blobs(nf_cache *c, const char *root, const char *tmpdir)
{
	char hex[NF_SHA256_HEX_LEN + 1];
	char *path = NULL, *data = NULL, *file = NULL;
	size_t len = 0;
	struct stat st;
	nf_cache_writer *w = NULL;

	is_int(nf_cache_add_data(hex, &path, c, "abc", 3), 0, "add bytes");
	is_str(hex, ABC_HEX, "digest of 'abc'");
	ok(path && stat(path, &st) == 0 && (st.st_mode & 0777) == 0444, "blob is mode 0444");
	free(path);
	path = NULL;
	is_int(nf_cache_blob_lookup(&path, c, ABC_HEX), 0, "lookup finds it");
	ok(path && nf_fs_read_file(&data, &len, path, 100) == 0 && len == 3 &&
		   memcmp(data, "abc", 3) == 0,
	   "lookup path holds the bytes");
	free(data);
	free(path);
	path = NULL;
	is_int(nf_cache_blob_lookup(NULL, c, "00000000000000000000000000000000000000000000000000000000000000aa"),
	       NF_ENOTFOUND, "missing blob: NF_ENOTFOUND");
	is_int(nf_cache_blob_lookup(NULL, c, "ABC"), NF_EINPUT, "bad hex: NF_EINPUT");
	is_int(nf_cache_blob_lookup(NULL, c, "../../../../etc/passwd"), NF_EINPUT,
	       "path in place of a digest refused");

	/* add_file: one pass, checked against an expected digest. */
	file = nf_path_join(tmpdir, "in.bin");
	nf_fs_write_atomic(file, "hello\n", 6, 0644);
	is_int(nf_cache_add_file(hex, NULL, c, file, ABC_HEX), NF_EINPUT, "wrong pin refused");
	ok(strstr(nf_error_last(), "sha256 mismatch") != NULL, "message says mismatch: %s",
	   nf_error_last());
	is_int(count_sub(root, "blobs/sha256"), 1, "nothing stored on mismatch");
	is_int(count_sub(root, "tmp"), 0, "no temp file left on mismatch");
	is_int(nf_cache_add_file(hex, &path, c, file, "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"),
	       0, "right pin accepted");
	is_int(count_sub(root, "blobs/sha256"), 2, "second blob stored");
	free(path);
	path = NULL;
	is_int(nf_cache_add_file(hex, NULL, c, "/nonexistent/file", NULL), NF_ENOTFOUND,
	       "missing input file");
	is_int(nf_cache_add_file(hex, NULL, c, tmpdir, NULL), NF_EINPUT, "a folder is refused");

	/* writer: reset drops what was written. */
	is_int(nf_cache_writer_open(&w, c), 0, "writer open");
	nf_cache_writer_write(w, "garbage", 7);
	is_int(nf_cache_writer_reset(w), 0, "writer reset");
	nf_cache_writer_write(w, "ab", 2);
	nf_cache_writer_write(w, "c", 1);
	is_int((int)nf_cache_writer_size(w), 3, "size after reset");
	is_int(nf_cache_writer_commit(hex, NULL, w, ABC_HEX), 0, "streamed commit matches pin");
	nf_cache_writer_abort(NULL);
	free(file);
}

/* Several processes write the same big blob at the same time. */
static void test_concurrent(const char *root)
{
	enum { N = 4, SIZE = 3 << 20 };
	char hex[NF_SHA256_HEX_LEN + 1], got[NF_SHA256_HEX_LEN + 1];
	char *buf = malloc(SIZE), *path = NULL;
	pid_t pids[N];
	int fails = 0;

	for (size_t i = 0; i < SIZE; i++)
		buf[i] = (char)(i * 2654435761u >> 13);
	nf_sha256_hex(hex, buf, SIZE);
	for (int i = 0; i < N; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			nf_cache *cc = NULL;
			int e = nf_cache_open(&cc, root);
			for (int k = 0; k < 3 && !e; k++)
				e = nf_cache_add_data(NULL, NULL, cc, buf, SIZE);
			nf_cache_free(cc);
			_exit(e ? 1 : 0);
		}
	}
	for (int i = 0; i < N; i++) {
		int status = 0;
		waitpid(pids[i], &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fails++;
	}
	is_int(fails, 0, "%d concurrent writers of one digest all succeed", N);
	path = nf_strdup_printf("%s/blobs/sha256/%s", root, hex);
	ok(nf_sha256_file_hex(got, path) == 0 && strcmp(got, hex) == 0,
	   "the blob they wrote hashes to its name");
	is_int(count_sub(root, "tmp"), 0, "no temp files left behind");
	free(path);
	free(buf);
}

static void test_stages(nf_cache *c, const char *root)
{
	const char *key = "1111111111111111111111111111111111111111111111111111111111111111";
	nf_cache_stage *s = NULL, *s2 = NULL;
	char *path = NULL, *path2 = NULL, *f = NULL, *data = NULL;
	size_t len;

	is_int(nf_cache_stage_lookup(&path, c, key), NF_ENOTFOUND, "stage not there yet");
	ok(path == NULL, "no path for a missing stage");
	is_int(nf_cache_stage_lookup(&path, c, "zz"), NF_EINPUT, "bad stage key refused");

	is_int(nf_cache_stage_begin(&s, c, key), 0, "stage begin");
	is_int(nf_cache_stage_begin(&s2, c, key), 0, "a second writer begins the same key");
	ok(strcmp(nf_cache_stage_dir(s), nf_cache_stage_dir(s2)) != 0, "each has its own temp folder");
	f = nf_path_join(nf_cache_stage_dir(s), "out.txt");
	nf_fs_write_atomic(f, "first", 5, 0644);
	free(f);
	f = nf_path_join(nf_cache_stage_dir(s2), "out.txt");
	nf_fs_write_atomic(f, "second", 6, 0644);
	free(f);
	is_int(nf_cache_stage_lookup(&path, c, key), NF_ENOTFOUND,
	       "an unfinished stage is not visible");
	is_int(nf_cache_stage_commit(&path, s), 0, "stage commit");
	is_int(nf_cache_stage_commit(&path2, s2), 0, "the second commit of the key succeeds");
	is_str(path2, path, "and returns the same folder");
	f = nf_path_join(path, "out.txt");
	ok(nf_fs_read_file(&data, &len, f, 100) == 0 && len == 5 && !memcmp(data, "first", 5),
	   "the first writer's output is kept");
	free(data);
	free(f);
	free(path2);
	free(path);
	path = NULL;
	is_int(nf_cache_stage_lookup(&path, c, key), 0, "stage found after commit");
	free(path);
	path = NULL;

	is_int(nf_cache_stage_begin(&s, c, "2222222222222222222222222222222222222222222222222222222222222222"),
	       0, "another stage");
	nf_cache_stage_abort(s);
	is_int(nf_cache_stage_lookup(&path, c, "2222222222222222222222222222222222222222222222222222222222222222"),
	       NF_ENOTFOUND, "an aborted stage is not visible");
	is_int(count_sub(root, "tmp"), 0, "no temp folders left behind");
	nf_cache_stage_abort(NULL);
}

#define KEY_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

/* A child that runs fn(root) and then waits to be killed, once fn has said
 * (one byte on the pipe) that it holds what it took. */
static pid_t start_holder(const char *root, void (*fn)(const char *root, int ready))
{
	int p[2];
	char b;
	pid_t pid;
	if (pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		fn(root, p[1]);
		_exit(1); /* fn pauses; reaching here is a failure to hold */
	}
	close(p[1]);
	if (read(p[0], &b, 1) != 1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		pid = -1;
	}
	close(p[0]);
	return pid;
}

static void kill_holder(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void hold_lock(const char *root, int ready)
{
	nf_cache *c = NULL;
	nf_cache_lock *l = NULL;
	if (nf_cache_open(&c, root) || nf_cache_stage_lock(&l, c, KEY_A, true))
		_exit(2);
	if (write(ready, "x", 1) != 1)
		_exit(3);
	for (;;)
		pause();
}

/* A writer killed while writing: one blob and one stage half written. */
static void hold_temps(const char *root, int ready)
{
	nf_cache *c = NULL;
	nf_cache_writer *w = NULL;
	nf_cache_stage *st = NULL;
	char *f = NULL;
	if (nf_cache_open(&c, root) || nf_cache_writer_open(&w, c) ||
	    nf_cache_writer_write(w, "half", 4) || nf_cache_stage_begin(&st, c, KEY_A))
		_exit(2);
	f = nf_path_join(nf_cache_stage_dir(st), "half.txt");
	if (!f || nf_fs_write_atomic(f, "half", 4, 0644) || write(ready, "x", 1) != 1)
		_exit(3);
	for (;;)
		pause();
}

static void test_locks(nf_cache *c, const char *root)
{
	nf_cache_lock *l = NULL, *l2 = NULL;
	pid_t pid;

	is_int(nf_cache_stage_lock(&l, c, "zz", false), NF_EINPUT, "lock: a bad key is refused");
	is_int(nf_cache_stage_lock(&l, c, KEY_A, false), 0, "lock a stage key");
	is_int(nf_cache_stage_lock(&l2, c, KEY_A, false), 1, "a second lock of the key is busy");
	ok(l2 == NULL, "and gives no lock");
	nf_cache_stage_unlock(l);
	is_int(nf_cache_stage_lock(&l2, c, KEY_A, false), 0, "free again once unlocked");
	nf_cache_stage_unlock(l2);
	nf_cache_stage_unlock(NULL);

	pid = start_holder(root, hold_lock);
	ok(pid > 0, "another process takes the lock");
	is_int(nf_cache_stage_lock(&l, c, KEY_A, false), 1, "held by another process: busy");
	kill_holder(pid);
	is_int(nf_cache_stage_lock(&l, c, KEY_A, false), 0,
	       "the lock of a process killed with SIGKILL never blocks");
	nf_cache_stage_unlock(l);
}

static void test_sweep(const char *root)
{
	nf_cache *c2 = NULL, *c3 = NULL;
	nf_cache_writer *w = NULL;
	char hex[NF_SHA256_HEX_LEN + 1];
	pid_t pid = start_holder(root, hold_temps);

	ok(pid > 0, "a writer is half way through a blob and a stage");
	is_int(count_sub(root, "tmp"), 2, "its two temps are in tmp/");
	is_int(nf_cache_open(&c2, root), 0, "another process opens the cache");
	is_int(count_sub(root, "tmp"), 2, "the temps of a live writer are kept");
	nf_cache_free(c2);
	kill_holder(pid);
	is_int(nf_cache_open(&c2, root), 0, "opened after the writer was killed");
	is_int(count_sub(root, "tmp"), 0, "the killed writer's temps are swept");
	is_int(nf_cache_stage_lookup(&(char *){NULL}, c2, KEY_A), NF_ENOTFOUND,
	       "and its stage never appeared");

	is_int(nf_cache_writer_open(&w, c2), 0, "our own writer");
	nf_cache_writer_write(w, "abc", 3);
	is_int(nf_cache_open(&c3, root), 0, "a second handle opens the cache");
	is_int(count_sub(root, "tmp"), 1, "our live writer's temp is kept");
	is_int(nf_cache_writer_commit(hex, NULL, w, ABC_HEX), 0, "and commits");
	nf_cache_free(c3);
	nf_cache_free(c2);
}

static void note_bad(void *user, const char *path, const char *why)
{
	(void)why;
	snprintf(user, 512, "%s", path);
}

static void test_verify(nf_cache *c, const char *root)
{
	char bad[512] = "", *path = NULL;
	size_t n_bad = 99;
	FILE *f;

	is_int(nf_cache_verify_blobs(c, &n_bad, note_bad, bad), 0, "verify the blobs");
	is_int((int)n_bad, 0, "every blob hashes to its name");
	path = nf_strdup_printf("%s/blobs/sha256/%s", root, ABC_HEX);
	chmod(path, 0644);
	f = fopen(path, "w");
	ok(f && fputs("abd", f) >= 0 && fclose(f) == 0, "damage a blob");
	is_int(nf_cache_verify_blobs(c, &n_bad, note_bad, bad), 0, "verify again");
	is_int((int)n_bad, 1, "one damaged blob found");
	is_str(bad, path, "and named");
	free(path);
}

int main(void)
{
	char tmpl[] = "/tmp/nf_test_cache.XXXXXX";
	char *root = NULL;
	nf_cache *c = NULL;
	int n = 0;

	test_default_root();
	if (!mkdtemp(tmpl)) {
		ok(0, "mkdtemp");
		return done_testing();
	}
	root = nf_path_join(tmpl, "cache");
	is_int(nf_cache_open(&c, root), 0, "open a new cache");
	ok(nf_fs_is_dir(root) && count_sub(root, "blobs/sha256") == 0, "folders created");
	is_str(nf_cache_root(c), root, "root");
	test_blobs(c, root, tmpl);
	test_concurrent(root);
	test_stages(c, root);
	is_int(nf_cache_foreach(c, count_entry, &n), 0, "foreach");
	is_int(n, 4, "foreach sees 3 blobs and 1 stage");
	test_locks(c, root);
	test_sweep(root);
	test_verify(c, root);
	nf_cache_free(c);
	nf_cache_free(NULL);
	free(root);
	nf_fs_remove_tree(tmpl);
	return done_testing();
}
