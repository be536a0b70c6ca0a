/*
 * tokenizer.h - the llama2.c tokenizer format and SentencePiece-style BPE:
 *   int32 max_token_length, then per token: float32 score, int32 len, len bytes.
 * BOS = 1, EOS = 2; byte-fallback tokens <0xXX> have id byte + 3.
 */
#ifndef NF_ENGINE_TOKENIZER_H
#define NF_ENGINE_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>

#define NF_TOKEN_BOS 1
#define NF_TOKEN_EOS 2

typedef struct nf_tokenizer nf_tokenizer;

/* Load and validate; vocab_size comes from the model.  NF_EINPUT with
 * "PATH: offset N: what is wrong" on damaged input. */
int nf_tokenizer_load(nf_tokenizer **out, const char *path, int vocab_size);
/* The same from bytes in memory (what is the name used in messages). */
int nf_tokenizer_load_mem(nf_tokenizer **out, const void *data, size_t len, int vocab_size,
			  const char *what);
void nf_tokenizer_free(nf_tokenizer *t);

int nf_tokenizer_vocab_size(const nf_tokenizer *t);

/* Encode UTF-8 text (len bytes, need not be NUL-terminated; invalid UTF-8
 * goes through byte fallback).  *tokens is a new array the caller frees. */
int nf_tokenizer_encode(const nf_tokenizer *t, const char *text, size_t len, bool bos,
			bool eos, int **tokens, size_t *n_tokens);

/* The bytes `token` stands for when it follows `prev` (leading space after
 * BOS stripped, <0xXX> turned into its byte).  Points into the tokenizer
 * (thread-safe, valid while it lives); *len is set.  Unknown ids give "". */
const char *nf_tokenizer_decode(const nf_tokenizer *t, int prev, int token, size_t *len);

#endif
