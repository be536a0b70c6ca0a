/*
 * test_tokenizer_json.c - reading tokenizer.json: the Split behaviors and
 * Metaspace against ids Hugging Face `tokenizers` 0.23 gives for the same
 * files (computed once, written here), tokenizer_config.json's tokens and
 * chat template, loading from a folder; and every class of damage refused
 * with one line and the right code: syntax errors (with line:col), wrong
 * types, merges naming unknown tokens, ids out of range or huge, duplicate
 * ids, holes, and features we do not implement (NF_EUNSUPPORTED naming the
 * JSON path).
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

#define REFUSED(call, code, want, name)                                                  \
	do {                                                                             \
		int rc_ = (call);                                                        \
		is_int(rc_, code, "%s: refused with the right code", name);              \
		is_str(nf_error_last(), want, "%s: message", name);                      \
	} while (0)

/* a b c - and merged pieces; "▁" pieces for Metaspace */
#define VOCAB                                                                            \
	"\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"-\":3,\"a-\":4,\"-b\":5,\"--\":6,\"-c\":7,"   \
	"\"b-\":8,\"\\u2581\":9,\"\\u2581a\":10,\"\\u2581b\":11,\" \":12}"
#define MERGES                                                                           \
	"\"merges\":[[\"-\",\"-\"],\"a -\",[\"-\",\"b\"],[\"-\",\"c\"],[\"b\",\"-\"],"      \
	"[\"\\u2581\",\"a\"],[\"\\u2581\",\"b\"]]"
#define MODEL "\"model\":{\"type\":\"BPE\"," VOCAB "," MERGES "}"

static char *with_pre(const char *pre)
{
	return nf_strdup_printf("{\"pre_tokenizer\":%s,\"decoder\":null," MODEL "}", pre);
}

static int ids_are(const char *json, const char *text, const int *want, size_t nw)
{
	nf_tokenizer *t = NULL;
	int *ids = NULL;
	size_t n = 0;
	int same = nf_tokenizer_load_hf_mem(&t, json, strlen(json), NULL, 0, "t.json") == 0 &&
		   nf_tokenizer_encode(t, text, strlen(text), NF_TOK_PARSE_SPECIAL, &ids, &n) == 0 &&
		   n == nw && memcmp(ids, want, n * sizeof(int)) == 0;
	if (!same) {
		char line[256] = "";
		size_t l = 0;
		for (size_t i = 0; i < n && l < 200; i++)
			l += (size_t)snprintf(line + l, sizeof(line) - l, "%d ", ids[i]);
		diag("'%s' -> %s (%s)", text, line, nf_error_last());
	}
	free(ids);
	nf_tokenizer_free(t);
	return same;
}

/* Expected ids from Hugging Face tokenizers 0.23 on the same vocabulary. */
static void behaviors(void)
{
	static const struct {
		const char *behavior;
		int abc[6];
		size_t n_abc;
		int dad[3];
		size_t n_dad;
	} cases[] = {
		{"Isolated", {0, 3, 1, 3, 3, 2}, 6, {3, 0, 3}, 3},
		{"Removed", {0, 1, 2}, 3, {0}, 1},
		{"MergedWithPrevious", {4, 8, 3, 2}, 4, {3, 4}, 2},
		{"MergedWithNext", {0, 5, 3, 7}, 4, {3, 0, 3}, 3},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		char *pre = nf_strdup_printf("{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},"
					     "\"behavior\":\"%s\",\"invert\":false}",
					     cases[k].behavior);
		char *json = with_pre(pre);
		ok(ids_are(json, "a-b--c", cases[k].abc, cases[k].n_abc) &&
		   ids_are(json, "-a-", cases[k].dad, cases[k].n_dad),
		   "Split %s gives Hugging Face's ids", cases[k].behavior);
		free(pre);
		free(json);
	}
	{
		char *json = with_pre("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"-+\"},"
				      "\"behavior\":\"Isolated\",\"invert\":false}");
		ok(ids_are(json, "a--b", (int[]){0, 6, 1}, 3), "a Regex pattern (PCRE2)");
		free(json);
	}
}

