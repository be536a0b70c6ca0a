/*
 * test_damaged.c - damaged checkpoints, safetensors files, config.json and
 * tokenizers: each must be refused with NF_EINPUT (or NF_EUNSUPPORTED where
 * said) and the exact one-line message, never a crash.  The files are made
 * here, in a temp folder we chdir into so messages carry short names.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/safetensors.h"
#include "engine/tokenizer.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* ------------------------------------------------------------- helpers */

typedef struct buf {
	unsigned char *p;
	size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
}

static void put_i32(buf *b, int32_t v) { put(b, &v, 4); }
static void put_f32(buf *b, float v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }

static void save(const char *path, const buf *b)
{
	if (nf_fs_write_atomic(path, b->p, b->n, 0644))
		printf("# cannot write %s: %s\n", path, nf_error_last());
}

static void save_str(const char *path, const char *s)
{
	buf b = {0};
	put(&b, s, strlen(s));
	save(path, &b);
	free(b.p);
}

/* Assert a call failed with `code` and exactly `want` as message. */
#define REFUSED(call, code, want, name)                                                  \
	do {                                                                             \
		int rc_ = (call);                                                        \
		is_int(rc_, code, "%s: refused with the right code", name);              \
		is_str(nf_error_last(), want, "%s: message", name);                      \
	} while (0)

/* A llama2.c file: header h[7], then `floats` float32 values (0.01 * i). */
static void llama2c(const char *path, const int32_t h[7], size_t floats, float poison_at0)
{
	buf b = {0};
	for (int i = 0; i < 7; i++)
		put_i32(&b, h[i]);
	for (size_t i = 0; i < floats; i++)
		put_f32(&b, i == 0 && poison_at0 != 0 ? poison_at0 : 0.01f * (float)(i % 100));
	save(path, &b);
	free(b.p);
}

/* A safetensors file with the given JSON header and data bytes. */
static void st_file(const char *path, const char *json, size_t data_len)
{
	buf b = {0};
	put_u64(&b, strlen(json));
	put(&b, json, strlen(json));
	for (size_t i = 0; i < data_len; i++)
		put(&b, "\0", 1);
	save(path, &b);
	free(b.p);
}

static void st_raw(const char *path, uint64_t hlen, size_t total)
{
	buf b = {0};
	put_u64(&b, hlen);
	while (b.n < total)
		put(&b, "{", 1);
	save(path, &b);
	free(b.p);
}

/* ---------------------------------------------------------- the cases */

/* tiny: dim 8, hidden 16, 1 layer, 2 heads, 1 kv head, vocab 4, seq 4 -> 648 floats */
static const int32_t tiny[7] = {8, 16, 1, 2, 1, 4, 4};
#define TINY_FLOATS 648

