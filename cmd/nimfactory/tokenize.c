/*
 * tokenize.c - `nimfactory tokenize DIR (--text T|--file F) [--json]
 * [--no-special]` prints the ids of a text; `nimfactory detokenize DIR
 * (--ids "1 2"|--file F|--json '[1,2]') [--special]` prints the text of ids.
 * DIR is an engine, a build output (with --profile) or a Hugging Face model
 * folder.  stdout holds the result and nothing else; bad input is one line
 * on stderr and exit 2.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/nimfactory/commands.h"
#include "cmd/nimfactory/output.h"
#include "engine/tokenizer.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/parse.h"
#include "util/banned.h"

#define MAX_INPUT (64u << 20) /* bound on --file */

/* One line each: bad input is one line on stderr. */
static const char tokenize_usage[] =
	"usage: nimfactory tokenize ENGINE_DIR|OUT|HF_DIR [--profile P] (--text TEXT|--file F) "
	"[--json] [--no-special]\n";
static const char detokenize_usage[] =
	"usage: nimfactory detokenize ENGINE_DIR|OUT|HF_DIR [--profile P] "
	"(--ids \"1 2 3\"|--file F|--json '[1,2,3]') [--special]\n";

/* A folder holding a tokenizer as it is, else the engine folder of a build output. */
static int open_tokenizer(nf_tokenizer **out, const char *path, const char *profile)
{
	char *json = nf_path_join(path, "tokenizer.json"), *bin = nf_path_join(path, "tokenizer.bin");
	char *dir = NULL;
	int err;
	if (!json || !bin)
		err = nf_error_set(NF_ENOMEM, "out of memory");
	else if (!profile && (nf_fs_exists(json) || nf_fs_exists(bin)))
		err = nf_tokenizer_load_dir(out, path, 0);
	else if (!(err = nf_output_engine_dir(&dir, path, profile)))
		err = nf_tokenizer_load_dir(out, dir, 0);
	free(json);
	free(bin);
	free(dir);
	return err;
}

static void print_ids(const int *ids, size_t n, bool json)
{
	fputs(json ? "[" : "", stdout);
	for (size_t i = 0; i < n; i++)
		printf("%s%d", i ? (json ? "," : " ") : "", ids[i]);
	fputs(json ? "]\n" : "\n", stdout);
}