/* Characters whose forms differ under the Unicode normalizers. */
#define UVOCAB                                                                           \
	"\"vocab\":{\"e\":0,\"\\u0301\":1,\"\\u00e9\":2,\"f\":3,\"i\":4,\"fi\":5,"         \
	"\"\\ufb01\":6,\"1\":7,\"\\u2460\":8,\"a\":9,\"A\":10,\"\\u0130\":11,"             \
	"\"\\u0307\":12,\"\\u03c3\":13,\"\\u03a3\":14,\" \":15,\"\\u2581\":16,"            \
	"\"\\u2581a\":17,\"x\":18,\"<S>\":19,\"<T>\":20,\"\\u1100\":21,\"\\u1161\":22,"    \
	"\"\\uac00\":23,\"\\u00a0\":24,\"\\u03c2\":25,\"<\":26,\"S\":27,\">\":28},"        \
	"\"merges\":[[\"f\",\"i\"],[\"\\u2581\",\"a\"]]"

static char *with_norm(const char *norm, const char *added)
{
	return nf_strdup_printf("{\"normalizer\":%s,\"added_tokens\":[%s],"
				"\"model\":{\"type\":\"BPE\"," UVOCAB "}}", norm, added);
}

/* NFC, NFD, NFKC, NFKD, Lowercase, Strip and a Sequence of them: ids from
 * Hugging Face tokenizers 0.23 on the same file.  "none" shows each input
 * differs without its normalizer. */
static void normalizers(void)
{
	static const struct {
		const char *norm, *text;
		int ids[8];
		size_t n;
	} cases[] = {
		{"null", "e\u0301", {0, 1}, 2},
		{"null", "\ufb01", {6}, 1},
		{"{\"type\":\"NFC\"}", "e\u0301", {2}, 1},
		{"{\"type\":\"NFC\"}", "\u1100\u1161", {23}, 1},
		{"{\"type\":\"NFC\"}", "\ufb01", {6}, 1},
		{"{\"type\":\"NFD\"}", "\u00e9", {0, 1}, 2},
		{"{\"type\":\"NFD\"}", "\uac00", {21, 22}, 2},
		{"{\"type\":\"NFKC\"}", "\ufb01\u2460", {5, 7}, 2},
		{"{\"type\":\"NFKC\"}", "e\u0301", {2}, 1},
		{"{\"type\":\"NFKD\"}", "\ufb01\u00e9", {5, 0, 1}, 3},
		{"{\"type\":\"Lowercase\"}", "A\u0130\u03a3", {9, 4, 12, 13}, 4},
		{"{\"type\":\"Lowercase\"}", "\u03a3\u03a3", {13, 13}, 2},
		{"{\"type\":\"Strip\",\"strip_left\":true,\"strip_right\":true}", " \u00a0a a\u00a0 ",
		 {9, 15, 9}, 3},
		{"{\"type\":\"Strip\",\"strip_left\":true,\"strip_right\":true}", "   ", {0}, 0},
		{"{\"type\":\"Strip\",\"strip_left\":true,\"strip_right\":false}", " a ", {9, 15}, 2},
		{"{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFKC\"},{\"type\":\"Lowercase\"},"
		 "{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"}]}", "A\ufb01", {17, 5}, 2},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		char *json = with_norm(cases[k].norm, "");
		ok(ids_are(json, cases[k].text, cases[k].ids, cases[k].n),
		   "normalizer %s on case %zu gives Hugging Face's ids", cases[k].norm, k);
		free(json);
	}
	char *json = with_norm("{\"type\":\"NFC\"}", "");
	ok(ids_are(json, "x\xff" "e\u0301", (int[]){18, 2}, 2),
	   "a byte that is not UTF-8 is passed over, the text after it still composed");
	free(json);
}

