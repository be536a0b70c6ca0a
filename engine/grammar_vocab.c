/*
 * grammar_vocab.c - the vocabulary as the grammar sees it: each token's
 * bytes, its end-of-generation tokens, and a trie of the token bytes laid out
 * in preorder (node i's subtree is [i, end[i])), so that a mask is one
 * forward scan over the nodes that skips a whole subtree at a dead byte.
 */
#include "engine/grammar_int.h"

#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

struct nf_grammar_vocab {
	int n;
	char *bytes;          /* every token's bytes, back to back */
	size_t *off;          /* n + 1 */
	bool *eog;            /* n */
	int32_t *eog_ids;
	size_t n_eog;
	/* the trie, node 0 the root */
	size_t n_nodes;
	uint8_t *node_byte;
	int32_t *node_parent;
	int32_t *node_end;
	uint32_t *node_tok;   /* n_nodes + 1: tokens ending at node i are tok_ids[node_tok[i], node_tok[i + 1]) */
	int32_t *tok_ids;
};

size_t gr_vocab_nodes(const nf_grammar_vocab *v, const uint8_t **byte, const int32_t **parent,
		      const int32_t **end, const uint32_t **tok, const int32_t **ids)
{
	*byte = v->node_byte;
	*parent = v->node_parent;
	*end = v->node_end;
	*tok = v->node_tok;
	*ids = v->tok_ids;
	return v->n_nodes;
}

const int32_t *gr_vocab_eog(const nf_grammar_vocab *v, size_t *n)
{
	*n = v->n_eog;
	return v->eog_ids;
}

typedef struct tok_ref {
	const char *p;
	size_t len;
	int32_t id;
} tok_ref;

static int cmp_ref(const void *a, const void *b)
{
	const tok_ref *x = a, *y = b;
	size_t m = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->p, y->p, m);
	if (c)
		return c;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Upper bound of trie nodes: every byte of every token, and the root. */
static int alloc_trie(nf_grammar_vocab *v, size_t max_nodes, size_t n_refs)
{
	v->node_byte = malloc(max_nodes);
	v->node_parent = malloc(max_nodes * sizeof *v->node_parent);
	v->node_end = malloc(max_nodes * sizeof *v->node_end);
	v->node_tok = calloc(max_nodes + 1, sizeof *v->node_tok);
	v->tok_ids = malloc((n_refs + 1) * sizeof *v->tok_ids);
	if (!v->node_byte || !v->node_parent || !v->node_end || !v->node_tok || !v->tok_ids)
		return nf_error_set(NF_ENOMEM, "grammar vocabulary: out of memory");
	return 0;
}

/* Insert the sorted tokens: keep the path of the last one, pop to the prefix
 * shared with the next, push its remaining bytes.  Nodes are created in
 * preorder, and a node's subtree ends when it is popped. */
static void fill_trie(nf_grammar_vocab *v, const tok_ref *refs, size_t n_refs, int32_t *path,
		      const tok_ref **path_tok)
{
	size_t depth = 0, n_nodes = 1;
	v->node_byte[0] = 0;
	v->node_parent[0] = -1;
	path[0] = 0;
	for (size_t r = 0; r < n_refs; r++) {
		const tok_ref *t = &refs[r];
		size_t common = 0;
		const tok_ref *prev = r ? path_tok[0] : NULL;
		while (prev && common < depth && common < t->len && prev->p[common] == t->p[common])
			common++;
		for (; depth > common; depth--)
			v->node_end[path[depth]] = (int32_t)n_nodes;
		for (; depth < t->len; depth++) {
			size_t id = n_nodes++;
			v->node_byte[id] = (uint8_t)t->p[depth];
			v->node_parent[id] = path[depth];
			path[depth + 1] = (int32_t)id;
		}
		path_tok[0] = t;
		v->node_tok[path[depth] + 1]++;
		v->tok_ids[r] = t->id;
	}
	for (; depth > 0; depth--)
		v->node_end[path[depth]] = (int32_t)n_nodes;
	v->node_end[0] = (int32_t)n_nodes;
	v->n_nodes = n_nodes;
	/* counts to offsets: tokens were appended in node order */
	for (size_t i = 0; i < n_nodes; i++)
		v->node_tok[i + 1] += v->node_tok[i];
}

static int build_trie(nf_grammar_vocab *v)
{
	size_t n_refs = 0, max_len = 0, max_nodes = 1;
	tok_ref *refs = malloc(((size_t)v->n + 1) * sizeof *refs);
	int32_t *path = NULL;
	const tok_ref *last = NULL;
	int err = 0;
	if (!refs)
		return nf_error_set(NF_ENOMEM, "grammar vocabulary: out of memory");
	for (int i = 0; i < v->n; i++) {
		size_t len = v->off[i + 1] - v->off[i];
		if (len == 0 || v->eog[i])
			continue;
		refs[n_refs++] = (tok_ref){v->bytes + v->off[i], len, i};
		max_len = len > max_len ? len : max_len;
		if (!nf_size_add(&max_nodes, max_nodes, len)) {
			err = nf_error_set(NF_EINPUT, "grammar vocabulary: too large");
			goto done;
		}
	}
	qsort(refs, n_refs, sizeof *refs, cmp_ref);
	if (!(path = malloc((max_len + 2) * sizeof *path)) || (err = alloc_trie(v, max_nodes, n_refs))) {
		err = err ? err : nf_error_set(NF_ENOMEM, "grammar vocabulary: out of memory");
		goto done;
	}
	fill_trie(v, refs, n_refs, path, &last);
done:
	free(refs);
	free(path);
	return err;
}

