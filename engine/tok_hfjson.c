/*
 * tok_hfjson.c - reading a Hugging Face tokenizer.json (and its
 * tokenizer_config.json) with jansson into the steps tok_pretok.c and
 * tok_bpe.c run.  Supported: model BPE (vocab, merges as "a b" strings or
 * pairs, byte_fallback, fuse_unk, ignore_merges, unk_token); normalizers
 * Sequence, Prepend, Replace(String), NFC, NFD, NFKC, NFKD, Lowercase,
 * Strip; added tokens with lstrip, rstrip and single_word (all matched on
 * the raw text: `normalized` is not read); pre-tokenizers Sequence,
 * ByteLevel, Split (also inverted), Digits, Metaspace; decoders Sequence,
 * ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip; post-processors
 * TemplateProcessing, ByteLevel, Sequence.  Anything else is NF_EUNSUPPORTED
 * naming its JSON path; a damaged file is NF_EINPUT "FILE: what is wrong".
 */
#include "engine/tok_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

typedef struct hf {
	nf_tokenizer *t;
	const char *what;
	json_t *root, *cfg;
	int post_bos, post_eos; /* ids the post-processor adds; -2: no post-processor */
} hf;

#define BAD(h, ...) nf_error_set(NF_EINPUT, "%s: " __VA_ARGS__)
#define UNSUP(h, path, name) \
	nf_error_set(NF_EUNSUPPORTED, "%s: %s: '%.64s' is not supported", (h)->what, path, name)

