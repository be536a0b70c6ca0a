/*
 * tok_vocab.c - a tokenizer's vocabulary: the token strings in one blob, the
 * string->id hash map, the merge table (pair -> rank, merged id), and the
 * tables derived once everything is set (byte tokens, decoded pieces, the
 * tokens matched whole, the end-of-generation ids).  Also the constructor
 * from arrays (nf_tokenizer_new) that the GGUF reader calls.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "engine/tok_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

char *tok_strndup(const char *s, size_t len)
{
	char *p = malloc(len + 1);
	if (p) {
		if (len)
			memcpy(p, s, len);
		p[len] = '\0';
	}
	return p;
}

static uint64_t hash_bytes(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static uint64_t hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

int tok_alloc(nf_tokenizer **out, nf_tok_kind kind, int n, const char *what)
{
	nf_tokenizer *t;
	*out = NULL;
	if (n <= 0 || n > TOK_MAX_VOCAB)
		return nf_error_set(NF_EINPUT, "%s: vocabulary of %d tokens is out of range (1..%d)",
				    what, n, TOK_MAX_VOCAB);
	if (!(t = calloc(1, sizeof(*t))))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", what);
	t->kind = kind;
	t->n = n;
	t->unk = t->bos = t->eos = t->pad = -1;
	if (!(t->tok = calloc((size_t)n, sizeof(*t->tok))) ||
	    !(t->len = calloc((size_t)n, sizeof(*t->len))) ||
	    !(t->type = malloc((size_t)n))) {
		nf_tokenizer_free(t);
		return nf_error_set(NF_ENOMEM, "%s: out of memory", what);
	}
	memset(t->type, NF_TOKTYPE_NORMAL, (size_t)n);
	for (int b = 0; b < 256; b++) {
		t->byte_pieces[b][0] = (char)b;
		t->byte_pieces[b][1] = '\0';
	}
	*out = t;
	return 0;
}

int tok_set_tokens(nf_tokenizer *t, const char *const *strs, const size_t *lens,
		   const char *what)
{
	size_t total = 0, off = 0;
	for (int i = 0; i < t->n; i++) {
		if (lens[i] > TOK_MAX_TOKEN_BYTES)
			return nf_error_set(NF_EINPUT, "%s: token %d is %zu bytes, more than %d", what,
					    i, lens[i], TOK_MAX_TOKEN_BYTES);
		if (!nf_size_add(&total, total, lens[i] + 1))
			return nf_error_set(NF_EINPUT, "%s: vocabulary too large", what);
	}
	if (!(t->blob = malloc(total ? total : 1)))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", what);
	for (int i = 0; i < t->n; i++) {
		t->tok[i] = t->blob + off;
		if (lens[i])
			memcpy(t->blob + off, strs[i], lens[i]);
		t->blob[off + lens[i]] = '\0';
		t->len[i] = (uint32_t)lens[i];
		off += lens[i] + 1;
		if (lens[i] > t->max_len)
			t->max_len = lens[i];
	}
	return 0;
}

int tok_lookup(const nf_tokenizer *t, const char *s, size_t len)
{
	size_t i = (size_t)hash_bytes(s, len) & t->map.mask;
	for (;;) {
		int id = t->map.slot[i];
		if (id < 0)
			return -1;
		if (t->len[id] == len && (len == 0 || memcmp(t->tok[id], s, len) == 0))
			return id;
		i = (i + 1) & t->map.mask;
	}
}

/* Insert ids in increasing order so the lowest id of duplicates stays, as
 * llama2.c's lookup finds it. */
int tok_index(nf_tokenizer *t, bool strict, const char *what)
{
	size_t cap = 16;
	while (cap < 2 * (size_t)t->n)
		cap *= 2;
	free(t->map.slot);
	if (!(t->map.slot = malloc(cap * sizeof(int))))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", what);
	memset(t->map.slot, 0xff, cap * sizeof(int));
	t->map.mask = cap - 1;
	for (int id = 0; id < t->n; id++) {
		size_t i = (size_t)hash_bytes(t->tok[id], t->len[id]) & t->map.mask;
		int dup = -1;
		while (t->map.slot[i] >= 0) {
			int o = t->map.slot[i];
			if (t->len[o] == t->len[id] && memcmp(t->tok[o], t->tok[id], t->len[id]) == 0) {
				dup = o;
				break;
			}
			i = (i + 1) & t->map.mask;
		}
		if (dup >= 0 && strict)
			return nf_error_set(NF_EINPUT, "%s: tokens %d and %d are both '%.40s'", what,
					    dup, id, t->tok[id]);
		if (dup < 0)
			t->map.slot[i] = id;
	}
	return 0;
}

