/*
 * launch.h - the launch contract of the CUDA kernels (the .cu files here),
 * shared by both sides: the host that launches them (through the driver
 * table of engine/cuda/driver.h, cuLaunchKernel with the parameters in the
 * order of each kernel's signature below) and the kernels, which are
 * compiled for exactly these block sizes (__launch_bounds__).  Plain C11, so
 * the CPU tools and tests read it without a CUDA toolkit.
 *
 * Every kernel is `extern "C"`, so cuModuleGetFunction finds it by the name
 * listed in NF_CU_KERNELS.  Pointers are device addresses; activations are
 * float32 vectors 16-byte aligned with strides (ld*) that are multiples of 4
 * floats; a KV cache is laid out as engine/backend.h's attention slot says
 * (head-major, nf_kv_row_bytes per row, head_stride bytes between heads).
 */
#ifndef NF_ENGINE_CUDA_LAUNCH_H
#define NF_ENGINE_CUDA_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#define NF_CU_WARP 32
#define NF_CU_BLOCK 256          /* row-wise and element-wise kernels */
#define NF_CU_GEMV_ROWS 4        /* GEMV: one warp per output row, 4 rows a block */
#define NF_CU_GEMM_TILE 64       /* GEMM: 64 outputs x 64 tokens a block, 4 x 4 a thread */
#define NF_CU_GEMM_K 32          /* GEMM: columns per shared-memory stage */
#define NF_CU_GEMV_SPLIT 4       /* split-K GEMV: warps on one row, each every 4th chunk */
#define NF_CU_GEMM_SHORT 16      /* short GEMM: 64 outputs x 16 tokens a block, 4 x 1 a thread */
#define NF_CU_HEAD_MAX 128       /* attention: head_size <= 128 (4 elements a lane) */
#define NF_CU_ATTN_WARPS 4       /* attention: 4 warps a block */
#define NF_CU_ATTN_TILE 16       /* prefill attention: key positions a shared tile */
#define NF_CU_DECODE_SPLIT 256   /* decode attention: cache positions a split */
#define NF_CU_TOPK_MAX 64        /* sampling: at most 64 candidates */

/* fp8 is a precision of sm_89 and newer only (engine/sku.c): the device
 * code of older architectures has no fp8 kernels, so asking a cubin of
 * theirs for one fails by name.  nvcc's host pass (a runtime-API build)
 * still declares them, for its launch stubs. */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
#define NF_CU_HAS_FP8 1
#else
#define NF_CU_HAS_FP8 0
#endif

/* A weight matrix as the GEMV/GEMM kernels take it (by value), for every
 * format of engine/wformat.h, packed as docs/quantization.md says:
 *   f32, f16, bf16: data (rows, cols) elements
 *   q8:  data (rows, cols) int8, scale (rows) floats
 *   q4:  data (rows, ceil(cols / 32) * 16) bytes, aux (rows, groups, 2)
 *        IEEE-half scale and min, group 32, 64 or 128
 *   f8:  data (rows, cols) e4m3 codes, scale (rows), act_scale; the
 *        activations already on the e4m3 grid (nf_cu_round_f8) */
typedef struct nf_cu_wmat {
	const void *data;
	const void *aux;
	const float *scale;
	int rows, cols, group;
	float act_scale;
} nf_cu_wmat;

/* Grid and block of one launch; shared memory is static (ptxas counts it). */
typedef struct nf_cu_launch {
	unsigned grid[3];
	unsigned block[3];
} nf_cu_launch;

static inline unsigned nf_cu_div_up(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }

static inline nf_cu_launch nf_cu_launch_of(unsigned gx, unsigned gy, unsigned gz, unsigned block)
{
	nf_cu_launch l = {{gx, gy, gz}, {block, 1, 1}};
	return l;
}

/* Every kernel: X(name, block threads, lowest sm).  The static checks
 * (tests/e2e/cuda_static.sh) read this list for the occupancy of each. */
