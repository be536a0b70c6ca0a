/*
 * tok_llama2c.c - llama2.c's tokenizer.bin: loading its format with every
 * length checked, and encoding exactly as llama2.c's run.c does (dummy
 * prefix space, UTF-8 code points grouped as run.c groups them, byte
 * fallback at id byte + 3, merge the best-scoring adjacent pair first,
 * leftmost on ties), through the shared heap merger of tok_bpe.c.
 */
#include "engine/tok_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define TOK_MAX_TOKEN_LEN 1024        /* bound on the header's max_token_length */
#define TOK_MAX_FILE (256u << 20)     /* bound on a tokenizer file */

static int32_t rd_i32(const unsigned char *p)
{
	uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		     (uint32_t)p[3] << 24;
	int32_t v;
	memcpy(&v, &u, sizeof(v));
	return v;
}

/* The file's tokens as pointers into it; *off ends after the last one. */
static int read_tokens(const unsigned char *p, size_t len, int n, int32_t mtl, const char **strs,
		       size_t *lens, float *scores, size_t *off, const char *what)
{
	*off = 4;
	for (int i = 0; i < n; i++) {
		float score;
		int32_t l;
		if (len - *off < 8)
			return nf_error_set(NF_EINPUT, "%s: offset %zu: file ends inside the header "
					    "of token %d", what, *off, i);
		memcpy(&score, p + *off, 4);
		l = rd_i32(p + *off + 4);
		if (!isfinite(score))
			return nf_error_set(NF_EINPUT, "%s: offset %zu: token %d has a non-finite "
					    "score", what, *off, i);
		if (l < 0 || l > mtl)
			return nf_error_set(NF_EINPUT, "%s: offset %zu: token %d length %d is out of "
					    "range (0..max_token_length %d)", what, *off + 4, i,
					    (int)l, (int)mtl);
		*off += 8;
		if ((size_t)l > len - *off)
			return nf_error_set(NF_EINPUT, "%s: offset %zu: token %d needs %d bytes, "
					    "only %zu left", what, *off, i, (int)l, len - *off);
		strs[i] = (const char *)p + *off;
		lens[i] = (size_t)l;
		scores[i] = score;
		*off += (size_t)l;
	}
	if (*off != len)
		return nf_error_set(NF_EINPUT, "%s: offset %zu: %zu trailing bytes after %d tokens "
				    "(vocabulary larger than the model's?)", what, *off, len - *off,
				    n);
	return 0;
}

static int check_header(const unsigned char *p, size_t len, int vocab_size, int32_t *mtl,
			const char *what)
{
	/* BOS (1) and EOS (2) are ids every encoding uses: a smaller vocabulary has no room. */
	if (vocab_size <= NF_TOKEN_EOS || vocab_size > TOK_MAX_VOCAB)
		return nf_error_set(NF_EINPUT, "%s: vocab_size %d is out of range (3..%d)", what,
				    vocab_size, TOK_MAX_VOCAB);
	if (len < 4)
		return nf_error_set(NF_EINPUT, "%s: offset 0: file is %zu bytes, too small for "
				    "the header", what, len);
	*mtl = rd_i32(p);
	if (*mtl <= 0 || *mtl > TOK_MAX_TOKEN_LEN)
		return nf_error_set(NF_EINPUT, "%s: offset 0: max_token_length %d is out of "
				    "range (1..%d)", what, (int)*mtl, TOK_MAX_TOKEN_LEN);
	/* Each token needs at least 8 bytes: refuse a vocab the file cannot hold
	 * before allocating anything sized by it. */
	if ((len - 4) / 8 < (size_t)vocab_size)
		return nf_error_set(NF_EINPUT, "%s: offset %zu: file is %zu bytes, too small for "
				    "%d tokens", what, len, len, vocab_size);
	return 0;
}

