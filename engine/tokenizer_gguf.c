/*
 * tokenizer_gguf.c - the tokenizer a GGUF file carries in its metadata
 * (tokenizer.ggml.*, tokenizer.chat_template), handed to nf_tokenizer_new
 * as arrays that point into the file mapping; and the choice of the
 * tokenizer that goes with a checkpoint of any format.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/checkpoint.h"
#include "engine/gguf.h"
#include "engine/tokenizer.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* Arrays the spec borrows, freed after nf_tokenizer_new copied them. */
typedef struct gguf_vocab {
	nf_tok_str *tokens;
	float *scores;
	int *types;
	nf_tok_str *merges;
	char *pre;
	char *chat_template;
} gguf_vocab;

static void vocab_release(gguf_vocab *v)
{
	free(v->tokens);
	free(v->scores);
	free(v->types);
	free(v->merges);
	free(v->pre);
	free(v->chat_template);
}

/* An optional key: NF_ENOTFOUND becomes 0 with *present false. */
static int optional(int err, bool *present)
{
	*present = err == 0;
	if (err == NF_ENOTFOUND) {
		nf_error_clear();
		return 0;
	}
	return err;
}

/* A string array of n elements (n checked by the caller) as borrowed strings. */
static int str_array(nf_tok_str **out, const nf_gguf *g, const char *key, uint64_t n)
{
	nf_tok_str *a = calloc(n ? n : 1, sizeof *a);
	if (!a)
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (uint64_t i = 0; i < n; i++) {
		int err = nf_gguf_array_str(g, key, i, &a[i].p, &a[i].len);
		if (err) {
			free(a);
			return err;
		}
	}
	*out = a;
	return 0;
}

/* A numeric array of exactly n elements as floats or ints; absent is fine. */
static int num_array(void **out, const nf_gguf *g, const char *key, uint64_t n, bool as_float)
{
	nf_gguf_vtype et;
	uint64_t m;
	bool present;
	int err = optional(nf_gguf_get_array(g, key, &et, &m), &present);
	if (err || !present)
		return err;
	if (m != n)
		return nf_error_set(NF_EINPUT, "%s: %s has %llu elements, tokenizer.ggml.tokens %llu",
				    nf_gguf_path(g), key, (unsigned long long)m, (unsigned long long)n);
	float *f = as_float ? malloc(n * sizeof *f) : NULL;
	int *d = as_float ? NULL : malloc(n * sizeof *d);
	if (!f && !d)
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (uint64_t i = 0; i < n && !err; i++) {
		int64_t v;
		if (as_float)
			err = nf_gguf_array_f32(g, key, i, &f[i]);
		else if (!(err = nf_gguf_array_i64(g, key, i, &v)) &&
			 (v < NF_TOKTYPE_NORMAL || v > NF_TOKTYPE_BYTE))
			err = nf_error_set(NF_EINPUT, "%s: %s[%llu] = %lld is not a token type (1..6)",
					   nf_gguf_path(g), key, (unsigned long long)i, (long long)v);
		else if (!err)
			d[i] = (int)v;
	}
	if (err) {
		free(f);
		free(d);
		return err;
	}
	*out = as_float ? (void *)f : (void *)d;
	return 0;
}