/* The bytes and the EOG flags are filled: gather the EOG ids, build the trie. */
static int finish_vocab(nf_grammar_vocab *v)
{
	for (int i = 0; i < v->n; i++)
		v->n_eog += v->eog[i];
	if (!(v->eog_ids = malloc((v->n_eog + 1) * sizeof *v->eog_ids)))
		return nf_error_set(NF_ENOMEM, "grammar vocabulary: out of memory");
	size_t k = 0;
	for (int i = 0; i < v->n; i++)
		if (v->eog[i])
			v->eog_ids[k++] = i;
	return build_trie(v);
}

static int alloc_vocab(nf_grammar_vocab **out, int n, size_t total_bytes)
{
	nf_grammar_vocab *v = calloc(1, sizeof *v);
	if (!v)
		return nf_error_set(NF_ENOMEM, "grammar vocabulary: out of memory");
	v->n = n;
	v->bytes = malloc(total_bytes + 1);
	v->off = calloc((size_t)n + 1, sizeof *v->off);
	v->eog = calloc((size_t)n + 1, sizeof *v->eog);
	*out = v;
	if (!v->bytes || !v->off || !v->eog)
		return nf_error_set(NF_ENOMEM, "grammar vocabulary: out of memory");
	return 0;
}

int nf_grammar_vocab_from_bytes(nf_grammar_vocab **out, const nf_tok_str *tokens, int n,
				const int *eog, size_t n_eog)
{
	nf_grammar_vocab *v = NULL;
	size_t total = 0;
	int err;
	*out = NULL;
	if (n <= 0)
		return nf_error_set(NF_EINPUT, "grammar vocabulary: %d tokens", n);
	for (int i = 0; i < n; i++)
		if (!nf_size_add(&total, total, tokens[i].len))
			return nf_error_set(NF_EINPUT, "grammar vocabulary: too large");
	if ((err = alloc_vocab(&v, n, total)))
		goto done;
	for (int i = 0; i < n; i++) {
		if (tokens[i].len)
			memcpy(v->bytes + v->off[i], tokens[i].p, tokens[i].len);
		v->off[i + 1] = v->off[i] + tokens[i].len;
	}
	for (size_t k = 0; k < n_eog; k++) {
		if (eog[k] < 0 || eog[k] >= n) {
			err = nf_error_set(NF_EINPUT, "grammar vocabulary: eog id %d out of range", eog[k]);
			goto done;
		}
		v->eog[eog[k]] = true;
	}
	err = finish_vocab(v);
done:
	if (err)
		nf_grammar_vocab_free(v);
	else
		*out = v;
	return err;
}

int nf_grammar_vocab_new(nf_grammar_vocab **out, const nf_tokenizer *t)
{
	nf_grammar_vocab *v = NULL;
	int n = nf_tokenizer_vocab_size(t), err;
	/* a token's bytes in the middle of a text: any previous token but BOS
	 * (after BOS, or first, a decoder drops the leading space) */
	int mid = nf_tokenizer_bos(t) == 0 ? 1 : 0;
	size_t total = 0, len;
	*out = NULL;
	if (n <= 0)
		return nf_error_set(NF_EINPUT, "grammar vocabulary: %d tokens", n);
	for (int i = 0; i < n; i++) {
		nf_tokenizer_decode(t, mid, i, &len);
		if (!nf_size_add(&total, total, len))
			return nf_error_set(NF_EINPUT, "grammar vocabulary: too large");
	}
	if ((err = alloc_vocab(&v, n, total)))
		goto done;
	for (int i = 0; i < n; i++) {
		const char *p = nf_tokenizer_decode(t, mid, i, &len);
		memcpy(v->bytes + v->off[i], p, len);
		v->off[i + 1] = v->off[i] + len;
		v->eog[i] = nf_tokenizer_is_eog(t, i);
	}
	err = finish_vocab(v);
done:
	if (err)
		nf_grammar_vocab_free(v);
	else
		*out = v;
	return err;
}

void nf_grammar_vocab_free(nf_grammar_vocab *v)
{
	if (!v)
		return;
	free(v->bytes);
	free(v->off);
	free(v->eog);
	free(v->eog_ids);
	free(v->node_byte);
	free(v->node_parent);
	free(v->node_end);
	free(v->node_tok);
	free(v->tok_ids);
	free(v);
}

int nf_grammar_vocab_size(const nf_grammar_vocab *v)
{
	return v->n;
}

const char *nf_grammar_vocab_bytes(const nf_grammar_vocab *v, int id, size_t *len)
{
	if (id < 0 || id >= v->n) {
		*len = 0;
		return "";
	}
	*len = v->off[id + 1] - v->off[id];
	return v->bytes + v->off[id];
}

bool nf_grammar_vocab_is_eog(const nf_grammar_vocab *v, int id)
{
	return id >= 0 && id < v->n && v->eog[id];
}

size_t nf_grammar_mask_words(const nf_grammar_vocab *v)
{
	return ((size_t)v->n + 31) / 32;
}
