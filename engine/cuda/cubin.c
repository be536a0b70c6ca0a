/*
 * cubin.c - the cuda/ part of an engine (see cubin.h): checked on the way
 * in, digest-checked on the way out, loaded through the driver table.
 */
#include "engine/cuda/cubin.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/banned.h"

#define ELF64_HEADER_BYTES 64
#define EM_CUDA 190
#define CUBIN_MAX_BYTES (1u << 30)
#define CONFIG_MAX_BYTES (16u << 20)

/* "sm_90" or "sm_90a" -> 90; -1 when arch is no SM name. */
static int arch_sm(const char *arch)
{
	int sm = 0, digits = 0;
	if (!arch || strncmp(arch, "sm_", 3) != 0)
		return -1;
	for (arch += 3; *arch >= '0' && *arch <= '9' && digits < 3; arch++, digits++)
		sm = sm * 10 + (*arch - '0');
	if (digits < 2 || (*arch && strcmp(arch, "a") != 0 && strcmp(arch, "f") != 0))
		return -1;
	return sm;
}

/* The SM a cubin is for: e_flags' second byte from the CUDA ELF ABI
 * version 8 (CUDA 12.8 and newer), its first byte before. */
static int cubin_sm(const unsigned char *h)
{
	uint32_t flags;
	memcpy(&flags, h + 48, sizeof flags);
	return h[8] >= 8 ? (int)((flags >> 8) & 0xff) : (int)(flags & 0xff);
}

int nf_cubin_check(const void *data, size_t len, const char *arch, const char *what)
{
	const unsigned char *h = data;
	uint16_t machine;
	int want = arch_sm(arch), got;

	if (want < 0)
		return nf_error_set(NF_EINPUT, "%s: '%s' is no CUDA architecture (sm_NN)", what,
				    arch ? arch : "(null)");
	if (len < ELF64_HEADER_BYTES || memcmp(h, "\177ELF", 4) != 0 || h[4] != 2 || h[5] != 1)
		return nf_error_set(NF_EINPUT, "%s: not a 64-bit little-endian ELF file: no cubin", what);
	memcpy(&machine, h + 18, sizeof machine);
	if (machine != EM_CUDA)
		return nf_error_set(NF_EINPUT, "%s: ELF machine %u, not CUDA (%d): no cubin", what,
				    machine, EM_CUDA);
	if ((got = cubin_sm(h)) != want)
		return nf_error_set(NF_EINPUT, "%s: a cubin for sm_%d, not %s", what, got, arch);
	return 0;
}

static char *cubin_name(const char *arch) { return nf_strdup_printf("cuda/%s.cubin", arch); }

int nf_cubin_store(const char *dir, const char *arch, const void *cubin, size_t cubin_len,
		   const char *ptx, size_t ptx_len)
{
	char *name = NULL;
	json_t *cuda;
	int err;

	if ((err = nf_cubin_check(cubin, cubin_len, arch, "cubin")))
		return err;
	if (!(name = cubin_name(arch)))
		return nf_error_set(NF_ENOMEM, "engine: out of memory");
	if ((err = nf_engine_part_add(dir, name, cubin, cubin_len)) ||
	    (ptx && (err = nf_engine_part_add(dir, "cuda/kernels.ptx", ptx, ptx_len))))
		goto done;
	cuda = json_pack("{s:s, s:s, s:s?}", "arch", arch, "cubin", name, "ptx",
			 ptx ? "cuda/kernels.ptx" : NULL);
	err = nf_engine_config_set(dir, "cuda", cuda);
done:
	free(name);
	return err;
}

/* config.json's sha256 for the file `name`, into hex. */
static int listed_digest(char hex[NF_SHA256_HEX_LEN + 1], const char *dir, const char *name)
{
	char *path = nf_path_join(dir, "config.json"), *text = NULL;
	json_t *root = NULL;
	const char *want;
	size_t len;
	int err;

	if (!path)
		return nf_error_set(NF_ENOMEM, "engine: out of memory");
	if (!(err = nf_fs_read_file(&text, &len, path, CONFIG_MAX_BYTES))) {
		root = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
		want = json_string_value(
			json_object_get(json_object_get(json_object_get(root, "files"), name), "sha256"));
		if (!want)
			err = nf_error_set(NF_ENOTFOUND, "%s lists no %s: the engine has no cuda/ part for it",
					   path, name);
		else if (!nf_sha256_is_hex(want))
			err = nf_error_set(NF_EINPUT, "%s: bad sha256 for %s", path, name);
		else
			snprintf(hex, NF_SHA256_HEX_LEN + 1, "%s", want);
	}
	json_decref(root);
	free(text);
	free(path);
	return err;
}

int nf_cubin_read(void **out, size_t *len, const char *dir, const char *arch)
{
	char want[NF_SHA256_HEX_LEN + 1], got[NF_SHA256_HEX_LEN + 1];
	char *name = cubin_name(arch), *path = NULL, *data = NULL;
	int err;

	*out = NULL;
	*len = 0;
	if (!name || !(path = nf_path_join(dir, name))) {
		err = nf_error_set(NF_ENOMEM, "engine: out of memory");
		goto done;
	}
	if ((err = listed_digest(want, dir, name)) ||
	    (err = nf_fs_read_file(&data, len, path, CUBIN_MAX_BYTES)) ||
	    (err = nf_sha256_hex(got, data, *len)))
		goto done;
	if (strcmp(got, want) != 0) {
		err = nf_error_set(NF_EINPUT, "%s: sha256 %s does not match config.json (%s)", path, got,
				   want);
		goto done;
	}
	if ((err = nf_cubin_check(data, *len, arch, path)))
		goto done;
	*out = data;
	data = NULL;
done:
	free(data);
	free(name);
	free(path);
	return err;
}

int nf_cubin_load(nf_cu_module *out, const nf_cuda_driver *d, const char *dir, const char *arch)
{
	void *image = NULL;
	size_t len;
	nf_cu_result rc;
	char text[160];
	int err;

	*out = NULL;
	if ((err = nf_cubin_read(&image, &len, dir, arch)))
		return err;
	if ((rc = nf_cuda_driver_api(d)->cuModuleLoadData(out, image)) != 0) {
		*out = NULL;
		err = nf_error_set(NF_EENV, "%s/cuda/%s.cubin: cubin rejected: %s", dir, arch,
				   nf_cuda_error_text(text, sizeof text, d, rc));
	}
	free(image);
	return err;
}
