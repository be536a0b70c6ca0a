/*
 * tune.c - the tactics timed on a GPU (tests/gpu/run.sh), as TAP, for an
 * engine gpu_engine made this GPU's: every variant of every product
 * (nf_cuda_backend_tune) and, when libcublasLt is here, cuBLASLt's
 * algorithms for the prefill shapes (nf_cuda_backend_tune_cublaslt).  For
 * each shape the winner and its median are TAP comments beside cuBLASLt's;
 * the checks: every shape of the model was timed, the cache answers for
 * each, and a prefill afterwards still runs (on our kernels: cuBLASLt is
 * never chosen, docs/cuda-kernels.md).
 * Usage: tune ENGINE_DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/backend.h"
#include "engine/cuda/cubin.h"
#include "engine/cuda/cublaslt.h"
#include "engine/cuda/timing_cache.h"
#include "engine/engine.h"
#include "engine/sku.h"
#include "util/error.h"

static int tests, failed;

static void check(int cond, const char *what, const char *detail)
{
	tests++;
	failed += !cond;
	printf("%sok %d - %s%s\n", cond ? "" : "not ", tests, what, detail);
}

/* The model's product shapes (rows, cols): q/o, k/v, w1/w3, w2, classifier. */
static int shapes(int (*out)[2], const nf_model_config *c)
{
	int kvd = nf_model_kv_dim(c);
	int all[5][2] = {{c->dim, c->dim}, {kvd, c->dim}, {c->hidden_dim, c->dim}, {c->dim, c->hidden_dim},
			 {c->vocab_size, c->dim}};
	memcpy(out, all, sizeof all);
	return 5;
}

/* Our winner and cuBLASLt's at each shape and batch, as comments; the
 * count of (shape, batch) our cache answers for. */
static int report(const nf_timing_cache *cache, const char *fmt, const nf_model_config *c, int top)
{
	int sh[5][2], n = shapes(sh, c), found = 0, asked = 0;
	for (int i = 0; i < n; i++)
		for (int batch = 1; batch <= top; batch *= 2) {
			nf_tc_shape ours = {{0}, sh[i][0], sh[i][1], batch}, lt = ours;
			nf_tc_tactic t = {0}, l = t;
			snprintf(ours.family, sizeof ours.family, "gemv_%s", fmt);
			snprintf(lt.family, sizeof lt.family, "cublaslt_%s", fmt);
			asked++;
			if (!nf_timing_cache_find(cache, &ours, &t))
				continue;
			found++;
			if (nf_timing_cache_find(cache, &lt, &l))
				printf("# (%d, %d) x %d: %s %.1f us; cuBLASLt %s %.1f us (ours %.2fx)\n",
				       sh[i][0], sh[i][1], batch, t.kernel, t.median_us, l.kernel, l.median_us,
				       l.median_us > 0 ? t.median_us / l.median_us : 0);
			else
				printf("# (%d, %d) x %d: %s %.1f us\n", sh[i][0], sh[i][1], batch, t.kernel,
				       t.median_us);
		}
	return found == asked ? found : -found;
}

int main(int argc, char **argv)
{
	nf_engine *e = NULL;
	nf_cuda_driver *d = NULL;
	nf_cuda_backend *b = NULL;
	nf_timing_cache *cache = NULL;
	nf_cublaslt *lt = NULL;
	nf_cuda_backend_opts o = {0};
	nf_tc_key key = {"gpu", 0, "tests-gpu-tune"};
	char detail[160];
	int timed = 0, lt_timed = 0, prompt[64];

	if (argc != 2) {
		fprintf(stderr, "usage: tune ENGINE_DIR\n");
		return 2;
	}
	const nf_sku *sku = NULL;
	if (nf_engine_open(&e, argv[1], 1) || !(sku = nf_engine_gpu_sku(e)) || nf_cuda_driver_open(&d)) {
		printf("1..0 # SKIP the engine on this GPU: %s\n", sku ? nf_error_last() : "not a GPU profile");
		nf_engine_free(e);
		return 0;
	}
	o.engine_dir = argv[1];
	o.arch = sku->cuda_arch;
	o.max_batch = 16;
	o.max_prefill = 64;
	o.kv = NF_KV_F16;
	if (nf_cuda_backend_new(&b, d, nf_engine_config(e), nf_engine_fwd_weights(e), &o) ||
	    nf_timing_cache_new(&cache, &key)) {
		check(0, "open the backend: ", nf_error_last());
		goto done;
	}
	int err = nf_cuda_backend_tune(b, cache, 5, 9, &timed);
	snprintf(detail, sizeof detail, "(%d shapes x batches timed)%s%s", timed, err ? ": " : "",
		 err ? nf_error_last() : "");
	check(!err && timed > 0, "every variant of every product timed ", detail);
	if (nf_cublaslt_open(&lt) == 0) {
		err = nf_cuda_backend_tune_cublaslt(b, cache, lt, 5, 9, &lt_timed);
		snprintf(detail, sizeof detail, "(%d timed, %s)%s%s", lt_timed, nf_cublaslt_path(lt),
			 err ? ": " : "", err ? nf_error_last() : "");
		check(!err, "cuBLASLt's algorithms timed for the prefill shapes ", detail);
	} else {
		printf("ok %d # skip cuBLASLt: %s\n", ++tests, nf_error_last());
	}
	nf_quant_kind k = nf_precision_info_of(nf_engine_precision(e))->weights;
	const char *fmt = k == NF_QUANT_BF16 ? "bf16" : k == NF_QUANT_INT8_ROW ? "q8" : k == NF_QUANT_INT4_GROUP ? "q4" :
	      k == NF_QUANT_FP8_E4M3 ? "f8" : k == NF_QUANT_NONE ? "f32" : "f16";
	int found = report(cache, fmt, nf_engine_config(e), 64);
	snprintf(detail, sizeof detail, "(%d answered)", found < 0 ? -found : found);
	check(found > 0, "the cache answers for every shape and batch ", detail);
	for (int i = 0; i < 64; i++)
		prompt[i] = 1 + i % (nf_engine_config(e)->vocab_size - 1);
	check(nf_cuda_backend_prefill(b, 0, prompt, 64, 0, NULL) == 0,
	      "a prefill of 64 on the tuned kernels runs", "");
done:
	nf_cublaslt_free(lt);
	nf_timing_cache_free(cache);
	nf_cuda_backend_free(b);
	nf_cuda_driver_free(d);
	nf_engine_free(e);
	printf("1..%d\n", tests);
	return failed != 0;
}
