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

/* One extraction: the archive read, the tree written, and the bounds. */
struct unpack {
	const char *root;    /* the stage folder's real path */
	const char *archive; /* its path, for messages */
	const nf_fetch_opts *o;
	struct archive *a, *ext;
	char *full, *link;   /* the current entry's prefixed name and hard link target */
	uint64_t entries, bytes, archive_size;
};

/* The reader (tar, GNU tar, zip, any filter) open on the archive, and the
 * writer with libarchive's own checks on top of ours. */
static int open_archive(struct unpack *u)
{
	(void)nf_fs_file_size(&u->archive_size, u->archive);
	u->a = archive_read_new();
	u->ext = archive_write_disk_new();
	if (!u->a || !u->ext)
		return nf_error_set(NF_ENOMEM, "out of memory");
	archive_read_support_filter_all(u->a);
	archive_read_support_format_tar(u->a);
	archive_read_support_format_gnutar(u->a);
	archive_read_support_format_zip(u->a);
	archive_write_disk_set_options(u->ext, ARCHIVE_EXTRACT_SECURE_NODOTDOT |
						       ARCHIVE_EXTRACT_SECURE_SYMLINKS);
	if (archive_read_open_filename(u->a, u->archive, 64 * 1024) != ARCHIVE_OK)
		return arc_err(u->a, u->archive, "cannot read as an archive");
	return 0;
}

/* Entry e's names checked (*rel: its name inside the tree) and its hard link
 * target, if any, prefixed with the root; only files, folders and links. */
static int check_entry(struct unpack *u, struct archive_entry *e, const char **rel)
{
	unsigned type = archive_entry_filetype(e);
	int err;
	if (++u->entries > u->o->max_unpack_entries)
		return nf_error_set(NF_EINPUT, "%s: more than %llu entries; refused", u->archive,
				    (unsigned long long)u->o->max_unpack_entries);
	if ((err = check_name(rel, archive_entry_pathname(e), u->archive, u->entries)) < 0)
		return err;
	if (archive_entry_hardlink(e)) {
		const char *target = NULL;
		if ((err = check_name(&target, archive_entry_hardlink(e), u->archive, u->entries)) < 0)
			return err;
		free(u->link);
		if (!(u->link = nf_path_join(u->root, target)))
			return nf_error_set(NF_ENOMEM, "out of memory");
		archive_entry_copy_hardlink(e, u->link);
	} else if (type == AE_IFLNK) {
		return check_symlink(*rel, archive_entry_symlink(e), u->archive, u->entries);
	} else if (type != AE_IFREG && type != AE_IFDIR) {
		return nf_error_set(NF_EINPUT, "%s: entry %llu '%s' is not a file, folder or link; refused",
				    u->archive, (unsigned long long)u->entries, *rel);
	}
	return 0;
}

/* The current entry's data, counted against max_unpack_bytes as it comes
 * (never trusting the size its header claims). */
static int copy_data(struct unpack *u, const char *rel)
{
	const void *buf;
	size_t len;
	int64_t off;
	int r;
	while ((r = archive_read_data_block(u->a, &buf, &len, &off)) == ARCHIVE_OK) {
		if (!nf_u64_add(&u->bytes, u->bytes, len) || u->bytes > u->o->max_unpack_bytes)
			return nf_error_set(NF_EINPUT, "%s: unpacks to more than %llu bytes; refused",
					    u->archive, (unsigned long long)u->o->max_unpack_bytes);
		if (archive_write_data_block(u->ext, buf, len, off) < ARCHIVE_WARN)
			return arc_err(u->ext, u->archive, rel);
	}
	return r == ARCHIVE_EOF ? 0 : arc_err(u->a, u->archive, rel);
}

/* Entry e (checked) written under the root, then the progress reported. */
static int write_entry(struct unpack *u, struct archive_entry *e, const char *rel)
{
	int err;
	free(u->full);
	if (!(u->full = nf_path_join(u->root, rel)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	archive_entry_copy_pathname(e, u->full);
	if (archive_write_header(u->ext, e) < ARCHIVE_WARN)
		return arc_err(u->ext, u->archive, rel);
	if ((err = copy_data(u, rel)) < 0)
		return err;
	if (archive_write_finish_entry(u->ext) < ARCHIVE_WARN)
		return arc_err(u->ext, u->archive, rel);
	if (u->o->progress) {
		int64_t done_bytes = archive_filter_bytes(u->a, -1);
		u->o->progress(u->o->progress_user, done_bytes > 0 ? (uint64_t)done_bytes : 0,
			       u->archive_size);
	}
	return 0;
}

static int extract_entries(struct unpack *u)
{
	struct archive_entry *e;
	int err, r;
	while ((r = archive_read_next_header(u->a, &e)) != ARCHIVE_EOF) {
		const char *rel = NULL;
		if (r < ARCHIVE_WARN)
			return arc_err(u->a, u->archive, "bad entry header");
		if ((err = check_entry(u, e, &rel)) < 0)
			return err;
		if (!*rel || (rel[0] == '.' && rel[1] == '\0'))
			continue; /* the root folder itself */
		if ((err = write_entry(u, e, rel)) < 0)
			return err;
	}
	if (u->entries == 0)
		return nf_error_set(NF_EINPUT, "%s: the archive is empty", u->archive);
	if (archive_write_close(u->ext) != ARCHIVE_OK)
		return arc_err(u->ext, u->archive, "finishing");
	return 0;
}

static int extract(const char *root, const char *archive, const nf_fetch_opts *o)
{
	struct unpack u = {.root = root, .archive = archive, .o = o};
	int err;
	if (!(err = open_archive(&u)))
		err = extract_entries(&u);
	free(u.full);
	free(u.link);
	if (u.a)
		archive_read_free(u.a);
	if (u.ext)
		archive_write_free(u.ext);
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
