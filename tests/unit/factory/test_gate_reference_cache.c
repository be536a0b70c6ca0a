/*
 * test_gate_reference_cache.c - the float32 reference as a stage result
 * (factory/gate_reference_cache.c): saved and loaded back it is the same
 * reference (windows, prompts, every row byte for byte), freeing the loaded
 * one leaves the cache's file; a reference.json whose token is outside the
 * vocabulary, or whose rows disagree with the logits file, is refused.
 * stories260K, one window and two short prompts: a fraction of a second.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/checkpoint.h"
#include "factory/gate_reference.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"

static const char *prompts[] = {"Once upon a time", "Lily"};

/* 1 when a and b are the same reference, rows included. */
static int same(const nf_gate_ref *a, const nf_gate_ref *b)
{
	if (a->n_windows != b->n_windows || a->n_prompts != b->n_prompts || a->n_rows != b->n_rows ||
	    a->text_tokens != b->text_tokens || a->half != b->half || a->map_size != b->map_size ||
	    a->cfg.vocab_size != b->cfg.vocab_size || a->cfg.dim != b->cfg.dim ||
	    a->cfg.max_seq_len != b->cfg.max_seq_len)
		return 0;
	for (size_t i = 0; i < a->n_windows; i++)
		if (a->windows[i].n_tokens != b->windows[i].n_tokens ||
		    a->windows[i].first_row != b->windows[i].first_row ||
		    memcmp(a->windows[i].tokens, b->windows[i].tokens,
			   (size_t)a->windows[i].n_tokens * sizeof(int)))
			return 0;
	for (size_t i = 0; i < a->n_prompts; i++) {
		const nf_gate_ref_prompt *p = &a->prompts[i], *q = &b->prompts[i];
		if (strcmp(p->text, q->text) || p->n_prompt != q->n_prompt ||
		    p->n_continued != q->n_continued || p->first_row != q->first_row ||
		    memcmp(p->tokens, q->tokens, (size_t)(p->n_prompt + p->n_continued) * sizeof(int)))
			return 0;
	}
	return memcmp(a->map, b->map, a->map_size) == 0;
}

/* Rewrite dir's reference.json with the first `from` replaced by `to`. */
static int edit_meta(const char *dir, const char *from, const char *to)
{
	char *path = nf_path_join(dir, NF_GATE_REF_META), *text = NULL, *out = NULL;
	size_t len = 0;
	int err = nf_fs_read_file(&text, &len, path, 1 << 24);
	char *at = err ? NULL : strstr(text, from);
	if (at) {
		*at = '\0';
		out = nf_strdup_printf("%s%s%s", text, to, at + strlen(from));
		err = nf_fs_write_atomic(path, out, strlen(out), 0644);
	}
	free(path);
	free(text);
	free(out);
	return at && !err ? 0 : -1;
}

int main(void)
{
	const char *shared = tap_env("NF_SHARED", "../shared");
	char *ckpt = nf_strdup_printf("%s/models/stories260K/stories260K.bin", shared);
	char *tok = nf_strdup_printf("%s/models/stories260K/tok512.bin", shared);
	char tmpl[] = "/tmp/nf_test_refcache.XXXXXX";
	char *tmp = NULL, *stage = NULL, *copy = NULL, *logits = NULL;
	nf_model *m = NULL;
	nf_tokenizer *tk = NULL;
	nf_gate_ref *ref = NULL, *back = NULL, *bad = NULL;

	if (!nf_fs_exists(ckpt) || !nf_fs_exists(tok)) {
		skip("stories260K not found under %s", shared);
		goto done;
	}
	if (!ok((tmp = mkdtemp(tmpl)) != NULL, "temp dir"))
		goto done;
	stage = nf_path_join(tmp, "stage");
	copy = nf_path_join(tmp, "copy");
	if (!ok(!nf_ckpt_load(&m, ckpt, NF_CKPT_LLAMA2C) &&
		    !nf_ckpt_load_tokenizer(&tk, ckpt, NF_CKPT_LLAMA2C, tok, m->cfg.vocab_size),
		"stories260K and its tokenizer: %s", nf_error_last()))
		goto done;
	nf_gate_ref_opts ro = {.eval_tokens = 200, .prompts = prompts, .n_prompts = 2,
			       .max_tokens = 12, .tmp_dir = tmp, .threads = 1};
	if (!ok(!nf_gate_ref_new(&ref, m, tk, &ro, NULL), "reference computed: %s", nf_error_last()))
		goto done;
	ok(!nf_fs_mkdir_p(stage, 0755) && !nf_gate_ref_save(ref, stage), "saved: %s", nf_error_last());
	is_int(nf_gate_ref_load(&back, stage), 0, "loaded back: %s", nf_error_last());
	ok(back && same(ref, back), "the same reference: %zu windows, %zu prompts, %zu rows byte for byte",
	   ref->n_windows, ref->n_prompts, ref->n_rows);
	logits = nf_path_join(stage, NF_GATE_REF_LOGITS);
	nf_gate_ref_free(back);
	back = NULL;
	ok(nf_fs_exists(logits), "freeing a loaded reference leaves the cache's logits");

	/* damaged copies of the stage */
	ok(!nf_fs_copy_tree(stage, copy) && !edit_meta(copy, "\"windows\":[[", "\"windows\":[[512,"),
	   "a copy with a token outside the 512-token vocabulary");
	ok(nf_gate_ref_load(&bad, copy) == NF_EINPUT && strstr(nf_error_last(), "not in the vocabulary") &&
		   strstr(nf_error_last(), copy),
	   "refused, naming the folder: %s", nf_error_last());
	nf_gate_ref_free(bad);
	bad = NULL;
	ok(!nf_fs_remove_tree(copy) && !nf_fs_copy_tree(stage, copy), "a fresh copy");
	char rows[64], fewer[64];
	snprintf(rows, sizeof rows, "\"rows\":%zu", ref->n_rows);
	snprintf(fewer, sizeof fewer, "\"rows\":%zu", ref->n_rows - 1);
	ok(!edit_meta(copy, rows, fewer), "its row count made one less than the windows and prompts name");
	ok(nf_gate_ref_load(&bad, copy) == NF_EINPUT && strstr(nf_error_last(), "rows named"),
	   "refused: %s", nf_error_last());
done:
	nf_gate_ref_free(bad);
	nf_gate_ref_free(back);
	nf_gate_ref_free(ref);
	nf_tokenizer_free(tk);
	nf_model_free(m);
	if (tmp)
		nf_fs_remove_tree(tmp);
	free(stage);
	free(copy);
	free(logits);
	free(ckpt);
	free(tok);
	return done_testing();
}
