/*
 * digest.h - content digests of what the build reads: a file's sha256, or
 * for a folder the sha256 of its sorted "sha256  relative/path\n" listing
 * (what `sha256sum` prints), so the key does not depend on where it lives.
 */
#ifndef NF_FACTORY_DIGEST_H
#define NF_FACTORY_DIGEST_H

#include "util/sha256.h"

/* Digest of a file or a folder tree (regular files only; symlinks refused). */
int nf_digest_path(char hex[NF_SHA256_HEX_LEN + 1], const char *path);

#endif
