/*
 * tok_bpe.c - BPE merging shared by every kind: the symbols of one word sit
 * in a linked list, every adjacent pair that can merge is queued in a binary
 * heap (best first: highest score, or lowest merge rank; leftmost on ties),
 * and a popped merge whose sides changed since it was queued is skipped.
 * O(n log n) per word instead of a rescan per merge.  Also the GPT-2 byte
 * map and the symbols a word starts from (bytes through the map for
 * byte-level BPE, UTF-8 characters with byte fallback for SentencePiece).
 */
#include "engine/tok_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

/* A queued merge.  key orders the heap with one compare, smallest first:
 * the priority in the high half (rank, or the score flipped so that higher
 * scores are smaller), the left symbol's position in the low half, so ties
 * go to the leftmost pair. */
typedef struct merge {
	uint64_t key;
	int right;
	int lid, rid, id; /* ids when queued; stale when the symbols changed */
} merge;

typedef struct heap {
	merge *a;
	size_t n;
} heap;

/* ------------------------------------------------------- the byte map */

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
 * the others (controls, space, 0x7F-0xA0, 0xAD) for 256 + their rank. */
static bool byte_printable(unsigned b)
{
	return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

unsigned tok_byte_to_cp(unsigned b)
{
	if (byte_printable(b))
		return b;
	if (b < 0x21) /* 0x00-0x20: the first 33 */
		return 256 + b;
	if (b < 0xA1) /* 0x7F-0xA0: the next 34 */
		return 256 + 33 + (b - 0x7F);
	return 256 + 67; /* 0xAD, the last */
}

int tok_cp_to_byte(unsigned cp)
{
	if (cp < 256)
		return byte_printable(cp) ? (int)cp : -1;
	cp -= 256;
	if (cp < 33)
		return (int)cp;
	if (cp < 67)
		return (int)(0x7F + cp - 33);
	return cp == 67 ? 0xAD : -1;
}

size_t tok_utf8_len(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n;
	unsigned cp;
	if (len == 0)
		return 0;
	if (u[0] < 0x80)
		return 1;
	if (u[0] >= 0xC2 && u[0] <= 0xDF)
		n = 2;
	else if (u[0] >= 0xE0 && u[0] <= 0xEF)
		n = 3;
	else if (u[0] >= 0xF0 && u[0] <= 0xF4)
		n = 4;
	else
		return 0;
	if (len < n)
		return 0;
	cp = u[0] & (0x7Fu >> n);
	for (size_t i = 1; i < n; i++) {
		if ((u[i] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (u[i] & 0x3Fu);
	}
	/* overlong forms, surrogates and beyond U+10FFFF are not UTF-8 */
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
	    (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n;
}

/* ------------------------------------------------------- the heap */

static bool merge_before(const merge *a, const merge *b)
{
	return a->key < b->key;
}

static int merge_left(const merge *m)
{
	return (int)(uint32_t)m->key;
}

/* Higher scores first: the float's bits made to sort as unsigned, inverted. */
static uint32_t score_order(float f)
{
	uint32_t u;
	if (f == 0)
		f = 0; /* -0 and +0 tie, as they compare equal */
	memcpy(&u, &f, sizeof(u));
	u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
	return ~u;
}

static void heap_push(heap *h, merge m)
{
	size_t i = h->n++;
	h->a[i] = m;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!merge_before(&h->a[i], &h->a[p]))
			break;
		merge tmp = h->a[i];
		h->a[i] = h->a[p];
		h->a[p] = tmp;
		i = p;
	}
}

static void sift_down(heap *h, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, best = i;
		if (l < h->n && merge_before(&h->a[l], &h->a[best]))
			best = l;
		if (r < h->n && merge_before(&h->a[r], &h->a[best]))
			best = r;
		if (best == i)
			break;
		merge tmp = h->a[i];
		h->a[i] = h->a[best];
		h->a[best] = tmp;
		i = best;
	}
}

static merge heap_pop(heap *h)
{
	merge top = h->a[0];
	h->a[0] = h->a[--h->n];
	sift_down(h, 0);
	return top;
}

/* Order entries appended without sifting: O(n) instead of n pushes. */
static void heap_build(heap *h)
{
	for (size_t i = h->n / 2; i-- > 0;)
		sift_down(h, i);
}

void tok_work_release(tok_work *w)
{
	free(w->ids);
	free(w->next);
	free(w->prev);
	free(w->heap);
	free(w->buf);
	*w = (tok_work){0};
}

/* Room for n symbols: each merge queues at most two pairs, so 3n heap entries. */
int tok_work_reserve(tok_work *w, size_t n, size_t max_len)
{
	size_t hc, bl;
	if (!w->buf) {
		if (!nf_size_mul(&bl, max_len, 2) || !(w->buf = malloc(bl + 1)))
			return nf_error_set(NF_ENOMEM, "encode: out of memory");
	}
	if (n <= w->cap)
		return 0;
	if (n > (size_t)INT32_MAX - 3 || !nf_size_mul(&hc, n, 3) || hc > SIZE_MAX / sizeof(merge))
		return nf_error_set(NF_EINPUT, "encode: a word of %zu symbols is too long", n);
	free(w->ids);
	free(w->next);
	free(w->prev);
	free(w->heap);
	w->ids = malloc(n * sizeof(int));
	w->next = malloc(n * sizeof(int));
	w->prev = malloc(n * sizeof(int));
	w->heap = malloc((hc + 1) * sizeof(merge));
	if (!w->ids || !w->next || !w->prev || !w->heap) {
		w->cap = 0;
		return nf_error_set(NF_ENOMEM, "encode: out of memory");
	}
	w->cap = n;
	w->heap_cap = hc + 1;
	return 0;
}

/* ------------------------------------------------------- merging */

/* Queue the merge of symbols a and b: by rank when the tokenizer has a merge
 * list, else by the score of their concatenation when that is a token. */
static void queue(heap *h, merge m, bool sift)
{
	if (sift)
		heap_push(h, m);
	else
		h->a[h->n++] = m;
}

static void try_pair(const nf_tokenizer *t, tok_work *w, heap *h, int a, int b, bool sift)
{
	int x = w->ids[a], y = w->ids[b], id;
	if (!t->scores) {
		const tok_pair *p = tok_pair_find(t, x, y);
		if (p)
			queue(h, (merge){(uint64_t)(uint32_t)p->rank << 32 | (uint32_t)a, b, x, y,
					 p->id}, sift);
		return;
	}
	size_t lx = t->len[x], ly = t->len[y];
	if (lx + ly > t->max_len)
		return; /* no token is that long */
	memcpy(w->buf, t->tok[x], lx);
	memcpy(w->buf + lx, t->tok[y], ly);
	id = tok_lookup(t, w->buf, lx + ly);
	if (id >= 0)
		queue(h, (merge){(uint64_t)score_order(t->scores[id]) << 32 | (uint32_t)a, b, x, y,
				 id}, sift);
}

int tok_merge_emit(const nf_tokenizer *t, tok_work *w, size_t n, tok_ids *out)
{
	heap h = {w->heap, 0};
	int err;
	for (size_t i = 0; i < n; i++) {
		w->next[i] = i + 1 < n ? (int)(i + 1) : -1;
		w->prev[i] = (int)i - 1;
	}
	for (size_t i = 0; i + 1 < n; i++)
		try_pair(t, w, &h, (int)i, (int)i + 1, false);
	heap_build(&h);
	while (h.n > 0) {
		merge m = heap_pop(&h);
		int left = merge_left(&m);
		/* stale: a side was merged away or changed since this was queued */
		if (w->ids[left] != m.lid || w->ids[m.right] != m.rid || w->next[left] != m.right)
			continue;
		w->ids[left] = m.id;
		w->ids[m.right] = -1;
		w->next[left] = w->next[m.right];
		if (w->next[left] >= 0)
			w->prev[w->next[left]] = left;
		if (w->prev[left] >= 0)
			try_pair(t, w, &h, w->prev[left], left, true);
		if (w->next[left] >= 0)
			try_pair(t, w, &h, left, w->next[left], true);
	}
	for (int i = n ? 0 : -1; i >= 0; i = w->next[i])
		if ((err = tok_ids_push(out, w->ids[i])))
			return err;
	return 0;
}

/* ------------------------------------------------------- a word's symbols */

/* Byte-level: each byte is the token of its mapped character.  A byte whose
 * character is not a token becomes unk, or is dropped when there is none (as
 * Hugging Face's BPE does). */
static size_t bytelevel_symbols(const nf_tokenizer *t, tok_work *w, const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		int id = t->byte_tok[(unsigned char)s[i]];
		if (id < 0)
			id = t->unk;
		if (id >= 0)
			w->ids[n++] = id;
	}
	return n;
}