static void llama2c_cases(void)
{
	nf_model *m = NULL;
	int32_t h[7];

	llama2c("good.bin", tiny, TINY_FLOATS, 0);
	is_int(nf_ckpt_load(&m, "good.bin", NF_CKPT_LLAMA2C), 0, "the undamaged tiny file loads");
	nf_model_free(m);
	m = NULL;

	save_str("short.bin", "0123456789");
	REFUSED(nf_ckpt_load(&m, "short.bin", NF_CKPT_AUTO), NF_EINPUT,
		"short.bin: file is 10 bytes, too small for the 28-byte llama2.c header",
		"truncated header");

	llama2c("trunc.bin", tiny, TINY_FLOATS - 1, 0);
	REFUSED(nf_ckpt_load(&m, "trunc.bin", NF_CKPT_LLAMA2C), NF_EINPUT,
		"trunc.bin: file is 2616 bytes, header (dim 8, hidden_dim 16, n_layers 1, n_heads 2, "
		"n_kv_heads 1, vocab_size 4, max_seq_len 4) needs 2620", "truncated weights");

	llama2c("long.bin", tiny, TINY_FLOATS + 1, 0);
	REFUSED(nf_ckpt_load(&m, "long.bin", NF_CKPT_LLAMA2C), NF_EINPUT,
		"long.bin: file is 2624 bytes, header (dim 8, hidden_dim 16, n_layers 1, n_heads 2, "
		"n_kv_heads 1, vocab_size 4, max_seq_len 4) needs 2620", "extra trailing bytes");

	/* unshared classifier: needs the classifier too */
	memcpy(h, tiny, sizeof(h));
	h[5] = -4;
	llama2c("unshared.bin", h, TINY_FLOATS, 0);
	REFUSED(nf_ckpt_load(&m, "unshared.bin", NF_CKPT_LLAMA2C), NF_EINPUT,
		"unshared.bin: file is 2620 bytes, header (dim 8, hidden_dim 16, n_layers 1, n_heads 2, "
		"n_kv_heads 1, vocab_size -4, max_seq_len 4) needs 2748",
		"negative vocab without the classifier");

	memcpy(h, tiny, sizeof(h));
	h[0] = 10, h[3] = 4;
	llama2c("heads.bin", h, 10, 0);
	REFUSED(nf_ckpt_load(&m, "heads.bin", NF_CKPT_LLAMA2C), NF_EINPUT,
		"heads.bin: dim 10 is not divisible by n_heads 4", "dim not divisible by heads");

	memcpy(h, tiny, sizeof(h));
	h[3] = 4, h[4] = 3;
	llama2c("kv.bin", h, 10, 0);
	REFUSED(nf_ckpt_load(&m, "kv.bin", NF_CKPT_LLAMA2C), NF_EINPUT,
		"kv.bin: n_heads 4 is not divisible by n_kv_heads 3", "n_kv_heads not dividing n_heads");

	memcpy(h, tiny, sizeof(h));
	h[0] = -8;
	llama2c("neg.bin", h, 10, 0);
	REFUSED(nf_ckpt_load(&m, "neg.bin", NF_CKPT_LLAMA2C), NF_EINPUT,
		"neg.bin: dim -8 is out of range (1..65536)", "negative dim");

	memcpy(h, tiny, sizeof(h));
	h[2] = 0;
	llama2c("zero.bin", h, 10, 0);
	REFUSED(nf_ckpt_load(&m, "zero.bin", NF_CKPT_LLAMA2C), NF_EINPUT,
		"zero.bin: n_layers 0 is out of range (1..1024)", "zero layers");

	memcpy(h, tiny, sizeof(h));
	h[5] = INT32_MIN;
	llama2c("minvocab.bin", h, 10, 0);
	REFUSED(nf_ckpt_load(&m, "minvocab.bin", NF_CKPT_LLAMA2C), NF_EINPUT,
		"minvocab.bin: vocab_size -2147483648 is out of range (1..1048576)",
		"INT32_MIN vocab (no abs overflow)");

	{
		/* every dim at its limit: the size is computed without overflow and refused
		 * without allocating terabytes */
		int32_t big[7] = {65536, 262144, 1024, 1024, 1024, -(1 << 20), 1 << 20};
		llama2c("huge.bin", big, 10, 0);
		REFUSED(nf_ckpt_load(&m, "huge.bin", NF_CKPT_LLAMA2C), NF_EINPUT,
			"huge.bin: file is 68 bytes, header (dim 65536, hidden_dim 262144, n_layers 1024, "
			"n_heads 1024, n_kv_heads 1024, vocab_size -1048576, max_seq_len 1048576) "
			"needs 282025538093084", "huge dims");
		big[0] = INT32_MAX;
		llama2c("huge2.bin", big, 10, 0);
		REFUSED(nf_ckpt_load(&m, "huge2.bin", NF_CKPT_LLAMA2C), NF_EINPUT,
			"huge2.bin: dim 2147483647 is out of range (1..65536)", "dim past the limit");
	}

	llama2c("nan.bin", tiny, TINY_FLOATS, NAN);
	REFUSED(nf_ckpt_load(&m, "nan.bin", NF_CKPT_LLAMA2C), NF_EINPUT,
		"nan.bin: offset 28: weight is not finite (nan)", "NaN weight");

	REFUSED(nf_ckpt_load(&m, "absent.bin", NF_CKPT_LLAMA2C), NF_ENOTFOUND,
		"absent.bin: No such file or directory", "missing file");
	ok(m == NULL, "no model after failures");
}

