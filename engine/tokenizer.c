/*
 * tokenizer.c - what every kind shares: encoding (BOS, tokens matched whole,
 * then per segment normalizer, pre-tokenizer and BPE; llama2.c's own path),
 * decoding from the pieces computed at load, the queries, freeing, and
 * finding a tokenizer in a folder.
 */
#include "engine/tok_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define TOK_MAX_JSON (256u << 20)   /* bound on tokenizer.json */
#define TOK_MAX_CONFIG (16u << 20)  /* bound on tokenizer_config.json */

void nf_tokenizer_free(nf_tokenizer *t)
{
	if (!t)
		return;
	free(t->tok);
	free(t->len);
	free(t->blob);
	free(t->type);
	free(t->scores);
	free(t->map.slot);
	free(t->pairs.slot);
	free(t->merge_list);
	for (size_t k = 0; k < t->n_norms; k++) {
		free(t->norms[k].a);
		free(t->norms[k].b);
	}
	for (size_t k = 0; k < t->n_pres; k++)
		tok_pre_release(&t->pres[k]);
	for (size_t k = 0; k < t->n_decs; k++) {
		free(t->decs[k].a);
		free(t->decs[k].b);
	}
	free(t->dec);
	free(t->dec_len);
	free(t->dec_blob);
	free(t->added);
	free(t->aflags);
	free(t->eog);
	free(t->chat_template);
	free(t->bos_text);
	free(t->eos_text);
	free(t);
}

/* ------------------------------------------------------- queries */

nf_tok_kind nf_tokenizer_kind(const nf_tokenizer *t) { return t->kind; }
int nf_tokenizer_vocab_size(const nf_tokenizer *t) { return t->n; }
int nf_tokenizer_bos(const nf_tokenizer *t) { return t->bos; }
int nf_tokenizer_eos(const nf_tokenizer *t) { return t->eos; }
const char *nf_tokenizer_chat_template(const nf_tokenizer *t) { return t->chat_template; }
const char *nf_tokenizer_bos_text(const nf_tokenizer *t) { return t->bos_text; }
const char *nf_tokenizer_eos_text(const nf_tokenizer *t) { return t->eos_text; }

bool nf_tokenizer_is_eog(const nf_tokenizer *t, int id)
{
	return id >= 0 && id < t->n && t->eog[id];
}

bool nf_tokenizer_is_control(const nf_tokenizer *t, int id)
{
	return id >= 0 && id < t->n && t->type[id] == NF_TOKTYPE_CONTROL;
}

/* Control and unknown tokens: skipped when decoding, matched only on request. */
static bool is_special(const nf_tokenizer *t, int id)
{
	return t->type[id] == NF_TOKTYPE_CONTROL || t->type[id] == NF_TOKTYPE_UNKNOWN;
}

const char *nf_tokenizer_token(const nf_tokenizer *t, int id, size_t *len)
{
	if (id < 0 || id >= t->n)
		return NULL;
	if (len)
		*len = t->len[id];
	return t->tok[id];
}

/* ------------------------------------------------------- encoding */

int tok_ids_push(tok_ids *v, int id)
{
	if (v->n == v->cap) {
		size_t nc = v->cap ? v->cap * 2 : 64;
		int *a;
		if (nc > SIZE_MAX / sizeof(int) || !(a = realloc(v->a, nc * sizeof(int))))
			return nf_error_set(NF_ENOMEM, "encode: out of memory");
		v->a = a;
		v->cap = nc;
	}
	v->a[v->n++] = id;
	return 0;
}

typedef struct enc {
	const nf_tokenizer *t;
	tok_work w;
	tok_ids out;
} enc;

static int word_cb(void *ctx, const char *w, size_t wl)
{
	enc *e = ctx;
	return tok_encode_word(e->t, &e->w, w, wl, &e->out);
}

