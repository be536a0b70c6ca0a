/* gate_reference.c - the float32 reference of the correctness gates, once per build (see gate_reference.h). */
#define _GNU_SOURCE
#include "factory/gate_reference.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/cpu/cpu.h"
#include "engine/forward.h"
#include "engine/generate.h"
#include "engine/safetensors.h" /* nf_f32_to_f16 */
#include "factory/eval_text.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define REF_FILE "gate-reference.logits"
#define REF_STAGE "gate"

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The running float32 model and the file its rows go to. */
typedef struct ref_run {
	nf_gate_ref *r;
	nf_fwd_weights w;
	nf_fwd *f;
	nf_fwd_kv kv;
	float *logits;   /* (NF_FWD_PASS_TOKENS, vocab) */
	uint16_t *half;  /* (vocab) a row in IEEE half */
	int fd;
	nf_log *log;
	uint64_t done, total; /* rows, for progress */
} ref_run;

static int write_row(ref_run *run, const float *row)
{
	size_t vocab = (size_t)run->r->cfg.vocab_size;
	const void *data = row;
	size_t bytes = vocab * sizeof(float);
	if (run->r->half) {
		for (size_t i = 0; i < vocab; i++)
			run->half[i] = nf_f32_to_f16(row[i]);
		data = run->half;
		bytes = vocab * sizeof(uint16_t);
	}
	int err = nf_fs_write_all(run->fd, data, bytes, run->r->path);
	if (!err) {
		run->r->n_rows++;
		nf_log_progress(run->log, REF_STAGE, ++run->done, run->total);
	}
	return err;
}

/* The tokens the tokenizer puts in front of any text (BOS, or nothing). */
static int text_prefix(const nf_tokenizer *tok, int **out, size_t *n)
{
	return nf_tokenizer_encode(tok, "", 0, NF_TOK_ADD_SPECIAL, out, n);
}

/* Cut the evaluation text into windows of at most max_seq_len tokens. */
static int make_windows(nf_gate_ref *r, const nf_tokenizer *tok, const nf_gate_ref_opts *o)
{
	const char *text = o->eval_text ? o->eval_text : nf_eval_text_default();
	size_t len = o->eval_text ? o->eval_len : nf_eval_text_default_len();
	int *body = NULL, *pre = NULL;
	size_t nb = 0, np = 0, per, n_win, at = 0;
	int err;

	if ((err = nf_tokenizer_encode(tok, text, len, 0, &body, &nb)) ||
	    (err = text_prefix(tok, &pre, &np)))
		goto done;
	if (nb > (size_t)o->eval_tokens)
		nb = (size_t)o->eval_tokens;
	per = (size_t)r->cfg.max_seq_len > np + 1 ? (size_t)r->cfg.max_seq_len - np : 0;
	if (nb + np < 2 || per == 0) {
		err = nf_error_set(NF_EINPUT, "evaluation text: %zu tokens, too few to evaluate "
				   "(context %d)", nb, r->cfg.max_seq_len);
		goto done;
	}
	n_win = (nb + per - 1) / per;
	r->eval_tokens = calloc(nb + n_win * np, sizeof(int));
	r->windows = calloc(n_win, sizeof(*r->windows));
	if (!r->eval_tokens || !r->windows) {
		err = nf_error_set(NF_ENOMEM, "out of memory for the evaluation windows");
		goto done;
	}
	for (size_t used = 0; used < nb; used += per) {
		size_t take = nb - used < per ? nb - used : per;
		nf_gate_ref_window *w = &r->windows[r->n_windows];
		if (np + take < 2)
			break; /* a last lone token without BOS predicts nothing */
		memcpy(r->eval_tokens + at, pre, np * sizeof(int));
		memcpy(r->eval_tokens + at + np, body + used, take * sizeof(int));
		w->tokens = r->eval_tokens + at;
		w->n_tokens = (int)(np + take);
		at += np + take;
		r->text_tokens += take;
		r->n_windows++;
	}
done:
	free(body);
	free(pre);
	return err;
}

/* Rows for positions 0 .. n-2 of each window: one prefill of its first
 * n - 1 tokens, NF_FWD_PASS_TOKENS rows at a time. */
