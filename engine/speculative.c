/*
 * speculative.c - speculative decoding (speculative.h).
 */
#include "engine/speculative.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

int nf_spec_kind_parse(nf_spec_kind *out, const char *name)
{
	static const char *const names[] = {"none", "lookup", "draft"};
	for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
		if (strcmp(name, names[i]) == 0) {
			*out = (nf_spec_kind)i;
			return 0;
		}
	return nf_error_set(NF_EINPUT, "speculative decoding \"%s\": none, lookup or draft",
			    name ? name : "");
}

const char *nf_spec_kind_name(nf_spec_kind k)
{
	return k == NF_SPEC_LOOKUP ? "lookup" : k == NF_SPEC_DRAFT ? "draft" : "none";
}

size_t nf_spec_lookup(const int *ctx, size_t n, int max_ngram, int *draft, size_t k)
{
	if (n < 2 || max_ngram < 1)
		return 0;
	for (size_t g = (size_t)max_ngram < n - 1 ? (size_t)max_ngram : n - 1; g >= 1; g--) {
		const int *tail = ctx + n - g;
		/* the most recent earlier occurrence, which has a token after it */
		for (size_t i = n - g; i-- > 0;) {
			if (memcmp(ctx + i, tail, g * sizeof *ctx) != 0)
				continue;
			size_t c = n - (i + g) < k ? n - (i + g) : k;
			memcpy(draft, ctx + i + g, c * sizeof *ctx);
			return c;
		}
	}
	return 0;
}

/* The residual max(0, p - q) at token i. */
static double residual(const float *p, const float *q, int i)
{
	return p[i] > q[i] ? (double)p[i] - (double)q[i] : 0.0;
}

int nf_spec_accept(const float *p, const float *q, int n, int d, double u_keep, double u_draw,
		   int *kept)
{
	double mass = 0.0, at = 0.0;
	int last = -1;
	*kept = 0;
	if (d < 0 || d >= n)
		return nf_error_set(NF_EINPUT, "speculative decoding: draft token %d (vocab %d)", d, n);
	if (u_keep * (double)q[d] < (double)p[d]) { /* u < p(d) / q(d), q(d) > 0 or not */
		*kept = 1;
		return d;
	}
	for (int i = 0; i < n; i++)
		mass += residual(p, q, i);
	for (int i = 0; i < n; i++) {
		double r = residual(p, q, i);
		if (r <= 0.0)
			continue;
		last = i;
		at += r;
		if (u_draw * mass < at)
			return i;
	}
	/* no residual (p = q up to rounding, so d was all but certain to be
	 * kept): d; else rounding ran past the sum: its last token */
	*kept = last < 0;
	return last < 0 ? d : last;
}

size_t nf_spec_verify(nf_sampler *smp, float *rows, int vocab, const int *drafts,
		      size_t n_drafts, int (*eog)(void *ctx, int token), void *eog_ctx, int *out,
		      size_t *accepted)
{
	size_t produced = 0;
	*accepted = 0;
	for (size_t i = 0; i <= n_drafts; i++) {
		int x = nf_sampler_sample(smp, rows + i * (size_t)vocab);
		out[produced++] = x;
		int match = i < n_drafts && x == drafts[i];
		*accepted += (size_t)match;
		if (!match || (eog && eog(eog_ctx, x)))
			break;
	}
	return produced;
}

struct nf_spec {
	nf_engine *e;
	nf_seq *seq;
	nf_spec_opts o;
	int vocab;
	float *logits;  /* (NF_SPEC_MAX_K + 1, vocab) rows of the verification pass */
	nf_seq *dseq;   /* the draft engine's sequence */
	size_t dpos;    /* leading tokens of the text the draft sequence holds */
	nf_spec_stats st;
};

static int check_opts(const nf_spec_opts *o, nf_engine *e)
{
	if (o->kind != NF_SPEC_LOOKUP && o->kind != NF_SPEC_DRAFT)
		return nf_error_set(NF_EINPUT, "speculative decoding: no drafter");
	if (o->k < 1 || o->k > NF_SPEC_MAX_K)
		return nf_error_set(NF_EINPUT, "speculative decoding: k %d is out of range (1..%d)",
				    o->k, NF_SPEC_MAX_K);
	if (o->kind == NF_SPEC_LOOKUP && (o->max_ngram < 1 || o->max_ngram > 8))
		return nf_error_set(NF_EINPUT, "speculative decoding: n-gram %d is out of range "
				    "(1..8)", o->max_ngram);
	if (o->kind == NF_SPEC_DRAFT &&
	    (!o->draft || nf_engine_config(o->draft)->vocab_size != nf_engine_config(e)->vocab_size))
		return nf_error_set(NF_EINPUT, "speculative decoding: the draft engine must share "
				    "the model's vocabulary");
	return 0;
}

