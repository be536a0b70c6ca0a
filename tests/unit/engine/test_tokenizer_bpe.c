/*
 * test_tokenizer_bpe.c - the SentencePiece and byte-level BPE kinds on
 * hand-made vocabularies built with nf_tokenizer_new: GPT-2's byte map
 * (against the obvious re-implementation of bytes_to_unicode), merge order
 * by rank, pre-tokenizer splits that merges may not cross, control and
 * user-defined tokens matched whole, byte fallback, decoding pieces of a
 * UTF-8 character, the queries, the validation of a spec, and the writer:
 * what it writes reads back as the same tokenizer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/tokenizer.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* GPT-2's bytes_to_unicode, as its Python spells it. */
static unsigned ref_byte_cp(unsigned b)
{
	unsigned n = 0;
	for (unsigned x = 0; x < 256; x++) {
		bool printable = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
		if (x == b)
			return printable ? x : 256 + n;
		if (!printable)
			n++;
	}
	return 0;
}

static size_t utf8(char *out, unsigned cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	out[0] = (char)(0xC0 | cp >> 6);
	out[1] = (char)(0x80 | (cp & 0x3F));
	return 2;
}

/* A byte-level vocabulary: ids 0..255 the bytes' characters, then extra tokens. */
typedef struct vocab {
	char buf[300][32];
	nf_tok_str tok[300];
	int type[300];
	int n;
} vocab;

static void vocab_bytes(vocab *v)
{
	v->n = 0;
	for (unsigned b = 0; b < 256; b++) {
		size_t l = utf8(v->buf[b], ref_byte_cp(b));
		v->tok[b] = (nf_tok_str){v->buf[b], l};
		v->type[b] = NF_TOKTYPE_NORMAL;
		v->n++;
	}
}

static int vocab_add(vocab *v, const char *s, int type)
{
	snprintf(v->buf[v->n], sizeof(v->buf[0]), "%s", s);
	v->tok[v->n] = (nf_tok_str){v->buf[v->n], strlen(s)};
	v->type[v->n] = type;
	return v->n++;
}

static int encode_is(const nf_tokenizer *t, const char *text, unsigned flags, const int *want,
		     size_t nw)
{
	int *ids = NULL;
	size_t n = 0;
	int same = nf_tokenizer_encode(t, text, strlen(text), flags, &ids, &n) == 0 && n == nw &&
		   (n == 0 || memcmp(ids, want, n * sizeof(int)) == 0);
	if (!same) {
		char line[512];
		size_t l = 0;
		for (size_t i = 0; i < n && l < sizeof(line) - 16; i++)
			l += (size_t)snprintf(line + l, sizeof(line) - l, "%d ", ids[i]);
		line[l] = 0;
		diag("'%s' -> %s (%s)", text, line, nf_error_last());
	}
	free(ids);
	return same;
}

static nf_tokenizer_spec bpe_spec(const vocab *v, const nf_tok_str *merges, size_t n_merges,
				  const char *pre)
{
	return (nf_tokenizer_spec){.kind = NF_TOK_BPE, .n_tokens = v->n, .tokens = v->tok,
				   .types = v->type, .merges = merges, .n_merges = n_merges,
				   .pre = pre, .bos_id = -1, .eos_id = -1, .unk_id = -1,
				   .pad_id = -1};
}

#define S(x) ((nf_tok_str){x, sizeof(x) - 1})

static void byte_map(void)
{
	vocab v;
	nf_tokenizer *t = NULL;
	nf_tokenizer_spec s;
	int all = 1;
	vocab_bytes(&v);
	s = bpe_spec(&v, NULL, 0, "gpt-2");
	is_int(nf_tokenizer_new(&t, &s, "bytes"), 0, "a vocabulary of the 256 byte characters");
	if (!t)
		return;
	for (unsigned b = 1; b < 256; b++) {
		char c = (char)b;
		int *ids = NULL;
		size_t n = 0, l = 0;
		const char *p;
		all &= nf_tokenizer_encode(t, &c, 1, 0, &ids, &n) == 0 && n == 1 && ids[0] == (int)b;
		p = nf_tokenizer_decode(t, 0, (int)b, &l);
		all &= l == 1 && (unsigned char)p[0] == b;
		free(ids);
	}
	ok(all, "every byte encodes to its character's token and decodes back (GPT-2's map)");
	{
		int want[] = {0xC3, 0xA9}; /* é is two byte tokens without merges */
		size_t l1, l2;
		ok(encode_is(t, "\xc3\xa9", 0, want, 2), "a 2-byte character is two byte tokens");
		const char *p1 = nf_tokenizer_decode(t, -1, 0xC3, &l1);
		const char *p2 = nf_tokenizer_decode(t, 0xC3, 0xA9, &l2);
		ok(l1 == 1 && l2 == 1 && (unsigned char)p1[0] == 0xC3 && (unsigned char)p2[0] == 0xA9,
		   "each decodes to its one byte, half a character");
	}
	nf_tokenizer_free(t);
}