static const char *type_of(const json_t *o)
{
	const json_t *v = json_object_get(o, "type");
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* An optional boolean member; NF_EINPUT when present and not a boolean. */
static int get_bool(hf *h, const json_t *o, const char *key, const char *path, bool dflt,
		    bool *out)
{
	const json_t *v = json_object_get(o, key);
	*out = dflt;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return BAD(h, "%s.%s is not a boolean", h->what, path, key);
	*out = json_is_true(v);
	return 0;
}

/* A required string member (owned copy in *out). */
static int get_str(hf *h, const json_t *o, const char *key, const char *path, char **out)
{
	const json_t *v = json_object_get(o, key);
	if (!json_is_string(v))
		return BAD(h, "%s.%s is not a string", h->what, path, key);
	if (!(*out = tok_strndup(json_string_value(v), json_string_length(v))))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", h->what);
	return 0;
}

/* {"String": s} -> s; a Regex pattern is not supported where only strings are. */
static int get_pattern(hf *h, const json_t *o, const char *path, char **out, bool *regex)
{
	const json_t *p = json_object_get(o, "pattern");
	if (!json_is_object(p))
		return BAD(h, "%s.pattern is not an object", h->what, path);
	if (json_object_get(p, "String"))
		return *regex = false, get_str(h, p, "String", path, out);
	if (json_object_get(p, "Regex") && regex != NULL) {
		*regex = true;
		return get_str(h, p, "Regex", path, out);
	}
	return nf_error_set(NF_EUNSUPPORTED, "%s: %s.pattern: only String%s patterns are supported",
			    h->what, path, regex ? " and Regex" : "");
}

/* ------------------------------------------------------- normalizer */

/* The NORM_* of a normalizer type we implement, or 0. */
static int norm_kind(const char *ty)
{
	static const struct {
		const char *name;
		int kind;
	} kinds[] = {{"Prepend", NORM_PREPEND}, {"Replace", NORM_REPLACE}, {"NFC", NORM_NFC},
		     {"NFD", NORM_NFD}, {"NFKC", NORM_NFKC}, {"NFKD", NORM_NFKD},
		     {"Lowercase", NORM_LOWERCASE}, {"Strip", NORM_STRIP}};
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		if (!strcmp(ty, kinds[k].name))
			return kinds[k].kind;
	return 0;
}

static int normalizer(hf *h, const json_t *n, const char *path)
{
	const char *ty;
	tok_norm *o;
	bool rx = false;
	int err, kind;
	if (!n || json_is_null(n))
		return 0;
	if (!json_is_object(n) || !(ty = type_of(n)))
		return BAD(h, "%s has no type", h->what, path);
	if (!strcmp(ty, "Sequence")) {
		const json_t *a = json_object_get(n, "normalizers"), *v;
		size_t i;
		if (!json_is_array(a))
			return BAD(h, "%s.normalizers is not an array", h->what, path);
		json_array_foreach(a, i, v)
			if ((err = normalizer(h, v, path)))
				return err;
		return 0;
	}
	if (!(kind = norm_kind(ty)))
		return UNSUP(h, path, ty);
	if (h->t->n_norms >= TOK_MAX_STEPS)
		return nf_error_set(NF_EUNSUPPORTED, "%s: %s: more than %d steps", h->what, path,
				    TOK_MAX_STEPS);
	o = &h->t->norms[h->t->n_norms++];
	o->kind = kind;
	if (kind == NORM_PREPEND)
		return get_str(h, n, "prepend", path, &o->a);
	if (kind == NORM_STRIP)
		return (err = get_bool(h, n, "strip_left", path, true, &o->left)) ? err :
		       get_bool(h, n, "strip_right", path, true, &o->right);
	if (kind != NORM_REPLACE)
		return 0; /* the Unicode forms and Lowercase have no parameters */
	if ((err = get_pattern(h, n, path, &o->a, &rx)) ||
	    (err = get_str(h, n, "content", path, &o->b)))
		return err;
	return rx ? UNSUP(h, path, "Replace with a Regex pattern") : 0;
}

/* ------------------------------------------------------- pre-tokenizer */

static int scheme_of(hf *h, const json_t *o, const char *path, int *scheme)
{
	const json_t *s = json_object_get(o, "prepend_scheme");
	bool aps;
	int err;
	if (json_is_string(s)) {
		const char *v = json_string_value(s);
		*scheme = !strcmp(v, "always") ? META_ALWAYS : !strcmp(v, "first") ? META_FIRST :
			  !strcmp(v, "never") ? META_NEVER : 0;
		return *scheme ? 0 : UNSUP(h, path, v);
	}
	if ((err = get_bool(h, o, "add_prefix_space", path, true, &aps)))
		return err;
	*scheme = aps ? META_ALWAYS : META_NEVER;
	return 0;
}

static int behavior_of(hf *h, const json_t *o, const char *path, int *b)
{
	const json_t *v = json_object_get(o, "behavior");
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;
	if (!s)
		return BAD(h, "%s.behavior is not a string", h->what, path);
	*b = !strcmp(s, "Isolated") ? SPLIT_ISOLATED : !strcmp(s, "Removed") ? SPLIT_REMOVED :
	     !strcmp(s, "MergedWithPrevious") ? SPLIT_MERGED_PREV :
	     !strcmp(s, "MergedWithNext") ? SPLIT_MERGED_NEXT : 0;
	return *b ? 0 : UNSUP(h, path, s);
}

static int pre_one(hf *h, const json_t *n, const char *ty, const char *path, tok_pre *p)
{
	int err;
	if (!strcmp(ty, "ByteLevel")) {
		p->kind = PRE_BYTELEVEL;
		h->t->byte_level = true;
		if ((err = get_bool(h, n, "add_prefix_space", path, true, &p->prefix_space)) ||
		    (err = get_bool(h, n, "use_regex", path, true, &p->use_regex)))
			return err;
		if (p->prefix_space && h->t->n_pres > 0)
			return UNSUP(h, path, "ByteLevel(add_prefix_space) after another step");
		return 0;
	}
	if (!strcmp(ty, "Split")) {
		p->kind = PRE_SPLIT;
		if ((err = get_pattern(h, n, path, &p->pattern, &p->use_regex)) ||
		    (err = behavior_of(h, n, path, &p->behavior)) ||
		    (err = get_bool(h, n, "invert", path, false, &p->invert)))
			return err;
		return 0;
	}
	if (!strcmp(ty, "Digits")) {
		p->kind = PRE_DIGITS;
		return get_bool(h, n, "individual_digits", path, false, &p->individual);
	}
	if (!strcmp(ty, "Metaspace")) {
		p->kind = PRE_METASPACE;
		if ((err = get_str(h, n, "replacement", path, &p->pattern)) ||
		    (err = scheme_of(h, n, path, &p->scheme)) ||
		    (err = get_bool(h, n, "split", path, true, &p->split)))
			return err;
		return h->t->n_pres > 0 ? UNSUP(h, path, "Metaspace after another step") : 0;
	}
	return UNSUP(h, path, ty);
}

static int pre_tokenizer(hf *h, const json_t *n, const char *path)
{
	const char *ty;
	tok_pre p = {0};
	int err;
	if (!n || json_is_null(n))
		return 0;
	if (!json_is_object(n) || !(ty = type_of(n)))
		return BAD(h, "%s has no type", h->what, path);
	if (!strcmp(ty, "Sequence")) {
		const json_t *a = json_object_get(n, "pretokenizers"), *v;
		size_t i;
		if (!json_is_array(a))
			return BAD(h, "%s.pretokenizers is not an array", h->what, path);
		json_array_foreach(a, i, v)
			if ((err = pre_tokenizer(h, v, path)))
				return err;
		return 0;
	}
	/* the byte map is applied in BPE, so nothing may split after it */
	if (h->t->n_pres > 0 && h->t->pres[h->t->n_pres - 1].kind == PRE_BYTELEVEL)
		return UNSUP(h, path, "a step after ByteLevel");
	if (h->t->n_pres >= TOK_MAX_STEPS)
		return nf_error_set(NF_EUNSUPPORTED, "%s: %s: more than %d steps", h->what, path,
				    TOK_MAX_STEPS);
	err = pre_one(h, n, ty, path, &p);
	if (err) {
		tok_pre_release(&p);
		return err;
	}
	h->t->pres[h->t->n_pres++] = p;
	return 0;
}

/* ------------------------------------------------------- decoder */

static int strip_dec(hf *h, const json_t *n, const char *path, tok_dec *d)
{
	const json_t *st = json_object_get(n, "start"), *sp = json_object_get(n, "stop");
	int err;
	if ((err = get_str(h, n, "content", path, &d->a)))
		return err;
	if (!json_is_integer(st) || !json_is_integer(sp))
		return BAD(h, "%s.start/stop are not integers", h->what, path);
	if (json_integer_value(st) < 0 || json_integer_value(st) > 8 || json_integer_value(sp) != 0 ||
	    strcmp(d->a, " "))
		return UNSUP(h, path, "Strip other than of leading spaces");
	d->start = (int)json_integer_value(st);
	return 0;
}

static int dec_one(hf *h, const json_t *n, const char *ty, const char *path, tok_dec *d)
{
	bool rx = false;
	int err, scheme;
	if (!strcmp(ty, "ByteLevel"))
		return d->kind = DEC_BYTELEVEL, 0;
	if (!strcmp(ty, "ByteFallback"))
		return d->kind = DEC_BYTEFALLBACK, 0;
	if (!strcmp(ty, "Fuse"))
		return d->kind = DEC_FUSE, 0;
	if (!strcmp(ty, "Strip"))
		return d->kind = DEC_STRIP, strip_dec(h, n, path, d);
	if (!strcmp(ty, "Replace")) {
		d->kind = DEC_REPLACE;
		if ((err = get_pattern(h, n, path, &d->a, &rx)) ||
		    (err = get_str(h, n, "content", path, &d->b)))
			return err;
		return rx ? UNSUP(h, path, "Replace with a Regex pattern") : 0;
	}
	if (!strcmp(ty, "Metaspace")) {
		d->kind = DEC_METASPACE;
		if ((err = get_str(h, n, "replacement", path, &d->a)) ||
		    (err = scheme_of(h, n, path, &scheme)))
			return err;
		d->start = scheme != META_NEVER;
		return 0;
	}
	return UNSUP(h, path, ty);
}

static int decoder(hf *h, const json_t *n, const char *path)
{
	const char *ty;
	tok_dec d = {0};
	int err;
	if (!n || json_is_null(n))
		return 0;
	if (!json_is_object(n) || !(ty = type_of(n)))
		return BAD(h, "%s has no type", h->what, path);
	if (!strcmp(ty, "Sequence")) {
		const json_t *a = json_object_get(n, "decoders"), *v;
		size_t i;
		if (!json_is_array(a))
			return BAD(h, "%s.decoders is not an array", h->what, path);
		json_array_foreach(a, i, v)
			if ((err = decoder(h, v, path)))
				return err;
		return 0;
	}
	if (h->t->n_decs >= TOK_MAX_STEPS)
		return nf_error_set(NF_EUNSUPPORTED, "%s: %s: more than %d steps", h->what, path,
				    TOK_MAX_STEPS);
	if ((err = dec_one(h, n, ty, path, &d))) {
		free(d.a);
		free(d.b);
		return err;
	}
	h->t->decs[h->t->n_decs++] = d;
	return 0;
}

/* ------------------------------------------------------- post-processor */

/* The id of a TemplateProcessing special token named `name`. */
static int template_id(hf *h, const json_t *n, const char *name, const char *path)
{
	const json_t *st = json_object_get(json_object_get(n, "special_tokens"), name);
	const json_t *ids = json_object_get(st, "ids");
	int id = tok_lookup(h->t, name, strlen(name));
	if (json_is_array(ids) && json_array_size(ids) == 1 &&
	    json_is_integer(json_array_get(ids, 0))) {
		json_int_t v = json_integer_value(json_array_get(ids, 0));
		id = v >= 0 && v < h->t->n ? (int)v : -1;
	}
	if (id < 0)
		return BAD(h, "%s: special token '%.64s' is not a token", h->what, path, name);
	return id;
}

static int template_single(hf *h, const json_t *n, const char *path)
{
	const json_t *a = json_object_get(n, "single"), *v;
	bool seen_seq = false;
	size_t i;
	if (!json_is_array(a))
		return BAD(h, "%s.single is not an array", h->what, path);
	h->post_bos = h->post_eos = -1;
	json_array_foreach(a, i, v) {
		const json_t *sp = json_object_get(v, "SpecialToken");
		const json_t *id = json_object_get(sp, "id");
		int tid;
		if (json_object_get(v, "Sequence")) {
			seen_seq = true;
			continue;
		}
		if (!json_is_string(id))
			return BAD(h, "%s.single[%zu] is neither a Sequence nor a SpecialToken",
				   h->what, path, i);
		if ((tid = template_id(h, n, json_string_value(id), path)) < 0)
			return tid;
		if ((seen_seq ? h->post_eos : h->post_bos) >= 0)
			return UNSUP(h, path, "more than one special token on a side");
		*(seen_seq ? &h->post_eos : &h->post_bos) = tid;
	}
	return 0;
}

static int post_processor(hf *h, const json_t *n, const char *path)
{
	const char *ty;
	if (!n || json_is_null(n))
		return 0;
	if (!json_is_object(n) || !(ty = type_of(n)))
		return BAD(h, "%s has no type", h->what, path);
	if (!strcmp(ty, "ByteLevel"))
		return 0; /* offsets only */
	if (!strcmp(ty, "TemplateProcessing"))
		return template_single(h, n, path);
	if (!strcmp(ty, "Sequence")) {
		const json_t *a = json_object_get(n, "processors"), *v;
		size_t i;
		int err;
		if (!json_is_array(a))
			return BAD(h, "%s.processors is not an array", h->what, path);
		json_array_foreach(a, i, v)
			if ((err = post_processor(h, v, path)))
				return err;
		return 0;
	}
	return UNSUP(h, path, ty);
}

/* ------------------------------------------------------- vocabulary */

/* One id from the vocabulary or the added tokens, checked against the bound. */
static int id_of(hf *h, const json_t *v, const char *path, const char *key, int *id)
{
	json_int_t x;
	if (!json_is_integer(v))
		return BAD(h, "%s '%.64s': the id is not an integer", h->what, path, key);
	x = json_integer_value(v);
	if (x < 0 || x >= TOK_MAX_VOCAB)
		return BAD(h, "%s '%.64s': id %lld is out of range (0..%d)", h->what, path, key,
			   (long long)x, TOK_MAX_VOCAB - 1);
	*id = (int)x;
	return 0;
}

/* Put content at id; the same id twice must be the same token. */
static int place(hf *h, const char **strs, size_t *lens, int id, const char *s, size_t l,
		 const char *path)
{
	if (strs[id] && (lens[id] != l || memcmp(strs[id], s, l) != 0))
		return BAD(h, "%s: id %d is both '%.40s' and '%.40s'", h->what, path, id, strs[id], s);
	strs[id] = s;
	lens[id] = l;
	return 0;
}

static int added_one(hf *h, const json_t *a, size_t i, const char **strs, size_t *lens,
		     uint8_t *types, bool fill)
{
	const json_t *c = json_object_get(a, "content");
	bool special, lstrip, rstrip, single;
	int id = -1, err;
	if (!json_is_object(a) || !json_is_string(c))
		return BAD(h, "added_tokens[%zu] has no content", h->what, i);
	if ((err = id_of(h, json_object_get(a, "id"), "added_tokens", json_string_value(c), &id)) ||
	    (err = get_bool(h, a, "special", "added_tokens[]", false, &special)) ||
	    (err = get_bool(h, a, "lstrip", "added_tokens[]", false, &lstrip)) ||
	    (err = get_bool(h, a, "rstrip", "added_tokens[]", false, &rstrip)) ||
	    (err = get_bool(h, a, "single_word", "added_tokens[]", false, &single)))
		return err;
	if (!fill)
		return id;
	types[id] = special ? NF_TOKTYPE_CONTROL : NF_TOKTYPE_USER;
	h->t->aflags[id] = (uint8_t)((lstrip ? TOK_ADDED_LSTRIP : 0) |
				     (rstrip ? TOK_ADDED_RSTRIP : 0) |
				     (single ? TOK_ADDED_SINGLE_WORD : 0));
	if ((err = place(h, strs, lens, id, json_string_value(c), json_string_length(c),
			 "added_tokens")))
		return err;
	return id;
}

/* The largest id of the vocabulary and the added tokens, before anything
 * is allocated by it: every id below it must be a token, so it cannot pass
 * the number of entries. */
static int vocab_size(hf *h, const json_t *vocab, const json_t *added, int *n)
{
	const char *key;
	const json_t *v;
	size_t i, count = json_object_size(vocab) + json_array_size(added);
	int id = -1, max = -1, err;
	json_object_foreach((json_t *)vocab, key, v) {
		if ((err = id_of(h, v, "model.vocab", key, &id)))
			return err;
		max = id > max ? id : max;
	}
	json_array_foreach(added, i, v) {
		if ((id = added_one(h, v, i, NULL, NULL, NULL, false)) < 0)
			return id;
		max = id > max ? id : max;
	}
	if (max < 0)
		return BAD(h, "model.vocab is empty", h->what);
	if ((size_t)max >= count)
		return BAD(h, "id %d is beyond the %zu tokens given", h->what, max, count);
	*n = max + 1;
	return 0;
}

static int fill_vocab(hf *h, const json_t *vocab, const json_t *added)
{
	nf_tokenizer *t = h->t;
	const char **strs = calloc((size_t)t->n, sizeof(char *));
	size_t *lens = calloc((size_t)t->n, sizeof(size_t)), i;
	const char *key;
	const json_t *v;
	int err = 0, id;
	t->aflags = calloc((size_t)t->n, 1);
	if (!strs || !lens || !t->aflags) {
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", h->what);
		goto done;
	}
	json_object_foreach((json_t *)vocab, key, v) {
		id = (int)json_integer_value(v);
		if ((err = place(h, strs, lens, id, key, strlen(key), "model.vocab")))
			goto done;
	}
	json_array_foreach(added, i, v)
		if ((err = added_one(h, v, i, strs, lens, t->type, true)) < 0)
			goto done;
	err = 0;
	for (id = 0; id < t->n; id++)
		if (!strs[id]) {
			err = BAD(h, "id %d has no token", h->what, id);
			goto done;
		}
	err = tok_set_tokens(t, strs, lens, h->what);
done:
	free(strs);
	free(lens);
	return err;
}

/* ------------------------------------------------------- merges */

static int merge_entry(hf *h, const json_t *m, size_t i, nf_tok_str *l, nf_tok_str *r)
{
	if (json_is_string(m)) {
		const char *s = json_string_value(m), *sp;
		size_t len = json_string_length(m);
		sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
		if (!sp || sp + 1 >= s + len || memchr(sp + 1, ' ', (size_t)(s + len - sp - 1)))
			return BAD(h, "model.merges[%zu] is not 'a b'", h->what, i);
		*l = (nf_tok_str){s, (size_t)(sp - s)};
		*r = (nf_tok_str){sp + 1, (size_t)(s + len - sp - 1)};
		return 0;
	}
	if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
	    json_is_string(json_array_get(m, 1))) {
		const json_t *a = json_array_get(m, 0), *b = json_array_get(m, 1);
		*l = (nf_tok_str){json_string_value(a), json_string_length(a)};
		*r = (nf_tok_str){json_string_value(b), json_string_length(b)};
		return 0;
	}
	return BAD(h, "model.merges[%zu] is neither 'a b' nor a pair of strings", h->what, i);
}

