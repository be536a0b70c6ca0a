/*
 * kernels.c - on a GPU: the CUDA kernels of engine/cuda against the CPU on
 * random inputs, printed as TAP (tests/gpu/run.sh runs it; not part of
 * `make check`, which has no GPU).  Usage: kernels FATBIN_OR_CUBIN
 *
 * Every weight format's GEMV and GEMM at several shapes and batches, each
 * output held to a float64 product of the same dequantised weights (and,
 * for fp8, the same e4m3-rounded activations), within a bound per format
 * relative to the sum of |w x| of the row; RMSNorm, SwiGLU, the residual
 * add and argmax likewise.  Attention, RoPE and the KV append are held to
 * the CPU by the greedy text of a whole engine (run.sh).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/backend_kernels.h"
#include "engine/cuda/driver.h"
#include "engine/quant.h"
#include "engine/wformat.h"
#include "util/error.h"
#include "util/fs.h"
#include "tests/tap.h"

static const nf_cuda_driver *drv;
static const nf_cuda_api *api;
static nf_cuk_table table;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float uniform(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static nf_cu_ptr to_dev(const void *host, size_t bytes)
{
	nf_cu_ptr p = 0;
	if (api->cuMemAlloc(&p, bytes ? bytes : 1) || (bytes && api->cuMemcpyHtoD(p, host, bytes)))
		return 0;
	return p;
}

/* A (rows, cols) random matrix in kind's format, its device view and the
 * dequantised rows the CPU reads. */
typedef struct mat {
	nf_cu_wmat dev;
	float *deq;
	nf_cu_ptr data, aux;
} mat;

static int make_mat(mat *m, nf_quant_kind kind, int rows, int cols, int group)
{
	const nf_wformat *f = nf_wformat_of(kind);
	size_t n = (size_t)rows * (size_t)cols, dbytes = nf_wformat_data_bytes(f, rows, cols);
	size_t aux_n = (size_t)rows * nf_wformat_aux_cols(f, cols, group), abytes = aux_n * nf_wformat_aux_size(f);
	float *w = malloc(n * sizeof *w);
	void *data = calloc(1, dbytes), *aux = calloc(1, abytes + 1);
	nf_bk_matrix view = {0};
	int err;

	for (size_t i = 0; i < n; i++)
		w[i] = 0.1f * uniform();
	err = nf_wformat_quantize(f, data, aux, w, rows, cols, group, "random");
	view.kind = kind, view.rows = rows, view.cols = cols, view.group = group, view.act_scale = 1;
	view.f32 = data, view.q8 = data, view.h16 = data, view.q4 = data, view.f8 = data;
	view.gsm = aux, view.scale = aux;
	m->deq = malloc(n * sizeof *m->deq);
	for (int r = 0; !err && r < rows; r++)
		nf_wformat_row_f32(m->deq + (size_t)r * cols, &view, (size_t)r);
	memset(&m->dev, 0, sizeof m->dev);
	m->data = to_dev(data, dbytes);
	m->aux = abytes ? to_dev(aux, abytes) : 0;
	m->dev.data = (const void *)(uintptr_t)m->data;
	m->dev.rows = rows, m->dev.cols = cols, m->dev.group = group, m->dev.act_scale = 1;
	if (f->aux == NF_AUX_ROW_SCALE)
		m->dev.scale = (const float *)(uintptr_t)m->aux;
	else
		m->dev.aux = (const void *)(uintptr_t)m->aux;
	free(w);
	free(data);
	free(aux);
	return err || !m->data ? -1 : 0;
}

/* The bound of a format, relative to sum |w x| of a row: float32 sums in
 * another order; fp8 activations are rounded on both sides alike. */
static double bound_of(nf_quant_kind k) { return k == NF_QUANT_NONE ? 2e-5 : 1e-4; }