#define NF_CU_WEIGHT_KERNELS(X, fmt, sm)                                                   \
	X(nf_cu_embed_##fmt, NF_CU_BLOCK, sm)                                              \
	X(nf_cu_gemv_##fmt, NF_CU_GEMV_ROWS * NF_CU_WARP, sm)                              \
	X(nf_cu_gemv_sk_##fmt, NF_CU_GEMV_SPLIT * NF_CU_WARP, sm)                          \
	X(nf_cu_gemv_v32_##fmt, NF_CU_GEMV_ROWS * NF_CU_WARP, sm)                          \
	X(nf_cu_gemm_##fmt, NF_CU_BLOCK, sm)                                               \
	X(nf_cu_gemm_n16_##fmt, NF_CU_BLOCK, sm)
#define NF_CU_KERNELS(X)                                                                   \
	NF_CU_WEIGHT_KERNELS(X, f32, 75)                                                   \
	NF_CU_WEIGHT_KERNELS(X, f16, 75)                                                   \
	NF_CU_WEIGHT_KERNELS(X, bf16, 75)                                                  \
	NF_CU_WEIGHT_KERNELS(X, q8, 75)                                                    \
	NF_CU_WEIGHT_KERNELS(X, q4, 75)                                                    \
	NF_CU_WEIGHT_KERNELS(X, f8, 89)                                                    \
	X(nf_cu_round_f8, NF_CU_BLOCK, 89)                                                 \
	X(nf_cu_rmsnorm, NF_CU_BLOCK, 75)                                                  \
	X(nf_cu_rope, NF_CU_BLOCK, 75)                                                     \
	X(nf_cu_kv_append_f16, NF_CU_HEAD_MAX, 75)                                         \
	X(nf_cu_kv_append_int8, NF_CU_HEAD_MAX, 75)                                        \
	X(nf_cu_attn_decode_f16, NF_CU_ATTN_WARPS * NF_CU_WARP, 75)                        \
	X(nf_cu_attn_decode_int8, NF_CU_ATTN_WARPS * NF_CU_WARP, 75)                       \
	X(nf_cu_attn_decode_reduce, NF_CU_HEAD_MAX, 75)                                    \
	X(nf_cu_attn_prefill_f16, NF_CU_ATTN_WARPS * NF_CU_WARP, 75)                       \
	X(nf_cu_attn_prefill_int8, NF_CU_ATTN_WARPS * NF_CU_WARP, 75)                      \
	X(nf_cu_swiglu, NF_CU_BLOCK, 75)                                                   \
	X(nf_cu_add, NF_CU_BLOCK, 75)                                                      \
	X(nf_cu_argmax, NF_CU_BLOCK, 75)                                                   \
	X(nf_cu_sample, NF_CU_BLOCK, 75)

/* ---- the launches, one helper per kernel (the signature above it) ---- */

/* nf_cu_embed_<fmt>(float *out, nf_cu_wmat table, const int *tokens, int n,
 * size_t ldo): out[b*ldo + c] = row tokens[b] of table, as floats. */
static inline nf_cu_launch nf_cu_launch_embed(int n, int cols)
{
	return nf_cu_launch_of(nf_cu_div_up((size_t)cols, NF_CU_BLOCK), (unsigned)n, 1, NF_CU_BLOCK);
}

/* nf_cu_gemv_<fmt>(float *y, size_t ldy, nf_cu_wmat w, const float *x,
 * size_t ldx, int n, int accumulate): y[b*ldy + r] (+)= sum_c W[r,c] x[b*ldx + c]
 * for the n vectors (decode: n is the batch). */
static inline nf_cu_launch nf_cu_launch_gemv(int rows, int n)
{
	return nf_cu_launch_of(nf_cu_div_up((size_t)rows, NF_CU_GEMV_ROWS), (unsigned)n, 1,
			       NF_CU_GEMV_ROWS * NF_CU_WARP);
}

/* nf_cu_gemm_<fmt>(...) with gemv's signature: the tiled product for many
 * vectors (prefill), each weight tile dequantised once into shared memory. */
static inline nf_cu_launch nf_cu_launch_gemm(int rows, int n)
{
	return nf_cu_launch_of(nf_cu_div_up((size_t)rows, NF_CU_GEMM_TILE),
			       nf_cu_div_up((size_t)n, NF_CU_GEMM_TILE), 1, NF_CU_BLOCK);
}

/* nf_cu_gemv_sk_<fmt>(...) with gemv's signature: a row a block, split
 * over NF_CU_GEMV_SPLIT warps. */
static inline nf_cu_launch nf_cu_launch_gemv_sk(int rows, int n)
{
	return nf_cu_launch_of((unsigned)rows, (unsigned)n, 1, NF_CU_GEMV_SPLIT * NF_CU_WARP);
}

/* nf_cu_gemm_n16_<fmt>(...) with gemv's signature: 64 outputs x 16 tokens
 * a block. */
static inline nf_cu_launch nf_cu_launch_gemm_n16(int rows, int n)
{
	return nf_cu_launch_of(nf_cu_div_up((size_t)rows, NF_CU_GEMM_TILE),
			       nf_cu_div_up((size_t)n, NF_CU_GEMM_SHORT), 1, NF_CU_BLOCK);
}

/* The variants of a matrix product, one kernel each per format, in
 * NF_CU_WEIGHT_KERNELS's order after the embedding: the candidates the
 * tactics time on a GPU (engine/cuda/backend_tune.c) or cost where none is
 * (engine/roofline.h). */
typedef enum nf_cu_variant {
	NF_CU_VAR_GEMV,     /* NF_CU_GEMV_ROWS rows a block, a warp a row */
	NF_CU_VAR_GEMV_SK,  /* a row a block, split-K over NF_CU_GEMV_SPLIT warps */
	NF_CU_VAR_GEMV_V32, /* as GEMV, two 16-byte chunks a lane in flight */
	NF_CU_VAR_GEMM,     /* 64 x 64 tiles */
	NF_CU_VAR_GEMM_N16, /* 64 x 16 tiles */
	NF_CU_VARIANTS
} nf_cu_variant;

/* What a variant is, as the timing cache and the tactics report say it. */
typedef struct nf_cu_variant_shape {
	const char *name;  /* "gemv_sk": the kernel is nf_cu_<name>_<fmt> */
	int tile_rows;     /* outputs a block */
	int tile_tokens;   /* tokens a block */
	int split_k;       /* warps (parts) on one row's columns */
	int vector_bytes;  /* bytes a lane reads at once */
	int warps;         /* warps a block */
} nf_cu_variant_shape;

static inline nf_cu_variant_shape nf_cu_variant_of(nf_cu_variant v)
{
	/* in the enum's order (no designators: nvcc's C++ reads this too) */
	static const nf_cu_variant_shape shapes[NF_CU_VARIANTS] = {
		{"gemv", NF_CU_GEMV_ROWS, 1, 1, 16, NF_CU_GEMV_ROWS},
		{"gemv_sk", 1, 1, NF_CU_GEMV_SPLIT, 16, NF_CU_GEMV_SPLIT},
		{"gemv_v32", NF_CU_GEMV_ROWS, 1, 1, 32, NF_CU_GEMV_ROWS},
		{"gemm", NF_CU_GEMM_TILE, NF_CU_GEMM_TILE, 1, 4, NF_CU_BLOCK / NF_CU_WARP},
		{"gemm_n16", NF_CU_GEMM_TILE, NF_CU_GEMM_SHORT, 1, 4, NF_CU_BLOCK / NF_CU_WARP},
	};
	return shapes[(unsigned)v < NF_CU_VARIANTS ? v : NF_CU_VAR_GEMV];
}

static inline nf_cu_launch nf_cu_launch_variant(nf_cu_variant v, int rows, int n)
{
	switch (v) {
	case NF_CU_VAR_GEMV_SK: return nf_cu_launch_gemv_sk(rows, n);
	case NF_CU_VAR_GEMM: return nf_cu_launch_gemm(rows, n);
	case NF_CU_VAR_GEMM_N16: return nf_cu_launch_gemm_n16(rows, n);
	default: return nf_cu_launch_gemv(rows, n);
	}
}

/* nf_cu_round_f8(float *out, const float *x, float inv_scale, size_t n):
 * backend.h's round_f8 (sm_89 and newer). */
/* nf_cu_swiglu(float *h1, const float *h3, size_t n),
 * nf_cu_add(float *y, const float *x, size_t n): element-wise. */
static inline nf_cu_launch nf_cu_launch_elementwise(size_t n)
{
	return nf_cu_launch_of(nf_cu_div_up(n, NF_CU_BLOCK), 1, 1, NF_CU_BLOCK);
}

/* nf_cu_rmsnorm(float *out, const float *x, const float *w, int dim,
 * float eps, size_t ld): each of n rows (ld apart) normalised.
 * nf_cu_argmax(int *out, const float *logits, int vocab, size_t ld).
 * nf_cu_sample(int *out, const float *logits, int vocab, size_t ld, int k,
 * float temperature, float top_p, const float *coins): top-k (k <=
 * NF_CU_TOPK_MAX), then top-p over those k, drawn by coins[b] in [0, 1). */
static inline nf_cu_launch nf_cu_launch_rows(int n)
{
	return nf_cu_launch_of((unsigned)n, 1, 1, NF_CU_BLOCK);
}

/* nf_cu_rope(float *v, size_t ld, const float *cs, int n_heads, int
 * head_size, int pairs): rows b < n of v (ld apart) rotated by the cosine
 * and sine of pair j at cs[b*head_size + 2j], [.. + 1] (the host's table, as
 * forward.c builds it); pairs an nf_km_rope_pairs (engine/kmath/rope.h). */
static inline nf_cu_launch nf_cu_launch_rope(int n) { return nf_cu_launch_rows(n); }

/* nf_cu_kv_append_<kind>(char *kc, char *vc, const float *k, const float *v,
 * size_t ld, int pos0, int n_kv_heads, int head_size, size_t head_stride):
 * the rows b < n of k and v (ld apart) stored at positions pos0 + b. */
static inline nf_cu_launch nf_cu_launch_kv_append(int n, int n_kv_heads)
{
	return nf_cu_launch_of((unsigned)n_kv_heads, (unsigned)n, 1, NF_CU_HEAD_MAX);
}

/* Whether the attention and KV-cache kernels take heads of head_size
 * elements: even (RoPE pairs) and at most NF_CU_HEAD_MAX (a warp holds a
 * head in NF_CU_HEAD_MAX / 32 registers a lane; a block has a thread per
 * element).  A model with larger heads runs on the CPU profile. */
static inline int nf_cu_head_size_ok(int head_size)
{
	return head_size > 0 && head_size <= NF_CU_HEAD_MAX && head_size % 2 == 0;
}

/* Decode attention, flash-decoding: nf_cu_attn_decode_<kind>(float *part_o,
 * float *part_ml, const float *q, const char *kc, const char *vc, int pos,
 * int n_heads, int n_kv_heads, int head_size, size_t head_stride) writes, per
 * head and split of NF_CU_DECODE_SPLIT positions, the unnormalised output
 * (part_o: n_heads * splits * head_size floats) and its softmax state
 * (part_ml: n_heads * splits * 2); nf_cu_attn_decode_reduce(float *out,
 * const float *part_o, const float *part_ml, int n_heads, int head_size,
 * int splits) merges the splits of each head. */
static inline int nf_cu_decode_splits(int pos) { return (int)nf_cu_div_up((size_t)pos + 1, NF_CU_DECODE_SPLIT); }
static inline nf_cu_launch nf_cu_launch_attn_decode(int pos, int n_heads)
{
	return nf_cu_launch_of((unsigned)n_heads, (unsigned)nf_cu_decode_splits(pos), 1,
			       NF_CU_ATTN_WARPS * NF_CU_WARP);
}
static inline nf_cu_launch nf_cu_launch_attn_reduce(int n_heads)
{
	return nf_cu_launch_of((unsigned)n_heads, 1, 1, NF_CU_HEAD_MAX);
}

/* Prefill attention, causal and grouped-query: nf_cu_attn_prefill_<kind>(
 * float *out, const float *q, size_t ld, const char *kc, const char *vc,
 * int pos0, int n, int n_heads, int n_kv_heads, int head_size, size_t
 * head_stride): query rows b < n (ld apart, at positions pos0 + b, already
 * appended to the cache) attend to positions 0 .. pos0 + b. */
static inline nf_cu_launch nf_cu_launch_attn_prefill(int n, int n_heads)
{
	return nf_cu_launch_of(nf_cu_div_up((size_t)n, NF_CU_ATTN_WARPS), (unsigned)n_heads, 1,
			       NF_CU_ATTN_WARPS * NF_CU_WARP);
}

#endif