static void merge_order(void)
{
	vocab v;
	nf_tokenizer *t = NULL;
	nf_tokenizer_spec s;
	int ab, bc, aa, ag;
	vocab_bytes(&v);
	ab = vocab_add(&v, "ab", 1);
	bc = vocab_add(&v, "bc", 1);
	aa = vocab_add(&v, "aa", 1);
	ag = vocab_add(&v, "a\xc4\xa0", 1); /* "aĠ": a then a space */
	{
		nf_tok_str m[] = {S("b c"), S("a b"), S("a a"), S("a \xc4\xa0")};
		s = bpe_spec(&v, m, 4, "gpt-2");
		is_int(nf_tokenizer_new(&t, &s, "merges"), 0, "bpe with merges builds");
		int w1[] = {'a', bc};
		ok(encode_is(t, "abc", 0, w1, 2), "the lower rank merges first: a|bc");
		int w2[] = {aa, 'a'};
		ok(encode_is(t, "aaa", 0, w2, 2), "equal ranks merge leftmost first: aa|a");
		/* the space byte's token id is the byte; "aĠ" is a merge but spans two words */
		int w3[] = {'a', ' ', 'b'};
		ok(encode_is(t, "a b", 0, w3, 3), "no merge across GPT-2's split (a | Ġb)");
		ok(encode_is(t, "xa b", 0, (int[]){'x', 'a', ' ', 'b'}, 4) &&
		   encode_is(t, "a\xc4\xa0", 0, (int[]){'a', 0xC4, 0xA0}, 3),
		   "nor on the bytes of the character Ġ itself");
		nf_tokenizer_free(t);
		t = NULL;
	}
	{
		nf_tok_str m[] = {S("a b"), S("b c")};
		s = bpe_spec(&v, m, 2, NULL);
		is_int(nf_tokenizer_new(&t, &s, "merges2"), 0, "the other order builds");
		int w[] = {ab, 'c'};
		ok(encode_is(t, "abc", 0, w, 2), "reversed ranks: ab|c");
		nf_tokenizer_free(t);
		t = NULL;
	}
	(void)ag;
}

static void digits_split(void)
{
	vocab v;
	nf_tokenizer *t = NULL;
	nf_tokenizer_spec s;
	int d12;
	vocab_bytes(&v);
	d12 = vocab_add(&v, "12", 1);
	nf_tok_str m[] = {S("1 2")};
	s = bpe_spec(&v, m, 1, "smollm");
	is_int(nf_tokenizer_new(&t, &s, "smollm"), 0, "smollm pre-tokenizer builds");
	int w1[] = {'1', '2'};
	ok(encode_is(t, "12", 0, w1, 2), "smollm: each digit on its own, no merge");
	nf_tokenizer_free(t);
	t = NULL;
	s = bpe_spec(&v, m, 1, "gpt-2");
	is_int(nf_tokenizer_new(&t, &s, "gpt2"), 0, "gpt-2 pre-tokenizer builds");
	int w2[] = {d12};
	ok(encode_is(t, "12", 0, w2, 1), "gpt-2: digits stay together and merge");
	nf_tokenizer_free(t);
	t = NULL;
	s = bpe_spec(&v, m, 1, "qwen2");
	is_int(nf_tokenizer_new(&t, &s, "qwen2"), 0, "qwen2 pre-tokenizer builds");
	ok(encode_is(t, "12", 0, w1, 2), "qwen2: one digit per word");
	nf_tokenizer_free(t);
	t = NULL;
	s = bpe_spec(&v, m, 1, "llama-bpe");
	is_int(nf_tokenizer_new(&t, &s, "llama3"), 0, "llama-bpe pre-tokenizer builds");
	ok(encode_is(t, "123412", 0, (int[]){d12, '3', '4', d12}, 4) &&
	   encode_is(t, "1231", 0, (int[]){d12, '3', '1'}, 3), "llama-bpe: digits in threes");
	nf_tokenizer_free(t);
	t = NULL;
	s = bpe_spec(&v, m, 1, "mystery");
	is_int(nf_tokenizer_new(&t, &s, "x"), NF_EUNSUPPORTED, "an unknown pre-tokenizer is refused");
}

