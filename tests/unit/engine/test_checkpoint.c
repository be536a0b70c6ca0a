/*
 * test_checkpoint.c - loading the real stories260K.bin (config and weights
 * against the raw file floats), writing it back as llama2.c, and as Hugging
 * Face safetensors (F32 bit-identical, F16/BF16 close, sharded).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

static float raw_float(const char *raw, size_t index)
{
	float f;
	memcpy(&f, raw + 28 + 4 * index, 4);
	return f;
}

static int same_weights(const nf_model *a, const nf_model *b)
{
	size_t n;
	if (memcmp(&a->cfg, &b->cfg, sizeof(a->cfg)) != 0 || nf_model_param_count(&n, &a->cfg))
		return 0;
	return a->mem_len == b->mem_len && memcmp(a->mem, b->mem, n * sizeof(float)) == 0;
}

/* Largest |a-b| / (|a| + 1e-3) over every weight. */
static double max_rel_err(const nf_model *a, const nf_model *b)
{
	size_t n;
	double worst = 0;
	if (nf_model_param_count(&n, &a->cfg))
		return 1e9;
	for (size_t i = 0; i < n; i++) {
		double x = ((const float *)a->mem)[i], y = ((const float *)b->mem)[i];
		double e = fabs(x - y) / (fabs(x) + 1e-3);
		if (e > worst)
			worst = e;
	}
	return worst;
}

static void test_hf(const nf_model *m, const char *dir);