static int run_windows(ref_run *run)
{
	nf_gate_ref *r = run->r;
	size_t vocab = (size_t)r->cfg.vocab_size;
	int err = 0;
	for (size_t i = 0; !err && i < r->n_windows; i++) {
		nf_gate_ref_window *w = &r->windows[i];
		w->first_row = r->n_rows;
		for (int at = 0; !err && at < w->n_tokens - 1; at += NF_FWD_PASS_TOKENS) {
			int k = w->n_tokens - 1 - at;
			if (k > NF_FWD_PASS_TOKENS)
				k = NF_FWD_PASS_TOKENS;
			err = nf_fwd_prefill_logits(run->f, &run->kv, w->tokens + at, (size_t)k, at,
						    run->logits);
			for (int b = 0; !err && b < k; b++)
				err = write_row(run, run->logits + (size_t)b * vocab);
		}
	}
	return err;
}

/* A prompt's greedy continuation, one decode step per token, and its rows. */
static int run_prompt(ref_run *run, const nf_tokenizer *tok, const char *prompt, int max_tokens,
		      nf_gate_ref_prompt *p)
{
	const nf_model_config *c = &run->r->cfg;
	int *toks = NULL;
	size_t nt = 0;
	int err;

	/* a gate prompt is model input: control tokens written in it are tokens */
	if ((err = nf_tokenizer_encode(tok, prompt, strlen(prompt),
				       NF_TOK_ADD_SPECIAL | NF_TOK_PARSE_SPECIAL, &toks, &nt)))
		return err;
	if (nt == 0 || nt >= (size_t)c->max_seq_len) {
		free(toks);
		return nf_error_set(NF_EINPUT, "gate prompt: %zu tokens do not fit the model's context of %d",
				    nt, c->max_seq_len);
	}
	/* room for the continuation after the prompt, within the context */
	size_t room = (size_t)c->max_seq_len - nt + 1;
	size_t cap = nt + ((size_t)max_tokens < room ? (size_t)max_tokens : room);
	int *all = realloc(toks, cap * sizeof(int));
	if (!all) {
		free(toks);
		return nf_error_set(NF_ENOMEM, "out of memory for a gate prompt");
	}
	p->tokens = all;
	if (!(p->text = strdup(prompt)))
		return nf_error_set(NF_ENOMEM, "out of memory for a gate prompt");
	p->n_prompt = (int)nt;
	p->first_row = run->r->n_rows;
	int n = (int)nt, pos0 = 0;
	err = nf_fwd_step_ragged(run->f, (nf_fwd_kv *const[]){&run->kv}, all, &n, &pos0, 1,
				 run->logits);
	for (size_t at = nt; !err && at < cap; at++) {
		int next = nf_argmax(run->logits, c->vocab_size), pos = (int)at;
		if ((err = write_row(run, run->logits)))
			break;
		all[at] = next;
		p->n_continued++;
		if (at + 1 == cap || nf_tokenizer_is_eog(tok, next) || next == nf_tokenizer_bos(tok))
			break;
		err = nf_fwd_step(run->f, (nf_fwd_kv *const[]){&run->kv}, &next, &pos, 1, run->logits);
	}
	return err;
}

