/*
 * test_cuda_backend.c - the CUDA backend's host-side flow on a stories260K
 * int8-wo engine against the fake driver (tests/fakes/libcuda.c), which
 * logs every call: the context and the cubin, every weight uploaded once
 * (the bytes the engine's weights are), the launches of a decode step and
 * of a prefill with the grids and blocks of launch.h's helpers for the
 * model's shapes, a graph instantiated per batch size and updated after,
 * and each failure (memory refused, a launch refused) one line, with the
 * engine still running on the CPU.  The kernels do not run on the fake
 * driver: nothing here checks a logit; tests/gpu/ does, on a GPU.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/cuda/backend.h"
#include "engine/cuda/backend_impl.h"
#include "engine/cuda/backend_kernels.h"
#include "engine/cuda/cubin.h"
#include "engine/cuda/launch.h"
#include "engine/engine.h"
#include "util/error.h"
#include "util/fs.h"
#include "tests/fakes/fake_cuda.h"
#include "tests/tap.h"

static char log_path[1100];

/* The fake driver's log so far (caller frees); the log emptied. */
static char *take_log(void) { return take_log_at(log_path); }

/* Empty the log, unread. */
static void drop_log(void) { free(take_log()); }

static void launch_line(char *buf, size_t len, const char *name, nf_cu_launch l)
{
	snprintf(buf, len, "launch %s %u %u %u %u %u %u", name, l.grid[0], l.grid[1], l.grid[2],
		 l.block[0], l.block[1], l.block[2]);
}

/* Every synchronous upload is a weight: it follows the allocation of its
 * own size, and their bytes add up. */
static uint64_t weight_uploads(const char *log, int *paired)
{
	uint64_t total = 0;
	size_t last_alloc = 0;
	*paired = 1;
	for (const char *p = log; *p;) {
		size_t v;
		if (sscanf(p, "alloc %zu", &v) == 1)
			last_alloc = v;
		else if (sscanf(p, "htod %zu", &v) == 1) {
			total += v;
			*paired &= v == last_alloc;
			last_alloc = 0;
		}
		p = strchr(p, '\n');
		if (!p)
			break;
		p++;
	}
	return total;
}

static nf_cuda_backend_opts opts_for(const char *dir)
{
	nf_cuda_backend_opts o = {0};
	o.engine_dir = dir;
	o.arch = "sm_90";
	o.max_batch = 2;
	o.max_prefill = 16;
	o.kv = NF_KV_F16;
	return o;
}

static void launch_count(const char *log, const char *name, nf_cu_launch l, size_t want,
			 const char *why)
{
	char line[160];
	launch_line(line, sizeof line, name, l);
	is_int(count_lines(log, line), want, "%s: %s", why, line);
}

/* Rows of logits of a prefill (the verifier's, every prompt row) through
 * the classifier two rows (max_batch) at a time, and the prefix copies:
 * one device-to-device copy per layer, KV head and K or V, of the prefix's
 * rows, and their refusals. */
