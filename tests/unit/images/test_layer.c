/* test_layer.c - layers are byte-reproducible, stream correctly and store blobs once. */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "images/blob.h"
#include "images/layer.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"

static void put(const char *dir, const char *rel, const char *text, int mode, time_t mtime)
{
	char *p = nf_path_join(dir, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	if (fd >= 0) {
		if (write(fd, text, strlen(text)) < 0)
			perror("write");
		fchmod(fd, (mode_t)mode);
		close(fd);
	}
	struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
	utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW);
	free(p);
}

/* A source tree; `variant` changes modes (same x bits), umask and times, not content. */
static char *make_src(const char *root, int variant)
{
	char *src = nf_path_join(root, "src");
	char *sub = nf_path_join(src, "bin");
	char *deep = nf_path_join(src, "z/y/x");
	umask(variant ? 077 : 022);
	nf_fs_mkdir_p(sub, 0755);
	nf_fs_mkdir_p(deep, variant ? 0700 : 0755);
	time_t t = variant ? 1700000000 : 1000;
	put(src, "weights.bin", "0123456789abcdef", variant ? 0600 : 0644, t);
	put(src, "bin/run", "#!/bin/sh\necho hi\n", variant ? 0700 : 0755, t + 5);
	put(src, "z/y/x/leaf", "leaf", 0644, t);
	put(src, "a-b", "dash sorts before slash", 0644, t);
	char *ln = nf_path_join(src, "current");
	if (symlink("weights.bin", ln) < 0)
		perror("symlink");
	free(ln);
	free(sub);
	free(deep);
	return src;
}

static int build(nf_oci_layer_desc *d, const char *layout, const char *src,
		 nf_oci_compression c)
{
	nf_oci_layer *l = NULL;
	int err = nf_oci_layer_new(&l, layout, c, 1700000000);
	if (!err)
		err = nf_oci_layer_add_tree(l, src, "opt/nim/engines/e1/");
	if (!err)
		err = nf_oci_layer_add_bytes(l, "/opt/nim/model_manifest.yaml", "name: m\n", 8, 0);
	if (!err)
		err = nf_oci_layer_add_symlink(l, "usr/bin/nimserve", "/opt/nim/bin/nimserve");
	if (!err)
		err = nf_oci_layer_add_dir(l, "var/empty", 0);
	if (!err)
		err = nf_oci_layer_finish(d, l);
	if (err)
		diag("%s", nf_error_last());
	nf_oci_layer_free(l);
	return err;
}

static char *blob_file(const char *layout, const char *digest)
{
	char *p = NULL;
	nf_oci_blob_path(&p, layout, digest);
	return p;
}

/* Decompress a whole blob into memory. */
static unsigned char *decompress(size_t *outlen, const char *path, nf_oci_compression c)
{
	char *in = NULL;
	size_t inlen = 0, cap = 1 << 20, len = 0;
	unsigned char *out = malloc(cap);
	if (nf_fs_read_file(&in, &inlen, path, 64 << 20) || !out)
		return NULL;
	if (c == NF_OCI_COMPRESS_GZIP) {
		z_stream z;
		memset(&z, 0, sizeof(z));
		inflateInit2(&z, 15 + 16);
		z.next_in = (Bytef *)in;
		z.avail_in = (uInt)inlen;
		int r;
		do {
			if (len == cap)
				out = realloc(out, cap *= 2);
			z.next_out = out + len;
			z.avail_out = (uInt)(cap - len);
			r = inflate(&z, Z_NO_FLUSH);
			len = cap - z.avail_out;
		} while (r == Z_OK);
		inflateEnd(&z);
		if (r != Z_STREAM_END)
			len = 0;
	} else {
		ZSTD_DCtx *dc = ZSTD_createDCtx();
		ZSTD_inBuffer ib = {in, inlen, 0};
		size_t r = 1;
		while (ib.pos < ib.size && !ZSTD_isError(r)) {
			if (len == cap)
				out = realloc(out, cap *= 2);
			ZSTD_outBuffer ob = {out + len, cap - len, 0};
			r = ZSTD_decompressStream(dc, &ob, &ib);
			len += ob.pos;
		}
		if (ZSTD_isError(r) || r != 0)
			len = 0;
		ZSTD_freeDCtx(dc);
	}
	free(in);
	*outlen = len;
	return out;
}

