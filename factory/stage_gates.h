/*
 * stage_gates.h - a profile's gate results as a stage result: written to
 * the gate stage's folder in the cache and read back by a rebuild, so a
 * cached gate reports exactly what it measured when it ran (every metric,
 * case and verdict; doubles round-trip to the bit).
 */
#ifndef NF_FACTORY_STAGE_GATES_H
#define NF_FACTORY_STAGE_GATES_H

#include "factory/gates.h"

/* The file name of the results in a gate stage's folder. */
#define NF_STAGE_GATES_FILE "gates.json"

/* Write the results of rs for the profile profile_id to path (atomically). */
int nf_stage_gates_save(const char *path, const nf_gate_results *rs, const char *profile_id);

/* Append the results saved at path to rs.  NF_EINPUT when the file is not
 * one nf_stage_gates_save wrote (a damaged cache entry: the caller reruns
 * the gate); then rs is left as it was. */
int nf_stage_gates_load(nf_gate_results *rs, const char *path);

#endif
