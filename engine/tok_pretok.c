/*
 * tok_pretok.c - normalizers and pre-tokenizers, as Hugging Face tokenizers
 * defines them: Prepend, Replace and Strip normalizers (NFC, NFD, NFKC, NFKD
 * and Lowercase through tok_unicode.c); Split (a PCRE2 regex with
 * the Isolated, Removed, MergedWithPrevious or MergedWithNext behavior),
 * Digits, ByteLevel (GPT-2's split) and Metaspace pre-tokenizers.  Regexes
 * run with UTF and UCP (\p{L}, \s as Unicode defines them), JIT-compiled
 * where PCRE2 can; text that is not UTF-8 is matched run by run, its stray
 * bytes left in the gaps, so no regex ever sees invalid UTF-8.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/tok_internal.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

/* The families' splits, as their tokenizer.json files spell them. */
static const char re_gpt2[] =
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char re_llama3[] =
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
	"[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char re_qwen2[] =
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
	"[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const char *tok_regex_gpt2(void) { return re_gpt2; }

typedef struct span {
	size_t s, e;
} span;

typedef struct spans {
	span *a;
	size_t n, cap;
} spans;

static int spans_push(spans *v, size_t s, size_t e)
{
	if (s >= e)
		return 0; /* Hugging Face drops empty pieces */
	if (v->n == v->cap) {
		size_t nc = v->cap ? v->cap * 2 : 64;
		span *a;
		if (nc > SIZE_MAX / sizeof(span) || !(a = realloc(v->a, nc * sizeof(span))))
			return nf_error_set(NF_ENOMEM, "encode: out of memory");
		v->a = a;
		v->cap = nc;
	}
	v->a[v->n++] = (span){s, e};
	return 0;
}

/* ------------------------------------------------------- steps */

static int add_pre(nf_tokenizer *t, tok_pre p, const char *what)
{
	if (t->n_pres >= TOK_MAX_STEPS)
		return nf_error_set(NF_EUNSUPPORTED, "%s: more than %d pre-tokenizer steps", what,
				    TOK_MAX_STEPS);
	if (p.pattern && !(p.pattern = tok_strndup(p.pattern, strlen(p.pattern))))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", what);
	t->pres[t->n_pres++] = p;
	return 0;
}

int tok_pre_named(nf_tokenizer *t, const char *name, const char *what)
{
	const tok_pre bl_regex = {.kind = PRE_BYTELEVEL, .use_regex = true};
	const tok_pre bl_plain = {.kind = PRE_BYTELEVEL, .use_regex = false};
	int err;
	if (!name || !strcmp(name, "default") || !strcmp(name, "gpt-2") || !strcmp(name, "gpt2"))
		return add_pre(t, bl_regex, what);
	if (!strcmp(name, "smollm") || !strcmp(name, "starcoder")) {
		/* each digit on its own, then GPT-2's split */
		tok_pre d = {.kind = PRE_DIGITS, .individual = true};
		return (err = add_pre(t, d, what)) ? err : add_pre(t, bl_regex, what);
	}
	if (!strcmp(name, "llama-bpe") || !strcmp(name, "llama3") || !strcmp(name, "llama-v3") ||
	    !strcmp(name, "qwen2")) {
		tok_pre s = {.kind = PRE_SPLIT, .behavior = SPLIT_ISOLATED, .use_regex = true,
			     .pattern = (char *)(name[0] == 'q' ? re_qwen2 : re_llama3)};
		return (err = add_pre(t, s, what)) ? err : add_pre(t, bl_plain, what);
	}
	return nf_error_set(NF_EUNSUPPORTED, "%s: pre-tokenizer '%.64s' is not supported "
			    "(default, gpt-2, llama-bpe, smollm, starcoder, qwen2)", what, name);
}