static int merges(hf *h, const json_t *a)
{
	size_t n = json_array_size(a), i;
	nf_tok_str *l, *r;
	const json_t *m;
	int err = 0;
	if (a && !json_is_array(a))
		return BAD(h, "model.merges is not an array", h->what);
	l = calloc(n ? n : 1, sizeof(*l));
	r = calloc(n ? n : 1, sizeof(*r));
	if (!l || !r) {
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", h->what);
		goto done;
	}
	json_array_foreach(a, i, m)
		if ((err = merge_entry(h, m, i, &l[i], &r[i])))
			goto done;
	err = tok_set_merges(h->t, l, r, n, h->what);
done:
	free(l);
	free(r);
	return err;
}

/* ------------------------------------------------------- model */

static int model_flags(hf *h, const json_t *m)
{
	static const char *const nulls[] = {"dropout", "continuing_subword_prefix",
					    "end_of_word_suffix"};
	const json_t *unk = json_object_get(m, "unk_token");
	int err;
	for (size_t k = 0; k < 3; k++) {
		const json_t *v = json_object_get(m, nulls[k]);
		if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
			return nf_error_set(NF_EUNSUPPORTED, "%s: model.%s is not supported", h->what,
					    nulls[k]);
	}
	if ((err = get_bool(h, m, "fuse_unk", "model", false, &h->t->fuse_unk)) ||
	    (err = get_bool(h, m, "byte_fallback", "model", false, &h->t->byte_fallback)) ||
	    (err = get_bool(h, m, "ignore_merges", "model", false, &h->t->ignore_merges)))
		return err;
	if (unk && !json_is_null(unk)) {
		if (!json_is_string(unk))
			return BAD(h, "model.unk_token is not a string", h->what);
		h->t->unk = tok_lookup(h->t, json_string_value(unk), json_string_length(unk));
		/* its type stays: Hugging Face matches and skips it only when it is an
		 * added special token */
		if (h->t->unk < 0)
			return BAD(h, "model.unk_token '%.40s' is not a token", h->what,
				   json_string_value(unk));
	}
	return 0;
}

