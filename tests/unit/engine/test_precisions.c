/*
 * test_precisions.c - every precision of the table (engine/precision.c) built
 * into an engine from stories260K and run against the fp32 engine: the
 * teacher-forced logits within the precision's bound and the top-1 token
 * the same at nearly every position, config.json naming the format, the
 * weights file about the size the format's bits say, every kernel family
 * with a kernel for every weight kind, int4 in each group size (stories'
 * hidden width of 172 pads its last block), and a NaN weight refused with
 * the tensor named in every precision.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/arch.h"
#include "engine/checkpoint.h"
#include "engine/cpu/cpu.h"
#include "engine/engine.h"
#include "engine/gemm.h"
#include "engine/quant.h"
#include "engine/safetensors.h"
#include "engine/wformat.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"

#define POSITIONS 48

static char tokpath[1024];

/* Per precision: the largest mean relative L2 error of the logits against
 * fp32 and the smallest top-1 agreement (teacher-forced) that pass; set
 * from measured values with a margin (the diag lines print them). */
static const struct bound {
	nf_precision p;
	int group;
	double max_rel_l2;
	double min_top1;
} bounds[] = {
	{NF_PREC_FP16, 0, 0.002, 0.97},    {NF_PREC_BF16, 0, 0.02, 0.93},
	{NF_PREC_INT8_WO, 0, 0.06, 0.90},  {NF_PREC_FP8_E4M3, 0, 0.12, 0.85},
	{NF_PREC_INT4_WO, 32, 0.25, 0.75}, {NF_PREC_INT4_WO, 64, 0.30, 0.70},
	{NF_PREC_INT4_WO, 128, 0.35, 0.65}, {NF_PREC_INT4_AWQ, 0, 0.35, 0.65},
};

static int build(const char *dir, const nf_model *m, nf_precision p, int group)
{
	nf_engine_build_opts o = {0};
	o.precision = p;
	o.group = group;
	o.tokenizer_path = tokpath;
	o.threads = 2;
	return nf_engine_build(dir, m, &o);
}

/* The fp32 engine's logits over POSITIONS tokens of its own greedy text
 * (tokens[] out), teacher-forced. */
static int run_forced(nf_engine *e, const int *tokens, float *logits, int vocab)
{
	nf_seq *s = NULL;
	int err = nf_seq_new(&s, e);
	for (int i = 0; !err && i < POSITIONS; i++)
		err = nf_engine_step(e, &s, &tokens[i], &i, 1, logits + (size_t)i * (size_t)vocab);
	nf_seq_free(s);
	return err;
}