static void safetensors_cases(void)
{
	nf_st_file *f = NULL;

	st_file("ok.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16);
	is_int(nf_st_open(&f, "ok.st"), 0, "the undamaged safetensors file opens");
	nf_st_close(f);
	f = NULL;

	save_str("tiny.st", "abc");
	REFUSED(nf_st_open(&f, "tiny.st"), NF_EINPUT,
		"tiny.st: file is 3 bytes, too small for a safetensors header", "3-byte file");

	st_raw("absurd.st", 1ull << 60, 64);
	REFUSED(nf_st_open(&f, "absurd.st"), NF_EINPUT,
		"absurd.st: header length 1152921504606846976 is more than the limit of 104857600 bytes",
		"absurd header length");

	st_raw("eof.st", 100, 20);
	REFUSED(nf_st_open(&f, "eof.st"), NF_EINPUT,
		"eof.st: header length 100 runs past the end of the file (20 bytes)",
		"header length past EOF");

	st_file("json.st", "{\"a\": {\"dtype\": ", 0);
	REFUSED(nf_st_open(&f, "json.st"), NF_EINPUT,
		"json.st: offset 24: header is not valid JSON: unexpected token near end of file",
		"bad JSON");

	st_file("array.st", "[1, 2]", 0);
	REFUSED(nf_st_open(&f, "array.st"), NF_EINPUT, "array.st: header is not a JSON object",
		"header not an object");

	st_file("outside.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[16],\"data_offsets\":[0,64]}}", 16);
	REFUSED(nf_st_open(&f, "outside.st"), NF_EINPUT,
		"outside.st: tensor \"a\": data_offsets [0, 64] outside the data section of 16 bytes",
		"offsets outside the data");

	st_file("reversed.st", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,4]}}", 16);
	REFUSED(nf_st_open(&f, "reversed.st"), NF_EINPUT,
		"reversed.st: tensor \"a\": data_offsets [8, 4] outside the data section of 16 bytes",
		"begin after end");

	st_file("overlap.st",
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		"\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 16);
	REFUSED(nf_st_open(&f, "overlap.st"), NF_EINPUT,
		"overlap.st: tensors \"a\" and \"b\" overlap in the data section", "overlapping tensors");

	st_file("size.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", 16);
	REFUSED(nf_st_open(&f, "size.st"), NF_EINPUT,
		"size.st: tensor \"a\": shape needs 3 elements of F32 but data_offsets span 16 bytes",
		"shape/size mismatch");

	st_file("shapeovf.st",
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,16]}}", 16);
	REFUSED(nf_st_open(&f, "shapeovf.st"), NF_EINPUT,
		"shapeovf.st: tensor \"a\": shape product overflows", "shape product overflow");

	st_file("dtype.st", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16);
	REFUSED(nf_st_open(&f, "dtype.st"), NF_EINPUT, "dtype.st: tensor \"a\": unknown dtype \"F64\"",
		"unknown dtype");

	st_file("negshape.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 16);
	REFUSED(nf_st_open(&f, "negshape.st"), NF_EINPUT,
		"negshape.st: tensor \"a\": shape[0] is not a non-negative integer", "negative shape");

	st_file("dup.st",
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		"\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16);
	REFUSED(nf_st_open(&f, "dup.st"), NF_EINPUT,
		"dup.st: offset 65: header is not valid JSON: duplicate object key near '\"a\"'",
		"duplicate tensor names");

	st_file("meta.st", "{\"__metadata__\":{\"k\":1}}", 0);
	REFUSED(nf_st_open(&f, "meta.st"), NF_EINPUT,
		"meta.st: \"__metadata__\" value \"k\" is not a string", "non-string metadata");

	st_file("dims.st", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1);
	REFUSED(nf_st_open(&f, "dims.st"), NF_EINPUT, "dims.st: tensor \"a\": 9 dimensions, more than 8",
		"too many dimensions");
	ok(f == NULL, "no file object after failures");
}

static nf_model *tiny_model(void)
{
	nf_model *m = NULL;
	if (nf_ckpt_load(&m, "good.bin", NF_CKPT_LLAMA2C))
		return NULL;
	return m;
}

/* Rewrite hf/model.safetensors from good/, dropping `drop` or reshaping `reshape`. */
static void hf_variant(const char *dir, const char *drop, const char *reshape)
{
	nf_st_file *f = NULL;
	nf_st_writer *w = NULL;
	char *src = nf_path_join("hfgood", "model.safetensors"), *dst = nf_path_join(dir, "model.safetensors");
	char *cs = nf_path_join("hfgood", "config.json"), *cd = nf_path_join(dir, "config.json");
	char *cfg = NULL;
	size_t cl;
	nf_fs_mkdir_p(dir, 0755);
	if (nf_st_open(&f, src) || nf_st_writer_new(&w))
		goto done;
	for (size_t i = 0; i < nf_st_count(f); i++) {
		const nf_st_tensor *t = nf_st_at(f, i);
		if (drop && strcmp(t->name, drop) == 0)
			continue;
		if (reshape && strcmp(t->name, reshape) == 0) {
			uint64_t s[2] = {t->shape[1], t->shape[0]};
			nf_st_writer_add(w, t->name, t->dtype, 2, s, t->data, t->nbytes);
		} else {
			nf_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes);
		}
	}
	nf_st_writer_finish(w, dst);
	if (nf_fs_read_file(&cfg, &cl, cs, 1 << 20) == 0)
		nf_fs_write_atomic(cd, cfg, cl, 0644);
done:
	free(cfg);
	nf_st_writer_free(w);
	nf_st_close(f);
	free(src);
	free(dst);
	free(cs);
	free(cd);
}

