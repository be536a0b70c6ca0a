/* test_layer.c - layers are byte-reproducible, stream correctly and store blobs once. */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "images/blob.h"
#include "images/compress.h"
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

/* Every gzip member of in[0..inlen) decompressed with zlib, one after the other
 * (as gzip, Go and Python read a multi-member file); NULL unless all are whole. */
static unsigned char *gunzip(size_t *outlen, const unsigned char *in, size_t inlen)
{
	size_t cap = 1 << 20, len = 0;
	unsigned char *out = malloc(cap);
	z_stream z;
	int r = Z_OK;
	memset(&z, 0, sizeof(z));
	*outlen = 0;
	if (!out || inflateInit2(&z, 15 + 16) != Z_OK) {
		free(out);
		return NULL;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)inlen;
	while (z.avail_in > 0) {
		if (r == Z_STREAM_END && inflateReset(&z) != Z_OK)
			break;
		do {
			if (len == cap)
				out = realloc(out, cap *= 2);
			z.next_out = out + len;
			z.avail_out = (uInt)(cap - len);
			r = inflate(&z, Z_NO_FLUSH);
			len = cap - z.avail_out;
		} while (r == Z_OK);
		if (r != Z_STREAM_END)
			break;
	}
	inflateEnd(&z);
	if (r != Z_STREAM_END) {
		free(out);
		return NULL;
	}
	*outlen = len;
	return out;
}

static unsigned char *unzstd(size_t *outlen, const unsigned char *in, size_t inlen)
{
	size_t cap = 1 << 20, len = 0, r = 1;
	unsigned char *out = malloc(cap);
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	ZSTD_inBuffer ib = {in, inlen, 0};
	*outlen = 0;
	while (out && dc && ib.pos < ib.size && !ZSTD_isError(r)) {
		if (len == cap)
			out = realloc(out, cap *= 2);
		ZSTD_outBuffer ob = {out + len, cap - len, 0};
		r = ZSTD_decompressStream(dc, &ob, &ib);
		len += ob.pos;
	}
	ZSTD_freeDCtx(dc);
	if (!out || ZSTD_isError(r) || r != 0) {
		free(out);
		return NULL;
	}
	*outlen = len;
	return out;
}

/* ---- the compressor on its own ---- */

struct membuf {
	unsigned char *p;
	size_t len, cap;
	int fail_after; /* > 0: the sink fails on that call */
	int calls;
};

static int mem_sink(void *ctx, const void *data, size_t len)
{
	struct membuf *m = ctx;
	if (m->fail_after > 0 && ++m->calls >= m->fail_after)
		return nf_error_set(NF_EIO, "test sink: disk full");
	if (m->len + len > m->cap) {
		size_t cap = m->cap ? m->cap : 1 << 16;
		while (cap < m->len + len)
			cap *= 2;
		unsigned char *p = realloc(m->p, cap);
		if (!p)
			return nf_error_set(NF_ENOMEM, "out of memory");
		m->p = p;
		m->cap = cap;
	}
	memcpy(m->p + m->len, data, len);
	m->len += len;
	return 0;
}

/* Compress in[0..len) in writes of `step` bytes (0 = one write). */
static int compress_mem(struct membuf *m, nf_oci_compression c, unsigned threads,
			const unsigned char *in, size_t len, size_t step)
{
	nf_oci_compressor *z = NULL;
	int err = nf_oci_compressor_new(&z, c, threads, mem_sink, m);
	for (size_t o = 0; !err && o < len;) {
		size_t n = step && step < len - o ? step : len - o;
		err = nf_oci_compressor_write(z, in + o, n);
		o += n;
	}
	if (!err)
		err = nf_oci_compressor_finish(z);
	nf_oci_compressor_free(z);
	return err;
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* kind 0: random (incompressible), 1: text (compressible), 2: random then text. */
static unsigned char *make_input(size_t len, int kind)
{
	static const char words[] = "the engine reads its weights and the tokenizer; ";
	unsigned char *p = malloc(len ? len : 1);
	for (size_t i = 0; p && i < len; i++) {
		if (kind == 0 || (kind == 2 && i < len / 2))
			p[i] = (unsigned char)(rng() >> 24);
		else
			p[i] = (unsigned char)words[(i * 7 / 5) % (sizeof(words) - 1)] ^
			       (unsigned char)((i % 97) == 0);
	}
	return p;
}

static int write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	int ok_ = f && fwrite(data, 1, len, f) == len;
	if (f && fclose(f))
		ok_ = 0;
	return ok_ ? 0 : -1;
}

