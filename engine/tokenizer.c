/*
 * tokenizer.c - the llama2.c tokenizer: loading its file format with every
 * length checked, encoding by SentencePiece-style BPE exactly as llama2.c's
 * run.c does (BOS, dummy prefix space, UTF-8 code points, byte fallback,
 * merge the best-scoring adjacent pair first, leftmost on ties) but with a
 * heap instead of a rescan per merge, and decoding (see tokenizer.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "engine/tokenizer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define TOK_MAX_TOKEN_LEN 1024        /* bound on the header's max_token_length */
#define TOK_MAX_FILE (256u << 20)     /* bound on a tokenizer file */
#define TOK_MAX_VOCAB (1 << 22)

struct nf_tokenizer {
	int vocab_size;
	int max_token_length;
	char **vocab;     /* vocab_size pointers into blob, NUL-terminated */
	uint32_t *lens;   /* byte length of each token */
	float *scores;
	int *sorted;      /* ids sorted by (bytes, id) for lookup */
	char *blob;       /* owned: every token's bytes */
	char byte_pieces[256][2]; /* 1-byte strings for <0xXX> tokens */
};

static int rd_i32(int32_t *out, const unsigned char *p)
{
	uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		     (uint32_t)p[3] << 24;
	memcpy(out, &u, sizeof(u));
	return 0;
}

static int cmp_bytes(const char *a, size_t la, const char *b, size_t lb)
{
	size_t n = la < lb ? la : lb;
	int c = n ? memcmp(a, b, n) : 0;
	if (c)
		return c;
	return la < lb ? -1 : la > lb ? 1 : 0;
}

static int cmp_ids(const void *a, const void *b, void *ctx)
{
	const nf_tokenizer *t = ctx;
	int x = *(const int *)a, y = *(const int *)b;
	int c = cmp_bytes(t->vocab[x], t->lens[x], t->vocab[y], t->lens[y]);
	return c ? c : (x > y) - (x < y);
}

/* The lowest id whose bytes equal s[0..len), or -1. */
static int lookup(const nf_tokenizer *t, const char *s, size_t len)
{
	size_t lo = 0, hi = (size_t)t->vocab_size;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int id = t->sorted[mid];
		if (cmp_bytes(t->vocab[id], t->lens[id], s, len) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < (size_t)t->vocab_size) {
		int id = t->sorted[lo];
		if (cmp_bytes(t->vocab[id], t->lens[id], s, len) == 0)
			return id;
	}
	return -1;
}

void nf_tokenizer_free(nf_tokenizer *t)
{
	if (!t)
		return;
	free(t->vocab);
	free(t->lens);
	free(t->scores);
	free(t->sorted);
	free(t->blob);
	free(t);
}

