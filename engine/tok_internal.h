/*
 * tok_internal.h - what the tokenizer's files share: the nf_tokenizer
 * struct, the string->id and pair->merge hash maps, the normalizer,
 * pre-tokenizer and decoder steps (kept as Hugging Face names them, so the
 * writer can spell them back), and the functions each file offers the others.
 * Not part of the engine's interface.
 */
#ifndef NF_ENGINE_TOK_INTERNAL_H
#define NF_ENGINE_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/tokenizer.h"

#define TOK_MAX_VOCAB (1 << 22)     /* bound on any vocabulary */
#define TOK_MAX_MERGES (1 << 23)    /* bound on a merge list */
#define TOK_MAX_TOKEN_BYTES 4096    /* bound on one token's bytes (non-llama2.c) */
#define TOK_MAX_STEPS 16            /* bound on normalizer/pre-tokenizer/decoder steps */

/* string -> lowest id with those bytes (open addressing, power-of-two size). */
typedef struct tok_map {
	int *slot; /* -1 empty, else an id */
	size_t mask;
} tok_map;

/* (left id, right id) -> merge rank and the merged id. */
typedef struct tok_pair {
	uint64_t key; /* (left << 32 | right) + 1; 0 = empty */
	int rank, id;
} tok_pair;

typedef struct tok_pairs {
	tok_pair *slot;
	size_t mask, n;
} tok_pairs;

enum tok_norm_kind { NORM_PREPEND = 1, NORM_REPLACE, NORM_NFC, NORM_NFD, NORM_NFKC, NORM_NFKD,
		     NORM_LOWERCASE, NORM_STRIP };
typedef struct tok_norm {
	int kind;
	char *a, *b; /* prepend: a; replace: a -> b (owned, NUL-terminated) */
	bool left, right; /* strip */
} tok_norm;

/* Added-token flags (Hugging Face's AddedToken), per id in nf_tokenizer.aflags. */
enum { TOK_ADDED_LSTRIP = 1, TOK_ADDED_RSTRIP = 2, TOK_ADDED_SINGLE_WORD = 4 };

enum tok_pre_kind { PRE_SPLIT = 1, PRE_DIGITS, PRE_BYTELEVEL, PRE_METASPACE };
enum tok_behavior { SPLIT_ISOLATED = 1, SPLIT_REMOVED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT };
enum tok_scheme { META_ALWAYS = 1, META_FIRST, META_NEVER };
typedef struct tok_pre {
	int kind;
	char *pattern;      /* split: the regex or string; metaspace: the replacement (owned) */
	int behavior;       /* split */
	bool invert;        /* split: the pattern matches the pieces kept as words */
	bool individual;    /* digits */
	bool prefix_space;  /* bytelevel: add_prefix_space */
	bool use_regex;     /* bytelevel: split by GPT-2's regex; split: pattern is a regex */
	int scheme;         /* metaspace: prepend_scheme */
	bool split;         /* metaspace */
	void *re;           /* compiled pcre2_code (split, digits, bytelevel with regex) */
} tok_pre;

enum tok_dec_kind { DEC_BYTELEVEL = 1, DEC_REPLACE, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP,
		    DEC_METASPACE };
typedef struct tok_dec {
	int kind;
	char *a, *b;  /* replace a -> b; strip: a is the content */
	int start, stop;
} tok_dec;

struct nf_tokenizer {
	nf_tok_kind kind;
	int n;
	char **tok;          /* n NUL-terminated strings (owned, one allocation: blob) */
	uint32_t *len;
	char *blob;
	uint8_t *type;       /* NF_TOKTYPE_* */
	float *scores;       /* merge by score of the merged token (spm, llama2.c); else NULL */
	tok_map map;
	tok_pairs pairs;     /* merge by rank (bpe, spm from tokenizer.json) */
	int (*merge_list)[2];/* the merges in rank order (for the writer) */
	size_t n_merges;
	size_t max_len;      /* longest token in bytes */
	bool byte_level, byte_fallback, fuse_unk, ignore_merges;
	int unk, bos, eos, pad;
	bool add_bos, add_eos;
	int byte_tok[256];   /* byte-level: the token of each byte's character; spm: <0xXX> */
	tok_norm norms[TOK_MAX_STEPS];
	size_t n_norms;
	tok_pre pres[TOK_MAX_STEPS];
	size_t n_pres;
	tok_dec decs[TOK_MAX_STEPS];
	size_t n_decs;
	size_t strip_first;  /* leading spaces the decoder drops from the first token */
	char **dec;          /* each token's decoded bytes (owned, blob: dec_blob) */
	uint32_t *dec_len;
	char *dec_blob;
	int *added;          /* ids matched whole before BPE, longest first */
	size_t n_added;
	int added_first[256];/* index into added of the first token starting with a byte, -1 */
	uint8_t *aflags;     /* TOK_ADDED_* per id, or NULL when no token has any */
	uint8_t *eog;
	char *chat_template, *bos_text, *eos_text;
	char byte_pieces[256][2];
};

