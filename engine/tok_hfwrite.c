/*
 * tok_hfwrite.c - writing a tokenizer as Hugging Face's tokenizer.json and
 * tokenizer_config.json: the steps spelled back as tok_hfjson.c reads them,
 * so that `tokenizers` gives the same ids and reading the files back gives
 * the same tokenizer.  A SentencePiece vocabulary that merges by score gets
 * the merge list Hugging Face's converter derives: every split of a token
 * into two tokens, best-scoring token first.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "engine/tok_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* Append v to array a (steals v); false when v is NULL or on failure. */
static bool push(json_t *a, json_t *v)
{
	return v && json_array_append_new(a, v) == 0;
}

static bool set(json_t *o, const char *k, json_t *v)
{
	return v && json_object_set_new(o, k, v) == 0;
}

static json_t *pattern(const char *s, bool regex)
{
	json_t *o = json_object();
	if (o && !set(o, regex ? "Regex" : "String", json_string(s))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* One step, or a Sequence of them under key, or null. */
static json_t *sequence(json_t *items, const char *key)
{
	size_t n = json_array_size(items);
	json_t *o;
	if (n == 0) {
		json_decref(items);
		return json_null();
	}
	if (n == 1) {
		o = json_incref(json_array_get(items, 0));
		json_decref(items);
		return o;
	}
	o = json_pack("{s:s}", "type", "Sequence");
	if (!set(o, key, items)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *norm_json(const tok_norm *n)
{
	static const char *const plain[] = {[NORM_NFC] = "NFC", [NORM_NFD] = "NFD",
					    [NORM_NFKC] = "NFKC", [NORM_NFKD] = "NFKD",
					    [NORM_LOWERCASE] = "Lowercase"};
	if (n->kind == NORM_PREPEND)
		return json_pack("{s:s,s:s}", "type", "Prepend", "prepend", n->a);
	if (n->kind == NORM_STRIP)
		return json_pack("{s:s,s:b,s:b}", "type", "Strip", "strip_left", n->left,
				 "strip_right", n->right);
	if (n->kind != NORM_REPLACE)
		return json_pack("{s:s}", "type", plain[n->kind]);
	return json_pack("{s:s,s:o,s:s}", "type", "Replace", "pattern", pattern(n->a, false),
			 "content", n->b);
}

static const char *scheme_name(int s)
{
	return s == META_FIRST ? "first" : s == META_NEVER ? "never" : "always";
}

static const char *behavior_name(int b)
{
	return b == SPLIT_REMOVED ? "Removed" : b == SPLIT_MERGED_PREV ? "MergedWithPrevious" :
	       b == SPLIT_MERGED_NEXT ? "MergedWithNext" : "Isolated";
}

static json_t *pre_json(const tok_pre *p)
{
	switch (p->kind) {
	case PRE_BYTELEVEL:
		return json_pack("{s:s,s:b,s:b,s:b}", "type", "ByteLevel", "add_prefix_space",
				 p->prefix_space, "trim_offsets", 1, "use_regex", p->use_regex);
	case PRE_DIGITS:
		return json_pack("{s:s,s:b}", "type", "Digits", "individual_digits", p->individual);
	case PRE_METASPACE:
		return json_pack("{s:s,s:s,s:s,s:b}", "type", "Metaspace", "replacement", p->pattern,
				 "prepend_scheme", scheme_name(p->scheme), "split", p->split);
	default:
		return json_pack("{s:s,s:o,s:s,s:b}", "type", "Split", "pattern",
				 pattern(p->pattern, p->use_regex), "behavior",
				 behavior_name(p->behavior), "invert", p->invert);
	}
}

static json_t *dec_json(const tok_dec *d)
{
	switch (d->kind) {
	case DEC_BYTELEVEL:
		return json_pack("{s:s,s:b,s:b,s:b}", "type", "ByteLevel", "add_prefix_space", 1,
				 "trim_offsets", 1, "use_regex", 1);
	case DEC_REPLACE:
		return json_pack("{s:s,s:o,s:s}", "type", "Replace", "pattern",
				 pattern(d->a, false), "content", d->b);
	case DEC_BYTEFALLBACK:
		return json_pack("{s:s}", "type", "ByteFallback");
	case DEC_FUSE:
		return json_pack("{s:s}", "type", "Fuse");
	case DEC_STRIP:
		return json_pack("{s:s,s:s,s:i,s:i}", "type", "Strip", "content", d->a, "start",
				 d->start, "stop", 0);
	default:
		return json_pack("{s:s,s:s,s:s,s:b}", "type", "Metaspace", "replacement", d->a,
				 "prepend_scheme", d->start ? "always" : "never", "split", 1);
	}
}

static json_t *steps_json(const nf_tokenizer *t)
{
	json_t *norms = json_array(), *pres = json_array(), *decs = json_array();
	bool ok = norms && pres && decs;
	for (size_t k = 0; ok && k < t->n_norms; k++)
		ok = push(norms, norm_json(&t->norms[k]));
	for (size_t k = 0; ok && k < t->n_pres; k++)
		ok = push(pres, pre_json(&t->pres[k]));
	for (size_t k = 0; ok && k < t->n_decs; k++)
		ok = push(decs, dec_json(&t->decs[k]));
	if (!ok) {
		json_decref(norms);
		json_decref(pres);
		json_decref(decs);
		return NULL;
	}
	return json_pack("{s:o,s:o,s:o}", "normalizer", sequence(norms, "normalizers"),
			 "pre_tokenizer", sequence(pres, "pretokenizers"), "decoder",
			 sequence(decs, "decoders"));
}

/* ------------------------------------------------------- post-processor */

static json_t *special(const nf_tokenizer *t, int id, int type_id)
{
	return json_pack("{s:{s:s%,s:i}}", "SpecialToken", "id", t->tok[id], (size_t)t->len[id],
			 "type_id", type_id);
}

static json_t *template_side(const nf_tokenizer *t, const char *seq, int type_id)
{
	json_t *a = json_array();
	bool ok = a != NULL;
	if (ok && t->add_bos)
		ok = push(a, special(t, t->bos, type_id));
	if (ok)
		ok = push(a, json_pack("{s:{s:s,s:i}}", "Sequence", "id", seq, "type_id", type_id));
	if (ok && t->add_eos)
		ok = push(a, special(t, t->eos, type_id));
	if (!ok) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static json_t *post_json(const nf_tokenizer *t)
{
	json_t *sp, *pair, *b;
	if (!t->add_bos && !t->add_eos)
		return json_null();
	sp = json_object();
	pair = template_side(t, "A", 0);
	b = template_side(t, "B", 1);
	if (!sp || !pair || !b || json_array_extend(pair, b))
		goto fail;
	for (int k = 0; k < 2; k++) {
		int id = k ? t->eos : t->bos;
		if ((k ? t->add_eos : t->add_bos) &&
		    !set(sp, t->tok[id], json_pack("{s:s,s:[i],s:[s]}", "id", t->tok[id], "ids", id,
						   "tokens", t->tok[id])))
			goto fail;
	}
	json_decref(b);
	return json_pack("{s:s,s:o,s:o,s:o}", "type", "TemplateProcessing", "single",
			 template_side(t, "A", 0), "pair", pair, "special_tokens", sp);
fail:
	json_decref(sp);
	json_decref(pair);
	json_decref(b);
	return NULL;
}

/* ------------------------------------------------------- model */

typedef struct cand {
	float score;
	int id, l, r;
} cand;

static int cmp_cand(const void *a, const void *b)
{
	const cand *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->l < y->l ? -1 : x->l > y->l;
}

static bool plain(const nf_tokenizer *t, int id)
{
	return id >= 0 && (t->type[id] == NF_TOKTYPE_NORMAL || t->type[id] == NF_TOKTYPE_USER);
}

/* Every split of a token into two tokens, best-scoring token first. */
static int score_merges(const nf_tokenizer *t, cand **out, size_t *n_out)
{
	size_t total = 0, n = 0;
	cand *c;
	for (int id = 0; id < t->n; id++)
		if (!nf_size_add(&total, total, t->len[id]))
			return NF_ENOMEM;
	if (!(c = malloc((total ? total : 1) * sizeof(cand))))
		return NF_ENOMEM;
	for (int id = 0; id < t->n; id++) {
		const char *s = t->tok[id];
		if (!plain(t, id))
			continue;
		for (size_t k = 1; k < t->len[id]; k++) {
			if (((unsigned char)s[k] & 0xC0) == 0x80)
				continue; /* inside a character */
			int l = tok_lookup(t, s, k), r = tok_lookup(t, s + k, t->len[id] - k);
			if (plain(t, l) && plain(t, r))
				c[n++] = (cand){t->scores[id], id, l, r};
		}
	}
	qsort(c, n, sizeof(cand), cmp_cand);
	*out = c;
	*n_out = n;
	return 0;
}

static json_t *merges_json(const nf_tokenizer *t)
{
	json_t *a = json_array();
	cand *c = NULL;
	size_t n = t->n_merges;
	bool ok = a != NULL;
	if (ok && t->scores && score_merges(t, &c, &n))
		ok = false;
	for (size_t i = 0; ok && i < n; i++) {
		int l = c ? c[i].l : t->merge_list[i][0], r = c ? c[i].r : t->merge_list[i][1];
		ok = push(a, json_pack("[s%,s%]", t->tok[l], (size_t)t->len[l], t->tok[r],
				       (size_t)t->len[r]));
	}
	free(c);
	if (!ok) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static json_t *model_json(const nf_tokenizer *t)
{
	json_t *vocab = json_object();
	for (int id = 0; vocab && id < t->n; id++)
		if (!set(vocab, t->tok[id], json_integer(id))) {
			json_decref(vocab);
			return NULL;
		}
	return json_pack("{s:s,s:n,s:o,s:n,s:n,s:b,s:b,s:b,s:o,s:o}", "type", "BPE", "dropout",
			 "unk_token", t->unk >= 0 ? json_string(t->tok[t->unk]) : json_null(),
			 "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", t->fuse_unk,
			 "byte_fallback", t->byte_fallback, "ignore_merges", t->ignore_merges,
			 "vocab", vocab, "merges", merges_json(t));
}

static json_t *added_json(const nf_tokenizer *t)
{
	json_t *a = json_array();
	for (int id = 0; a && id < t->n; id++) {
		int ty = t->type[id];
		bool sp = ty == NF_TOKTYPE_CONTROL || ty == NF_TOKTYPE_UNKNOWN;
		if (!sp && ty != NF_TOKTYPE_USER)
			continue;
		unsigned f = t->aflags ? t->aflags[id] : 0;
		if (!push(a, json_pack("{s:i,s:s%,s:b,s:b,s:b,s:b,s:b}", "id", id, "content",
				       t->tok[id], (size_t)t->len[id],
				       "single_word", !!(f & TOK_ADDED_SINGLE_WORD),
				       "lstrip", !!(f & TOK_ADDED_LSTRIP),
				       "rstrip", !!(f & TOK_ADDED_RSTRIP),
				       "normalized", 0, "special", sp))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *tokenizer_json(const nf_tokenizer *t)
{
	json_t *o = steps_json(t);
	if (!o || !set(o, "version", json_string("1.0")) || !set(o, "truncation", json_null()) ||
	    !set(o, "padding", json_null()) || !set(o, "added_tokens", added_json(t)) ||
	    !set(o, "post_processor", post_json(t)) || !set(o, "model", model_json(t))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *config_json(const nf_tokenizer *t)
{
	json_t *o = json_pack("{s:b,s:b,s:b,s:s}", "add_bos_token", t->add_bos, "add_eos_token",
			      t->add_eos, "clean_up_tokenization_spaces", 0, "tokenizer_class",
			      "PreTrainedTokenizerFast");
	if (o && ((t->bos >= 0 && !set(o, "bos_token", json_string(t->tok[t->bos]))) ||
		  (t->eos >= 0 && !set(o, "eos_token", json_string(t->tok[t->eos]))) ||
		  (t->unk >= 0 && !set(o, "unk_token", json_string(t->tok[t->unk]))) ||
		  (t->pad >= 0 && !set(o, "pad_token", json_string(t->tok[t->pad]))) ||
		  (t->chat_template && !set(o, "chat_template", json_string(t->chat_template))))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ------------------------------------------------------- files */

static int write_json(const char *dir, const char *name, json_t *o)
{
	char *path = nf_path_join(dir, name), *s = NULL;
	int err;
	if (!path || !(s = json_dumps(o, JSON_COMPACT)))
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", dir);
	else
		err = nf_fs_write_atomic(path, s, strlen(s), 0644);
	free(path);
	free(s);
	return err;
}

/* jansson refuses strings that are not UTF-8: say which token, not "out of memory". */
static int check_utf8(const nf_tokenizer *t)
{
	for (int id = 0; id < t->n; id++) {
		json_t *s = json_stringn(t->tok[id], t->len[id]);
		if (!s)
			return nf_error_set(NF_EUNSUPPORTED, "write tokenizer.json: token %d is not "
					    "UTF-8", id);
		json_decref(s);
	}
	return 0;
}

int nf_tokenizer_write_hf(const nf_tokenizer *t, const char *dir)
{
	json_t *tj = NULL, *cj = NULL;
	int err;
	if (t->kind == NF_TOK_LLAMA2C)
		return nf_error_set(NF_EUNSUPPORTED, "%s: a llama2.c tokenizer is written as "
				    "tokenizer.bin, not tokenizer.json", dir);
	if ((err = check_utf8(t)) || (err = nf_fs_mkdir_p(dir, 0755)))
		return err;
	if (!(tj = tokenizer_json(t)) || !(cj = config_json(t)))
		err = nf_error_set(NF_ENOMEM, "%s: cannot build tokenizer.json", dir);
	else if (!(err = write_json(dir, "tokenizer.json", tj)))
		err = write_json(dir, "tokenizer_config.json", cj);
	json_decref(tj);
	json_decref(cj);
	return err;
}
