/*
 * tactics.h - the CPU autotuner: for each GEMM shape of a model, pick the
 * kernel family, either by timing every family this CPU runs ("measured")
 * or by a simple cost model ("modelled"), and write the table as
 * tactics.json: {"tactics": [{"shape": [rows, cols], "dtype", "kernel",
 * "method", "timings_us": {family: us}}], ...}.
 */
#ifndef NF_ENGINE_TACTICS_H
#define NF_ENGINE_TACTICS_H

#include "engine/forward.h"
#include "engine/model.h"

/* Write path (atomically) for the matrices of w.  autotune 1 = measure. */
int nf_tactics_write(const char *path, const nf_fwd_weights *w, const nf_model_config *cfg,
		     int autotune, int threads);

/* Read path (optional file: a missing one is not an error) and make the
 * forward pass use, per shape, the family it names when this CPU runs it. */
int nf_tactics_apply(nf_fwd *f, const char *path);

/* Whether this host runs the decode GEMV of m (row-major) faster on a copy
 * tiled in 8-row blocks (engine/layout.h) than as it is: both timed with
 * ops on `threads` threads, the matrix read from memory as decode reads it,
 * best of 3 interleaved rounds.  Which layout streams faster depends on the
 * CPU's prefetchers (docs/benchmarks.md).  1 when tiles win, or when there
 * is no memory to compare; 0 when row-major wins. */
int nf_tactics_prefer_tiles(const nf_bk_matrix *m, const nf_backend_ops *ops, int threads);

#endif
