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

#endif
