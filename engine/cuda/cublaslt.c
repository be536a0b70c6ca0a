/*
 * cublaslt.c - cuBLASLt loaded with dlopen, one shape's description and
 * its heuristic's algorithms, and a run of one of them (see cublaslt.h).
 * The few enum values and the heuristic's result are cuBLASLt's ABI
 * (cublasLt.h, cublas_api.h, library_types.h of CUDA 11-13), declared
 * here so no toolkit header is needed to build.
 */
#define _GNU_SOURCE /* RTLD_* and dlerror under -std=c11 */
#include "engine/cuda/cublaslt.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/wformat.h"
#include "util/error.h"
#include "util/banned.h"

/* cudaDataType_t, cublasComputeType_t, cublasOperation_t and the attributes set. */
enum {
	LT_R_32F = 0,
	LT_R_16F = 2,
	LT_R_16BF = 14,
	LT_R_8F_E4M3 = 28,
	LT_COMPUTE_32F = 68,
	LT_OP_N = 0,
	LT_OP_T = 1,
	LT_DESC_TRANSA = 3,
	LT_DESC_TRANSB = 4,
	LT_PREF_MAX_WORKSPACE_BYTES = 1,
};

/* cublasLtMatmulHeuristicResult_t */
typedef struct lt_heuristic {
	uint64_t algo[8];
	size_t workspace;
	int state;
	float waves;
	int reserved[4];
} lt_heuristic;

typedef int lt_status; /* cublasStatus_t: 0 is success */

typedef struct lt_api {
	lt_status (*create)(void **handle);
	lt_status (*destroy)(void *handle);
	lt_status (*desc_create)(void **desc, int compute, int scale_type);
	lt_status (*desc_destroy)(void *desc);
	lt_status (*desc_set)(void *desc, int attr, const void *buf, size_t size);
	lt_status (*layout_create)(void **layout, int type, uint64_t rows, uint64_t cols, int64_t ld);
	lt_status (*layout_destroy)(void *layout);
	lt_status (*pref_create)(void **pref);
	lt_status (*pref_destroy)(void *pref);
	lt_status (*pref_set)(void *pref, int attr, const void *buf, size_t size);
	lt_status (*heuristic)(void *handle, void *desc, void *a, void *b, void *c, void *d, void *pref,
			       int requested, lt_heuristic *results, int *returned);
	lt_status (*matmul)(void *handle, void *desc, const void *alpha, const void *a, void *adesc,
			    const void *b, void *bdesc, const void *beta, const void *c, void *cdesc,
			    void *d, void *ddesc, const void *algo, void *workspace, size_t ws_bytes,
			    void *stream);
} lt_api;

struct nf_cublaslt {
	void *lib;
	char path[256];
	lt_api api;
};

static const struct {
	const char *symbol;
	size_t offset;
} symbols[] = {
#define SYM(field, name) {name, offsetof(lt_api, field)}
	SYM(create, "cublasLtCreate"),
	SYM(destroy, "cublasLtDestroy"),
	SYM(desc_create, "cublasLtMatmulDescCreate"),
	SYM(desc_destroy, "cublasLtMatmulDescDestroy"),
	SYM(desc_set, "cublasLtMatmulDescSetAttribute"),
	SYM(layout_create, "cublasLtMatrixLayoutCreate"),
	SYM(layout_destroy, "cublasLtMatrixLayoutDestroy"),
	SYM(pref_create, "cublasLtMatmulPreferenceCreate"),
	SYM(pref_destroy, "cublasLtMatmulPreferenceDestroy"),
	SYM(pref_set, "cublasLtMatmulPreferenceSetAttribute"),
	SYM(heuristic, "cublasLtMatmulAlgoGetHeuristic"),
	SYM(matmul, "cublasLtMatmul"),
#undef SYM
};

/* The first library of the list dlopen finds. */
static void *open_first(char *path, size_t len)
{
	static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12",
					    "libcublasLt.so.11"};
	const char *env = getenv("NF_LIBCUBLASLT");
	void *lib = NULL;
	if (env && *env) {
		snprintf(path, len, "%s", env);
		return dlopen(path, RTLD_NOW | RTLD_LOCAL);
	}
	for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++) {
		snprintf(path, len, "%s", names[i]);
		lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	}
	return lib;
}

int nf_cublaslt_open(nf_cublaslt **out)
{
	nf_cublaslt *lt = calloc(1, sizeof *lt);
	*out = NULL;
	if (!lt)
		return nf_error_set(NF_ENOMEM, "cublaslt: out of memory");
	if (!(lt->lib = open_first(lt->path, sizeof lt->path))) {
		const char *why = dlerror();
		nf_error_set(NF_EENV, "no cuBLASLt: %s", why ? why : "libcublasLt.so.* not found");
		free(lt);
		return NF_EENV;
	}
	for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
		void *sym = dlsym(lt->lib, symbols[i].symbol);
		if (!sym) {
			nf_error_set(NF_EENV, "%s lacks %s", lt->path, symbols[i].symbol);
			nf_cublaslt_free(lt);
			return NF_EENV;
		}
		memcpy((char *)&lt->api + symbols[i].offset, &sym, sizeof sym);
	}
	*out = lt;
	return 0;
}

void nf_cublaslt_free(nf_cublaslt *lt)
{
	if (!lt)
		return;
	if (lt->lib)
		dlclose(lt->lib);
	free(lt);
}

const char *nf_cublaslt_path(const nf_cublaslt *lt) { return lt->path; }

int nf_cublaslt_kind_ok(nf_quant_kind k, int sm)
{
	return k == NF_QUANT_F16 || k == NF_QUANT_BF16 || (k == NF_QUANT_FP8_E4M3 && sm >= 89);
}

