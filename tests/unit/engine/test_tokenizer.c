/*
 * test_tokenizer.c - the llama2.c tokenizer on the real tok512.bin: encode
 * matches a plain re-implementation of run.c's quadratic algorithm, decode
 * inverts encode (ASCII and byte fallback), ids stay in range; and a few
 * hand-made vocabularies for tie-breaking and byte fallback.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* run.c's encode, written the slow obvious way, on the raw file bytes. */
typedef struct ref_vocab {
	int n;
	char **s;
	int *len;
	float *score;
} ref_vocab;

static int ref_load(ref_vocab *v, const char *buf, size_t blen, int n)
{
	size_t off = 4;
	v->n = n;
	v->s = calloc((size_t)n, sizeof(char *));
	v->len = calloc((size_t)n, sizeof(int));
	v->score = calloc((size_t)n, sizeof(float));
	for (int i = 0; i < n; i++) {
		int32_t l;
		if (off + 8 > blen)
			return -1;
		memcpy(&v->score[i], buf + off, 4);
		memcpy(&l, buf + off + 4, 4);
		off += 8;
		v->s[i] = malloc((size_t)l + 1);
		memcpy(v->s[i], buf + off, (size_t)l);
		v->s[i][l] = 0;
		v->len[i] = l;
		off += (size_t)l;
	}
	return 0;
}

static void ref_free(ref_vocab *v)
{
	for (int i = 0; i < v->n; i++)
		free(v->s[i]);
	free(v->s);
	free(v->len);
	free(v->score);
}

static int ref_lookup(const ref_vocab *v, const char *s, int len)
{
	for (int i = 0; i < v->n; i++) /* lowest id wins, as the library does */
		if (v->len[i] == len && memcmp(v->s[i], s, (size_t)len) == 0)
			return i;
	return -1;
}

static int ref_encode(const ref_vocab *v, const char *text, int *tok)
{
	int n = 0;
	size_t len = strlen(text);
	char buf[64];
	tok[n++] = 1;
	if (len)
		tok[n++] = ref_lookup(v, " ", 1);
	for (size_t i = 0; i < len;) {
		size_t j = i + 1;
		while (j < len && j - i < 4 && ((unsigned char)text[j] & 0xC0) == 0x80)
			j++;
		int id = ref_lookup(v, text + i, (int)(j - i));
		if (id >= 0)
			tok[n++] = id;
		else
			for (size_t k = i; k < j; k++)
				tok[n++] = (unsigned char)text[k] + 3;
		i = j;
	}
	for (;;) {
		float best = -1e10f;
		int best_id = -1, best_i = -1;
		for (int i = 1; i + 1 < n; i++) { /* never merge BOS */
			int l = snprintf(buf, sizeof(buf), "%s%s", v->s[tok[i]], v->s[tok[i + 1]]);
			int id = ref_lookup(v, buf, l);
			if (id >= 0 && v->score[id] > best) {
				best = v->score[id];
				best_id = id;
				best_i = i;
			}
		}
		if (best_i < 0)
			break;
		tok[best_i] = best_id;
		memmove(&tok[best_i + 1], &tok[best_i + 2], (size_t)(n - best_i - 2) * sizeof(int));
		n--;
	}
	return n;
}

static char *decode_all(const nf_tokenizer *t, const int *tok, size_t n, size_t *out_len)
{
	char *s = malloc(4096);
	size_t l = 0;
	for (size_t i = 1; i < n; i++) {
		size_t pl;
		const char *p = nf_tokenizer_decode(t, tok[i - 1], tok[i], &pl);
		memcpy(s + l, p, pl);
		l += pl;
	}
	s[l] = 0;
	*out_len = l;
	return s;
}

/* Build a tokenizer file in memory from (string, score) pairs. */
static size_t build(unsigned char *out, int mtl, const char **s, const float *sc, int n)
{
	size_t off = 0;
	memcpy(out, &mtl, 4);
	off = 4;
	for (int i = 0; i < n; i++) {
		int32_t l = (int32_t)strlen(s[i]);
		memcpy(out + off, &sc[i], 4);
		memcpy(out + off + 4, &l, 4);
		memcpy(out + off + 8, s[i], (size_t)l);
		off += 8 + (size_t)l;
	}
	return off;
}

