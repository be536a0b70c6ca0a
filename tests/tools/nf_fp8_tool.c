/*
 * nf_fp8_tool - the fp8 e4m3 conversions of engine/quant_fp8.c and the
 * kernels' round_f8, as a filter, for tests/e2e/fp8_ref.sh to hold against
 * ml_dtypes' float8_e4m3fn:
 *
 *   nf_fp8_tool encode          float32s on stdin -> one e4m3 code byte each
 *   nf_fp8_tool round [FAMILY]  float32s on stdin -> the nearest e4m3 value of
 *                               each as float32, by FAMILY's round_f8 (a CPU
 *                               kernel family, default scalar)
 *   nf_fp8_tool decode          the float32 values of the 256 codes, in order
 *
 * Floats are in host order (little-endian on the x86 hosts this runs on).
 * Exit 0, 2 on bad arguments or an input that is not whole floats, 4 when
 * the family does not run here or a write fails.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "engine/cpu/cpu.h"
#include "engine/quant.h"
#include "util/banned.h"

#define CHUNK 4096 /* floats per read */

static int usage(void)
{
	fprintf(stderr, "usage: nf_fp8_tool encode | round [FAMILY] | decode\n");
	return 2;
}

static int decode_all(void)
{
	float v[256];
	for (int c = 0; c < 256; c++)
		v[c] = nf_fp8_e4m3_to_f32((uint8_t)c);
	return fwrite(v, sizeof v[0], 256, stdout) == 256 ? 0 : 4;
}

/* Read stdin in chunks of floats; encode or round each chunk to stdout. */
static int filter(const nf_backend_ops *round_family)
{
	static float in[CHUNK], out[CHUNK];
	static uint8_t codes[CHUNK];
	size_t got;
	while ((got = fread(in, 1, sizeof in, stdin)) > 0) {
		if (got % sizeof(float)) {
			fprintf(stderr, "nf_fp8_tool: input is not whole float32s\n");
			return 2;
		}
		size_t n = got / sizeof(float), wrote;
		if (round_family) {
			round_family->round_f8(out, in, 1.0f, (int)n);
			wrote = fwrite(out, sizeof(float), n, stdout);
		} else {
			for (size_t i = 0; i < n; i++)
				codes[i] = nf_fp8_e4m3_from_f32(in[i]);
			wrote = fwrite(codes, 1, n, stdout);
		}
		if (wrote != n)
			return 4;
	}
	return ferror(stdin) ? 4 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "decode") == 0)
		return decode_all();
	if (argc == 2 && strcmp(argv[1], "encode") == 0)
		return filter(NULL);
	if ((argc == 2 || argc == 3) && strcmp(argv[1], "round") == 0) {
		const char *name = argc == 3 ? argv[2] : "scalar";
		const nf_backend_ops *f = nf_cpu_find(name);
		if (!f) {
			fprintf(stderr, "nf_fp8_tool: kernel family %s does not run here\n", name);
			return 4;
		}
		return filter(f);
	}
	return usage();
}