/* The slot of pair (l, r): its own or the empty one where it would go. */
static tok_pair *pair_slot(const tok_pairs *p, int l, int r)
{
	uint64_t key = ((uint64_t)(uint32_t)l << 32 | (uint32_t)r) + 1;
	size_t i = (size_t)hash_u64(key) & p->mask;
	while (p->slot[i].key && p->slot[i].key != key)
		i = (i + 1) & p->mask;
	return &p->slot[i];
}

const tok_pair *tok_pair_find(const nf_tokenizer *t, int l, int r)
{
	if (!t->pairs.slot)
		return NULL;
	const tok_pair *s = pair_slot(&t->pairs, l, r);
	return s->key ? s : NULL;
}

static int merge_side(const nf_tokenizer *t, const nf_tok_str *s, size_t i, const char *side,
		      const char *what)
{
	int id = tok_lookup(t, s->p, s->len);
	if (id < 0)
		return nf_error_set(NF_EINPUT, "%s: merge %zu: its %s side '%.*s' is not a token",
				    what, i, side, (int)(s->len > 40 ? 40 : s->len), s->p);
	return id;
}

/* The first merge of a pair wins its rank, as Hugging Face's BPE builder keeps it. */
static int add_merge(nf_tokenizer *t, const nf_tok_str *l, const nf_tok_str *r, size_t i,
		     const char *what)
{
	int a, b, m;
	char *buf;
	if ((a = merge_side(t, l, i, "left", what)) < 0)
		return a;
	if ((b = merge_side(t, r, i, "right", what)) < 0)
		return b;
	if (l->len + r->len > t->max_len)
		return nf_error_set(NF_EINPUT, "%s: merge %zu: '%.*s%.*s' is not a token", what, i,
				    (int)l->len, l->p, (int)r->len, r->p);
	if (!(buf = malloc(l->len + r->len + 1)))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", what);
	memcpy(buf, l->p, l->len);
	memcpy(buf + l->len, r->p, r->len);
	m = tok_lookup(t, buf, l->len + r->len);
	free(buf);
	if (m < 0)
		return nf_error_set(NF_EINPUT, "%s: merge %zu: '%.*s%.*s' is not a token", what, i,
				    (int)l->len, l->p, (int)r->len, r->p);
	tok_pair *s = pair_slot(&t->pairs, a, b);
	if (s->key)
		return 0;
	s->key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
	s->rank = (int)t->n_merges;
	s->id = m;
	t->merge_list[t->n_merges][0] = a;
	t->merge_list[t->n_merges][1] = b;
	t->n_merges++;
	return 0;
}

int tok_set_merges(nf_tokenizer *t, const nf_tok_str *left, const nf_tok_str *right, size_t n,
		   const char *what)
{
	size_t cap = 16;
	int err;
	if (n > TOK_MAX_MERGES)
		return nf_error_set(NF_EINPUT, "%s: %zu merges, more than %d", what, n,
				    TOK_MAX_MERGES);
	while (cap < 2 * n)
		cap *= 2;
	if (!(t->pairs.slot = calloc(cap, sizeof(tok_pair))) ||
	    !(t->merge_list = malloc((n ? n : 1) * sizeof(*t->merge_list))))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", what);
	t->pairs.mask = cap - 1;
	for (size_t i = 0; i < n; i++)
		if ((err = add_merge(t, &left[i], &right[i], i, what)))
			return err;
	return 0;
}

/* ------------------------------------------------------- derived tables */

