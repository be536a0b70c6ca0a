/*
 * sched.c - the batching scheduler thread and the job hand-off to HTTP threads.
 */
#define _GNU_SOURCE
#include "serve/sched.h"

#include "engine/speculative.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/forward.h"
#include "engine/generate.h"
#include "serve/spec_gov.h"
#include "serve/stepcost.h"
#include "serve/textstream.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

#define NF_JOB_MAX_TEXT (4u << 20)

struct nf_job {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int refs;          /* under mu */
	int cancelled;     /* under mu: set by the HTTP side */
	int finished;      /* under mu */
	nf_textstream text;/* under mu */
	nf_job_result res; /* under mu once finished */
	nf_job_wake_fn wake;/* under mu: the parked waiter (nf_job_poll) */
	void *wake_arg;
	int wake_at_end;   /* under mu: the waiter wants the end only */
	char *stop[8];
	size_t n_stop;
	/* scheduler-thread only */
	int *tokens;
	int n_prompt;
	int pos;           /* position the next fed token takes */
	int cached;        /* prompt positions taken from the prefix cache; while
			      pos == cached no step has run any of its tokens yet */
	int next_token;    /* the token fed at pos */
	int generated;
	int max_tokens;
	nf_sampler sampler;
	int have_sampler;
	int min_tokens;    /* the end tokens are masked until this many are generated */
	int ignore_eos;
	int *stop_ids;
	size_t n_stop_ids;
	int want_logprobs, top_logprobs, want_prompt_logprobs;
	nf_token_logprob *lp; /* under mu: one per generated token */
	size_t n_lp, cap_lp;
	nf_token_logprob *plp; /* the prompt's: written before the first token, read after the end */
	size_t n_plp;
	int draft[NF_SPEC_MAX_K]; /* tokens drafted to follow next_token this step */
	int n_draft;
	nf_seq *dseq;      /* on opts.spec_draft: its copy of the text, for drafting */
	nf_guide *guide;   /* what the answer must match, or NULL */
	nf_grammar_state *gstate; /* where the answer is in it */
	uint32_t *gmask;   /* the tokens it allows next */
	nf_seq *seq;
	double t_arrival, t_last;
	nf_job *next;      /* queue link, under the scheduler's mu */
};

struct nf_sched {
	nf_engine *engine;
	nf_metrics *metrics;
	nf_sched_opts opts;
	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	nf_job *q_head, *q_tail; /* under mu */
	size_t n_queued;         /* under mu */
	size_t n_active;         /* under mu (written by the thread) */
	int stopping, draining;  /* under mu */
	nf_job **active;         /* thread only */
	float *logits;           /* (max_batch, vocab) */
	/* one ragged step: b_seqs[k] consumes b_ntok[k] tokens from b_tokens
	 * (flat, capacity max_batch + NF_FWD_PASS_TOKENS) at b_pos[k]..;
	 * b_job[k] is its index in active */
	nf_seq **b_seqs;
	int *b_tokens, *b_ntok, *b_pos, *b_job;
	int *b_rows;             /* logits rows of each stepped sequence (its drafts + 1) */
	int *ctx;                /* (max_seq_len) a sequence's text, for prompt lookup */
	/* one draft step over opts.spec_draft: d_seqs[k] consumes d_ntok[k]
	 * tokens of d_tokens (capacity max_batch * (NF_SPEC_MAX_K + 1)) at
	 * d_pos[k]; it is active[d_job[k]]'s, which drafts d_k[k] tokens */
	nf_seq **d_seqs;
	int *d_tokens, *d_ntok, *d_pos, *d_job, *d_k;
	float *d_logits;         /* (max_batch, vocab) */
	nf_stepcost cost;        /* thread only: what steps take here */
	nf_spec_gov gov;         /* thread only: whether drafting pays here */
	int step_decode;         /* thread only, this step: its decoding sequences, */
	int step_drafting;       /* whether they drafted, */
	int step_prompt;         /* and the prompt tokens it carries */
	int gov_told[NF_SPEC_GOV_CLASSES]; /* thread only: the choice last logged (-1 none) */
	double gov_told_at[NF_SPEC_GOV_CLASSES]; /* and when */
	int *eog;                /* the end-of-generation tokens (and BOS), masked under min_tokens */
	size_t n_eog;
	float *lp_row;           /* (vocab) thread only: a processed row kept for its logprobs */
};

double nf_sched_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void job_unref(nf_job *j)
{
	int last;
	if (!j)
		return;
	pthread_mutex_lock(&j->mu);
	last = --j->refs == 0;
	pthread_mutex_unlock(&j->mu);
	if (!last)
		return;
	nf_seq_free(j->seq);
	nf_seq_free(j->dseq);
	nf_grammar_state_free(j->gstate);
	nf_guide_release(j->guide);
	free(j->gmask);
	if (j->have_sampler)
		nf_sampler_release(&j->sampler);
	nf_textstream_release(&j->text);
	for (size_t i = 0; i < j->n_stop; i++)
		free(j->stop[i]);
	free(j->tokens);
	free(j->stop_ids);
	free(j->lp);
	free(j->plp);
	pthread_cond_destroy(&j->cv);
	pthread_mutex_destroy(&j->mu);
	free(j);
}

void nf_job_release(nf_job *j)
{
	job_unref(j);
}

/* Under j->mu: the waiter may look again (text_only: there is new text,
 * the job is not over). */
static void job_signal(nf_job *j, int text_only)
{
	nf_job_wake_fn w = j->wake;
	pthread_cond_broadcast(&j->cv);
	if (w && !(text_only && j->wake_at_end)) {
		j->wake = NULL;
		w(j->wake_arg);
	}
}

/* Scheduler side: the job is over.  The metrics first, so that a client
 * reading them after its answer finds its request counted. */
static void job_finish(nf_sched *s, nf_job *j, const char *reason)
{
	int first = 0;
	pthread_mutex_lock(&j->mu);
	first = !j->finished;
	pthread_mutex_unlock(&j->mu);
	if (s->metrics && first) {
		nf_metrics_tokens(s->metrics, (size_t)(j->pos >= j->n_prompt ? j->n_prompt : j->pos),
				  (size_t)j->cached, (size_t)j->generated);
		if (!strcmp(reason, "cancelled"))
			nf_metrics_cancelled(s->metrics);
	}
	pthread_mutex_lock(&j->mu);
	if (!j->finished) {
		j->finished = 1;
		j->res.finish_reason = reason;
		j->res.prompt_tokens = j->n_prompt;
		j->res.completion_tokens = j->generated;
		j->res.cached_tokens = j->cached;
	}
	job_signal(j, 0);
	pthread_mutex_unlock(&j->mu);
	nf_seq_free(j->seq);
	nf_seq_free(j->dseq);
	j->seq = j->dseq = NULL;
}

