/*
 * grammar_dfa.c - the lazy DFA over a finished NFA: bytes grouped into
 * classes (bytes every edge treats alike), and a DFA state per set of NFA
 * states, built the first time a byte leads to it (subset construction on
 * demand: a JSON Schema's full DFA can be far larger than the part decoding
 * ever visits).  A set keeps only the states that matter to its future (those
 * with byte edges, and acceptance), so equivalent sets meet in one DFA state.
 */
#include "engine/grammar_int.h"

#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

static void byte_classes(nf_grammar *g)
{
	bool cut[257] = {0};
	const gr_nfa *n = &g->nfa;
	for (size_t i = 0; i < n->n_edges; i++)
		if (!n->edges[i].eps) {
			cut[n->edges[i].lo] = true;
			cut[n->edges[i].hi + 1] = true;
		}
	int c = -1;
	for (int b = 0; b < 256; b++) {
		if (b == 0 || cut[b]) {
			c++;
			g->class_byte[c] = (uint8_t)b;
		}
		g->byte_class[b] = (uint8_t)c;
	}
	g->n_classes = c + 1;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 256, bytes;
	while (c < need)
		if (!nf_size_mul(&c, c, 2))
			return nf_error_set(NF_ENOMEM, "grammar: out of memory");
	void *q;
	if (!nf_size_mul(&bytes, c, elem) || !(q = realloc(*p, bytes)))
		return nf_error_set(NF_ENOMEM, "grammar: out of memory");
	*p = q;
	*cap = c;
	return 0;
}

static uint32_t hash_set(const int32_t *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++) {
		h ^= (uint32_t)s[i];
		h *= 16777619u;
	}
	return h;
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return x < y ? -1 : x > y;
}

/* The epsilon closure of the seeds already in g->stack[0, top), keeping the
 * states that matter, sorted, into g->buf; returns their count. */
static size_t closure(nf_grammar *g, size_t top)
{
	const gr_nfa *n = &g->nfa;
	size_t m = 0;
	while (top) {
		int32_t q = g->stack[--top];
		bool bytes = q == n->accept;
		for (uint32_t k = n->first[q]; k < n->first[q + 1]; k++) {
			const gr_edge *e = &n->edges[k];
			if (!e->eps) {
				bytes = true;
			} else if (n->live[e->to] && g->mark[e->to] != g->mark_gen) {
				g->mark[e->to] = g->mark_gen;
				g->stack[top++] = e->to;
			}
		}
		if (bytes)
			g->buf[m++] = q;
	}
	qsort(g->buf, m, sizeof *g->buf, cmp_i32);
	return m;
}

static int rehash(nf_grammar *g)
{
	size_t cap = g->table_cap ? g->table_cap * 2 : 1024;
	int32_t *t = malloc(cap * sizeof *t);
	if (!t)
		return nf_error_set(NF_ENOMEM, "grammar: out of memory");
	memset(t, 0xff, cap * sizeof *t);
	for (size_t i = 0; i < g->n_ds; i++) {
		size_t h = g->ds[i].hash & (cap - 1);
		while (t[h] >= 0)
			h = (h + 1) & (cap - 1);
		t[h] = (int32_t)i;
	}
	free(g->table);
	g->table = t;
	g->table_cap = cap;
	return 0;
}

/* The DFA state of the set g->buf[0, m): found, or added. */
static int32_t intern(nf_grammar *g, size_t m, int *err)
{
	if (m == 0)
		return GR_DEAD;
	uint32_t h = hash_set(g->buf, m);
	size_t slot = h & (g->table_cap - 1);
	for (int32_t id; (id = g->table[slot]) >= 0; slot = (slot + 1) & (g->table_cap - 1)) {
		const gr_dstate *d = &g->ds[id];
		if (d->hash == h && d->set_len == m &&
		    !memcmp(g->set_pool + d->set_off, g->buf, m * sizeof *g->buf))
			return id;
	}
	if (g->n_ds >= g->max_ds) {
		*err = nf_error_set(NF_ENOMEM, "grammar: the automaton exceeds %zu DFA states", g->max_ds);
		return GR_DEAD;
	}
	size_t nc = (size_t)g->n_classes, need_trans;
	if ((*err = grow((void **)&g->ds, &g->cap_ds, g->n_ds + 1, sizeof *g->ds)) ||
	    (*err = grow((void **)&g->set_pool, &g->set_cap, g->set_used + m, sizeof *g->set_pool)))
		return GR_DEAD;
	if (!nf_size_mul(&need_trans, g->cap_ds, nc * sizeof *g->trans)) {
		*err = nf_error_set(NF_ENOMEM, "grammar: out of memory");
		return GR_DEAD;
	}
	int32_t *t = realloc(g->trans, need_trans);
	if (!t) {
		*err = nf_error_set(NF_ENOMEM, "grammar: out of memory");
		return GR_DEAD;
	}
	g->trans = t;
	int32_t id = (int32_t)g->n_ds++;
	for (size_t c = 0; c < nc; c++)
		g->trans[(size_t)id * nc + c] = GR_UNKNOWN;
	memcpy(g->set_pool + g->set_used, g->buf, m * sizeof *g->buf);
	bool acc = bsearch(&g->nfa.accept, g->buf, m, sizeof *g->buf, cmp_i32) != NULL;
	g->ds[id] = (gr_dstate){(uint32_t)g->set_used, (uint32_t)m, h, -1, acc};
	g->set_used += m;
	g->table[slot] = id;
	if (g->n_ds * 2 > g->table_cap && (*err = rehash(g)))
		return GR_DEAD;
	return id;
}