static bool is_byte_token(const char *s, size_t len, int *byte)
{
	unsigned v = 0;
	if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
		return false;
	for (int i = 3; i < 5; i++) {
		char c = s[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 :
			c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return false;
		v = v * 16 + (unsigned)d;
	}
	*byte = (int)v;
	return true;
}

static void set_byte_tokens(nf_tokenizer *t)
{
	for (int b = 0; b < 256; b++) {
		char buf[8];
		size_t l;
		if (t->byte_level) {
			unsigned cp = tok_byte_to_cp((unsigned)b);
			l = cp < 0x80 ? 1 : 2; /* the map's code points are all below 0x800 */
			if (l == 1)
				buf[0] = (char)cp;
			else {
				buf[0] = (char)(0xC0 | cp >> 6);
				buf[1] = (char)(0x80 | (cp & 0x3F));
			}
		} else {
			l = (size_t)snprintf(buf, sizeof(buf), "<0x%02X>", (unsigned)b);
		}
		t->byte_tok[b] = tok_lookup(t, buf, l);
	}
}

/* Replace every a in s[0..*len) by b, in a new string (caller frees). */
static char *replace_all(const char *s, size_t *len, const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), n = 0, cap, o = 0;
	char *out;
	for (size_t i = 0; la && i + la <= *len; i++)
		if (memcmp(s + i, a, la) == 0) {
			n++;
			i += la - 1;
		}
	if (!nf_size_mul(&cap, n, lb) || !nf_size_add(&cap, cap, *len + 1))
		return NULL;
	if (!(out = malloc(cap)))
		return NULL;
	for (size_t i = 0; i < *len;) {
		if (la && i + la <= *len && memcmp(s + i, a, la) == 0) {
			memcpy(out + o, b, lb);
			o += lb;
			i += la;
		} else {
			out[o++] = s[i++];
		}
	}
	out[o] = '\0';
	*len = o;
	return out;
}

/* Bytes of a byte-level token, or the token as it is when a character is
 * outside the map (Hugging Face's ByteLevel decoder does the same). */
static void bytelevel_decode(char *s, size_t *len)
{
	size_t o = 0;
	char *tmp = malloc(*len + 1);
	if (!tmp)
		return;
	for (size_t i = 0; i < *len;) {
		size_t cl = tok_utf8_len(s + i, *len - i);
		unsigned cp;
		int b;
		if (cl == 1)
			cp = (unsigned char)s[i];
		else if (cl == 2)
			cp = ((unsigned char)s[i] & 0x1Fu) << 6 | ((unsigned char)s[i + 1] & 0x3Fu);
		else
			cp = 0x110000; /* not in the map */
		if (cl == 0 || (b = tok_cp_to_byte(cp)) < 0) {
			free(tmp);
			return;
		}
		tmp[o++] = (char)b;
		i += cl;
	}
	memcpy(s, tmp, o);
	*len = o;
	free(tmp);
}

/* One token through the decoder steps; *out is new. */
static int decode_token(const nf_tokenizer *t, int id, char **out, size_t *len)
{
	size_t l = t->len[id];
	char *s = tok_strndup(t->tok[id], l), *r;
	int b;
	if (!s)
		return NF_ENOMEM;
	for (size_t k = 0; k < t->n_decs; k++) {
		const tok_dec *d = &t->decs[k];
		if (d->kind == DEC_BYTELEVEL) {
			bytelevel_decode(s, &l);
		} else if (d->kind == DEC_REPLACE || d->kind == DEC_METASPACE) {
			r = replace_all(s, &l, d->a, d->kind == DEC_REPLACE ? d->b : " ");
			free(s);
			if (!(s = r))
				return NF_ENOMEM;
		} else if (d->kind == DEC_BYTEFALLBACK && is_byte_token(s, l, &b)) {
			s[0] = (char)b;
			l = 1;
		}
	}
	*out = s;
	*len = l;
	return 0;
}

