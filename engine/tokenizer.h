/*
 * tokenizer.h - text <-> token ids for every model family the engine serves.
 *
 * Three kinds behind one type:
 *   - NF_TOK_LLAMA2C: llama2.c's tokenizer.bin (int32 max_token_length, then
 *     per token float32 score, int32 len, len bytes; BOS 1, EOS 2, <0xXX> at
 *     id byte + 3), encoded exactly as llama2.c's run.c does;
 *   - NF_TOK_SPM: SentencePiece-style BPE (Llama 2, Mistral): "▁" for space,
 *     merges by score (GGUF) or by merge rank (tokenizer.json), byte fallback;
 *   - NF_TOK_BPE: byte-level BPE (GPT-2 style): bytes mapped to printable
 *     characters, merges by rank (lower first), after the family's
 *     pre-tokenizer split (GPT-2, Llama-3, SmolLM/StarCoder, Qwen2).
 * Sources: tokenizer.bin, a Hugging Face tokenizer.json (+ tokenizer_config.json),
 * or arrays (nf_tokenizer_new: what the GGUF reader hands over).
 * A tokenizer is immutable once built: every query is thread-safe.
 */
#ifndef NF_ENGINE_TOKENIZER_H
#define NF_ENGINE_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>

/* llama2.c's fixed ids (the llama2.c kind only; others: nf_tokenizer_bos/eos). */
#define NF_TOKEN_BOS 1
#define NF_TOKEN_EOS 2

typedef struct nf_tokenizer nf_tokenizer;

typedef enum nf_tok_kind {
	NF_TOK_LLAMA2C = 1,
	NF_TOK_SPM = 2,
	NF_TOK_BPE = 3,
} nf_tok_kind;

/* Token types, numbered as GGUF's tokenizer.ggml.token_type. */
enum {
	NF_TOKTYPE_NORMAL = 1,
	NF_TOKTYPE_UNKNOWN = 2,
	NF_TOKTYPE_CONTROL = 3,
	NF_TOKTYPE_USER = 4,  /* user-defined: always matched whole, decoded as text */
	NF_TOKTYPE_UNUSED = 5,
	NF_TOKTYPE_BYTE = 6,  /* <0xXX> byte fallback */
};

/* Encode flags. */
enum {
	NF_TOK_ADD_SPECIAL = 1u << 0,   /* BOS/EOS where the model's tokenizer adds them
					 * (llama2.c: BOS) */
	NF_TOK_PARSE_SPECIAL = 1u << 1, /* control tokens in the text are matched whole;
					 * without it they are encoded as text */
	NF_TOK_ADD_BOS = 1u << 2,       /* BOS first, whatever the model says */
	NF_TOK_ADD_EOS = 1u << 3,       /* EOS last, whatever the model says */
};

/* Decode flags. */
enum {
	NF_TOK_DECODE_SPECIAL = 1u << 0, /* control tokens give their text, not "" */
};

/* A borrowed byte string. */
typedef struct nf_tok_str {
	const char *p;
	size_t len;
} nf_tok_str;

/* What nf_tokenizer_new builds from: every pointer is borrowed for the call
 * only (the tokenizer copies what it keeps). */
typedef struct nf_tokenizer_spec {
	nf_tok_kind kind;          /* NF_TOK_SPM or NF_TOK_BPE */
	int n_tokens;
	const nf_tok_str *tokens;  /* n_tokens strings as the vocabulary spells them
				    * ("▁the" for spm, "Ġthe" for byte-level bpe) */
	const float *scores;       /* spm: n_tokens merge scores; NULL for bpe */
	const int *types;          /* n_tokens NF_TOKTYPE_*; NULL: all normal */
	const nf_tok_str *merges;  /* bpe: "a b" strings, rank = index */
	size_t n_merges;
	const char *pre;           /* bpe pre-tokenizer, GGUF's tokenizer.ggml.pre:
				    * "default"/"gpt-2", "llama-bpe"/"llama3", "smollm",
				    * "starcoder", "qwen2"; NULL = "default" */
	int bos_id, eos_id, unk_id, pad_id; /* -1 for none */
	bool add_bos, add_eos;
	bool add_space_prefix;     /* spm: "▁" before the text */
	const char *chat_template; /* may be NULL */
} nf_tokenizer_spec;