static void hf_cases(void)
{
	nf_model *m = tiny_model(), *h = NULL;
	nf_model_config c;

	ok(m && nf_ckpt_write_hf("hfgood", m, NF_DTYPE_F32) == 0, "tiny HF copy written");
	is_int(nf_ckpt_load(&h, "hfgood", NF_CKPT_HF), 0, "tiny HF copy loads");
	nf_model_free(h);
	h = NULL;

	hf_variant("hfmiss", "model.layers.0.mlp.up_proj.weight", NULL);
	REFUSED(nf_ckpt_load(&h, "hfmiss", NF_CKPT_AUTO), NF_EINPUT,
		"hfmiss/model.safetensors: missing tensor \"model.layers.0.mlp.up_proj.weight\"",
		"missing tensor");

	hf_variant("hfshape", NULL, "model.layers.0.mlp.down_proj.weight");
	REFUSED(nf_ckpt_load(&h, "hfshape", NF_CKPT_AUTO), NF_EINPUT,
		"hfshape/model.safetensors: tensor \"model.layers.0.mlp.down_proj.weight\" has shape "
		"[16, 8], expected [8, 16]", "tensor with the wrong shape");

	nf_fs_mkdir_p("hfempty", 0755);
	save_str("hfempty/config.json", "{\"hidden_size\": 8, \"intermediate_size\": 16, "
		 "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"vocab_size\": 4}");
	REFUSED(nf_ckpt_load(&h, "hfempty", NF_CKPT_AUTO), NF_EINPUT,
		"hfempty: no model.safetensors or model.safetensors.index.json", "no weights file");

	hf_variant("hfindex", NULL, NULL);
	save_str("hfindex/model.safetensors.index.json",
		 "{\"weight_map\": {\"model.norm.weight\": \"../good.bin\"}}");
	REFUSED(nf_ckpt_load(&h, "hfindex", NF_CKPT_AUTO), NF_EINPUT,
		"hfindex/model.safetensors.index.json: tensor \"model.norm.weight\": bad shard file name",
		"shard path escaping the folder");
	save_str("hfindex/model.safetensors.index.json",
		 "{\"weight_map\": {\"model.norm.weight\": \"model.safetensors\"}}");
	REFUSED(nf_ckpt_load(&h, "hfindex", NF_CKPT_AUTO), NF_EINPUT,
		"hfindex/model.safetensors.index.json: missing tensor \"model.embed_tokens.weight\"",
		"tensor absent from the weight map");

	/* config.json from memory */
	{
		static const char *bad_json = "{\"hidden_size\": 8,";
		REFUSED(nf_ckpt_hf_config_parse(&c, bad_json, strlen(bad_json), "config.json"), NF_EINPUT,
			"config.json: line 1 column 18: string or '}' expected near end of file",
			"config.json bad JSON");
	}
#define CFG(extra) "{\"hidden_size\": 8, \"intermediate_size\": 16, \"num_hidden_layers\": 1, " \
		   "\"num_attention_heads\": 2, \"vocab_size\": 4" extra "}"
	{
		static const char *ok_cfg = CFG("");
		ok(nf_ckpt_hf_config_parse(&c, ok_cfg, strlen(ok_cfg), "c.json") == 0 &&
		   c.n_kv_heads == 2 && c.max_seq_len == 2048 && c.norm_eps == 1e-6f &&
		   c.rope_theta == 10000.0f && !c.shared_classifier, "config.json defaults");
	}
	{
		static const char *s = "{\"intermediate_size\": 16}";
		REFUSED(nf_ckpt_hf_config_parse(&c, s, strlen(s), "c.json"), NF_EINPUT,
			"c.json: missing \"hidden_size\"", "config.json missing key");
	}
	{
		static const char *s = CFG(", \"num_key_value_heads\": 3");
		REFUSED(nf_ckpt_hf_config_parse(&c, s, strlen(s), "c.json"), NF_EINPUT,
			"c.json: n_heads 2 is not divisible by n_kv_heads 3", "config.json bad GQA");
	}
	{
		static const char *s = CFG(", \"num_key_value_heads\": \"2\"");
		REFUSED(nf_ckpt_hf_config_parse(&c, s, strlen(s), "c.json"), NF_EINPUT,
			"c.json: \"num_key_value_heads\" is not an integer", "config.json string for int");
	}
	{
		static const char *s = CFG(", \"max_position_embeddings\": 99999999999");
		REFUSED(nf_ckpt_hf_config_parse(&c, s, strlen(s), "c.json"), NF_EINPUT,
			"c.json: \"max_position_embeddings\" 99999999999 is out of range",
			"config.json int past int32");
	}
	{
		static const char *s = CFG(", \"rms_norm_eps\": -1");
		REFUSED(nf_ckpt_hf_config_parse(&c, s, strlen(s), "c.json"), NF_EINPUT,
			"c.json: \"rms_norm_eps\" -1 is out of range", "config.json negative eps");
	}
	{
		static const char *s = CFG(", \"rope_scaling\": {\"type\": \"linear\"}");
		REFUSED(nf_ckpt_hf_config_parse(&c, s, strlen(s), "c.json"), NF_EUNSUPPORTED,
			"c.json: rope_scaling \"linear\" is not supported (default, llama3)",
			"config.json rope_scaling linear");
	}
	{
		static const char *s = CFG(", \"architectures\": [\"GPT2LMHeadModel\"]");
		REFUSED(nf_ckpt_hf_config_parse(&c, s, strlen(s), "c.json"), NF_EUNSUPPORTED,
			"c.json: \"architectures\" names none of LlamaForCausalLM, MistralForCausalLM, "
			"Qwen2ForCausalLM", "config.json other arch");
	}
#undef CFG
	nf_model_free(m);
}

