/*
 * timing_cache.h - kernel timings measured on a GPU, kept in a file so
 * that the next build on the same GPU, driver and kernels reuses them
 * instead of timing again (docs/cuda.md, "The timing cache").
 *
 * A cache belongs to one key: the SKU (engine/sku.c's name), the driver
 * version (cuDriverGetVersion) and the sha256 of the cubin whose kernels
 * were timed.  Within it, each entry is a shape - the kernel family
 * ("gemv_q8"), rows, cols, batch - and the tactic that won there: the
 * kernel launched, its tile (rows x tokens a block), split-K and vector
 * width, the median microseconds of its timed runs and how many runs.
 *
 * Reading never fails the build: a missing file is an empty cache; a file
 * for another key is an empty cache (a miss for every shape, since its
 * timings describe other hardware or other code); a damaged file is an
 * empty cache and a warning.  The file is written atomically.
 */
#ifndef NF_ENGINE_CUDA_TIMING_CACHE_H
#define NF_ENGINE_CUDA_TIMING_CACHE_H

#include <stddef.h>

#define NF_TC_FORMAT "nimfactory-timing-cache"
#define NF_TC_VERSION 1
#define NF_TC_MAX_ENTRIES 65536
#define NF_TC_NAME_MAX 64
#define NF_TC_CANDIDATES_MAX 8

typedef struct nf_tc_key {
	char sku[NF_TC_NAME_MAX];  /* "h100-sxm" */
	int driver;                /* 12040 for CUDA 12.4 */
	char cubin_sha256[65];     /* hex */
} nf_tc_key;

typedef struct nf_tc_shape {
	char family[NF_TC_NAME_MAX]; /* "gemv_q8": the product timed, whatever kernel wins */
	int rows, cols, batch;
} nf_tc_shape;

typedef struct nf_tc_tactic {
	char kernel[NF_TC_NAME_MAX]; /* the kernel launched: "nf_cu_gemm_q8" */
	int tile_rows, tile_tokens;  /* outputs x tokens a block */
	int split_k;                 /* parts of the columns (1: none) */
	int vector;                  /* elements a thread loads at once */
	double median_us;
	int runs;
	/* every candidate timed for the shape, the winner among them: its
	 * kernel and median (0 candidates in a cache written without them) */
	int n_candidates;
	char candidate[NF_TC_CANDIDATES_MAX][NF_TC_NAME_MAX];
	double candidate_us[NF_TC_CANDIDATES_MAX];
} nf_tc_tactic;

typedef struct nf_timing_cache nf_timing_cache;

/* An empty cache for key (caller owns *out). */
int nf_timing_cache_new(nf_timing_cache **out, const nf_tc_key *key);
/* Read path for key: its entries when the file is this key's; empty when
 * it is missing or another key's; empty, with a one-line reason in
 * warning (when not NULL; "" otherwise), when it is damaged.  Fails only
 * for memory. */
int nf_timing_cache_load(nf_timing_cache **out, const char *path, const nf_tc_key *key,
			 char *warning, size_t warning_len);
void nf_timing_cache_free(nf_timing_cache *c); /* NULL is fine */

/* The tactic of shape s: 1 and *out filled when cached, 0 for a miss. */
int nf_timing_cache_find(const nf_timing_cache *c, const nf_tc_shape *s, nf_tc_tactic *out);
/* Keep t for s (replacing an entry of the same shape). */
int nf_timing_cache_put(nf_timing_cache *c, const nf_tc_shape *s, const nf_tc_tactic *t);
size_t nf_timing_cache_count(const nf_timing_cache *c);
/* The key the cache belongs to (owned by c). */
const nf_tc_key *nf_timing_cache_key(const nf_timing_cache *c);
/* The median of v[0, n) (n >= 1; v is sorted in place). */
double nf_tc_median(double *v, int n);
/* Write the cache to path atomically. */
int nf_timing_cache_save(const nf_timing_cache *c, const char *path);

#endif