/* lstrip, rstrip and single_word on a special token: ids from Hugging Face. */
static void added_flags(void)
{
	static const struct {
		const char *flags, *text;
		int ids[8];
		size_t n;
	} cases[] = {
		{"\"lstrip\":true", "a <S> a", {9, 19, 15, 9}, 4},
		{"\"lstrip\":true", " \u00a0<S>  <S>  ", {19, 19, 15, 15}, 4},
		{"\"lstrip\":true", "a<S>a", {9, 19, 9}, 3},
		{"\"lstrip\":true", "x <S>\u0301", {18, 19, 1}, 3},
		{"\"rstrip\":true", "a <S> a", {9, 15, 19, 9}, 4},
		{"\"rstrip\":true", " \u00a0<S>  <S>  ", {15, 24, 19, 19}, 4},
		{"\"rstrip\":true", "x <S>\u0301", {18, 15, 19, 1}, 4},
		{"\"lstrip\":true,\"rstrip\":true", "a <S> a", {9, 19, 9}, 3},
		{"\"lstrip\":true,\"rstrip\":true", " \u00a0<S>  <S>  ", {19, 19}, 2},
		{"\"single_word\":true", "a <S> a", {9, 15, 19, 15, 9}, 5},
		{"\"single_word\":true", " \u00a0<S>  <S>  ", {15, 24, 19, 15, 15, 19, 15, 15}, 8},
		{"\"single_word\":true", "a<S>a", {9, 26, 27, 28, 9}, 5},
		{"\"single_word\":true", "x <S>\u0301", {18, 15, 26, 27, 28, 1}, 6},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		char *added = nf_strdup_printf("{\"id\":19,\"content\":\"<S>\",\"special\":true,"
					       "\"normalized\":false,%s}", cases[k].flags);
		char *json = with_norm("null", added);
		nf_tokenizer *t = NULL;
		int *ids = NULL;
		size_t n = 0;
		ok(ids_are(json, cases[k].text, cases[k].ids, cases[k].n),
		   "added token {%s} on case %zu gives Hugging Face's ids", cases[k].flags, k);
		/* without NF_TOK_PARSE_SPECIAL the token is text, and its flags take nothing */
		ok(nf_tokenizer_load_hf_mem(&t, json, strlen(json), NULL, 0, "t.json") == 0 &&
		   nf_tokenizer_encode(t, "a <S>", 5, 0, &ids, &n) == 0 && n == 5 && ids[1] == 15,
		   "{%s}: not parsed as special, the space stays", cases[k].flags);
		free(ids);
		nf_tokenizer_free(t);
		free(added);
		free(json);
	}
}

/* Split with invert: the pattern matches the words (ids from Hugging Face). */
static void inverted(void)
{
	static const struct {
		const char *behavior, *pattern;
		int abc[6];
		size_t n_abc;
		int dad[3];
		size_t n_dad;
	} cases[] = {
		{"Isolated", "{\"String\":\"-\"}", {0, 3, 1, 3, 3, 2}, 6, {3, 0, 3}, 3},
		{"Isolated", "{\"Regex\":\"[ab]\"}", {0, 3, 1, 6, 2}, 5, {3, 0, 3}, 3},
		{"Removed", "{\"String\":\"-\"}", {3, 3, 3}, 3, {3, 3}, 2},
		{"Removed", "{\"Regex\":\"[ab]\"}", {0, 1}, 2, {0}, 1},
		{"MergedWithPrevious", "{\"String\":\"-\"}", {0, 5, 3, 7}, 4, {3, 0, 3}, 3},
		{"MergedWithPrevious", "{\"Regex\":\"[ab]\"}", {4, 1, 6, 2}, 4, {3, 4}, 2},
		{"MergedWithNext", "{\"String\":\"-\"}", {4, 8, 3, 2}, 4, {3, 4}, 2},
		{"MergedWithNext", "{\"Regex\":\"[ab]\"}", {0, 5, 6, 2}, 4, {3, 0, 3}, 3},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		char *pre = nf_strdup_printf("{\"type\":\"Split\",\"pattern\":%s,"
					     "\"behavior\":\"%s\",\"invert\":true}",
					     cases[k].pattern, cases[k].behavior);
		char *json = with_pre(pre);
		ok(ids_are(json, "a-b--c", cases[k].abc, cases[k].n_abc) &&
		   ids_are(json, "-a-", cases[k].dad, cases[k].n_dad),
		   "Split %s %s inverted gives Hugging Face's ids", cases[k].behavior,
		   cases[k].pattern);
		free(pre);
		free(json);
	}
}

/* Llama 3's ignore_merges: a word that is a token is taken whole (ids from HF). */
static void ignore_merges(void)
{
	static const char *fmt = "{\"model\":{\"type\":\"BPE\",\"ignore_merges\":%s,"
				 "\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"ab\":3,\"abc\":4,\"bc\":5},"
				 "\"merges\":[\"b c\",\"a b\"]}}";
	char *off = nf_strdup_printf(fmt, "false"), *on = nf_strdup_printf(fmt, "true");
	ok(ids_are(off, "abc", (int[]){0, 5}, 2), "merges alone: a|bc");
	ok(ids_are(on, "abc", (int[]){4}, 1) && ids_are(on, "abcabc", (int[]){0, 5, 0, 5}, 4),
	   "ignore_merges: the word 'abc' whole, 'abcabc' by merges");
	free(off);
	free(on);
}