int nf_tokenizer_load_mem(nf_tokenizer **out, const void *data, size_t len, int vocab_size,
			  const char *what)
{
	const char **strs = NULL;
	size_t *lens = NULL, off;
	nf_tokenizer *t = NULL;
	int32_t mtl = 0;
	int err;

	*out = NULL;
	if (!what)
		what = "tokenizer";
	if ((err = check_header(data, len, vocab_size, &mtl, what)) ||
	    (err = tok_alloc(&t, NF_TOK_LLAMA2C, vocab_size, what)))
		goto done;
	strs = malloc((size_t)vocab_size * sizeof(*strs));
	lens = malloc((size_t)vocab_size * sizeof(*lens));
	t->scores = malloc((size_t)vocab_size * sizeof(float));
	if (!strs || !lens || !t->scores) {
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", what);
		goto done;
	}
	if ((err = read_tokens(data, len, vocab_size, mtl, strs, lens, t->scores, &off, what)) ||
	    (err = tok_set_tokens(t, strs, lens, what)) || (err = tok_index(t, false, what)))
		goto done;
	t->bos = NF_TOKEN_BOS;
	t->eos = NF_TOKEN_EOS;
	/* "\n<s>\n" and "\n</s>\n" are markers, not text: decoded only on request */
	t->type[NF_TOKEN_BOS] = t->type[NF_TOKEN_EOS] = NF_TOKTYPE_CONTROL;
	t->add_bos = true;
	if ((err = tok_finish(t, what)))
		goto done;
	*out = t;
	t = NULL;
done:
	free(strs);
	free(lens);
	nf_tokenizer_free(t);
	return err;
}

/* How many whole tokens the file holds (for a folder without the model's config). */
static int count_tokens(const unsigned char *p, size_t len)
{
	size_t off = 4;
	int n = 0;
	while (len >= off + 8 && n < TOK_MAX_VOCAB) {
		int32_t l = rd_i32(p + off + 4);
		if (l < 0 || (size_t)l > len - off - 8)
			break;
		off += 8 + (size_t)l;
		n++;
	}
	return n;
}

int nf_tokenizer_load(nf_tokenizer **out, const char *path, int vocab_size)
{
	char *buf = NULL;
	size_t len;
	int err;
	*out = NULL;
	if ((err = nf_fs_read_file(&buf, &len, path, TOK_MAX_FILE)))
		return err;
	if (vocab_size == 0 && len >= 4)
		vocab_size = count_tokens((const unsigned char *)buf, len);
	err = nf_tokenizer_load_mem(out, buf, len, vocab_size, path);
	free(buf);
	return err;
}

/* The symbols before merging: the dummy prefix, then each code point's token
 * or its bytes at id byte + 3. */
static int symbols(const nf_tokenizer *t, tok_work *w, const char *text, size_t len, size_t *n)
{
	*n = 0;
	if (len > 0) {
		int sp = tok_lookup(t, " ", 1);
		if (sp < 0)
			sp = ' ' + 3;
		if (sp >= t->n)
			return nf_error_set(NF_EINPUT, "encode: the vocabulary has no token for the "
					    "space prefix");
		w->ids[(*n)++] = sp;
	}
	for (size_t i = 0; i < len;) {
		/* one code point: a lead byte and up to 3 continuation bytes (as run.c) */
		size_t j = i + 1;
		while (j < len && j - i < 4 && ((unsigned char)text[j] & 0xC0) == 0x80)
			j++;
		int id = j - i <= t->max_len ? tok_lookup(t, text + i, j - i) : -1;
		if (id >= 0) {
			w->ids[(*n)++] = id;
		} else {
			for (size_t k = i; k < j; k++) {
				int b = (unsigned char)text[k] + 3;
				if (b >= t->n)
					return nf_error_set(NF_EINPUT, "encode: offset %zu: byte 0x%02X "
							    "has no token", k, (unsigned)(b - 3));
				w->ids[(*n)++] = b;
			}
		}
		i = j;
	}
	return 0;
}

int tok_llama2c_encode(const nf_tokenizer *t, tok_work *w, const char *text, size_t len,
		       tok_ids *out)
{
	size_t cap, n;
	int err;
	if (!nf_size_add(&cap, len, 1))
		return nf_error_set(NF_EINPUT, "text of %zu bytes is too long to encode", len);
	if ((err = tok_work_reserve(w, cap, t->max_len)) || (err = symbols(t, w, text, len, &n)))
		return err;
	return tok_merge_emit(t, w, n, out);
}
