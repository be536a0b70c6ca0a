/*
 * test_arch.c - architectures as data (engine/arch.h) on small synthetic
 * models of every architecture: llama (tied, untied, Llama 3 rope scaling,
 * attention biases), mistral (sliding window) and qwen2 (q/k/v biases, tied
 * and untied).  Each: HF write -> load round trip exact; fp32 engine logits
 * within 1e-4 of the float32 reference, int8 within the int8 bounds; the
 * biases and the rope scaling change the logits.  Then: HF (rotate-half)
 * and llama2.c (interleaved) copies agree, biases permuted like their rows;
 * Llama 3 frequencies against the published formula written out here; the
 * GGUF tables; and refusals.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/arch.h"
#include "engine/checkpoint.h"
#include "engine/engine.h"
#include "engine/reference.h"
#include "engine/safetensors.h"
#include "tests/rng.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"

#define POSITIONS 24

static char tokpath[1024], root[1024];

/* The base config: 2 layers, GQA (4 heads, 2 KV heads, head size 16), the
 * 512-token vocabulary of the shared tokenizer. */
static nf_model_config base_cfg(nf_arch_id arch)
{
	nf_model_config c = {0};
	c.arch = arch;
	c.dim = 64;
	c.hidden_dim = 96;
	c.n_layers = 2;
	c.n_heads = 4;
	c.n_kv_heads = 2;
	c.vocab_size = 512;
	c.max_seq_len = 64;
	c.norm_eps = 1e-5f;
	c.rope_theta = 10000.0f;
	c.shared_classifier = true;
	return c;
}