static void check_product(nf_quant_kind kind, const char *name, int rows, int cols, int n,
			  nf_cu_variant v)
{
	mat m;
	size_t nx = (size_t)n * cols, ny = (size_t)n * rows;
	float *x = malloc(nx * sizeof *x), *y = malloc(ny * sizeof *y);
	double worst = 0;
	int group = kind == NF_QUANT_INT4_GROUP ? 32 : 0, accumulate = 0;
	nf_cu_ptr dx, dy;
	size_t ldx = (size_t)cols, ldy = (size_t)rows;

	for (size_t i = 0; i < nx; i++)
		x[i] = kind == NF_QUANT_FP8_E4M3 ? nf_fp8_e4m3_round(4 * uniform()) : uniform();
	if (make_mat(&m, kind, rows, cols, group)) {
		ok(0, "%s %dx%d: quantize and upload", name, rows, cols);
		goto done;
	}
	dx = to_dev(x, nx * sizeof *x);
	dy = to_dev(y, ny * sizeof *y);
	void *p[] = {&dy, &ldy, &m.dev, &dx, &ldx, &n, &accumulate};
	nf_cuk_id id = nf_cuk_product(kind, v);
	nf_cu_launch l = nf_cu_launch_variant(v, rows, n);
	const char *vname = nf_cu_variant_of(v).name;
	if (nf_cuk_launch(&table, drv, NULL, id, l, p) || api->cuCtxSynchronize() ||
	    api->cuMemcpyDtoH(y, dy, ny * sizeof *y)) {
		ok(0, "%s %s %dx%d n=%d: %s", vname, name, rows, cols, n, nf_error_last());
		goto done;
	}
	for (int b = 0; b < n; b++)
		for (int r = 0; r < rows; r++) {
			double ref = 0, mag = 1e-30;
			for (int c = 0; c < cols; c++) {
				double t = (double)m.deq[(size_t)r * cols + c] * x[(size_t)b * cols + c];
				ref += t;
				mag += fabs(t);
			}
			double e = fabs(y[(size_t)b * rows + r] - ref) / mag;
			worst = e > worst ? e : worst;
		}
	ok(worst <= bound_of(kind), "%s %s %dx%d n=%d: worst error %.2g of sum|wx| (bound %.0e)",
	   vname, name, rows, cols, n, worst, bound_of(kind));
	api->cuMemFree(dx);
	api->cuMemFree(dy);
	api->cuMemFree(m.data);
	if (m.aux)
		api->cuMemFree(m.aux);
done:
	free(m.deq);
	free(x);
	free(y);
}

static void check_products(int sm)
{
	static const struct { nf_quant_kind k; const char *name; int sm; } kinds[] = {
		{NF_QUANT_NONE, "f32", 75}, {NF_QUANT_F16, "f16", 75}, {NF_QUANT_BF16, "bf16", 75},
		{NF_QUANT_INT8_ROW, "q8", 75}, {NF_QUANT_INT4_GROUP, "q4", 75},
		{NF_QUANT_FP8_E4M3, "f8", 89},
	};
	static const int shapes[][2] = {{64, 64}, {192, 576}, {1000, 1536}, {4096, 4096}};
	static const int batches[] = {1, 3, 16, 64};
	for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
		if (kinds[k].sm > sm) {
			skip("%s: sm_%d has no such kernels", kinds[k].name, sm);
			continue;
		}
		for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
			for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
				for (int v = 0; v < NF_CU_VARIANTS; v++) /* every tactic's kernel */
					check_product(kinds[k].k, kinds[k].name, shapes[s][0], shapes[s][1],
						      batches[b], (nf_cu_variant)v);
	}
}