/* One character that is not a token: its <0xXX> tokens when all exist
 * (byte fallback), else unk (fused with an unk before it when fuse_unk). */
static size_t fallback_symbols(const nf_tokenizer *t, tok_work *w, size_t n, const char *s,
			       size_t cl)
{
	bool all = t->byte_fallback;
	for (size_t k = 0; all && k < cl; k++)
		all = t->byte_tok[(unsigned char)s[k]] >= 0;
	if (all) {
		for (size_t k = 0; k < cl; k++)
			w->ids[n++] = t->byte_tok[(unsigned char)s[k]];
		return n;
	}
	if (t->unk < 0 || (t->fuse_unk && n > 0 && w->ids[n - 1] == t->unk))
		return n;
	w->ids[n++] = t->unk;
	return n;
}

static size_t char_symbols(const nf_tokenizer *t, tok_work *w, const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len;) {
		size_t cl = tok_utf8_len(s + i, len - i);
		int id;
		if (cl == 0)
			cl = 1; /* a byte that is not UTF-8: byte fallback alone */
		id = tok_lookup(t, s + i, cl);
		if (id >= 0 && t->type[id] != NF_TOKTYPE_BYTE)
			w->ids[n++] = id;
		else
			n = fallback_symbols(t, w, n, s + i, cl);
		i += cl;
	}
	return n;
}