static int set_decoded(nf_tokenizer *t, const char *what)
{
	char **tmp = calloc((size_t)t->n, sizeof(char *));
	size_t total = 0, off = 0;
	int err = 0;
	if (!tmp || !(t->dec = calloc((size_t)t->n, sizeof(char *))) ||
	    !(t->dec_len = calloc((size_t)t->n, sizeof(uint32_t)))) {
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", what);
		goto done;
	}
	for (int i = 0; i < t->n; i++) {
		size_t l;
		if (decode_token(t, i, &tmp[i], &l) || l > UINT32_MAX ||
		    !nf_size_add(&total, total, l + 1)) {
			err = nf_error_set(NF_ENOMEM, "%s: out of memory", what);
			goto done;
		}
		t->dec_len[i] = (uint32_t)l;
	}
	if (!(t->dec_blob = malloc(total ? total : 1))) {
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", what);
		goto done;
	}
	for (int i = 0; i < t->n; i++) {
		t->dec[i] = t->dec_blob + off;
		memcpy(t->dec[i], tmp[i], (size_t)t->dec_len[i] + 1);
		off += (size_t)t->dec_len[i] + 1;
	}
done:
	for (int i = 0; tmp && i < t->n; i++)
		free(tmp[i]);
	free(tmp);
	return err;
}

static int cmp_added(const void *a, const void *b, void *ctx)
{
	const nf_tokenizer *t = ctx;
	int x = *(const int *)a, y = *(const int *)b;
	unsigned char fx = (unsigned char)t->tok[x][0], fy = (unsigned char)t->tok[y][0];
	if (fx != fy)
		return fx < fy ? -1 : 1;
	if (t->len[x] != t->len[y])
		return t->len[x] > t->len[y] ? -1 : 1; /* longest first: leftmost-longest match */
	return (x > y) - (x < y);
}

/* Control, unknown and user-defined tokens are matched whole before BPE. */
static int set_added(nf_tokenizer *t, const char *what)
{
	size_t n = 0;
	for (int i = 0; i < t->n; i++)
		if (t->len[i] > 0 && (t->type[i] == NF_TOKTYPE_CONTROL ||
				      t->type[i] == NF_TOKTYPE_USER ||
				      t->type[i] == NF_TOKTYPE_UNKNOWN))
			n++;
	if (!(t->added = malloc((n ? n : 1) * sizeof(int))))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", what);
	t->n_added = 0;
	for (int i = 0; i < t->n; i++)
		if (t->len[i] > 0 && (t->type[i] == NF_TOKTYPE_CONTROL ||
				      t->type[i] == NF_TOKTYPE_USER ||
				      t->type[i] == NF_TOKTYPE_UNKNOWN))
			t->added[t->n_added++] = i;
	qsort_r(t->added, t->n_added, sizeof(int), cmp_added, t);
	for (int b = 0; b < 256; b++)
		t->added_first[b] = -1;
	for (size_t k = t->n_added; k-- > 0;)
		t->added_first[(unsigned char)t->tok[t->added[k]][0]] = (int)k;
	return 0;
}

static int set_eog(nf_tokenizer *t, const char *what)
{
	static const char *const names[] = {"<|im_end|>", "<|eot_id|>", "<|end|>",
					    "<end_of_turn>", "</s>", "<|endoftext|>"};
	if (!(t->eog = calloc((size_t)t->n, 1)))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", what);
	if (t->eos >= 0)
		t->eog[t->eos] = 1;
	if (t->kind == NF_TOK_LLAMA2C)
		return 0; /* its "</s>" is EOS already */
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		int id = tok_lookup(t, names[k], strlen(names[k]));
		if (id >= 0)
			t->eog[id] = 1;
	}
	return 0;
}

static int set_special_text(nf_tokenizer *t, const char *what)
{
	if ((t->bos >= 0 && !t->bos_text &&
	     !(t->bos_text = tok_strndup(t->tok[t->bos], t->len[t->bos]))) ||
	    (t->eos >= 0 && !t->eos_text &&
	     !(t->eos_text = tok_strndup(t->tok[t->eos], t->len[t->eos]))))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", what);
	return 0;
}

int tok_finish(nf_tokenizer *t, const char *what)
{
	int err;
	t->strip_first = 0;
	for (size_t k = 0; k < t->n_decs; k++) {
		if (t->decs[k].kind == DEC_STRIP)
			t->strip_first = (size_t)t->decs[k].start;
		if (t->decs[k].kind == DEC_METASPACE && t->decs[k].start)
			t->strip_first = 1;
	}
	set_byte_tokens(t);
	if ((err = set_decoded(t, what)) || (err = set_added(t, what)) ||
	    (err = set_eog(t, what)) || (err = set_special_text(t, what)))
		return err;
	return 0;
}

