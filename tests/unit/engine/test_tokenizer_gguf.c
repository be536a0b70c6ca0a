/*
 * test_tokenizer_gguf.c - tokenizers from GGUF metadata
 * (engine/tokenizer_gguf.c): SmolLM2's byte-level BPE with its control
 * tokens, end-of-turn tokens and chat template; stories260K's vocabulary
 * written as a SentencePiece GGUF ("llama" model: "▁" for space, scores,
 * byte tokens) encodes every text of a corpus exactly as llama2.c's own
 * tokenizer.bin does; and lying metadata is refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/gguf.h"
#include "engine/gguf_write.h"
#include "engine/tokenizer.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"

static char root[1024];
static const char *shared;

static void smollm2(void)
{
	char path[1024];
	nf_gguf *g = NULL;
	nf_tokenizer *t = NULL;
	int *ids = NULL;
	size_t n = 0;
	snprintf(path, sizeof path, "%s/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf",
		 shared);
	if (!nf_fs_exists(path)) {
		skip("no %s", path);
		return;
	}
	is_int(nf_gguf_open(&g, path), 0, "SmolLM2 opens");
	is_int(nf_tokenizer_from_gguf(&t, g, 49152), 0, "its tokenizer loads %s", nf_error_last());
	if (!t) {
		nf_gguf_free(g);
		return;
	}
	ok(nf_tokenizer_kind(t) == NF_TOK_BPE && nf_tokenizer_vocab_size(t) == 49152,
	   "byte-level BPE of 49,152 tokens");
	ok(nf_tokenizer_bos(t) == 1 && nf_tokenizer_eos(t) == 2, "BOS 1, EOS 2");
	ok(nf_tokenizer_is_eog(t, 2) && nf_tokenizer_is_control(t, 1), "<|im_end|> ends a turn");
	ok(nf_tokenizer_chat_template(t) && strstr(nf_tokenizer_chat_template(t), "<|im_start|>"),
	   "the ChatML template came along");
	const char *chat = "<|im_start|>user\nHi<|im_end|>";
	is_int(nf_tokenizer_encode(t, chat, strlen(chat), NF_TOK_ADD_SPECIAL | NF_TOK_PARSE_SPECIAL,
				   &ids, &n), 0, "encode a ChatML turn");
	ok(n >= 3 && ids[0] == 1 && ids[n - 1] == 2, "control tokens whole, no BOS added");
	free(ids);
	nf_tokenizer *other = NULL;
	is_int(nf_tokenizer_from_gguf(&other, g, 49153), NF_EINPUT, "a model of another vocabulary "
	       "size refuses it");
	ok(other == NULL, "and gets no tokenizer");
	nf_gguf_free(g);
	nf_tokenizer_free(t);
}

/* tok512.bin parsed here: score and bytes of every token. */
typedef struct l2c_vocab {
	int n;
	char **s;
	size_t *len;
	float *score;
} l2c_vocab;

static int l2c_read(l2c_vocab *v, const char *path, int n)
{
	char *buf = NULL;
	size_t blen, off = 4;
	if (nf_fs_read_file(&buf, &blen, path, 1 << 20))
		return -1;
	v->n = n;
	v->s = calloc((size_t)n, sizeof *v->s);
	v->len = calloc((size_t)n, sizeof *v->len);
	v->score = calloc((size_t)n, sizeof *v->score);
	for (int i = 0; i < n && v->s && v->len && v->score; i++) {
		int32_t l;
		memcpy(&v->score[i], buf + off, 4);
		memcpy(&l, buf + off + 4, 4);
		off += 8;
		v->s[i] = malloc((size_t)l * 3 + 1);
		/* SentencePiece spells a space "▁" (U+2581); llama2.c's export spells it " " */
		size_t k = 0;
		for (int j = 0; j < l; j++) {
			if (buf[off + j] == ' ') {
				memcpy(v->s[i] + k, "\xe2\x96\x81", 3);
				k += 3;
			} else {
				v->s[i][k++] = buf[off + j];
			}
		}
		v->s[i][k] = '\0'; /* the writer takes NUL-terminated strings */
		v->len[i] = k;
		off += (size_t)l;
	}
	free(buf);
	return 0;
}

static void l2c_free(l2c_vocab *v)
{
	for (int i = 0; i < v->n; i++)
		free(v->s[i]);
	free(v->s);
	free(v->len);
	free(v->score);
}

