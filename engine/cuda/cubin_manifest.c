/*
 * cubin_manifest.c - adding a part to a built engine folder: the file
 * itself and its line in config.json's "files" (sha256 and bytes), so that
 * nf_engine_verify and the image's layers see it like the weights.  The
 * cuda/ part (cubin.c) and the modelled report of a GPU profile go in so.
 */
#include "engine/cuda/cubin.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/banned.h"

#define CONFIG_MAX_BYTES (16u << 20)
#define PART_NAME_MAX 128

static int plain_name_ok(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && n < PART_NAME_MAX && s[0] != '.' && !strchr(s, '/');
}

int nf_engine_part_name_ok(const char *name)
{
	if (!name)
		return 0;
	if (strncmp(name, "cuda/", 5) == 0)
		return plain_name_ok(name + 5);
	return plain_name_ok(name);
}

/* config.json with "files"[name] set and, when key, root[key] = value
 * (value stolen), written back atomically in the builder's layout. */
static int update_config(const char *dir, const char *name, json_t *entry, const char *key,
			 json_t *value)
{
	char *path = nf_path_join(dir, "config.json"), *text = NULL, *out = NULL;
	json_t *root = NULL, *files;
	json_error_t je;
	size_t len;
	int err;

	if (!path) {
		err = nf_error_set(NF_ENOMEM, "engine: out of memory");
		goto done;
	}
	if ((err = nf_fs_read_file(&text, &len, path, CONFIG_MAX_BYTES)))
		goto done;
	root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	files = json_object_get(root, "files");
	if (!json_is_object(files)) {
		err = nf_error_set(NF_EINPUT, "%s: no \"files\" object (%s)", path,
				   root ? "not an engine" : je.text);
		goto done;
	}
	if ((entry && json_object_set(files, name, entry)) ||
	    (key && json_object_set(root, key, value)) ||
	    !(out = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)))) {
		err = nf_error_set(NF_ENOMEM, "engine: out of memory");
		goto done;
	}
	free(text);
	text = nf_strdup_printf("%s\n", out);
	err = text ? nf_fs_write_atomic(path, text, strlen(text), 0644)
		   : nf_error_set(NF_ENOMEM, "engine: out of memory");
done:
	json_decref(value);
	json_decref(root);
	free(out);
	free(text);
	free(path);
	return err;
}

int nf_engine_part_add(const char *dir, const char *name, const void *data, size_t len)
{
	char hex[NF_SHA256_HEX_LEN + 1], *path = NULL, *sub = NULL;
	json_t *entry = NULL;
	int err;

	if (!nf_engine_part_name_ok(name))
		return nf_error_set(NF_EINPUT, "engine: '%s' is no name for an engine file", name);
	if (strncmp(name, "cuda/", 5) == 0 && (!(sub = nf_path_join(dir, "cuda")) ||
					      (err = nf_fs_mkdir_p(sub, 0755)))) {
		err = sub ? err : nf_error_set(NF_ENOMEM, "engine: out of memory");
		goto done;
	}
	if (!(path = nf_path_join(dir, name))) {
		err = nf_error_set(NF_ENOMEM, "engine: out of memory");
		goto done;
	}
	if ((err = nf_fs_write_atomic(path, data, len, 0644)) || (err = nf_sha256_hex(hex, data, len)))
		goto done;
	entry = json_pack("{s:s, s:I}", "sha256", hex, "bytes", (json_int_t)len);
	err = entry ? update_config(dir, name, entry, NULL, NULL)
		    : nf_error_set(NF_ENOMEM, "engine: out of memory");
done:
	json_decref(entry);
	free(path);
	free(sub);
	return err ? nf_error_wrap(err, "engine %s: adding %s", dir, name) : 0;
}

int nf_engine_config_set(const char *dir, const char *key, json_t *value)
{
	if (!value)
		return nf_error_set(NF_ENOMEM, "engine: out of memory");
	return update_config(dir, NULL, NULL, key, value);
}
