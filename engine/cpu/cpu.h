/*
 * cpu.h - the CPU backend: kernel families (scalar, avx2, avx512-vnni,
 * avx512-bf16), the choice among them by CPU features, and the thread pool
 * that splits work.
 */
#ifndef NF_ENGINE_CPU_CPU_H
#define NF_ENGINE_CPU_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "engine/backend.h"

extern const nf_backend_ops nf_cpu_scalar_ops;
extern const nf_backend_ops nf_cpu_avx2_ops;
extern const nf_backend_ops nf_cpu_avx512_ops;
extern const nf_backend_ops nf_cpu_avx512bf16_ops;

/* CPU features the kernel families need, detected in one place (cpu.c). */
enum {
	NF_CPU_AVX2 = 1 << 0,
	NF_CPU_FMA = 1 << 1,
	NF_CPU_F16C = 1 << 2,
	NF_CPU_AVX512F = 1 << 3,
	NF_CPU_AVX512BW = 1 << 4,
	NF_CPU_AVX512VL = 1 << 5,
	NF_CPU_AVX512VNNI = 1 << 6,
	NF_CPU_AVX512BF16 = 1 << 7,
	NF_CPU_GFNI = 1 << 8,
};
/* 1 when this CPU (and the OS, for the AVX state) has every feature in mask. */
int nf_cpu_has(unsigned mask);

/* Every family, best first (whether or not available here); NULL-terminated. */
const nf_backend_ops *const *nf_cpu_families(void);
/* The best family this CPU runs (never NULL: scalar always runs). */
const nf_backend_ops *nf_cpu_best(void);
/* The family called `name` if it exists and runs here, else NULL. */
const nf_backend_ops *nf_cpu_find(const char *name);

/* The int4-group GEMM of each family (gemm_q4.c), bit-identical to each
 * other. */
void nf_cpu_gemm_q4_scalar(float *y, size_t ldy, const nf_bk_matrix *w, const int8_t *xq,
			   size_t ldx, const float *xs, size_t n, int r0, int r1, int accumulate);
/* Needs AVX2, FMA and F16C (the avx2 family's features). */
void nf_cpu_gemm_q4_avx2(float *y, size_t ldy, const nf_bk_matrix *w, const int8_t *xq,
			 size_t ldx, const float *xs, size_t n, int r0, int r1, int accumulate);
/* Needs AVX-512 F/BW/VL and VNNI (the avx512-vnni family's features). */
void nf_cpu_gemm_q4_avx512(float *y, size_t ldy, const nf_bk_matrix *w, const int8_t *xq,
			   size_t ldx, const float *xs, size_t n, int r0, int r1, int accumulate);

/* Shared portable implementations of the small ops (scalar.c), which the
 * SIMD families reuse where the op is not worth specialising. */
void nf_cpu_rmsnorm_ref(float *out, const float *x, const float *w, int n, float eps);
void nf_cpu_rope_ref(float *v, int n, int head_size, const float *cs);
void nf_cpu_softmax_ref(float *x, int n);
void nf_cpu_attention_ref(float *out, const float *q, const void *kc, const void *vc,
			  nf_kv_kind kind, int pos, int h0, int h1, int n_heads, int n_kv_heads,
			  int head_size, size_t head_stride, float *att);
void nf_cpu_to_f16_ref(uint16_t *h, const float *x, int n);
/* The attention slot of the SIMD families over an int8 cache (NF_KV_INT8,
 * backend.h; attention_kv8_avx2.c, attention_kv8_avx512.c). */
void nf_cpu_attention_kv8_avx2(float *out, const float *q, const void *kc, const void *vc, int pos,
			       int h0, int h1, int n_heads, int n_kv_heads, int head_size,
			       size_t head_stride, float *att);
void nf_cpu_attention_kv8_avx512(float *out, const float *q, const void *kc, const void *vc,
				 int pos, int h0, int h1, int n_heads, int n_kv_heads,
				 int head_size, size_t head_stride, float *att);
/* Element i of a KV cache row of floats, or of IEEE halves when f16. */
float nf_cpu_kv_at(const void *c, size_t i, int f16);
/* The scale of an NF_KV_INT8 cache row (its first 4 bytes; the int8 follow). */
float nf_cpu_kv8_scale(const void *row);
void nf_cpu_swiglu_ref(float *h1, const float *h3, int n);

/* gemm_h16 (backend.h) of each family (gemm_h16.c): row-major f16 or bf16
 * weights; all three give bit-identical results (the order of the sums is
 * gemm_h16.c's). */
void nf_cpu_gemm_h16_scalar(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
			    size_t ldx, size_t n, int r0, int r1, int accumulate);
void nf_cpu_gemm_h16_avx2(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
			  size_t ldx, size_t n, int r0, int r1, int accumulate);
void nf_cpu_gemm_h16_avx512(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
			    size_t ldx, size_t n, int r0, int r1, int accumulate);
/* The fp8 e4m3 kernels of each family (gemm_f8.c; backend.h gemm_f8 and
 * round_f8): round_f8 gives the scalar one's bits in every family,
 * gemm_f8 sums within the error bound that gemm_f8.c states. */
void nf_cpu_gemm_f8_scalar(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
			   size_t ldx, size_t n, int r0, int r1, int accumulate);
void nf_cpu_round_f8_scalar(float *out, const float *x, float inv_scale, int n);
void nf_cpu_gemm_f8_avx2(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
			 size_t ldx, size_t n, int r0, int r1, int accumulate);
void nf_cpu_round_f8_avx2(float *out, const float *x, float inv_scale, int n);
void nf_cpu_gemm_f8_avx512(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
			   size_t ldx, size_t n, int r0, int r1, int accumulate);
void nf_cpu_round_f8_avx512(float *out, const float *x, float inv_scale, int n);
/* The avx512-bf16 family's: decode by bf16 dot products, the rest as
 * nf_cpu_gemm_f8_avx512.  Needs AVX512_BF16 and GFNI besides. */
void nf_cpu_gemm_f8_avx512bf16(float *y, size_t ldy, const nf_bk_matrix *w, const float *x,
			       size_t ldx, size_t n, int r0, int r1, int accumulate);

/* Thread pool: `threads` workers including the caller (thread 0). */
typedef struct nf_pool nf_pool;
/* Run units [u0, u1) of a job on thread tid (0 = the caller). */
typedef void (*nf_pool_range_fn)(void *ctx, int u0, int u1, int tid);
/* Run chunk number `chunk` of a job on thread tid. */
typedef void (*nf_pool_chunk_fn)(void *ctx, int chunk, int tid);
#define NF_POOL_MAX_UNITS 0xfffff
/* threads <= 0 means all online CPUs.  Caller owns *out. */
int nf_pool_new(nf_pool **out, int threads);
void nf_pool_free(nf_pool *p); /* NULL is fine */
int nf_pool_threads(const nf_pool *p);
/* Run fn over units [0, units), each unit exactly once, on the caller and
 * the workers; returns when all are done.  Thread t owns the t-th of n
 * equal contiguous shares and runs it front to back; then it takes pieces
 * from the back of the share with the most left (a descheduled thread
 * holds nobody up).  Each call gets at most `grain` units, and at most
 * half of what was left of the share. */
void nf_pool_run_ranges(nf_pool *p, nf_pool_range_fn fn, void *ctx, int units, int grain);
/* nf_pool_run_ranges one unit (chunk) per call. */
void nf_pool_run_chunks(nf_pool *p, nf_pool_chunk_fn fn, void *ctx, int chunks);

#endif
