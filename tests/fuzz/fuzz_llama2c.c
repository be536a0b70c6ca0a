/*
 * fuzz_llama2c.c - libFuzzer target: the llama2.c checkpoint loader on any
 * bytes.  The loader takes a path, so the input goes into a memfd reached
 * through /proc/self/fd (no disk writes per run).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	nf_model *m = NULL;

	if (fd < 0) {
		fd = memfd_create("fuzz_llama2c", 0);
		if (fd < 0)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		abort();
	if (nf_ckpt_load(&m, path, NF_CKPT_LLAMA2C) == 0) {
		/* a loaded model is consistent: its size is what the header says */
		uint64_t need = 0;
		if (nf_ckpt_llama2c_size(&need, &m->cfg) != 0 || need != size)
			abort();
		volatile float s = m->w.rms_final[m->cfg.dim - 1] + m->w.wcls[0];
		(void)s;
	}
	nf_model_free(m);
	return 0;
}
