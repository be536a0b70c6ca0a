/*
 * cpu.h - the CPU backend: kernel families (scalar, avx2, avx512-vnni), the
 * choice among them by CPU features, and the thread pool that splits work.
 */
#ifndef NF_ENGINE_CPU_CPU_H
#define NF_ENGINE_CPU_CPU_H

#include <stddef.h>

#include "engine/backend.h"

extern const nf_backend_ops nf_cpu_scalar_ops;
extern const nf_backend_ops nf_cpu_avx2_ops;
extern const nf_backend_ops nf_cpu_avx512_ops;

/* Every family, best first (whether or not available here); NULL-terminated. */
const nf_backend_ops *const *nf_cpu_families(void);
/* The best family this CPU runs (never NULL: scalar always runs). */
const nf_backend_ops *nf_cpu_best(void);
/* The family called `name` if it exists and runs here, else NULL. */
const nf_backend_ops *nf_cpu_find(const char *name);

/* Shared portable implementations of the small ops (scalar.c), which the
 * SIMD families reuse where the op is not worth specialising. */
void nf_cpu_rmsnorm_ref(float *out, const float *x, const float *w, int n, float eps);
void nf_cpu_rope_ref(float *v, int n, int head_size, const float *cs);
void nf_cpu_softmax_ref(float *x, int n);
void nf_cpu_attention_ref(float *out, const float *q, const float *kc, const float *vc, int pos,
			  int h0, int h1, int n_heads, int n_kv_heads, int head_size, size_t head_stride,
			  float *att);
void nf_cpu_swiglu_ref(float *h1, const float *h3, int n);

/* Thread pool: `threads` workers including the caller (thread 0). */
typedef struct nf_pool nf_pool;
/* Run chunk number `chunk` of a job on thread tid (0 = the caller). */
typedef void (*nf_pool_chunk_fn)(void *ctx, int chunk, int tid);
#define NF_POOL_MAX_CHUNKS 0xfffff
/* threads <= 0 means all online CPUs.  Caller owns *out. */
int nf_pool_new(nf_pool **out, int threads);
void nf_pool_free(nf_pool *p); /* NULL is fine */
int nf_pool_threads(const nf_pool *p);
/* Run fn(ctx, i, tid) for i in [0, chunks) on the caller and the workers, each
 * chunk exactly once, chunks claimed dynamically (a descheduled worker does
 * not hold the others up); returns when all are done. */
void nf_pool_run_chunks(nf_pool *p, nf_pool_chunk_fn fn, void *ctx, int chunks);

/* Rows [*r0, *r1) of `rows` for thread tid of n, boundaries multiples of 16. */
void nf_pool_split(int *r0, int *r1, int rows, int tid, int n);

#endif
