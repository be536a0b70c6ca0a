/*
 * nf_grammar_sample.c - sample answers from an engine under a grammar, the
 * proof that constrained decoding keeps every answer valid:
 *
 *   nf_grammar_sample ENGINE (--schema JSON | --schema-file FILE | --json-object |
 *                     --regex RE | --choice TEXT [--choice TEXT ...])
 *                     [-n N] [--max-tokens M] [--temperature T] [--seed S]
 *                     [--prompt TEXT] [--max-string N] [--max-depth N]
 *                     [--ws none|space|newline] [--threads N] [--unconstrained]
 *
 * The prompt (special tokens parsed, so a chat-templated prompt works) is
 * prefilled once; each of the N answers continues from a copy of its cache,
 * sampling at temperature T (default 1) with the disallowed tokens' logits
 * set to -inf (nf_logit_mask_apply) until an end-of-generation token.  Each
 * answer is one JSON line on stdout: {"i", "text", "tokens", "complete"}
 * (complete: ended by the grammar rather than by --max-tokens; "text_hex"
 * instead of "text" when the bytes are not UTF-8).  --unconstrained samples
 * without the mask, for the cost comparison.  On stderr one JSON line of
 * timings: tokens, the engine's seconds, the grammar's (masks, applying
 * them, advancing) and its cost relative to the rest of a token's work.
 * Exit 0; 2 on bad arguments or a grammar that does not compile (the
 * message says where); 1 when decoding fails.
 */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/grammar.h"
#include "engine/logit_mask.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/parse.h"

#include "util/banned.h"

#define MAX_CHOICES 256

typedef struct args {
	const char *engine, *schema, *schema_file, *regex, *prompt;
	const char *choices[MAX_CHOICES];
	size_t n_choices;
	bool json_object, unconstrained;
	long n, max_tokens, threads;
	double temperature;
	uint64_t seed;
	nf_grammar_opts opts;
} args;

typedef struct timings {
	double engine, grammar, sampler;
	long tokens, samples, complete;
} timings;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(void)
{
	fprintf(stderr, "usage: nf_grammar_sample ENGINE (--schema JSON | --schema-file FILE | "
			"--json-object | --regex RE | --choice TEXT...) [-n N] [--max-tokens M] "
			"[--temperature T] [--seed S] [--prompt TEXT] [--max-string N] [--max-depth N] "
			"[--ws none|space|newline] [--threads N] [--unconstrained]\n");
}

static int parse_ws(int *out, const char *s)
{
	static const char *const names[] = {"none", "space", "newline"};
	for (int i = 0; i < 3; i++)
		if (!strcmp(s, names[i])) {
			*out = NF_GRAMMAR_WS_NONE + i;
			return 0;
		}
	return nf_error_set(NF_EINPUT, "--ws: %s is not none, space or newline", s);
}

/* One option with its value at argv[*i + 1]. */
static int parse_option(args *a, int argc, char **argv, int *i)
{
	const char *o = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
	long l;
	if (!strcmp(o, "--json-object"))
		return a->json_object = true, 0;
	if (!strcmp(o, "--unconstrained"))
		return a->unconstrained = true, 0;
	if (!v)
		return nf_error_set(NF_EINPUT, "%s needs a value", o);
	(*i)++;
	if (!strcmp(o, "--schema"))
		return a->schema = v, 0;
	if (!strcmp(o, "--schema-file"))
		return a->schema_file = v, 0;
	if (!strcmp(o, "--regex"))
		return a->regex = v, 0;
	if (!strcmp(o, "--prompt"))
		return a->prompt = v, 0;
	if (!strcmp(o, "--choice")) {
		if (a->n_choices >= MAX_CHOICES)
			return nf_error_set(NF_EINPUT, "more than %d choices", MAX_CHOICES);
		return a->choices[a->n_choices++] = v, 0;
	}
	if (!strcmp(o, "-n"))
		return nf_parse_long(&a->n, v, 1, 100000, "-n");
	if (!strcmp(o, "--max-tokens"))
		return nf_parse_long(&a->max_tokens, v, 1, 1 << 20, "--max-tokens");
	if (!strcmp(o, "--threads"))
		return nf_parse_long(&a->threads, v, 0, 1024, "--threads");
	if (!strcmp(o, "--temperature"))
		return nf_parse_double(&a->temperature, v, 0, 100, "--temperature");
	if (!strcmp(o, "--seed"))
		return nf_parse_u64(&a->seed, v, UINT64_MAX, "--seed");
	if (!strcmp(o, "--ws"))
		return parse_ws(&a->opts.whitespace, v);
	if (!strcmp(o, "--max-string")) {
		int err = nf_parse_long(&l, v, 0, 4096, "--max-string");
		a->opts.max_string = (int)l;
		return err;
	}
	if (!strcmp(o, "--max-depth")) {
		int err = nf_parse_long(&l, v, 1, 8, "--max-depth");
		a->opts.max_depth = (int)l;
		return err;
	}
	return nf_error_set(NF_EINPUT, "unknown option %s", o);
}