static void specials(void)
{
	vocab v;
	nf_tokenizer *t = NULL;
	nf_tokenizer_spec s;
	int end, start, user, eot;
	vocab_bytes(&v);
	end = vocab_add(&v, "<|im_end|>", NF_TOKTYPE_CONTROL);
	start = vocab_add(&v, "<|im_start|>", NF_TOKTYPE_CONTROL);
	eot = vocab_add(&v, "<|eot_id|>", NF_TOKTYPE_NORMAL);
	user = vocab_add(&v, "<tool>", NF_TOKTYPE_USER);
	s = bpe_spec(&v, NULL, 0, "default");
	s.bos_id = start;
	s.eos_id = end;
	s.chat_template = "{{ messages }}";
	is_int(nf_tokenizer_new(&t, &s, "specials"), 0, "a vocabulary with control tokens");
	if (!t)
		return;
	int w1[] = {'a', end, 'b'};
	ok(encode_is(t, "a<|im_end|>b", NF_TOK_PARSE_SPECIAL, w1, 3),
	   "PARSE_SPECIAL: a control token in the text is one id");
	ok(encode_is(t, "a<|im_end|>b", 0,
		     (int[]){'a', '<', '|', 'i', 'm', '_', 'e', 'n', 'd', '|', '>', 'b'}, 12),
	   "without it the control token is text");
	ok(encode_is(t, "x<tool>", 0, (int[]){'x', user}, 2),
	   "a user-defined token is matched whole always");
	ok(encode_is(t, "<|im_start|><|im_end|>", NF_TOK_PARSE_SPECIAL | NF_TOK_ADD_SPECIAL,
		     (int[]){start, end}, 2), "add_bos false: ADD_SPECIAL adds nothing");
	ok(encode_is(t, "", NF_TOK_ADD_BOS | NF_TOK_ADD_EOS, (int[]){start, end}, 2),
	   "ADD_BOS/ADD_EOS add them anyway");
	ok(nf_tokenizer_is_eog(t, end) && nf_tokenizer_is_eog(t, eot) && !nf_tokenizer_is_eog(t, start) &&
	   !nf_tokenizer_is_eog(t, 'a') && !nf_tokenizer_is_eog(t, -1) && !nf_tokenizer_is_eog(t, 99999),
	   "is_eog: EOS and <|eot_id|>, not BOS or text");
	ok(nf_tokenizer_is_control(t, end) && !nf_tokenizer_is_control(t, user) &&
	   !nf_tokenizer_is_control(t, 'a'), "is_control");
	{
		size_t l;
		const char *p = nf_tokenizer_decode(t, 'a', end, &l);
		ok(l == 0 && p, "a control token decodes to \"\"");
		p = nf_tokenizer_decode_flags(t, 'a', end, NF_TOK_DECODE_SPECIAL, &l);
		ok(l == 10 && memcmp(p, "<|im_end|>", 10) == 0, "and to its text on request");
		p = nf_tokenizer_token(t, ' ', &l);
		ok(p && l == 2 && memcmp(p, "\xc4\xa0", 2) == 0, "the space's token is spelled Ġ");
		ok(nf_tokenizer_token(t, -1, &l) == NULL, "no token text out of range");
	}
	is_str(nf_tokenizer_chat_template(t), "{{ messages }}", "chat template kept");
	is_str(nf_tokenizer_bos_text(t), "<|im_start|>", "bos text");
	is_str(nf_tokenizer_eos_text(t), "<|im_end|>", "eos text");
	is_int(nf_tokenizer_bos(t), start, "bos id");
	is_int(nf_tokenizer_eos(t), end, "eos id");
	is_int(nf_tokenizer_kind(t), NF_TOK_BPE, "kind");
	nf_tokenizer_free(t);
}

/* A SentencePiece vocabulary: <unk> <s> </s>, 256 byte tokens, then pieces. */
typedef struct spm {
	char buf[280][16];
	nf_tok_str tok[280];
	int type[280];
	float score[280];
	int n;
} spm;

