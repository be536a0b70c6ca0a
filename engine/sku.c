/*
 * sku.c - the device table (see sku.h).  Precision support follows the
 * hardware: int4 kernels need sm_75+, bf16 needs sm_80+, fp8 (e4m3)
 * needs sm_89+.  The CPU entry lists exactly what the CPU backend serves:
 * every precision (fp8 emulated: the rounding of a GPU's, float32 sums).
 */
#include "engine/sku.h"

#include <string.h>

#include "util/banned.h"

#define P(x) NF_SKU_PREC_BIT(NF_PREC_##x)
#define CPU_PRECS (P(FP32) | P(FP16) | P(BF16) | P(INT8_WO) | P(INT4_WO) | P(INT4_AWQ) | P(FP8_E4M3))
#define SM75_PRECS (P(FP32) | P(FP16) | P(INT8_WO) | P(INT4_WO) | P(INT4_AWQ))
#define SM80_PRECS (SM75_PRECS | P(BF16))
#define SM89_PRECS (SM80_PRECS | P(FP8_E4M3))

/*
 * The last five numbers of a row (SMs, fp32, bf16, int8, fp8 peaks) are the
 * dense figures of NVIDIA's datasheets: T4 (8.1 fp32, int8 130), A10G (AWS
 * G5: 31.2, 70, 140), A100 (19.5, 312, 624), L4 (30.3, 121, 242, 242), L40S
 * (91.6, 362, 733, 733), H100 PCIe (51, 756, 1513, 1513), H100 SXM and H200
 * (67, 989, 1979, 1979), B200 (80, 2250, 4500, 4500); the SM counts of the
 * architecture whitepapers (T4 40, A10G 80, A100 108, L4 58, L40S 142, H100
 * PCIe 114, H100 SXM and H200 132, B200 148).  Datasheets quote the
 * sparse figures as the headline: these are half of those.
 */
static const nf_sku table[] = {
	{"cpu", NF_SKU_CPU, "", 0, 0, 0, 0, CPU_PRECS, "host CPU", 0, 0, 0, 0, 0},
	{"t4", NF_SKU_GPU, "sm_75", 75, 16, 320, 65, SM75_PRECS, "NVIDIA T4 16GB", 40, 8, 0, 130, 0},
	{"a10g", NF_SKU_GPU, "sm_86", 86, 24, 600, 70, SM80_PRECS, "NVIDIA A10G 24GB",
	 80, 31, 70, 140, 0},
	{"a100-sxm-40gb", NF_SKU_GPU, "sm_80", 80, 40, 1555, 312, SM80_PRECS,
	 "NVIDIA A100 SXM4 40GB", 108, 19, 312, 624, 0},
	{"a100-sxm-80gb", NF_SKU_GPU, "sm_80", 80, 80, 2039, 312, SM80_PRECS,
	 "NVIDIA A100 SXM4 80GB", 108, 19, 312, 624, 0},
	{"l4", NF_SKU_GPU, "sm_89", 89, 24, 300, 121, SM89_PRECS, "NVIDIA L4 24GB",
	 58, 30, 121, 242, 242},
	{"l40s", NF_SKU_GPU, "sm_89", 89, 48, 864, 362, SM89_PRECS, "NVIDIA L40S 48GB",
	 142, 91, 362, 733, 733},
	{"h100-pcie", NF_SKU_GPU, "sm_90", 90, 80, 2000, 756, SM89_PRECS, "NVIDIA H100 PCIe 80GB",
	 114, 51, 756, 1513, 1513},
	{"h100-sxm", NF_SKU_GPU, "sm_90", 90, 80, 3350, 989, SM89_PRECS, "NVIDIA H100 SXM5 80GB",
	 132, 67, 989, 1979, 1979},
	{"h200", NF_SKU_GPU, "sm_90", 90, 141, 4800, 989, SM89_PRECS, "NVIDIA H200 SXM 141GB",
	 132, 67, 989, 1979, 1979},
	{"b200", NF_SKU_GPU, "sm_100", 100, 180, 8000, 2250, SM89_PRECS, "NVIDIA B200 180GB",
	 148, 80, 2250, 4500, 4500},
};

#define N_SKUS (sizeof(table) / sizeof(table[0]))