static int is_stop_id(const nf_job *j, int token)
{
	for (size_t i = 0; i < j->n_stop_ids; i++)
		if (j->stop_ids[i] == token)
			return 1;
	return 0;
}

/* Under j->mu: keep a generated token's logprob. */
static int job_keep_logprob(nf_job *j, const nf_token_logprob *rec)
{
	if (j->n_lp == j->cap_lp) {
		size_t cap = j->cap_lp ? 2 * j->cap_lp : 64, bytes;
		nf_token_logprob *p;
		if (!nf_size_mul(&bytes, cap, sizeof *p) || !(p = realloc(j->lp, bytes)))
			return NF_ENOMEM;
		j->lp = p;
		j->cap_lp = cap;
	}
	j->lp[j->n_lp++] = *rec;
	return 0;
}

/* One generated token (rec: its logprob, or NULL): decode, check stops
 * and limits.  Returns 1 if the job is over. */
static int job_token(nf_sched *s, nf_job *j, int token, int prev, double now, const nf_token_logprob *rec)
{
	const nf_tokenizer *tok = nf_engine_tokenizer(s->engine);
	int max_seq = nf_engine_config(s->engine)->max_seq_len;
	size_t len = 0;
	const char *piece;
	int hit;
	if ((!j->ignore_eos && (nf_tokenizer_is_eog(tok, token) || token == nf_tokenizer_bos(tok))) ||
	    is_stop_id(j, token)) {
		job_finish(s, j, "stop");
		return 1;
	}
	j->generated++;
	if (s->metrics) {
		if (j->generated == 1)
			nf_metrics_observe(s->metrics, NF_HIST_TTFT, now - j->t_arrival);
		else
			nf_metrics_observe(s->metrics, NF_HIST_ITL, now - j->t_last);
	}
	pthread_mutex_lock(&j->mu);
	if (j->generated == 1)
		j->res.ttft = now - j->t_arrival;
	if (rec && job_keep_logprob(j, rec) < 0) {
		pthread_mutex_unlock(&j->mu);
		job_finish(s, j, "error");
		return 1;
	}
	piece = nf_tokenizer_decode(tok, prev, token, &len);
	hit = nf_textstream_push(&j->text, piece, len);
	if (hit != 0 || nf_textstream_ready(&j->text, 0) > 0)
		job_signal(j, hit == 0);
	pthread_mutex_unlock(&j->mu);
	j->t_last = now;
	if (hit != 0) {
		job_finish(s, j, hit > 0 ? "stop" : "length");
		return 1;
	}
	if (j->generated >= j->max_tokens || j->pos + 1 >= max_seq) {
		job_finish(s, j, "length");
		return 1;
	}
	j->next_token = token;
	j->pos++;
	return 0;
}

/* rec: token's logprob in a row of logits whose log-sum-exp is lse, with
 * the row's top alternatives. */
static void logprob_of_row(nf_token_logprob *rec, const float *row, int vocab, float lse, int token,
			   int n_top)
{
	rec->token = token;
	rec->logprob = token >= 0 && token < vocab ? row[token] - lse : NAN;
	rec->n_top = nf_sampling_top_ids(row, vocab, n_top, rec->top_token);
	for (int k = 0; k < rec->n_top; k++)
		rec->top_logprob[k] = row[rec->top_token[k]] - lse;
}

#define PROMPT_LOGPROB_ROWS 64 /* rows of logits per pass: 12 MiB for a 49152-token vocabulary */

/* Echo's prompt logprobs: every prompt token but the last is fed with
 * logits at each position (row i predicts token i + 1), in passes of
 * PROMPT_LOGPROB_ROWS, before the job joins the batch; the last token then
 * runs as usual, for the first generated one.  The first token has none. */