static int spm_add(spm *v, const char *s, int type, float score)
{
	snprintf(v->buf[v->n], sizeof(v->buf[0]), "%s", s);
	v->tok[v->n] = (nf_tok_str){v->buf[v->n], strlen(s)};
	v->type[v->n] = type;
	v->score[v->n] = score;
	return v->n++;
}

static void sentencepiece(void)
{
	spm v = {.n = 0};
	nf_tokenizer *t = NULL;
	nf_tokenizer_spec s;
	int sp, a, b, spa, ab, spab;
	spm_add(&v, "<unk>", NF_TOKTYPE_UNKNOWN, 0);
	spm_add(&v, "<s>", NF_TOKTYPE_CONTROL, 0);
	spm_add(&v, "</s>", NF_TOKTYPE_CONTROL, 0);
	for (int i = 0; i < 256; i++) {
		char h[8];
		snprintf(h, sizeof(h), "<0x%02X>", i);
		spm_add(&v, h, NF_TOKTYPE_BYTE, 0);
	}
	sp = spm_add(&v, "\xe2\x96\x81", 1, -1);
	a = spm_add(&v, "a", 1, -2);
	b = spm_add(&v, "b", 1, -3);
	spa = spm_add(&v, "\xe2\x96\x81" "a", 1, -5);
	ab = spm_add(&v, "ab", 1, -4);
	spab = spm_add(&v, "\xe2\x96\x81" "ab", 1, -6);
	s = (nf_tokenizer_spec){.kind = NF_TOK_SPM, .n_tokens = v.n, .tokens = v.tok,
				.scores = v.score, .types = v.type, .bos_id = 1, .eos_id = 2,
				.unk_id = 0, .pad_id = -1, .add_bos = true, .add_space_prefix = true};
	is_int(nf_tokenizer_new(&t, &s, "spm"), 0, "a SentencePiece vocabulary builds");
	if (!t)
		return;
	/* ▁ a b: "ab" (-4) beats "▁a" (-5), then "▁ab" (-6) */
	ok(encode_is(t, "ab", NF_TOK_ADD_SPECIAL, (int[]){1, spab}, 2),
	   "best score first, then the next: <s> ▁ab");
	ok(encode_is(t, "a a", 0, (int[]){spa, spa}, 2), "spaces are ▁ and prefix: ▁a ▁a");
	ok(encode_is(t, "b\xc3\xa9", 0, (int[]){sp, b, 3 + 0xC3, 3 + 0xA9}, 4),
	   "a character not in the vocabulary falls back to its bytes");
	ok(encode_is(t, "<s>", NF_TOK_PARSE_SPECIAL, (int[]){1}, 1), "<s> matched whole on request");
	ok(encode_is(t, "<unk>", NF_TOK_PARSE_SPECIAL, (int[]){0}, 1), "<unk> too");
	{
		size_t l;
		const char *p = nf_tokenizer_decode(t, -1, spa, &l);
		ok(l == 1 && p[0] == 'a', "the first token loses the prefix space");
		p = nf_tokenizer_decode(t, 1, spa, &l);
		ok(l == 1 && p[0] == 'a', "and after BOS");
		p = nf_tokenizer_decode(t, a, spa, &l);
		ok(l == 2 && !memcmp(p, " a", 2), "later ones keep it");
		p = nf_tokenizer_decode(t, a, 3 + 0xC3, &l);
		ok(l == 1 && (unsigned char)p[0] == 0xC3, "<0xC3> decodes to its byte");
		p = nf_tokenizer_decode(t, a, 0, &l);
		ok(l == 0, "<unk> decodes to \"\"");
	}
	(void)ab;
	/* the writer: the same ids from what it wrote */
	{
		char dir[] = "/tmp/nf_tok_spm_XXXXXX";
		nf_tokenizer *back = NULL;
		ok(mkdtemp(dir) != NULL, "temp dir");
		is_int(nf_tokenizer_write_hf(t, dir), 0, "write tokenizer.json");
		is_int(nf_tokenizer_load_dir(&back, dir, 0), 0, "read it back: %s", nf_error_last());
		if (back) {
			ok(encode_is(back, "ab", NF_TOK_ADD_SPECIAL, (int[]){1, spab}, 2) &&
			   encode_is(back, "b\xc3\xa9 a", 0, (int[]){sp, b, 3 + 0xC3, 3 + 0xA9, spa}, 5),
			   "the written tokenizer gives the same ids");
			is_int(nf_tokenizer_kind(back), NF_TOK_SPM, "and is SentencePiece");
			is_str(nf_tokenizer_bos_text(back), "<s>", "with its BOS");
		}
		nf_tokenizer_free(back);
		nf_fs_remove_tree(dir);
	}
	nf_tokenizer_free(t);
}

