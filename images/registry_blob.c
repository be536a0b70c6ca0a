/*
 * registry_blob.c - blobs on a registry: existence (HEAD), cross-repository
 * mount, monolithic and chunked (resumable) upload, verified download.
 */
#define _GNU_SOURCE
#include "images/registry.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "images/registry_http.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/banned.h"

#define SMALL_BODY (64 * 1024)

int nf_reg_blob_exists(bool *out, nf_reg_client *c, const char *name, const nf_oci_desc *d)
{
	nf_reg_req q;
	nf_reg_resp r;
	char *url = NULL, *scope = NULL;
	int err;

	*out = false;
	if ((err = nf_oci_digest_check(d->digest)))
		return err;
	if ((err = nf_reg_repo_req(&q, &url, &scope, c, "HEAD", name, "pull,push", NULL, "blobs/%s",
				   d->digest)))
		goto done;
	if ((err = nf_reg_http(&r, c, &q)))
		goto done;
	if (r.status == 200) {
		if (r.content_length >= 0 && (uint64_t)r.content_length != d->size)
			err = nf_error_set(NF_EINPUT, "registry %s: blob %s in %s has %lld bytes, expected %llu",
					   c->host, d->digest, name, (long long)r.content_length,
					   (unsigned long long)d->size);
		else
			*out = true;
	} else if (r.status != 404) {
		err = nf_reg_status_error(NF_ENET, &r, &q);
	}
	nf_reg_resp_release(&r);
done:
	free(url);
	free(scope);
	return err;
}

/* POST /v2/NAME/blobs/uploads/ -> *loc (the session URL). */
static int start_session(char **loc, nf_reg_client *c, const char *name, const char *scope)
{
	nf_reg_req q;
	nf_reg_resp r;
	char *url = nf_reg_url(c, "/v2/%s/blobs/uploads/", name);
	int err;

	*loc = NULL;
	if (!url)
		return nf_error_set(NF_ENOMEM, "out of memory");
	nf_reg_req_init(&q, "POST", url);
	q.scope = scope;
	q.retry = true;
	q.max_resp = SMALL_BODY;
	if ((err = nf_reg_http(&r, c, &q)))
		goto done;
	if (r.status != 202)
		err = nf_reg_status_error(NF_ENET, &r, &q);
	else
		err = nf_reg_location(loc, c, r.location, "POST upload");
	nf_reg_resp_release(&r);
done:
	free(url);
	return err;
}

/* loc + "?digest=" or "&digest=" */
static char *finish_url(const char *loc, const char *digest)
{
	return nf_strdup_printf("%s%sdigest=sha256%%3A%s", loc, strchr(loc, '?') ? "&" : "?", digest + 7);
}

int nf_reg_blob_mount(bool *mounted, nf_reg_client *c, const char *name, const char *from,
		      const char *digest)
{
	nf_reg_req q;
	nf_reg_resp r;
	char *url = NULL, *scope = NULL, *loc = NULL;
	int err;

	*mounted = false;
	if ((err = nf_oci_digest_check(digest)))
		return err;
	if ((err = nf_reg_repo_req(&q, &url, &scope, c, "POST", name, "pull,push", from,
				   "blobs/uploads/?mount=sha256%%3A%s&from=%s", digest + 7, from)))
		goto done;
	q.max_resp = SMALL_BODY;
	if ((err = nf_reg_http(&r, c, &q)))
		goto done;
	if (r.status == 201) {
		*mounted = true;
		c->st.blobs_mounted++;
	} else if (r.status == 202) {
		/* the registry opened an upload session instead: cancel it */
		if (nf_reg_location(&loc, c, r.location, "POST mount") == 0) {
			nf_reg_req d;
			nf_reg_resp dr;
			nf_reg_req_init(&d, "DELETE", loc);
			d.scope = scope;
			d.max_resp = SMALL_BODY;
			if (nf_reg_http(&dr, c, &d) == 0)
				nf_reg_resp_release(&dr);
		}
		nf_error_clear();
	} else {
		err = nf_reg_status_error(NF_ENET, &r, &q);
	}
	nf_reg_resp_release(&r);
done:
	free(url);
	free(scope);
	free(loc);
	return err;
}