int nf_cmd_tokenize(int argc, char **argv)
{
	static const struct option options[] = {
		{"text", required_argument, NULL, 't'}, {"file", required_argument, NULL, 'f'},
		{"json", no_argument, NULL, 'j'},       {"no-special", no_argument, NULL, 'n'},
		{"profile", required_argument, NULL, 'R'}, {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *text = NULL, *file = NULL, *profile = NULL;
	char *buf = NULL;
	size_t len = 0, n = 0;
	int *ids = NULL, c, err = 0;
	bool json = false, special = true;
	nf_tokenizer *t = NULL;

	optind = 1;
	while ((c = getopt_long(argc, argv, "t:f:jnh", options, NULL)) != -1) {
		switch (c) {
		case 't': text = optarg; break;
		case 'f': file = optarg; break;
		case 'j': json = true; break;
		case 'n': special = false; break;
		case 'R': profile = optarg; break;
		case 'h': fputs(tokenize_usage, stdout); return NF_EXIT_OK;
		default: fputs(tokenize_usage, stderr); return NF_EXIT_INPUT;
		}
	}
	if (optind + 1 != argc || !text == !file) {
		fputs(tokenize_usage, stderr);
		return NF_EXIT_INPUT;
	}
	if (file && (err = nf_fs_read_file(&buf, &len, file, MAX_INPUT)))
		goto done;
	if (text)
		len = strlen(text);
	if ((err = open_tokenizer(&t, argv[optind], profile)) ||
	    (err = nf_tokenizer_encode(t, file ? buf : text, len,
				       NF_TOK_ADD_SPECIAL | (special ? NF_TOK_PARSE_SPECIAL : 0),
				       &ids, &n)))
		goto done;
	print_ids(ids, n, json);
done:
	free(buf);
	free(ids);
	nf_tokenizer_free(t);
	return err ? nf_cmd_fail("tokenize", err) : NF_EXIT_OK;
}

/* ------------------------------------------------------- detokenize */

typedef struct idlist {
	int *a;
	size_t n;
} idlist;

static int parse_json_ids(idlist *out, const char *s, size_t len, int vocab)
{
	json_error_t je;
	json_t *a = json_loadb(s, len, 0, &je), *v;
	size_t i;
	int err = 0;
	if (!json_is_array(a)) {
		json_decref(a);
		return nf_error_set(NF_EINPUT, "ids: not a JSON array of integers%s%s",
				    a ? "" : ": ", a ? "" : je.text);
	}
	if (!(out->a = malloc((json_array_size(a) + 1) * sizeof(int)))) {
		json_decref(a);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	json_array_foreach(a, i, v) {
		json_int_t x = json_is_integer(v) ? json_integer_value(v) : -1;
		if (x < 0 || x >= vocab) {
			err = nf_error_set(NF_EINPUT, "ids: element %zu is not an id in 0..%d", i,
					   vocab - 1);
			break;
		}
		out->a[out->n++] = (int)x;
	}
	json_decref(a);
	return err;
}

/* Whitespace-separated decimal ids; at most one id per two bytes. */
static int parse_plain_ids(idlist *out, const char *s, size_t len, int vocab)
{
	size_t i = 0;
	if (!(out->a = malloc((len / 2 + 1) * sizeof(int))))
		return nf_error_set(NF_ENOMEM, "out of memory");
	while (i < len) {
		char word[16];
		size_t k = 0;
		long v;
		int err;
		while (i < len && strchr(" \t\r\n", s[i]))
			i++;
		while (i < len && !strchr(" \t\r\n", s[i]) && k < sizeof(word) - 1)
			word[k++] = s[i++];
		if (k == 0)
			break;
		if (i < len && !strchr(" \t\r\n", s[i]))
			return nf_error_set(NF_EINPUT, "id: '%.15s...' is too long", word);
		word[k] = '\0';
		if ((err = nf_parse_long(&v, word, 0, vocab - 1, "id")))
			return err;
		out->a[out->n++] = (int)v;
	}
	return 0;
}

static int parse_ids(idlist *out, const char *s, size_t len, int vocab)
{
	size_t i = 0;
	while (i < len && strchr(" \t\r\n", s[i]))
		i++;
	if (i < len && s[i] == '[')
		return parse_json_ids(out, s, len, vocab);
	return parse_plain_ids(out, s, len, vocab);
}

/* Hugging Face decodes what is left once special tokens are skipped, so the
 * first token not skipped is decoded as the first (its leading space
 * dropped where the decoder drops it), whatever skipped tokens came before. */
static void print_text(const nf_tokenizer *t, const idlist *ids, unsigned flags)
{
	bool seen = false; /* a token that is not skipped */
	for (size_t i = 0; i < ids->n; i++) {
		size_t l;
		int prev = i ? ids->a[i - 1] : -1;
		if (!seen && prev != nf_tokenizer_bos(t))
			prev = -1; /* BOS stays: llama2.c drops the space after it itself */
		const char *p = nf_tokenizer_decode_flags(t, prev, ids->a[i], flags, &l);
		fwrite(p, 1, l, stdout);
		seen |= (flags & NF_TOK_DECODE_SPECIAL) || !nf_tokenizer_is_control(t, ids->a[i]);
	}
	fflush(stdout);
}

int nf_cmd_detokenize(int argc, char **argv)
{
	static const struct option options[] = {
		{"ids", required_argument, NULL, 'i'}, {"file", required_argument, NULL, 'f'},
		{"json", required_argument, NULL, 'j'}, {"special", no_argument, NULL, 's'},
		{"profile", required_argument, NULL, 'R'}, {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *src = NULL, *file = NULL, *profile = NULL;
	char *buf = NULL;
	size_t len = 0;
	int c, err = 0, given = 0;
	unsigned flags = 0;
	idlist ids = {0};
	nf_tokenizer *t = NULL;

	optind = 1;
	while ((c = getopt_long(argc, argv, "i:f:j:sh", options, NULL)) != -1) {
		switch (c) {
		case 'i': case 'j': src = optarg; given++; break;
		case 'f': file = optarg; given++; break;
		case 's': flags |= NF_TOK_DECODE_SPECIAL; break;
		case 'R': profile = optarg; break;
		case 'h': fputs(detokenize_usage, stdout); return NF_EXIT_OK;
		default: fputs(detokenize_usage, stderr); return NF_EXIT_INPUT;
		}
	}
	if (optind + 1 != argc || given != 1) {
		fputs(detokenize_usage, stderr);
		return NF_EXIT_INPUT;
	}
	if (file && (err = nf_fs_read_file(&buf, &len, file, MAX_INPUT)))
		goto done;
	if (src)
		len = strlen(src);
	if ((err = open_tokenizer(&t, argv[optind], profile)) ||
	    (err = parse_ids(&ids, file ? buf : src, len, nf_tokenizer_vocab_size(t))))
		goto done;
	print_text(t, &ids, flags);
done:
	free(buf);
	free(ids.a);
	nf_tokenizer_free(t);
	return err ? nf_cmd_fail("detokenize", err) : NF_EXIT_OK;
}
