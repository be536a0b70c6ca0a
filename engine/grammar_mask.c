/*
 * grammar_mask.c - decoding under a grammar: a state is a DFA state; its
 * token mask is the set of tokens whose bytes the DFA accepts from there,
 * found by one preorder scan of the vocabulary's trie (a dead byte skips its
 * whole subtree), plus the end-of-generation tokens where the DFA accepts.
 * Masks are cached per DFA state in a bounded ring (the oldest evicted), so
 * that decoding pays the scan once per state it visits, not once per token.
 */
#include "engine/grammar_int.h"

#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

struct nf_grammar_state {
	nf_grammar *g;
	const nf_grammar_vocab *v;
	int32_t dfa;
	bool finished;
};

/* Allocate the cache and the walk scratch the first time (lock held). */
static int cache_init(nf_grammar *g, const nf_grammar_vocab *v)
{
	const uint8_t *byte;
	const int32_t *parent, *end, *ids;
	const uint32_t *tok;
	size_t words = nf_grammar_mask_words(v), nodes, bytes;
	nodes = gr_vocab_nodes(v, &byte, &parent, &end, &tok, &ids);
	g->n_slots = g->mask_cache_bytes / (words * sizeof(uint32_t));
	g->n_slots = g->n_slots ? g->n_slots : 1;
	if (g->n_slots > g->max_ds)
		g->n_slots = g->max_ds;
	if (!nf_size_mul3(&bytes, g->n_slots, words, sizeof(uint32_t)) ||
	    !(g->masks = malloc(bytes)) ||
	    !(g->slot_owner = malloc(g->n_slots * sizeof *g->slot_owner)) ||
	    !(g->walk = malloc(nodes * sizeof *g->walk)))
		return nf_error_set(NF_ENOMEM, "grammar: out of memory for the mask cache");
	for (size_t i = 0; i < g->n_slots; i++)
		g->slot_owner[i] = -1;
	return 0;
}

/* The trie scan from DFA state `from` into mask (lock held). */
static int scan(nf_grammar *g, const nf_grammar_vocab *v, int32_t from, uint32_t *mask)
{
	const uint8_t *byte;
	const int32_t *parent, *end, *ids;
	const uint32_t *tok;
	size_t nodes = gr_vocab_nodes(v, &byte, &parent, &end, &tok, &ids);
	int32_t *st = g->walk;
	int err = 0;
	memset(mask, 0, nf_grammar_mask_words(v) * sizeof *mask);
	st[0] = from;
	for (size_t i = 1; i < nodes;) {
		int32_t s = st[parent[i]];
		/* the cached transition, else build it */
		int32_t next = g->trans[(size_t)s * (size_t)g->n_classes + g->byte_class[byte[i]]];
		if (next == GR_UNKNOWN && (next = gr_dfa_step(g, s, byte[i], &err), err))
			return err;
		if (next < 0) {
			i = (size_t)end[i];
			continue;
		}
		st[i] = next;
		for (uint32_t k = tok[i]; k < tok[i + 1]; k++)
			mask[ids[k] >> 5] |= 1u << (ids[k] & 31);
		i++;
	}
	if (g->ds[from].accept) {
		size_t n_eog;
		const int32_t *eog = gr_vocab_eog(v, &n_eog);
		for (size_t k = 0; k < n_eog; k++)
			mask[eog[k] >> 5] |= 1u << (eog[k] & 31);
	}
	return 0;
}

/* The cached mask of DFA state s, computed into the next ring slot when
 * missing (lock held). */
static int cached_mask(nf_grammar *g, const nf_grammar_vocab *v, int32_t s, const uint32_t **out)
{
	size_t words = nf_grammar_mask_words(v);
	int err;
	if (!g->masks && (err = cache_init(g, v)))
		return err;
	if (g->ds[s].mask_slot < 0) {
		size_t slot = g->next_slot++ % g->n_slots;
		if (g->slot_owner[slot] >= 0)
			g->ds[g->slot_owner[slot]].mask_slot = -1;
		g->slot_owner[slot] = -1;
		if ((err = scan(g, v, s, g->masks + slot * words)))
			return err;
		g->slot_owner[slot] = s;
		g->ds[s].mask_slot = (int32_t)slot;
	}
	*out = g->masks + (size_t)g->ds[s].mask_slot * words;
	return 0;
}

