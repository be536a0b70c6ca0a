/* test_sched.c - the batching scheduler on stories260K: concurrent greedy
 * jobs of different lengths each equal nf_generate's text, stop strings cut,
 * cancellation frees the slot, the queue bound and draining refuse. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/checkpoint.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "serve/sched.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

typedef struct acc {
	char buf[8192];
	size_t len;
} acc;

static int collect(void *user, int token, const char *piece, size_t len)
{
	acc *a = user;
	(void)token;
	if (a->len + len < sizeof a->buf) {
		memcpy(a->buf + a->len, piece, len);
		a->len += len;
		a->buf[a->len] = '\0';
	}
	return 0;
}

static nf_job *submit(nf_sched *s, nf_engine *e, const char *prompt, int max_tokens, char **stop,
		      size_t n_stop, int *rc)
{
	int *toks = NULL;
	size_t n = 0;
	nf_job *j = NULL;
	nf_job_params p;
	memset(&p, 0, sizeof p);
	p.max_tokens = max_tokens;
	p.temperature = 0;
	p.top_p = 1;
	p.stop = stop;
	p.n_stop = n_stop;
	p.t_arrival = nf_sched_now();
	*rc = nf_tokenizer_encode(nf_engine_tokenizer(e), prompt, strlen(prompt), NF_TOK_ADD_BOS, &toks, &n);
	if (*rc == 0)
		*rc = nf_sched_submit(&j, s, toks, n, &p);
	free(toks);
	return j;
}

static char *finish(nf_job *j, nf_job_result *r)
{
	nf_sbuf b;
	int fin = 0;
	nf_sbuf_init(&b, 1 << 20);
	while (!fin)
		if (nf_job_next(j, &b, &fin, 5000) < 0)
			break;
	nf_job_get_result(j, r);
	return nf_sbuf_detach(&b, NULL);
}

int main(void)
{
	const char *shared = tap_env("NF_SHARED", "/work/shared");
	char *ckpt = nf_strdup_printf("%s/models/stories260K/stories260K.bin", shared);
	char *tok = nf_strdup_printf("%s/models/stories260K/tok512.bin", shared);
	char dir[] = "/tmp/nf-test-sched-XXXXXX";
	char *edir = NULL;
	nf_model *m = NULL;
	nf_engine *e = NULL;
	nf_sched *s = NULL;
	nf_metrics *met = NULL;
	nf_engine_build_opts bo;
	nf_sched_opts so;
	static const char *prompts[] = {"Once upon", "The dog", "", "Lily and Tom went to the park and"};
	static const int lens[] = {50, 7, 80, 33};
	nf_job *jobs[4];
	static acc want[4];
	int rc;

	if (!nf_fs_exists(ckpt)) {
		skip("no stories260K model under %s", shared);
		return done_testing();
	}
	ok(mkdtemp(dir) != NULL, "temp dir");
	edir = nf_path_join(dir, "engine");
	memset(&bo, 0, sizeof bo);
	bo.precision = NF_PREC_FP32;
	bo.tokenizer_path = tok;
	bo.threads = 1;
	is_int(nf_ckpt_load(&m, ckpt, NF_CKPT_LLAMA2C), 0, "load checkpoint");
	is_int(nf_engine_build(edir, m, &bo), 0, "build engine: %s", nf_error_last());
	is_int(nf_engine_open(&e, edir, 1), 0, "open engine");
	nf_metrics_new(&met);
	memset(&so, 0, sizeof so);
	so.prefix_cache = 1;
	so.max_batch = 3; /* fewer slots than jobs: one waits and joins between steps */
	so.max_queue = 8;
	so.step_delay_us = 0;
	is_int(nf_sched_new(&s, e, met, &so), 0, "scheduler");

	/* references first: the engine takes one caller at a time */
	for (int i = 0; i < 4; i++) {
		nf_gen_params gp = {.max_tokens = lens[i], .top_p = 1.0f, .stop_at_eos = 1};
		nf_generate(e, prompts[i], strlen(prompts[i]), &gp, collect, &want[i], NULL);
	}
	for (int i = 0; i < 4; i++) {
		jobs[i] = submit(s, e, prompts[i], lens[i], NULL, 0, &rc);
		is_int(rc, 0, "submit job %d", i);
	}
	for (int i = 0; i < 4; i++) {
		nf_job_result r;
		char *got = jobs[i] ? finish(jobs[i], &r) : NULL;
		is_str(got, want[i].buf, "batched job %d equals nf_generate", i);
		ok(jobs[i] && r.completion_tokens <= lens[i] && r.prompt_tokens >= 1, "job %d usage %d+%d", i,
		   r.prompt_tokens, r.completion_tokens);
		free(got);
		nf_job_release(jobs[i]);
	}
	{
		char *stop[] = {"little"};
		nf_job_result r;
		nf_job *j = submit(s, e, "Once upon", 60, stop, 1, &rc);
		char *got = j ? finish(j, &r) : NULL;
		ok(got && !strstr(got, "little") && strlen(got) > 0, "stop string cut: '%s'", got ? got : "");
		is_str(r.finish_reason, "stop", "finish_reason stop");
		free(got);
		nf_job_release(j);
	}
	{
		nf_job *j = submit(s, e, "Once", 400, NULL, 0, &rc);
		nf_job_result r;
		char *got;
		nf_job_cancel(j);
		got = finish(j, &r);
		ok(!strcmp(r.finish_reason, "cancelled") || r.completion_tokens < 400, "cancelled job ends early (%s, %d)",
		   r.finish_reason, r.completion_tokens);
		free(got);
		nf_job_release(j);
	}
	{
		/* long prompts (past one 256-token forward pass) join a running
		 * batch: they are prefilled in chunks beside the decode tokens and
		 * still equal nf_generate; the two share the per-step budget */
		static acc want_run, want_long[2];
		char *longp[2] = {NULL, NULL};
		nf_gen_params gp_run = {.max_tokens = 120, .top_p = 1.0f, .stop_at_eos = 1},
			      gp_long = {.max_tokens = 40, .top_p = 1.0f, .stop_at_eos = 1};
		nf_job *run, *lj[2] = {NULL, NULL};
		nf_sbuf b;
		int fin = 0;
		for (int k = 0; k < 2; k++) {
			nf_sbuf pb;
			nf_sbuf_init(&pb, 1 << 16);
			for (int r = 0; r < 40 - 12 * k; r++)
				nf_sbuf_add(&pb, k ? "The dog ran to the big red ball. " : "Lily and Tom went to the park. ",
					    k ? 33 : 31);
			longp[k] = nf_sbuf_detach(&pb, NULL);
		}
		nf_generate(e, "Once upon", 9, &gp_run, collect, &want_run, NULL);
		for (int k = 0; k < 2; k++)
			nf_generate(e, longp[k], strlen(longp[k]), &gp_long, collect, &want_long[k], NULL);
		run = submit(s, e, "Once upon", 120, NULL, 0, &rc);
		nf_sbuf_init(&b, 1 << 20);
		while (run && b.len == 0 && !fin) /* it is decoding */
			if (nf_job_next(run, &b, &fin, 5000) < 0)
				break;
		for (int k = 0; k < 2; k++)
			lj[k] = submit(s, e, longp[k], 40, NULL, 0, &rc);
		for (int k = 0; k < 2; k++) {
			nf_job_result r;
			char *got = lj[k] ? finish(lj[k], &r) : NULL;
			ok(lj[k] && r.prompt_tokens > 256, "long prompt %d has %d tokens (rc %d)", k,
			   lj[k] ? r.prompt_tokens : 0, rc);
			is_str(got, want_long[k].buf, "long prompt %d joining a running batch equals nf_generate", k);
			free(got);
			nf_job_release(lj[k]);
			free(longp[k]);
		}
		{
			nf_job_result r;
			char *got = run ? finish(run, &r) : NULL;
			if (got)
				nf_sbuf_adds(&b, got);
			is_str(b.len ? b.data : "", want_run.buf, "the running job, stepped beside the prefill, equals nf_generate");
			free(got);
			nf_sbuf_release(&b);
			nf_job_release(run);
		}
	}
	{
		/* prefix cache: of four identical prompts submitted together (three
		 * slots), the first computes the prompt and the others copy all of
		 * it but the last token, from the running one or from a kept
		 * sequence; every text still equals nf_generate */
		const char *p = "Lily and Tom went to the park and";
		static acc want_p;
		nf_gen_params gp = {.max_tokens = 30, .top_p = 1.0f, .stop_at_eos = 1};
		nf_job *pj[4];
		nf_generate(e, p, strlen(p), &gp, collect, &want_p, NULL);
		for (int k = 0; k < 4; k++)
			pj[k] = submit(s, e, p, 30, NULL, 0, &rc);
		for (int k = 0; k < 4; k++) {
			nf_job_result r;
			char *got = pj[k] ? finish(pj[k], &r) : NULL;
			is_str(got, want_p.buf, "shared-prefix job %d equals nf_generate", k);
			if (k > 0)
				ok(pj[k] && r.cached_tokens == r.prompt_tokens - 1,
				   "shared-prefix job %d: %d of its %d prompt tokens from the cache", k,
				   r.cached_tokens, r.prompt_tokens);
			free(got);
			nf_job_release(pj[k]);
		}
	}
	nf_sched_free(s);
	s = NULL;

	so.prefix_cache = 0;
	so.max_batch = 1;
	so.max_queue = 1;
	so.step_delay_us = 20000;
	is_int(nf_sched_new(&s, e, met, &so), 0, "small scheduler");
	{
		nf_job *a = submit(s, e, "Once", 50, NULL, 0, &rc), *b, *c;
		int rb, rcc;
		b = submit(s, e, "Once", 5, NULL, 0, &rb);
		c = submit(s, e, "Once", 5, NULL, 0, &rcc);
		ok(rb == NF_EENV || rcc == NF_EENV, "queue bound refuses with NF_EENV (%d %d)", rb, rcc);
		nf_sched_drain(s);
		{
			int rd;
			nf_job *d = submit(s, e, "Once", 5, NULL, 0, &rd);
			is_int(rd, NF_EUNSUPPORTED, "draining refuses new jobs");
			nf_job_release(d);
		}
		nf_sched_free(s); /* cancels the rest; jobs stay valid for their holders */
		s = NULL;
		if (a) {
			nf_job_result r;
			char *got = finish(a, &r);
			ok(r.finish_reason != NULL, "job finished after scheduler stop: %s", r.finish_reason);
			is_int(r.cached_tokens, 0, "prefix cache off: nothing reused");
			free(got);
		}
		nf_job_release(a);
		nf_job_release(b);
		nf_job_release(c);
	}
	nf_sched_free(s);
	nf_metrics_free(met);
	nf_engine_free(e);
	nf_model_free(m);
	nf_fs_remove_tree(dir);
	free(edir);
	free(ckpt);
	free(tok);
	return done_testing();
}