const nf_sku *nf_sku_find(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < N_SKUS; i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	return NULL;
}

size_t nf_sku_count(void) { return N_SKUS; }

const nf_sku *nf_sku_at(size_t i) { return i < N_SKUS ? &table[i] : NULL; }

int nf_sku_supports(const nf_sku *sku, nf_precision p)
{
	if (!sku || (int)p < 0 || p >= NF_PREC_COUNT)
		return 0;
	return (sku->precisions & NF_SKU_PREC_BIT(p)) != 0;
}

double nf_sku_peak_flops(const nf_sku *sku, nf_precision p)
{
	if (!nf_sku_supports(sku, p) || sku->kind != NF_SKU_GPU)
		return 0;
	switch (p) {
	case NF_PREC_FP32: return sku->fp32_tflops * 1e12;
	case NF_PREC_BF16: return sku->bf16_tflops * 1e12;
	case NF_PREC_FP8_E4M3: return sku->fp8_tflops * 1e12;
	default: return sku->fp16_tflops * 1e12; /* fp16, and the weight-only ints dequantised to it */
	}
}

#define DIST_MAX_LEN 64

int nf_sku_edit_distance(const char *a, const char *b, int cap)
{
	/* Three rows of the optimal-string-alignment table, bounded by DIST_MAX_LEN. */
	int rows[3][DIST_MAX_LEN + 1];
	size_t la = strlen(a), lb = strlen(b);
	int *prev2 = rows[0], *prev = rows[1], *cur = rows[2];

	if (la > DIST_MAX_LEN || lb > DIST_MAX_LEN)
		return cap + 1;
	if ((la > lb ? la - lb : lb - la) > (size_t)cap)
		return cap + 1;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		int best = cur[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int cost = a[i - 1] == b[j - 1] ? 0 : 1;
			int v = prev[j] + 1;
			if (cur[j - 1] + 1 < v)
				v = cur[j - 1] + 1;
			if (prev[j - 1] + cost < v)
				v = prev[j - 1] + cost;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    prev2[j - 2] + 1 < v)
				v = prev2[j - 2] + 1;
			cur[j] = v;
			if (v < best)
				best = v;
		}
		if (best > cap)
			return cap + 1;
		int *t = prev2;
		prev2 = prev;
		prev = cur;
		cur = t;
	}
	return prev[lb] > cap ? cap + 1 : prev[lb];
}

const nf_sku *nf_sku_suggest(const char *name)
{
	const nf_sku *best = NULL;
	int best_d = 4;
	size_t n;

	if (!name || !*name)
		return NULL;
	n = strlen(name);
	/* "h100" -> "h100-pcie": a name the input begins is the likeliest meaning. */
	for (size_t i = 0; i < N_SKUS; i++)
		if (strncmp(table[i].name, name, n) == 0)
			return &table[i];
	for (size_t i = 0; i < N_SKUS; i++) {
		int d = nf_sku_edit_distance(name, table[i].name, 3);
		if (d < best_d) {
			best_d = d;
			best = &table[i];
		}
	}
	return best;
}

/* CUDA C++ Programming Guide, "Compute Capabilities", the table of technical
 * specifications per compute capability. */
static const nf_sku_arch arch_table[] = {
	/* sm, regs, threads, blocks, smem/SM, smem/block, reserved */
	{75, 65536, 1024, 16, 64 * 1024, 64 * 1024, 0},
	{80, 65536, 2048, 32, 164 * 1024, 163 * 1024, 1024},
	{86, 65536, 1536, 16, 100 * 1024, 99 * 1024, 1024},
	{89, 65536, 1536, 24, 100 * 1024, 99 * 1024, 1024},
	{90, 65536, 2048, 32, 228 * 1024, 227 * 1024, 1024},
	{100, 65536, 2048, 32, 228 * 1024, 227 * 1024, 1024},
	{120, 65536, 1536, 32, 100 * 1024, 99 * 1024, 1024},
};

const nf_sku_arch *nf_sku_arch_of(int sm)
{
	for (size_t i = 0; i < sizeof(arch_table) / sizeof(arch_table[0]); i++)
		if (arch_table[i].sm == sm)
			return &arch_table[i];
	return NULL;
}
