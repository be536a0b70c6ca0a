/* test_util.c - error chain, checked arithmetic, atomic files, sha256. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/tap.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"

int main(void)
{
	char dir[] = "/tmp/nf-test-util-XXXXXX";
	char hex[65];
	size_t s;

	/* errors */
	is_int(nf_error_set(NF_EINPUT, "bad %d", 7), NF_EINPUT, "set returns the code");
	is_str(nf_error_last(), "bad 7", "message kept");
	nf_error_wrap(NF_EINPUT, "file.yaml");
	is_str(nf_error_last(), "file.yaml: bad 7", "wrap prefixes context");
	is_int(nf_error_exit_status(NF_EINPUT), 2, "bad input exits 2");
	is_int(nf_error_exit_status(NF_EGATE), 3, "gate exits 3");
	is_int(nf_error_exit_status(NF_ENET), 4, "network exits 4");
	is_int(nf_error_exit_status(NF_EINTERNAL), 1, "internal exits 1");
	nf_error_clear();
	is_str(nf_error_last(), "", "clear empties the message");

	/* checked arithmetic */
	ok(nf_size_add(&s, 1, 2) && s == 3, "add");
	ok(!nf_size_add(&s, SIZE_MAX, 1), "add overflow detected");
	ok(!nf_size_mul(&s, SIZE_MAX / 2 + 1, 2), "mul overflow detected");
	ok(!nf_size_mul3(&s, 1u << 30, 1u << 30, 1u << 30), "mul3 overflow detected");

	/* sha256 of "abc" (FIPS 180-2 example) */
	nf_sha256_hex(hex, "abc", 3);
	is_str(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "sha256(abc)");
	ok(nf_sha256_is_hex(hex), "is_hex accepts a digest");
	ok(!nf_sha256_is_hex("ABC"), "is_hex refuses short/uppercase");

	/* atomic files */
	ok(mkdtemp(dir) != NULL, "temp dir");
	char *sub = nf_path_join(dir, "a/b/c");
	is_int(nf_fs_mkdir_p(sub, 0755), 0, "mkdir -p");
	ok(nf_fs_is_dir(sub), "created nested dirs");
	char *file = nf_path_join(sub, "f.txt");
	umask(077);
	is_int(nf_fs_write_atomic(file, "hello", 5, 0644), 0, "atomic write");
	struct stat st;
	ok(stat(file, &st) == 0 && (st.st_mode & 0777) == 0644, "mode ignores the umask");
	char *got = NULL;
	size_t len = 0;
	is_int(nf_fs_read_file(&got, &len, file, 100), 0, "read back");
	ok(got && len == 5 && !strcmp(got, "hello"), "same bytes");
	free(got);
	is_int(nf_fs_read_file(&got, &len, file, 4), NF_EINPUT, "size limit enforced");
	ok(strstr(nf_error_last(), "f.txt") != NULL, "error names the file");
	nf_sha256_file_hex(hex, file);
	is_str(hex, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", "sha256 of a file");

	nf_atomic_file af;
	is_int(nf_atomic_open(&af, file, 0644), 0, "atomic open over existing file");
	nf_atomic_write(&af, "xx", 2);
	nf_atomic_abort(&af);
	nf_fs_read_file(&got, &len, file, 100);
	ok(got && !strcmp(got, "hello"), "an aborted write leaves the old file whole");
	free(got);

	is_int(nf_fs_remove_tree(dir), 0, "remove tree");
	ok(!nf_fs_exists(dir), "tree gone");
	free(sub);
	free(file);
	return done_testing();
}