static void test_rows_and_copies(nf_cuda_backend *b, const nf_model_config *c)
{
	size_t vocab = (size_t)c->vocab_size, row = nf_kv_row_bytes(NF_KV_F16, (size_t)nf_model_head_size(c));
	float *logits = calloc(20 * vocab, sizeof *logits);
	int prompt[20];
	char want[64], *log;
	for (int i = 0; i < 20; i++)
		prompt[i] = i + 1;
	drop_log();
	/* rows 15..19 of 20 with passes of 16: row 15 in the first, 16..19 in the second */
	is_int(nf_cuda_backend_prefill_rows(b, 1, prompt, 20, 0, 5, logits), 0, "prefill 20 tokens with 5 rows of logits");
	log = take_log();
	launch_count(log, "nf_cu_gemv_q8", nf_cu_launch_gemv(c->vocab_size, 1), 1, "row 15 alone");
	launch_count(log, "nf_cu_gemv_q8", nf_cu_launch_gemv(c->vocab_size, 2), 2, "rows 16..19 two at a time");
	snprintf(want, sizeof want, "dtoh-async %zu", 2 * vocab * sizeof(float));
	is_int(count_lines(log, want), 2, "two copies of two rows back: %s", want);
	snprintf(want, sizeof want, "dtoh-async %zu", vocab * sizeof(float));
	is_int(count_lines(log, want), 1, "and one of one row: %s", want);
	free(log);
	is_int(nf_cuda_backend_prefill_rows(b, 0, prompt, 3, 0, 3, logits), 0, "every row of a prompt of 3");
	log = take_log();
	launch_count(log, "nf_cu_argmax", nf_cu_launch_rows(2), 1, "rows 0, 1");
	launch_count(log, "nf_cu_argmax", nf_cu_launch_rows(1), 1, "row 2");
	free(log);
	ok(nf_cuda_backend_prefill_rows(b, 0, prompt, 3, 0, 4, logits) == NF_EINPUT,
	   "4 rows of 3 tokens are refused: %s", nf_error_last());
	ok(nf_cuda_backend_prefill_rows(b, 0, prompt, 3, 0, 2, NULL) == NF_EINPUT,
	   "rows without a buffer are refused");
	drop_log();

	is_int(nf_cuda_backend_copy_prefix(b, 0, 1, 7), 0, "copy 7 positions from slot 1 to 0");
	log = take_log();
	snprintf(want, sizeof want, "dtod-async %zu", 7 * row);
	is_int(count_lines(log, want), 2 * c->n_layers * c->n_kv_heads,
	       "one copy per layer, KV head, K and V: %s", want);
	is_int(count_prefix(log, "dtod-async"), 2 * c->n_layers * c->n_kv_heads, "and no other");
	free(log);
	ok(nf_cuda_backend_copy_prefix(b, 1, 1, 7) == 0 && !count_prefix((log = take_log()), "dtod"),
	   "a slot onto itself copies nothing");
	free(log);
	ok(nf_cuda_backend_copy_prefix(b, 2, 0, 7) == NF_EINPUT, "slot 2 of 2 is refused: %s",
	   nf_error_last());
	ok(nf_cuda_backend_copy_prefix(b, 1, 0, c->max_seq_len + 1) == NF_EINPUT,
	   "a prefix past the context is refused: %s", nf_error_last());
	ok(!count_prefix((log = take_log()), "dtod"), "and nothing was copied");
	free(log);
	setenv("FAKE_CUDA_FAIL_DTOD", "1", 1);
	ok(nf_cuda_backend_copy_prefix(b, 1, 0, 7) == NF_EENV && strstr(nf_error_last(), "prefix copy") &&
		   !strchr(nf_error_last(), '\n'),
	   "a copy the driver refuses is one line: %s", nf_error_last());
	unsetenv("FAKE_CUDA_FAIL_DTOD");
	drop_log();
	free(logits);
}