/* ------------------------------------------------------- from arrays */

static int check_id(int id, int n, const char *name, const char *what)
{
	if (id < -1 || id >= n)
		return nf_error_set(NF_EINPUT, "%s: %s id %d is out of range (-1..%d)", what, name,
				    id, n - 1);
	return 0;
}

static int spec_check(const nf_tokenizer_spec *s, const char *what)
{
	int err;
	if (s->kind != NF_TOK_SPM && s->kind != NF_TOK_BPE)
		return nf_error_set(NF_EUNSUPPORTED, "%s: tokenizer kind %d is not spm or bpe", what,
				    (int)s->kind);
	if (!s->tokens || s->n_tokens <= 0 || s->n_tokens > TOK_MAX_VOCAB)
		return nf_error_set(NF_EINPUT, "%s: vocabulary of %d tokens is out of range (1..%d)",
				    what, s->n_tokens, TOK_MAX_VOCAB);
	if (s->kind == NF_TOK_SPM && !s->scores)
		return nf_error_set(NF_EINPUT, "%s: an spm tokenizer needs scores", what);
	if (s->n_merges && !s->merges)
		return nf_error_set(NF_EINPUT, "%s: %zu merges but no merge list", what,
				    s->n_merges);
	if ((err = check_id(s->bos_id, s->n_tokens, "bos", what)) ||
	    (err = check_id(s->eos_id, s->n_tokens, "eos", what)) ||
	    (err = check_id(s->unk_id, s->n_tokens, "unk", what)) ||
	    (err = check_id(s->pad_id, s->n_tokens, "pad", what)))
		return err;
	for (int i = 0; s->types && i < s->n_tokens; i++)
		if (s->types[i] < NF_TOKTYPE_NORMAL || s->types[i] > NF_TOKTYPE_BYTE)
			return nf_error_set(NF_EINPUT, "%s: token %d has type %d (1..6)", what, i,
					    s->types[i]);
	for (int i = 0; s->scores && i < s->n_tokens; i++)
		if (!isfinite(s->scores[i]))
			return nf_error_set(NF_EINPUT, "%s: token %d has a non-finite score", what, i);
	return 0;
}

/* "a b" -> a, b: split at the first space after the first byte (a side may be
 * a lone space in vocabularies that keep raw spaces, as llama.cpp reads them). */
static int split_merges(const nf_tokenizer_spec *s, nf_tok_str *l, nf_tok_str *r,
			const char *what)
{
	for (size_t i = 0; i < s->n_merges; i++) {
		const char *p = s->merges[i].p;
		size_t len = s->merges[i].len, k = 1;
		while (k < len && p[k] != ' ')
			k++;
		if (!p || len < 3 || k >= len - 1)
			return nf_error_set(NF_EINPUT, "%s: merge %zu is not 'a b'", what, i);
		l[i] = (nf_tok_str){p, k};
		r[i] = (nf_tok_str){p + k + 1, len - k - 1};
	}
	return 0;
}

static int spm_steps(nf_tokenizer *t, bool prefix, const char *what)
{
	static const char sp[] = "\xe2\x96\x81"; /* ▁ */
	t->byte_fallback = true;
	if (prefix)
		t->norms[t->n_norms++] = (tok_norm){.kind = NORM_PREPEND, .a = tok_strndup(sp, 3)};
	t->norms[t->n_norms++] = (tok_norm){.kind = NORM_REPLACE, .a = tok_strndup(" ", 1),
						  .b = tok_strndup(sp, 3)};
	t->decs[t->n_decs++] = (tok_dec){DEC_REPLACE, tok_strndup(sp, 3), tok_strndup(" ", 1), 0, 0};
	t->decs[t->n_decs++] = (tok_dec){DEC_BYTEFALLBACK, NULL, NULL, 0, 0};
	t->decs[t->n_decs++] = (tok_dec){DEC_FUSE, NULL, NULL, 0, 0};
	if (prefix)
		t->decs[t->n_decs++] = (tok_dec){DEC_STRIP, tok_strndup(" ", 1), NULL, 1, 0};
	for (size_t k = 0; k < t->n_norms; k++)
		if (!t->norms[k].a || (t->norms[k].kind == NORM_REPLACE && !t->norms[k].b))
			return nf_error_set(NF_ENOMEM, "%s: out of memory", what);
	for (size_t k = 0; k < t->n_decs; k++)
		if ((t->decs[k].kind == DEC_REPLACE && (!t->decs[k].a || !t->decs[k].b)) ||
		    (t->decs[k].kind == DEC_STRIP && !t->decs[k].a))
			return nf_error_set(NF_ENOMEM, "%s: out of memory", what);
	return 0;
}

