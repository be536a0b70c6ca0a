/*
 * guide.c - compiled guides and their cache (guide.h).
 */
#include "serve/guide.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

/* Longest text a string without maxLength may take: an answer's open string
 * always ends (docs/structured-output.md). */
#define GUIDE_MAX_STRING 256

struct nf_guide {
	nf_guides *owner;
	nf_grammar *g;
	char *key;      /* kind and canonical JSON of the value */
	int refs;       /* under owner->mu */
	nf_guide *next; /* the cache's list, most recent first */
};

struct nf_guides {
	pthread_mutex_t mu;
	nf_grammar_vocab *vocab;
	nf_guide *head; /* under mu */
	size_t n, max;
	uint64_t compiled, hits;
};

void nf_guide_spec_release(nf_guide_spec *s)
{
	json_decref(s->value);
	*s = (nf_guide_spec){0};
}

int nf_guides_new(nf_guides **out, const nf_tokenizer *t, size_t max_guides)
{
	nf_guides *g = calloc(1, sizeof *g);
	*out = NULL;
	if (!g)
		return nf_error_set(NF_ENOMEM, "guides: out of memory");
	int err = nf_grammar_vocab_new(&g->vocab, t);
	if (err) {
		free(g);
		return err;
	}
	pthread_mutex_init(&g->mu, NULL);
	g->max = max_guides;
	*out = g;
	return 0;
}

static void guide_free(nf_guide *d)
{
	nf_grammar_free(d->g);
	free(d->key);
	free(d);
}

void nf_guides_free(nf_guides *g)
{
	if (!g)
		return;
	for (nf_guide *d = g->head, *next; d; d = next) {
		next = d->next;
		guide_free(d);
	}
	nf_grammar_vocab_free(g->vocab);
	pthread_mutex_destroy(&g->mu);
	free(g);
}

/* "kind:canonical JSON" (keys sorted): the same guide however written. */
static char *guide_key(const nf_guide_spec *s)
{
	char *json = s->value ? json_dumps(s->value, JSON_COMPACT | JSON_SORT_KEYS |
							  JSON_ENCODE_ANY)
			      : strdup("");
	if (!json)
		return NULL;
	size_t n = strlen(json) + 16;
	char *key = malloc(n);
	if (key)
		snprintf(key, n, "%d:%s", (int)s->kind, json);
	free(json);
	return key;
}

/* The choices of a choice guide as the grammar takes them. */
static int compile_choices(nf_grammar **out, const json_t *a, const nf_grammar_opts *o)
{
	size_t n = json_array_size(a);
	const char **s = calloc(n ? n : 1, sizeof *s);
	size_t *len = calloc(n ? n : 1, sizeof *len);
	int err = s && len ? 0 : nf_error_set(NF_ENOMEM, "guides: out of memory");
	for (size_t i = 0; i < n && !err; i++) {
		s[i] = json_string_value(json_array_get(a, i));
		len[i] = json_string_length(json_array_get(a, i));
		if (!s[i])
			err = nf_error_set(NF_EINPUT, "guided_choice: item %zu is not a string", i);
	}
	if (!err)
		err = nf_grammar_from_choices(out, s, len, n, o);
	free(s);
	free(len);
	return err;
}

static int compile(nf_grammar **out, const nf_guide_spec *s)
{
	nf_grammar_opts o = {.max_string = GUIDE_MAX_STRING};
	switch (s->kind) {
	case NF_GUIDE_JSON_OBJECT:
		return nf_grammar_from_json_object(out, &o);
	case NF_GUIDE_SCHEMA:
		return nf_grammar_from_schema(out, s->value, &o);
	case NF_GUIDE_REGEX:
		return nf_grammar_from_regex(out, json_string_value(s->value),
					     json_string_length(s->value), &o);
	case NF_GUIDE_CHOICE:
		return compile_choices(out, s->value, &o);
	default:
		return nf_error_set(NF_EINTERNAL, "guides: no guide to compile");
	}
}

/* Under mu: forget the least recent guides nobody decodes under, past max. */
static void evict(nf_guides *g)
{
	nf_guide **p = &g->head;
	size_t seen = 0;
	while (*p) {
		nf_guide *d = *p;
		if (++seen > g->max && d->refs == 1) {
			*p = d->next;
			g->n--;
			guide_free(d);
			continue;
		}
		p = &d->next;
	}
}

/* Under mu: the cached guide of key, moved to the front, or NULL. */
static nf_guide *lookup(nf_guides *g, const char *key)
{
	for (nf_guide **p = &g->head; *p; p = &(*p)->next)
		if (strcmp((*p)->key, key) == 0) {
			nf_guide *d = *p;
			*p = d->next;
			d->next = g->head;
			g->head = d;
			return d;
		}
	return NULL;
}

int nf_guides_get(nf_guide **out, nf_guides *g, const nf_guide_spec *spec)
{
	char *key = guide_key(spec);
	nf_guide *d;
	int err = 0;
	*out = NULL;
	if (!key)
		return nf_error_set(NF_ENOMEM, "guides: out of memory");
	/* compiled under the lock: nimserve's requests arrive on one thread */
	pthread_mutex_lock(&g->mu);
	if ((d = lookup(g, key))) {
		g->hits++;
		free(key);
	} else if (!(d = calloc(1, sizeof *d))) {
		free(key);
		err = nf_error_set(NF_ENOMEM, "guides: out of memory");
	} else if ((err = compile(&d->g, spec))) {
		free(key);
		free(d);
		d = NULL;
	} else {
		*d = (nf_guide){.owner = g, .g = d->g, .key = key, .refs = 1, .next = g->head};
		g->head = d;
		g->n++;
		g->compiled++;
	}
	if (d) {
		d->refs++;
		evict(g);
	}
	pthread_mutex_unlock(&g->mu);
	*out = d;
	return err;
}

nf_guide *nf_guide_retain(nf_guide *d)
{
	pthread_mutex_lock(&d->owner->mu);
	d->refs++;
	pthread_mutex_unlock(&d->owner->mu);
	return d;
}

void nf_guide_release(nf_guide *d)
{
	if (!d)
		return;
	nf_guides *g = d->owner;
	pthread_mutex_lock(&g->mu);
	d->refs--;
	evict(g);
	pthread_mutex_unlock(&g->mu);
}

int nf_guide_state_new(nf_grammar_state **out, nf_guide *d)
{
	return nf_grammar_state_new(out, d->g, d->owner->vocab);
}

size_t nf_guide_mask_words(const nf_guide *d) { return nf_grammar_mask_words(d->owner->vocab); }

void nf_guides_counts(nf_guides *g, uint64_t *compiled, uint64_t *hits)
{
	pthread_mutex_lock(&g->mu);
	*compiled = g->compiled;
	*hits = g->hits;
	pthread_mutex_unlock(&g->mu);
}