/* A string key copied NUL-terminated (NULL when absent). */
static int str_key(char **out, const nf_gguf *g, const char *key)
{
	const char *s;
	size_t len;
	bool present;
	int err = optional(nf_gguf_get_str(g, key, &s, &len), &present);
	*out = NULL;
	if (err || !present)
		return err;
	if (memchr(s, 0, len))
		return nf_error_set(NF_EINPUT, "%s: %s holds a NUL byte", nf_gguf_path(g), key);
	if (!(*out = strndup(s, len)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	return 0;
}

/* A token id key: -1 when absent; range-checked by nf_tokenizer_new. */
static int id_key(int *out, const nf_gguf *g, const char *key)
{
	uint64_t v;
	bool present;
	int err = optional(nf_gguf_get_u64(g, key, &v), &present);
	*out = -1;
	if (!err && present)
		*out = v > (uint64_t)1 << 30 ? 1 << 30 : (int)v;
	return err;
}

static int bool_key(bool *out, const nf_gguf *g, const char *key, bool dflt)
{
	bool present;
	int err = optional(nf_gguf_get_bool(g, key, out), &present);
	if (!err && !present)
		*out = dflt;
	return err;
}

/* tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece). */
static int model_kind(nf_tok_kind *out, const nf_gguf *g)
{
	const char *s;
	size_t len;
	int err = nf_gguf_get_str(g, "tokenizer.ggml.model", &s, &len);
	if (err)
		return err;
	if (len == 4 && memcmp(s, "gpt2", 4) == 0)
		*out = NF_TOK_BPE;
	else if (len == 5 && memcmp(s, "llama", 5) == 0)
		*out = NF_TOK_SPM;
	else
		return nf_error_set(NF_EUNSUPPORTED, "%s: tokenizer.ggml.model \"%.*s\" is not supported "
				    "(gpt2, llama)", nf_gguf_path(g), (int)(len > 32 ? 32 : len), s);
	return 0;
}

static int read_vocab(nf_tokenizer_spec *sp, gguf_vocab *v, const nf_gguf *g)
{
	nf_gguf_vtype et;
	uint64_t n, n_merges = 0;
	bool has_merges;
	int err;

	if ((err = model_kind(&sp->kind, g)) ||
	    (err = nf_gguf_get_array(g, "tokenizer.ggml.tokens", &et, &n)))
		return err;
	if (et != NF_GGUF_STRING || n == 0 || n > (1u << 22))
		return nf_error_set(NF_EINPUT, "%s: tokenizer.ggml.tokens is not a list of 1..4194304 "
				    "strings", nf_gguf_path(g));
	sp->n_tokens = (int)n;
	if ((err = str_array(&v->tokens, g, "tokenizer.ggml.tokens", n)) ||
	    (err = num_array((void **)&v->scores, g, "tokenizer.ggml.scores", n, true)) ||
	    (err = num_array((void **)&v->types, g, "tokenizer.ggml.token_type", n, false)))
		return err;
	if ((err = optional(nf_gguf_get_array(g, "tokenizer.ggml.merges", &et, &n_merges),
			    &has_merges)))
		return err;
	if (has_merges && et != NF_GGUF_STRING)
		return nf_error_set(NF_EINPUT, "%s: tokenizer.ggml.merges is not a list of strings",
				    nf_gguf_path(g));
	if (has_merges && (err = str_array(&v->merges, g, "tokenizer.ggml.merges", n_merges)))
		return err;
	sp->tokens = v->tokens;
	sp->scores = v->scores;
	sp->types = v->types;
	sp->merges = v->merges;
	sp->n_merges = has_merges ? (size_t)n_merges : 0;
	return 0;
}

static int read_specials(nf_tokenizer_spec *sp, gguf_vocab *v, const nf_gguf *g)
{
	bool spm = sp->kind == NF_TOK_SPM;
	int err;
	if ((err = id_key(&sp->bos_id, g, "tokenizer.ggml.bos_token_id")) ||
	    (err = id_key(&sp->eos_id, g, "tokenizer.ggml.eos_token_id")) ||
	    (err = id_key(&sp->unk_id, g, "tokenizer.ggml.unknown_token_id")) ||
	    (err = id_key(&sp->pad_id, g, "tokenizer.ggml.padding_token_id")) ||
	    /* llama.cpp's defaults: SentencePiece vocabularies add BOS and a space prefix */
	    (err = bool_key(&sp->add_bos, g, "tokenizer.ggml.add_bos_token", spm)) ||
	    (err = bool_key(&sp->add_eos, g, "tokenizer.ggml.add_eos_token", false)) ||
	    (err = bool_key(&sp->add_space_prefix, g, "tokenizer.ggml.add_space_prefix", spm)) ||
	    (err = str_key(&v->pre, g, "tokenizer.ggml.pre")) ||
	    (err = str_key(&v->chat_template, g, "tokenizer.chat_template")))
		return err;
	sp->pre = v->pre;
	sp->chat_template = v->chat_template;
	return 0;
}

int nf_tokenizer_from_gguf(nf_tokenizer **out, const nf_gguf *g, int vocab_size)
{
	nf_tokenizer_spec sp = {0};
	gguf_vocab v = {0};
	int err;

	*out = NULL;
	if ((err = read_vocab(&sp, &v, g)) || (err = read_specials(&sp, &v, g)))
		goto done;
	if (vocab_size > 0 && sp.n_tokens != vocab_size) {
		err = nf_error_set(NF_EINPUT, "%s: tokenizer.ggml.tokens has %d tokens, the model %d",
				   nf_gguf_path(g), sp.n_tokens, vocab_size);
		goto done;
	}
	err = nf_tokenizer_new(out, &sp, nf_gguf_path(g));
done:
	vocab_release(&v);
	return err;
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

/* The tokenizer of the folder a file is in (its tokenizer.json and
 * tokenizer_config.json). */
static int load_parent_dir(nf_tokenizer **out, const char *file, int vocab_size)
{
	const char *slash = strrchr(file, '/');
	char *dir = slash ? strndup(file, (size_t)(slash - file)) : strdup(".");
	if (!dir)
		return nf_error_set(NF_ENOMEM, "out of memory");
	int err = nf_tokenizer_load_dir(out, *dir ? dir : "/", vocab_size);
	free(dir);
	return err;
}

int nf_ckpt_load_tokenizer(nf_tokenizer **out, const char *model_path, nf_ckpt_format fmt,
			   const char *tokenizer_path, int vocab_size)
{
	*out = NULL;
	if (fmt == NF_CKPT_AUTO)
		fmt = nf_ckpt_sniff(model_path);
	if (tokenizer_path) {
		if (nf_fs_is_dir(tokenizer_path))
			return nf_tokenizer_load_dir(out, tokenizer_path, vocab_size);
		if (has_suffix(tokenizer_path, "tokenizer.json"))
			return load_parent_dir(out, tokenizer_path, vocab_size);
		return nf_tokenizer_load(out, tokenizer_path, vocab_size);
	}
	if (fmt == NF_CKPT_GGUF) {
		nf_gguf *g = NULL;
		int err = nf_gguf_open(&g, model_path);
		if (!err)
			err = nf_tokenizer_from_gguf(out, g, vocab_size);
		nf_gguf_free(g);
		return err;
	}
	if (fmt == NF_CKPT_HF)
		return nf_fs_is_dir(model_path) ? nf_tokenizer_load_dir(out, model_path, vocab_size)
						: load_parent_dir(out, model_path, vocab_size);
	return nf_error_set(NF_EINPUT, "%s: a llama2.c checkpoint does not hold its tokenizer; "
			    "name one", model_path);
}