int main(void)
{
	const char *shared = tap_env("NF_SHARED", "/work/shared");
	char *path = nf_strdup_printf("%s/models/stories260K/stories260K.bin", shared);
	char dir[] = "/tmp/nf_test_ckpt_XXXXXX";
	char *raw = NULL, *copy = NULL;
	size_t raw_len;
	nf_model *m = NULL, *m2 = NULL;
	nf_ckpt_format fmt;

	ok(nf_ckpt_format_parse(&fmt, "llama2c") == 0 && fmt == NF_CKPT_LLAMA2C, "format llama2c");
	ok(nf_ckpt_format_parse(&fmt, "hf") == 0 && fmt == NF_CKPT_HF, "format hf");
	ok(nf_ckpt_format_parse(&fmt, "auto") == 0 && fmt == NF_CKPT_AUTO, "format auto");
	is_int(nf_ckpt_format_parse(&fmt, "gguf2"), NF_EINPUT, "unknown format refused");
	is_str(nf_error_last(), "unknown checkpoint format \"gguf2\" (auto, llama2c, hf, gguf)", "its message");

	if (!nf_fs_exists(path)) {
		skip("no %s", path);
		free(path);
		return done_testing();
	}
	if (!mkdtemp(dir))
		return 1;
	is_int(nf_ckpt_load(&m, path, NF_CKPT_AUTO), 0, "load stories260K.bin");
	if (!m) {
		diag("%s", nf_error_last());
		return done_testing();
	}
	is_int(m->cfg.dim, 64, "dim");
	is_int(m->cfg.hidden_dim, 172, "hidden_dim");
	is_int(m->cfg.n_layers, 5, "n_layers");
	is_int(m->cfg.n_heads, 8, "n_heads");
	is_int(m->cfg.n_kv_heads, 4, "n_kv_heads");
	is_int(m->cfg.vocab_size, 512, "vocab_size");
	is_int(m->cfg.max_seq_len, 512, "max_seq_len");
	ok(m->cfg.norm_eps == 1e-5f && m->cfg.rope_theta == 10000.0f, "eps and theta");
	ok(m->cfg.shared_classifier && m->w.wcls == m->w.token_embedding, "classifier shared");
	{
		size_t n;
		ok(nf_model_param_count(&n, &m->cfg) == 0 && n == 260032, "260032 parameters (%zu)", n);
	}
	ok(nf_fs_read_file(&raw, &raw_len, path, 2 << 20) == 0 && raw_len == 1056540, "raw file read");
	/* spot checks against the floats in the file, by their documented offsets */
	{
		size_t emb = 512 * 64, rms = 5 * 64, wq = 5 * 64 * 64, wk = 5 * 32 * 64;
		size_t o_wq = emb + rms, o_wk = o_wq + wq, o_wv = o_wk + wk, o_wo = o_wv + wk;
		size_t o_rf = o_wo + wq, o_w1 = o_rf + rms, o_w2 = o_w1 + 5 * 172 * 64;
		size_t o_w3 = o_w2 + 5 * 64 * 172, o_fin = o_w3 + 5 * 172 * 64;
		ok(m->w.token_embedding[0] == raw_float(raw, 0) &&
		   m->w.token_embedding[emb - 1] == raw_float(raw, emb - 1), "token_embedding ends");
		ok(m->w.rms_att[3 * 64 + 5] == raw_float(raw, emb + 3 * 64 + 5), "rms_att[3][5]");
		ok(m->w.wq[2 * 4096 + 17 * 64 + 9] == raw_float(raw, o_wq + 2 * 4096 + 17 * 64 + 9),
		   "wq[2][17][9]");
		ok(m->w.wk[4 * 2048 + 31 * 64 + 63] == raw_float(raw, o_wk + 4 * 2048 + 31 * 64 + 63),
		   "wk[4][31][63]");
		ok(m->w.wv[0] == raw_float(raw, o_wv) && m->w.wo[1] == raw_float(raw, o_wo + 1),
		   "wv[0] and wo[1]");
		ok(m->w.rms_ffn[0] == raw_float(raw, o_rf), "rms_ffn[0]");
		ok(m->w.w1[100] == raw_float(raw, o_w1 + 100) && m->w.w2[200] == raw_float(raw, o_w2 + 200) &&
		   m->w.w3[300] == raw_float(raw, o_w3 + 300), "w1, w2, w3");
		ok(m->w.rms_final[63] == raw_float(raw, o_fin + 63), "rms_final[63]");
		ok(m->w.token_embedding[0] != 0.0f && m->w.rms_final[63] != 0.0f, "values are not zero");
	}
	/* llama2.c round trip */
	copy = nf_path_join(dir, "copy.bin");
	is_int(nf_ckpt_write_llama2c(copy, m), 0, "write llama2.c copy");
	{
		uint64_t sz = 0;
		ok(nf_fs_file_size(&sz, copy) == 0 && sz == 1056540, "copy has the same size");
	}
	is_int(nf_ckpt_load(&m2, copy, NF_CKPT_LLAMA2C), 0, "load the copy");
	ok(m2 && same_weights(m, m2), "copy has identical weights");
	{
		char *raw2 = NULL;
		size_t l2;
		/* weights before the RoPE tables are byte-identical to the original */
		ok(nf_fs_read_file(&raw2, &l2, copy, 2 << 20) == 0 &&
		   memcmp(raw, raw2, 28 + 4 * 260032) == 0, "header and weights byte-identical");
		free(raw2);
	}
	nf_model_free(m2);
	m2 = NULL;
	/* unshared classifier: negative vocab in the header, wcls stored last */
	{
		nf_model_config c = m->cfg;
		nf_model *u = NULL;
		c.shared_classifier = false;
		ok(nf_model_alloc(&u, &c) == 0 && u->w.wcls != u->w.token_embedding, "unshared alloc");
		if (u) {
			size_t n;
			nf_model_param_count(&n, &m->cfg);
			memcpy(u->mem, m->mem, n * sizeof(float));
			for (size_t i = 0; i < 512 * 64; i++)
				u->w.wcls[i] = (float)i * 1e-4f;
			is_int(nf_ckpt_write_llama2c(copy, u), 0, "write unshared");
			is_int(nf_ckpt_load(&m2, copy, NF_CKPT_LLAMA2C), 0, "load unshared");
			ok(m2 && !m2->cfg.shared_classifier && same_weights(u, m2),
			   "unshared classifier round trips");
			nf_model_free(m2);
			m2 = NULL;
		}
		nf_model_free(u);
	}

	test_hf(m, dir);

	nf_model_free(m);
	nf_model_free(NULL);
	free(raw);
	free(copy);
	free(path);
	nf_fs_remove_tree(dir);
	return done_testing();
}