static int argmax(const float *x, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

/* The fp32 engine's greedy continuation of BOS, as the forced tokens. */
static int greedy_tokens(nf_engine *e, int *tokens, float *logits, int vocab)
{
	nf_seq *s = NULL;
	int err = nf_seq_new(&s, e);
	tokens[0] = 1;
	for (int i = 0; !err && i < POSITIONS; i++) {
		err = nf_engine_step(e, &s, &tokens[i], &i, 1, logits);
		if (i + 1 < POSITIONS)
			tokens[i + 1] = argmax(logits, vocab);
	}
	nf_seq_free(s);
	return err;
}

static void compare(const char *what, const float *ref, const float *got, int vocab,
		    const struct bound *b)
{
	double err_sum = 0;
	int same = 0;
	for (int i = 0; i < POSITIONS; i++) {
		const float *r = ref + (size_t)i * (size_t)vocab, *g = got + (size_t)i * (size_t)vocab;
		double num = 0, den = 1e-30;
		for (int v = 0; v < vocab; v++) {
			num += ((double)g[v] - r[v]) * ((double)g[v] - r[v]);
			den += (double)r[v] * r[v];
		}
		err_sum += sqrt(num / den);
		same += argmax(r, vocab) == argmax(g, vocab);
	}
	double mean = err_sum / POSITIONS, top1 = (double)same / POSITIONS;
	diag("%s: mean relative L2 error %.5f, top-1 agreement %.3f", what, mean, top1);
	ok(mean <= b->max_rel_l2, "%s: logits within %.3f of fp32 (%.5f)", what, b->max_rel_l2, mean);
	ok(top1 >= b->min_top1, "%s: top-1 agrees with fp32 at >= %.2f of positions (%.3f)", what,
	   b->min_top1, top1);
}

/* Every kernel family this CPU runs gives the logits of the best one.  The
 * GEMMs of a kind agree to the bit or to the last bits of a float sum, but
 * the scalar family's exp and silu are libm's where the SIMD ones have
 * their own (about an ulp apart): with int8 activations such an ulp can
 * move a value to the next of 255 levels, and the logits drift by a few
 * percent, hence the looser bound for those kinds. */
static void same_in_every_family(nf_engine *e, const char *what, const int *tokens,
				 const float *best, int vocab, nf_act_form act)
{
	double bound = act == NF_ACT_Q8 ? 0.05 : 1e-3;
	const nf_backend_ops *const *fam = nf_cpu_families();
	size_t n = (size_t)POSITIONS * (size_t)vocab;
	float *got = malloc(n * sizeof(float));
	for (size_t i = 0; fam[i]; i++) {
		if (!fam[i]->available() || nf_engine_set_kernel(e, fam[i]->name) != 0)
			continue;
		double worst = 0, scale = 1e-30;
		int err = run_forced(e, tokens, got, vocab);
		for (size_t k = 0; !err && k < n; k++) {
			worst = fmax(worst, fabs((double)got[k] - best[k]));
			scale = fmax(scale, fabs((double)best[k]));
		}
		ok(!err && worst / scale <= bound, "%s: the %s kernels give the same logits (%.2g)",
		   what, fam[i]->name, worst / scale);
	}
	nf_engine_set_kernel(e, nf_cpu_best()->name);
	free(got);
}

static uint64_t file_size(const char *dir, const char *name)
{
	char path[1200];
	uint64_t n = 0;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return nf_fs_file_size(&n, path) == 0 ? n : 0;
}

static void check_config(const char *dir, const char *what, const nf_precision_info *info)
{
	char path[1200], want[96], *text = NULL;
	size_t len;
	snprintf(path, sizeof path, "%s/config.json", dir);
	snprintf(want, sizeof want, "\"weights\": \"%s\"", nf_wformat_of(info->weights)->name);
	ok(nf_fs_read_file(&text, &len, path, 1 << 20) == 0 && strstr(text, want),
	   "%s: config.json says %s", what, want);
	free(text);
}

static void test_precision(const char *root, const nf_model *m, const struct bound *b,
			   const int *tokens, const float *ref, uint64_t fp32_bytes)
{
	const nf_precision_info *info = nf_precision_info_of(b->p);
	int vocab = m->cfg.vocab_size;
	char dir[1100], what[64];
	nf_engine *e = NULL;
	float *got = malloc((size_t)POSITIONS * (size_t)vocab * sizeof(float));
	snprintf(what, sizeof what, "%s%s%d", info->name, b->group ? " group " : "",
		 b->group ? b->group : 0);
	if (!b->group)
		what[strlen(info->name)] = '\0';
	snprintf(dir, sizeof dir, "%s/%s-%d", root, info->name, b->group);
	if (build(dir, m, b->p, b->group) != 0) {
		ok(0, "%s: build: %s", what, nf_error_last());
		free(got);
		return;
	}
	ok(nf_engine_open(&e, dir, 2) == 0, "%s: opens: %s", what, nf_error_last());
	if (e && run_forced(e, tokens, got, vocab) == 0) {
		compare(what, ref, got, vocab, b);
		same_in_every_family(e, what, tokens, got, vocab, nf_wformat_of(info->weights)->act);
	} else {
		ok(0, "%s: runs: %s", what, nf_error_last());
	}
	check_config(dir, what, info);
	/* the matrices dominate stories' weights: their bits set the size */
	double ratio = (double)file_size(dir, "weights.safetensors") / (double)fp32_bytes;
	double want = nf_wformat_of(info->weights)->bits / 32.0;
	ok(ratio < want * 1.35 + 0.02 && ratio > want * 0.9,
	   "%s: weights are %.3f of fp32's (the format's bits say %.3f)", what, ratio, want);
	nf_engine_free(e);
	free(got);
}

static void test_nan_refused(const char *root, nf_model *m)
{
	float *w = m->w.w2 + 5; /* layer 0, row 0, column 5 */
	float keep = *w;
	*w = NAN;
	for (int p = 0; p < NF_PREC_COUNT; p++) {
		char dir[1100];
		snprintf(dir, sizeof dir, "%s/nan-%d", root, p);
		int err = build(dir, m, (nf_precision)p, 0);
		ok(err == NF_EINPUT && strstr(nf_error_last(), "w2") && strstr(nf_error_last(), "NaN"),
		   "%s: a NaN weight is refused naming the tensor (%s)", nf_precision_name((nf_precision)p),
		   nf_error_last());
		char cfg[1200];
		snprintf(cfg, sizeof cfg, "%s/config.json", dir);
		ok(!nf_fs_exists(cfg), "%s: no engine is left behind", nf_precision_name((nf_precision)p));
	}
	*w = keep;
}

/* Tensor `name` of the engine file st, dequantized row by row, equals the
 * model's floats bit for bit. */
static void check_lossless(const nf_st_file *st, const nf_model *m, const char *name)
{
	char gname[64];
	snprintf(gname, sizeof gname, "%s.gsm", name);
	const nf_st_tensor *q = nf_st_find(st, name), *g = nf_st_find(st, gname);
	const nf_arch *a = nf_arch_get(m->cfg.arch);
	const nf_arch_tensor *t = NULL;
	for (size_t i = 0; i < a->n_tensors; i++)
		if (!strcmp(a->tensors[i].name, name))
			t = &a->tensors[i];
	if (!q || !g || !t || q->ndim != 3) {
		ok(0, "%s: int4 tensors in the engine", name);
		return;
	}
	size_t rows = (size_t)(q->shape[0] * q->shape[1]);
	size_t cols = (size_t)nf_arch_dim_value(t->cols, &m->cfg);
	const float *w = *nf_model_slot((nf_model *)m, t->id);
	float *row = malloc(cols * sizeof(float));
	size_t differ = 0;
	for (size_t r = 0; r < rows; r++) {
		nf_quant_int4_dequant_row(row, q->data, g->data, r, cols, 32);
		differ += memcmp(row, w + r * cols, cols * sizeof(float)) != 0;
	}
	ok(differ == 0, "%s: all %zu rows equal the GGUF's blocks dequantized (%zu differ)", name,
	   rows, differ);
	free(row);
}

/* SmolLM2's GGUF holds its matrices as Q4_1: an int4-wo engine of group 32
 * takes them over, so every weight of its file dequantizes to the float the
 * loader made of the same block, bit for bit (the Q8_0 embedding is
 * quantized like any float tensor). */
static void test_gguf_lossless(const char *shared, const char *root)
{
	char gguf[1100], dir[1100], path[1200];
	nf_model *m = NULL;
	nf_st_file *st = NULL;
	snprintf(gguf, sizeof gguf, "%s/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf",
		 shared);
	if (!nf_fs_exists(gguf) || nf_ckpt_load(&m, gguf, NF_CKPT_GGUF) != 0) {
		skip("SmolLM2's GGUF not found");
		return;
	}
	snprintf(dir, sizeof dir, "%s/smollm2-int4", root);
	nf_engine_build_opts o = {.precision = NF_PREC_INT4_WO, .group = 32, .threads = 2};
	nf_tokenizer *tok = NULL;
	ok(nf_ckpt_load_tokenizer(&tok, gguf, NF_CKPT_GGUF, NULL, m->cfg.vocab_size) == 0,
	   "SmolLM2's tokenizer: %s", nf_error_last());
	o.tokenizer = tok;
	ok(nf_engine_build(dir, m, &o) == 0, "SmolLM2 int4-wo engine: %s", nf_error_last());
	snprintf(path, sizeof path, "%s/weights.safetensors", dir);
	if (nf_st_open(&st, path) == 0) {
		const char *names[] = {"wq", "wk", "wv", "wo", "w1", "w2", "w3"};
		for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
			check_lossless(st, m, names[i]);
	} else {
		ok(0, "open the engine's weights: %s", nf_error_last());
	}
	nf_st_close(st);
	nf_tokenizer_free(tok);
	nf_model_free(m);
}

static void test_families_complete(void)
{
	const nf_backend_ops *const *fam = nf_cpu_families();
	for (size_t i = 0; fam[i]; i++)
		for (int k = 0; k < NF_QUANT_KIND_COUNT; k++)
			ok(nf_bk_has_kernel(fam[i], (nf_quant_kind)k), "family %s has a kernel for %s",
			   fam[i]->name, nf_wformat_of((nf_quant_kind)k)->name);
}

int main(void)
{
	const char *shared = tap_env("NF_SHARED", "../shared");
	const char *build_dir = tap_env("NF_BUILD", "build");
	char mpath[1024], root[1024], d32[1100];
	nf_model *m = NULL;
	nf_engine *e = NULL;
	snprintf(mpath, sizeof mpath, "%s/models/stories260K/stories260K.bin", shared);
	snprintf(tokpath, sizeof tokpath, "%s/models/stories260K/tok512.bin", shared);
	snprintf(root, sizeof root, "%s/tmp/test_precisions.%d", build_dir, (int)getpid());
	snprintf(d32, sizeof d32, "%s/fp32", root);

	test_families_complete();
	if (nf_ckpt_load(&m, mpath, NF_CKPT_LLAMA2C) != 0) {
		skip("stories260K not found (%s)", nf_error_last());
		return done_testing();
	}
	int vocab = m->cfg.vocab_size, tokens[POSITIONS];
	float *ref = malloc((size_t)POSITIONS * (size_t)vocab * sizeof(float));
	is_int(build(d32, m, NF_PREC_FP32, 0), 0, "fp32 engine: %s", nf_error_last());
	if (nf_engine_open(&e, d32, 2) == 0 && greedy_tokens(e, tokens, ref, vocab) == 0 &&
	    run_forced(e, tokens, ref, vocab) == 0) {
		uint64_t fp32_bytes = file_size(d32, "weights.safetensors");
		for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++)
			test_precision(root, m, &bounds[i], tokens, ref, fp32_bytes);
	} else {
		ok(0, "fp32 engine runs: %s", nf_error_last());
	}
	nf_engine_free(e);
	test_nan_refused(root, m);
	test_gguf_lossless(shared, root);
	free(ref);
	nf_model_free(m);
	nf_fs_remove_tree(root);
	return done_testing();
}
