/*
 * build_shared.h - what the builds of several recipes in one `nimfactory
 * build a.yaml b.yaml` share: the sources fetched (by what identifies their
 * bytes), the checkpoints loaded (by convert key) and the output folders
 * taken.  So a checkpoint two recipes pin is fetched and converted once,
 * and two recipes never write one OUT.  The builds run one after the other
 * on one thread; this holds no lock.
 */
#ifndef NF_FACTORY_BUILD_SHARED_H
#define NF_FACTORY_BUILD_SHARED_H

#include "engine/checkpoint.h"
#include "engine/model.h"
#include "util/sha256.h"

typedef struct nf_build_shared nf_build_shared;

/* Caller owns *out (nf_build_shared_free, which frees every model it holds). */
int nf_build_shared_new(nf_build_shared **out);
void nf_build_shared_free(nf_build_shared *s); /* NULL is fine */

/* A fetched source by identity (the recipe's source fields as one string):
 * 0 and its path (owned by s) and digest, else NF_ENOTFOUND. */
int nf_build_shared_source(const nf_build_shared *s, const char *identity, const char **path,
			   char digest[NF_SHA256_HEX_LEN + 1]);
int nf_build_shared_add_source(nf_build_shared *s, const char *identity, const char *path,
			       const char *digest);

/* A loaded checkpoint by convert key: 0 and borrowed pointers (owned by s),
 * else NF_ENOTFOUND. */
int nf_build_shared_model(const nf_build_shared *s, const char *convert_key, nf_model **model,
			  nf_tokenizer **tokenizer);
/* Hand a loaded model and its tokenizer (may be NULL) to s, which frees
 * them (also on failure), and frees the one it held before: s holds one
 * checkpoint at a time, so build the recipes that share one in a row. */
int nf_build_shared_add_model(nf_build_shared *s, const char *convert_key, nf_model *model,
			      nf_tokenizer *tokenizer);

/* Claim an output folder: NF_EINPUT when an earlier recipe wrote it. */
int nf_build_shared_claim_output(nf_build_shared *s, const char *out_dir);

#endif