static int compile(tok_pre *p, const char *src, uint32_t opts, const char *what)
{
	int code;
	PCRE2_SIZE at;
	/* PCRE2 refuses UCP beside LITERAL, where it would mean nothing anyway */
	uint32_t ucp = opts & PCRE2_LITERAL ? 0 : PCRE2_UCP;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)src, PCRE2_ZERO_TERMINATED,
				       PCRE2_UTF | ucp | opts, &code, &at, NULL);
	if (!re) {
		PCRE2_UCHAR msg[160];
		pcre2_get_error_message(code, msg, sizeof(msg));
		return nf_error_set(NF_EINPUT, "%s: regex '%.80s': offset %zu: %s", what, src,
				    (size_t)at, (const char *)msg);
	}
	pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter serves where JIT cannot */
	p->re = re;
	return 0;
}

int tok_pre_compile(nf_tokenizer *t, const char *what)
{
	for (size_t k = 0; k < t->n_pres; k++) {
		tok_pre *p = &t->pres[k];
		int err = 0;
		if (p->re)
			continue;
		if (p->kind == PRE_SPLIT)
			err = compile(p, p->pattern, p->use_regex ? 0 : PCRE2_LITERAL, what);
		else if (p->kind == PRE_DIGITS)
			err = compile(p, p->individual ? "\\p{N}" : "\\p{N}+", 0, what);
		else if (p->kind == PRE_BYTELEVEL && p->use_regex)
			err = compile(p, re_gpt2, 0, what);
		else if (p->kind == PRE_METASPACE && p->split)
			err = compile(p, p->pattern, PCRE2_LITERAL, what);
		if (err)
			return err;
	}
	return 0;
}

void tok_pre_release(tok_pre *p)
{
	pcre2_code_free(p->re);
	free(p->pattern);
	*p = (tok_pre){0};
}

/* ------------------------------------------------------- normalizing */

typedef struct sbuf {
	char *p;
	size_t n;
} sbuf;

/* s with a prepended, in a new buffer. */
static int prepend(sbuf *b, const char *a)
{
	size_t la = strlen(a), nl;
	char *p;
	if (!nf_size_add(&nl, b->n, la + 1) || !(p = malloc(nl)))
		return nf_error_set(NF_ENOMEM, "encode: out of memory");
	memcpy(p, a, la);
	memcpy(p + la, b->p, b->n);
	p[la + b->n] = '\0';
	free(b->p);
	b->p = p;
	b->n += la;
	return 0;
}

static int replace(sbuf *b, const char *a, const char *with)
{
	size_t la = strlen(a), lw = strlen(with), n = 0, cap, o = 0;
	char *p;
	for (size_t i = 0; la && i + la <= b->n; i++)
		if (memcmp(b->p + i, a, la) == 0) {
			n++;
			i += la - 1;
		}
	if (n == 0)
		return 0;
	if (!nf_size_mul(&cap, n, lw) || !nf_size_add(&cap, cap, b->n + 1) || !(p = malloc(cap)))
		return nf_error_set(NF_ENOMEM, "encode: out of memory");
	for (size_t i = 0; i < b->n;) {
		if (i + la <= b->n && memcmp(b->p + i, a, la) == 0) {
			memcpy(p + o, with, lw);
			o += lw;
			i += la;
		} else {
			p[o++] = b->p[i++];
		}
	}
	p[o] = '\0';
	free(b->p);
	b->p = p;
	b->n = o;
	return 0;
}

static bool starts_with(const sbuf *b, const char *a)
{
	size_t la = strlen(a);
	return b->n >= la && memcmp(b->p, a, la) == 0;
}

/* A leading Metaspace or ByteLevel(add_prefix_space) changes the text itself;
 * they are applied here, once per segment, since they come first. */
static int first_pre(const nf_tokenizer *t, sbuf *b, bool first)
{
	const tok_pre *p = t->n_pres ? &t->pres[0] : NULL;
	int err;
	if (!p)
		return 0;
	if (p->kind == PRE_BYTELEVEL && p->prefix_space && !starts_with(b, " "))
		return prepend(b, " ");
	if (p->kind != PRE_METASPACE)
		return 0;
	if ((err = replace(b, " ", p->pattern)))
		return err;
	if ((p->scheme == META_ALWAYS || (p->scheme == META_FIRST && first)) &&
	    !starts_with(b, p->pattern))
		return prepend(b, p->pattern);
	return 0;
}