static void writer_bpe(void)
{
	vocab v;
	nf_tokenizer *t = NULL, *back = NULL;
	nf_tokenizer_spec s;
	char dir[] = "/tmp/nf_tok_bpe_XXXXXX";
	int ab, end;
	vocab_bytes(&v);
	ab = vocab_add(&v, "ab", 1);
	end = vocab_add(&v, "<|end|>", NF_TOKTYPE_CONTROL);
	nf_tok_str m[] = {S("a b")};
	s = bpe_spec(&v, m, 1, "smollm");
	s.eos_id = end;
	s.bos_id = end;
	s.add_bos = true;
	s.chat_template = "T";
	is_int(nf_tokenizer_new(&t, &s, "w"), 0, "bpe for the writer");
	ok(mkdtemp(dir) != NULL, "temp dir");
	is_int(nf_tokenizer_write_hf(t, dir), 0, "write");
	is_int(nf_tokenizer_load_dir(&back, dir, 0), 0, "read back: %s", nf_error_last());
	if (back) {
		ok(encode_is(back, "ab1<|end|>", NF_TOK_ADD_SPECIAL | NF_TOK_PARSE_SPECIAL,
			     (int[]){end, ab, '1', end}, 4), "same ids, BOS added as before");
		is_str(nf_tokenizer_chat_template(back), "T", "chat template kept");
		ok(nf_tokenizer_is_eog(back, end), "<|end|> ends generation");
	}
	nf_tokenizer_free(back);
	nf_tokenizer_free(t);
	nf_fs_remove_tree(dir);
}

static void validation(void)
{
	vocab v;
	nf_tokenizer *t = NULL;
	nf_tokenizer_spec s;
	vocab_bytes(&v);
	vocab_add(&v, "a", 1); /* a duplicate of byte 'a' */
	s = bpe_spec(&v, NULL, 0, NULL);
	is_int(nf_tokenizer_new(&t, &s, "dup"), NF_EINPUT, "duplicate tokens are refused");
	is_str(nf_error_last(), "dup: tokens 97 and 256 are both 'a'", "and named");
	vocab_bytes(&v);
	{
		nf_tok_str m[] = {S("a zz")};
		s = bpe_spec(&v, m, 1, NULL);
		is_int(nf_tokenizer_new(&t, &s, "m"), NF_EINPUT, "a merge naming an unknown token");
		is_str(nf_error_last(), "m: merge 0: its right side 'zz' is not a token", "its message");
		nf_tok_str m2[] = {S("a b")};
		s = bpe_spec(&v, m2, 1, NULL);
		is_int(nf_tokenizer_new(&t, &s, "m"), NF_EINPUT, "a merge whose result is no token");
		nf_tok_str m3[] = {S("ab")};
		s = bpe_spec(&v, m3, 1, NULL);
		is_int(nf_tokenizer_new(&t, &s, "m"), NF_EINPUT, "a merge without a space");
	}
	s = bpe_spec(&v, NULL, 0, NULL);
	s.eos_id = 256;
	is_int(nf_tokenizer_new(&t, &s, "ids"), NF_EINPUT, "an EOS id out of range");
	is_str(nf_error_last(), "ids: eos id 256 is out of range (-1..255)", "its message");
	s.eos_id = -1;
	v.type[5] = 9;
	is_int(nf_tokenizer_new(&t, &s, "ty"), NF_EINPUT, "a token type out of range");
	v.type[5] = 1;
	s.n_tokens = 0;
	is_int(nf_tokenizer_new(&t, &s, "n"), NF_EINPUT, "an empty vocabulary");
	s.n_tokens = v.n;
	s.kind = NF_TOK_SPM;
	is_int(nf_tokenizer_new(&t, &s, "spm"), NF_EINPUT, "spm without scores");
	s.kind = NF_TOK_LLAMA2C;
	is_int(nf_tokenizer_new(&t, &s, "k"), NF_EUNSUPPORTED, "llama2c is not built from arrays");
	ok(t == NULL, "nothing built after refusals");
}

int main(void)
{
	byte_map();
	merge_order();
	digits_split();
	specials();
	sentencepiece();
	writer_bpe();
	validation();
	return done_testing();
}