static void test_open(const nf_engine *e, const nf_cuda_driver *d, const char *dir)
{
	const nf_model_config *c = nf_engine_config(e);
	const nf_fwd_weights *w = nf_engine_fwd_weights(e);
	nf_cuda_backend_opts o = opts_for(dir);
	nf_cuda_backend *b = NULL;
	char want[160], *log;
	int paired;

	is_int(nf_cuda_backend_new(&b, d, c, w, &o), 0, "open the backend on the fake H100: %s",
	       nf_error_last());
	if (!b)
		return;
	log = take_log();
	uint64_t up = weight_uploads(log, &paired);
	ok(up == nf_fwd_weights_bytes(w, c) && up == nf_cuda_backend_weight_bytes(b),
	   "the uploads are the engine's weight bytes (%llu, the engine %llu)",
	   (unsigned long long)up, (unsigned long long)nf_fwd_weights_bytes(w, c));
	ok(paired, "each weight is uploaded once, into its own allocation of its size");
	is_int(count_lines(log, "capture begin"), 1, "the warm-up decode step is captured");
	ok(count_lines(log, "capture end") == 1 && count_lines(log, "instantiate") == 1 &&
		   count_lines(log, "graph launch") == 1,
	   "its graph instantiated once and launched");
	/* a step: embed, 15 launches a layer (no biases), final norm, classifier, argmax */
	is_int(count_prefix(log, "launch "), 15 * c->n_layers + 4, "launches of a decode step");
	launch_line(want, sizeof want, "nf_cu_embed_q8", nf_cu_launch_embed(1, c->dim));
	is_int(count_lines(log, want), 1, "%s", want);
	launch_line(want, sizeof want, "nf_cu_gemv_q8", nf_cu_launch_gemv(c->hidden_dim, 1));
	is_int(count_lines(log, want), 2 * c->n_layers, "%s (w1, w3)", want);
	launch_line(want, sizeof want, "nf_cu_gemv_q8", nf_cu_launch_gemv(c->vocab_size, 1));
	is_int(count_lines(log, want), 1, "%s (the tied classifier)", want);
	launch_line(want, sizeof want, "nf_cu_attn_decode_f16", nf_cu_launch_attn_decode(0, c->n_heads));
	is_int(count_lines(log, want), c->n_layers, "%s", want);
	launch_line(want, sizeof want, "nf_cu_kv_append_f16", nf_cu_launch_kv_append(1, c->n_kv_heads));
	is_int(count_lines(log, want), c->n_layers, "%s", want);
	free(log);

	/* the same batch size again: the graph is updated, not instantiated */
	int slots[2] = {0, 1}, tokens[2] = {5, 7}, pos[2] = {1, 300}, next[2] = {-1, -1};
	is_int(nf_cuda_backend_decode(b, slots, tokens, pos, 1, NULL, next), 0, "decode at position 1");
	log = take_log();
	ok(count_lines(log, "update") == 1 && count_lines(log, "instantiate") == 0,
	   "the batch-1 graph is updated in place");
	ok(next[0] == 0, "the argmax comes back (the fake's memory: zero, no kernel ran)");
	free(log);
	is_int(nf_cuda_backend_decode(b, slots, tokens, pos, 2, NULL, NULL), 0, "decode a batch of 2");
	log = take_log();
	is_int(nf_cuda_backend_graphs(b), 2, "a graph per batch size");
	launch_line(want, sizeof want, "nf_cu_attn_decode_f16", nf_cu_launch_attn_decode(300, c->n_heads));
	ok(count_lines(log, want) == (size_t)c->n_layers && nf_cu_decode_splits(300) == 2,
	   "position 300 splits its attention in 2: %s", want);
	free(log);

	int prompt[20];
	float *logits = calloc((size_t)c->vocab_size, sizeof *logits);
	for (int i = 0; i < 20; i++)
		prompt[i] = i + 1;
	is_int(nf_cuda_backend_prefill(b, 1, prompt, 20, 0, logits), 0, "prefill 20 tokens");
	log = take_log();
	/* passes of 16 and 4 tokens: the model picks the 16-token tile for both */
	launch_line(want, sizeof want, "nf_cu_gemm_n16_q8", nf_cu_launch_gemm_n16(c->hidden_dim, 16));
	is_int(count_lines(log, want), 2 * 2 * c->n_layers, "%s (w1, w3 of both passes)", want);
	launch_line(want, sizeof want, "nf_cu_gemm_n16_q8", nf_cu_launch_gemm_n16(c->dim, 16));
	is_int(count_lines(log, want), 2 * 5 * c->n_layers,
	       "%s (wq, wk, wv, wo, w2 of both passes)", want);
	is_int(count_prefix(log, "launch nf_cu_gemm_q8"), 0, "and never the 64-token tile");
	launch_line(want, sizeof want, "nf_cu_gemv_q8", nf_cu_launch_gemv(c->vocab_size, 1));
	is_int(count_lines(log, want), 1, "the classifier of the last token only: %s", want);
	launch_line(want, sizeof want, "nf_cu_attn_prefill_f16", nf_cu_launch_attn_prefill(4, c->n_heads));
	is_int(count_lines(log, want), c->n_layers, "the second pass of 4: %s", want);
	ok(count_lines(log, "capture begin") == 0, "a prefill is not captured");
	free(log);
	free(logits);

	test_rows_and_copies(b, c);
	ok(nf_cuda_backend_decode(b, (int[]){2}, tokens, pos, 1, NULL, NULL) == NF_EINPUT,
	   "slot 2 of 2 is refused: %s", nf_error_last());
	ok(nf_cuda_backend_decode(b, slots, (int[]){c->vocab_size}, pos, 1, NULL, NULL) == NF_EINPUT,
	   "a token out of the vocabulary is refused");
	drop_log();
	nf_cuda_backend_free(b);
}