int32_t gr_dfa_step(nf_grammar *g, int32_t s, uint8_t b, int *err)
{
	size_t nc = (size_t)g->n_classes;
	int32_t *slot = &g->trans[(size_t)s * nc + g->byte_class[b]];
	if (*slot != GR_UNKNOWN)
		return *slot;
	const gr_nfa *n = &g->nfa;
	const gr_dstate *d = &g->ds[s];
	size_t top = 0;
	g->mark_gen++;
	for (uint32_t i = 0; i < d->set_len; i++) {
		int32_t q = g->set_pool[d->set_off + i];
		for (uint32_t k = n->first[q]; k < n->first[q + 1]; k++) {
			const gr_edge *e = &n->edges[k];
			if (!e->eps && e->lo <= b && b <= e->hi && n->live[e->to] &&
			    g->mark[e->to] != g->mark_gen) {
				g->mark[e->to] = g->mark_gen;
				g->stack[top++] = e->to;
			}
		}
	}
	int32_t next = intern(g, closure(g, top), err);
	if (*err)
		return GR_DEAD;
	/* intern may have moved the table */
	g->trans[(size_t)s * nc + g->byte_class[b]] = next;
	return next;
}

int gr_grammar_new(nf_grammar **out, gr_nfa *nfa, const nf_grammar_opts *o)
{
	nf_grammar *g = calloc(1, sizeof *g);
	int err = 0;
	*out = NULL;
	if (!g) {
		gr_nfa_release(nfa);
		return nf_error_set(NF_ENOMEM, "grammar: out of memory");
	}
	g->nfa = *nfa;
	memset(nfa, 0, sizeof *nfa);
	pthread_mutex_init(&g->lock, NULL);
	g->max_ds = o && o->max_dfa_states ? o->max_dfa_states : (size_t)1 << 18;
	g->mask_cache_bytes = o && o->mask_cache_bytes ? o->mask_cache_bytes : (size_t)64 << 20;
	byte_classes(g);
	size_t ns = g->nfa.n_states;
	g->mark = calloc(ns, sizeof *g->mark);
	g->stack = malloc(ns * sizeof *g->stack);
	g->buf = malloc(ns * sizeof *g->buf);
	if (!g->mark || !g->stack || !g->buf) {
		err = nf_error_set(NF_ENOMEM, "grammar: out of memory");
		goto done;
	}
	if ((err = rehash(g)))
		goto done;
	g->mark_gen = 1;
	g->mark[g->nfa.start] = 1;
	g->stack[0] = g->nfa.start;
	g->start = intern(g, closure(g, 1), &err);
done:
	if (err) {
		nf_grammar_free(g);
		return err;
	}
	*out = g;
	return 0;
}

void gr_dfa_release(nf_grammar *g)
{
	free(g->ds);
	free(g->trans);
	free(g->set_pool);
	free(g->table);
	free(g->mark);
	free(g->stack);
	free(g->buf);
	free(g->masks);
	free(g->slot_owner);
	free(g->walk);
}

void nf_grammar_free(nf_grammar *g)
{
	if (!g)
		return;
	gr_dfa_release(g);
	gr_nfa_release(&g->nfa);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

int nf_grammar_match(nf_grammar *g, const char *s, size_t len, bool *matches)
{
	int err = 0;
	*matches = false;
	pthread_mutex_lock(&g->lock);
	int32_t st = g->start;
	for (size_t i = 0; i < len && st >= 0 && !err; i++)
		st = gr_dfa_step(g, st, (uint8_t)s[i], &err);
	if (!err)
		*matches = st >= 0 && g->ds[st].accept;
	pthread_mutex_unlock(&g->lock);
	return err;
}