/* The vocabulary: decides the kind (byte-level when a ByteLevel step is there). */
static int model(hf *h)
{
	const json_t *m = json_object_get(h->root, "model");
	const json_t *vocab = json_object_get(m, "vocab");
	const json_t *added = json_object_get(h->root, "added_tokens");
	const char *ty;
	int n = 0, err;
	if (!json_is_object(m))
		return BAD(h, "model is not an object", h->what);
	if (!(ty = type_of(m)) || strcmp(ty, "BPE"))
		return UNSUP(h, "model.type", ty ? ty : "(none)");
	if (!json_is_object(vocab))
		return BAD(h, "model.vocab is not an object", h->what);
	if (added && !json_is_null(added) && !json_is_array(added))
		return BAD(h, "added_tokens is not an array", h->what);
	if ((err = vocab_size(h, vocab, added, &n)) ||
	    (err = tok_alloc(&h->t, NF_TOK_SPM, n, h->what)) ||
	    (err = fill_vocab(h, vocab, added)) || (err = tok_index(h->t, true, h->what)) ||
	    (err = model_flags(h, m)) || (err = merges(h, json_object_get(m, "merges"))))
		return err;
	return 0;
}

/* ------------------------------------------------------- tokenizer_config.json */

/* bos_token/eos_token: a string or {"content": string}. */
static int config_token(hf *h, const char *key, int *id, char **text)
{
	const json_t *v = json_object_get(h->cfg, key);
	if (json_is_object(v))
		v = json_object_get(v, "content");
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return BAD(h, "tokenizer_config.json: %s is not a string", h->what, key);
	*id = tok_lookup(h->t, json_string_value(v), json_string_length(v));
	if (*id < 0)
		return BAD(h, "tokenizer_config.json: %s '%.40s' is not a token", h->what, key,
			   json_string_value(v));
	free(*text);
	if (!(*text = tok_strndup(json_string_value(v), json_string_length(v))))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", h->what);
	return 0;
}