static int parse_args(args *a, int argc, char **argv)
{
	*a = (args){.n = 1, .max_tokens = 256, .threads = 1, .temperature = 1.0, .prompt = ""};
	if (argc < 2 || argv[1][0] == '-')
		return nf_error_set(NF_EINPUT, "no engine folder");
	a->engine = argv[1];
	for (int i = 2; i < argc; i++) {
		int err = parse_option(a, argc, argv, &i);
		if (err)
			return err;
	}
	int kinds = !!a->schema + !!a->schema_file + !!a->regex + a->json_object + (a->n_choices > 0);
	if (kinds != 1)
		return nf_error_set(NF_EINPUT, "give exactly one of --schema, --schema-file, --json-object, "
				    "--regex, --choice");
	return 0;
}

static int compile(nf_grammar **g, const args *a)
{
	if (a->schema)
		return nf_grammar_from_schema_text(g, a->schema, strlen(a->schema), &a->opts);
	if (a->schema_file) {
		char *text = NULL;
		size_t len = 0;
		int err = nf_fs_read_file(&text, &len, a->schema_file, 1 << 20);
		if (!err)
			err = nf_grammar_from_schema_text(g, text, len, &a->opts);
		free(text);
		return err;
	}
	if (a->regex)
		return nf_grammar_from_regex(g, a->regex, strlen(a->regex), &a->opts);
	if (a->json_object)
		return nf_grammar_from_json_object(g, &a->opts);
	return nf_grammar_from_choices(g, a->choices, NULL, a->n_choices, &a->opts);
}

static void print_answer(long i, const char *text, size_t len, long tokens, bool complete)
{
	json_t *o = json_object();
	json_t *s = json_stringn(text, len);
	json_object_set_new(o, "i", json_integer(i));
	if (s) {
		json_object_set_new(o, "text", s);
	} else {
		char *hex = malloc(len * 2 + 1);
		for (size_t k = 0; hex && k < len; k++)
			snprintf(hex + 2 * k, 3, "%02x", (unsigned char)text[k]);
		json_object_set_new(o, "text_hex", json_string(hex ? hex : ""));
		free(hex);
	}
	json_object_set_new(o, "tokens", json_integer(tokens));
	json_object_set_new(o, "complete", json_boolean(complete));
	char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (line)
		printf("%s\n", line);
	free(line);
	json_decref(o);
}

/* What one answer needs, allocated once. */
typedef struct sampler_ctx {
	nf_engine *e;
	const nf_tokenizer *tok;
	nf_grammar *g;
	const nf_grammar_vocab *v;
	const args *a;
	nf_seq *prompt_seq;
	size_t n_prompt;
	const int *prompt;
	float *first_logits, *logits;
	uint32_t *mask;
	char *text;
	size_t text_cap;
	timings t;
} sampler_ctx;

/* The grammar's part of a step: mask the logits (unless unconstrained). */
static int constrain(sampler_ctx *c, nf_grammar_state *gs, int vocab)
{
	size_t allowed = 0;
	if (!gs)
		return 0;
	double t0 = now_s();
	int err = nf_grammar_state_mask(gs, c->mask, &allowed);
	if (!err && allowed == 0)
		err = nf_error_set(NF_EINTERNAL, "grammar: no token continues the text");
	if (!err)
		nf_logit_mask_apply(c->logits, (size_t)vocab, c->mask);
	c->t.grammar += now_s() - t0;
	return err;
}

static int append_text(sampler_ctx *c, size_t *len, int token)
{
	size_t n;
	const char *p = nf_grammar_vocab_bytes(c->v, token, &n);
	if (nf_grammar_vocab_is_eog(c->v, token))
		return 0;
	if (*len + n > c->text_cap)
		return nf_error_set(NF_EINPUT, "the answer outgrows its buffer");
	memcpy(c->text + *len, p, n);
	*len += n;
	return 0;
}

static int sample_one(sampler_ctx *c, long i)
{
	const nf_model_config *cfg = nf_engine_config(c->e);
	int vocab = cfg->vocab_size, err;
	nf_seq *seq = NULL;
	nf_grammar_state *gs = NULL;
	nf_sampler smp = {0};
	size_t len = 0;
	long n = 0;
	bool complete = false;
	int pos = (int)c->n_prompt;
	if ((err = nf_sampler_init(&smp, vocab, (float)c->a->temperature, 1.0f, c->a->seed + (uint64_t)i)) ||
	    (err = nf_seq_new(&seq, c->e)) || (err = nf_seq_copy_prefix(seq, c->prompt_seq, c->n_prompt)) ||
	    (!c->a->unconstrained && (err = nf_grammar_state_new(&gs, c->g, c->v))))
		goto done;
	memcpy(c->logits, c->first_logits, sizeof(float) * (size_t)vocab);
	while (n < c->a->max_tokens && pos < cfg->max_seq_len) {
		if ((err = constrain(c, gs, vocab)))
			goto done;
		double t0 = now_s();
		int token = nf_sampler_sample(&smp, c->logits);
		double t1 = now_s();
		c->t.sampler += t1 - t0;
		if (gs && (err = nf_grammar_state_advance(gs, token)))
			goto done;
		c->t.grammar += now_s() - t1;
		n++;
		if (nf_grammar_vocab_is_eog(c->v, token)) {
			complete = gs != NULL;
			break;
		}
		if ((err = append_text(c, &len, token)))
			goto done;
		t0 = now_s();
		err = nf_engine_step(c->e, &seq, &token, &pos, 1, c->logits);
		c->t.engine += now_s() - t0;
		if (err)
			goto done;
		pos++;
	}
	c->t.tokens += n;
	c->t.samples++;
	c->t.complete += complete;
	print_answer(i, c->text, len, n, complete);
done:
	nf_grammar_state_free(gs);
	nf_seq_free(seq);
	nf_sampler_release(&smp);
	return err;
}