/* A "llama" (SentencePiece) GGUF of v: ids 0-2 <unk> <s> </s>, 3-258 bytes. */
static int write_spm_gguf(const char *path, const l2c_vocab *v, const char *model)
{
	nf_gguf_writer *w = NULL;
	const char **toks = calloc((size_t)v->n, sizeof *toks);
	int32_t *types = calloc((size_t)v->n, sizeof *types);
	int err = !toks || !types || nf_gguf_writer_new(&w);
	for (int i = 0; i < v->n && !err; i++) {
		toks[i] = v->s[i];
		types[i] = i == 0 ? NF_TOKTYPE_UNKNOWN : i < 3 ? NF_TOKTYPE_CONTROL
				 : i < 259 ? NF_TOKTYPE_BYTE : NF_TOKTYPE_NORMAL;
	}
	if (!err)
		err = nf_gguf_writer_add_str(w, "tokenizer.ggml.model", model, strlen(model)) ||
		      nf_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, (uint64_t)v->n) ||
		      nf_gguf_writer_add_array(w, "tokenizer.ggml.scores", NF_GGUF_F32, v->score,
					       (uint64_t)v->n) ||
		      nf_gguf_writer_add_array(w, "tokenizer.ggml.token_type", NF_GGUF_I32, types,
					       (uint64_t)v->n) ||
		      nf_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1) ||
		      nf_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2) ||
		      nf_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0) ||
		      nf_gguf_writer_write(w, path);
	nf_gguf_writer_free(w);
	free(toks);
	free(types);
	return err;
}

static int same_ids(const nf_tokenizer *a, const nf_tokenizer *b, const char *text)
{
	int *x = NULL, *y = NULL, same;
	size_t nx = 0, ny = 0;
	same = !nf_tokenizer_encode(a, text, strlen(text), NF_TOK_ADD_SPECIAL, &x, &nx) &&
	       !nf_tokenizer_encode(b, text, strlen(text), NF_TOK_ADD_SPECIAL, &y, &ny) && nx == ny &&
	       memcmp(x, y, nx * sizeof *x) == 0;
	if (!same)
		diag("\"%s\": %zu ids against %zu", text, nx, ny);
	free(x);
	free(y);
	return same;
}

static void sentencepiece(void)
{
	static const char *const corpus[] = {
		"Once upon a time, there was a little girl named Lily.",
		"  two leading spaces and   runs",
		"Tom said: \"Let's go!\"\nThey went.",
		"numbers 12345 and 3.14",
		"caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 (byte fallback)",
		"",
		"x",
	};
	char tok[1024], path[1200];
	l2c_vocab v = {0};
	nf_tokenizer *ref = NULL, *t = NULL;
	nf_gguf *g = NULL;
	snprintf(tok, sizeof tok, "%s/models/stories260K/tok512.bin", shared);
	snprintf(path, sizeof path, "%s/spm.gguf", root);
	if (!nf_fs_exists(tok)) {
		skip("no %s", tok);
		return;
	}
	ok(l2c_read(&v, tok, 512) == 0 && write_spm_gguf(path, &v, "llama") == 0,
	   "tok512 written as a SentencePiece GGUF");
	is_int(nf_tokenizer_load(&ref, tok, 512), 0, "tok512.bin loads");
	is_int(nf_gguf_open(&g, path), 0, "the GGUF opens");
	is_int(nf_tokenizer_from_gguf(&t, g, 512), 0, "its tokenizer loads %s", nf_error_last());
	ok(t && nf_tokenizer_kind(t) == NF_TOK_SPM, "as SentencePiece BPE");
	for (size_t i = 0; t && ref && i < sizeof corpus / sizeof corpus[0]; i++)
		ok(same_ids(ref, t, corpus[i]), "same ids as llama2.c's tokenizer on corpus text %zu", i);
	nf_gguf_free(g);
	nf_tokenizer_free(t);
	g = NULL;
	t = NULL;
	ok(write_spm_gguf(path, &v, "bert") == 0 && nf_gguf_open(&g, path) == 0,
	   "a GGUF naming another tokenizer model");
	is_int(nf_tokenizer_from_gguf(&t, g, 512), NF_EUNSUPPORTED, "is refused: %s", nf_error_last());
	nf_gguf_free(g);
	nf_tokenizer_free(ref);
	l2c_free(&v);
}

int main(void)
{
	shared = tap_env("NF_SHARED", "../shared");
	snprintf(root, sizeof root, "%s/tmp/test_tok_gguf.%d", tap_env("NF_BUILD", "build"),
		 (int)getpid());
	if (nf_fs_mkdir_p(root, 0755))
		return 1;
	smollm2();
	sentencepiece();
	nf_fs_remove_tree(root);
	return done_testing();
}