static int job_prompt_logprobs(nf_sched *s, nf_job *j)
{
	int vocab = nf_engine_config(s->engine)->vocab_size, fed = j->n_prompt - 1, rc = 0;
	size_t rows_bytes;
	float *rows = NULL;
	j->plp = calloc((size_t)j->n_prompt, sizeof *j->plp);
	if (!j->plp || !nf_size_mul(&rows_bytes, (size_t)PROMPT_LOGPROB_ROWS * sizeof *rows, (size_t)vocab) ||
	    (fed > 0 && !(rows = malloc(rows_bytes)))) {
		free(rows);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	j->plp[0] = (nf_token_logprob){.token = j->tokens[0], .logprob = NAN};
	for (int p = 0; p < fed && rc == 0; p += PROMPT_LOGPROB_ROWS) {
		int m = fed - p < PROMPT_LOGPROB_ROWS ? fed - p : PROMPT_LOGPROB_ROWS;
		rc = nf_engine_prefill_logits(s->engine, j->seq, j->tokens + p, (size_t)m, p, rows);
		for (int r = 0; r < m && rc == 0; r++) {
			const float *row = rows + (size_t)r * (size_t)vocab;
			logprob_of_row(&j->plp[p + r + 1], row, vocab, nf_sampling_logsumexp(row, vocab),
				       j->tokens[p + r + 1], j->top_logprobs);
		}
	}
	free(rows);
	if (rc == 0) {
		j->n_plp = (size_t)j->n_prompt;
		j->pos = fed;
		j->cached = 0;
	}
	return rc;
}

/* A new job's sequence: with the prefix cache, the kept one sharing the
 * longest prefix with its prompt (engine.h), which it then skips. */
static int job_start(nf_sched *s, nf_job *j)
{
	size_t reused = 0;
	int use_cache = s->opts.prefix_cache && !j->want_prompt_logprobs;
	int rc = use_cache ? nf_seq_new_prefixed(&j->seq, s->engine, j->tokens, (size_t)j->n_prompt, &reused)
			   : nf_seq_new(&j->seq, s->engine);
	j->pos = j->cached = (int)reused;
	if (rc == 0 && j->want_prompt_logprobs)
		rc = job_prompt_logprobs(s, j);
	return rc;
}

/* Sample job j's next token from its row of logits: the sampler's
 * transforms, the end tokens masked while under min_tokens, the logprobs
 * read (into rec) before temperature, then the draw.  A guided job draws
 * from the tokens its grammar allows (the mask, before everything else) and
 * moves its grammar on by the token; -1 when the grammar fails (its
 * automaton outgrew its bound) or allows nothing. */
static int job_sample(nf_sched *s, nf_job *j, float *lg, nf_token_logprob *rec)
{
	int vocab = nf_engine_config(s->engine)->vocab_size, tok;
	float lse = 0.0f;
	size_t allowed = 0;
	if (j->gstate) {
		if (nf_grammar_state_mask(j->gstate, j->gmask, &allowed) < 0 || allowed == 0)
			return -1;
		nf_sampler_set_mask(&j->sampler, j->gmask);
	}
	nf_sampler_process(&j->sampler, lg);
	/* a grammar that only allows the end wins over min_tokens */
	if (j->generated < j->min_tokens && !(j->gstate && nf_grammar_state_finished(j->gstate))) {
		for (size_t i = 0; i < s->n_eog; i++)
			lg[s->eog[i]] = -INFINITY;
		for (size_t i = 0; i < j->n_stop_ids; i++)
			lg[j->stop_ids[i]] = -INFINITY;
	}
	if (j->want_logprobs) {
		lse = nf_sampling_logsumexp(lg, vocab);
		memcpy(s->lp_row, lg, (size_t)vocab * sizeof *lg);
	}
	tok = nf_sampler_pick(&j->sampler, lg);
	nf_sampler_accept(&j->sampler, tok);
	if (j->want_logprobs)
		logprob_of_row(rec, s->lp_row, vocab, lse, tok, j->top_logprobs);
	if (j->gstate && nf_grammar_state_advance(j->gstate, tok) < 0)
		return -1;
	return tok;
}

/* Prompt tokens of a and b in common, at most b's prompt less its last token. */
static int prompt_common(const nf_job *a, const nf_job *b)
{
	int k = 0, max = a->n_prompt < b->n_prompt - 1 ? a->n_prompt : b->n_prompt - 1;
	while (k < max && a->tokens[k] == b->tokens[k])
		k++;
	return k;
}

/* Before job i (in its prompt, not fed yet) joins a step: copy the longest
 * prefix of its prompt that a running sequence has already computed.
 * Returns 1 if it should rather sit this step out: a job admitted before it
 * is still prefilling a longer shared prefix (identical prompts arriving
 * together), which it can copy once computed instead of computing it too.
 * Worth a step of waiting only when that saves at least half of what is
 * left of its prompt. */
static int job_share_prefix(nf_sched *s, size_t n_active, size_t i)
{
	nf_job *j = s->active[i];
	nf_seq *donor = NULL;
	int best = j->pos, left;
	for (size_t k = 0; k < n_active; k++) {
		nf_job *d = s->active[k];
		if (k == i || !d->seq)
			continue;
		int c = (int)nf_seq_common_prefix(d->seq, j->tokens, (size_t)j->n_prompt - 1);
		if (c > best) {
			best = c;
			donor = d->seq;
		}
	}
	if (donor && nf_seq_copy_prefix(j->seq, donor, (size_t)best) == 0)
		j->pos = j->cached = best;
	left = j->n_prompt - j->pos;
	for (size_t k = 0; k < i; k++) {
		nf_job *d = s->active[k];
		if (d->seq && d->pos < d->n_prompt) {
			int gain = prompt_common(d, j) - j->pos;
			if (gain >= 2 && 2 * gain >= left)
				return 1;
		}
	}
	return 0;
}

/* The text of decoding job j before its next token: positions [0, pos),
 * which its sequence has consumed (drafts it rejected lie beyond them).
 * Valid until its sequence is stepped. */
static const int *job_text(const nf_job *j)
{
	const int *hist = NULL;
	nf_seq_tokens(j->seq, &hist);
	return hist;
}

/* Tokens decoding job j may draft this step: opts.spec_k, no more than it
 * may still generate or its context holds after its next token. */
static int job_draft_room(const nf_sched *s, const nf_job *j)
{
	int max_seq = nf_engine_config(s->engine)->max_seq_len, k = s->opts.spec_k;
	int left = j->max_tokens - j->generated - 1, room = max_seq - 2 - j->pos;
	if (j->pos < 0 || room <= 0 || left <= 0)
		return 0;
	k = k < left ? k : left;
	return k < room ? k : room;
}

/* Prompt lookup for decoding job j: up to job_draft_room tokens to follow
 * its next token. */
static int job_draft(nf_sched *s, nf_job *j)
{
	size_t n = nf_seq_tokens(j->seq, NULL), k = (size_t)job_draft_room(s, j);
	if (k == 0)
		return 0;
	if (n > (size_t)j->pos)
		n = (size_t)j->pos;
	memcpy(s->ctx, job_text(j), n * sizeof *s->ctx);
	s->ctx[n] = j->next_token;
	return (int)nf_spec_lookup(s->ctx, n + 1, s->opts.spec_ngram, j->draft, k);
}

/* Bring job j's draft sequence to within NF_SPEC_MAX_K positions of its
 * text before the next token; *from: the first position it still lacks.
 * The draft sequence holds the text it shares with the job's (what the
 * draft engine's prefix cache gave a new one, then what steps fed it):
 * drafts the verifier rejected drop out of it here, and the rest of a new
 * prompt is prefilled alone, once per request. */
static int draft_catch_up(nf_sched *s, nf_job *j, int *from)
{
	const int *text = job_text(j);
	size_t have = 0;
	int rc;
	if (!j->dseq && (rc = nf_seq_new_prefixed(&j->dseq, s->opts.spec_draft, text,
						  (size_t)j->pos, &have)) < 0)
		return rc;
	have = nf_seq_common_prefix(j->dseq, text, (size_t)j->pos);
	if ((size_t)j->pos - have > NF_SPEC_MAX_K) {
		size_t n = (size_t)j->pos - NF_SPEC_MAX_K - have;
		if ((rc = nf_engine_prefill(s->opts.spec_draft, j->dseq, text + have, n, (int)have,
					    NULL)) < 0)
			return rc;
		have += n;
	}
	*from = (int)have;
	return 0;
}

/* Lay out the first draft step: every decoding job that may draft feeds
 * what its draft sequence lacks and its next token; *nb: the sequences. */
static int draft_first_step(nf_sched *s, size_t n_active, size_t *nb)
{
	int nt = 0, rc;
	*nb = 0;
	for (size_t i = 0; i < n_active; i++) {
		nf_job *j = s->active[i];
		int k = j->pos >= j->n_prompt ? job_draft_room(s, j) : 0, from;
		if (k == 0 || nf_seq_tokens(j->seq, NULL) < (size_t)j->pos)
			continue;
		if ((rc = draft_catch_up(s, j, &from)) < 0)
			return rc;
		int lack = j->pos - from; /* 0..NF_SPEC_MAX_K */
		memcpy(s->d_tokens + nt, job_text(j) + from, (size_t)lack * sizeof *s->d_tokens);
		s->d_tokens[nt + lack] = j->next_token;
		s->d_seqs[*nb] = j->dseq;
		s->d_ntok[*nb] = lack + 1;
		s->d_pos[*nb] = from;
		s->d_job[*nb] = (int)i;
		s->d_k[*nb] = k;
		nt += lack + 1;
		(*nb)++;
	}
	return 0;
}

/* Draft engine speculation: each decoding job's draft sequence continues
 * its text greedily, all of them in one batched step per drafted token
 * (up to opts.spec_k steps; a job leaves once it has its own count).  The
 * last draft is never fed: the next catch-up feeds it if it was accepted. */
static int draft_all(nf_sched *s, size_t n_active)
{
	int vocab = nf_engine_config(s->engine)->vocab_size, rc;
	size_t nb;
	if ((rc = draft_first_step(s, n_active, &nb)) < 0)
		return rc;
	while (nb > 0) {
		size_t keep = 0;
		if ((rc = nf_engine_step_ragged(s->opts.spec_draft, s->d_seqs, s->d_tokens, s->d_ntok,
						s->d_pos, nb, s->d_logits)) < 0)
			return rc;
		for (size_t b = 0; b < nb; b++) {
			nf_job *j = s->active[s->d_job[b]];
			int tok = nf_argmax(s->d_logits + b * (size_t)vocab, vocab);
			j->draft[j->n_draft++] = tok;
			if (j->n_draft == s->d_k[b])
				continue;
			/* the next step feeds it (tokens are one per sequence from here) */
			s->d_seqs[keep] = s->d_seqs[b];
			s->d_tokens[keep] = tok;
			s->d_ntok[keep] = 1;
			s->d_pos[keep] = j->pos + j->n_draft;
			s->d_job[keep] = s->d_job[b];
			s->d_k[keep] = s->d_k[b];
			keep++;
		}
		nb = keep;
	}
	return 0;
}

/* Say through opts.log when the governor's choice for n_decode sequences
 * changed: the first time, then at most once a minute (close costs may
 * flip it back and forth). */
static void spec_gov_tell(nf_sched *s, int n_decode)
{
	int c = nf_spec_gov_class(n_decode), choice = s->gov.choice[c];
	double now = nf_sched_now();
	char line[256];
	if (!s->opts.log || choice < 0 || choice == s->gov_told[c] ||
	    (s->gov_told[c] >= 0 && now - s->gov_told_at[c] < 60.0))
		return;
	s->gov_told[c] = choice;
	s->gov_told_at[c] = now;
	snprintf(line, sizeof line, "speculation with %d decoding sequence%s: %.2f ms a token with "
		 "drafts, %.2f without: drafting %s", n_decode, n_decode == 1 ? "" : "s",
		 1e3 * nf_spec_gov_cost(&s->gov, n_decode, 1),
		 1e3 * nf_spec_gov_cost(&s->gov, n_decode, 0),
		 choice ? "on" : "paused (tried again now and then)");
	s->opts.log(line);
}

/* Every job's drafts for this step (none while in its prompt), when
 * speculation is on and, with opts.spec_adaptive, drafting is the cheaper
 * way a token here (spec_gov.h).  A draft engine that fails only costs the
 * drafts: the step verifies none. */
static void draft_step(nf_sched *s, size_t n_active)
{
	int n_decode = 0;
	for (size_t i = 0; i < n_active; i++) {
		s->active[i]->n_draft = 0;
		n_decode += s->active[i]->pos >= s->active[i]->n_prompt;
	}
	s->step_decode = n_decode;
	s->step_drafting = s->opts.spec_k > 0 && n_decode > 0 &&
			   (!s->opts.spec_adaptive || nf_spec_gov_draft(&s->gov, n_decode));
	if (s->opts.spec_adaptive && n_decode > 0)
		spec_gov_tell(s, n_decode);
	if (!s->step_drafting)
		return;
	if (!s->opts.spec_draft) {
		for (size_t i = 0; i < n_active; i++)
			if (s->active[i]->pos >= s->active[i]->n_prompt)
				s->active[i]->n_draft = job_draft(s, s->active[i]);
	} else if (draft_all(s, n_active) < 0) {
		for (size_t i = 0; i < n_active; i++)
			s->active[i]->n_draft = 0;
	}
}

/* Prompt tokens a step may carry beside n_decode decoding tokens: what is
 * left of one forward pass, and while anyone decodes no more than
 * opts.prefill_chunk and what keeps the step within opts.prefill_slack_pct
 * of a decode-only step (stepcost.h); at least one. */
static int prompt_budget(const nf_sched *s, int n_decode)
{
	int budget = NF_FWD_PASS_TOKENS - n_decode;
	/* While others decode, a big prompt chunk would stretch their step: cap it. */
	if (n_decode > 0 && s->opts.prefill_chunk > 0 && budget > s->opts.prefill_chunk)
		budget = s->opts.prefill_chunk;
	if (n_decode > 0 && s->opts.prefill_slack_pct > 0) {
		int fit = nf_stepcost_prompt_budget(&s->cost, n_decode,
						    s->opts.prefill_slack_pct / 100.0);
		if (fit >= 0 && budget > fit)
			budget = fit;
	}
	return budget < 1 ? 1 : budget;
}

/* Lay out one ragged step over active[0, n_active) (admission order): every
 * decoding job feeds its one token and its drafts, and the jobs still in
 * their prompt share prompt_budget, first come first served, so a decode
 * never waits for a prompt and a new prompt is prefilled in one or a few
 * steps.  A prompt job left without budget sits this step out, as does one
 * waiting for a shared prefix (job_share_prefix).  *nb: the sequences
 * stepped. */
static void build_step(nf_sched *s, size_t n_active, size_t *nb)
{
	int n_decode = 0, budget, nt = 0;
	size_t k = 0;
	draft_step(s, n_active);
	for (size_t i = 0; i < n_active; i++)
		if (s->active[i]->pos >= s->active[i]->n_prompt)
			n_decode += 1 + s->active[i]->n_draft;
	budget = prompt_budget(s, n_decode);
	s->step_prompt = 0;
	for (size_t i = 0; i < n_active; i++) {
		nf_job *j = s->active[i];
		int take;
		if (j->pos >= j->n_prompt) {
			s->b_tokens[nt] = j->next_token;
			memcpy(s->b_tokens + nt + 1, j->draft, (size_t)j->n_draft * sizeof *j->draft);
			take = 1 + j->n_draft;
		} else {
			if (j->pos == j->cached && s->opts.prefix_cache &&
			    job_share_prefix(s, n_active, i))
				continue;
			take = j->n_prompt - j->pos;
			if (take > budget)
				take = budget;
			if (take == 0)
				continue;
			budget -= take;
			s->step_prompt += take;
			memcpy(s->b_tokens + nt, j->tokens + j->pos, (size_t)take * sizeof *s->b_tokens);
		}
		s->b_seqs[k] = j->seq;
		s->b_ntok[k] = take;
		s->b_rows[k] = j->pos >= j->n_prompt ? take : 1;
		s->b_pos[k] = j->pos;
		s->b_job[k] = (int)i;
		nt += take;
		k++;
	}
	*nb = k;
}

/* Job j's rows of logits after a step: its next token drawn from the
 * first, then, while each drawn token equals the token drafted there, the
 * next drafted one's row (speculative.h's accept rule: one draw per token
 * produced, so the text is the one decoding without drafts gives); *emitted
 * grows by the tokens drawn.  1 when the job is over. */
static int job_take_rows(nf_sched *s, nf_job *j, float *lg, double now, int *emitted)
{
	int vocab = nf_engine_config(s->engine)->vocab_size, accepted = 0, over = 0;
	for (int i = 0; i <= j->n_draft && !over; i++, lg += vocab) {
		nf_token_logprob rec;
		int tok = job_sample(s, j, lg, &rec), prev;
		(*emitted)++;
		if (j->pos < j->n_prompt)
			j->pos = j->n_prompt - 1; /* the prompt's last token was fed */
		prev = j->pos < j->n_prompt ? j->tokens[j->pos] : j->next_token;
		if (tok < 0 || tok >= vocab) {
			job_finish(s, j, "error");
			return 1;
		}
		over = job_token(s, j, tok, prev, now, j->want_logprobs ? &rec : NULL);
		if (i == j->n_draft || tok != j->draft[i])
			break;
		accepted++;
	}
	if (j->n_draft && s->metrics)
		nf_metrics_spec(s->metrics, (size_t)j->n_draft, (size_t)accepted);
	j->n_draft = 0;
	return over;
}

/* Every job of active[0, n_active) ends with reason and is let go. */
static void finish_all(nf_sched *s, size_t n_active, const char *reason)
{
	for (size_t i = 0; i < n_active; i++) {
		job_finish(s, s->active[i], reason);
		job_unref(s->active[i]);
	}
}

/* Wait for work, then move queued jobs to active[] behind the *n_active
 * there: up to opts.max_batch, or, once stopping, all of them (to be
 * cancelled; capacity: see nf_sched_new).  Returns whether stopping. */
static int admit_queued(nf_sched *s, size_t *n_active)
{
	pthread_mutex_lock(&s->mu);
	while (!s->stopping && !s->q_head && *n_active == 0)
		pthread_cond_wait(&s->cv, &s->mu);
	int stopping = s->stopping;
	size_t cap = (size_t)s->opts.max_batch + (stopping ? (size_t)s->opts.max_queue : 0);
	while (s->q_head && *n_active < cap) {
		nf_job *j = s->q_head;
		s->q_head = j->next;
		if (!s->q_head)
			s->q_tail = NULL;
		s->n_queued--;
		s->active[(*n_active)++] = j;
	}
	if (stopping)
		s->n_queued = 0;
	s->n_active = *n_active;
	pthread_mutex_unlock(&s->mu);
	return stopping;
}

/* Stopping: the jobs admitted are cancelled.  1 once the queue is empty
 * as well (the thread ends). */
static int cancel_admitted(nf_sched *s, size_t n_active)
{
	int empty;
	finish_all(s, n_active, "cancelled");
	pthread_mutex_lock(&s->mu);
	s->n_active = 0;
	empty = !s->q_head;
	pthread_mutex_unlock(&s->mu);
	return empty;
}

/* Drop the jobs whose clients went away, give new ones a sequence (a job
 * that cannot have one ends in "error"); returns the jobs left. */
static size_t drop_cancelled(nf_sched *s, size_t n_active)
{
	size_t n = 0;
	for (size_t i = 0; i < n_active; i++) {
		nf_job *j = s->active[i];
		int cancelled;
		pthread_mutex_lock(&j->mu);
		cancelled = j->cancelled;
		pthread_mutex_unlock(&j->mu);
		if (!cancelled && !j->seq && job_start(s, j) < 0) {
			job_finish(s, j, "error");
			cancelled = 2;
		}
		if (cancelled) {
			if (cancelled == 1)
				job_finish(s, j, "cancelled");
			job_unref(j);
			continue;
		}
		s->active[n++] = j;
	}
	return n;
}

/* Hand the step's logits rows to their jobs: a prompt chunk that is not
 * the last only moves the job on; the others draw their tokens
 * (job_take_rows), *emitted counting them.  Jobs that ended leave
 * active[]; returns the jobs left. */
static size_t take_step_rows(nf_sched *s, size_t n_active, size_t nb, int *emitted)
{
	size_t vocab = (size_t)nf_engine_config(s->engine)->vocab_size, row = 0, n = 0;
	double now = nf_sched_now();
	*emitted = 0;
	for (size_t k = 0; k < nb; k++) {
		nf_job *j = s->active[s->b_job[k]];
		int over = 0;
		if (j->pos < j->n_prompt && j->pos + s->b_ntok[k] < j->n_prompt)
			j->pos += s->b_ntok[k]; /* a prompt chunk that is not the last */
		else
			over = job_take_rows(s, j, s->logits + row * vocab, now, emitted);
		row += (size_t)s->b_rows[k];
		if (over) {
			job_unref(j);
			s->active[s->b_job[k]] = NULL;
		}
	}
	for (size_t i = 0; i < n_active; i++)
		if (s->active[i])
			s->active[n++] = s->active[i];
	return n;
}

/* What a step cost: its engine time to the prompt-chunk model (only kept
 * when used), and a decode-only step's whole time (drafting and sampling
 * included) per token emitted to the speculation governor. */
static void record_step_cost(nf_sched *s, size_t nb, double engine_s, double step_s, int emitted)
{
	if (s->opts.prefill_slack_pct > 0) {
		int tokens = 0;
		for (size_t k = 0; k < nb; k++)
			tokens += s->b_ntok[k];
		nf_stepcost_add(&s->cost, tokens, engine_s);
	}
	if (!s->opts.spec_adaptive || s->opts.spec_k == 0 || s->step_prompt > 0 ||
	    s->step_decode == 0)
		return;
	nf_spec_gov_add(&s->gov, s->step_decode, s->step_drafting, step_s, emitted);
	double with = nf_spec_gov_cost(&s->gov, s->step_decode, 1);
	double without = nf_spec_gov_cost(&s->gov, s->step_decode, 0);
	/* the gauges show a batch size whose two costs are both known */
	if (s->metrics && with > 0.0 && without > 0.0)
		nf_metrics_spec_costs(s->metrics, s->gov.paused_steps, with, without);
}

/* One step over active[0, n_active): lay it out, run it, hand out its
 * rows.  Returns the jobs left (none after an engine error: they all end
 * in "error"). */
static size_t run_step(nf_sched *s, size_t n_active)
{
	size_t nb = 0;
	int emitted = 0, rc;
	double t0 = nf_sched_now(), t_engine;
	build_step(s, n_active, &nb);
	if (nb == 0)
		return n_active;
	t_engine = nf_sched_now();
	rc = nf_engine_step_ragged_rows(s->engine, s->b_seqs, s->b_tokens, s->b_ntok, s->b_pos,
					s->b_rows, nb, s->logits);
	t_engine = nf_sched_now() - t_engine;
	if (rc < 0) {
		finish_all(s, n_active, "error");
		return 0;
	}
	n_active = take_step_rows(s, n_active, nb, &emitted);
	record_step_cost(s, nb, t_engine, nf_sched_now() - t0, emitted);
	return n_active;
}

/* After a step: the gauges, and a wake-up for whoever waits on the
 * scheduler; then the test-only delay. */
static void step_done(nf_sched *s, size_t n_active)
{
	pthread_mutex_lock(&s->mu);
	s->n_active = n_active;
	if (s->metrics)
		nf_metrics_set_gauges(s->metrics, s->n_queued, n_active, -1);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	if (s->opts.step_delay_us > 0 && n_active) {
		struct timespec ts = {s->opts.step_delay_us / 1000000,
				      (long)(s->opts.step_delay_us % 1000000) * 1000};
		nanosleep(&ts, NULL);
	}
}

static void *sched_main(void *arg)
{
	nf_sched *s = arg;
	size_t n_active = 0;
	for (;;) {
		if (admit_queued(s, &n_active)) {
			int empty = cancel_admitted(s, n_active);
			n_active = 0;
			if (empty)
				break;
			continue;
		}
		n_active = drop_cancelled(s, n_active);
		n_active = run_step(s, n_active);
		step_done(s, n_active);
	}
	return NULL;
}

/* The tokens that end a generation (EOS, end-of-turn, BOS), found once
 * in the vocabulary: min_tokens masks them. */
static int end_tokens(nf_sched *s)
{
	const nf_tokenizer *tok = nf_engine_tokenizer(s->engine);
	int vocab = nf_engine_config(s->engine)->vocab_size;
	for (int pass = 0; pass < 2; pass++) {
		size_t n = 0;
		for (int t = 0; t < vocab; t++)
			if (nf_tokenizer_is_eog(tok, t) || t == nf_tokenizer_bos(tok)) {
				if (pass)
					s->eog[n] = t;
				n++;
			}
		if (!pass && n && !(s->eog = calloc(n, sizeof *s->eog)))
			return NF_ENOMEM;
		s->n_eog = pass ? n : 0;
	}
	return 0;
}

/* Speculation's options: k in range, and a draft engine that can draft
 * for e (its vocabulary, and at least its context). */
static int check_spec_opts(const nf_sched_opts *o, nf_engine *e)
{
	const nf_model_config *c = nf_engine_config(e), *d;
	if (o->spec_k < 0 || o->spec_k > NF_SPEC_MAX_K ||
	    (o->spec_k && !o->spec_draft && (o->spec_ngram < 1 || o->spec_ngram > 8)))
		return nf_error_set(NF_EINPUT, "speculative decoding: 0..%d drafts and n-grams of 1..8",
				    NF_SPEC_MAX_K);
	if (!o->spec_draft)
		return 0;
	d = nf_engine_config(o->spec_draft);
	if (o->spec_k < 1)
		return nf_error_set(NF_EINPUT, "speculative decoding: a draft engine needs 1..%d drafts",
				    NF_SPEC_MAX_K);
	if (d->vocab_size != c->vocab_size || d->max_seq_len < c->max_seq_len)
		return nf_error_set(NF_EINPUT, "speculative decoding: the draft engine has a vocabulary of "
				    "%d and a context of %d; the model %d and %d (the vocabulary must be "
				    "the same, the context at least as long)", d->vocab_size, d->max_seq_len,
				    c->vocab_size, c->max_seq_len);
	return 0;
}

/* The draft engine's step buffers (none without one). */
static int draft_buffers_new(nf_sched *s)
{
	size_t batch = (size_t)s->opts.max_batch, logits;
	if (!s->opts.spec_draft)
		return 0;
	if (!nf_size_mul(&logits, batch, (size_t)nf_engine_config(s->engine)->vocab_size))
		return NF_ENOMEM;
	s->d_seqs = calloc(batch, sizeof *s->d_seqs);
	s->d_tokens = calloc(batch * (NF_SPEC_MAX_K + 1), sizeof *s->d_tokens);
	s->d_ntok = calloc(batch, sizeof *s->d_ntok);
	s->d_pos = calloc(batch, sizeof *s->d_pos);
	s->d_job = calloc(batch, sizeof *s->d_job);
	s->d_k = calloc(batch, sizeof *s->d_k);
	s->d_logits = calloc(logits, sizeof *s->d_logits);
	return s->d_seqs && s->d_tokens && s->d_ntok && s->d_pos && s->d_job && s->d_k &&
	       s->d_logits ? 0 : NF_ENOMEM;
}

int nf_sched_new(nf_sched **out, nf_engine *e, nf_metrics *m, const nf_sched_opts *o)
{
	nf_sched *s = NULL;
	size_t vocab = (size_t)nf_engine_config(e)->vocab_size, nl, cap, rows;
	int rc;
	*out = NULL;
	if (o->max_batch < 1 || o->max_batch > 4096 || o->max_queue < 0 || o->max_queue > 65536)
		return nf_error_set(NF_EINPUT, "max_batch must be 1..4096 and max_queue 0..65536");
	cap = (size_t)o->max_batch + (size_t)o->max_queue;
	if ((rc = check_spec_opts(o, e)) < 0)
		return rc;
	s = calloc(1, sizeof *s);
	rows = (size_t)o->max_batch * (size_t)(o->spec_k + 1); /* a step's logits rows at most */
	if (!s || !nf_size_mul(&nl, rows, vocab)) {
		rc = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	s->engine = e;
	s->metrics = m;
	s->opts = *o;
	nf_spec_gov_init(&s->gov);
	for (int c = 0; c < NF_SPEC_GOV_CLASSES; c++)
		s->gov_told[c] = -1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->active = calloc(cap, sizeof *s->active);
	s->logits = calloc(nl, sizeof *s->logits);
	s->b_seqs = calloc((size_t)o->max_batch, sizeof *s->b_seqs);
	s->b_tokens = calloc(rows + NF_FWD_PASS_TOKENS, sizeof *s->b_tokens);
	s->b_rows = calloc((size_t)o->max_batch, sizeof *s->b_rows);
	s->ctx = calloc((size_t)nf_engine_config(e)->max_seq_len, sizeof *s->ctx);
	s->b_ntok = calloc((size_t)o->max_batch, sizeof *s->b_ntok);
	s->b_pos = calloc((size_t)o->max_batch, sizeof *s->b_pos);
	s->b_job = calloc((size_t)o->max_batch, sizeof *s->b_job);
	s->lp_row = calloc(vocab, sizeof *s->lp_row);
	if (!s->active || !s->logits || !s->b_seqs || !s->b_tokens || !s->b_ntok || !s->b_pos ||
	    !s->b_job || !s->b_rows || !s->ctx || !s->lp_row || end_tokens(s) < 0 ||
	    draft_buffers_new(s) < 0) {
		rc = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	/* a finished request's KV cache goes to the next one (engine.h) */
	if ((rc = nf_engine_keep_sequences(e, (size_t)o->max_batch)) ||
	    (o->spec_draft && (rc = nf_engine_keep_sequences(o->spec_draft, (size_t)o->max_batch))))
		goto done;
	if (pthread_create(&s->thread, NULL, sched_main, s) != 0) {
		rc = nf_error_set(NF_EENV, "cannot start the scheduler thread");
		goto done;
	}
	s->started = 1;
	*out = s;
	s = NULL;
	rc = 0;
done:
	nf_sched_free(s);
	return rc;
}

void nf_sched_free(nf_sched *s)
{
	if (!s)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->mu);
		s->stopping = 1;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->thread, NULL);
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
	} else if (s->active) {
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
	}
	free(s->active);
	free(s->logits);
	free(s->b_seqs);
	free(s->b_tokens);
	free(s->b_ntok);
	free(s->b_pos);
	free(s->b_job);
	free(s->b_rows);
	free(s->ctx);
	free(s->lp_row);
	free(s->eog);
	free(s->d_seqs);
	free(s->d_tokens);
	free(s->d_ntok);
	free(s->d_pos);
	free(s->d_job);
	free(s->d_k);
	free(s->d_logits);
	free(s);
}