static void check_tar(const char *path)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	char prev[4096] = "";
	int n = 0, order_ok = 1, meta_ok = 1, parents_ok = 1;
	char seen[64][256];
	archive_read_support_format_tar(a);
	archive_read_support_filter_all(a);
	if (archive_read_open_filename(a, path, 10240) != ARCHIVE_OK) {
		ok(0, "tar opens");
		archive_read_free(a);
		return;
	}
	while (archive_read_next_header(a, &e) == ARCHIVE_OK && n < 64) {
		const char *p = archive_entry_pathname(e);
		char dirpart[256];
		snprintf(seen[n], sizeof(seen[n]), "%s", p);
		size_t L = strlen(seen[n]);
		if (L && seen[n][L - 1] == '/')
			seen[n][L - 1] = '\0';
		if (strcmp(prev, seen[n]) >= 0)
			order_ok = 0;
		snprintf(prev, sizeof(prev), "%s", seen[n]);
		/* parent must have been seen */
		snprintf(dirpart, sizeof(dirpart), "%s", seen[n]);
		char *slash = strrchr(dirpart, '/');
		if (slash) {
			*slash = '\0';
			int found = 0;
			for (int k = 0; k < n; k++)
				found |= !strcmp(seen[k], dirpart);
			parents_ok &= found;
		}
		if (archive_entry_mtime(e) != 1700000000 || archive_entry_uid(e) != 0 ||
		    archive_entry_gid(e) != 0 || archive_entry_atime_is_set(e) ||
		    archive_entry_ctime_is_set(e))
			meta_ok = 0;
		mode_t m = archive_entry_perm(e);
		if (archive_entry_filetype(e) == AE_IFDIR && m != 0755)
			meta_ok = 0;
		if (!strcmp(seen[n], "opt/nim/engines/e1/bin/run") && m != 0755)
			meta_ok = 0;
		if (!strcmp(seen[n], "opt/nim/engines/e1/weights.bin") && m != 0644)
			meta_ok = 0;
		n++;
	}
	ok(order_ok, "tar entries sorted by path");
	ok(parents_ok, "every parent directory comes before its entries");
	ok(meta_ok, "mtime = epoch, uid/gid 0, no atime/ctime, modes normalised");
	is_int(n, 19, "tar has the 19 expected entries (parents included)");
	archive_read_free(a);
}

