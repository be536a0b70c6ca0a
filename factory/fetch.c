/*
 * fetch.c - nf_fetch_source: dispatch on the source kind, options, url
 * rewriting (NIMFACTORY_URL_MIRROR), path sources and subpaths.  The
 * download itself is in fetch_url.c, git in fetch_git.c, archives in unpack.c.
 */
#define _GNU_SOURCE
#include "factory/fetch.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/banned.h"

#define MAX_MIRROR_RULES 64

void nf_fetch_opts_init(nf_fetch_opts *o)
{
	const char *off = getenv("NIMFACTORY_OFFLINE");

	memset(o, 0, sizeof(*o));
	o->offline = off && *off && strcmp(off, "0") != 0;
	o->mirrors = getenv("NIMFACTORY_URL_MIRROR");
	o->max_bytes = 256ull << 30;
	o->retries = 4;
	o->backoff_ms = 1000;
	o->max_backoff_ms = 30000;
	o->connect_timeout_s = 15;
	o->low_speed_bytes = 1024;
	o->low_speed_time_s = 60;
	o->max_redirects = 10;
	o->max_unpack_bytes = 256ull << 30;
	o->max_unpack_entries = 1000000;
}

int nf_fetch_rewrite_url(char **out, const char *url, const char *mirrors)
{
	const char *p = mirrors, *best_to = NULL;
	size_t best_len = 0, best_to_len = 0;
	int rules = 0;

	*out = NULL;
	while (p && *p) {
		const char *tok, *eq;
		size_t len;

		while (*p && isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		tok = p;
		while (*p && !isspace((unsigned char)*p))
			p++;
		len = (size_t)(p - tok);
		eq = memchr(tok, '=', len);
		if (!eq || eq == tok)
			return nf_error_set(NF_EINPUT,
					    "NIMFACTORY_URL_MIRROR: rule %d '%.*s' is not PREFIX=REPLACEMENT",
					    rules + 1, (int)(len > 200 ? 200 : len), tok);
		if (++rules > MAX_MIRROR_RULES)
			return nf_error_set(NF_EINPUT, "NIMFACTORY_URL_MIRROR: more than %d rules",
					    MAX_MIRROR_RULES);
		/* The longest matching prefix wins, as with git's insteadOf. */
		if ((size_t)(eq - tok) > best_len && strncmp(url, tok, (size_t)(eq - tok)) == 0) {
			best_len = (size_t)(eq - tok);
			best_to = eq + 1;
			best_to_len = len - best_len - 1;
		}
	}
	if (best_to)
		*out = nf_strdup_printf("%.*s%s", (int)best_to_len, best_to, url + best_len);
	else
		*out = strdup(url);
	return *out ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
}

/* A subpath must stay inside its tree: relative, no "..", no empty name. */
static int check_subpath(const char *sub)
{
	const char *p = sub;

	if (!*sub || sub[0] == '/')
		return nf_error_set(NF_EINPUT, "subpath '%s' must be a relative path", sub);
	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return nf_error_set(NF_EINPUT, "subpath '%s' must not contain '..'", sub);
		p += n;
		if (*p == '/')
			p++;
	}
	return 0;
}

/* *out = dir/sub (or dir when sub is NULL or empty), which must exist. */
static int join_subpath(char **out, char *dir, const char *sub)
{
	char *joined;

	*out = NULL;
	if (!sub || !*sub) {
		*out = dir;
		return 0;
	}
	joined = nf_path_join(dir, sub);
	free(dir);
	if (!joined)
		return nf_error_set(NF_ENOMEM, "out of memory");
	if (!nf_fs_exists(joined)) {
		int err = nf_error_set(NF_ENOTFOUND, "subpath '%s' does not exist (%s)", sub,
				       joined);
		free(joined);
		return err;
	}
	*out = joined;
	return 0;
}