/* chat_template: a string, or a list of {name, template} of which "default". */
static int chat_template(hf *h)
{
	const json_t *v = json_object_get(h->cfg, "chat_template"), *e;
	size_t i;
	if (json_is_array(v)) {
		const json_t *found = NULL;
		json_array_foreach(v, i, e) {
			const json_t *name = json_object_get(e, "name");
			if (json_is_string(name) && !strcmp(json_string_value(name), "default"))
				found = json_object_get(e, "template");
		}
		v = found;
	}
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return BAD(h, "tokenizer_config.json: chat_template is not a string", h->what);
	if (!(h->t->chat_template = tok_strndup(json_string_value(v), json_string_length(v))))
		return nf_error_set(NF_ENOMEM, "%s: out of memory", h->what);
	return 0;
}

static int read_config(hf *h)
{
	nf_tokenizer *t = h->t;
	bool ab, ae;
	int err;
	if (h->cfg && ((err = config_token(h, "bos_token", &t->bos, &t->bos_text)) ||
		       (err = config_token(h, "eos_token", &t->eos, &t->eos_text)) ||
		       (err = chat_template(h)) ||
		       (err = get_bool(h, h->cfg, "add_bos_token", "tokenizer_config.json", false,
				       &ab)) ||
		       (err = get_bool(h, h->cfg, "add_eos_token", "tokenizer_config.json", false,
				       &ae))))
		return err;
	if (h->post_bos != -2) { /* the post-processor decides what is added */
		t->add_bos = h->post_bos >= 0;
		t->add_eos = h->post_eos >= 0;
		if (h->post_bos >= 0 && t->bos < 0)
			t->bos = h->post_bos;
		if (h->post_eos >= 0 && t->eos < 0)
			t->eos = h->post_eos;
		if ((t->add_bos && t->bos != h->post_bos) || (t->add_eos && t->eos != h->post_eos))
			return nf_error_set(NF_EUNSUPPORTED, "%s: post_processor adds tokens other "
					    "than bos_token/eos_token", h->what);
	} else if (h->cfg) {
		t->add_bos = ab && t->bos >= 0;
		t->add_eos = ae && t->eos >= 0;
	}
	return 0;
}