int nf_tokenizer_load_mem(nf_tokenizer **out, const void *data, size_t len, int vocab_size,
			  const char *what)
{
	int err = 0;
	const unsigned char *p = data;
	nf_tokenizer *t = NULL;
	size_t off = 0, blob_len = 0, blob_need;
	int32_t mtl, l;
	float score;

	*out = NULL;
	if (!what)
		what = "tokenizer";
	/* BOS (1) and EOS (2) are ids every encoding uses: a smaller vocabulary has no room. */
	if (vocab_size <= NF_TOKEN_EOS || vocab_size > TOK_MAX_VOCAB)
		return nf_error_set(NF_EINPUT, "%s: vocab_size %d is out of range (3..%d)", what,
				    vocab_size, TOK_MAX_VOCAB);
	if (len < 4)
		return nf_error_set(NF_EINPUT, "%s: offset 0: file is %zu bytes, too small for "
				    "the header", what, len);
	rd_i32(&mtl, p);
	if (mtl <= 0 || mtl > TOK_MAX_TOKEN_LEN)
		return nf_error_set(NF_EINPUT, "%s: offset 0: max_token_length %d is out of "
				    "range (1..%d)", what, (int)mtl, TOK_MAX_TOKEN_LEN);
	/* Each token needs at least 8 bytes: refuse a vocab the file cannot hold
	 * before allocating anything sized by it. */
	if ((len - 4) / 8 < (size_t)vocab_size)
		return nf_error_set(NF_EINPUT, "%s: offset %zu: file is %zu bytes, too small for "
				    "%d tokens", what, len, len, vocab_size);
	t = calloc(1, sizeof(*t));
	if (!t)
		goto nomem;
	t->vocab_size = vocab_size;
	t->max_token_length = (int)mtl;
	/* every token's bytes fit in the file, plus one NUL each */
	blob_need = len - 4 + (size_t)vocab_size;
	if (!(t->vocab = calloc((size_t)vocab_size, sizeof(*t->vocab))) ||
	    !(t->lens = calloc((size_t)vocab_size, sizeof(*t->lens))) ||
	    !(t->scores = calloc((size_t)vocab_size, sizeof(*t->scores))) ||
	    !(t->sorted = calloc((size_t)vocab_size, sizeof(*t->sorted))) ||
	    !(t->blob = malloc(blob_need ? blob_need : 1)))
		goto nomem;
	off = 4;
	for (int i = 0; i < vocab_size; i++) {
		if (len - off < 8) {
			err = nf_error_set(NF_EINPUT, "%s: offset %zu: file ends inside the header "
					   "of token %d", what, off, i);
			goto done;
		}
		memcpy(&score, p + off, 4);
		rd_i32(&l, p + off + 4);
		if (!isfinite(score)) {
			err = nf_error_set(NF_EINPUT, "%s: offset %zu: token %d has a non-finite "
					   "score", what, off, i);
			goto done;
		}
		if (l < 0 || l > mtl) {
			err = nf_error_set(NF_EINPUT, "%s: offset %zu: token %d length %d is out of "
					   "range (0..max_token_length %d)", what, off + 4, i,
					   (int)l, (int)mtl);
			goto done;
		}
		off += 8;
		if ((size_t)l > len - off) {
			err = nf_error_set(NF_EINPUT, "%s: offset %zu: token %d needs %d bytes, "
					   "only %zu left", what, off, i, (int)l, len - off);
			goto done;
		}
		if (blob_len + (size_t)l + 1 > blob_need) { /* cannot happen: bounded above */
			err = nf_error_set(NF_EINTERNAL, "%s: tokenizer blob overflow", what);
			goto done;
		}
		t->vocab[i] = t->blob + blob_len;
		memcpy(t->blob + blob_len, p + off, (size_t)l);
		t->blob[blob_len + (size_t)l] = '\0';
		blob_len += (size_t)l + 1;
		t->lens[i] = (uint32_t)l;
		t->scores[i] = score;
		t->sorted[i] = i;
		off += (size_t)l;
	}
	if (off != len) {
		err = nf_error_set(NF_EINPUT, "%s: offset %zu: %zu trailing bytes after %d tokens "
				   "(vocabulary larger than the model's?)", what, off, len - off,
				   vocab_size);
		goto done;
	}
	qsort_r(t->sorted, (size_t)vocab_size, sizeof(int), cmp_ids, t);
	for (int b = 0; b < 256; b++) {
		t->byte_pieces[b][0] = (char)b;
		t->byte_pieces[b][1] = '\0';
	}
	*out = t;
	t = NULL;
	goto done;
nomem:
	err = nf_error_set(NF_ENOMEM, "%s: out of memory", what);
done:
	nf_tokenizer_free(t);
	return err;
}

int nf_tokenizer_load(nf_tokenizer **out, const char *path, int vocab_size)
{
	char *buf = NULL;
	size_t len;
	int err;
	*out = NULL;
	if ((err = nf_fs_read_file(&buf, &len, path, TOK_MAX_FILE)))
		return err;
	err = nf_tokenizer_load_mem(out, buf, len, vocab_size, path);
	free(buf);
	return err;
}

int nf_tokenizer_vocab_size(const nf_tokenizer *t) { return t->vocab_size; }

/* ------------------------------------------------------------- encoding */

typedef struct merge {
	float score;
	int left;   /* symbol index of the left half (its position in the text) */
	int right;
	int lid, rid, id; /* ids when queued; stale when the symbols changed */
} merge;

typedef struct heap {
	merge *a;
	size_t n;
} heap;

