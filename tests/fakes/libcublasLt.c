/*
 * libcublasLt.c - a fake cuBLASLt for the tests of engine/cuda/cublaslt.c
 * and the tactics that time it, built as build/tests/fakes/libcublasLt.so.13
 * and loaded through NF_LIBCUBLASLT.  It exports the functions the loader
 * resolves; nothing is computed.  What the host asked for is what the tests
 * check: each call appends a line to FAKE_CUDA_LOG (the fake driver's log,
 * so the two interleave in call order):
 *   "lt create", "lt desc compute C scale S", "lt desc attr A = V",
 *   "lt layout type T rows R cols C ld L", "lt pref workspace BYTES",
 *   "lt heuristic requested N returned M", "lt matmul algo I workspace W",
 *   "lt destroy pref|layout|desc|handle"
 *   FAKE_CUBLASLT_ALGOS=N      the heuristic proposes N algorithms (default 3),
 *                              algorithm i needing i KiB of workspace
 *   FAKE_CUBLASLT_FAIL=NAME    the call NAME ("heuristic", "matmul") fails
 *                              (CUBLAS_STATUS_NOT_SUPPORTED, 15)
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_log.h"

typedef int cublasStatus_t;

enum { OK = 0, NOT_SUPPORTED = 15 };


static int fails(const char *call)
{
	const char *v = getenv("FAKE_CUBLASLT_FAIL");
	return v && !strcmp(v, call);
}

/* Handles are small allocations of their kind's name, freed on destroy. */
static void *token(const char *kind)
{
	char *p = malloc(16);
	if (p)
		snprintf(p, 16, "%s", kind);
	return p;
}

static cublasStatus_t drop(void *p, const char *kind)
{
	logf_("lt destroy %s", kind);
	free(p);
	return OK;
}

cublasStatus_t cublasLtCreate(void **h) { logf_("lt create"); *h = token("handle"); return OK; }
cublasStatus_t cublasLtDestroy(void *h) { return drop(h, "handle"); }

cublasStatus_t cublasLtMatmulDescCreate(void **d, int compute, int scale)
{
	logf_("lt desc compute %d scale %d", compute, scale);
	*d = token("desc");
	return OK;
}
cublasStatus_t cublasLtMatmulDescDestroy(void *d) { return drop(d, "desc"); }
cublasStatus_t cublasLtMatmulDescSetAttribute(void *d, int attr, const void *buf, size_t size)
{
	int v = 0;
	(void)d;
	memcpy(&v, buf, size < sizeof v ? size : sizeof v);
	logf_("lt desc attr %d = %d", attr, v);
	return OK;
}

cublasStatus_t cublasLtMatrixLayoutCreate(void **l, int type, uint64_t rows, uint64_t cols, int64_t ld)
{
	logf_("lt layout type %d rows %llu cols %llu ld %lld", type, (unsigned long long)rows,
	      (unsigned long long)cols, (long long)ld);
	*l = token("layout");
	return OK;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(void *l) { return drop(l, "layout"); }

cublasStatus_t cublasLtMatmulPreferenceCreate(void **p) { *p = token("pref"); return OK; }
cublasStatus_t cublasLtMatmulPreferenceDestroy(void *p) { return drop(p, "pref"); }
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(void *p, int attr, const void *buf, size_t size)
{
	uint64_t v = 0;
	(void)p;
	memcpy(&v, buf, size < sizeof v ? size : sizeof v);
	if (attr == 1)
		logf_("lt pref workspace %llu", (unsigned long long)v);
	return OK;
}

/* cublasLtMatmulHeuristicResult_t */
typedef struct heuristic {
	uint64_t algo[8];
	size_t workspace;
	int state;
	float waves;
	int reserved[4];
} heuristic;

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(void *h, void *desc, void *a, void *b, void *c, void *d,
					       void *pref, int requested, heuristic *out, int *returned)
{
	const char *v = getenv("FAKE_CUBLASLT_ALGOS");
	int n = v && *v ? atoi(v) : 3;
	(void)h; (void)desc; (void)a; (void)b; (void)c; (void)d; (void)pref;
	if (fails("heuristic")) {
		logf_("lt heuristic requested %d returned 0", requested);
		return NOT_SUPPORTED;
	}
	n = n < requested ? n : requested;
	for (int i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof out[i]);
		out[i].algo[0] = (uint64_t)i;
		out[i].workspace = (size_t)i * 1024;
		out[i].waves = 1.0f;
	}
	*returned = n;
	logf_("lt heuristic requested %d returned %d", requested, n);
	return OK;
}

cublasStatus_t cublasLtMatmul(void *h, void *desc, const void *alpha, const void *a, void *adesc,
			      const void *b, void *bdesc, const void *beta, const void *c, void *cdesc,
			      void *d, void *ddesc, const void *algo, void *ws, size_t ws_bytes, void *stream)
{
	uint64_t id = 0;
	(void)h; (void)desc; (void)alpha; (void)a; (void)adesc; (void)b; (void)bdesc; (void)beta;
	(void)c; (void)cdesc; (void)d; (void)ddesc; (void)ws; (void)stream;
	memcpy(&id, algo, sizeof id);
	logf_("lt matmul algo %llu workspace %zu", (unsigned long long)id, ws_bytes);
	return fails("matmul") ? NOT_SUPPORTED : OK;
}