static int spec_vocab(nf_tokenizer *t, const nf_tokenizer_spec *s, const char *what)
{
	const char **strs = malloc((size_t)s->n_tokens * sizeof(char *));
	size_t *lens = malloc((size_t)s->n_tokens * sizeof(size_t));
	int err = 0;
	if (!strs || !lens) {
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", what);
		goto done;
	}
	for (int i = 0; i < s->n_tokens; i++) {
		if (!s->tokens[i].p && s->tokens[i].len) {
			err = nf_error_set(NF_EINPUT, "%s: token %d has no bytes", what, i);
			goto done;
		}
		strs[i] = s->tokens[i].p ? s->tokens[i].p : "";
		lens[i] = s->tokens[i].len;
		t->type[i] = s->types ? (uint8_t)s->types[i] : NF_TOKTYPE_NORMAL;
	}
	err = tok_set_tokens(t, strs, lens, what);
	if (!err && s->scores && s->kind == NF_TOK_SPM) { /* bpe merges by rank only */
		if (!(t->scores = malloc((size_t)s->n_tokens * sizeof(float))))
			err = nf_error_set(NF_ENOMEM, "%s: out of memory", what);
		else
			memcpy(t->scores, s->scores, (size_t)s->n_tokens * sizeof(float));
	}
done:
	free(strs);
	free(lens);
	return err;
}

static int spec_merges(nf_tokenizer *t, const nf_tokenizer_spec *s, const char *what)
{
	nf_tok_str *l = calloc(s->n_merges ? s->n_merges : 1, sizeof(*l));
	nf_tok_str *r = calloc(s->n_merges ? s->n_merges : 1, sizeof(*r));
	int err;
	if (!l || !r)
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", what);
	else if (!(err = split_merges(s, l, r, what)))
		err = tok_set_merges(t, l, r, s->n_merges, what);
	free(l);
	free(r);
	return err;
}

int nf_tokenizer_new(nf_tokenizer **out, const nf_tokenizer_spec *s, const char *what)
{
	nf_tokenizer *t = NULL;
	int err;
	*out = NULL;
	if (!what)
		what = "tokenizer";
	if ((err = spec_check(s, what)) || (err = tok_alloc(&t, s->kind, s->n_tokens, what)) ||
	    (err = spec_vocab(t, s, what)) || (err = tok_index(t, true, what)))
		goto done;
	t->bos = s->bos_id;
	t->eos = s->eos_id;
	t->unk = s->unk_id;
	t->pad = s->pad_id;
	t->add_bos = s->add_bos && s->bos_id >= 0;
	t->add_eos = s->add_eos && s->eos_id >= 0;
	if (s->kind == NF_TOK_BPE) {
		t->byte_level = true;
		if ((err = spec_merges(t, s, what)) || (err = tok_pre_named(t, s->pre, what)))
			goto done;
		t->decs[t->n_decs++] = (tok_dec){DEC_BYTELEVEL, NULL, NULL, 0, 0};
	} else if ((err = spm_steps(t, s->add_space_prefix, what))) {
		goto done;
	}
	if (s->chat_template && !(t->chat_template = tok_strndup(s->chat_template,
								 strlen(s->chat_template)))) {
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", what);
		goto done;
	}
	if ((err = tok_pre_compile(t, what)) || (err = tok_finish(t, what)))
		goto done;
	*out = t;
	t = NULL;
done:
	nf_tokenizer_free(t);
	return err;
}