int nf_grammar_state_new(nf_grammar_state **out, nf_grammar *g, const nf_grammar_vocab *v)
{
	int err = 0;
	*out = NULL;
	pthread_mutex_lock(&g->lock);
	if (!g->vocab)
		g->vocab = v;
	else if (g->vocab != v)
		err = nf_error_set(NF_EINPUT, "grammar: already used with another vocabulary");
	pthread_mutex_unlock(&g->lock);
	if (err)
		return err;
	nf_grammar_state *s = calloc(1, sizeof *s);
	if (!s)
		return nf_error_set(NF_ENOMEM, "grammar: out of memory");
	*s = (nf_grammar_state){g, v, g->start, false};
	*out = s;
	return 0;
}

int nf_grammar_state_clone(nf_grammar_state **out, const nf_grammar_state *s)
{
	nf_grammar_state *c = malloc(sizeof *c);
	*out = NULL;
	if (!c)
		return nf_error_set(NF_ENOMEM, "grammar: out of memory");
	*c = *s;
	*out = c;
	return 0;
}

void nf_grammar_state_free(nf_grammar_state *s)
{
	free(s);
}

int nf_grammar_state_mask(nf_grammar_state *s, uint32_t *mask, size_t *n_allowed)
{
	size_t words = nf_grammar_mask_words(s->v), count = 0;
	const uint32_t *m;
	int err = 0;
	if (s->finished) {
		memset(mask, 0, words * sizeof *mask);
	} else {
		pthread_mutex_lock(&s->g->lock);
		if (!(err = cached_mask(s->g, s->v, s->dfa, &m)))
			memcpy(mask, m, words * sizeof *mask);
		pthread_mutex_unlock(&s->g->lock);
		if (err)
			return err;
	}
	if (n_allowed) {
		for (size_t w = 0; w < words; w++)
			count += (size_t)__builtin_popcount(mask[w]);
		*n_allowed = count;
	}
	return 0;
}

int nf_grammar_state_advance(nf_grammar_state *s, int token)
{
	nf_grammar *g = s->g;
	size_t len;
	int err = 0;
	if (s->finished)
		return nf_error_set(NF_EINPUT, "grammar: token %d after the end", token);
	if (nf_grammar_vocab_is_eog(s->v, token)) {
		if (!nf_grammar_state_accepting(s))
			return nf_error_set(NF_EINPUT, "grammar: end of generation before the text is whole");
		s->finished = true;
		return 0;
	}
	const char *p = nf_grammar_vocab_bytes(s->v, token, &len);
	if (len == 0)
		return nf_error_set(NF_EINPUT, "grammar: token %d adds no text", token);
	pthread_mutex_lock(&g->lock);
	int32_t st = s->dfa;
	for (size_t i = 0; i < len && st >= 0 && !err; i++)
		st = gr_dfa_step(g, st, (uint8_t)p[i], &err);
	pthread_mutex_unlock(&g->lock);
	if (err)
		return err;
	if (st < 0)
		return nf_error_set(NF_EINPUT, "grammar: token %d is not allowed here", token);
	s->dfa = st;
	return 0;
}

bool nf_grammar_state_accepting(const nf_grammar_state *s)
{
	nf_grammar *g = s->g;
	pthread_mutex_lock(&g->lock);
	bool acc = s->dfa >= 0 && g->ds[s->dfa].accept;
	pthread_mutex_unlock(&g->lock);
	return acc;
}

bool nf_grammar_state_finished(const nf_grammar_state *s)
{
	return s->finished;
}