/* ------------------------------------------------------- loading */

static int parse(hf *h, const char *data, size_t len, const char *name, json_t **out)
{
	json_error_t e;
	*out = json_loadb(data, len, JSON_REJECT_DUPLICATES, &e);
	if (!*out)
		return nf_error_set(NF_EINPUT, "%s%s: %d:%d: %s", h->what, name, e.line, e.column,
				    e.text);
	if (!json_is_object(*out))
		return nf_error_set(NF_EINPUT, "%s%s: the top level is not an object", h->what, name);
	return 0;
}

static int steps(hf *h)
{
	const json_t *tr = json_object_get(h->root, "truncation");
	int err;
	if (tr && !json_is_null(tr))
		return UNSUP(h, "truncation", "truncation");
	h->post_bos = h->post_eos = -2;
	if ((err = normalizer(h, json_object_get(h->root, "normalizer"), "normalizer")) ||
	    (err = pre_tokenizer(h, json_object_get(h->root, "pre_tokenizer"), "pre_tokenizer")) ||
	    (err = decoder(h, json_object_get(h->root, "decoder"), "decoder")))
		return err;
	const json_t *pp = json_object_get(h->root, "post_processor");
	if ((err = post_processor(h, pp, "post_processor")))
		return err;
	if (pp && !json_is_null(pp) && h->post_bos == -2)
		h->post_bos = h->post_eos = -1; /* a ByteLevel post-processor adds nothing */
	for (size_t k = 0; k < h->t->n_decs; k++)
		if (h->t->decs[k].kind == DEC_BYTELEVEL)
			h->t->byte_level = true;
	h->t->kind = h->t->byte_level ? NF_TOK_BPE : NF_TOK_SPM;
	return 0;
}

int nf_tokenizer_load_hf_mem(nf_tokenizer **out, const char *json, size_t json_len,
			     const char *config, size_t config_len, const char *what)
{
	hf h = {.what = what ? what : "tokenizer.json"};
	int err;
	*out = NULL;
	if ((err = parse(&h, json, json_len, "", &h.root)) ||
	    (config && (err = parse(&h, config, config_len, " (tokenizer_config.json)", &h.cfg))) ||
	    (err = model(&h)) || (err = steps(&h)) || (err = read_config(&h)) ||
	    (err = tok_pre_compile(h.t, h.what)) || (err = tok_finish(h.t, h.what)))
		goto done;
	*out = h.t;
	h.t = NULL;
done:
	nf_tokenizer_free(h.t);
	json_decref(h.root);
	json_decref(h.cfg);
	return err;
}