/* Strip: White_Space off either end, in place. */
static void strip(sbuf *b, bool left, bool right)
{
	size_t s = left ? tok_space_after(b->p, b->n, 0) : 0;
	size_t e = right ? tok_space_before(b->p, b->n) : b->n;
	if (e < s)
		e = s; /* all space */
	memmove(b->p, b->p + s, e - s);
	b->n = e - s;
	b->p[b->n] = '\0';
}

/* A step that rewrites the whole text through tok_unicode.c. */
static int unicode_step(sbuf *b, int kind)
{
	char *p;
	size_t n;
	int err = kind == NORM_LOWERCASE ? tok_unicode_lower(b->p, b->n, &p, &n) :
		  tok_unicode_normalize(kind, b->p, b->n, &p, &n);
	if (err)
		return err;
	free(b->p);
	b->p = p;
	b->n = n;
	return 0;
}

static int norm_step(const tok_norm *n, sbuf *b)
{
	switch (n->kind) {
	case NORM_PREPEND:
		return b->n ? prepend(b, n->a) : 0; /* Hugging Face leaves "" alone */
	case NORM_REPLACE:
		return replace(b, n->a, n->b);
	case NORM_STRIP:
		strip(b, n->left, n->right);
		return 0;
	default:
		return unicode_step(b, n->kind);
	}
}

int tok_normalize(const nf_tokenizer *t, const char *s, size_t len, bool first, char **out,
		  size_t *out_len)
{
	sbuf b = {tok_strndup(s, len), len};
	int err = 0;
	*out = NULL;
	if (!b.p)
		return nf_error_set(NF_ENOMEM, "encode: out of memory");
	for (size_t k = 0; k < t->n_norms && !err; k++)
		err = norm_step(&t->norms[k], &b);
	if (!err)
		err = first_pre(t, &b, first);
	if (err) {
		free(b.p);
		return err;
	}
	*out = b.p;
	*out_len = b.n;
	return 0;
}

/* ------------------------------------------------------- splitting */

/* The pieces of one span as a Split behavior makes them from its matches and gaps. */
typedef struct splitter {
	spans *out;
	int behavior;
	bool invert;      /* Split(invert): the matches are the words, the gaps the splits */
	size_t base;      /* out->n when this span began */
	bool prev_match;
	bool pending;     /* MergedWithNext: a match waiting for the gap after it */
	span pend;
} splitter;

static int piece(splitter *sp, size_t s, size_t e, bool is_match)
{
	int err = 0;
	if (s >= e)
		return 0; /* Hugging Face makes no piece of an empty gap: it changes no state */
	is_match ^= sp->invert;
	switch (sp->behavior) {
	case SPLIT_REMOVED:
		return is_match ? 0 : spans_push(sp->out, s, e);
	case SPLIT_MERGED_PREV:
		if (is_match && !sp->prev_match && sp->out->n > sp->base)
			sp->out->a[sp->out->n - 1].e = e;
		else
			err = spans_push(sp->out, s, e);
		sp->prev_match = is_match;
		return err;
	case SPLIT_MERGED_NEXT:
		if (sp->pending && !is_match) {
			sp->pending = false;
			return spans_push(sp->out, sp->pend.s, e);
		}
		if (sp->pending && (err = spans_push(sp->out, sp->pend.s, sp->pend.e)))
			return err;
		sp->pending = is_match;
		sp->pend = (span){s, e};
		return is_match ? 0 : spans_push(sp->out, s, e);
	default:
		return spans_push(sp->out, s, e);
	}
}

typedef struct matcher {
	pcre2_match_data *md;
	pcre2_match_context *mc;
	pcre2_jit_stack *js;
} matcher;

