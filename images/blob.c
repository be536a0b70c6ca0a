/* blob.c - the blob store of an OCI layout (see blob.h). */
#define _GNU_SOURCE
#include "images/blob.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define WBUF_SIZE ((size_t)1 << 20)

struct nf_oci_blob_writer {
	int fd;
	char *dir;      /* LAYOUT/blobs/sha256, owned */
	char *tmp_path; /* owned */
	nf_sha256 *h;   /* NULL when the caller supplies the digest */
	unsigned char *buf;
	size_t used;
	uint64_t size;
	bool done;
};

int nf_oci_digest_check(const char *s)
{
	if (!s || strncmp(s, "sha256:", 7) != 0 || !nf_sha256_is_hex(s + 7))
		return nf_error_set(NF_EINPUT, "bad digest '%.80s': want sha256:<64 lowercase hex>",
				    s ? s : "(null)");
	return 0;
}

int nf_oci_digest_of(char out[NF_OCI_DIGEST_LEN + 1], const void *data, size_t len)
{
	char hex[NF_SHA256_HEX_LEN + 1];
	int err = nf_sha256_hex(hex, data, len);
	if (err)
		return err;
	snprintf(out, NF_OCI_DIGEST_LEN + 1, "sha256:%s", hex);
	return 0;
}

int nf_oci_desc_set(nf_oci_desc *d, const char *media_type, const char *digest, uint64_t size)
{
	size_t n = strlen(media_type);
	int err = nf_oci_digest_check(digest);
	if (err)
		return err;
	if (n == 0 || n >= sizeof(d->media_type))
		return nf_error_set(NF_EINPUT, "media type '%.80s' is empty or too long", media_type);
	memcpy(d->media_type, media_type, n + 1);
	memcpy(d->digest, digest, NF_OCI_DIGEST_LEN + 1);
	d->size = size;
	return 0;
}

int nf_oci_blob_path(char **out, const char *layout_dir, const char *digest)
{
	int err = nf_oci_digest_check(digest);
	*out = NULL;
	if (err)
		return err;
	*out = nf_strdup_printf("%s/blobs/sha256/%s", layout_dir, digest + 7);
	return *out ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
}

bool nf_oci_blob_exists(const char *layout_dir, const char *digest)
{
	char *p = NULL;
	struct stat st;
	bool ok;
	if (nf_oci_blob_path(&p, layout_dir, digest))
		return false;
	ok = lstat(p, &st) == 0 && S_ISREG(st.st_mode);
	free(p);
	return ok;
}

int nf_oci_blob_writer_open(nf_oci_blob_writer **out, const char *layout_dir, bool hash)
{
	nf_oci_blob_writer *w = NULL;
	int err = 0;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return nf_error_set(NF_ENOMEM, "out of memory");
	w->fd = -1;
	w->dir = nf_strdup_printf("%s/blobs/sha256", layout_dir);
	w->buf = malloc(WBUF_SIZE);
	if (!w->dir || !w->buf) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = nf_fs_mkdir_p(w->dir, 0755)))
		goto done;
	if (hash && (err = nf_sha256_new(&w->h)))
		goto done;
	w->tmp_path = nf_strdup_printf("%s/.tmp-XXXXXX", w->dir);
	if (!w->tmp_path) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	w->fd = mkostemp(w->tmp_path, O_CLOEXEC);
	if (w->fd < 0) {
		err = nf_fs_write_error(w->dir, errno);
		free(w->tmp_path);
		w->tmp_path = NULL;
		goto done;
	}
	if (fchmod(w->fd, 0644) < 0) {
		err = nf_error_set(NF_EIO, "%s: %s", w->tmp_path, strerror(errno));
		goto done;
	}
	*out = w;
	w = NULL;
done:
	nf_oci_blob_writer_free(w);
	return err;
}

static int flush_buf(nf_oci_blob_writer *w)
{
	int err = nf_fs_write_all(w->fd, w->buf, w->used, w->tmp_path);
	if (!err)
		w->used = 0;
	return err;
}