int nf_cublaslt_may_choose(void) { return 0; }

static int lt_type(nf_quant_kind k)
{
	return k == NF_QUANT_F16 ? LT_R_16F : k == NF_QUANT_BF16 ? LT_R_16BF : LT_R_8F_E4M3;
}

static int refused(const nf_lt_plan *p, const char *what, lt_status st)
{
	return nf_error_set(NF_EENV, "cublaslt: %s failed for (%d, %d) x %d: status %d", what, p->rows,
			    p->cols, p->n, st);
}

/* The matmul description and the three layouts of the TN product. */
static int describe(nf_lt_plan *p, nf_quant_kind k)
{
	const lt_api *f = &p->lt->api;
	int ta = LT_OP_T, tb = LT_OP_N, type = lt_type(k);
	lt_status st;
	if ((st = f->desc_create(&p->desc, LT_COMPUTE_32F, LT_R_32F)))
		return refused(p, "cublasLtMatmulDescCreate", st);
	if ((st = f->desc_set(p->desc, LT_DESC_TRANSA, &ta, sizeof ta)) ||
	    (st = f->desc_set(p->desc, LT_DESC_TRANSB, &tb, sizeof tb)))
		return refused(p, "cublasLtMatmulDescSetAttribute", st);
	if ((st = f->layout_create(&p->a, type, (uint64_t)p->cols, (uint64_t)p->rows, p->cols)) ||
	    (st = f->layout_create(&p->b, type, (uint64_t)p->cols, (uint64_t)p->n, p->cols)) ||
	    (st = f->layout_create(&p->d, LT_R_32F, (uint64_t)p->rows, (uint64_t)p->n, p->rows)))
		return refused(p, "cublasLtMatrixLayoutCreate", st);
	return 0;
}

static int ask_heuristic(nf_lt_plan *p)
{
	const lt_api *f = &p->lt->api;
	lt_heuristic got[NF_LT_MAX_ALGOS];
	int returned = 0;
	lt_status st;
	memset(got, 0, sizeof got);
	if ((st = f->pref_create(&p->pref)) ||
	    (st = f->pref_set(p->pref, LT_PREF_MAX_WORKSPACE_BYTES, &p->max_workspace,
			      sizeof p->max_workspace)))
		return refused(p, "the matmul preference", st);
	if ((st = f->heuristic(p->handle, p->desc, p->a, p->b, p->d, p->d, p->pref, NF_LT_MAX_ALGOS, got,
			       &returned)))
		return refused(p, "cublasLtMatmulAlgoGetHeuristic", st);
	for (int i = 0; i < returned && i < NF_LT_MAX_ALGOS; i++) {
		if (got[i].state != 0 || got[i].workspace > p->max_workspace)
			continue;
		memcpy(p->algo[p->n_algos].data, got[i].algo, sizeof got[i].algo);
		p->algo[p->n_algos++].workspace = got[i].workspace;
	}
	if (p->n_algos == 0)
		return nf_error_set(NF_EENV, "cublaslt: no algorithm for (%d, %d) x %d", p->rows, p->cols,
				    p->n);
	return 0;
}

int nf_lt_plan_init(nf_lt_plan *p, const nf_cublaslt *lt, nf_quant_kind k, int rows, int cols, int n,
		    size_t max_workspace)
{
	lt_status st;
	memset(p, 0, sizeof *p);
	p->lt = lt;
	p->rows = rows;
	p->cols = cols;
	p->n = n;
	p->max_workspace = max_workspace;
	if (!nf_cublaslt_kind_ok(k, 89))
		return nf_error_set(NF_EINPUT, "cublaslt: no candidate for %s weights",
				    nf_wformat_of(k) ? nf_wformat_of(k)->name : "these");
	if (rows < 1 || cols < 1 || n < 1)
		return nf_error_set(NF_EINPUT, "cublaslt: a (%d, %d) x %d product", rows, cols, n);
	if ((st = lt->api.create(&p->handle)))
		return refused(p, "cublasLtCreate", st);
	int err = describe(p, k);
	return err ? err : ask_heuristic(p);
}

void nf_lt_plan_release(nf_lt_plan *p)
{
	const lt_api *f = p->lt ? &p->lt->api : NULL;
	if (!f)
		return;
	if (p->pref)
		f->pref_destroy(p->pref);
	if (p->d)
		f->layout_destroy(p->d);
	if (p->b)
		f->layout_destroy(p->b);
	if (p->a)
		f->layout_destroy(p->a);
	if (p->desc)
		f->desc_destroy(p->desc);
	if (p->handle)
		f->destroy(p->handle);
	memset(p, 0, sizeof *p);
}

int nf_lt_plan_run(const nf_lt_plan *p, int i, nf_cu_ptr y, nf_cu_ptr w, nf_cu_ptr x,
		   nf_cu_ptr workspace, nf_cu_stream s)
{
	const float one = 1.0f, zero = 0.0f;
	lt_status st;
	if (i < 0 || i >= p->n_algos)
		return nf_error_set(NF_EINPUT, "cublaslt: algorithm %d of %d", i, p->n_algos);
	/* C is D (beta 0): the output is written, not read */
	st = p->lt->api.matmul(p->handle, p->desc, &one, (const void *)(uintptr_t)w, p->a,
			       (const void *)(uintptr_t)x, p->b, &zero, (const void *)(uintptr_t)y, p->d,
			       (void *)(uintptr_t)y, p->d, p->algo[i].data, (void *)(uintptr_t)workspace,
			       p->algo[i].workspace, s);
	return st ? refused(p, "cublasLtMatmul", st) : 0;
}