/* A failure is one line, and the engine still runs on the CPU. */
static void expect_fallback(nf_engine *e, const nf_cuda_driver *d, const char *dir,
			    const char *var, const char *value, const char *says)
{
	nf_cuda_backend_opts o = opts_for(dir);
	nf_cuda_backend *b = NULL;
	nf_seq *s = NULL;
	float *logits = calloc((size_t)nf_engine_config(e)->vocab_size, sizeof *logits);
	int tok = 1, pos = 0, err;

	setenv(var, value, 1);
	err = nf_cuda_backend_new(&b, d, nf_engine_config(e), nf_engine_fwd_weights(e), &o);
	unsetenv(var);
	ok(err == NF_EENV && !b && strstr(nf_error_last(), says) && !strchr(nf_error_last(), '\n'),
	   "%s=%s: one line: %s", var, value, nf_error_last());
	ok(nf_seq_new(&s, e) == 0 && nf_engine_step(e, &s, &tok, &pos, 1, logits) == 0 &&
		   logits[0] != 0.0f,
	   "and the engine steps on the CPU");
	nf_seq_free(s);
	free(logits);
	drop_log();
}

/* Through the engine on the GPU: the verifier's rows of a ragged step, a
 * prompt's every row, and a prefix copied between sequences' slots. */
static void test_engine_rows(nf_engine *e, nf_seq **s, float *logits)
{
	const nf_model_config *c = nf_engine_config(e);
	size_t vocab = (size_t)c->vocab_size;
	int toks[4] = {6, 1, 2, 3}, nt[2] = {1, 3}, p0[2] = {6, 0}, rows[2] = {1, 3};
	float *four = calloc(4 * vocab, sizeof *four);
	char want[64], *log;

	drop_log();
	is_int(nf_engine_step_ragged_rows(e, s, toks, nt, p0, rows, 2, four), 0,
	       "a ragged step with 1 and 3 rows of logits on the GPU: %s", nf_error_last());
	log = take_log();
	snprintf(want, sizeof want, "dtoh-async %zu", vocab * sizeof(float));
	ok(count_lines(log, "graph launch") == 1 && count_lines(log, want) == 2,
	   "a decode row and the 3 rows of the prefill (two, then one) come back");
	free(log);
	is_int(nf_engine_prefill_logits(e, s[1], toks + 1, 3, 0, four), 0,
	       "a prefill with every row's logits on the GPU: %s", nf_error_last());
	drop_log();
	is_int(nf_seq_copy_prefix(s[1], s[0], 3), 0, "a prefix copy between slots: %s", nf_error_last());
	log = take_log();
	snprintf(want, sizeof want, "dtod-async %zu",
		 3 * nf_kv_row_bytes(NF_KV_F16, (size_t)nf_model_head_size(c)));
	is_int(count_lines(log, want), 2 * c->n_layers * c->n_kv_heads, "its copies: %s", want);
	free(log);
	free(four);
	(void)logits;
}

/* An engine whose profile is an h100-sxm's, through nf_engine_use_gpu:
 * refused in one line on an sm_86 (the engine stays on the CPU), else its
 * sequences take device slots and its steps run there. */