int nf_spec_new(nf_spec **out, nf_engine *e, nf_seq *seq, const nf_spec_opts *o)
{
	int err = check_opts(o, e);
	*out = NULL;
	if (err)
		return err;
	nf_spec *s = calloc(1, sizeof *s);
	int vocab = nf_engine_config(e)->vocab_size;
	if (!s || !(s->logits = malloc((size_t)(NF_SPEC_MAX_K + 1) * (size_t)vocab * sizeof(float)))) {
		nf_spec_free(s);
		return nf_error_set(NF_ENOMEM, "speculative decoding: out of memory");
	}
	*s = (nf_spec){.e = e, .seq = seq, .o = *o, .vocab = vocab, .logits = s->logits};
	if (o->kind == NF_SPEC_DRAFT && (err = nf_seq_new(&s->dseq, o->draft))) {
		nf_spec_free(s);
		return err;
	}
	*out = s;
	return 0;
}

void nf_spec_free(nf_spec *s)
{
	if (!s)
		return;
	nf_seq_free(s->dseq);
	free(s->logits);
	free(s);
}

nf_spec_stats nf_spec_get_stats(const nf_spec *s) { return s->st; }

/* The draft engine's greedy continuation of ctx[0, n): k >= 1 tokens.
 * Its sequence takes what it lacks of ctx (the tokens accepted since the
 * last step, ctx[n - 1] last) in one pass, whose last row gives the first
 * draft; each further draft is one step. */
static int draft_greedy(nf_spec *s, const int *ctx, size_t n, int *draft, size_t k, size_t *got)
{
	nf_engine *d = s->o.draft;
	float *row = s->logits; /* free until the verification pass */
	int err = 0, token, pos = (int)n;
	*got = 0;
	if (s->dpos > n - 1)
		s->dpos = n - 1;
	s->st.draft_passes++;
	if ((err = nf_engine_prefill(d, s->dseq, ctx + s->dpos, n - s->dpos, (int)s->dpos, row)))
		return err;
	s->dpos = n; /* ctx[n - 1] is in; the drafts after it count once accepted */
	token = draft[(*got)++] = nf_argmax(row, s->vocab);
	for (; *got < k; pos++) {
		s->st.draft_passes++;
		if ((err = nf_engine_step(d, &s->dseq, &token, &pos, 1, row)))
			return err;
		token = draft[(*got)++] = nf_argmax(row, s->vocab);
	}
	return 0;
}

/* How many drafts fit before max_seq_len: the pass runs k + 1 tokens from
 * position n - 1. */
static size_t room(const nf_spec *s, size_t n)
{
	size_t ctx = (size_t)nf_engine_config(s->e)->max_seq_len, k = (size_t)s->o.k;
	return n + k <= ctx ? k : ctx > n ? ctx - n : 0;
}

int nf_spec_next(nf_spec *s, const int *ctx, size_t n, nf_sampler *smp,
		 int (*eog)(void *ctx, int token), void *eog_ctx, int *out, size_t *n_out)
{
	int tokens[NF_SPEC_MAX_K + 1];
	size_t k = room(s, n), drafted = 0, produced = 0, accepted = 0;
	int err = 0;
	*n_out = 0;
	if (n == 0)
		return nf_error_set(NF_EINPUT, "speculative decoding: no text to continue");
	if (s->o.kind == NF_SPEC_LOOKUP)
		drafted = k ? nf_spec_lookup(ctx, n, s->o.max_ngram, tokens + 1, k) : 0;
	else if (k && (err = draft_greedy(s, ctx, n, tokens + 1, k, &drafted)))
		return err;
	tokens[0] = ctx[n - 1];
	if ((err = nf_engine_prefill_logits(s->e, s->seq, tokens, drafted + 1, (int)n - 1,
					    s->logits)))
		return err;
	produced = nf_spec_verify(smp, s->logits, s->vocab, tokens + 1, drafted, eog, eog_ctx, out,
				  &accepted);
	if (s->o.kind == NF_SPEC_DRAFT && drafted)
		s->dpos = n + (accepted < drafted - 1 ? accepted : drafted - 1);
	s->st.steps++;
	s->st.drafted += drafted;
	s->st.accepted += accepted;
	s->st.produced += produced;
	*n_out = produced;
	return 0;
}