/* Text between two tokens matched whole: normalize, split, BPE each word. */
static int encode_segment(enc *e, const char *s, size_t len, bool first)
{
	char *norm = NULL;
	size_t nl;
	int err;
	if (len == 0)
		return 0;
	if ((err = tok_normalize(e->t, s, len, first, &norm, &nl)))
		return err;
	err = tok_pretokenize(e->t, norm, nl, word_cb, e);
	free(norm);
	return err;
}

/* The first token matched whole at or after `from` (longest at the leftmost
 * position, as Hugging Face's Aho-Corasick automaton finds it), or -1;
 * control tokens only with NF_TOK_PARSE_SPECIAL. */
static int next_added(const nf_tokenizer *t, const char *s, size_t len, size_t from,
		      unsigned flags, size_t *at)
{
	for (size_t i = from; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		int k = t->added_first[c];
		if (k < 0)
			continue;
		for (size_t j = (size_t)k; j < t->n_added; j++) {
			int id = t->added[j];
			if ((unsigned char)t->tok[id][0] != c)
				break;
			if (is_special(t, id) && !(flags & NF_TOK_PARSE_SPECIAL))
				continue;
			if (t->len[id] <= len - i && memcmp(s + i, t->tok[id], t->len[id]) == 0) {
				*at = i;
				return id;
			}
		}
	}
	return -1;
}

/* The span [*start, *stop) a match of `id` at [*start, *stop) takes, as
 * Hugging Face's AddedVocabulary decides: false when a single_word token sits
 * inside a word (the match is dropped, and the search goes on after it);
 * lstrip takes the White_Space before it (not before `pos`, where the
 * previous token ended), rstrip the White_Space after it. */
static bool added_span(const nf_tokenizer *t, int id, const char *s, size_t len, size_t pos,
		       size_t *start, size_t *stop)
{
	unsigned f = t->aflags ? t->aflags[id] : 0;
	if ((f & TOK_ADDED_SINGLE_WORD) &&
	    (tok_word_before(s, *start) || tok_word_at(s, len, *stop)))
		return false;
	if (f & TOK_ADDED_LSTRIP) {
		size_t ls = tok_space_before(s, *start);
		*start = ls > pos ? ls : pos;
	}
	if (f & TOK_ADDED_RSTRIP)
		*stop = tok_space_after(s, len, *stop);
	return true;
}

static int encode_text(enc *e, const char *s, size_t len, unsigned flags)
{
	const nf_tokenizer *t = e->t;
	size_t pos = 0, from = 0, start, stop;
	int err, id;
	if (t->kind == NF_TOK_LLAMA2C)
		return tok_llama2c_encode(t, &e->w, s, len, &e->out);
	while ((id = next_added(t, s, len, from, flags, &start)) >= 0) {
		stop = start + t->len[id];
		if (!added_span(t, id, s, len, pos, &start, &stop)) {
			from = stop;
			continue;
		}
		if ((err = encode_segment(e, s + pos, start - pos, pos == 0)) ||
		    (err = tok_ids_push(&e->out, id)))
			return err;
		pos = from = stop;
	}
	return encode_segment(e, s + pos, len - pos, pos == 0);
}

int nf_tokenizer_encode(const nf_tokenizer *t, const char *text, size_t len, unsigned flags,
			int **tokens, size_t *n_tokens)
{
	enc e = {.t = t};
	bool bos = (flags & NF_TOK_ADD_BOS) || ((flags & NF_TOK_ADD_SPECIAL) && t->add_bos);
	bool eos = (flags & NF_TOK_ADD_EOS) || ((flags & NF_TOK_ADD_SPECIAL) && t->add_eos);
	int err = 0;

	*tokens = NULL;
	*n_tokens = 0;
	if (!text && len)
		return nf_error_set(NF_EINPUT, "encode: no text");
	if ((bos && t->bos < 0) || (eos && t->eos < 0))
		return nf_error_set(NF_EINPUT, "encode: the tokenizer has no %s token",
				    bos && t->bos < 0 ? "BOS" : "EOS");
	if ((bos && (err = tok_ids_push(&e.out, t->bos))) ||
	    (err = encode_text(&e, text, len, flags)) ||
	    (eos && (err = tok_ids_push(&e.out, t->eos))))
		goto done;
	if (!e.out.a && (err = tok_ids_push(&e.out, 0)) == 0)
		e.out.n = 0; /* an empty result is still an array the caller frees */
	if (err)
		goto done;
	*tokens = e.out.a;
	*n_tokens = e.out.n;
	e.out.a = NULL;
done:
	free(e.out.a);
	tok_work_release(&e.w);
	return err;
}