int main(void)
{
	const char *shared = tap_env("NF_SHARED", "/work/shared");
	char *path = nf_strdup_printf("%s/models/stories260K/tok512.bin", shared);
	nf_tokenizer *t = NULL;
	char *raw = NULL;
	size_t raw_len;
	int *tok = NULL;
	size_t n;
	ref_vocab rv = {0};
	static const char *texts[] = {
		"Once upon a time",
		"Once upon a time, there was a little girl named Lily.",
		"Hello, world! 123",
		"caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80",
		"  two  spaces\tand\ttabs\nnewline",
		"invalid utf8: \xff\xfe \xc3 end",
		"a",
		" ",
	};

	if (!nf_fs_exists(path)) {
		skip("no %s", path);
		free(path);
		return done_testing();
	}
	is_int(nf_tokenizer_load(&t, path, 512), 0, "load tok512.bin");
	if (!t) {
		diag("%s", nf_error_last());
		return done_testing();
	}
	is_int(nf_tokenizer_vocab_size(t), 512, "vocab size");
	ok(nf_fs_read_file(&raw, &raw_len, path, 1 << 20) == 0 && ref_load(&rv, raw, raw_len, 512) == 0,
	   "reference vocabulary read");

	is_int(nf_tokenizer_encode(t, "Once upon a time", 16, NF_TOK_ADD_BOS, &tok, &n), 0,
	       "encode Once upon a time");
	ok(n >= 2 && tok[0] == NF_TOKEN_BOS, "starts with BOS (%zu tokens)", n);
	{
		char line[256];
		size_t l = 0;
		for (size_t i = 0; i < n; i++)
			l += (size_t)snprintf(line + l, sizeof(line) - l, "%d ", tok[i]);
		diag("Once upon a time -> %s", line);
	}
	free(tok);

	for (size_t k = 0; k < sizeof(texts) / sizeof(texts[0]); k++) {
		const char *x = texts[k];
		int ref[512];
		int rn = ref_encode(&rv, x, ref);
		int in_range = 1, same;
		size_t dl;
		char *back;

		is_int(nf_tokenizer_encode(t, x, strlen(x), NF_TOK_ADD_BOS | NF_TOK_ADD_EOS, &tok, &n), 0,
		       "encode text %zu", k);
		for (size_t i = 0; i < n; i++)
			in_range &= tok[i] >= 0 && tok[i] < 512;
		ok(in_range, "text %zu: ids in range", k);
		ok(n >= 2 && tok[n - 1] == NF_TOKEN_EOS, "text %zu: ends with EOS", k);
		same = (size_t)rn + 1 == n && memcmp(ref, tok, (size_t)rn * sizeof(int)) == 0;
		ok(same, "text %zu: same tokens as run.c's algorithm (%d vs %zu)", k, rn, n - 1);
		back = decode_all(t, tok, n - 1, &dl);
		ok(dl == strlen(x) && memcmp(back, x, dl) == 0, "text %zu: decode(encode(x)) == x", k);
		free(back);
		free(tok);
	}
	/* a long text (200 KB) encodes quickly (heap, not run.c's rescan) and round trips */
	{
		static const char unit[] = "Once upon a time, Lily saw a \xe2\x9c\xa8 big dog. ";
		size_t ul = sizeof(unit) - 1, total = 0, dl;
		char *big = malloc(200 * 1024 + 64);
		while (total + ul <= 200 * 1024) {
			memcpy(big + total, unit, ul);
			total += ul;
		}
		big[total] = 0;
		is_int(nf_tokenizer_encode(t, big, total, NF_TOK_ADD_BOS, &tok, &n), 0,
		       "encode %zu bytes", total);
		char *back = malloc(total + 64);
		size_t l = 0;
		int fits = 1;
		for (size_t i = 1; i < n && fits; i++) {
			const char *p = nf_tokenizer_decode(t, tok[i - 1], tok[i], &dl);
			if (l + dl > total) {
				fits = 0;
				break;
			}
			memcpy(back + l, p, dl);
			l += dl;
		}
		ok(fits && l == total && memcmp(back, big, total) == 0 && n < total / 2,
		   "200 KB round trips in %zu tokens", n);
		free(back);
		free(big);
		free(tok);
	}
	/* empty text: BOS only, no dummy prefix */
	is_int(nf_tokenizer_encode(t, "", 0, NF_TOK_ADD_BOS, &tok, &n), 0, "encode empty");
	ok(n == 1 && tok[0] == NF_TOKEN_BOS, "empty text is BOS only");
	free(tok);
	/* not NUL-terminated: only len bytes are read */
	{
		char buf[5] = {'a', 'b', 'c', 'X', 'Y'};
		int *t2 = NULL;
		size_t n2;
		ok(nf_tokenizer_encode(t, buf, 3, 0, &tok, &n) == 0 &&
		   nf_tokenizer_encode(t, "abc", 3, 0, &t2, &n2) == 0 && n == n2 &&
		   memcmp(tok, t2, n * sizeof(int)) == 0, "only len bytes are encoded");
		free(tok);
		free(t2);
	}
	/* decode details */
	{
		size_t l;
		const char *p = nf_tokenizer_decode(t, 0, 3 + 0xE6, &l);
		ok(l == 1 && (unsigned char)p[0] == 0xE6, "<0xE6> decodes to the raw byte");
		p = nf_tokenizer_decode(t, 0, 9999, &l);
		ok(l == 0 && p && *p == 0, "unknown id decodes to empty");
		p = nf_tokenizer_decode(t, 0, -5, &l);
		ok(l == 0, "negative id decodes to empty");
	}
	ref_free(&rv);
	free(raw);
	nf_tokenizer_free(t);
	t = NULL;

	/* Hand-made vocabulary: ties go to the leftmost pair, as in run.c. */
	{
		const char *s[] = {"<unk>", "<s>", "</s>", " ", "a", "aa", " a"};
		float sc[] = {0, 0, 0, 0, 0, 5, 5};
		unsigned char buf[256];
		size_t bl = build(buf, 5, s, sc, 7);
		is_int(nf_tokenizer_load_mem(&t, buf, bl, 7, "mini"), 0, "mini vocab loads");
		if (!t) {
			diag("%s", nf_error_last());
			return done_testing();
		}
		/* " aaa": symbols ' ' a a a; pairs " a"(5) at 0 and "aa"(5) at 1 -> leftmost " a" */
		is_int(nf_tokenizer_encode(t, "aaa", 3, 0, &tok, &n), 0, "mini encode");
		/* leftmost first gives [" a"]["aa"]; "aa" first would give [" "]["aa"]["a"] */
		ok(n == 2 && tok[0] == 6 && tok[1] == 5,
		   "leftmost tie merges first: [ a][aa] (got %zu tokens)", n);
		free(tok);
		/* a byte with no fallback token in a tiny vocab is an error, not a crash */
		is_int(nf_tokenizer_encode(t, "z", 1, 0, &tok, &n), NF_EINPUT,
		       "missing byte fallback is NF_EINPUT");
		is_str(nf_error_last(), "encode: offset 0: byte 0x7A has no token", "its message");
		nf_tokenizer_free(t);
		t = NULL;
	}
	nf_tokenizer_free(NULL);
	free(path);
	return done_testing();
}
