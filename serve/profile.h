/*
 * profile.h - choosing the engine profile for this machine: which profiles
 * fit (device, compute capability, GPU count, CPU backend support, gate,
 * engine folder present) and, among those, the best one (device match first,
 * then the manifest's precision and tensor-parallel preferences).
 */
#ifndef NF_SERVE_PROFILE_H
#define NF_SERVE_PROFILE_H

#include <stddef.h>
#include <stdio.h>

#include "serve/gpu.h"
#include "serve/manifest.h"

typedef struct nf_profile_fit {
	int fits;         /* 1 if it can run here */
	int device_rank;  /* 0 GPU of the named SKU, 1 GPU of the same arch, 2 CPU */
	char reason[320]; /* why it does not fit, or "fits" */
} nf_profile_fit;

/* Evaluate every profile of m against gpus; fits has m->n_profiles slots.
 * check_files: also require <engine>/config.json to exist. */
void nf_profile_evaluate(nf_profile_fit *fits, const nf_manifest *m, const nf_gpu_list *gpus,
			 int check_files);

/* Choose a profile: forced (id or name, may be NULL or "") or the best that
 * fits.  *out is an index into m->profiles; why (why_len bytes) says why it
 * won.  NF_ENOTFOUND if forced names no profile; NF_EINPUT if forced does not
 * fit or nothing fits, listing the profiles that would fit. */
int nf_profile_select(size_t *out, char *why, size_t why_len, const nf_manifest *m,
		      const nf_gpu_list *gpus, const char *forced, int check_files);

/* Print a table of every profile and whether it fits (and why not). */
void nf_profile_print(FILE *f, const nf_manifest *m, const nf_gpu_list *gpus, int check_files);

#endif
