/*
 * registry.h - an OCI distribution API client over libcurl.
 *
 *   nf_reg_client_new(&c, "127.0.0.1:5000", &opts);   credentials from auth.h
 *   nf_reg_ping(c);                                     GET /v2/
 *   nf_reg_push_layout(&d, c, "out/oci", "1.0.0", "team/model", "1.0.0", NULL);
 *   nf_reg_promote(&p, c, &src, &dst, false);
 *   nf_reg_client_free(c);
 *
 * Every request goes to one registry (HOST[:PORT]) over https, or over plain
 * http when opts.insecure is set, which is allowed for loopback hosts only.
 * TLS verification is never turned off.  Transport errors, 429 (Retry-After
 * honoured, capped) and 5xx are retried a bounded number of times with
 * exponential backoff.  401 is answered once per request with Basic or Bearer
 * authentication (auth.h).  A redirect to another host is refused, except
 * for a blob download, which follows it without credentials.  Response bodies
 * are size-bounded, JSON validated, digests of manifests and blobs checked.
 * Secrets never appear in an error message or a log line.
 *
 * Layers go up monolithically (POST + PUT) up to opts.chunk_size, else in
 * chunks (PATCH with Content-Range); after a dropped connection the upload
 * session is asked its offset (GET on the upload URL, Range header) and the
 * upload goes on from there (or starts again when the session is gone).
 */
#ifndef NF_IMAGES_REGISTRY_H
#define NF_IMAGES_REGISTRY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "images/blob.h"

#define NF_REG_HOST_MAX 255
#define NF_REG_NAME_MAX 255
#define NF_REG_TAG_MAX 128

/* Media types of artifacts, and the empty config (image-spec 1.1). */
#define NF_OCI_MT_EMPTY "application/vnd.oci.empty.v1+json"
#define NF_OCI_EMPTY_DIGEST "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"

/* A registry reference: HOST[:PORT]/NAME[:TAG][@sha256:HEX].  Plain value. */
typedef struct nf_reg_ref {
	char host[NF_REG_HOST_MAX + 1];
	char name[NF_REG_NAME_MAX + 1];
	char tag[NF_REG_TAG_MAX + 1];       /* "" when none */
	char digest[NF_OCI_DIGEST_LEN + 1]; /* "" when none */
} nf_reg_ref;

/*
 * Parse s.  The first component must look like a host (holds '.' or ':', or
 * is "localhost"); NAME is lowercase path components of [a-z0-9] joined by
 * '.', '_', '__' or '-'; TAG is [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}.
 * NF_EINPUT with a one-line message otherwise.
 */
int nf_reg_ref_parse(nf_reg_ref *out, const char *s);

/* True for "localhost", 127.0.0.0/8 and [::1] (with or without a port). */
bool nf_reg_host_is_loopback(const char *host);

/* Called during transfers: what (e.g. a short digest), bytes done of total, seconds since start. */
typedef void (*nf_reg_progress_fn)(void *ctx, const char *what, uint64_t done, uint64_t total,
				   double seconds);
/* One debug line per request (method, path, status); never a secret. */
typedef void (*nf_reg_log_fn)(void *ctx, const char *line);

typedef struct nf_reg_options {
	bool insecure;            /* plain http; loopback hosts only */
	uint64_t chunk_size;      /* larger blobs go in chunks of this size (default 64 MiB) */
	int max_retries;          /* per request or chunk (default 6) */
	unsigned backoff_ms;      /* first backoff, doubled each time (default 100) */
	unsigned max_backoff_ms;  /* cap, Retry-After included (default 8000) */
	long timeout_s;           /* no byte moving for this long fails a request (default 60) */
	nf_reg_progress_fn progress;
	void *progress_ctx;
	nf_reg_log_fn log;
	void *log_ctx;
} nf_reg_options;

void nf_reg_options_init(nf_reg_options *o);

/* Monotonic seconds (for rates). */
double nf_reg_now(void);

/* What a client did (for reports and tests). */
typedef struct nf_reg_stats {
	uint64_t requests;
	uint64_t retries;
	uint64_t blobs_present;      /* HEAD said present: skipped */
	uint64_t blobs_uploaded;
	uint64_t blobs_mounted;
	uint64_t blob_bytes_uploaded; /* body bytes sent in blob uploads, retries included */
	uint64_t resumes;            /* chunked uploads continued after a failure */
	uint64_t restarts;           /* uploads started again from byte 0 */
	uint64_t manifests_put;
	uint64_t manifests_present;  /* already there under that tag/digest: skipped */
} nf_reg_stats;

typedef struct nf_reg_client nf_reg_client;

/*
 * A client for host (HOST[:PORT]); credentials are loaded now (auth.h).
 * NF_EINPUT when opts->insecure is set for a host that is not loopback.
 * opts NULL: defaults.  Free with nf_reg_client_free.
 */
int nf_reg_client_new(nf_reg_client **out, const char *host, const nf_reg_options *opts);
void nf_reg_client_free(nf_reg_client *c);
const nf_reg_stats *nf_reg_client_stats(const nf_reg_client *c);

/* GET /v2/: the registry speaks the distribution API and our credentials (if asked for) work. */
int nf_reg_ping(nf_reg_client *c);