int nf_oci_blob_writer_write(nf_oci_blob_writer *w, const void *data, size_t len)
{
	const unsigned char *p = data;
	int err;
	if (w->done)
		return nf_error_set(NF_EINTERNAL, "blob writer used after commit");
	if (!nf_u64_add(&w->size, w->size, len))
		return nf_error_set(NF_EINTERNAL, "blob size overflow");
	if (w->h && (err = nf_sha256_update(w->h, data, len)))
		return err;
	while (len > 0) {
		size_t n = WBUF_SIZE - w->used;
		if (n > len)
			n = len;
		memcpy(w->buf + w->used, p, n);
		w->used += n;
		p += n;
		len -= n;
		if (w->used == WBUF_SIZE && (err = flush_buf(w)))
			return err;
	}
	return 0;
}

uint64_t nf_oci_blob_writer_size(const nf_oci_blob_writer *w)
{
	return w->size;
}

int nf_oci_blob_writer_commit(nf_oci_desc *out, nf_oci_blob_writer *w, const char *media_type,
			      const char *known_hex)
{
	char hex[NF_SHA256_HEX_LEN + 1];
	char digest[NF_OCI_DIGEST_LEN + 1];
	char *final = NULL;
	struct stat st;
	int err = 0;

	if (w->done)
		return nf_error_set(NF_EINTERNAL, "blob writer committed twice");
	w->done = true;
	if ((err = flush_buf(w)))
		goto done;
	if (w->h) {
		if ((err = nf_sha256_final_hex(w->h, hex)))
			goto done;
	} else {
		if (!known_hex || !nf_sha256_is_hex(known_hex)) {
			err = nf_error_set(NF_EINTERNAL, "blob writer: no digest given");
			goto done;
		}
		memcpy(hex, known_hex, sizeof(hex));
	}
	snprintf(digest, sizeof(digest), "sha256:%s", hex);
	if ((err = nf_oci_desc_set(out, media_type, digest, w->size)))
		goto done;
	final = nf_strdup_printf("%s/%s", w->dir, hex);
	if (!final) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (lstat(final, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == w->size) {
		/* Present already: content addressed, so the same bytes. Not rewritten. */
		close(w->fd);
		w->fd = -1;
		unlink(w->tmp_path);
		goto done;
	}
	if (fsync(w->fd) < 0) {
		err = nf_error_set(NF_EIO, "%s: fsync: %s", w->tmp_path, strerror(errno));
		goto done;
	}
	if (close(w->fd) < 0) {
		w->fd = -1;
		err = nf_error_set(NF_EIO, "%s: close: %s", w->tmp_path, strerror(errno));
		goto done;
	}
	w->fd = -1;
	if (rename(w->tmp_path, final) < 0) {
		err = nf_error_set(NF_EIO, "%s: rename: %s", final, strerror(errno));
		goto done;
	}
	free(w->tmp_path);
	w->tmp_path = NULL;
	nf_fs_fsync_dir(w->dir);
done:
	free(final);
	return err;
}

void nf_oci_blob_writer_free(nf_oci_blob_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	if (w->tmp_path)
		unlink(w->tmp_path);
	free(w->tmp_path);
	free(w->dir);
	free(w->buf);
	nf_sha256_free(w->h);
	free(w);
}

int nf_oci_blob_put(nf_oci_desc *out, const char *layout_dir, const char *media_type,
		    const void *data, size_t len)
{
	char digest[NF_OCI_DIGEST_LEN + 1];
	nf_oci_blob_writer *w = NULL;
	int err;

	if ((err = nf_oci_digest_of(digest, data, len)))
		return err;
	if (nf_oci_blob_exists(layout_dir, digest))
		return nf_oci_desc_set(out, media_type, digest, len);
	if ((err = nf_oci_blob_writer_open(&w, layout_dir, false)))
		goto done;
	if ((err = nf_oci_blob_writer_write(w, data, len)))
		goto done;
	err = nf_oci_blob_writer_commit(out, w, media_type, digest + 7);
done:
	nf_oci_blob_writer_free(w);
	return err;
}

int nf_oci_blob_read(char **out, size_t *len, const char *layout_dir, const nf_oci_desc *desc,
		     size_t max_len)
{
	char hex[NF_SHA256_HEX_LEN + 1];
	char *path = NULL, *buf = NULL;
	size_t n = 0;
	int err;

	*out = NULL;
	*len = 0;
	if ((err = nf_oci_blob_path(&path, layout_dir, desc->digest)))
		goto done;
	if (desc->size > max_len) {
		err = nf_error_set(NF_EINPUT, "%s: descriptor says %llu bytes, more than the limit of %zu",
				   desc->digest, (unsigned long long)desc->size, max_len);
		goto done;
	}
	if ((err = nf_fs_read_file(&buf, &n, path, max_len)))
		goto done;
	if (n != desc->size) {
		err = nf_error_set(NF_EINPUT, "%s: blob is %zu bytes, descriptor says %llu", path, n,
				   (unsigned long long)desc->size);
		goto done;
	}
	if ((err = nf_sha256_hex(hex, buf, n)))
		goto done;
	if (strcmp(hex, desc->digest + 7) != 0) {
		err = nf_error_set(NF_EINPUT, "%s: content does not match its digest (sha256:%s)", path,
				   hex);
		goto done;
	}
	*out = buf;
	*len = n;
	buf = NULL;
done:
	free(buf);
	free(path);
	return err;
}

int nf_oci_blob_import(const char *dst_layout, const char *src_layout, const char *digest,
		       uint64_t size)
{
	char *src = NULL, *dst = NULL, *buf = NULL;
	char hex[NF_SHA256_HEX_LEN + 1];
	nf_oci_blob_writer *w = NULL;
	nf_sha256 *h = NULL;
	nf_oci_desc d;
	int fd = -1, err = 0;

	if ((err = nf_oci_blob_path(&src, src_layout, digest)))
		goto done;
	if ((err = nf_oci_blob_path(&dst, dst_layout, digest)))
		goto done;
	if (nf_oci_blob_exists(dst_layout, digest))
		goto done;
	{
		char *dir = nf_strdup_printf("%s/blobs/sha256", dst_layout);
		if (!dir) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
		err = nf_fs_mkdir_p(dir, 0755);
		free(dir);
		if (err)
			goto done;
	}
	if (link(src, dst) == 0) {
		struct stat st;
		if (stat(dst, &st) != 0 || (uint64_t)st.st_size != size) {
			unlink(dst);
			err = nf_error_set(NF_EINPUT, "%s: size is not the %llu bytes its descriptor says",
					   src, (unsigned long long)size);
		}
		goto done;
	}
	/* Copy, verifying digest and size, into a temp file renamed on success. */
	fd = open(src, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = nf_error_set(errno == ENOENT ? NF_ENOTFOUND : NF_EIO, "%s: %s", src,
				   strerror(errno));
		goto done;
	}
	buf = malloc(WBUF_SIZE);
	if (!buf) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = nf_oci_blob_writer_open(&w, dst_layout, false)))
		goto done;
	if ((err = nf_sha256_new(&h)))
		goto done;
	for (;;) {
		ssize_t n = read(fd, buf, WBUF_SIZE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = nf_error_set(NF_EIO, "%s: %s", src, strerror(errno));
			goto done;
		}
		if (n == 0)
			break;
		if ((err = nf_sha256_update(h, buf, (size_t)n)))
			goto done;
		if ((err = nf_oci_blob_writer_write(w, buf, (size_t)n)))
			goto done;
		if (nf_oci_blob_writer_size(w) > size) {
			err = nf_error_set(NF_EINPUT, "%s: longer than the %llu bytes its descriptor says",
					   src, (unsigned long long)size);
			goto done;
		}
	}
	if (nf_oci_blob_writer_size(w) != size) {
		err = nf_error_set(NF_EINPUT, "%s: shorter than the %llu bytes its descriptor says", src,
				   (unsigned long long)size);
		goto done;
	}
	if ((err = nf_sha256_final_hex(h, hex)))
		goto done;
	if (strcmp(hex, digest + 7) != 0) {
		err = nf_error_set(NF_EINPUT, "%s: content does not match its digest (sha256:%s)", src,
				   hex);
		goto done;
	}
	err = nf_oci_blob_writer_commit(&d, w, "application/octet-stream", hex);
done:
	if (fd >= 0)
		close(fd);
	nf_oci_blob_writer_free(w);
	nf_sha256_free(h);
	free(buf);
	free(src);
	free(dst);
	return err;
}