/* ------------------------------------------------------- decoding */

static const char *decode_llama2c(const nf_tokenizer *t, int prev, int token, size_t *len)
{
	const char *s = t->tok[token];
	size_t l = t->len[token];
	if (prev == NF_TOKEN_BOS && l > 0 && s[0] == ' ') {
		s++;
		l--;
	}
	if (l == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>') {
		int b = 0, ok = 1;
		for (int i = 3; i < 5; i++) {
			char c = s[i];
			int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 :
				c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			ok &= d >= 0;
			b = b * 16 + d;
		}
		if (ok) {
			*len = 1;
			return t->byte_pieces[b];
		}
	}
	*len = l;
	return s;
}

const char *nf_tokenizer_decode_flags(const nf_tokenizer *t, int prev, int token,
				      unsigned flags, size_t *len)
{
	const char *s;
	size_t l;
	bool special = flags & NF_TOK_DECODE_SPECIAL;
	*len = 0;
	if (token < 0 || token >= t->n)
		return "";
	if (is_special(t, token) && !special)
		return "";
	if (t->kind == NF_TOK_LLAMA2C)
		return decode_llama2c(t, prev, token, len);
	s = t->dec[token];
	l = t->dec_len[token];
	/* the decoder drops the space its normalizer put before the first word;
	 * a skipped BOS does not count as a first token */
	if (prev < 0 || (prev == t->bos && !special))
		for (size_t k = 0; k < t->strip_first && l > 0 && s[0] == ' '; k++) {
			s++;
			l--;
		}
	*len = l;
	return s;
}

const char *nf_tokenizer_decode(const nf_tokenizer *t, int prev, int token, size_t *len)
{
	return nf_tokenizer_decode_flags(t, prev, token, 0, len);
}

/* ------------------------------------------------------- from a folder */

static int load_hf_dir(nf_tokenizer **out, const char *json_path, const char *cfg_path)
{
	char *json = NULL, *cfg = NULL;
	size_t jl = 0, cl = 0;
	int err;
	if ((err = nf_fs_read_file(&json, &jl, json_path, TOK_MAX_JSON)))
		goto done;
	if (nf_fs_exists(cfg_path) && (err = nf_fs_read_file(&cfg, &cl, cfg_path, TOK_MAX_CONFIG)))
		goto done;
	err = nf_tokenizer_load_hf_mem(out, json, jl, cfg, cl, json_path);
done:
	free(json);
	free(cfg);
	return err;
}

int nf_tokenizer_load_dir(nf_tokenizer **out, const char *dir, int vocab_size)
{
	char *json = nf_path_join(dir, "tokenizer.json");
	char *cfg = nf_path_join(dir, "tokenizer_config.json");
	char *bin = nf_path_join(dir, "tokenizer.bin");
	int err;
	*out = NULL;
	if (!json || !cfg || !bin)
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", dir);
	else if (nf_fs_exists(json))
		err = load_hf_dir(out, json, cfg);
	else if (nf_fs_exists(bin))
		err = nf_tokenizer_load(out, bin, vocab_size);
	else
		err = nf_error_set(NF_ENOTFOUND, "%s: no tokenizer.json or tokenizer.bin", dir);
	free(json);
	free(cfg);
	free(bin);
	return err;
}
