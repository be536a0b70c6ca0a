/*
 * unpack.c - nf_fetch_unpack: extract an archive (.tar, .tar.gz, .tar.zst,
 * .tar.xz, .zip ...) with libarchive into a cache stage keyed by the
 * archive's digest.
 *
 * Every entry name is checked here first (relative, no ".." component; link
 * targets stay inside the tree; only files, folders and links), then prefixed
 * with the stage folder's real path and written with libarchive's
 * ARCHIVE_EXTRACT_SECURE_NODOTDOT and ARCHIVE_EXTRACT_SECURE_SYMLINKS.
 * (ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS cannot be passed to the writer
 * since the prefixed names are absolute by construction; the same rule is
 * enforced on the names from the archive, before prefixing.)  A hostile entry
 * refuses the whole archive and the temp folder is removed.  Entry count and
 * total bytes written are bounded by the real data, not by what headers claim.
 */
#define _GNU_SOURCE
#include "factory/fetch.h"

#include <archive.h>
#include <archive_entry.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/banned.h"

#define UNPACK_KEY_TAG "nimfactory unpack v1\n"

/*
 * Skip leading "./" and "/"-free checks: 0 and *rel = the name without
 * leading "./", or NF_EINPUT for an absolute name or one with "..".
 */
static int check_name(const char **rel, const char *name, const char *archive, uint64_t index)
{
	const char *p;

	if (!name || !*name)
		return nf_error_set(NF_EINPUT, "%s: entry %llu has no name", archive,
				    (unsigned long long)index);
	if (name[0] == '/')
		return nf_error_set(NF_EINPUT, "%s: entry %llu '%s' is an absolute path; refused",
				    archive, (unsigned long long)index, name);
	while (name[0] == '.' && name[1] == '/')
		name += 2;
	for (p = name; *p;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return nf_error_set(NF_EINPUT, "%s: entry %llu '%s' contains '..'; refused",
					    archive, (unsigned long long)index, name);
		p += n;
		if (*p == '/')
			p++;
	}
	*rel = name;
	return 0;
}

/* A symlink at rel pointing to target must not leave the tree. */
static int check_symlink(const char *rel, const char *target, const char *archive,
			 uint64_t index)
{
	long depth = 0;
	const char *p;

	if (!target || !*target || target[0] == '/')
		goto bad;
	/* Depth of the folder holding the link. */
	for (p = rel; *p; p++)
		if (*p == '/' && p[1] != '\0' && p[1] != '/')
			depth++;
	for (p = target; *p;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (--depth < 0)
				goto bad;
		} else if (n > 0 && !(n == 1 && p[0] == '.')) {
			depth++;
		}
		p += n;
		if (*p == '/')
			p++;
	}
	return 0;
bad:
	return nf_error_set(NF_EINPUT, "%s: entry %llu '%s' links to '%s' outside the archive; refused",
			    archive, (unsigned long long)index, rel, target ? target : "");
}

static int arc_err(struct archive *a, const char *archive, const char *what)
{
	const char *m = archive_error_string(a);
	return nf_error_set(NF_EINPUT, "%s: %s: %s", archive, what, m ? m : "libarchive error");
}