/* tokenizer.c */
int tok_alloc(nf_tokenizer **out, nf_tok_kind kind, int n, const char *what);
/* Copy every token's bytes (strs[i], lens[i]) into one blob. */
int tok_set_tokens(nf_tokenizer *t, const char *const *strs, const size_t *lens,
		   const char *what);
int tok_lookup(const nf_tokenizer *t, const char *s, size_t len);
/* Index the vocabulary; strict: duplicates are an error (everything but llama2.c). */
int tok_index(nf_tokenizer *t, bool strict, const char *what);
/* Add merges by rank; NF_EINPUT when a side or the result is not a token. */
/* The merge of pair (l, r), or NULL. */
const tok_pair *tok_pair_find(const nf_tokenizer *t, int l, int r);
int tok_set_merges(nf_tokenizer *t, const nf_tok_str *left, const nf_tok_str *right, size_t n,
		   const char *what);
/* Tables every kind needs once the steps are set: byte tokens, decoded pieces,
 * added tokens, end-of-generation ids. */
int tok_finish(nf_tokenizer *t, const char *what);
char *tok_strndup(const char *s, size_t len);

/* Growable id array. */
typedef struct tok_ids {
	int *a;
	size_t n, cap;
} tok_ids;
int tok_ids_push(tok_ids *v, int id);

/* tok_bpe.c: merging symbols.  Scratch reused across the words of one encode. */
typedef struct tok_work {
	int *ids, *next, *prev;
	void *heap;
	size_t cap, heap_cap;
	char *buf; /* two tokens' bytes, for score lookups */
} tok_work;
void tok_work_release(tok_work *w);
int tok_work_reserve(tok_work *w, size_t n_syms, size_t max_len);
/* Merge w->ids[0..n) in place (best merge first, leftmost on ties) and push
 * the result onto out. */
int tok_merge_emit(const nf_tokenizer *t, tok_work *w, size_t n, tok_ids *out);
/* One word of normalized, pre-tokenized text (spm and bpe kinds). */
int tok_encode_word(const nf_tokenizer *t, tok_work *w, const char *s, size_t len,
		    tok_ids *out);
/* The byte-level map: the code point byte b stands for. */
unsigned tok_byte_to_cp(unsigned b);
/* Its inverse: the byte of a code point, or -1. */
int tok_cp_to_byte(unsigned cp);

/* tok_llama2c.c */
int tok_llama2c_encode(const nf_tokenizer *t, tok_work *w, const char *text, size_t len,
		       tok_ids *out);

/* tok_pretok.c: normalizers and pre-tokenizers over one segment of text. */
/* Apply the normalizers (and a leading Metaspace) to s; *out is new (caller frees). */
int tok_normalize(const nf_tokenizer *t, const char *s, size_t len, bool first, char **out,
		  size_t *out_len);
/* Split s into words and call fn on each. */
int tok_pretokenize(const nf_tokenizer *t, const char *s, size_t len,
		    int (*fn)(void *ctx, const char *w, size_t wl), void *ctx);
/* Compile the regexes of the pre-tokenizer steps. */
int tok_pre_compile(nf_tokenizer *t, const char *what);
void tok_pre_release(tok_pre *p);
/* The split regexes of the families we know (NULL when unknown). */
const char *tok_regex_gpt2(void);
/* Set the pre-tokenizer steps of a GGUF tokenizer.ggml.pre name. */
int tok_pre_named(nf_tokenizer *t, const char *name, const char *what);
/* tok_unicode.c (libunistring).  NORM_NFC/NFD/NFKC/NFKD of s; *out is new. */
int tok_unicode_normalize(int kind, const char *s, size_t len, char **out, size_t *out_len);
/* Hugging Face's Lowercase of s; *out is new. */
int tok_unicode_lower(const char *s, size_t len, char **out, size_t *out_len);
/* Where the run of White_Space characters ending at s[at] starts. */
size_t tok_space_before(const char *s, size_t at);
/* Where the run of White_Space characters starting at s[at] ends (len: s's length). */
size_t tok_space_after(const char *s, size_t len, size_t at);
/* Whether the character before s[at] / at s[at] is a word character (\w). */
bool tok_word_before(const char *s, size_t at);
bool tok_word_at(const char *s, size_t len, size_t at);
/* Length of the valid UTF-8 character at s (1..4), or 0 when s[0..] is not one. */
size_t tok_utf8_len(const char *s, size_t len);

#endif