/* The matches of re in the valid UTF-8 run s[a..b) (offsets into s), as pieces. */
static int match_run(const pcre2_code *re, matcher *m, splitter *sp, const char *s, size_t a,
		     size_t b, size_t *gap)
{
	PCRE2_SIZE off = 0, *ov = pcre2_get_ovector_pointer(m->md);
	int err;
	while (off < b - a) {
		int rc = pcre2_match(re, (PCRE2_SPTR)(s + a), b - a, off, PCRE2_NO_UTF_CHECK, m->md,
				     m->mc);
		if (rc == PCRE2_ERROR_NOMATCH)
			break;
		if (rc < 0) {
			PCRE2_UCHAR msg[120];
			pcre2_get_error_message(rc, msg, sizeof(msg));
			return nf_error_set(NF_EINPUT, "encode: pre-tokenizer regex failed: %s",
					    (const char *)msg);
		}
		if (ov[1] == ov[0]) { /* an empty match: step over one character */
			size_t cl = tok_utf8_len(s + a + ov[1], b - a - ov[1]);
			off = ov[1] + (cl ? cl : 1);
			continue;
		}
		if ((err = piece(sp, *gap, a + ov[0], false)) ||
		    (err = piece(sp, a + ov[0], a + ov[1], true)))
			return err;
		*gap = a + ov[1];
		off = ov[1];
	}
	return 0;
}

static int split_span(const pcre2_code *re, matcher *m, splitter *sp, const char *s, span in)
{
	size_t gap = in.s, i = in.s;
	int err;
	sp->base = sp->out->n;
	sp->prev_match = false;
	sp->pending = false;
	while (i < in.e) {
		size_t a = i;
		while (i < in.e) {
			size_t cl = tok_utf8_len(s + i, in.e - i);
			if (!cl)
				break;
			i += cl;
		}
		if (i > a && (err = match_run(re, m, sp, s, a, i, &gap)))
			return err;
		if (i < in.e)
			i++; /* a byte that is not UTF-8 stays in the gap */
	}
	if ((err = piece(sp, gap, in.e, false)))
		return err;
	if (sp->pending)
		return spans_push(sp->out, sp->pend.s, sp->pend.e);
	return 0;
}

static int behavior_of(const tok_pre *p)
{
	if (p->kind == PRE_SPLIT)
		return p->behavior;
	if (p->kind == PRE_METASPACE)
		return SPLIT_MERGED_NEXT; /* each "▁" starts a word */
	return SPLIT_ISOLATED;
}

static int apply_step(const tok_pre *p, matcher *m, const char *s, spans *in, spans *out)
{
	splitter sp = {.out = out, .behavior = behavior_of(p),
		       .invert = p->kind == PRE_SPLIT && p->invert};
	int err;
	out->n = 0;
	for (size_t k = 0; k < in->n; k++)
		if ((err = split_span(p->re, m, &sp, s, in->a[k])))
			return err;
	return 0;
}

int tok_pretokenize(const nf_tokenizer *t, const char *s, size_t len,
		    int (*fn)(void *ctx, const char *w, size_t wl), void *ctx)
{
	spans a = {0}, b = {0};
	matcher m = {0};
	int err = 0;
	if ((err = spans_push(&a, 0, len)))
		goto done;
	m.md = pcre2_match_data_create(1, NULL);
	m.mc = pcre2_match_context_create(NULL);
	/* GPT-2's \s+(?!\S) backtracks over whitespace runs: more than the default 32 KiB */
	m.js = pcre2_jit_stack_create(32 * 1024, 8 << 20, NULL);
	if (!m.md || !m.mc || !m.js) {
		err = nf_error_set(NF_ENOMEM, "encode: out of memory");
		goto done;
	}
	pcre2_jit_stack_assign(m.mc, NULL, m.js);
	for (size_t k = 0; k < t->n_pres; k++) {
		spans tmp;
		if (!t->pres[k].re)
			continue; /* ByteLevel without regex: only the byte map, done in BPE */
		if ((err = apply_step(&t->pres[k], &m, s, &a, &b)))
			goto done;
		tmp = a;
		a = b;
		b = tmp;
	}
	for (size_t k = 0; k < a.n && !err; k++)
		err = fn(ctx, s + a.a[k].s, a.a[k].e - a.a[k].s);
done:
	pcre2_match_data_free(m.md);
	pcre2_match_context_free(m.mc);
	pcre2_jit_stack_free(m.js);
	free(a.a);
	free(b.a);
	return err;
}
