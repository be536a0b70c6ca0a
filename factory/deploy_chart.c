/*
 * deploy_chart.c - the nimserve chart on disk (see deploy.h): finding the one
 * shipped with nimfactory, reading its Chart.yaml, and writing a copy with a
 * build's version and values.
 */
#define _GNU_SOURCE
#include "factory/deploy.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "factory/yaml_tree.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* A chart's files are templates of a few kB; these bound what is copied. */
#define CHART_FILE_MAX ((size_t)1 << 20)
#define CHART_DEPTH_MAX 4

/* Folders above the binary searched for templates/: build/bin, build/san/bin. */
#define FIND_LEVELS 4

static int chart_at(const char *dir)
{
	char *chart = nf_path_join(dir, "Chart.yaml");
	int ok = chart && nf_fs_exists(chart);
	free(chart);
	return ok;
}

int nf_deploy_chart_find(char **dir)
{
	const char *env = getenv("NIMFACTORY_CHART");
	char exe[PATH_MAX];
	ssize_t n;

	*dir = NULL;
	if (env && *env) {
		if (!chart_at(env))
			return nf_error_set(NF_ENOTFOUND, "NIMFACTORY_CHART=%s: no Chart.yaml there", env);
		return (*dir = strdup(env)) ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
	}
	if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) <= 0)
		return nf_error_set(NF_ENOTFOUND, "no chart: cannot locate the running binary");
	exe[n] = '\0';
	for (int level = 0; level < FIND_LEVELS; level++) {
		char *slash = strrchr(exe, '/');
		if (!slash || slash == exe)
			break;
		*slash = '\0';
		char *cand = nf_strdup_printf("%s/templates/helm/%s", exe, NF_DEPLOY_CHART_NAME);
		if (!cand)
			return nf_error_set(NF_ENOMEM, "out of memory");
		if (chart_at(cand))
			return (*dir = cand), 0;
		free(cand);
	}
	return nf_error_set(NF_ENOTFOUND, "no chart templates/helm/%s above the nimfactory binary "
			    "(set NIMFACTORY_CHART)", NF_DEPLOY_CHART_NAME);
}

/* ---- Chart.yaml as JSON ---- */

/* A chart name becomes a folder in the package and a version an OCI tag:
 * [a-z0-9] then [a-z0-9._-] for names, [0-9A-Za-z._-] for versions. */
static int check_chart_word(const char *s, int is_name, const char *path)
{
	size_t n = strlen(s);
	int ok = n > 0 && n <= 128 && isalnum((unsigned char)s[0]);
	for (size_t i = 0; ok && i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		ok = (is_name ? (islower(c) || isdigit(c)) : isalnum(c)) || c == '.' || c == '_' || c == '-';
	}
	if (!ok)
		return nf_error_set(NF_EINPUT, "%s: %s '%.40s' is not usable", path,
				    is_name ? "name" : "version", s);
	return 0;
}

static json_t *ynode_json(const nf_ynode *n)
{
	json_t *j;
	switch (n->type) {
	case NF_YNODE_SCALAR: return json_stringn(n->str, n->len);
	case NF_YNODE_SEQ:
		if (!(j = json_array()))
			return NULL;
		for (size_t i = 0; i < n->n; i++)
			if (json_array_append_new(j, ynode_json(n->kids[i]))) {
				json_decref(j);
				return NULL;
			}
		return j;
	default:
		if (!(j = json_object()))
			return NULL;
		for (size_t i = 0; i + 1 < n->n; i += 2)
			if (n->kids[i]->type != NF_YNODE_SCALAR ||
			    json_object_set_new(j, n->kids[i]->str, ynode_json(n->kids[i + 1]))) {
				json_decref(j);
				return NULL;
			}
		return j;
	}
}

int nf_deploy_chart_meta(json_t **out, const char *dir)
{
	static const nf_yaml_limits lim = {.max_bytes = 64 << 10, .max_depth = 8,
					   .max_nodes = 4096, .max_scalar = 4096};
	char *path = nf_path_join(dir, "Chart.yaml"), *text = NULL;
	nf_ynode *root = NULL;
	size_t len;
	int err = path ? nf_fs_read_file(&text, &len, path, lim.max_bytes)
		       : nf_error_set(NF_ENOMEM, "out of memory");

	*out = NULL;
	if (!err)
		err = nf_yaml_parse(&root, path, text, len, &lim);
	if (!err && (!root || root->type != NF_YNODE_MAP))
		err = nf_error_set(NF_EINPUT, "%s: not a mapping", path);
	if (!err && !(*out = ynode_json(root)))
		err = nf_error_set(NF_EINPUT, "%s: keys must be strings", path);
	if (!err && (!json_is_string(json_object_get(*out, "name")) ||
		     !json_is_string(json_object_get(*out, "version"))))
		err = nf_error_set(NF_EINPUT, "%s: no name or version", path);
	if (!err)
		err = check_chart_word(json_string_value(json_object_get(*out, "name")), 1, path);
	if (!err)
		err = check_chart_word(json_string_value(json_object_get(*out, "version")), 0, path);
	if (err) {
		json_decref(*out);
		*out = NULL;
	}
	nf_yaml_free(root);
	free(text);
	free(path);
	return err;
}