static int copy_file(const char *from, const char *to)
{
	char *b = NULL;
	size_t l;
	int err = nf_fs_read_file(&b, &l, from, 1 << 20);
	if (!err)
		err = nf_fs_write_atomic(to, b, l, 0644);
	free(b);
	return err;
}

/* Split dir32/model.safetensors into two shards + index in dst. */
static int write_sharded(const char *dir32, const char *dst)
{
	char *one = nf_path_join(dir32, "model.safetensors");
	char *s1 = nf_path_join(dst, "model-00001-of-00002.safetensors");
	char *s2 = nf_path_join(dst, "model-00002-of-00002.safetensors");
	char *cf = nf_path_join(dir32, "config.json"), *cf2 = nf_path_join(dst, "config.json");
	char *ix = nf_path_join(dst, "model.safetensors.index.json");
	nf_st_file *f = NULL;
	nf_st_writer *w1 = NULL, *w2 = NULL;
	char *map = malloc(1 << 16);
	size_t ml = 0, n;
	int err = nf_fs_mkdir_p(dst, 0755);

	if (!err)
		err = nf_st_open(&f, one);
	if (!err)
		err = nf_st_writer_new(&w1);
	if (!err)
		err = nf_st_writer_new(&w2);
	if (err)
		goto done;
	n = nf_st_count(f);
	ml += (size_t)snprintf(map + ml, (1 << 16) - ml, "{\"metadata\": {}, \"weight_map\": {");
	for (size_t i = 0; i < n; i++) {
		const nf_st_tensor *t = nf_st_at(f, i);
		bool second = i >= n / 2;
		if ((err = nf_st_writer_add(second ? w2 : w1, t->name, t->dtype, t->ndim, t->shape,
					    t->data, t->nbytes)))
			goto done;
		ml += (size_t)snprintf(map + ml, (1 << 16) - ml, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"",
				       i ? ", " : "", t->name, second ? 2 : 1);
	}
	ml += (size_t)snprintf(map + ml, (1 << 16) - ml, "}}\n");
	if (!(err = nf_st_writer_finish(w1, s1)) && !(err = nf_st_writer_finish(w2, s2)) &&
	    !(err = nf_fs_write_atomic(ix, map, ml, 0644)))
		err = copy_file(cf, cf2);
done:
	nf_st_writer_free(w1);
	nf_st_writer_free(w2);
	nf_st_close(f);
	free(map);
	free(one);
	free(s1);
	free(s2);
	free(cf);
	free(cf2);
	free(ix);
	return err;
}