/* A permanent refusal (not worth another attempt). */
static bool hard_status(long s)
{
	return s >= 400 && s < 500 && s != 408 && s != 429 && s != 404 && s != 416;
}

/* "0-N" or "bytes=0-N": next offset N+1 ("0--1": 0). */
static int parse_range(uint64_t *next, const char *range)
{
	const char *p = range;
	char *end = NULL;
	unsigned long long hi;

	*next = 0;
	if (!p)
		return nf_error_set(NF_EINPUT, "upload status without a Range header");
	if (!strncmp(p, "bytes=", 6))
		p += 6;
	if (strncmp(p, "0-", 2))
		return nf_error_set(NF_EINPUT, "upload status with a bad Range header '%.40s'", range);
	p += 2;
	if (!strcmp(p, "-1") || !*p)
		return 0;
	if (*p < '0' || *p > '9')
		return nf_error_set(NF_EINPUT, "upload status with a bad Range header '%.40s'", range);
	errno = 0;
	hi = strtoull(p, &end, 10);
	if (errno || *end || hi == UINT64_MAX)
		return nf_error_set(NF_EINPUT, "upload status with a bad Range header '%.40s'", range);
	*next = hi + 1;
	return 0;
}

/* PUT loc?digest= (the body fd/off/len may be empty).  *ok when 201. */
static int finish_upload(bool *ok, long *status, nf_reg_client *c, const char *loc,
			 const nf_oci_desc *d, const char *scope, int fd, uint64_t off, uint64_t len,
			 const void *mem)
{
	nf_reg_req q;
	nf_reg_resp r;
	char *url = finish_url(loc, d->digest);
	int err;

	*ok = false;
	*status = 0;
	if (!url)
		return nf_error_set(NF_ENOMEM, "out of memory");
	nf_reg_req_init(&q, "PUT", url);
	q.scope = scope;
	q.content_type = "application/octet-stream";
	q.max_resp = SMALL_BODY;
	if (mem) {
		q.body = mem;
		q.body_len = (size_t)len;
	} else if (fd >= 0 && len) {
		q.fd = fd;
		q.fd_off = off;
		q.fd_len = len;
	}
	q.progress_what = d->digest + 7;
	q.progress_base = off;
	q.progress_total = d->size;
	if ((err = nf_reg_http(&r, c, &q)))
		goto done;
	*status = r.status;
	if (r.status == 201) {
		if (r.digest && strcmp(r.digest, d->digest))
			err = nf_error_set(NF_EINPUT, "registry %s stored blob %s under another digest (%.80s)",
					   c->host, d->digest, r.digest);
		else
			*ok = true;
	} else if (hard_status(r.status)) {
		err = nf_reg_status_error(NF_ENET, &r, &q);
	} else {
		nf_reg_status_error(NF_ENET, &r, &q); /* the message, for a last failure */
	}
	*status = r.status;
	nf_reg_resp_release(&r);
done:
	free(url);
	return err;
}

/* After a failed finishing request: the blob may be there all the same. */
static bool landed(nf_reg_client *c, const char *name, const nf_oci_desc *d)
{
	bool there = false;
	if (nf_reg_blob_exists(&there, c, name, d))
		return false;
	return there;
}

static int upload_mono(nf_reg_client *c, const char *name, const nf_oci_desc *d, int fd,
		       const void *mem, const char *scope)
{
	char *loc = NULL;
	int err = 0;

	for (int attempt = 0;; attempt++) {
		bool ok = false;
		long status = 0;
		if ((err = start_session(&loc, c, name, scope)))
			break;
		err = finish_upload(&ok, &status, c, loc, d, scope, fd, 0, d->size, mem);
		free(loc);
		loc = NULL;
		if (err || ok)
			break;
		if (landed(c, name, d))
			break;
		if (attempt >= c->o.max_retries) {
			err = nf_error_wrap(NF_ENET, "upload of %s failed %d times", d->digest, attempt + 1);
			break;
		}
		nf_reg_logf(c, "upload of %s failed (HTTP %ld): starting again", d->digest, status);
		c->st.restarts++;
		c->st.retries++;
		nf_reg_backoff(c, attempt, -1);
	}
	return err;
}

