/*
 * remote_cache.h - stage results shared through an OCI registry
 * (`nimfactory build --cache-to REF --cache-from REF`).
 *
 * A finished stage of the local cache (stages/<key>/, factory/cache.h) goes
 * to the repository REF (HOST[:PORT]/NAME) as one OCI artifact:
 *
 *   tag          "<kind>-<key>"  (e.g. "compile-3f9a...", the whole 64-hex key,
 *                so two keys never share a tag)
 *   manifest     an image manifest, artifactType NF_REMOTE_CACHE_ARTIFACT_TYPE,
 *                the empty config, annotations io.nimfactory.stage.kind and
 *                io.nimfactory.stage.key (what the tag says, repeated inside
 *                the signed-by-digest content)
 *   one layer    the stage folder as a reproducible tar+zstd (images/layer.h)
 *
 * Pulling is checked end to end: the manifest's digest (the registry client
 * checks the body against Docker-Content-Digest), its type, kind, key and
 * layer media type, the layer's size and sha256 (nf_reg_blob_get), and the
 * archive's entries (factory/fetch.h's secure extraction).  Anything that
 * fails a check is a miss with a warning, never used: the build then does the
 * work itself.  A registry that cannot be reached on pull is a miss too,
 * and so is every later pull of the same nf_remote_cache, without asking.
 * Pushing is the caller's explicit wish (--cache-to), so a failed push is an
 * error.
 */
#ifndef NF_FACTORY_REMOTE_CACHE_H
#define NF_FACTORY_REMOTE_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "factory/cache.h"
#include "factory/log.h"

#define NF_REMOTE_CACHE_ARTIFACT_TYPE "application/vnd.nimfactory.stage.v1"
#define NF_REMOTE_CACHE_ANN_KIND "io.nimfactory.stage.kind"
#define NF_REMOTE_CACHE_ANN_KEY "io.nimfactory.stage.key"

/*
 * Largest stage layer pulled.  The registry client reads a blob into memory,
 * so this bounds the memory a pull takes as well as what a hostile registry
 * can make us hold.
 */
#define NF_REMOTE_CACHE_LAYER_MAX ((uint64_t)4 << 30)

typedef struct nf_remote_cache nf_remote_cache;

/* What a remote cache did (for the build's summary and the tests). */
typedef struct nf_remote_cache_stats {
	unsigned pulled;   /* stages pulled into the local cache */
	unsigned misses;   /* not in the registry */
	unsigned refused;  /* present but failed a check (or unreachable): a miss, warned */
	unsigned pushed;   /* stages pushed */
	unsigned present;  /* already in the registry: not pushed again */
} nf_remote_cache_stats;

/*
 * A remote cache in repository ref ("HOST[:PORT]/NAME", no tag or digest).
 * insecure: plain http, for a loopback registry only (images/registry.h).
 * log may be NULL (the default logger).  Credentials as for `nimfactory push`
 * (images/auth.h).  Caller owns *out (nf_remote_cache_free).
 */
int nf_remote_cache_open(nf_remote_cache **out, const char *ref, bool insecure, nf_log *log);
void nf_remote_cache_free(nf_remote_cache *rc); /* NULL is fine */

/*
 * Ask the registry whether it speaks the distribution API and takes our
 * credentials (GET /v2/), so that a build learns it before its first stage.
 * On failure every later pull is a miss without asking.
 */
int nf_remote_cache_ping(nf_remote_cache *rc);

/* "HOST[:PORT]/NAME"; owned by rc. */
const char *nf_remote_cache_ref(const nf_remote_cache *rc);
const nf_remote_cache_stats *nf_remote_cache_stats_of(const nf_remote_cache *rc);

/*
 * The tag of a stage result: "<kind>-<key>".  kind is [a-z]{1,32}, key 64
 * lowercase hex; NF_EINPUT otherwise.
 */
int nf_remote_cache_tag(char tag[128], const char *kind, const char *key);

/*
 * Pull the stage (kind, key) into the local cache c (as stages/<key>).  0 and
 * *out (caller owns) the local stage folder; NF_ENOTFOUND on a miss, which
 * includes an artifact that failed a check, an unreachable registry and a
 * local failure while unpacking (each warned on the log, counted as refused:
 * the build then does the work and meets a local failure itself).
 * NF_EINPUT only for a malformed kind or key.
 */
int nf_remote_cache_pull(char **out, nf_remote_cache *rc, nf_cache *c, const char *kind,
			 const char *key);

/*
 * Whether the registry holds stage (kind, key): a HEAD of its tag, no blob
 * pulled and nothing checked beyond the tag's presence (what `plan` says;
 * a build's pull checks the rest).  The registry's error when it cannot be
 * asked (and every later question fails at once, NF_ENET).
 */
int nf_remote_cache_has(bool *present, nf_remote_cache *rc, const char *kind, const char *key);

/*
 * Push the finished stage folder stage_dir of (kind, key), unless the
 * registry holds that tag already.  The layer is written in c's tmp/ and
 * removed after.  0, or the registry's or the disk's error.
 */
int nf_remote_cache_push(nf_remote_cache *rc, nf_cache *c, const char *kind, const char *key,
			 const char *stage_dir);

#endif