static void test_engine(const char *dir)
{
	nf_engine *e = NULL;
	nf_seq *s[3] = {NULL, NULL, NULL};
	float *logits = NULL;
	int tok = 1, pos = 0;
	char *log;

	unsetenv("NF_WEIGHTS_TILE"); /* a GPU profile stays row-major by itself */
	if (nf_engine_open(&e, dir, 1)) {
		ok(0, "open the h100-sxm engine: %s", nf_error_last());
		return;
	}
	logits = calloc(2 * (size_t)nf_engine_config(e)->vocab_size, sizeof *logits);
	setenv("FAKE_CUDA_CC", "86", 1);
	ok(nf_engine_use_gpu(e, 2) == NF_EENV && strstr(nf_error_last(), "sm_86") &&
		   !strchr(nf_error_last(), '\n'),
	   "an sm_86 is refused in one line: %s", nf_error_last());
	unsetenv("FAKE_CUDA_CC");
	ok(strcmp(nf_engine_kernel_name(e), "cuda") != 0 && nf_seq_new(&s[0], e) == 0 &&
		   nf_engine_step(e, s, &tok, &pos, 1, logits) == 0 && logits[0] != 0.0f,
	   "and the engine runs on the CPU (%s)", nf_engine_kernel_name(e));
	nf_seq_free(s[0]);
	s[0] = NULL;
	nf_engine_free(e);
	e = NULL;
	drop_log();

	if (nf_engine_open(&e, dir, 1) || nf_engine_use_gpu(e, 2)) {
		ok(0, "the h100-sxm engine on the fake H100: %s", nf_error_last());
		goto done;
	}
	ok(!strcmp(nf_engine_kernel_name(e), "cuda"), "the engine runs on the GPU");
	ok(nf_seq_new(&s[0], e) == 0 && nf_seq_new(&s[1], e) == 0, "two sequences take the two slots");
	ok(nf_seq_new(&s[2], e) == NF_EENV && strstr(nf_error_last(), "all 2 sequences"),
	   "a third is refused: %s", nf_error_last());
	drop_log();
	int prompt[5] = {1, 2, 3, 4, 5};
	is_int(nf_engine_prefill(e, s[0], prompt, 5, 0, logits), 0, "prefill on the GPU");
	log = take_log();
	ok(count_prefix(log, "launch nf_cu_attn_prefill_f16") == (size_t)nf_engine_config(e)->n_layers &&
		   count_lines(log, "capture begin") == 0,
	   "a prefill of 5 is the device's prefill");
	free(log);
	int toks[4] = {6, 1, 2, 3}, nt[2] = {1, 3}, p0[2] = {5, 0};
	is_int(nf_engine_step_ragged(e, s, toks, nt, p0, 2, logits), 0,
	       "a ragged step: a decode token and a prompt of 3");
	log = take_log();
	ok(count_lines(log, "graph launch") == 1 &&
		   count_prefix(log, "launch nf_cu_attn_prefill_f16") == (size_t)nf_engine_config(e)->n_layers &&
		   count_prefix(log, "launch nf_cu_attn_decode_f16") == (size_t)nf_engine_config(e)->n_layers,
	   "one decode graph and one prefill");
	free(log);
	test_engine_rows(e, s, logits);
done:
	for (int i = 0; i < 3; i++)
		nf_seq_free(s[i]);
	nf_engine_free(e);
	free(logits);
	drop_log();
}

/* The kernel table's names are those the real cubin exports (when `make
 * cuda` built one): cuModuleGetFunction finds each on a GPU. */
static void test_real_cubin(void)
{
	const char *cuda = getenv("NF_CUDA");
	char path[1100], *image = NULL;
	size_t len = 0;
	int missing = 0;
	snprintf(path, sizeof path, "%s/sm_90a/nf_kernels.cubin", cuda ? cuda : "build/cuda");
	if (nf_fs_read_file(&image, &len, path, 1u << 30) != 0) {
		skip("no cubin from make cuda (%s): no nvcc here", path);
		return;
	}
	for (int i = 0; i < NF_CUK_COUNT; i++) {
		const char *name = nf_cuk_info_of((nf_cuk_id)i)->name;
		size_t n = strlen(name) + 1, k = 0;
		while (k + n <= len && !(image[k] == name[0] && !memcmp(image + k, name, n) &&
					 (k == 0 || image[k - 1] == '\0')))
			k++;
		if (k + n > len) {
			printf("# %s lacks %s\n", path, name);
			missing++;
		}
	}
	ok(missing == 0, "the sm_90a cubin exports all %d kernels of the table", NF_CUK_COUNT);
	free(image);
}

