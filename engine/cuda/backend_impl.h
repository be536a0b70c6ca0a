/*
 * backend_impl.h - the CUDA backend's state, shared by its two files:
 * backend.c (context, module, device memory, weights) and backend_step.c
 * (the forward pass as launches, and the decode graphs).  Internal.
 */
#ifndef NF_ENGINE_CUDA_BACKEND_IMPL_H
#define NF_ENGINE_CUDA_BACKEND_IMPL_H

#include "engine/cuda/backend.h"
#include "engine/cuda/backend_kernels.h"
#include "engine/roofline.h"

/* A matrix on the device: the kernels' view and the kind that picks them. */
typedef struct nf_cuda_wmat {
	nf_cu_wmat m;
	nf_quant_kind kind;
} nf_cuda_wmat;

typedef struct nf_cuda_layer {
	nf_cuda_wmat wq, wk, wv, wo, w1, w2, w3;
	nf_cu_ptr rms_att, rms_ffn;     /* (dim) */
	nf_cu_ptr bq, bk, bv, bo;       /* (dim|kv_dim); 0 when absent */
} nf_cuda_layer;

/* Activations of a step of up to `rows` tokens (device float32, row-major). */
typedef struct nf_cuda_acts {
	nf_cu_ptr x, xb, xb2, q;        /* (rows, dim) */
	nf_cu_ptr k, v;                 /* (rows, kv_dim) */
	nf_cu_ptr h1, h3;               /* (rows, hidden) */
	nf_cu_ptr xr;                   /* (rows, max(dim, hidden)) fp8-rounded input */
	nf_cu_ptr logits;               /* (rows, vocab) */
	nf_cu_ptr cs;                   /* (rows, head_size) RoPE cos/sin */
	nf_cu_ptr tokens, next;         /* (rows) int */
	nf_cu_ptr part_o, part_ml;      /* decode attention's splits, one sequence */
} nf_cuda_acts;

/* A tuned choice: the variant of the product for a shape at a batch. */
typedef struct nf_cuda_choice {
	nf_quant_kind kind;
	int rows, cols, batch;
	nf_cu_variant variant;
} nf_cuda_choice;

struct nf_cuda_backend {
	const nf_cuda_driver *d;
	const nf_cuda_api *api;
	const nf_model_config *cfg;
	int ordinal;
	int sm;
	nf_roofline_gpu model;          /* the device as the roofline model costs it */
	nf_cu_context ctx;
	nf_cu_module mod;
	nf_cu_stream stream;
	nf_cuk_table k;
	/* every allocation, freed together */
	nf_cu_ptr *allocs;
	size_t n_allocs, cap_allocs;
	uint64_t weight_bytes;
	/* weights */
	nf_cuda_wmat emb, cls;
	nf_cu_ptr rms_final;
	nf_cuda_layer *layers;
	/* state */
	nf_kv_kind kv;
	size_t head_stride;             /* bytes between a KV head's rows and the next's */
	nf_cu_ptr *kc, *vc;             /* (max_batch) per slot */
	int max_batch, max_prefill, rows;
	nf_cuda_acts a;
	/* host staging */
	float *inv_freq;                /* (head_size / 2) */
	float *cs;                      /* (rows, head_size) */
	int no_graphs;
	nf_cuda_choice *choice;         /* (n_choice) from nf_cuda_backend_tune */
	size_t n_choice;
	nf_cu_graph_exec graph[NF_CUDA_MAX_BATCH + 1];
	int n_graphs;
};

/* cuMemAlloc of bytes, remembered for nf_cuda_backend_free; NF_EENV. */
int nf_cuda_backend_alloc(nf_cuda_backend *b, nf_cu_ptr *out, size_t bytes, const char *what);
/* NF_EENV "cuda: WHAT failed: CUDA error ..." for a driver result. */
int nf_cuda_backend_fail(const nf_cuda_backend *b, const char *what, nf_cu_result rc);

/* Most timed runs a tactic gets (nf_cuda_time_median's runs). */
#define NF_CUDA_TUNE_RUNS_MAX 64

/* What the tuners time with: two events on b's stream, and the untimed
 * and timed runs each candidate gets. */
typedef struct nf_cuda_stopwatch {
	nf_cu_event start, stop;
	int warmup, runs;
} nf_cuda_stopwatch;

/* NF_EINPUT "WHO: W warm-up and R timed runs (0..1000, 1..MAX)" unless
 * 0 <= warmup <= 1000 and 1 <= runs <= NF_CUDA_TUNE_RUNS_MAX. */
int nf_cuda_stopwatch_check(const char *who, int warmup, int runs);
/* sw's events created (warmup and runs already set); NF_EENV when the
 * driver refuses.  nf_cuda_stopwatch_release frees what was made. */
int nf_cuda_stopwatch_start(nf_cuda_backend *b, nf_cuda_stopwatch *sw);
void nf_cuda_stopwatch_release(nf_cuda_backend *b, nf_cuda_stopwatch *sw);

/* The median microseconds of run(arg) on b's stream: sw->warmup untimed
 * calls, then sw->runs each between sw's events.  run's error, or the
 * driver's refusal naming `what`. */
int nf_cuda_time_median(nf_cuda_backend *b, const nf_cuda_stopwatch *sw, int (*run)(void *arg),
			void *arg, const char *what, double *median_us);

/* The most rows and the most columns among the n matrices m (at least 1
 * each, so a buffer sized from them is never empty): the timing buffers
 * that every shape tuned fits in. */
void nf_cuda_wmat_widest(size_t *rows, size_t *cols, const nf_cuda_wmat *const *m, size_t n);

/* Launch variant v for w at batch (a power of two), as tuning chose. */
int nf_cuda_backend_choose(nf_cuda_backend *b, const nf_cuda_wmat *w, int batch, nf_cu_variant v);
/* The variant w at n tokens runs: the tuned choice of the largest power of
 * two <= n (a GEMM only for more than one token), else the roofline
 * model's for this device (engine/roofline.h). */
nf_cu_variant nf_cuda_backend_variant(const nf_cuda_backend *b, const nf_cuda_wmat *w, int n,
				      int prefill);

/* The distinct matrices of the model (a layer's shapes repeat; at most 8). */
size_t nf_cuda_tune_distinct(const nf_cuda_wmat **out, const nf_cuda_backend *b);

/* The RoPE table of n positions into b->cs, uploaded on the stream. */
int nf_cuda_step_upload(nf_cuda_backend *b, const int *tokens, const int *pos, int n);
/* The layers, final norm, classifier and argmax of a decode step for the
 * slots (enqueued on the stream, not synchronised). */
int nf_cuda_step_decode(nf_cuda_backend *b, const int *slots, const int *pos, int n);
/* The layers of a prefill pass of n tokens of slot at pos0 ... */
int nf_cuda_step_prefill(nf_cuda_backend *b, int slot, int pos0, int n);
/* The final norm of activation rows [r0, r0 + n), the classifier into
 * logits rows 0 .. n - 1 (n <= max_batch) and their argmax. */
int nf_cuda_step_head(nf_cuda_backend *b, int r0, int n);
/* Where slot s's K (or V, c = b->vc) cache of layer l and KV head g begins. */
nf_cu_ptr nf_cuda_cache_rows(const nf_cuda_backend *b, const nf_cu_ptr *c, int s, int l, int g);

#endif