static void test_compressor(const char *tmp)
{
	const size_t B = NF_OCI_GZ_BLOCK;
	const size_t sizes[] = {0, 1, B - 1, B, B + 1, 3 * B + 12345};
	static const char *kinds[] = {"random", "text", "random+text"};
	nf_oci_compression cs[2] = {NF_OCI_COMPRESS_GZIP, NF_OCI_COMPRESS_ZSTD};
	char *gzpath = nf_path_join(tmp, "t.gz");
	int gzip_t_ok = 1;

	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		for (int kind = 0; kind < 3; kind++) {
			size_t len = sizes[si];
			unsigned char *in = make_input(len, kind);
			for (int ci = 0; ci < 2; ci++) {
				const char *cn = nf_oci_compression_name(cs[ci]);
				struct membuf m1 = {0}, m2 = {0}, m3 = {0};
				size_t dlen = 0;
				unsigned char *dec = NULL;
				int e1 = compress_mem(&m1, cs[ci], 1, in, len, 0);
				int e2 = compress_mem(&m2, cs[ci], 2, in, len, 4093);
				int e3 = compress_mem(&m3, cs[ci], 5, in, len, 65536 + 7);
				ok(!e1 && !e2 && !e3, "%s %s %zu bytes: compressed with 1, 2 and 5 threads",
				   cn, kinds[kind], len);
				ok(m1.len == m2.len && m1.len == m3.len && m1.len > 0 &&
					   !memcmp(m1.p, m2.p, m1.len) && !memcmp(m1.p, m3.p, m1.len),
				   "%s %s %zu bytes: the same bytes for 1, 2 and 5 threads and any write sizes",
				   cn, kinds[kind], len);
				dec = ci == 0 ? gunzip(&dlen, m1.p, m1.len) : unzstd(&dlen, m1.p, m1.len);
				ok(dec && dlen == len && (len == 0 || !memcmp(dec, in, len)),
				   "%s %s %zu bytes: decompresses to the input", cn, kinds[kind], len);
				if (ci == 0 && len >= B && kind != 1) {
					/* random blocks are stored: tiny overhead; text ones shrink */
					size_t members = (len + B - 1) / B;
					if (kind == 0)
						ok(m1.len < len + members * 128,
						   "gzip random %zu bytes: stored (%zu bytes)", len, m1.len);
					else
						ok(m1.len < len * 3 / 4,
						   "gzip random+text %zu bytes: the text half compressed (%zu bytes)",
						   len, m1.len);
				}
				if (ci == 0 && kind == 1 && len >= B)
					ok(m1.len < len / 10, "gzip text %zu bytes: compressed (%zu bytes)", len,
					   m1.len);
				if (ci == 0) {
					char cmd[600];
					snprintf(cmd, sizeof(cmd), "gzip -t %s", gzpath);
					if (write_file(gzpath, m1.p, m1.len) || system(cmd) != 0) {
						gzip_t_ok = 0;
						diag("gzip -t fails on %s %zu bytes", kinds[kind], len);
					}
				}
				free(dec);
				free(m1.p);
				free(m2.p);
				free(m3.p);
			}
			free(in);
		}
	}
	ok(gzip_t_ok, "gzip -t accepts every gzip stream");

	/* Python's gzip reads the members as one stream. */
	{
		size_t len = 2 * B + 99;
		unsigned char *in = make_input(len, 2);
		struct membuf m = {0};
		char cmd[800], *rawpath = nf_path_join(tmp, "t.raw");
		int have_py = system("python3 -c 'import gzip' 2>/dev/null") == 0;
		compress_mem(&m, NF_OCI_COMPRESS_GZIP, 2, in, len, 0);
		write_file(gzpath, m.p, m.len);
		write_file(rawpath, in, len);
		snprintf(cmd, sizeof(cmd),
			 "python3 -c 'import gzip,sys; sys.exit(gzip.open(sys.argv[1]).read() != "
			 "open(sys.argv[2],\"rb\").read())' %s %s",
			 gzpath, rawpath);
		if (have_py)
			ok(system(cmd) == 0, "Python's gzip reads the whole multi-member stream");
		else
			skip("no python3");
		snprintf(cmd, sizeof(cmd), "gzip -dc %s | cmp -s - %s", gzpath, rawpath);
		ok(system(cmd) == 0, "gzip -dc gives back the input");
		free(rawpath);
		free(m.p);
		free(in);
	}

	/* A failing sink stops the stream with its error; threads are joined by free. */
	for (int ci = 0; ci < 2; ci++) {
		size_t len = 6 * B;
		unsigned char *in = make_input(len, 1);
		for (unsigned th = 1; th <= 3; th += 2) {
			struct membuf m = {0};
			m.fail_after = ci == 0 ? 3 : 1; /* zstd output of text comes in one piece */
			is_int(compress_mem(&m, cs[ci], th, in, len, 100000), NF_EIO,
			       "%s, %u threads: the sink's error comes back", nf_oci_compression_name(cs[ci]),
			       th);
			free(m.p);
		}
		free(in);
	}
	{
		nf_oci_compressor *z = NULL;
		struct membuf m = {0};
		is_int(nf_oci_compressor_new(&z, NF_OCI_COMPRESS_GZIP, NF_OCI_COMPRESS_THREADS_MAX + 1,
					     mem_sink, &m),
		       NF_EINPUT, "too many threads refused");
		ok(z == NULL, "no compressor then");
		/* Freed with blocks in flight and never finished: no leak, no hang. */
		unsigned char *in = make_input(5 * B, 0);
		is_int(nf_oci_compressor_new(&z, NF_OCI_COMPRESS_GZIP, 3, mem_sink, &m), 0,
		       "3 threads");
		is_int(nf_oci_compressor_threads(z), 3, "it runs 3 workers");
		is_int(nf_oci_compressor_write(z, in, 5 * B), 0, "writes");
		nf_oci_compressor_free(z);
		z = NULL;
		is_int(nf_oci_compressor_new(&z, NF_OCI_COMPRESS_NONE, 0, mem_sink, &m), 0, "none");
		is_int(nf_oci_compressor_finish(z), 0, "finish");
		is_int(nf_oci_compressor_write(z, "x", 1), NF_EINTERNAL, "no write after finish");
		nf_oci_compressor_free(z);
		nf_oci_compressor_free(NULL);
		free(in);
		free(m.p);
	}
	free(gzpath);
}