/* The job's sampler and what the scheduler does beside it (min_tokens,
 * stop ids, logprobs); needs j->tokens. */
static int job_sampling_init(nf_job *j, nf_sched *s, const nf_job_params *p)
{
	int vocab = nf_engine_config(s->engine)->vocab_size, rc;
	if (p->n_stop_ids > 4096 || p->top_logprobs < 0 || p->top_logprobs > NF_SAMPLING_MAX_TOP)
		return nf_error_set(NF_EINPUT, "too many stop ids or top logprobs");
	for (size_t i = 0; i < p->n_stop_ids; i++)
		if (p->stop_ids[i] < 0 || p->stop_ids[i] >= vocab)
			return nf_error_set(NF_EINPUT, "stop token %d is not in the vocabulary", p->stop_ids[i]);
	if ((rc = nf_sampler_init(&j->sampler, vocab, p->temperature, p->top_p, p->seed)) < 0)
		return rc;
	j->have_sampler = 1;
	if (p->sampling && ((rc = nf_sampler_configure(&j->sampler, p->sampling)) < 0 ||
			    (rc = nf_sampler_set_prompt(&j->sampler, j->tokens, (size_t)j->n_prompt)) < 0))
		return rc;
	if (p->n_stop_ids) {
		if (!(j->stop_ids = malloc(p->n_stop_ids * sizeof *j->stop_ids)))
			return nf_error_set(NF_ENOMEM, "out of memory");
		memcpy(j->stop_ids, p->stop_ids, p->n_stop_ids * sizeof *j->stop_ids);
		j->n_stop_ids = p->n_stop_ids;
	}
	if (p->guide) {
		j->guide = nf_guide_retain(p->guide);
		if ((rc = nf_guide_state_new(&j->gstate, j->guide)) < 0)
			return rc;
		if (!(j->gmask = calloc(nf_guide_mask_words(j->guide), sizeof *j->gmask)))
			return nf_error_set(NF_ENOMEM, "out of memory");
	}
	j->min_tokens = p->min_tokens;
	/* a grammar decides where the answer ends */
	j->ignore_eos = p->ignore_eos && !p->guide;
	j->want_logprobs = p->logprobs;
	j->top_logprobs = p->top_logprobs;
	j->want_prompt_logprobs = p->prompt_logprobs;
	return 0;
}