/* Build from arrays; NF_EINPUT "what: ..." when the spec contradicts itself
 * (ids out of range, duplicate tokens, merges naming unknown tokens),
 * NF_EUNSUPPORTED for a pre-tokenizer we do not know. */
int nf_tokenizer_new(nf_tokenizer **out, const nf_tokenizer_spec *spec, const char *what);

/* llama2.c's tokenizer.bin; vocab_size comes from the model (0: as many tokens
 * as the file holds).  NF_EINPUT with "PATH: offset N: what is wrong" on
 * damaged input. */
int nf_tokenizer_load(nf_tokenizer **out, const char *path, int vocab_size);
/* The same from bytes in memory (what is the name used in messages). */
int nf_tokenizer_load_mem(nf_tokenizer **out, const void *data, size_t len, int vocab_size,
			  const char *what);

/* A Hugging Face tokenizer.json, with its tokenizer_config.json when config
 * is not NULL (config_len bytes).  NF_EINPUT "what: ..." for damaged JSON
 * (with line:col for syntax errors), NF_EUNSUPPORTED "what: PATH: ..." naming
 * the JSON path of a feature we do not implement. */
int nf_tokenizer_load_hf_mem(nf_tokenizer **out, const char *json, size_t json_len,
			     const char *config, size_t config_len, const char *what);

/* A folder: tokenizer.json (+ tokenizer_config.json) when present, else
 * tokenizer.bin (llama2.c; vocab_size from the model, 0 when unknown).
 * Engine folders and HF model folders both work. */
int nf_tokenizer_load_dir(nf_tokenizer **out, const char *dir, int vocab_size);

/* Write DIR/tokenizer.json and DIR/tokenizer_config.json (chat_template,
 * bos/eos tokens, add_bos_token/add_eos_token) for Hugging Face `tokenizers`;
 * loading them back gives the same ids.  NF_EUNSUPPORTED for the llama2.c kind. */
int nf_tokenizer_write_hf(const nf_tokenizer *t, const char *dir);

void nf_tokenizer_free(nf_tokenizer *t);

nf_tok_kind nf_tokenizer_kind(const nf_tokenizer *t);
int nf_tokenizer_vocab_size(const nf_tokenizer *t);
int nf_tokenizer_bos(const nf_tokenizer *t); /* -1 when none */
int nf_tokenizer_eos(const nf_tokenizer *t); /* -1 when none */
/* True for EOS and the end-of-turn tokens (<|im_end|>, <|eot_id|>, <|end|>,
 * <end_of_turn>, </s>, <|endoftext|>) that the vocabulary has. */
bool nf_tokenizer_is_eog(const nf_tokenizer *t, int id);
bool nf_tokenizer_is_control(const nf_tokenizer *t, int id);
/* The token as the vocabulary spells it ("Ġthe"); NULL for ids out of range. */
const char *nf_tokenizer_token(const nf_tokenizer *t, int id, size_t *len);
/* The chat template (Jinja source) or NULL; the BOS/EOS strings or NULL.
 * Owned by the tokenizer. */
const char *nf_tokenizer_chat_template(const nf_tokenizer *t);
const char *nf_tokenizer_bos_text(const nf_tokenizer *t);
const char *nf_tokenizer_eos_text(const nf_tokenizer *t);

/* Encode UTF-8 text (len bytes, need not be NUL-terminated; bytes that are
 * not UTF-8 go through byte fallback or the byte map) with NF_TOK_* flags.
 * *tokens is a new array the caller frees. */
int nf_tokenizer_encode(const nf_tokenizer *t, const char *text, size_t len, unsigned flags,
			int **tokens, size_t *n_tokens);

/* The bytes `token` stands for when it follows `prev` (-1: the first token):
 * byte-level tokens through the inverse byte map, <0xXX> as its byte, "▁" as
 * space, the leading space of the first word dropped where the model's
 * decoder drops it.  May be part of a UTF-8 character.  Control tokens give
 * "" (Hugging Face's skip_special_tokens).  Points into the tokenizer (valid
 * while it lives); *len is set.  Unknown ids give "". */
const char *nf_tokenizer_decode(const nf_tokenizer *t, int prev, int token, size_t *len);
/* The same with NF_TOK_DECODE_* flags. */
const char *nf_tokenizer_decode_flags(const nf_tokenizer *t, int prev, int token,
				      unsigned flags, size_t *len);

#endif