static void metaspace(void)
{
	static const char json[] =
		"{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\","
		"\"prepend_scheme\":\"always\",\"split\":true},"
		"\"decoder\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\","
		"\"prepend_scheme\":\"always\",\"split\":true}," MODEL "}";
	nf_tokenizer *t = NULL;
	size_t l1, l2;
	ok(ids_are(json, "a b", (int[]){10, 11}, 2), "Metaspace gives Hugging Face's ids");
	is_int(nf_tokenizer_load_hf_mem(&t, json, strlen(json), NULL, 0, "m"), 0, "loads");
	if (!t)
		return;
	const char *p1 = nf_tokenizer_decode(t, -1, 10, &l1);
	ok(l1 == 1 && p1[0] == 'a', "decodes the first word without its space");
	const char *p2 = nf_tokenizer_decode(t, 10, 11, &l2);
	ok(l2 == 2 && !memcmp(p2, " b", 2), "and the next with it");
	nf_tokenizer_free(t);
}

static void config_and_dir(void)
{
	static const char json[] =
		"{\"added_tokens\":[{\"id\":13,\"content\":\"<s>\",\"special\":true},"
		"{\"id\":14,\"content\":\"</s>\",\"special\":true}],"
		"\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":["
		"{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\","
		"\"type_id\":0}}],\"pair\":[],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\","
		"\"ids\":[13],\"tokens\":[\"<s>\"]}}}," MODEL "}";
	static const char cfg[] = "{\"bos_token\":{\"content\":\"<s>\"},\"eos_token\":\"</s>\","
				  "\"chat_template\":[{\"name\":\"tool_use\",\"template\":\"T\"},"
				  "{\"name\":\"default\",\"template\":\"D\"}]}";
	char dir[] = "/tmp/nf_tokjson_XXXXXX";
	nf_tokenizer *t = NULL;
	int *ids = NULL;
	size_t n = 0;
	ok(mkdtemp(dir) != NULL, "temp dir");
	char *jp = nf_path_join(dir, "tokenizer.json"), *cp = nf_path_join(dir, "tokenizer_config.json");
	ok(nf_fs_write_atomic(jp, json, strlen(json), 0644) == 0 &&
	   nf_fs_write_atomic(cp, cfg, strlen(cfg), 0644) == 0, "an HF model folder");
	is_int(nf_tokenizer_load_dir(&t, dir, 0), 0, "loads from the folder: %s", nf_error_last());
	if (t) {
		is_int(nf_tokenizer_bos(t), 13, "bos_token from the config, an object with content");
		is_int(nf_tokenizer_eos(t), 14, "eos_token from the config, a string");
		is_str(nf_tokenizer_chat_template(t), "D", "the \"default\" chat template of a list");
		ok(nf_tokenizer_encode(t, "ab", 2, NF_TOK_ADD_SPECIAL, &ids, &n) == 0 && n == 3 &&
		   ids[0] == 13, "the post-processor adds BOS");
		free(ids);
		ok(nf_tokenizer_is_eog(t, 14), "</s> ends generation");
		is_int(nf_tokenizer_vocab_size(t), 15, "vocabulary and added tokens");
	}
	nf_tokenizer_free(t);
	unlink(jp);
	char *want = nf_strdup_printf("%s: no tokenizer.json or tokenizer.bin", dir);
	REFUSED(nf_tokenizer_load_dir(&t, dir, 0), NF_ENOTFOUND, want, "an empty folder");
	free(want);
	free(jp);
	free(cp);
	nf_fs_remove_tree(dir);
}

static void damaged(void)
{
	static const struct {
		const char *json, *cfg;
		int code;
		const char *msg;
	} cases[] = {
		{"{\"model\": {\"type\": \"BPE\",\n \"vocab\": {\"a\": 0,}}}", NULL, NF_EINPUT,
		 "t.json: 2:19: string or '}' expected near '}'"},
		{"[1, 2]", NULL, NF_EINPUT, "t.json: the top level is not an object"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":[\"a\"]}}", NULL, NF_EINPUT,
		 "t.json: model.vocab is not an object"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"0\"}}}", NULL, NF_EINPUT,
		 "t.json: model.vocab 'a': the id is not an integer"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1}}}", NULL, NF_EINPUT,
		 "t.json: model.vocab 'a': id -1 is out of range (0..4194303)"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":4000000000000}}}", NULL, NF_EINPUT,
		 "t.json: model.vocab 'a': id 4000000000000 is out of range (0..4194303)"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":99999999999999999999}}}", NULL,
		 NF_EINPUT, "t.json: 1:56: too big integer near '99999999999999999999'"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1.5}}}", NULL, NF_EINPUT,
		 "t.json: model.vocab 'a': the id is not an integer"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0}}}", NULL, NF_EINPUT,
		 "t.json: model.vocab: id 0 is both 'a' and 'b'"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":5}}}", NULL, NF_EINPUT,
		 "t.json: id 5 is beyond the 2 tokens given"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a c\"]}}",
		 NULL, NF_EINPUT, "t.json: merge 0: its right side 'c' is not a token"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}",
		 NULL, NF_EINPUT, "t.json: merge 0: 'ab' is not a token"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[7]}}", NULL,
		 NF_EINPUT, "t.json: model.merges[0] is neither 'a b' nor a pair of strings"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":{}}}", NULL, NF_EINPUT,
		 "t.json: model.merges is not an array"},
		{"{\"added_tokens\":[{\"id\":1,\"content\":\"x\"},{\"id\":1,\"content\":\"y\"}],"
		 "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", NULL, NF_EINPUT,
		 "t.json: added_tokens: id 1 is both 'x' and 'y'"},
		{"{\"added_tokens\":[{\"id\":9999999,\"content\":\"x\"}],"
		 "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", NULL, NF_EINPUT,
		 "t.json: added_tokens 'x': id 9999999 is out of range (0..4194303)"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"byte_fallback\":1}}", NULL,
		 NF_EINPUT, "t.json: model.byte_fallback is not a boolean"},
		{"{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}", NULL, NF_EUNSUPPORTED,
		 "t.json: model.type: 'WordPiece' is not supported"},
		{"{\"normalizer\":{\"type\":\"BertNormalizer\"},\"model\":{\"type\":\"BPE\","
		 "\"vocab\":{\"a\":0}}}", NULL, NF_EUNSUPPORTED,
		 "t.json: normalizer: 'BertNormalizer' is not supported"},
		{"{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":"
		 "\"Whitespace\"}]},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", NULL,
		 NF_EUNSUPPORTED, "t.json: pre_tokenizer: 'Whitespace' is not supported"},
		{"{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":"
		 "\"Isolated\"},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", NULL, NF_EINPUT,
		 "t.json: regex '(': offset 1: missing closing parenthesis"},
		{"{\"decoder\":{\"type\":\"WordPiece\"},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}",
		 NULL, NF_EUNSUPPORTED, "t.json: decoder: 'WordPiece' is not supported"},
		{"{\"post_processor\":{\"type\":\"BertProcessing\"},\"model\":{\"type\":\"BPE\","
		 "\"vocab\":{\"a\":0}}}", NULL, NF_EUNSUPPORTED,
		 "t.json: post_processor: 'BertProcessing' is not supported"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"dropout\":0.1}}", NULL,
		 NF_EUNSUPPORTED, "t.json: model.dropout is not supported"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", "{\"bos_token\":\"<s>\"}",
		 NF_EINPUT, "t.json: tokenizer_config.json: bos_token '<s>' is not a token"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", "{\"chat_template\":5}",
		 NF_EINPUT, "t.json: tokenizer_config.json: chat_template is not a string"},
		{"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", "{", NF_EINPUT,
		 "t.json (tokenizer_config.json): 1:1: string or '}' expected near end of file"},
		{"", NULL, NF_EINPUT, "t.json: 1:0: '[' or '{' expected near end of file"},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		nf_tokenizer *t = NULL;
		char name[32];
		snprintf(name, sizeof(name), "damaged case %zu", k);
		REFUSED(nf_tokenizer_load_hf_mem(&t, cases[k].json, strlen(cases[k].json),
						 cases[k].cfg, cases[k].cfg ? strlen(cases[k].cfg) : 0,
						 "t.json"),
			cases[k].code, cases[k].msg, name);
		ok(t == NULL, "%s: no tokenizer", name);
	}
}

int main(void)
{
	behaviors();
	inverted();
	normalizers();
	added_flags();
	ignore_merges();
	metaspace();
	config_and_dir();
	damaged();
	return done_testing();
}