/* A multi-block layer is the same blob whatever the thread count. */
static void test_layer_threads(const char *tmp)
{
	size_t len = 3 * NF_OCI_GZ_BLOCK + 777;
	unsigned char *in = make_input(len, 2);
	char *file = nf_path_join(tmp, "big.bin");
	nf_oci_compression cs[2] = {NF_OCI_COMPRESS_GZIP, NF_OCI_COMPRESS_ZSTD};
	write_file(file, in, len);
	for (int ci = 0; ci < 2; ci++) {
		nf_oci_layer_desc d[3];
		unsigned th[3] = {1, 2, 4};
		for (int k = 0; k < 3; k++) {
			char name[32];
			snprintf(name, sizeof(name), "oci-th%u", th[k]);
			char *lay = nf_path_join(tmp, name);
			nf_oci_layer *l = NULL;
			int err = nf_oci_layer_new(&l, lay, cs[ci], 1700000000);
			if (!err)
				err = nf_oci_layer_set_threads(l, th[k]);
			if (!err)
				err = nf_oci_layer_add_file(l, file, "opt/nim/weights/w.bin", 0);
			if (!err)
				err = nf_oci_layer_add_bytes(l, "opt/nim/small.txt", "small\n", 6, 0);
			if (!err)
				err = nf_oci_layer_finish(&d[k], l);
			is_int(err, 0, "%s layer with %u threads", nf_oci_compression_name(cs[ci]), th[k]);
			nf_oci_layer_free(l);
			free(lay);
		}
		is_str(d[0].blob.digest, d[1].blob.digest, "%s: 1 and 2 threads give the same blob",
		       nf_oci_compression_name(cs[ci]));
		is_str(d[0].blob.digest, d[2].blob.digest, "%s: 1 and 4 threads give the same blob",
		       nf_oci_compression_name(cs[ci]));
		is_str(d[0].diff_id, d[2].diff_id, "%s: same diff_id", nf_oci_compression_name(cs[ci]));
	}
	{
		nf_oci_layer *l = NULL;
		nf_oci_layer_new(&l, tmp, NF_OCI_COMPRESS_GZIP, 0);
		is_int(nf_oci_layer_set_threads(l, NF_OCI_COMPRESS_THREADS_MAX + 1), NF_EINPUT,
		       "layer: too many threads refused");
		nf_oci_layer_free(l);
	}
	free(file);
	free(in);
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
		free(out);
		out = gunzip(&len, (unsigned char *)in, inlen);
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

/* A write that fails in the middle of the tar (a source file changed after it
 * was added) fails the layer with a message naming the file, leaves no blob
 * or temporary file behind, and frees everything (the sanitizer build's
 * LeakSanitizer checks the archive_write_fail path). */
static void test_layer_write_fails(const char *tmp)
{
	char *dir = nf_path_join(tmp, "shrinks"), *layout = nf_path_join(tmp, "oci-fail");
	char *blobs = nf_path_join(layout, "blobs/sha256");
	nf_oci_compression cs[2] = {NF_OCI_COMPRESS_NONE, NF_OCI_COMPRESS_ZSTD};
	nf_fs_mkdir_p(dir, 0755);
	for (int i = 0; i < 2; i++) {
		nf_oci_layer *l = NULL;
		nf_oci_layer_desc d;
		put(dir, "w.bin", "sixteen bytes!!!", 0644, 1000);
		char *src = nf_path_join(dir, "w.bin");
		is_int(nf_oci_layer_new(&l, layout, cs[i], 0), 0, "%s: a layer",
		       nf_oci_compression_name(cs[i]));
		nf_oci_layer_add_bytes(l, "first", "before the file", 15, 0);
		is_int(nf_oci_layer_add_file(l, src, "w.bin", 0), 0, "the file is added");
		put(dir, "w.bin", "short", 0644, 1000);
		is_int(nf_oci_layer_finish(&d, l), NF_EINPUT, "%s: a file that shrank fails the layer",
		       nf_oci_compression_name(cs[i]));
		ok(strstr(nf_error_last(), "w.bin") != NULL, "the error names it: %s", nf_error_last());
		ok(d.blob.digest[0] == 0 && d.entries == 0, "no descriptor comes back");
		nf_oci_layer_free(l);
		free(src);
	}
	DIR *dp = opendir(blobs);
	int left = 0;
	for (struct dirent *de; dp && (de = readdir(dp));)
		left += de->d_name[0] != '.';
	if (dp)
		closedir(dp);
	is_int(left, 0, "nothing is left in blobs/sha256");
	free(blobs);
	free(layout);
	free(dir);
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

	test_compressor(root1);
	test_layer_threads(root2);
	test_layer_write_fails(root1);

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