/* Random weights (norms near 1, biases large enough to matter). */
static nf_model *synth(const nf_model_config *c, uint64_t seed)
{
	nf_model *m = NULL;
	size_t n;
	if (nf_model_alloc(&m, c) || nf_model_param_count(&n, c)) {
		diag("synth: %s", nf_error_last());
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		((float *)m->mem)[i] = nf_test_unif(&seed, 0.15);
	const nf_arch *a = nf_arch_get(c->arch);
	for (size_t i = 0; i < a->n_tensors; i++) {
		const nf_arch_tensor *t = &a->tensors[i];
		uint64_t e;
		int norm = t->id == NF_T_RMS_ATT || t->id == NF_T_RMS_FFN || t->id == NF_T_RMS_FINAL;
		float *p = nf_arch_present(t, c) ? *nf_model_slot(m, t->id) : NULL;
		nf_arch_elems(&e, t, c);
		for (uint64_t k = 0; p && k < e; k++)
			p[k] = norm ? 1.0f + nf_test_unif(&seed, 0.1) : t->cols == NF_D_NONE ? nf_test_unif(&seed, 0.5) : p[k];
	}
	return m;
}

/* Field by field: memcmp would compare the struct's padding too. */
static int same_cfg(const nf_model_config *a, const nf_model_config *b)
{
	const nf_rope_scaling *r = &a->rope_scaling, *s = &b->rope_scaling;
	return a->arch == b->arch && a->dim == b->dim && a->hidden_dim == b->hidden_dim &&
	       a->n_layers == b->n_layers && a->n_heads == b->n_heads &&
	       a->n_kv_heads == b->n_kv_heads && a->vocab_size == b->vocab_size &&
	       a->max_seq_len == b->max_seq_len && a->norm_eps == b->norm_eps &&
	       a->rope_theta == b->rope_theta && a->shared_classifier == b->shared_classifier &&
	       a->attention_bias == b->attention_bias && a->sliding_window == b->sliding_window &&
	       r->type == s->type && r->factor == s->factor && r->low_freq_factor == s->low_freq_factor &&
	       r->high_freq_factor == s->high_freq_factor && r->original_max_pos == s->original_max_pos;
}

static int same_model(const nf_model *a, const nf_model *b)
{
	size_t n;
	return same_cfg(&a->cfg, &b->cfg) && !nf_model_param_count(&n, &a->cfg) &&
	       a->mem_len == b->mem_len && memcmp(a->mem, b->mem, n * sizeof(float)) == 0;
}

static double rel_err(const float *a, const float *b, int n)
{
	double num = 0, den = 1e-30;
	for (int i = 0; i < n; i++) {
		num = fmax(num, fabs((double)a[i] - b[i]));
		den = fmax(den, fabs((double)b[i]));
	}
	return num / den;
}

static int tok_at(int p) { return (37 * p + 11) % 512; }

/* The reference's logits of POSITIONS tokens into out (POSITIONS * vocab). */
static int ref_logits(float *out, const nf_model *m)
{
	nf_ref_state *s = NULL;
	int err = nf_ref_state_new(&s, m);
	for (int p = 0; p < POSITIONS && !err; p++) {
		const float *l = nf_ref_forward(s, tok_at(p), p);
		if (!l)
			err = -1;
		else
			memcpy(out + (size_t)p * 512, l, 512 * sizeof(float));
	}
	nf_ref_state_free(s);
	return err;
}

/* Largest difference between two runs' logits, relative to their scale. */
static double run_diff(const float *a, const float *b)
{
	return rel_err(a, b, POSITIONS * 512);
}

/* Build an engine of m at precision p into dir, open it and step the same
 * tokens: worst and mean per-position relative error against ref. */
static int engine_vs(const char *dir, const nf_model *m, nf_precision p, const float *ref,
		     double *worst, double *mean, nf_engine **keep)
{
	nf_engine_build_opts o = {0};
	nf_engine *e = NULL;
	nf_seq *s = NULL;
	float lg[512];
	int err;
	o.precision = p;
	o.tokenizer_path = tokpath;
	o.threads = 1;
	*worst = *mean = 0;
	if ((err = nf_engine_build(dir, m, &o)) || (err = nf_engine_open(&e, dir, 2)) ||
	    (err = nf_seq_new(&s, e)))
		goto done;
	for (int pos = 0; pos < POSITIONS && !err; pos++) {
		int t = tok_at(pos);
		if (!(err = nf_engine_step(e, &s, &t, &pos, 1, lg))) {
			double er = rel_err(lg, ref + (size_t)pos * 512, 512);
			*worst = fmax(*worst, er);
			*mean += er / POSITIONS;
		}
	}
done:
	if (err)
		diag("engine %s: %s", dir, nf_error_last());
	nf_seq_free(s);
	if (keep && !err)
		*keep = e;
	else
		nf_engine_free(e);
	return err;
}

/* A copy of m with tensor ids[] zeroed (or rope scaling off): the logits
 * must move, or the feature was ignored. */
static double effect(const nf_model *m, const float *ref, const int *ids, int n, int rope_off)
{
	nf_model_config c = m->cfg;
	nf_model *z = NULL;
	float *lg = malloc((size_t)POSITIONS * 512 * sizeof(float));
	double d = -1;
	if (rope_off)
		c.rope_scaling.type = NF_ROPE_DEFAULT;
	if (lg && !nf_model_alloc(&z, &c)) {
		memcpy(z->mem, m->mem, m->mem_len);
		for (int i = 0; i < n; i++) {
			const nf_arch_tensor *t = nf_arch_find(nf_arch_get(c.arch), (nf_tensor_id)ids[i]);
			uint64_t e;
			nf_arch_elems(&e, t, &c);
			memset(*nf_model_slot(z, ids[i]), 0, (size_t)e * sizeof(float));
		}
		if (!ref_logits(lg, z))
			d = run_diff(lg, ref);
	}
	nf_model_free(z);
	free(lg);
	return d;
}

typedef struct arch_case {
	const char *what;
	nf_arch_id arch;
	int untied, llama3, attn_bias, window;
} arch_case;

static void rope_llama3(nf_model_config *c)
{
	/* orig 64 with head size 16: kept, smoothed and stretched pairs */
	c->rope_scaling = (nf_rope_scaling){NF_ROPE_LLAMA3, 8.0f, 1.0f, 4.0f, 64};
	c->rope_theta = 500000.0f;
}

static void run_case(const arch_case *k, uint64_t seed)
{
	nf_model_config c = base_cfg(k->arch);
	nf_model *m = NULL, *h = NULL;
	float *ref = malloc((size_t)POSITIONS * 512 * sizeof(float));
	char dir[1200];
	double worst = 1, mean = 1;
	c.shared_classifier = !k->untied;
	c.attention_bias = k->attn_bias;
	if (k->llama3)
		rope_llama3(&c);
	if (k->window)
		c.sliding_window = c.max_seq_len = 48;
	if (!(m = synth(&c, seed)) || !ref || ref_logits(ref, m)) {
		ok(0, "%s: model and reference logits (%s)", k->what, nf_error_last());
		goto done;
	}
	snprintf(dir, sizeof dir, "%s/%s-hf", root, k->what);
	is_int(nf_ckpt_write_hf(dir, m, NF_DTYPE_F32), 0, "%s: HF written", k->what);
	is_int(nf_ckpt_load(&h, dir, NF_CKPT_AUTO), 0, "%s: HF loaded (%s)", k->what, nf_error_last());
	ok(h && same_model(m, h), "%s: HF round trip is exact (config and every weight)", k->what);
	snprintf(dir, sizeof dir, "%s/%s-fp32", root, k->what);
	int err = engine_vs(dir, m, NF_PREC_FP32, ref, &worst, &mean, NULL);
	ok(!err && worst < 1e-4, "%s: fp32 engine within 1e-4 of the reference (%.2e)", k->what, worst);
	snprintf(dir, sizeof dir, "%s/%s-int8", root, k->what);
	err = engine_vs(dir, m, NF_PREC_INT8_WO, ref, &worst, &mean, NULL);
	ok(!err && mean < 0.05, "%s: int8 engine mean logits rel err %.4f < 0.05", k->what, mean);
	if (k->arch == NF_ARCH_QWEN2 || k->attn_bias) {
		static const int qkv[] = {NF_T_BQ, NF_T_BK, NF_T_BV}, o[] = {NF_T_BO};
		double d = effect(m, ref, qkv, 3, 0);
		ok(d > 1e-3, "%s: the q/k/v biases change the logits (%.2e)", k->what, d);
		if (k->attn_bias) {
			d = effect(m, ref, o, 1, 0);
			ok(d > 1e-3, "%s: the o bias changes the logits (%.2e)", k->what, d);
		}
	}
	if (k->llama3) {
		double d = effect(m, ref, NULL, 0, 1);
		ok(d > 1e-3, "%s: Llama 3 rope scaling changes the logits (%.2e)", k->what, d);
	}
done:
	nf_model_free(m);
	nf_model_free(h);
	free(ref);
}

/* Rotate-half RoPE (HF: pairs (i, i + hs/2)) on W_hf x + b_hf equals
 * interleaved RoPE (pairs (2i, 2i+1)) on W x + b, for q (heads) or k. */
static double rope_conventions(const nf_model *m, const nf_st_file *f, const char *w_name,
			       const char *b_name, const float *w, const float *b, int heads)
{
	const nf_st_tensor *tw = nf_st_find(f, w_name), *tb = nf_st_find(f, b_name);
	int hs = nf_model_head_size(&m->cfg), rows = heads * hs, dim = m->cfg.dim, pos = 9;
	float inv[64];
	double x[64], worst = 0;
	if (!tw || !tb)
		return 1e9;
	nf_arch_rope_inv_freq(inv, &m->cfg);
	for (int i = 0; i < dim; i++)
		x[i] = sin(0.37 * i + 0.1);
	for (int h = 0; h < heads; h++)
		for (int i = 0; i < hs / 2; i++) {
			double y[4] = {0}, cs = cos(pos * (double)inv[i]), sn = sin(pos * (double)inv[i]);
			int rl[2] = {h * hs + 2 * i, h * hs + 2 * i + 1}, rh[2] = {h * hs + i, h * hs + i + hs / 2};
			for (int j = 0; j < 2; j++) {
				y[j] = b[rl[j]];
				y[2 + j] = ((const float *)tb->data)[rh[j]];
				for (int c = 0; c < dim; c++) {
					y[j] += (double)w[(size_t)rl[j] * dim + c] * x[c];
					y[2 + j] += (double)((const float *)tw->data)[(size_t)rh[j] * dim + c] * x[c];
				}
			}
			double l0 = y[0] * cs - y[1] * sn, l1 = y[0] * sn + y[1] * cs;
			double h0 = y[2] * cs - y[3] * sn, h1 = y[3] * cs + y[2] * sn;
			worst = fmax(worst, fmax(fabs(l0 - h0), fabs(l1 - h1)));
		}
	(void)rows;
	return worst;
}

static void test_conventions(void)
{
	nf_model_config c = base_cfg(NF_ARCH_LLAMA);
	nf_model *m = synth(&c, 7), *a = NULL, *b = NULL;
	char l2[1200], hf[1200], st[1300];
	float *la = malloc((size_t)POSITIONS * 512 * sizeof(float));
	float *lb = malloc((size_t)POSITIONS * 512 * sizeof(float));
	snprintf(l2, sizeof l2, "%s/conv.bin", root);
	snprintf(hf, sizeof hf, "%s/conv-hf", root);
	ok(m && !nf_ckpt_write_llama2c(l2, m) && !nf_ckpt_write_hf(hf, m, NF_DTYPE_F32),
	   "llama written as llama2.c (interleaved) and HF (rotate-half)");
	ok(!nf_ckpt_load(&a, l2, NF_CKPT_LLAMA2C) && !nf_ckpt_load(&b, hf, NF_CKPT_HF) &&
		   !ref_logits(la, a) && !ref_logits(lb, b) &&
		   memcmp(la, lb, (size_t)POSITIONS * 512 * sizeof(float)) == 0,
	   "the two copies give the same logits bit for bit");
	nf_model_free(m);
	nf_model_free(a);
	nf_model_free(b);

	/* qwen2: the file's q/k biases are permuted exactly as their rows */
	c = base_cfg(NF_ARCH_QWEN2);
	m = synth(&c, 8);
	snprintf(hf, sizeof hf, "%s/conv-qwen2", root);
	snprintf(st, sizeof st, "%s/model.safetensors", hf);
	nf_st_file *f = NULL;
	ok(m && !nf_ckpt_write_hf(hf, m, NF_DTYPE_F32) && !nf_st_open(&f, st), "qwen2 HF written");
	if (f) {
		double dq = rope_conventions(m, f, "model.layers.1.self_attn.q_proj.weight",
					     "model.layers.1.self_attn.q_proj.bias",
					     m->w.wq + 64 * 64, m->w.bq + 64, c.n_heads);
		double dk = rope_conventions(m, f, "model.layers.1.self_attn.k_proj.weight",
					     "model.layers.1.self_attn.k_proj.bias",
					     m->w.wk + 32 * 64, m->w.bk + 32, c.n_kv_heads);
		ok(dq < 1e-9 && dk < 1e-9, "qwen2: rotate-half RoPE of the HF q and k (rows and "
		   "biases) equals interleaved RoPE of ours (%.1e, %.1e)", dq, dk);
		const nf_st_tensor *bq = nf_st_find(f, "model.layers.1.self_attn.q_proj.bias");
		ok(bq && memcmp(bq->data, m->w.bq + 64, 64 * sizeof(float)) != 0,
		   "and the file's bias order differs from ours (the test would see a missed permutation)");
		nf_st_close(f);
	}
	nf_model_free(m);
	free(la);
	free(lb);
}

/* Llama 3 frequencies from the published definition (transformers'
 * _compute_llama3_parameters), in double. */
static double llama3_expected(int i, int hs, double theta, double factor, double lo, double hi,
			      double orig)
{
	double inv = 1.0 / pow(theta, 2.0 * i / hs), wavelen = 2 * 3.14159265358979323846 / inv;
	double low_wl = orig / lo, high_wl = orig / hi;
	if (wavelen < high_wl)
		return inv;
	if (wavelen > low_wl)
		return inv / factor;
	double smooth = (orig / wavelen - lo) / (hi - lo);
	return (1 - smooth) * inv / factor + smooth * inv;
}

static void test_llama3_freqs(void)
{
	/* Llama 3.1 8B's values */
	nf_model_config c = base_cfg(NF_ARCH_LLAMA);
	float got[64];
	int kept = 0, stretched = 0, smoothed = 0;
	double worst = 0;
	c.dim = 4096;
	c.n_heads = 32;
	c.n_kv_heads = 8;
	c.rope_theta = 500000.0f;
	c.rope_scaling = (nf_rope_scaling){NF_ROPE_LLAMA3, 8.0f, 1.0f, 4.0f, 8192};
	nf_arch_rope_inv_freq(got, &c);
	for (int i = 0; i < 64; i++) {
		double base = 1.0 / pow(500000.0, 2.0 * i / 128);
		double want = llama3_expected(i, 128, 500000.0, 8, 1, 4, 8192);
		worst = fmax(worst, fabs(got[i] - want) / want);
		kept += want == base;
		stretched += fabs(want - base / 8) < 1e-15 * base;
		smoothed += want != base && fabs(want - base / 8) >= 1e-15 * base;
	}
	ok(worst < 2e-6, "Llama 3 inverse frequencies match the formula (max rel err %.1e)", worst);
	ok(kept > 0 && stretched > 0 && smoothed > 0,
	   "and the case covers every regime (%d kept, %d smoothed, %d stretched)", kept, smoothed,
	   stretched);
	c.rope_scaling.type = NF_ROPE_DEFAULT;
	nf_arch_rope_inv_freq(got, &c);
	ok(got[0] == 1.0f && got[63] == 1.0f / powf(500000.0f, 126.0f / 128.0f),
	   "unscaled: theta^(-2i/head_size) exactly as before");
}

static void test_tables(void)
{
	const nf_arch *l = nf_arch_by_gguf("llama", 5), *q = nf_arch_by_hf_class("Qwen2ForCausalLM");
	char name[64];
	size_t nk;
	const nf_arch_gguf_key *keys = nf_arch_gguf_keys(&nk);
	nf_model_config c = {0};
	ok(l && l->id == NF_ARCH_LLAMA && !l->gguf_rotate_half, "GGUF llama: interleaved q/k");
	ok(q && q == nf_arch_by_gguf("qwen2", 5) && q->gguf_rotate_half, "GGUF qwen2: rotate-half q/k");
	ok(!nf_arch_by_gguf("mistral", 7) && nf_arch_by_hf_model_type("mistral"),
	   "mistral has an HF model_type but no GGUF name (llama.cpp writes it as llama)");
	ok(!nf_arch_format_name(name, sizeof name, nf_arch_find(l, NF_T_WQ)->gguf, 3) &&
		   strcmp(name, "blk.3.attn_q.weight") == 0, "GGUF name of wq in layer 3: %s", name);
	ok(strcmp(nf_arch_find(q, NF_T_BK)->hf, "model.layers.%d.self_attn.k_proj.bias") == 0 &&
		   !nf_arch_find(q, NF_T_BO) && !nf_arch_find(nf_arch_get(NF_ARCH_MISTRAL), NF_T_BQ),
	   "qwen2 has q/k/v biases and no o bias; mistral none");
	ok(!nf_arch_find(l, NF_T_WCLS)->per_layer && nf_arch_find(l, NF_T_WCLS)->when == NF_W_UNTIED &&
		   !strcmp(nf_arch_find(l, NF_T_WCLS)->gguf, "output.weight"),
	   "the classifier is global, optional when tied, output.weight in GGUF");
	int found = 0; /* the keys this test knows are in the table */
	for (size_t i = 0; i < nk; i++) {
		if (strcmp(keys[i].suffix, "block_count") == 0) {
			found++;
			ok(nf_arch_gguf_set(&c, &keys[i], 30, "m.gguf") == 0 && c.n_layers == 30,
			   "block_count 30 sets n_layers");
			is_int(nf_arch_gguf_set(&c, &keys[i], 0, "m.gguf"), NF_EINPUT, "block_count 0 refused");
			is_int(nf_arch_gguf_set(&c, &keys[i], 2.5, "m.gguf"), NF_EINPUT,
			       "a fractional block_count refused");
		}
		if (strcmp(keys[i].suffix, "attention.layer_norm_rms_epsilon") == 0) {
			found++;
			is_int(nf_arch_gguf_set(&c, &keys[i], NAN, "m.gguf"), NF_EINPUT, "NaN eps refused");
			ok(keys[i].required, "the RMS epsilon is required");
		}
	}
	is_int(found, 2, "the key table has block_count and the RMS epsilon");
	is_int(nf_arch_gguf_rope_type(&c, "none", 4, "m.gguf"), 0, "rope.scaling.type none");
	is_int(nf_arch_gguf_rope_type(&c, "yarn", 4, "m.gguf"), NF_EUNSUPPORTED, "yarn unsupported");
	is_int(nf_arch_gguf_rope_type(&c, "bogus", 5, "m.gguf"), NF_EINPUT, "an unknown type refused");
}

#define CFG(extra) "{\"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, " \
		   "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 512" extra "}"

static int parse(nf_model_config *c, const char *json)
{
	return nf_ckpt_hf_config_parse(c, json, strlen(json), "c.json");
}

static void test_config_parse(void)
{
	nf_model_config c;
	static const char *l3 = ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
				"\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
				"\"original_max_position_embeddings\": 8192}";
	char buf[1024];
	snprintf(buf, sizeof buf, CFG("%s"), l3);
	ok(parse(&c, buf) == 0 && c.arch == NF_ARCH_LLAMA && c.rope_scaling.type == NF_ROPE_LLAMA3 &&
		   c.rope_scaling.factor == 8.0f && c.rope_scaling.original_max_pos == 8192,
	   "llama3 rope_scaling parsed");
	ok(parse(&c, CFG(", \"rope_scaling\": {\"type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1,"
			 " \"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}")) == 0 &&
		   c.rope_scaling.type == NF_ROPE_LLAMA3, "the older \"type\" key too");
	ok(parse(&c, CFG(", \"model_type\": \"mistral\", \"sliding_window\": 4096, "
			 "\"max_position_embeddings\": 32768")) == 0 && c.arch == NF_ARCH_MISTRAL &&
		   c.sliding_window == 4096 && c.max_seq_len == 4096,
	   "mistral: a window shorter than the context caps the context");
	ok(parse(&c, CFG(", \"model_type\": \"mistral\", \"sliding_window\": null")) == 0 &&
		   c.sliding_window == 0 && c.max_seq_len == 2048, "mistral: no window");
	ok(parse(&c, CFG(", \"model_type\": \"qwen2\", \"use_sliding_window\": false, "
			 "\"sliding_window\": 32, \"tie_word_embeddings\": true")) == 0 &&
		   c.arch == NF_ARCH_QWEN2 && c.sliding_window == 0 && c.shared_classifier,
	   "qwen2: the window is ignored unless use_sliding_window");
	ok(parse(&c, CFG(", \"attention_bias\": true")) == 0 && c.attention_bias,
	   "llama attention_bias");
	ok(parse(&c, CFG(", \"model_type\": \"qwen2\", \"attention_bias\": true")) == 0 &&
		   !c.attention_bias, "qwen2 does not read attention_bias (its biases are fixed)");
#define BAD(json, code, want, name)                                                       \
	do {                                                                              \
		is_int(parse(&c, json), code, "%s: refused with the right code", name);   \
		is_str(nf_error_last(), want, "%s: message", name);                       \
	} while (0)
	BAD(CFG(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 0, \"low_freq_factor\": 1,"
		" \"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}"), NF_EINPUT,
	    "c.json: rope_scaling factor 0 must be a finite number above 0", "factor 0");
	BAD(CFG(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": -2, \"low_freq_factor\": 1,"
		" \"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}"), NF_EINPUT,
	    "c.json: rope_scaling factor -2 must be a finite number above 0", "negative factor");
	BAD(CFG(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": NaN}"), NF_EINPUT,
	    "c.json: line 1 column 193: invalid token near 'NaN'", "NaN factor (not JSON)");
	BAD(CFG(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 4,"
		" \"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}"), NF_EINPUT,
	    "c.json: rope_scaling low_freq_factor 4 and high_freq_factor 4 must be finite with "
	    "0 < low < high", "high_freq_factor not above low");
	BAD(CFG(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8}"), NF_EINPUT,
	    "c.json: rope_scaling \"low_freq_factor\" is missing", "llama3 without its factors");
	BAD(CFG(", \"rope_scaling\": {\"rope_type\": \"sideways\", \"factor\": 2}"), NF_EINPUT,
	    "c.json: unknown rope_scaling rope_type \"sideways\"", "unknown rope_type");
	BAD(CFG(", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}"), NF_EUNSUPPORTED,
	    "c.json: rope_scaling \"yarn\" is not supported (default, llama3)", "yarn");
	BAD(CFG(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"type\": \"linear\"}"), NF_EINPUT,
	    "c.json: rope_scaling \"rope_type\" \"llama3\" and \"type\" \"linear\" disagree",
	    "rope_type and type disagree");
	BAD(CFG(", \"model_type\": \"gpt2\""), NF_EUNSUPPORTED,
	    "c.json: model_type \"gpt2\" is not supported (llama, mistral, qwen2)", "unknown model_type");
	BAD(CFG(", \"model_type\": \"qwen2\", \"architectures\": [\"LlamaForCausalLM\"]"), NF_EINPUT,
	    "c.json: model_type \"qwen2\" disagrees with architectures \"LlamaForCausalLM\"",
	    "model_type and architectures disagree");
	BAD(CFG(", \"mlp_bias\": true"), NF_EUNSUPPORTED, "c.json: \"mlp_bias\" is not supported",
	    "mlp_bias");
	ok(parse(&c, CFG(", \"rope_scaling\": {\"rope_type\": \"default\"}")) == 0 &&
		   c.rope_scaling.type == NF_ROPE_DEFAULT, "rope_type default is no scaling");
	c = base_cfg(NF_ARCH_LLAMA);
	c.rope_scaling = (nf_rope_scaling){NF_ROPE_LLAMA3, NAN, 1, 4, 8192};
	is_int(nf_model_config_validate(&c, "m"), NF_EINPUT, "a NaN factor in a config refused");
#undef BAD
}

/* Rewrite dir's model.safetensors: drop tensor `drop` (NULL: none) and add a
 * 1-D tensor `add` (NULL: none). */
static int rewrite_st(const char *dir, const char *drop, const char *add)
{
	char *path = nf_path_join(dir, "model.safetensors"), *tmp = nf_path_join(dir, "x.safetensors");
	nf_st_file *f = NULL;
	nf_st_writer *w = NULL;
	static const float extra[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	uint64_t shape[1] = {8};
	int err = nf_st_open(&f, path) || nf_st_writer_new(&w);
	for (size_t i = 0; !err && i < nf_st_count(f); i++) {
		const nf_st_tensor *t = nf_st_at(f, i);
		if (!drop || strcmp(t->name, drop) != 0)
			err = nf_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes);
	}
	if (!err && add)
		err = nf_st_writer_add(w, add, NF_DTYPE_F32, 1, shape, extra, sizeof extra);
	err = err || nf_st_writer_finish(w, tmp) || rename(tmp, path);
	nf_st_writer_free(w);
	nf_st_close(f);
	free(path);
	free(tmp);
	return err;
}

/* config.json of dir with `from` replaced by `to` (same length or not). */
static int edit_config(const char *dir, const char *from, const char *to)
{
	char *path = nf_path_join(dir, "config.json"), *t = NULL, *out = NULL;
	size_t n;
	int err = nf_fs_read_file(&t, &n, path, 1 << 20);
	char *at = err ? NULL : strstr(t, from);
	if (at) {
		*at = '\0';
		out = nf_strdup_printf("%s%s%s", t, to, at + strlen(from));
		err = nf_fs_write_atomic(path, out, strlen(out), 0644);
	}
	free(path);
	free(t);
	free(out);
	return at ? err : -1;
}

static void test_checkpoint_refusals(void)
{
	nf_model_config c = base_cfg(NF_ARCH_QWEN2);
	nf_model *m = synth(&c, 11), *h = NULL;
	char dir[1200];
	snprintf(dir, sizeof dir, "%s/refuse", root);
	ok(m && !nf_ckpt_write_hf(dir, m, NF_DTYPE_F32), "qwen2 HF written for refusals");
	/* an extra unknown tensor is ignored: HF exports carry tensors we do not
	 * use (older Llamas' rotary_emb.inv_freq, a tied lm_head copy) */
	ok(!rewrite_st(dir, NULL, "model.layers.0.self_attn.rotary_emb.inv_freq") &&
		   !nf_ckpt_load(&h, dir, NF_CKPT_HF) && same_model(m, h),
	   "an extra unknown tensor is accepted and ignored");
	nf_model_free(h);
	h = NULL;
	ok(!edit_config(dir, "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4"),
	   "config.json says 4 KV heads, the tensors hold 2");
	is_int(nf_ckpt_load(&h, dir, NF_CKPT_HF), NF_EINPUT, "head counts that disagree with the shapes refused");
	ok(strstr(nf_error_last(), "k_proj.weight\" has shape [32, 64], expected [64, 64]") != NULL,
	   "and the message names the tensor and both shapes (%s)", nf_error_last());
	edit_config(dir, "\"num_key_value_heads\": 4", "\"num_key_value_heads\": 2");
	ok(!rewrite_st(dir, "model.layers.1.self_attn.k_proj.bias", NULL), "k bias of layer 1 removed");
	is_int(nf_ckpt_load(&h, dir, NF_CKPT_HF), NF_EINPUT, "a missing required tensor refused");
	ok(strstr(nf_error_last(), "missing tensor \"model.layers.1.self_attn.k_proj.bias\"") != NULL,
	   "and named (%s)", nf_error_last());
	nf_model_free(m);

	/* a bias the config does not enable would silently change every logit */
	c = base_cfg(NF_ARCH_LLAMA);
	m = synth(&c, 12);
	ok(m && !nf_ckpt_write_hf(dir, m, NF_DTYPE_F32) &&
		   !rewrite_st(dir, NULL, "model.layers.0.self_attn.q_proj.bias"), "llama with a stray bias");
	is_int(nf_ckpt_load(&h, dir, NF_CKPT_HF), NF_EINPUT, "a bias without attention_bias refused");
	ok(strstr(nf_error_last(), "does not set \"attention_bias\"") != NULL, "(%s)", nf_error_last());
	c.arch = NF_ARCH_QWEN2;
	nf_model_free(m);
	m = synth(&c, 13);
	is_int(m ? nf_ckpt_write_llama2c(dir, m) : -1, NF_EUNSUPPORTED,
	       "llama2.c cannot hold a qwen2 model: refused, not written without its biases");
	nf_model_free(m);
}

/* The engine's config.json records the architecture and its rope scaling;
 * an older one without the architecture opens as llama. */
static void test_engine_config(void)
{
	nf_model_config c = base_cfg(NF_ARCH_QWEN2);
	nf_model *m = NULL;
	nf_engine *e = NULL;
	float *ref = malloc((size_t)POSITIONS * 512 * sizeof(float));
	double worst = 1, mean = 1;
	char dir[1200];
	rope_llama3(&c);
	c.shared_classifier = false;
	m = synth(&c, 21);
	snprintf(dir, sizeof dir, "%s/eng-qwen2-l3", root);
	int err = !m || ref_logits(ref, m) || engine_vs(dir, m, NF_PREC_FP32, ref, &worst, &mean, &e);
	ok(!err && worst < 1e-4, "qwen2 with llama3 rope: fp32 engine within 1e-4 (%.2e)", worst);
	if (e) {
		const nf_model_config *ec = nf_engine_config(e);
		ok(same_cfg(ec, &m->cfg), "the opened engine's config equals the model's");
		ok(strstr(nf_engine_config_json(e), "\"architecture\": \"qwen2\"") &&
			   strstr(nf_engine_config_json(e), "\"rope_type\": \"llama3\""),
		   "config.json records architecture and rope scaling");
	}
	nf_engine_free(e);
	e = NULL;
	nf_model_free(m);
	c = base_cfg(NF_ARCH_LLAMA);
	m = synth(&c, 22);
	snprintf(dir, sizeof dir, "%s/eng-old", root);
	err = !m || ref_logits(ref, m) || engine_vs(dir, m, NF_PREC_FP32, ref, &worst, &mean, NULL);
	ok(!err, "plain llama engine built");
	ok(!edit_config(dir, "\"architecture\": \"llama\",", ""), "its architecture key removed");
	ok(nf_engine_open(&e, dir, 1) == 0 && nf_engine_config(e)->arch == NF_ARCH_LLAMA,
	   "an engine config without an architecture opens as llama");
	nf_engine_free(e);
	e = NULL;
	ok(!edit_config(dir, "\"shared_classifier\"", "\"architecture\": \"gpt2\", \"shared_classifier\""),
	   "architecture gpt2 written");
	is_int(nf_engine_open(&e, dir, 1), NF_EINPUT, "an unknown engine architecture refused");
	nf_model_free(m);
	free(ref);
}

int main(void)
{
	static const arch_case cases[] = {
		{"llama-tied", NF_ARCH_LLAMA, 0, 0, 0, 0},
		{"llama-untied", NF_ARCH_LLAMA, 1, 0, 0, 0},
		{"llama-llama3", NF_ARCH_LLAMA, 1, 1, 0, 0},
		{"llama-tied-llama3", NF_ARCH_LLAMA, 0, 1, 0, 0},
		{"llama-bias", NF_ARCH_LLAMA, 0, 0, 1, 0},
		{"mistral-window", NF_ARCH_MISTRAL, 1, 0, 0, 1},
		{"qwen2-tied", NF_ARCH_QWEN2, 0, 0, 0, 0},
		{"qwen2-untied", NF_ARCH_QWEN2, 1, 0, 0, 0},
	};
	const char *shared = tap_env("NF_SHARED", "../shared");
	snprintf(tokpath, sizeof tokpath, "%s/models/stories260K/tok512.bin", shared);
	snprintf(root, sizeof root, "%s/tmp/test_arch.%d", tap_env("NF_BUILD", "build"), (int)getpid());
	if (nf_fs_mkdir_p(root, 0755))
		return 1;
	test_tables();
	test_llama3_freqs();
	test_config_parse();
	if (!nf_fs_exists(tokpath)) {
		skip("no %s: the engine cases need its 512-token vocabulary", tokpath);
	} else {
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
			run_case(&cases[i], 100 + i);
		test_engine_config();
	}
	test_conventions();
	test_checkpoint_refusals();
	nf_fs_remove_tree(root);
	return done_testing();
}