/* GET loc: the session's offset, *loc updated.  *gone when the session is no more. */
static int session_offset(uint64_t *off, bool *gone, nf_reg_client *c, char **loc, const char *scope)
{
	nf_reg_req q;
	nf_reg_resp r;
	int err;

	*off = 0;
	*gone = false;
	nf_reg_req_init(&q, "GET", *loc);
	q.scope = scope;
	q.retry = true;
	q.max_resp = SMALL_BODY;
	if ((err = nf_reg_http(&r, c, &q)))
		return err;
	if (r.status == 204 || r.status == 200) {
		char *nl = NULL;
		if ((err = parse_range(off, r.range)))
			goto done;
		if (r.location) {
			if ((err = nf_reg_location(&nl, c, r.location, "GET upload status")))
				goto done;
			free(*loc);
			*loc = nl;
		}
	} else if (r.status == 404 || r.status == 400) {
		*gone = true;
	} else {
		err = nf_reg_status_error(NF_ENET, &r, &q);
	}
done:
	nf_reg_resp_release(&r);
	return err;
}

static int upload_chunked(nf_reg_client *c, const char *name, const nf_oci_desc *d, int fd,
			  const char *scope)
{
	char *loc = NULL, range[64];
	uint64_t off = 0;
	int failures = 0, err = 0;

	if ((err = start_session(&loc, c, name, scope)))
		return err;
	for (;;) {
		nf_reg_req q;
		nf_reg_resp r;
		long status = 0;
		long retry_after = -1;
		bool progressed = false;

		if (off < d->size) {
			uint64_t n = d->size - off;
			if (n > c->o.chunk_size)
				n = c->o.chunk_size;
			snprintf(range, sizeof(range), "%llu-%llu", (unsigned long long)off,
				 (unsigned long long)(off + n - 1));
			nf_reg_req_init(&q, "PATCH", loc);
			q.scope = scope;
			q.content_type = "application/octet-stream";
			q.content_range = range;
			q.fd = fd;
			q.fd_off = off;
			q.fd_len = n;
			q.max_resp = SMALL_BODY;
			q.progress_what = d->digest + 7;
			q.progress_base = off;
			q.progress_total = d->size;
			err = nf_reg_http(&r, c, &q);
			if (err && err != NF_ENET)
				goto done;
			if (!err) {
				status = r.status;
				retry_after = r.retry_after;
				if (r.status == 202) {
					char *nl = NULL;
					uint64_t next = off + n;
					if (r.range && (err = parse_range(&next, r.range)) == 0 && next != off + n)
						err = nf_error_set(NF_EINPUT,
								   "registry %s: after bytes %s it reports %llu bytes received",
								   c->host, range, (unsigned long long)next);
					if (!err && r.location &&
					    (err = nf_reg_location(&nl, c, r.location, "PATCH upload")) == 0) {
						free(loc);
						loc = nl;
					}
					nf_reg_resp_release(&r);
					if (err)
						goto done;
					off += n;
					failures = 0;
					continue;
				}
				if (hard_status(r.status)) {
					err = nf_reg_status_error(NF_ENET, &r, &q);
					nf_reg_resp_release(&r);
					goto done;
				}
				nf_reg_status_error(NF_ENET, &r, &q);
				nf_reg_resp_release(&r);
			}
			err = 0;
		} else {
			bool ok = false;
			if ((err = finish_upload(&ok, &status, c, loc, d, scope, -1, 0, 0, NULL)))
				goto done;
			if (ok || landed(c, name, d))
				goto done;
		}
		/* a failure: back off, then ask the session where it is */
		if (failures++ >= c->o.max_retries) {
			err = nf_error_wrap(NF_ENET, "chunked upload of %s failed %d times in a row", d->digest,
					    failures);
			goto done;
		}
		c->st.retries++;
		nf_reg_backoff(c, failures - 1, status == 429 ? retry_after : -1);
		{
			uint64_t at = 0;
			bool gone = false;
			if ((err = session_offset(&at, &gone, c, &loc, scope)))
				goto done;
			if (gone || at > d->size) {
				nf_reg_logf(c, "upload of %s: session gone, starting again from byte 0", d->digest);
				free(loc);
				loc = NULL;
				c->st.restarts++;
				if ((err = start_session(&loc, c, name, scope)))
					goto done;
				off = 0;
			} else {
				nf_reg_logf(c, "upload of %s: resuming at byte %llu of %llu", d->digest,
					    (unsigned long long)at, (unsigned long long)d->size);
				c->st.resumes++;
				off = at;
			}
			(void)progressed;
		}
	}
done:
	free(loc);
	return err;
}

