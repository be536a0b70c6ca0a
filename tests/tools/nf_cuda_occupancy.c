/*
 * nf_cuda_occupancy - the static checks of the CUDA kernels: reads the
 * `ptxas -v` logs the Makefile keeps beside each architecture's cubin
 * (build/cuda/<arch>/ptxas.log), and prints for every kernel of
 * engine/cuda/launch.h's NF_CU_KERNELS and architecture its registers,
 * spilled bytes, shared memory and the occupancy that follows from its block
 * size and the architecture's per-SM limits (engine/sku.c), as the Markdown
 * tables of docs/cuda-kernels.md.  Exit 1 (each reason on stderr) when a
 * kernel spills or has a stack frame, needs more shared memory or registers
 * than its architecture allows, is missing from a cubin it belongs in, or is
 * in one it does not (fp8 below sm_89).
 *
 *   nf_cuda_occupancy LOG...
 *   nf_cuda_occupancy --names SM    the kernels a cubin of sm SM must hold
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/launch.h"
#include "engine/sku.h"
#include "util/banned.h"

typedef struct kernel_spec {
	const char *name;
	int block, min_sm;
} kernel_spec;

#define SPEC(name, block, sm) {#name, block, sm},
static const kernel_spec specs[] = {NF_CU_KERNELS(SPEC)};
#undef SPEC
#define N_SPECS (sizeof(specs) / sizeof(specs[0]))

/* What ptxas said of one kernel. */
typedef struct kernel_res {
	int seen;
	int regs, stack, spill_st, spill_ld, smem;
} kernel_res;

typedef struct arch_log {
	char arch[16]; /* "sm_90a" */
	int sm;        /* 90 */
	kernel_res res[N_SPECS];
} arch_log;

static int spec_index(const char *name)
{
	for (size_t i = 0; i < N_SPECS; i++)
		if (!strcmp(specs[i].name, name))
			return (int)i;
	return -1;
}

/* One line of the log into the kernel it is about (*cur). */
static void read_line(arch_log *a, int *cur, const char *line)
{
	char name[128], arch[16];
	int x, y, z;
	const char *p;
	if (sscanf(line, "ptxas info : Compiling entry function '%127[^']' for '%15[^']'", name,
		   arch) == 2) {
		*cur = spec_index(name);
		snprintf(a->arch, sizeof a->arch, "%s", arch);
		if (sscanf(arch, "sm_%d", &a->sm) != 1)
			a->sm = 0;
		if (*cur < 0)
			fprintf(stderr, "%s: kernel %s is not in NF_CU_KERNELS\n", arch, name);
		else
			a->res[*cur].seen = 1;
		return;
	}
	if (*cur < 0)
		return;
	kernel_res *r = &a->res[*cur];
	if (sscanf(line, " %d bytes stack frame, %d bytes spill stores, %d bytes spill loads", &x, &y,
		   &z) == 3) {
		r->stack = x, r->spill_st = y, r->spill_ld = z;
	} else if ((p = strstr(line, "Used ")) && sscanf(p, "Used %d registers", &x) == 1) {
		r->regs = x;
		if ((p = strstr(line, " bytes smem")))
			while (p > line && p[-1] != ' ' && p[-1] != ',')
				p--;
		if (!p || sscanf(p, "%d", &r->smem) != 1)
			r->smem = 0;
	}
}

static int read_log(arch_log *a, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512];
	int cur = -1;
	if (!f) {
		fprintf(stderr, "%s: cannot open\n", path);
		return -1;
	}
	memset(a, 0, sizeof *a);
	/* ptxas pads "info" with spaces before the colon: squeeze them */
	while (fgets(line, sizeof line, f)) {
		char *c = strstr(line, "info    :");
		if (c)
			memmove(c + 5, c + 8, strlen(c + 8) + 1);
		read_line(a, &cur, line);
	}
	fclose(f);
	return a->sm ? 0 : (fprintf(stderr, "%s: no kernel in the log\n", path), -1);
}

/* Resident blocks per SM: the least that registers, shared memory, threads
 * and the block count allow (registers allocated per warp in units of 256). */
static int blocks_per_sm(const nf_sku_arch *l, const kernel_spec *s, const kernel_res *r)
{
	int warps = (s->block + NF_CU_WARP - 1) / NF_CU_WARP;
	int regs_warp = (r->regs * NF_CU_WARP + 255) / 256 * 256;
	int b = l->max_blocks_per_sm, t = l->max_threads_per_sm / s->block;
	if (t < b)
		b = t;
	if (regs_warp > 0 && l->regs_per_sm / regs_warp / warps < b)
		b = l->regs_per_sm / regs_warp / warps;
	if (r->smem > 0 && l->smem_per_sm / (r->smem + l->smem_reserved) < b)
		b = l->smem_per_sm / (r->smem + l->smem_reserved);
	return b;
}

/* Print arch a's table; returns the number of failed checks. */
static int print_arch(const arch_log *a)
{
	const nf_sku_arch *l = nf_sku_arch_of(a->sm);
	int bad = 0;
	if (!l) {
		fprintf(stderr, "%s: no per-SM limits in engine/sku.c\n", a->arch);
		return 1;
	}
	printf("\n### %s\n\n", a->arch);
	printf("| kernel | block | registers | spill (st/ld) | stack | shared | blocks/SM | occupancy |\n");
	printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
	for (size_t i = 0; i < N_SPECS; i++) {
		const kernel_spec *s = &specs[i];
		const kernel_res *r = &a->res[i];
		int want = a->sm >= s->min_sm;
		if (r->seen != want) {
			fprintf(stderr, "%s: %s is %s\n", a->arch, s->name,
				want ? "missing" : "present below its lowest sm");
			bad++;
		}
		if (!r->seen)
			continue;
		if (r->spill_st || r->spill_ld || r->stack) {
			fprintf(stderr, "%s: %s spills (%d/%d bytes, stack %d)\n", a->arch, s->name,
				r->spill_st, r->spill_ld, r->stack);
			bad++;
		}
		if (r->smem + l->smem_reserved > l->smem_per_block || r->regs * s->block > l->regs_per_sm) {
			fprintf(stderr, "%s: %s exceeds the SM's limits\n", a->arch, s->name);
			bad++;
		}
		int b = blocks_per_sm(l, s, r);
		int pct = b * s->block * 100 / l->max_threads_per_sm;
		printf("| %s | %d | %d | %d/%d | %d | %d | %d | %d%% |\n", s->name, s->block, r->regs,
		       r->spill_st, r->spill_ld, r->stack, r->smem, b, pct);
	}
	return bad;
}

int main(int argc, char **argv)
{
	int bad = 0;
	if (argc == 3 && !strcmp(argv[1], "--names")) {
		int sm = 0;
		if (sscanf(argv[2], "%d", &sm) != 1)
			return 2;
		for (size_t i = 0; i < N_SPECS; i++)
			if (sm >= specs[i].min_sm)
				printf("%s\n", specs[i].name);
		return 0;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: nf_cuda_occupancy PTXAS_LOG... | --names SM\n");
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		arch_log *a = calloc(1, sizeof *a);
		if (!a || read_log(a, argv[i]) < 0) {
			free(a);
			return 1;
		}
		bad += print_arch(a);
		free(a);
	}
	return bad ? 1 : 0;
}