static int extract(const char *root, const char *archive, const nf_fetch_opts *o)
{
	struct archive *a = NULL, *ext = NULL;
	struct archive_entry *e;
	char *full = NULL, *link = NULL;
	const void *buf;
	size_t len;
	int64_t off;
	uint64_t entries = 0, bytes = 0, archive_size = 0;
	int err = 0, r;

	(void)nf_fs_file_size(&archive_size, archive);
	a = archive_read_new();
	ext = archive_write_disk_new();
	if (!a || !ext) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	archive_read_support_format_zip(a);
	archive_write_disk_set_options(ext, ARCHIVE_EXTRACT_SECURE_NODOTDOT |
						    ARCHIVE_EXTRACT_SECURE_SYMLINKS);
	if (archive_read_open_filename(a, archive, 64 * 1024) != ARCHIVE_OK) {
		err = arc_err(a, archive, "cannot read as an archive");
		goto done;
	}
	for (;;) {
		const char *rel = NULL;
		unsigned type;

		r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			err = arc_err(a, archive, "bad entry header");
			goto done;
		}
		if (++entries > o->max_unpack_entries) {
			err = nf_error_set(NF_EINPUT, "%s: more than %llu entries; refused", archive,
					   (unsigned long long)o->max_unpack_entries);
			goto done;
		}
		if ((err = check_name(&rel, archive_entry_pathname(e), archive, entries)) < 0)
			goto done;
		type = archive_entry_filetype(e);
		if (archive_entry_hardlink(e)) {
			const char *target = NULL;
			if ((err = check_name(&target, archive_entry_hardlink(e), archive, entries)) < 0)
				goto done;
			free(link);
			link = nf_path_join(root, target);
			if (!link) {
				err = nf_error_set(NF_ENOMEM, "out of memory");
				goto done;
			}
			archive_entry_copy_hardlink(e, link);
		} else if (type == AE_IFLNK) {
			if ((err = check_symlink(rel, archive_entry_symlink(e), archive, entries)) < 0)
				goto done;
		} else if (type != AE_IFREG && type != AE_IFDIR) {
			err = nf_error_set(NF_EINPUT, "%s: entry %llu '%s' is not a file, folder or link; refused",
					   archive, (unsigned long long)entries, rel);
			goto done;
		}
		if (!*rel || (rel[0] == '.' && rel[1] == '\0'))
			continue; /* the root folder itself */
		free(full);
		full = nf_path_join(root, rel);
		if (!full) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
		archive_entry_copy_pathname(e, full);
		if (archive_write_header(ext, e) < ARCHIVE_WARN) {
			err = arc_err(ext, archive, rel);
			goto done;
		}
		while ((r = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK) {
			if (!nf_u64_add(&bytes, bytes, len) || bytes > o->max_unpack_bytes) {
				err = nf_error_set(NF_EINPUT, "%s: unpacks to more than %llu bytes; refused",
						   archive, (unsigned long long)o->max_unpack_bytes);
				goto done;
			}
			if (archive_write_data_block(ext, buf, len, off) < ARCHIVE_WARN) {
				err = arc_err(ext, archive, rel);
				goto done;
			}
		}
		if (r != ARCHIVE_EOF) {
			err = arc_err(a, archive, rel);
			goto done;
		}
		if (archive_write_finish_entry(ext) < ARCHIVE_WARN) {
			err = arc_err(ext, archive, rel);
			goto done;
		}
		if (o->progress) {
			int64_t done_bytes = archive_filter_bytes(a, -1);
			o->progress(o->progress_user, done_bytes > 0 ? (uint64_t)done_bytes : 0,
				    archive_size);
		}
	}
	if (entries == 0) {
		err = nf_error_set(NF_EINPUT, "%s: the archive is empty", archive);
		goto done;
	}
	if (archive_write_close(ext) != ARCHIVE_OK) {
		err = arc_err(ext, archive, "finishing");
		goto done;
	}
done:
	free(full);
	free(link);
	if (a)
		archive_read_free(a);
	if (ext)
		archive_write_free(ext);
	return err;
}

int nf_fetch_extract(const char *root, const char *archive_path, const nf_fetch_opts *o)
{
	nf_fetch_opts defaults;
	if (!o) {
		nf_fetch_opts_init(&defaults);
		o = &defaults;
	}
	return extract(root, archive_path, o);
}

int nf_fetch_unpack(char **out_dir, nf_cache *c, const char *archive_path,
		    const char *archive_hex, const nf_fetch_opts *o)
{
	nf_fetch_opts defaults;
	char key[NF_SHA256_HEX_LEN + 1];
	char tagged[sizeof(UNPACK_KEY_TAG) + NF_SHA256_HEX_LEN];
	char *root = NULL;
	nf_cache_stage *st = NULL;
	int err = 0;

	*out_dir = NULL;
	if (!o) {
		nf_fetch_opts_init(&defaults);
		o = &defaults;
	}
	if (!archive_hex || !nf_sha256_is_hex(archive_hex))
		return nf_error_set(NF_EINPUT, "%s: archive digest is not 64 lowercase hex digits",
				    archive_path);
	snprintf(tagged, sizeof(tagged), "%s%s", UNPACK_KEY_TAG, archive_hex);
	if ((err = nf_sha256_hex(key, tagged, strlen(tagged))) < 0)
		return err;
	err = nf_cache_stage_lookup(out_dir, c, key);
	if (err != NF_ENOTFOUND)
		return err;
	nf_error_clear();
	if ((err = nf_cache_stage_begin(&st, c, key)) < 0)
		goto done;
	/* The real path, so that no folder above the entries is a symlink. */
	root = realpath(nf_cache_stage_dir(st), NULL);
	if (!root) {
		err = nf_error_set(NF_EIO, "%s: realpath failed", nf_cache_stage_dir(st));
		goto done;
	}
	if ((err = extract(root, archive_path, o)) < 0)
		goto done;
	err = nf_cache_stage_commit(out_dir, st);
	st = NULL;
done:
	nf_cache_stage_abort(st);
	free(root);
	return err;
}