int nf_reg_blob_upload_file(nf_reg_client *c, const char *name, const char *path,
			    const nf_oci_desc *d)
{
	char *scope = NULL;
	struct stat st;
	int fd = -1, err = 0;

	if ((err = nf_oci_digest_check(d->digest)))
		return err;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return nf_error_set(NF_EIO, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != d->size) {
		err = nf_error_set(NF_EINPUT, "%s: not a regular file of %llu bytes (blob %s)", path,
				   (unsigned long long)d->size, d->digest);
		goto done;
	}
	if (!(scope = nf_reg_scope(name, "pull,push", NULL))) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (d->size > c->o.chunk_size)
		err = upload_chunked(c, name, d, fd, scope);
	else
		err = upload_mono(c, name, d, fd, NULL, scope);
	if (!err) {
		c->st.blobs_uploaded++;
		if (c->o.progress)
			c->o.progress(c->o.progress_ctx, d->digest + 7, d->size, d->size, -1.0);
	}
done:
	if (err)
		nf_error_wrap(err, "push blob %s to %s/%s", d->digest, c->host, name);
	free(scope);
	close(fd);
	return err;
}

int nf_reg_blob_upload_bytes(nf_reg_client *c, const char *name, const void *data, size_t len)
{
	char dg[NF_OCI_DIGEST_LEN + 1];
	nf_oci_desc d;
	char *scope = NULL;
	int err;

	if ((err = nf_oci_digest_of(dg, data, len)))
		return err;
	if ((err = nf_oci_desc_set(&d, "application/octet-stream", dg, len)))
		return err;
	if (!(scope = nf_reg_scope(name, "pull,push", NULL)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	err = upload_mono(c, name, &d, -1, len ? data : "", scope);
	if (!err)
		c->st.blobs_uploaded++;
	free(scope);
	return err;
}

int nf_reg_blob_get(char **out, size_t *len, nf_reg_client *c, const char *name,
		    const nf_oci_desc *d, size_t max)
{
	nf_reg_req q;
	nf_reg_resp r;
	char *url = NULL, *scope = NULL, hex[NF_SHA256_HEX_LEN + 1];
	int err;

	*out = NULL;
	*len = 0;
	if ((err = nf_oci_digest_check(d->digest)))
		return err;
	if (d->size > max)
		return nf_error_set(NF_EINPUT, "blob %s is %llu bytes, more than the %zu we read", d->digest,
				    (unsigned long long)d->size, max);
	if ((err = nf_reg_repo_req(&q, &url, &scope, c, "GET", name, "pull", NULL, "blobs/%s",
				   d->digest)))
		goto done;
	q.max_resp = (size_t)d->size;
	q.foreign_redirect_ok = true;
	if ((err = nf_reg_http(&r, c, &q)))
		goto done;
	if (r.status == 404) {
		err = nf_error_set(NF_ENOTFOUND, "registry %s: blob %s not found in %s", c->host, d->digest, name);
	} else if (r.status != 200) {
		err = nf_reg_status_error(NF_ENET, &r, &q);
	} else if (r.len != d->size) {
		err = nf_error_set(NF_EINPUT, "registry %s: blob %s has %zu bytes, expected %llu: refused",
				   c->host, d->digest, r.len, (unsigned long long)d->size);
	} else if ((err = nf_sha256_hex(hex, r.body ? r.body : "", r.len)) == 0 &&
		   strcmp(hex, d->digest + 7)) {
		err = nf_error_set(NF_EINPUT, "registry %s: blob %s: its bytes hash to sha256:%.12s...: refused",
				   c->host, d->digest, hex);
	}
	if (!err)
		err = nf_reg_resp_take_body(out, len, &r);
	nf_reg_resp_release(&r);
done:
	free(url);
	free(scope);
	return err;
}
