/*
 * fake_cuda.h - what the tests of the CUDA paths share: a cubin the loader
 * accepts, a stories260K engine holding one, and reading the fake driver's
 * call log (tests/fakes/libcuda.c writes a line per call to
 * $FAKE_CUDA_LOG).  Header-only: each test includes it once.
 */
#ifndef NF_TESTS_FAKE_CUDA_H
#define NF_TESTS_FAKE_CUDA_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/checkpoint.h"
#include "engine/cuda/backend.h"
#include "engine/cuda/driver.h"
#include "engine/cuda/cubin.h"
#include "engine/engine.h"
#include "tests/tap.h"
#include "util/fs.h"

/* An ELF header of an sm_<sm> cubin (EM_CUDA, the arch in e_flags), the
 * rest filler: what nf_cubin_* and the driver loader check. */
static inline void fake_cubin(unsigned char *buf, size_t len, int sm)
{
	uint32_t flags = 0x6000004u | (uint32_t)sm << 8;
	uint16_t machine = 190;
	memset(buf, 0x5c, len);
	memcpy(buf, "\177ELF", 4);
	buf[4] = 2, buf[5] = 1, buf[6] = 1, buf[7] = 0x41, buf[8] = 8;
	memcpy(buf + 18, &machine, 2);
	memcpy(buf + 48, &flags, 4);
}

/* stories260K's engine in precision p into dir, with a fake sm_90 cubin:
 * what a GPU profile's engine holds, for the fake driver to load; its
 * config.json's profile is profile_json (NULL: none). */
static inline int fake_sm90_engine(const char *dir, nf_precision p, const char *profile_json)
{
	const char *shared = tap_env("NF_SHARED", "../shared");
	char mpath[1024], tok[1024];
	unsigned char cubin[256];
	nf_engine_build_opts o = {0};
	nf_model *m = NULL;
	int err;

	fake_cubin(cubin, sizeof cubin, 90);
	snprintf(mpath, sizeof mpath, "%s/models/stories260K/stories260K.bin", shared);
	snprintf(tok, sizeof tok, "%s/models/stories260K/tok512.bin", shared);
	o.precision = p;
	o.tokenizer_path = tok;
	o.threads = 1;
	o.profile_json = profile_json;
	err = nf_ckpt_load(&m, mpath, NF_CKPT_LLAMA2C);
	if (!err)
		err = nf_engine_build(dir, m, &o);
	if (!err)
		err = nf_cubin_store(dir, "sm_90", cubin, sizeof cubin, NULL, 0);
	nf_model_free(m);
	return err;
}

/* The engine at dir (fake_sm90_engine's) opened, the fake driver loaded
 * and a backend made on it: sm_90, 2 sequences, prefills of 4 tokens, an
 * f16 KV cache.  The caller frees what is set, also on failure. */
static inline int fake_sm90_backend(const char *dir, nf_engine **e, nf_cuda_driver **d,
				    nf_cuda_backend **b)
{
	nf_cuda_backend_opts o = {0};
	int err;
	if ((err = nf_engine_open(e, dir, 1)) || (err = nf_cuda_driver_open(d)))
		return err;
	o.engine_dir = dir;
	o.arch = "sm_90";
	o.max_batch = 2;
	o.max_prefill = 4;
	o.kv = NF_KV_F16;
	return nf_cuda_backend_new(b, *d, nf_engine_config(*e), nf_engine_fwd_weights(*e), &o);
}

/* The log at path so far as one string (caller frees; "" when none); the
 * log emptied. */
static inline char *take_log_at(const char *path)
{
	char *text = NULL;
	size_t len;
	if (nf_fs_read_file(&text, &len, path, 1u << 26) != 0)
		text = calloc(1, 1);
	remove(path);
	return text;
}

/* Lines of log equal to line. */
static inline size_t count_lines(const char *log, const char *line)
{
	size_t n = 0, len = strlen(line);
	for (const char *p = log; (p = strstr(p, line)); p += len)
		if ((p == log || p[-1] == '\n') && (p[len] == '\n' || p[len] == '\0'))
			n++;
	return n;
}

/* Lines of log that start with prefix. */
static inline size_t count_prefix(const char *log, const char *prefix)
{
	size_t n = 0, len = strlen(prefix);
	for (const char *p = log; (p = strstr(p, prefix)); p += len)
		if (p == log || p[-1] == '\n')
			n++;
	return n;
}

#endif
