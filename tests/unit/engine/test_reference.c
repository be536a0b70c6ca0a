/*
 * test_reference.c - the float32 reference forward pass on stories260K:
 * greedy decoding from BOS reproduces the known sentence; bad tokens and
 * positions are refused.
 */
#include <stdio.h>
#include <string.h>

#include "engine/checkpoint.h"
#include "engine/generate.h"
#include "engine/reference.h"
#include "engine/tokenizer.h"
#include "tests/tap.h"
#include "util/error.h"

int main(void)
{
	char mpath[1024], tpath[1024];
	const char *shared = tap_env("NF_SHARED", "../shared");
	snprintf(mpath, sizeof mpath, "%s/models/stories260K/stories260K.bin", shared);
	snprintf(tpath, sizeof tpath, "%s/models/stories260K/tok512.bin", shared);
	nf_model *m = NULL;
	nf_tokenizer *tok = NULL;
	nf_ref_state *s = NULL;

	int rc = nf_ckpt_load(&m, mpath, NF_CKPT_LLAMA2C);
	is_int(rc, 0, "load stories260K: %s", nf_error_last());
	if (rc)
		return done_testing();
	ok(m->cfg.n_kv_heads < m->cfg.n_heads, "stories260K uses GQA (%d kv heads, %d heads)",
	   m->cfg.n_kv_heads, m->cfg.n_heads);
	is_int(nf_tokenizer_load(&tok, tpath, m->cfg.vocab_size), 0, "load tokenizer");
	is_int(nf_ref_state_new(&s, m), 0, "reference state");

	char text[4096];
	size_t len = 0;
	int prev = NF_TOKEN_BOS, token = NF_TOKEN_BOS;
	for (int pos = 0; pos < 40 && tok && s; pos++) {
		const float *logits = nf_ref_forward(s, token, pos);
		if (!logits)
			break;
		int next = nf_argmax(logits, m->cfg.vocab_size);
		size_t n = 0;
		const char *piece = nf_tokenizer_decode(tok, token, next, &n);
		if (len + n < sizeof text) {
			memcpy(text + len, piece, n);
			len += n;
		}
		prev = token;
		token = next;
	}
	(void)prev;
	text[len] = '\0';
	const char *want =
		"Once upon a time, there was a little girl named Lily. She loved to play outside in the park.";
	ok(strncmp(text, want, strlen(want)) == 0, "greedy decode from BOS begins with the known sentence");
	diag("decoded: %s", text);

	ok(nf_ref_forward(s, m->cfg.vocab_size, 0) == NULL, "token out of range refused");
	ok(nf_ref_forward(s, 0, m->cfg.max_seq_len) == NULL, "position out of range refused");
	ok(nf_ref_forward(s, -1, 0) == NULL, "negative token refused");

	nf_ref_state_free(s);
	nf_tokenizer_free(tok);
	nf_model_free(m);
	nf_ref_state_free(NULL);
	return done_testing();
}