static int fetch_path(char **out, nf_cache *c, const nf_source_spec *s, const nf_fetch_opts *o)
{
	char hex[NF_SHA256_HEX_LEN + 1];
	char *dir = NULL;
	struct stat st;
	int err = 0;

	*out = NULL;
	if (!s->path || !*s->path)
		return nf_error_set(NF_EINPUT, "path source without a path");
	if (stat(s->path, &st) < 0)
		return nf_error_set(errno == ENOENT ? NF_ENOTFOUND : NF_EINPUT, "source %s: %s",
				    s->path, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		if (s->archive)
			return nf_error_set(NF_EINPUT, "source %s: is a folder, not an archive",
					    s->path);
		/* A folder's digest is not checked (sha256 is over a file's bytes). */
		dir = strdup(s->path);
		if (!dir)
			return nf_error_set(NF_ENOMEM, "out of memory");
		return join_subpath(out, dir, s->subpath);
	}
	if (!S_ISREG(st.st_mode))
		return nf_error_set(NF_EINPUT, "source %s: not a file or folder", s->path);
	if (s->sha256 || s->archive) {
		if ((err = nf_sha256_file_hex(hex, s->path)) < 0)
			return nf_error_wrap(err, "source %s", s->path);
		if (s->sha256 && strcmp(hex, s->sha256) != 0)
			return nf_error_set(NF_EINPUT, "source %s: sha256 mismatch: expected %s, got %s",
					    s->path, s->sha256, hex);
	}
	if (!s->archive) {
		if (s->subpath && *s->subpath)
			return nf_error_set(NF_EINPUT, "source %s: subpath needs a folder or an archive",
					    s->path);
		*out = strdup(s->path);
		return *out ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
	}
	if ((err = nf_fetch_unpack(&dir, c, s->path, hex, o)) < 0)
		return err;
	return join_subpath(out, dir, s->subpath);
}

static int fetch_url_source(char **out, nf_cache *c, const nf_source_spec *s,
			    const nf_fetch_opts *o)
{
	char *blob = NULL, *dir = NULL;
	int err = 0;
	uint64_t size = 0;

	*out = NULL;
	if (!s->url || !*s->url)
		return nf_error_set(NF_EINPUT, "url source without a url");
	if (!s->sha256)
		return nf_error_set(NF_EINPUT, "source %s: a url source needs a sha256 pin", s->url);
	if (!nf_sha256_is_hex(s->sha256))
		return nf_error_set(NF_EINPUT, "source %s: sha256 '%s' is not 64 lowercase hex digits",
				    s->url, s->sha256);
	if (!s->archive && s->subpath && *s->subpath)
		return nf_error_set(NF_EINPUT, "source %s: subpath needs an archive", s->url);
	err = nf_cache_blob_lookup(&blob, c, s->sha256);
	if (err == NF_ENOTFOUND) {
		nf_error_clear();
		err = nf_fetch_url(&blob, c, s->url, s->sha256, o);
	} else if (!err && o->progress && nf_fs_file_size(&size, blob) == 0) {
		o->progress(o->progress_user, size, size);
	}
	if (err)
		goto done;
	if (!s->archive) {
		*out = blob;
		blob = NULL;
		goto done;
	}
	if ((err = nf_fetch_unpack(&dir, c, blob, s->sha256, o)) < 0)
		goto done;
	err = join_subpath(out, dir, s->subpath);
done:
	free(blob);
	return err;
}

int nf_fetch_source(char **out_path, nf_cache *c, const nf_source_spec *spec,
		    const nf_fetch_opts *o)
{
	nf_fetch_opts defaults;
	char *dir = NULL;
	int err;

	*out_path = NULL;
	if (!o) {
		nf_fetch_opts_init(&defaults);
		o = &defaults;
	}
	if (spec->subpath && *spec->subpath && (err = check_subpath(spec->subpath)) < 0)
		return err;
	switch (spec->kind) {
	case NF_FETCH_PATH:
		return fetch_path(out_path, c, spec, o);
	case NF_FETCH_URL:
		return fetch_url_source(out_path, c, spec, o);
	case NF_FETCH_GIT:
		if (spec->archive)
			return nf_error_set(NF_EINPUT, "source %s: a git source is not an archive",
					    spec->url ? spec->url : "");
		if (!spec->url || !*spec->url)
			return nf_error_set(NF_EINPUT, "git source without a url");
		if ((err = nf_fetch_git(&dir, c, spec->url, spec->commit, o)) < 0)
			return err;
		return join_subpath(out_path, dir, spec->subpath);
	}
	return nf_error_set(NF_EINPUT, "unknown source kind %d", (int)spec->kind);
}