/* A tokenizer file: max_token_length, then tokens given as (score, len, bytes). */
static void tok_cases(void)
{
	nf_tokenizer *t = NULL;
	buf b = {0};

	/* good: 4 tokens */
	put_i32(&b, 4);
	put_f32(&b, 0), put_i32(&b, 1), put(&b, "a", 1);
	put_f32(&b, 0), put_i32(&b, 3), put(&b, "<s>", 3);
	put_f32(&b, 0), put_i32(&b, 4), put(&b, "</s>", 4);
	put_f32(&b, -1), put_i32(&b, 2), put(&b, "ab", 2);
	is_int(nf_tokenizer_load_mem(&t, b.p, b.n, 4, "tok.bin"), 0, "the undamaged tokenizer loads");
	nf_tokenizer_free(t);
	t = NULL;
	save("tok.bin", &b);
	is_int(nf_tokenizer_load(&t, "tok.bin", 4), 0, "and from a file");
	nf_tokenizer_free(t);
	t = NULL;

	REFUSED(nf_tokenizer_load_mem(&t, b.p, b.n - 1, 4, "tok.bin"), NF_EINPUT,
		"tok.bin: offset 44: token 3 needs 2 bytes, only 1 left", "tokenizer truncated mid-token");
	REFUSED(nf_tokenizer_load_mem(&t, b.p, 37, 4, "tok.bin"), NF_EINPUT,
		"tok.bin: offset 36: file ends inside the header of token 3",
		"tokenizer truncated inside a token header");
	REFUSED(nf_tokenizer_load(&t, "tok.bin", 5), NF_EINPUT,
		"tok.bin: offset 46: file ends inside the header of token 4",
		"tokenizer with fewer tokens than the vocab");
	REFUSED(nf_tokenizer_load(&t, "tok.bin", 3), NF_EINPUT,
		"tok.bin: offset 36: 10 trailing bytes after 3 tokens (vocabulary larger than the model's?)",
		"tokenizer with more tokens than the vocab");
	{
		int32_t v = 3; /* max_token_length 3 < len("</s>") */
		memcpy(b.p, &v, 4);
		REFUSED(nf_tokenizer_load_mem(&t, b.p, b.n, 4, "tok.bin"), NF_EINPUT,
			"tok.bin: offset 28: token 2 length 4 is out of range (0..max_token_length 3)",
			"token longer than max_token_length");
		v = 0;
		memcpy(b.p, &v, 4);
		REFUSED(nf_tokenizer_load_mem(&t, b.p, b.n, 4, "tok.bin"), NF_EINPUT,
			"tok.bin: offset 0: max_token_length 0 is out of range (1..1024)",
			"zero max_token_length");
		v = 1 << 30;
		memcpy(b.p, &v, 4);
		REFUSED(nf_tokenizer_load_mem(&t, b.p, b.n, 4, "tok.bin"), NF_EINPUT,
			"tok.bin: offset 0: max_token_length 1073741824 is out of range (1..1024)",
			"huge max_token_length");
		v = 4;
		memcpy(b.p, &v, 4);
		v = -1; /* length of token 1 */
		memcpy(b.p + 4 + 9 + 4, &v, 4);
		REFUSED(nf_tokenizer_load_mem(&t, b.p, b.n, 4, "tok.bin"), NF_EINPUT,
			"tok.bin: offset 17: token 1 length -1 is out of range (0..max_token_length 4)",
			"negative token length");
		v = 3;
		memcpy(b.p + 4 + 9 + 4, &v, 4);
		float nanf_ = NAN;
		memcpy(b.p + 4, &nanf_, 4);
		REFUSED(nf_tokenizer_load_mem(&t, b.p, b.n, 4, "tok.bin"), NF_EINPUT,
			"tok.bin: offset 4: token 0 has a non-finite score", "NaN score");
	}
	REFUSED(nf_tokenizer_load_mem(&t, b.p, 2, 4, "tok.bin"), NF_EINPUT,
		"tok.bin: offset 0: file is 2 bytes, too small for the header", "2-byte tokenizer");
	REFUSED(nf_tokenizer_load(&t, "tok.bin", 6), NF_EINPUT,
		"tok.bin: offset 46: file is 46 bytes, too small for 6 tokens",
		"vocab larger than the file can hold (refused before allocating)");
	REFUSED(nf_tokenizer_load_mem(&t, b.p, b.n, 0, "tok.bin"), NF_EINPUT,
		"tok.bin: vocab_size 0 is out of range (3..4194304)", "zero vocab");
	REFUSED(nf_tokenizer_load_mem(&t, b.p, b.n, 2, "tok.bin"), NF_EINPUT,
		"tok.bin: vocab_size 2 is out of range (3..4194304)",
		"a vocabulary without room for EOS (found by fuzz_tokenizer)");
	ok(t == NULL, "no tokenizer after failures");
	free(b.p);
}

int main(void)
{
	char dir[] = "/tmp/nf_test_damaged_XXXXXX";
	char old[4096];

	if (!mkdtemp(dir) || !getcwd(old, sizeof(old)) || chdir(dir) != 0)
		return 1;
	llama2c_cases();
	safetensors_cases();
	hf_cases();
	tok_cases();
	if (chdir(old) != 0)
		return 1;
	nf_fs_remove_tree(dir);
	return done_testing();
}