static int ref_run_open(ref_run *run, const nf_model *m, const nf_gate_ref_opts *o)
{
	nf_gate_ref *r = run->r;
	size_t vocab = (size_t)m->cfg.vocab_size;
	int err;
	if ((err = nf_fwd_weights_from_model(&run->w, m)) ||
	    (err = nf_fwd_weights_prepare(&run->w, &m->cfg)) ||
	    (err = nf_fwd_new(&run->f, &r->cfg, &run->w, nf_cpu_best(), o->threads)) ||
	    (err = nf_fwd_kv_init(&run->kv, &r->cfg, 0)))
		return err;
	run->logits = calloc((size_t)NF_FWD_PASS_TOKENS * vocab, sizeof(float));
	run->half = calloc(vocab, sizeof(uint16_t));
	if (!run->logits || !run->half)
		return nf_error_set(NF_ENOMEM, "out of memory for the gate reference");
	if (!(r->path = nf_path_join(o->tmp_dir, REF_FILE)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	run->fd = open(r->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (run->fd < 0)
		return nf_error_set(NF_EIO, "%s: cannot create the gate reference's logits", r->path);
	return 0;
}

static void ref_run_close(ref_run *run)
{
	if (run->fd >= 0)
		close(run->fd);
	nf_fwd_kv_release(&run->kv);
	nf_fwd_free(run->f);
	nf_fwd_weights_release(&run->w);
	free(run->logits);
	free(run->half);
}

static int check_opts(const nf_gate_ref_opts *o)
{
	if (!o || !o->tmp_dir || o->eval_tokens < 2 || (o->n_prompts && (!o->prompts || o->max_tokens < 1)) ||
	    (o->eval_text && !o->eval_len))
		return nf_error_set(NF_EINPUT, "gate reference: need a folder, eval_tokens >= 2, a "
				    "non-empty text, and max_tokens >= 1 with prompts");
	return 0;
}

/* Rows of the evaluation and the prompts, as an upper bound. */
static uint64_t row_bytes_bound(const nf_gate_ref *r, const nf_gate_ref_opts *o)
{
	uint64_t rows = 0, bytes = 0;
	if (!nf_u64_mul(&rows, o->n_prompts, (uint64_t)o->max_tokens) ||
	    !nf_u64_add(&rows, rows, r->text_tokens + r->n_windows) ||
	    !nf_u64_mul(&bytes, rows, (uint64_t)r->cfg.vocab_size * sizeof(float)))
		return UINT64_MAX;
	return bytes;
}

int nf_gate_ref_new(nf_gate_ref **out, const nf_model *m, const nf_tokenizer *tok,
		    const nf_gate_ref_opts *o, nf_log *log)
{
	nf_gate_ref *r = NULL;
	ref_run run = {.fd = -1, .log = log};
	double t0 = now_seconds();
	int err;

	*out = NULL;
	if ((err = check_opts(o)))
		return err;
	if (!(r = calloc(1, sizeof(*r))) ||
	    (o->n_prompts && !(r->prompts = calloc(o->n_prompts, sizeof(*r->prompts))))) {
		err = nf_error_set(NF_ENOMEM, "out of memory for the gate reference");
		goto done;
	}
	r->cfg = m->cfg;
	run.r = r;
	if ((err = make_windows(r, tok, o)))
		goto done;
	r->half = row_bytes_bound(r, o) > (o->f32_max_bytes ? o->f32_max_bytes : NF_GATE_REF_F32_MAX);
	run.total = r->text_tokens + (uint64_t)o->n_prompts * (uint64_t)o->max_tokens;
	if ((err = ref_run_open(&run, m, o)) || (err = run_windows(&run)))
		goto done;
	for (size_t i = 0; !err && i < o->n_prompts; i++) {
		r->n_prompts = i + 1;
		err = run_prompt(&run, tok, o->prompts[i] ? o->prompts[i] : "", o->max_tokens,
				 &r->prompts[i]);
		if (err)
			nf_error_wrap(err, "gate prompt %zu", i + 1);
	}
	if (!err && close(run.fd) < 0)
		err = nf_error_set(NF_EIO, "%s: cannot write the gate reference's logits", r->path);
	run.fd = -1;
	if (!err)
		err = nf_fs_map_file(&r->map, &r->map_size, r->path);
	r->seconds = now_seconds() - t0;
done:
	ref_run_close(&run);
	if (err) {
		nf_gate_ref_free(r);
		return err;
	}
	*out = r;
	return 0;
}

void nf_gate_ref_free(nf_gate_ref *r)
{
	if (!r)
		return;
	nf_fs_unmap_file(r->map, r->map_size);
	if (r->path && !r->keep_file)
		unlink(r->path);
	free(r->path);
	for (size_t i = 0; i < r->n_prompts; i++) {
		free(r->prompts[i].tokens);
		free(r->prompts[i].text);
	}
	free(r->prompts);
	free(r->windows);
	free(r->eval_tokens);
	free(r);
}

const float *nf_gate_ref_row(const nf_gate_ref *r, size_t row, float *scratch)
{
	size_t vocab = (size_t)r->cfg.vocab_size;
	if (!r->half)
		return (const float *)r->map + row * vocab;
	const uint16_t *h = (const uint16_t *)r->map + row * vocab;
	for (size_t i = 0; i < vocab; i++)
		scratch[i] = nf_f16_to_f32(h[i]);
	return scratch;
}