/* The byte-level spelling of s, in w->buf-sized pieces is not enough: it
 * needs up to two bytes per byte, so it is looked up from a new string. */
static int whole_word(const nf_tokenizer *t, const char *s, size_t len)
{
	char *m;
	size_t o = 0, ml;
	int id;
	if (!t->byte_level)
		return len <= t->max_len ? tok_lookup(t, s, len) : -1;
	if (len > t->max_len || !nf_size_mul(&ml, len, 2) || !(m = malloc(ml + 1)))
		return -1;
	for (size_t i = 0; i < len; i++) {
		unsigned cp = tok_byte_to_cp((unsigned char)s[i]);
		if (cp < 0x80) {
			m[o++] = (char)cp;
		} else {
			m[o++] = (char)(0xC0 | cp >> 6);
			m[o++] = (char)(0x80 | (cp & 0x3F));
		}
	}
	id = o <= t->max_len ? tok_lookup(t, m, o) : -1;
	free(m);
	return id;
}

int tok_encode_word(const nf_tokenizer *t, tok_work *w, const char *s, size_t len, tok_ids *out)
{
	size_t n;
	int err;
	if (len == 0)
		return 0;
	if (t->ignore_merges) {
		int id = whole_word(t, s, len);
		if (id >= 0)
			return tok_ids_push(out, id);
	}
	if ((err = tok_work_reserve(w, len, t->max_len)))
		return err;
	n = t->byte_level ? bytelevel_symbols(t, w, s, len) : char_symbols(t, w, s, len);
	return tok_merge_emit(t, w, n, out);
}
