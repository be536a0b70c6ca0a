/* test_sku.c - the device table: lookups, suggestions, precision support. */
#include <string.h>

#include "engine/engine.h"
#include "engine/sku.h"
#include "tests/tap.h"

int main(void)
{
	const nf_sku *s;
	const char *must[] = {"cpu", "t4", "a10g", "a100-sxm-40gb", "a100-sxm-80gb", "l4",
			      "l40s", "h100-pcie", "h100-sxm", "h200", "b200"};

	for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++) {
		s = nf_sku_find(must[i]);
		ok(s && strcmp(s->name, must[i]) == 0, "table has %s", must[i]);
	}
	ok(nf_sku_find("H100-SXM") == NULL, "names are case-sensitive");
	ok(nf_sku_find(NULL) == NULL, "NULL name finds nothing");
	ok(nf_sku_find("") == NULL, "empty name finds nothing");

	s = nf_sku_find("cpu");
	ok(s && s->kind == NF_SKU_CPU && strcmp(s->cuda_arch, "") == 0 && s->sm == 0,
	   "cpu: kind cpu, no CUDA arch");
	int all = 1;
	for (int p = 0; p < NF_PREC_COUNT; p++)
		all &= nf_sku_supports(s, (nf_precision)p);
	ok(all, "cpu serves every precision (fp8 emulated)");
	int agree = 1;
	for (int p = 0; p < NF_PREC_COUNT; p++)
		agree &= nf_sku_supports(s, (nf_precision)p) ==
			 !!nf_precision_cpu_supported((nf_precision)p);
	ok(agree, "cpu entry agrees with nf_precision_cpu_supported");

	s = nf_sku_find("t4");
	ok(s && s->kind == NF_SKU_GPU && strcmp(s->cuda_arch, "sm_75") == 0 && s->memory_gib == 16,
	   "t4: sm_75, 16 GiB");
	ok(nf_sku_supports(s, NF_PREC_INT4_AWQ) && nf_sku_supports(s, NF_PREC_FP16), "t4 int4-awq, fp16");
	ok(!nf_sku_supports(s, NF_PREC_BF16) && !nf_sku_supports(s, NF_PREC_FP8_E4M3), "t4: no bf16, no fp8");
	s = nf_sku_find("a100-sxm-80gb");
	ok(s && strcmp(s->cuda_arch, "sm_80") == 0 && s->memory_gib == 80, "a100-sxm-80gb: sm_80, 80 GiB");
	ok(nf_sku_supports(s, NF_PREC_BF16) && !nf_sku_supports(s, NF_PREC_FP8_E4M3), "a100: bf16, no fp8");
	s = nf_sku_find("a10g");
	ok(s && strcmp(s->cuda_arch, "sm_86") == 0 && !nf_sku_supports(s, NF_PREC_FP8_E4M3), "a10g: sm_86, no fp8");
	s = nf_sku_find("l4");
	ok(s && strcmp(s->cuda_arch, "sm_89") == 0 && nf_sku_supports(s, NF_PREC_FP8_E4M3), "l4: sm_89 has fp8");
	s = nf_sku_find("h200");
	ok(s && strcmp(s->cuda_arch, "sm_90") == 0 && s->memory_gib == 141, "h200: sm_90, 141 GiB");
	s = nf_sku_find("b200");
	ok(s && strcmp(s->cuda_arch, "sm_100") == 0 && s->sm == 100, "b200: sm_100");

	/* Every GPU: the rules by architecture, and sane numbers. */
	int rules_ok = 1;
	for (size_t i = 0; i < nf_sku_count(); i++) {
		s = nf_sku_at(i);
		if (s->kind != NF_SKU_GPU)
			continue;
		rules_ok &= nf_sku_supports(s, NF_PREC_BF16) == (s->sm >= 80);
		rules_ok &= nf_sku_supports(s, NF_PREC_FP8_E4M3) == (s->sm >= 89);
		rules_ok &= nf_sku_supports(s, NF_PREC_INT4_AWQ) == (s->sm >= 75);
		rules_ok &= nf_sku_supports(s, NF_PREC_FP32) && s->memory_gib > 0 && s->mem_bw_gbs > 0;
		char arch[16];
		snprintf(arch, sizeof(arch), "sm_%d", s->sm);
		rules_ok &= strcmp(arch, s->cuda_arch) == 0;
	}
	ok(rules_ok, "every GPU follows the bf16 sm_80 / fp8 sm_89 / int4 sm_75 rules");
	/* Every GPU's architecture has its per-SM limits (the CUDA static checks). */
	int limits_ok = 1;
	for (size_t i = 0; i < nf_sku_count(); i++) {
		s = nf_sku_at(i);
		const nf_sku_arch *a = s->kind == NF_SKU_GPU ? nf_sku_arch_of(s->sm) : NULL;
		if (s->kind == NF_SKU_GPU)
			limits_ok &= a && a->regs_per_sm == 65536 && a->max_threads_per_sm >= 1024 &&
				     a->smem_per_block <= a->smem_per_sm;
	}
	ok(limits_ok, "every GPU's architecture has its per-SM limits");
	ok(nf_sku_arch_of(120) && nf_sku_arch_of(120)->max_threads_per_sm == 1536 && !nf_sku_arch_of(70),
	   "sm_120 (no SKU yet) has limits, sm_70 (not built) none");
	ok(nf_sku_at(nf_sku_count()) == NULL, "nf_sku_at past the end is NULL");
	ok(nf_sku_count() >= 11, "at least 11 entries");
	int unique = 1;
	for (size_t i = 0; i < nf_sku_count(); i++)
		for (size_t j = i + 1; j < nf_sku_count(); j++)
			unique &= strcmp(nf_sku_at(i)->name, nf_sku_at(j)->name) != 0;
	ok(unique, "names are unique");

	/* suggestions */
	s = nf_sku_suggest("h100");
	is_str(s ? s->name : NULL, "h100-pcie", "h100 -> h100-pcie (prefix)");
	s = nf_sku_suggest("h100sxm");
	is_str(s ? s->name : NULL, "h100-sxm", "h100sxm -> h100-sxm");
	s = nf_sku_suggest("cpy");
	is_str(s ? s->name : NULL, "cpu", "cpy -> cpu");
	s = nf_sku_suggest("a01g");
	is_str(s ? s->name : NULL, "a10g", "a01g -> a10g (transposition)");
	ok(nf_sku_suggest("quantum-computer-9000") == NULL, "nothing close: NULL");
	ok(nf_sku_suggest("") == NULL && nf_sku_suggest(NULL) == NULL, "empty: NULL");

	/* distance */
	is_int(nf_sku_edit_distance("precison", "precisions", 2), 2, "precison/precisions = 2");
	is_int(nf_sku_edit_distance("abc", "acb", 2), 1, "transposition = 1");
	is_int(nf_sku_edit_distance("abc", "abc", 2), 0, "equal = 0");
	is_int(nf_sku_edit_distance("", "abc", 2), 3, "far is capped at cap+1");
	is_int(nf_sku_edit_distance("kitten", "sitting", 5), 3, "kitten/sitting = 3");
	return done_testing();
}
