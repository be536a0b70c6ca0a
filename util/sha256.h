/*
 * sha256.h - SHA-256 over OpenSSL's libcrypto (EVP), as lowercase hex.
 */
#ifndef NF_UTIL_SHA256_H
#define NF_UTIL_SHA256_H

#include <stddef.h>

#define NF_SHA256_HEX_LEN 64

typedef struct nf_sha256 nf_sha256;

/* Streaming hash; free with nf_sha256_free (NULL is fine). */
int nf_sha256_new(nf_sha256 **out);
int nf_sha256_update(nf_sha256 *h, const void *data, size_t len);
/* Writes 64 hex chars + NUL into hex. The hasher may not be updated afterwards. */
int nf_sha256_final_hex(nf_sha256 *h, char hex[NF_SHA256_HEX_LEN + 1]);
void nf_sha256_free(nf_sha256 *h);

/* One-shot helpers. */
int nf_sha256_hex(char hex[NF_SHA256_HEX_LEN + 1], const void *data, size_t len);
int nf_sha256_file_hex(char hex[NF_SHA256_HEX_LEN + 1], const char *path);

/* True when s is exactly 64 lowercase hex digits. */
int nf_sha256_is_hex(const char *s);

#endif