/* HEAD the blob in repository name: *out true when present (with the right size if told). */
int nf_reg_blob_exists(bool *out, nf_reg_client *c, const char *name, const nf_oci_desc *d);

/*
 * Cross-repository mount (POST ?mount=DIGEST&from=FROM): *mounted true when the
 * registry linked the blob (201); false when it did not (the upload session it
 * opened instead is cancelled).
 */
int nf_reg_blob_mount(bool *mounted, nf_reg_client *c, const char *name, const char *from,
		      const char *digest);

/* Upload a file as blob d (monolithic up to chunk_size, else chunked and resumable). */
int nf_reg_blob_upload_file(nf_reg_client *c, const char *name, const char *path,
			    const nf_oci_desc *d);

/* Upload bytes as a blob (monolithic); digest computed here. */
int nf_reg_blob_upload_bytes(nf_reg_client *c, const char *name, const void *data, size_t len);

/*
 * Download blob d (at most max bytes; the size must be d->size and the sha256
 * d->digest).  *out NUL-terminated, caller frees.
 */
int nf_reg_blob_get(char **out, size_t *len, nf_reg_client *c, const char *name,
		    const nf_oci_desc *d, size_t max);

/*
 * GET a manifest or index by tag or digest (Accept: OCI and Docker types).
 * The body is at most NF_OCI_JSON_MAX bytes, a JSON object whose mediaType
 * (when set) matches the Content-Type; its sha256 must equal the digest asked
 * for and the Docker-Content-Digest header when either is given.  *desc gets
 * media type, digest and size.  NF_ENOTFOUND when absent.  Caller frees *out.
 */
int nf_reg_manifest_get(char **out, size_t *len, nf_oci_desc *desc, nf_reg_client *c,
			const char *name, const char *ref);

/* HEAD a manifest: *exists, and *desc (digest from Docker-Content-Digest, may be empty). */
int nf_reg_manifest_head(bool *exists, nf_oci_desc *desc, nf_reg_client *c, const char *name,
			 const char *ref);

/*
 * PUT a manifest or index under ref (a tag or its digest).  The digest the
 * registry answers must be sha256(data).  *subject_ok (may be NULL) is set
 * when the registry answered OCI-Subject (it indexes referrers itself).
 */
int nf_reg_manifest_put(bool *subject_ok, nf_reg_client *c, const char *name, const char *ref,
			const char *media_type, const void *data, size_t len);

/*
 * The referrers of subject (a manifest digest) in repository name, optionally
 * only those of artifact_type: the referrers API
 * (GET /v2/NAME/referrers/DIGEST), else, when that answers 404, the tag
 * scheme (the image index tagged sha256-HEX).  *out: a JSON array of
 * descriptors (mediaType, digest, size, artifactType?, annotations?), each
 * checked.  *via_api tells which was used (may be NULL).  Caller owns *out.
 */
int nf_reg_referrers(json_t **out, bool *via_api, nf_reg_client *c, const char *name,
		     const char *subject, const char *artifact_type);

/*
 * Add desc (a descriptor object with artifactType and annotations) to the
 * referrers tag-scheme index of subject (tag sha256-HEX), creating it when
 * missing; nothing is written when it is listed already.
 */
int nf_reg_referrers_tag_add(nf_reg_client *c, const char *name, const char *subject,
			     const json_t *desc);

/*
 * Check an image index from outside (a referrers answer): a JSON object with
 * schemaVersion 2, a manifests array of at most NF_OCI_LIST_MAX valid
 * descriptors (artifactType a string when present).  what names it in errors.
 */
int nf_reg_index_check(const json_t *j, const char *what);

/*
 * Push what ref (a tag; NULL: the only image) names in layout: every blob of
 * every image manifest (skipped when present, mounted from mount_from when
 * given and held there, else uploaded), the manifests by digest, the tagged
 * manifest or index under tag, then every artifact in the layout whose subject
 * is one of those manifests (by digest, plus the referrers tag scheme when the
 * registry does not index referrers itself).  *out: the descriptor pushed
 * under tag.  Manifests already there are not sent again.
 */
int nf_reg_push_layout(nf_oci_desc *out, nf_reg_client *c, const char *layout, const char *ref,
		       const char *name, const char *tag, const char *mount_from);

/* The outcome of a promotion. */
typedef struct nf_reg_promotion {
	nf_oci_desc manifest;         /* what was promoted (image manifest or index) */
	bool report_found;            /* a gate report artifact refers to it */
	char verdict[32];             /* its verdict ("passed", "failed", ...), "" when none */
	bool forced;                  /* promoted with --force-unpassed despite the verdict */
	nf_oci_desc report;           /* the report artifact manifest copied to dst */
	uint64_t blobs_mounted;
} nf_reg_promotion;

/*
 * Promote src to dst (same registry): the gate report artifact referring to
 * src must say "passed" (else NF_EGATE, unless force, which annotates the
 * copied report with io.nimfactory.promote.forced=true); every blob is mounted
 * from src's repository (never uploaded: a blob the registry will not mount is
 * an error), the manifests are put under dst's repository and dst's tag, and
 * the report artifact is copied with them.
 */
int nf_reg_promote(nf_reg_promotion *out, nf_reg_client *c, const nf_reg_ref *src,
		   const nf_reg_ref *dst, bool force);

#endif