int main(void)
{
	char root1[] = "/tmp/nf-test-layer-a-XXXXXX", root2[] = "/tmp/nf-test-layer-b-XXXXXX";
	ok(mkdtemp(root1) && mkdtemp(root2), "temp dirs");
	char *src1 = make_src(root1, 0), *src2 = make_src(root2, 1);
	char *lay1 = nf_path_join(root1, "oci"), *lay2 = nf_path_join(root2, "oci");
	nf_oci_layer_desc d1[3], d2[3];
	nf_oci_compression cs[3] = {NF_OCI_COMPRESS_NONE, NF_OCI_COMPRESS_GZIP, NF_OCI_COMPRESS_ZSTD};

	for (int i = 0; i < 3; i++) {
		umask(i == 1 ? 077 : 022);
		is_int(build(&d1[i], lay1, src1, cs[i]), 0, "layer %s in folder 1",
		       nf_oci_compression_name(cs[i]));
		umask(i == 1 ? 022 : 027);
		is_int(build(&d2[i], lay2, src2, cs[i]), 0, "layer %s in folder 2",
		       nf_oci_compression_name(cs[i]));
		is_str(d1[i].blob.digest, d2[i].blob.digest,
		       "%s: same blob digest from another folder, umask, modes and mtimes",
		       nf_oci_compression_name(cs[i]));
		is_str(d1[i].diff_id, d2[i].diff_id, "%s: same diff_id",
		       nf_oci_compression_name(cs[i]));
		is_str(d1[i].blob.media_type, nf_oci_compression_media_type(cs[i]), "media type");
	}
	umask(022);
	is_str(d1[0].blob.digest, d1[0].diff_id, "uncompressed: blob digest = diff_id");
	is_str(d1[1].diff_id, d1[0].diff_id, "gzip layer has the same tar");
	is_str(d1[2].diff_id, d1[0].diff_id, "zstd layer has the same tar");
	ok(d1[2].blob.size < d1[0].blob.size, "zstd is smaller than the tar");

	/* The stored bytes hash to the digests, decompress to the tar of diff_id. */
	char *tarpath = blob_file(lay1, d1[0].blob.digest);
	char hex[65];
	uint64_t sz = 0;
	nf_sha256_file_hex(hex, tarpath);
	is_str(hex, d1[0].diff_id + 7, "tar blob file hashes to its digest");
	nf_fs_file_size(&sz, tarpath);
	is_int(sz, d1[0].blob.size, "tar blob size");
	is_int(d1[0].tar_size, d1[0].blob.size, "tar_size");
	check_tar(tarpath);
	for (int i = 1; i < 3; i++) {
		char *p = blob_file(lay1, d1[i].blob.digest);
		size_t len = 0;
		unsigned char *tar = decompress(&len, p, cs[i]);
		nf_sha256_file_hex(hex, p);
		is_str(hex, d1[i].blob.digest + 7, "%s blob hashes to its digest",
		       nf_oci_compression_name(cs[i]));
		nf_sha256_hex(hex, tar, len);
		is_str(hex, d1[i].diff_id + 7, "%s decompresses to the tar whose sha256 is diff_id",
		       nf_oci_compression_name(cs[i]));
		is_int(len, d1[i].tar_size, "decompressed size = tar_size");
		if (i == 1) {
			char *raw = NULL;
			size_t rl = 0;
			nf_fs_read_file(&raw, &rl, p, 1 << 20);
			ok(rl > 10 && (unsigned char)raw[3] == 0 && raw[4] == 0 && raw[5] == 0 &&
				   raw[6] == 0 && raw[7] == 0 && (unsigned char)raw[9] == 255,
			   "gzip header: no flags/name, mtime 0, OS byte 255");
			free(raw);
		}
		free(tar);
		free(p);
	}

	/* A blob already present is not rewritten. */
	struct stat before, after;
	stat(tarpath, &before);
	sleep(1);
	nf_oci_layer_desc again;
	is_int(build(&again, lay1, src1, NF_OCI_COMPRESS_NONE), 0, "same layer again");
	stat(tarpath, &after);
	ok(before.st_ino == after.st_ino && before.st_mtime == after.st_mtime,
	   "present blob kept: same inode and mtime");
	{
		char *dir = nf_path_join(lay1, "blobs/sha256");
		char cmd[512];
		snprintf(cmd, sizeof(cmd), "ls -A %s | grep -c tmp", dir);
		FILE *f = popen(cmd, "r");
		int c = -1;
		if (f && fscanf(f, "%d", &c) != 1)
			c = -1;
		if (f)
			pclose(f);
		is_int(c, 0, "no temp files left in blobs/sha256");
		free(dir);
	}

	/* Destination paths are checked; duplicates refused. */
	nf_oci_layer *l = NULL;
	nf_oci_layer_new(&l, lay1, NF_OCI_COMPRESS_NONE, 0);
	is_int(nf_oci_layer_add_bytes(l, "a/../etc/passwd", "x", 1, 0), NF_EINPUT, "'..' refused");
	is_int(nf_oci_layer_add_bytes(l, "a//b", "x", 1, 0), NF_EINPUT, "empty component refused");
	is_int(nf_oci_layer_add_bytes(l, "a/./b", "x", 1, 0), NF_EINPUT, "'.' refused");
	is_int(nf_oci_layer_add_bytes(l, "/", "x", 1, 0), NF_EINPUT, "root as a file refused");
	is_int(nf_oci_layer_add_bytes(l, "a/b", "x", 1, 0), 0, "a/b");
	is_int(nf_oci_layer_add_bytes(l, "a/b", "y", 1, 0), 0, "a/b again (checked at finish)");
	nf_oci_layer_desc dd;
	is_int(nf_oci_layer_finish(&dd, l), NF_EINPUT, "duplicate path refused at finish");
	ok(strstr(nf_error_last(), "a/b") != NULL, "error names the path");
	nf_oci_layer_free(l);
	l = NULL;
	nf_oci_layer_new(&l, lay1, NF_OCI_COMPRESS_NONE, 0);
	nf_oci_layer_add_bytes(l, "a", "x", 1, 0);
	nf_oci_layer_add_bytes(l, "a/b", "x", 1, 0);
	is_int(nf_oci_layer_finish(&dd, l), NF_EINPUT, "a file cannot be a parent directory");
	nf_oci_layer_free(l);
	l = NULL;
	/* An empty layer is a valid (empty) tar. */
	nf_oci_layer_new(&l, lay1, NF_OCI_COMPRESS_ZSTD, 0);
	is_int(nf_oci_layer_finish(&dd, l), 0, "empty layer");
	is_int(dd.entries, 0, "no entries");
	nf_oci_layer_free(l);
	nf_oci_layer_free(NULL);

	nf_oci_compression c;
	is_int(nf_oci_compression_parse(&c, "zstd"), 0, "parse zstd");
	is_int(nf_oci_compression_parse(&c, "lz4"), NF_EINPUT, "unknown compression refused");

	free(tarpath);
	free(src1);
	free(src2);
	free(lay1);
	free(lay2);
	nf_fs_remove_tree(root1);
	nf_fs_remove_tree(root2);
	return done_testing();
}
