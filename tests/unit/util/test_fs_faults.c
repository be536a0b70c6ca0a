/*
 * test_fs_faults.c - util/fs under faults: a write past RLIMIT_FSIZE (EFBIG)
 * fails like a full disk (NF_EENV, exit 4, the path named, "file size limit")
 * and an atomic write that fails leaves the earlier file whole and no temp;
 * the words for ENOSPC; nf_fs_lock busy, free, and on a missing path.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define LIMIT 4096

static int count_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	if (!d)
		return -1;
	while ((de = readdir(d)) != NULL)
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

/* In a child under RLIMIT_FSIZE: atomically replace path with more than the
 * limit.  Exit 0 when that failed with NF_EENV and a message naming path and
 * the limit, 1 otherwise. */
static int write_past_limit(const char *path)
{
	pid_t pid = fork();
	int status = 0;
	if (pid == 0) {
		struct rlimit rl = {LIMIT, LIMIT};
		char *big = calloc(1, 4 * LIMIT);
		signal(SIGXFSZ, SIG_IGN); /* as nimfactory's main does */
		if (!big || setrlimit(RLIMIT_FSIZE, &rl) < 0)
			_exit(2);
		int err = nf_fs_write_atomic(path, big, 4 * LIMIT, 0644);
		const char *msg = nf_error_last();
		_exit(err == NF_EENV && strstr(msg, path) && strstr(msg, "file size limit") ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}

int main(void)
{
	char dir[] = "/tmp/nf-test-fs-faults-XXXXXX";
	char *file, *data = NULL;
	size_t len = 0;
	int fd = -1, fd2 = -1;

	ok(mkdtemp(dir) != NULL, "temp dir");
	file = nf_path_join(dir, "out.json");
	is_int(nf_fs_write_atomic(file, "whole", 5, 0644), 0, "an earlier file");
	is_int(write_past_limit(file), 0, "a write past RLIMIT_FSIZE fails with NF_EENV, naming the path and the limit");
	ok(nf_fs_read_file(&data, &len, file, 100) == 0 && len == 5 && !memcmp(data, "whole", 5),
	   "the earlier file is whole");
	is_int(count_dir(dir), 1, "and no temp file is left beside it");
	free(data);

	is_int(nf_fs_write_error("/x/y", ENOSPC), NF_EENV, "ENOSPC is an environment error");
	ok(strstr(nf_error_last(), "/x/y: the disk is full") != NULL, "that says the disk is full: %s",
	   nf_error_last());
	is_int(nf_error_exit_status(nf_fs_write_error("/x/y", EFBIG)), 4,
	       "EFBIG exits 4 like ENOSPC");
	is_int(nf_fs_write_error("/x/y", EIO), NF_EIO, "EIO stays an I/O error");

	is_int(nf_fs_lock(&fd, file, LOCK_EX, false, false), 0, "lock a file");
	is_int(nf_fs_lock(&fd2, file, LOCK_EX, false, false), 1, "a second lock is busy");
	is_int(fd2, -1, "and gives no descriptor");
	is_int(nf_fs_lock(&fd2, dir, LOCK_SH, false, false), 0, "a folder can be locked");
	close(fd2);
	close(fd);
	is_int(nf_fs_lock(&fd, file, LOCK_EX, false, true), 0, "free once closed");
	close(fd);
	char *missing = nf_path_join(dir, "missing");
	is_int(nf_fs_lock(&fd, missing, LOCK_EX, false, false), NF_ENOTFOUND, "a missing path is not found");
	is_int(nf_fs_lock(&fd, missing, LOCK_EX, true, false), 0, "unless created as a lock file");
	close(fd);
	free(missing);
	free(file);
	nf_fs_remove_tree(dir);
	return done_testing();
}