static void test_hf(const nf_model *m, const char *dir)
{
	char *d32 = nf_path_join(dir, "hf32"), *d16 = nf_path_join(dir, "hf16");
	char *dbf = nf_path_join(dir, "hfbf16"), *dsh = nf_path_join(dir, "sharded");
	char *st32 = nf_path_join(d32, "model.safetensors"), *cfg = nf_path_join(d32, "config.json");
	char *cfg_text = NULL, *b1 = NULL, *b2 = NULL;
	size_t cl, l1, l2;
	nf_model *h = NULL;
	nf_st_file *f = NULL;

	is_int(nf_ckpt_write_hf(d32, m, NF_DTYPE_F32), 0, "write HF F32");
	ok(nf_fs_read_file(&cfg_text, &cl, cfg, 1 << 20) == 0, "config.json written");
	if (cfg_text) {
		static const char *keys[] = {
			"\"hidden_size\": 64", "\"intermediate_size\": 172", "\"num_hidden_layers\": 5",
			"\"num_attention_heads\": 8", "\"num_key_value_heads\": 4", "\"vocab_size\": 512",
			"\"max_position_embeddings\": 512", "\"rms_norm_eps\": 1e-",
			"\"rope_theta\": 10000.0", "\"tie_word_embeddings\": true",
			"\"LlamaForCausalLM\"", "\"torch_dtype\": \"float32\""};
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			ok(strstr(cfg_text, keys[i]) != NULL, "config.json has %s", keys[i]);
		/* 1e-5 written as its shortest decimal, not 9.99999975e-06 */
		ok(strstr(cfg_text, "\"rms_norm_eps\": 1e-5,") || strstr(cfg_text, "\"rms_norm_eps\": 1e-05"),
		   "rms_norm_eps is the shortest decimal");
	}
	is_int(nf_ckpt_load(&h, d32, NF_CKPT_AUTO), 0, "load HF F32 folder");
	if (!h)
		diag("%s", nf_error_last());
	ok(h && same_weights(m, h), "HF F32 round trip is bit-identical");
	nf_model_free(h);
	h = NULL;
	is_int(nf_ckpt_load(&h, st32, NF_CKPT_AUTO), 0, "load HF by its .safetensors path");
	ok(h && same_weights(m, h), "same weights through the file path");
	nf_model_free(h);
	h = NULL;
	/* the file holds HF's rotate-half order: HF row j*hs/2+i is llama2.c row 2i+j */
	is_int(nf_st_open(&f, st32), 0, "open model.safetensors");
	if (f) {
		const nf_st_tensor *q = nf_st_find(f, "model.layers.1.self_attn.q_proj.weight");
		const nf_st_tensor *k = nf_st_find(f, "model.layers.2.self_attn.k_proj.weight");
		const float *qf = q ? q->data : NULL, *kf = k ? k->data : NULL;
		const float *wq = m->w.wq + 4096, *wk = m->w.wk + 2 * 2048;
		/* head 1, hs 8: HF row 8+4+1 (j=1,i=1) = llama2.c row 8+2+1 */
		ok(qf && memcmp(qf + 13 * 64, wq + 11 * 64, 64 * 4) == 0 &&
		   memcmp(qf + 1 * 64, wq + 2 * 64, 64 * 4) == 0 &&
		   memcmp(qf + 0, wq + 0, 64 * 4) == 0, "q_proj rows permuted to rotate-half order");
		ok(kf && memcmp(kf + 3 * 64, wk + 6 * 64, 64 * 4) == 0 &&
		   memcmp(kf + 31 * 64, wk + 31 * 64, 64 * 4) == 0, "k_proj rows permuted");
		ok(q && memcmp(qf + 1 * 64, wq + 1 * 64, 64 * 4) != 0, "and q_proj differs from wq");
		is_int(nf_st_count(f), 1 + 5 * 9 + 1, "47 tensors (tied classifier not written)");
		nf_st_close(f);
	}
	/* The convention itself: rotate-half RoPE (HF, pairs (i, i+hs/2)) on the
	 * stored q_proj gives what interleaved RoPE (llama2.c, pairs (2i, 2i+1))
	 * gives on wq, at a non-zero position. */
	is_int(nf_st_open(&f, st32), 0, "reopen model.safetensors");
	if (f) {
		const nf_st_tensor *q = nf_st_find(f, "model.layers.0.self_attn.q_proj.weight");
		const float *qf = q ? q->data : NULL;
		double x[64], a[64], b[64], worst = 0;
		int pos = 7, hs = 8;
		for (int i = 0; i < 64; i++)
			x[i] = sin(0.37 * i + 0.1);
		for (int r = 0; r < 64 && qf; r++) {
			a[r] = b[r] = 0;
			for (int c = 0; c < 64; c++) {
				a[r] += (double)m->w.wq[r * 64 + c] * x[c];
				b[r] += (double)qf[r * 64 + c] * x[c];
			}
		}
		for (int hd = 0; hd < 8 && qf; hd++) {
			for (int i = 0; i < hs / 2; i++) {
				double fr = pow(10000.0, -2.0 * i / hs), cs = cos(pos * fr), sn = sin(pos * fr);
				int l0 = hd * hs + 2 * i, h0 = hd * hs + i, h1 = h0 + hs / 2;
				double la = a[l0] * cs - a[l0 + 1] * sn, lb = a[l0] * sn + a[l0 + 1] * cs;
				double ha = b[h0] * cs - b[h1] * sn, hb = b[h1] * cs + b[h0] * sn;
				worst = fmax(worst, fmax(fabs(la - ha), fabs(lb - hb)));
			}
		}
		ok(qf && worst < 1e-9, "rotate-half RoPE on q_proj == interleaved RoPE on wq (%.1e)", worst);
		nf_st_close(f);
		f = NULL;
	}
	/* deterministic bytes */
	ok(nf_fs_read_file(&b1, &l1, st32, 4 << 20) == 0, "read model.safetensors");
	is_int(nf_ckpt_write_hf(d32, m, NF_DTYPE_F32), 0, "write HF F32 again");
	ok(nf_fs_read_file(&b2, &l2, st32, 4 << 20) == 0 && l1 == l2 && memcmp(b1, b2, l1) == 0,
	   "same model gives the same bytes");

	is_int(nf_ckpt_write_hf(d16, m, NF_DTYPE_F16), 0, "write HF F16");
	is_int(nf_ckpt_load(&h, d16, NF_CKPT_HF), 0, "load HF F16");
	if (h) {
		double e = max_rel_err(m, h);
		ok(e < 1e-3, "F16 weights within 1e-3 relative (%.2e)", e);
		ok(!same_weights(m, h), "F16 is not a silent F32 copy");
	}
	nf_model_free(h);
	h = NULL;
	is_int(nf_ckpt_write_hf(dbf, m, NF_DTYPE_BF16), 0, "write HF BF16");
	is_int(nf_ckpt_load(&h, dbf, NF_CKPT_HF), 0, "load HF BF16");
	if (h) {
		double e = max_rel_err(m, h);
		ok(e < 4e-3 && e > 1e-4, "BF16 weights within 4e-3 relative (%.2e)", e);
	}
	nf_model_free(h);
	h = NULL;
	is_int(nf_ckpt_write_hf(dbf, m, NF_DTYPE_I8), NF_EUNSUPPORTED, "HF I8 refused");

	is_int(write_sharded(d32, dsh), 0, "write a 2-shard copy");
	is_int(nf_ckpt_load(&h, dsh, NF_CKPT_AUTO), 0, "load the sharded copy");
	if (!h)
		diag("%s", nf_error_last());
	ok(h && same_weights(m, h), "sharded load is bit-identical");
	nf_model_free(h);
	h = NULL;
	{
		char *ix = nf_path_join(dsh, "model.safetensors.index.json");
		is_int(nf_ckpt_load(&h, ix, NF_CKPT_AUTO), 0, "load through the index path");
		ok(h && same_weights(m, h), "same weights");
		nf_model_free(h);
		h = NULL;
		free(ix);
	}
	/* unshared classifier through HF */
	{
		nf_model_config c = m->cfg;
		nf_model *u = NULL;
		size_t n;
		c.shared_classifier = false;
		c.norm_eps = 1e-6f;
		c.rope_theta = 500000.0f;
		if (nf_model_alloc(&u, &c) == 0) {
			nf_model_param_count(&n, &m->cfg);
			memcpy(u->mem, m->mem, n * sizeof(float));
			for (size_t i = 0; i < 512 * 64; i++)
				u->w.wcls[i] = -(float)i * 1e-4f;
		}
		is_int(u ? nf_ckpt_write_hf(dbf, u, NF_DTYPE_F32) : -1, 0, "write unshared HF");
		is_int(nf_ckpt_load(&h, dbf, NF_CKPT_HF), 0, "load unshared HF");
		ok(h && u && !h->cfg.shared_classifier && same_weights(u, h),
		   "lm_head, eps 1e-6 and theta 500000 round trip");
		nf_model_free(h);
		nf_model_free(u);
	}
	free(b1);
	free(b2);
	free(cfg_text);
	free(d32);
	free(d16);
	free(dbf);
	free(dsh);
	free(st32);
	free(cfg);
}