/* a before b: higher score, then leftmost (run.c scans left to right, strict >). */
static bool merge_before(const merge *a, const merge *b)
{
	if (a->score != b->score)
		return a->score > b->score;
	return a->left < b->left;
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

static merge heap_pop(heap *h)
{
	merge top = h->a[0];
	size_t i = 0;
	h->a[0] = h->a[--h->n];
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
	return top;
}

/* Queue the merge of symbols a and b when their concatenation is a token. */
static void try_pair(const nf_tokenizer *t, heap *h, char *buf, const int *ids, int a, int b)
{
	int x = ids[a], y = ids[b], id;
	size_t lx = t->lens[x], ly = t->lens[y];
	if (lx + ly > (size_t)t->max_token_length)
		return; /* no token is that long */
	memcpy(buf, t->vocab[x], lx);
	memcpy(buf + lx, t->vocab[y], ly);
	id = lookup(t, buf, lx + ly);
	if (id >= 0)
		heap_push(h, (merge){t->scores[id], a, b, x, y, id});
}

int nf_tokenizer_encode(const nf_tokenizer *t, const char *text, size_t len, bool bos,
			bool eos, int **tokens, size_t *n_tokens)
{
	int err = 0;
	int *ids = NULL, *next = NULL, *prev = NULL, *res = NULL;
	char *buf = NULL;
	heap h = {0};
	size_t n = 0, cap, heap_cap, out_n = 0;

	*tokens = NULL;
	*n_tokens = 0;
	/* symbols: at most one per byte plus the dummy prefix */
	if (!nf_size_add(&cap, len, 1) || !nf_size_mul(&heap_cap, cap, 3) ||
	    !nf_size_add(&heap_cap, heap_cap, 1) || heap_cap > SIZE_MAX / sizeof(merge) ||
	    cap > (size_t)INT32_MAX - 3) {
		return nf_error_set(NF_EINPUT, "text of %zu bytes is too long to encode", len);
	}
	ids = malloc(cap * sizeof(int));
	next = malloc(cap * sizeof(int));
	prev = malloc(cap * sizeof(int));
	res = malloc((cap + 2) * sizeof(int));
	h.a = malloc(heap_cap * sizeof(merge));
	buf = malloc(2 * (size_t)t->max_token_length + 1);
	if (!ids || !next || !prev || !res || !h.a || !buf) {
		err = nf_error_set(NF_ENOMEM, "encode: out of memory");
		goto done;
	}
	if (len > 0) {
		int sp = lookup(t, " ", 1);
		if (sp < 0)
			sp = ' ' + 3;
		if (sp >= t->vocab_size) {
			err = nf_error_set(NF_EINPUT, "encode: the vocabulary has no token for the "
					   "space prefix");
			goto done;
		}
		ids[n++] = sp;
	}
	for (size_t i = 0; i < len;) {
		/* one code point: a lead byte and up to 3 continuation bytes (as run.c) */
		size_t j = i + 1;
		while (j < len && j - i < 4 && ((unsigned char)text[j] & 0xC0) == 0x80)
			j++;
		int id = j - i <= (size_t)t->max_token_length ? lookup(t, text + i, j - i) : -1;
		if (id >= 0) {
			ids[n++] = id;
		} else {
			for (size_t k = i; k < j; k++) {
				int b = (unsigned char)text[k] + 3;
				if (b >= t->vocab_size) {
					err = nf_error_set(NF_EINPUT, "encode: offset %zu: byte 0x%02X "
							   "has no token", k, (unsigned)(b - 3));
					goto done;
				}
				ids[n++] = b;
			}
		}
		i = j;
	}
	for (size_t i = 0; i < n; i++) {
		next[i] = i + 1 < n ? (int)(i + 1) : -1;
		prev[i] = (int)i - 1;
	}
	for (size_t i = 0; i + 1 < n; i++)
		try_pair(t, &h, buf, ids, (int)i, (int)i + 1);
	while (h.n > 0) {
		merge m = heap_pop(&h);
		/* stale: a side was merged away or changed since this was queued */
		if (ids[m.left] != m.lid || ids[m.right] != m.rid || next[m.left] != m.right)
			continue;
		ids[m.left] = m.id;
		ids[m.right] = -1;
		next[m.left] = next[m.right];
		if (next[m.left] >= 0)
			prev[next[m.left]] = m.left;
		if (prev[m.left] >= 0)
			try_pair(t, &h, buf, ids, prev[m.left], m.left);
		if (next[m.left] >= 0)
			try_pair(t, &h, buf, ids, m.left, next[m.left]);
	}
	if (bos)
		res[out_n++] = NF_TOKEN_BOS;
	for (int i = n ? 0 : -1; i >= 0; i = next[i])
		res[out_n++] = ids[i];
	if (eos)
		res[out_n++] = NF_TOKEN_EOS;
	*tokens = res;
	*n_tokens = out_n;
	res = NULL;
done:
	free(ids);
	free(next);
	free(prev);
	free(res);
	free(h.a);
	free(buf);
	return err;
}

/* ------------------------------------------------------------- decoding */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

const char *nf_tokenizer_decode(const nf_tokenizer *t, int prev, int token, size_t *len)
{
	const char *s;
	size_t l;
	if (token < 0 || token >= t->vocab_size) {
		*len = 0;
		return "";
	}
	s = t->vocab[token];
	l = t->lens[token];
	if (prev == NF_TOKEN_BOS && l > 0 && s[0] == ' ') {
		s++;
		l--;
	}
	if (l == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>' &&
	    hexval(s[3]) >= 0 && hexval(s[4]) >= 0) {
		int b = hexval(s[3]) * 16 + hexval(s[4]);
		*len = 1;
		return t->byte_pieces[b];
	}
	*len = l;
	return s;
}