/* The timing buffers are sized from the widest rows and columns, found
 * apart in different matrices, and never from an empty list. */
static void test_wmat_widest(void)
{
	nf_cuda_wmat a = {0}, b = {0};
	const nf_cuda_wmat *m[2] = {&a, &b};
	size_t rows = 0, cols = 0;
	a.m.rows = 768;
	a.m.cols = 64;
	b.m.rows = 32;
	b.m.cols = 2048;
	nf_cuda_wmat_widest(&rows, &cols, m, 2);
	ok(rows == 768 && cols == 2048, "widest of two: %zu rows, %zu cols (768, 2048)", rows, cols);
	nf_cuda_wmat_widest(&rows, &cols, m, 0);
	ok(rows == 1 && cols == 1, "an empty list gives 1 by 1, never 0: %zu by %zu", rows, cols);
}

int main(void)
{
	const char *shared = tap_env("NF_SHARED", "../shared"), *build = tap_env("NF_BUILD", "build");
	char mpath[1024], tok[1024], root[1024], dir[1100], fake[1024], cmd[1200];
	unsigned char cubin[512];
	nf_engine_build_opts o = {0};
	nf_model *m = NULL;
	nf_engine *e = NULL;
	nf_cuda_driver *d = NULL;

	snprintf(mpath, sizeof mpath, "%s/models/stories260K/stories260K.bin", shared);
	snprintf(tok, sizeof tok, "%s/models/stories260K/tok512.bin", shared);
	snprintf(root, sizeof root, "%s/tmp/test_cuda_backend.%d", build, (int)getpid());
	snprintf(dir, sizeof dir, "%s/engine", root);
	snprintf(log_path, sizeof log_path, "%s/fake.log", root);
	snprintf(fake, sizeof fake, "%s/tests/fakes/libcuda.so.1", build);
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", root);
	if (system(cmd) != 0)
		return 1;
	test_wmat_widest();
	o.precision = NF_PREC_INT8_WO;
	o.tokenizer_path = tok;
	o.threads = 1;
	fake_cubin(cubin, sizeof cubin, 90);
	if (nf_ckpt_load(&m, mpath, NF_CKPT_LLAMA2C) || nf_engine_build(dir, m, &o) ||
	    nf_cubin_store(dir, "sm_90", cubin, sizeof cubin, NULL, 0)) {
		ok(0, "build a stories260K engine with a cuda/ part: %s", nf_error_last());
		nf_model_free(m);
		return done_testing();
	}
	nf_model_free(m);
	/* the device reads the weights row-major, as the file has them */
	setenv("NF_WEIGHTS_TILE", "0", 1);
	setenv("NF_LIBCUDA", fake, 1);
	setenv("FAKE_CUDA_LOG", log_path, 1);
	if (nf_engine_open(&e, dir, 1) || nf_cuda_driver_open(&d)) {
		ok(0, "open the engine and the fake driver: %s", nf_error_last());
		return done_testing();
	}
	drop_log();
	test_real_cubin();
	test_open(e, d, dir);
	expect_fallback(e, d, dir, "FAKE_CUDA_FAIL_ALLOC", "3", "refused");
	expect_fallback(e, d, dir, "FAKE_CUDA_FAIL_LAUNCH", "nf_cu_attn_decode_f16",
			"launch of nf_cu_attn_decode_f16 failed");
	nf_cuda_driver_free(d);
	nf_engine_free(e);
	/* the same model as an h100-sxm profile's engine */
	char gdir[1100];
	snprintf(gdir, sizeof gdir, "%s/h100", root);
	o.profile_json = "{\"device\":\"h100-sxm\",\"precision\":\"int8-wo\"}";
	if (nf_ckpt_load(&m, mpath, NF_CKPT_LLAMA2C) || nf_engine_build(gdir, m, &o) ||
	    nf_cubin_store(gdir, "sm_90", cubin, sizeof cubin, NULL, 0))
		ok(0, "build the h100-sxm engine: %s", nf_error_last());
	else
		test_engine(gdir);
	nf_model_free(m);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	if (system(cmd) != 0)
		ok(0, "remove %s", root);
	return done_testing();
}