/* ---- the version ---- */

/* A dot-separated run of [0-9A-Za-z-] identifiers (a pre-release), none
 * empty, numeric ones without leading zeros.  Where it ends, or NULL when an
 * identifier is not one. */
static const char *prerelease_end(const char *s)
{
	for (;;) {
		const char *start = s;
		int digits = 1;
		while (isalnum((unsigned char)*s) || *s == '-') {
			digits &= isdigit((unsigned char)*s) != 0;
			s++;
		}
		if (s == start || (digits && *start == '0' && s - start > 1))
			return NULL;
		if (*s != '.')
			return s;
		s++;
	}
}

static const char *number_end(const char *s)
{
	const char *start = s;
	while (isdigit((unsigned char)*s))
		s++;
	return s == start || (*start == '0' && s - start > 1) ? start : s;
}

const char *nf_deploy_chart_version(const char *tag)
{
	const char *s = tag;
	for (int i = 0; i < 3; i++) {
		const char *e = number_end(s);
		if (e == s || (i < 2 && *e != '.'))
			return "0.1.0";
		s = i < 2 ? e + 1 : e;
	}
	if (*s == '-')
		s = prerelease_end(s + 1);
	return s && !*s ? tag : "0.1.0";
}

/* ---- writing a copy ---- */

/* Copy a chart folder's files (not Chart.yaml or values.yaml at the top):
 * copies, not hard links, so editing the output never edits the source. */
static int copy_files(const char *src, const char *dst, int depth);

typedef struct copy_ctx {
	const char *dst;
	int depth;
} copy_ctx;

static int copy_child(void *user, const char *path, const char *name)
{
	copy_ctx *c = user;
	char *to = nf_path_join(c->dst, name), *data = NULL;
	size_t len;
	int err = to ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
	if (!err && c->depth == 0 && (!strcmp(name, "Chart.yaml") || !strcmp(name, "values.yaml")))
		goto done;
	if (!err && nf_fs_is_dir(path))
		err = copy_files(path, to, c->depth + 1);
	else if (!err && !(err = nf_fs_read_file(&data, &len, path, CHART_FILE_MAX)))
		err = nf_fs_write_atomic(to, data, len, 0644);
done:
	free(data);
	free(to);
	return err;
}

static int copy_files(const char *src, const char *dst, int depth)
{
	copy_ctx c = {dst, depth};
	if (depth > CHART_DEPTH_MAX)
		return nf_error_set(NF_EINPUT, "%s: chart folders nested too deep", src);
	int err = nf_fs_mkdir_p(dst, 0755);
	return err ? err : nf_fs_each_child(src, copy_child, &c);
}

static int write_doc(const char *dir, const char *name, const json_t *doc, const char *header)
{
	char *path = nf_path_join(dir, name), *yaml = NULL;
	size_t len;
	int err = path ? nf_deploy_yaml(&yaml, &len, &doc, 1, header)
		       : nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = nf_fs_write_atomic(path, yaml, len, 0644);
	free(yaml);
	free(path);
	return err;
}

int nf_deploy_chart_write(const char *dst, const char *src, const char *name,
			  const char *version, const char *app_version, const json_t *values)
{
	static const char values_header[] =
		"# Values for the image nimfactory built (written by nimfactory build).\n"
		"# Every key is documented in nimfactory's templates/helm/nimserve/values.yaml.\n";
	json_t *meta = NULL;
	int err;

	if (nf_fs_exists(dst))
		return nf_error_set(NF_EINPUT, "%s: exists already", dst);
	if ((err = nf_deploy_chart_meta(&meta, src)))
		return err;
	if (json_object_set_new(meta, "name", json_string(name)) ||
	    json_object_set_new(meta, "version", json_string(version)) ||
	    json_object_set_new(meta, "appVersion", json_string(app_version)))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = copy_files(src, dst, 0);
	if (!err)
		err = write_doc(dst, "Chart.yaml", meta, NULL);
	if (!err)
		err = write_doc(dst, "values.yaml", values, values_header);
	json_decref(meta);
	return err;
}