/* The prompt, prefilled once; each answer starts from a copy of its cache
 * and the logits after it. */
static int prefill_prompt(sampler_ctx *c, int **toks)
{
	const nf_model_config *cfg = nf_engine_config(c->e);
	size_t n = 0;
	int err = nf_tokenizer_encode(c->tok, c->a->prompt, strlen(c->a->prompt),
				      NF_TOK_ADD_SPECIAL | NF_TOK_PARSE_SPECIAL, toks, &n);
	if (err)
		return err;
	if (n == 0 || n >= (size_t)cfg->max_seq_len)
		return nf_error_set(NF_EINPUT, "the prompt of %zu tokens does not fit", n);
	c->n_prompt = n;
	c->prompt = *toks;
	if ((err = nf_seq_new(&c->prompt_seq, c->e)))
		return err;
	return nf_engine_prefill(c->e, c->prompt_seq, *toks, n, 0, c->first_logits);
}

static void print_timings(const sampler_ctx *c)
{
	const timings *t = &c->t;
	double rest = t->engine + t->sampler;
	fprintf(stderr,
		"{\"samples\":%ld,\"complete\":%ld,\"tokens\":%ld,\"engine_s\":%.4f,\"sampler_s\":%.4f,"
		"\"grammar_s\":%.4f,\"grammar_us_per_token\":%.2f,\"tokens_per_s\":%.1f,"
		"\"grammar_cost\":%.4f}\n",
		t->samples, t->complete, t->tokens, t->engine, t->sampler, t->grammar,
		t->tokens ? t->grammar * 1e6 / (double)t->tokens : 0.0,
		t->tokens ? (double)t->tokens / (rest + t->grammar) : 0.0,
		rest > 0 ? t->grammar / rest : 0.0);
}

static int run(const args *a)
{
	sampler_ctx c = {.a = a};
	nf_grammar_vocab *v = NULL;
	int *toks = NULL, err;
	double t0 = now_s();
	if ((err = compile(&c.g, a)) || (err = nf_engine_open(&c.e, a->engine, (int)a->threads)))
		goto done;
	c.tok = nf_engine_tokenizer(c.e);
	if ((err = nf_grammar_vocab_new(&v, c.tok)))
		goto done;
	fprintf(stderr, "{\"compile_and_vocab_s\":%.4f}\n", now_s() - t0);
	c.v = v;
	size_t vocab = (size_t)nf_engine_config(c.e)->vocab_size;
	c.text_cap = (size_t)a->max_tokens * 64;
	c.first_logits = malloc(vocab * sizeof(float));
	c.logits = malloc(vocab * sizeof(float));
	c.mask = malloc(nf_grammar_mask_words(v) * sizeof(uint32_t));
	c.text = malloc(c.text_cap);
	if (!c.first_logits || !c.logits || !c.mask || !c.text) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if ((size_t)nf_grammar_vocab_size(v) != vocab) {
		err = nf_error_set(NF_EINPUT, "the tokenizer has %d tokens, the model %zu",
				   nf_grammar_vocab_size(v), vocab);
		goto done;
	}
	if ((err = prefill_prompt(&c, &toks)))
		goto done;
	for (long i = 0; i < a->n && !err; i++)
		err = sample_one(&c, i);
	print_timings(&c);
done:
	free(toks);
	free(c.first_logits);
	free(c.logits);
	free(c.mask);
	free(c.text);
	nf_seq_free(c.prompt_seq);
	nf_grammar_vocab_free(v);
	nf_grammar_free(c.g);
	nf_engine_free(c.e);
	return err;
}

int main(int argc, char **argv)
{
	args a;
	int err = parse_args(&a, argc, argv);
	if (err) {
		fprintf(stderr, "nf_grammar_sample: %s\n", nf_error_last());
		usage();
		return 2;
	}
	fflush(stdout);
	if ((err = run(&a))) {
		fprintf(stderr, "nf_grammar_sample: %s\n", nf_error_last());
		return err == NF_EINPUT ? 2 : 1;
	}
	return 0;
}