int nf_sched_submit(nf_job **out, nf_sched *s, const int *tokens, size_t n_tokens,
		    const nf_job_params *p)
{
	nf_job *j = NULL;
	int max_seq = nf_engine_config(s->engine)->max_seq_len;
	int rc;
	*out = NULL;
	if (n_tokens < 1 || n_tokens >= (size_t)max_seq)
		return nf_error_set(NF_EINPUT, "prompt of %zu tokens does not fit a context of %d",
				    n_tokens, max_seq);
	if (p->n_stop > 8)
		return nf_error_set(NF_EINPUT, "too many stop strings");
	j = calloc(1, sizeof *j);
	if (!j)
		return nf_error_set(NF_ENOMEM, "out of memory");
	pthread_mutex_init(&j->mu, NULL);
	pthread_cond_init(&j->cv, NULL);
	j->refs = 2; /* the caller's and the scheduler's */
	j->res.ttft = -1;
	j->t_arrival = p->t_arrival;
	j->n_prompt = (int)n_tokens;
	j->max_tokens = p->max_tokens < 1 ? 1 : p->max_tokens;
	for (size_t i = 0; i < p->n_stop; i++) {
		if (!(j->stop[i] = strdup(p->stop[i]))) {
			j->refs = 1;
			rc = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
		j->n_stop++;
	}
	nf_textstream_init(&j->text, j->stop, j->n_stop, NF_JOB_MAX_TEXT);
	j->tokens = malloc(n_tokens * sizeof *j->tokens);
	if (!j->tokens) {
		j->refs = 1;
		rc = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	memcpy(j->tokens, tokens, n_tokens * sizeof *j->tokens);
	if ((rc = job_sampling_init(j, s, p)) < 0) {
		j->refs = 1;
		goto done;
	}
	pthread_mutex_lock(&s->mu);
	if (s->draining || s->stopping) {
		pthread_mutex_unlock(&s->mu);
		j->refs = 1;
		rc = nf_error_set(NF_EUNSUPPORTED, "the server is shutting down");
		goto done;
	}
	/* full: every batch slot taken and max_queue already waiting */
	if (s->n_queued >= (size_t)s->opts.max_queue &&
	    s->n_active + s->n_queued >= (size_t)s->opts.max_batch) {
		pthread_mutex_unlock(&s->mu);
		j->refs = 1;
		rc = nf_error_set(NF_EENV, "the request queue is full (%d waiting)", s->opts.max_queue);
		goto done;
	}
	if (s->q_tail)
		s->q_tail->next = j;
	else
		s->q_head = j;
	s->q_tail = j;
	s->n_queued++;
	if (s->metrics)
		nf_metrics_set_gauges(s->metrics, s->n_queued, s->n_active, -1);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	*out = j;
	j = NULL;
	rc = 0;
done:
	job_unref(j);
	return rc;
}

void nf_sched_drain(nf_sched *s)
{
	pthread_mutex_lock(&s->mu);
	s->draining = 1;
	pthread_mutex_unlock(&s->mu);
}

size_t nf_sched_load(nf_sched *s)
{
	size_t n;
	pthread_mutex_lock(&s->mu);
	n = s->n_queued + s->n_active;
	pthread_mutex_unlock(&s->mu);
	return n;
}

int nf_job_next(nf_job *j, nf_sbuf *out, int *finished, int timeout_ms)
{
	struct timespec dl;
	size_t n;
	int rc = 0;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&j->mu);
	while (!j->finished && nf_textstream_ready(&j->text, 0) == 0)
		if (pthread_cond_timedwait(&j->cv, &j->mu, &dl) == ETIMEDOUT)
			break;
	n = nf_textstream_ready(&j->text, j->finished);
	if (n) {
		rc = nf_sbuf_add_utf8(out, j->text.buf + j->text.released, n);
		j->text.released += n;
	}
	*finished = j->finished && j->text.released == j->text.len;
	pthread_mutex_unlock(&j->mu);
	return rc;
}

int nf_job_poll(nf_job *j, nf_sbuf *out, int *finished, int *parked, nf_job_park_fn park,
		nf_job_wake_fn wake, void *arg)
{
	size_t n;
	int rc = 0;
	*parked = 0;
	pthread_mutex_lock(&j->mu);
	n = out ? nf_textstream_ready(&j->text, j->finished) : 0;
	if (n) {
		rc = nf_sbuf_add_utf8(out, j->text.buf + j->text.released, n);
		j->text.released += n;
	}
	*finished = j->finished && (!out || j->text.released == j->text.len);
	if (rc == 0 && !n && !j->finished && park(arg)) {
		j->wake = wake;
		j->wake_arg = arg;
		j->wake_at_end = !out;
		*parked = 1;
	}
	pthread_mutex_unlock(&j->mu);
	return rc;
}

void nf_job_kick(nf_job *j)
{
	pthread_mutex_lock(&j->mu);
	job_signal(j, 0);
	pthread_mutex_unlock(&j->mu);
}

void nf_job_unpark(nf_job *j)
{
	pthread_mutex_lock(&j->mu);
	j->wake = NULL;
	j->wake_arg = NULL;
	pthread_mutex_unlock(&j->mu);
}

void nf_job_get_result(nf_job *j, nf_job_result *r)
{
	pthread_mutex_lock(&j->mu);
	*r = j->res;
	if (!r->finish_reason)
		r->finish_reason = "error";
	pthread_mutex_unlock(&j->mu);
}

void nf_job_cancel(nf_job *j)
{
	if (!j)
		return;
	pthread_mutex_lock(&j->mu);
	j->cancelled = 1;
	pthread_mutex_unlock(&j->mu);
}

size_t nf_job_copy_logprobs(nf_job *j, size_t from, nf_token_logprob *out, size_t max)
{
	size_t n = 0;
	pthread_mutex_lock(&j->mu);
	if (from < j->n_lp) {
		n = j->n_lp - from < max ? j->n_lp - from : max;
		memcpy(out, j->lp + from, n * sizeof *out);
	}
	pthread_mutex_unlock(&j->mu);
	return n;
}

const nf_token_logprob *nf_job_final_logprobs(nf_job *j, int prompt, size_t *n)
{
	pthread_mutex_lock(&j->mu);
	*n = !j->finished ? 0 : prompt ? j->n_plp : j->n_lp;
	pthread_mutex_unlock(&j->mu);
	return *n ? (prompt ? j->plp : j->lp) : NULL;
}
