/*
 * sku.h - the device table: every device a recipe may target (the CPU and
 * the NVIDIA data-centre GPUs), with its CUDA architecture, memory, rough
 * roofline numbers for the cost model, and the precisions it runs natively.
 *
 * The table is static and read-only: every pointer returned here points into
 * it and lives for the whole program (never free it).
 */
#ifndef NF_ENGINE_SKU_H
#define NF_ENGINE_SKU_H

#include <stddef.h>

#include "engine/engine.h"

typedef enum nf_sku_kind {
	NF_SKU_CPU,
	NF_SKU_GPU,
} nf_sku_kind;

/* Bit for precision p in nf_sku.precisions. */
#define NF_SKU_PREC_BIT(p) (1u << (unsigned)(p))

typedef struct nf_sku {
	const char *name;       /* recipe name: "cpu", "t4", "h100-sxm", ... */
	nf_sku_kind kind;
	const char *cuda_arch;  /* "sm_80" etc.; "" for the CPU */
	int sm;                 /* compute capability * 10 (80 for sm_80); 0 for the CPU */
	int memory_gib;         /* device memory; 0 for the CPU (host memory, measured) */
	int mem_bw_gbs;         /* peak memory bandwidth, GB/s; 0 for the CPU (measured) */
	int fp16_tflops;        /* dense fp16 tensor-core peak, TFLOP/s; 0 for the CPU */
	unsigned precisions;    /* NF_SKU_PREC_BIT of every precision it runs natively */
	const char *description;/* human name, e.g. "NVIDIA H100 SXM5 80GB" */
	/* The roofline cost model's (engine/roofline.h): dense peaks, no sparsity;
	 * 0 where the device has no such unit (and for the CPU). */
	int sm_count;           /* streaming multiprocessors */
	int fp32_tflops;        /* CUDA-core float32 peak, TFLOP/s */
	int bf16_tflops;        /* bf16 tensor-core peak, TFLOP/s */
	int int8_tops;          /* int8 tensor-core peak, TOP/s */
	int fp8_tflops;         /* fp8 (e4m3) tensor-core peak, TFLOP/s */
} nf_sku;

/* The per-SM limits of a CUDA architecture, from which a kernel's
 * occupancy follows (its registers, shared memory and block size; the
 * static checks of tests/e2e/cuda_static.sh).  One entry per architecture
 * the kernels are built for, beside the device table: the SKUs' `sm` finds
 * theirs. */
typedef struct nf_sku_arch {
	int sm;                 /* compute capability * 10 */
	int regs_per_sm;        /* 32-bit registers */
	int max_threads_per_sm;
	int max_blocks_per_sm;
	int smem_per_sm;        /* bytes of shared memory the SM's blocks share */
	int smem_per_block;     /* bytes one block may have (the opt-in maximum) */
	int smem_reserved;      /* bytes the system keeps per block */
} nf_sku_arch;

/* The limits of architecture sm (80 for sm_80), or NULL. */
const nf_sku_arch *nf_sku_arch_of(int sm);

/* The entry named `name` (exact, case-sensitive), or NULL. */
const nf_sku *nf_sku_find(const char *name);

/* Number of entries, and entry i (0 <= i < count; NULL when out of range). */
size_t nf_sku_count(void);
const nf_sku *nf_sku_at(size_t i);

/* The entry whose name is nearest to `name` (a name it is a prefix of, else the
 * smallest edit distance, if that is at most 3), or NULL when none is close. */
const nf_sku *nf_sku_suggest(const char *name);

/* The peak, in FLOP/s, of the units that do precision p's multiply-adds on
 * sku: weight-only int8 and int4 dequantise to fp16 and use its tensor
 * cores, fp8 its own, fp32 the CUDA cores.  0 for the CPU or a precision the
 * SKU does not run. */
double nf_sku_peak_flops(const nf_sku *sku, nf_precision p);

/* 1 when sku runs precision p natively, else 0. */
int nf_sku_supports(const nf_sku *sku, nf_precision p);

/* Optimal-string-alignment (Damerau-Levenshtein) distance between a and b,
 * capped: returns at most cap + 1 (anything farther is reported as cap + 1).
 * Strings longer than 64 bytes count as farther than cap. Shared with the
 * recipe parser's "did you mean" hints. */
int nf_sku_edit_distance(const char *a, const char *b, int cap);

#endif