/* RMSNorm, SwiGLU and add of random rows, and argmax, against plain C. */
static void check_rows(void)
{
	enum { N = 7, DIM = 576 };
	float x[N * DIM], w[DIM], h3[N * DIM], out[N * DIM];
	int idx[N];
	for (int i = 0; i < N * DIM; i++)
		x[i] = 3 * uniform(), h3[i] = uniform();
	for (int i = 0; i < DIM; i++)
		w[i] = uniform();
	nf_cu_ptr dx = to_dev(x, sizeof x), dw = to_dev(w, sizeof w), dh = to_dev(h3, sizeof h3);
	nf_cu_ptr dout = to_dev(out, sizeof out), didx = to_dev(idx, sizeof idx);
	int dim = DIM, n = N;
	float eps = 1e-5f;
	size_t ld = DIM, count = (size_t)N * DIM;
	double worst = 0;

	void *pn[] = {&dout, &dx, &dw, &dim, &eps, &ld};
	if (nf_cuk_launch(&table, drv, NULL, NF_CUK_nf_cu_rmsnorm, nf_cu_launch_rows(n), pn) == 0 &&
	    api->cuMemcpyDtoH(out, dout, sizeof out) == 0)
		for (int r = 0; r < N; r++) {
			double ss = 0;
			for (int i = 0; i < DIM; i++)
				ss += (double)x[r * DIM + i] * x[r * DIM + i];
			double inv = 1 / sqrt(ss / DIM + eps);
			for (int i = 0; i < DIM; i++) {
				double e = fabs(out[r * DIM + i] - x[r * DIM + i] * inv * w[i]);
				worst = e > worst ? e : worst;
			}
		}
	ok(worst < 1e-5, "rmsnorm: worst error %.2g", worst);

	void *ps[] = {&dx, &dh, &count};
	worst = 0;
	if (nf_cuk_launch(&table, drv, NULL, NF_CUK_nf_cu_swiglu, nf_cu_launch_elementwise(count), ps) == 0 &&
	    api->cuMemcpyDtoH(out, dx, sizeof out) == 0)
		for (int i = 0; i < N * DIM; i++) {
			double s = x[i] / (1 + exp(-(double)x[i])) * h3[i];
			worst = fabs(out[i] - s) > worst ? fabs(out[i] - s) : worst;
		}
	ok(worst < 1e-5, "swiglu: worst error %.2g", worst);

	int vocab = DIM;
	void *pa[] = {&didx, &dh, &vocab, &ld};
	int good = nf_cuk_launch(&table, drv, NULL, NF_CUK_nf_cu_argmax, nf_cu_launch_rows(n), pa) == 0 &&
		   api->cuMemcpyDtoH(idx, didx, sizeof idx) == 0;
	for (int r = 0; good && r < N; r++) {
		int best = 0;
		for (int i = 1; i < DIM; i++)
			best = h3[r * DIM + i] > h3[r * DIM + best] ? i : best;
		good = idx[r] == best;
	}
	ok(good, "argmax of %d rows", N);
}

int main(int argc, char **argv)
{
	nf_cuda_driver *d = NULL;
	nf_cuda_device dev;
	nf_cu_context ctx;
	nf_cu_module mod = NULL;
	char *image = NULL;
	size_t len;

	if (argc != 2) {
		fprintf(stderr, "usage: kernels FATBIN_OR_CUBIN\n");
		return 2;
	}
	if (nf_cuda_driver_open(&d) || nf_cuda_device_query(&dev, d, 0) ||
	    nf_cuda_context_retain(&ctx, d, 0)) {
		printf("1..0 # SKIP no GPU: %s\n", nf_error_last());
		return 0;
	}
	drv = d;
	api = nf_cuda_driver_api(d);
	if (nf_fs_read_file(&image, &len, argv[1], 1u << 30) || api->cuModuleLoadData(&mod, image) ||
	    nf_cuk_resolve(&table, d, mod, dev.major * 10 + dev.minor)) {
		ok(0, "load %s on %s: %s", argv[1], dev.name, nf_error_last());
		return done_testing();
	}
	printf("# %s (sm_%d%d)\n", dev.name, dev.major, dev.minor);
	check_products(dev.major * 10 + dev.minor);
	check_rows();
	api->cuModuleUnload(mod);
	nf_cuda_context_release(d, 0);
	nf_cuda_driver_free(d);
	free(image);
	return done_testing();
}
