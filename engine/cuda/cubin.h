/*
 * cubin.h - the optional cuda/ part of an engine folder: the cubin of the
 * kernels for its SKU's architecture (cuda/<arch>.cubin) and their PTX
 * (cuda/kernels.ptx, which a newer GPU's driver compiles), each listed with
 * its sha256 and size in config.json's "files" like every other file, and
 * config.json's "cuda": {"arch", "cubin", "ptx"} naming them.  At run time
 * the cubin is read back, its digest checked, and loaded with
 * cuModuleLoadData through the driver table (driver.h): no toolkit needed.
 */
#ifndef NF_ENGINE_CUDA_CUBIN_H
#define NF_ENGINE_CUDA_CUBIN_H

#include <jansson.h>
#include <stddef.h>

#include "engine/cuda/driver.h"

/* Whether `name` may be an entry of config.json's "files": a plain file name,
 * or "cuda/" and a plain file name (no other folder, no dot file). */
int nf_engine_part_name_ok(const char *name);

/* Write data as the engine part `name` of the engine folder dir (atomically,
 * creating cuda/ when the name is in it) and list it in config.json's
 * "files" with its sha256 and bytes (config.json rewritten atomically). */
int nf_engine_part_add(const char *dir, const char *name, const void *data, size_t len);

/* Set config.json's top-level `key` to value (stolen, also on error), the
 * file rewritten atomically. */
int nf_engine_config_set(const char *dir, const char *key, json_t *value);

/* Check that data is a cubin for arch ("sm_90"; "sm_90a" reads as sm_90): a
 * 64-bit CUDA ELF (EM_CUDA) whose e_flags name that SM.  NF_EINPUT with one
 * line naming `what` otherwise. */
int nf_cubin_check(const void *data, size_t len, const char *arch, const char *what);

/* Store the cuda/ part in the engine folder dir: the cubin (checked with
 * nf_cubin_check) as cuda/<arch>.cubin, the PTX (may be NULL) as
 * cuda/kernels.ptx, and config.json's "cuda" object. */
int nf_cubin_store(const char *dir, const char *arch, const void *cubin, size_t cubin_len,
		   const char *ptx, size_t ptx_len);

/* Read the engine's cubin for arch back: its sha256 checked against
 * config.json, and nf_cubin_check.  NF_ENOTFOUND when the engine has no
 * cuda/ part for arch.  Caller owns *out (free()). */
int nf_cubin_read(void **out, size_t *len, const char *dir, const char *arch);

/* nf_cubin_read, then cuModuleLoadData in the current context.  NF_EENV,
 * "cubin rejected: ...", when the driver refuses it.  Caller unloads *out
 * (api->cuModuleUnload). */
int nf_cubin_load(nf_cu_module *out, const nf_cuda_driver *d, const char *dir, const char *arch);

#endif
