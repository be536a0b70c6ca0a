/* sha256.c - SHA-256 through OpenSSL EVP (see sha256.h). */
#include "util/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"
#include "util/banned.h"

struct nf_sha256 {
	EVP_MD_CTX *ctx;
};

int nf_sha256_new(nf_sha256 **out)
{
	nf_sha256 *h = calloc(1, sizeof(*h));
	*out = NULL;
	if (!h)
		return nf_error_set(NF_ENOMEM, "out of memory");
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
		nf_sha256_free(h);
		return nf_error_set(NF_EINTERNAL, "sha256: cannot initialise");
	}
	*out = h;
	return 0;
}

int nf_sha256_update(nf_sha256 *h, const void *data, size_t len)
{
	if (len && EVP_DigestUpdate(h->ctx, data, len) != 1)
		return nf_error_set(NF_EINTERNAL, "sha256: update failed");
	return 0;
}

int nf_sha256_final_hex(nf_sha256 *h, char hex[NF_SHA256_HEX_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char md[32];
	unsigned int n = 0;
	if (EVP_DigestFinal_ex(h->ctx, md, &n) != 1 || n != 32)
		return nf_error_set(NF_EINTERNAL, "sha256: final failed");
	for (int i = 0; i < 32; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[64] = '\0';
	return 0;
}

void nf_sha256_free(nf_sha256 *h)
{
	if (!h)
		return;
	EVP_MD_CTX_free(h->ctx);
	free(h);
}

int nf_sha256_hex(char hex[NF_SHA256_HEX_LEN + 1], const void *data, size_t len)
{
	nf_sha256 *h;
	int err = nf_sha256_new(&h);
	if (!err)
		err = nf_sha256_update(h, data, len);
	if (!err)
		err = nf_sha256_final_hex(h, hex);
	nf_sha256_free(h);
	return err;
}

int nf_sha256_file_hex(char hex[NF_SHA256_HEX_LEN + 1], const char *path)
{
	enum { CHUNK = 1 << 20 };
	nf_sha256 *h = NULL;
	unsigned char *buf = NULL;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return nf_error_set(errno == ENOENT ? NF_ENOTFOUND : NF_EIO, "%s: %s", path,
				    strerror(errno));
	buf = malloc(CHUNK);
	err = buf ? nf_sha256_new(&h) : nf_error_set(NF_ENOMEM, "out of memory");
	while (!err) {
		ssize_t n = read(fd, buf, CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = nf_error_set(NF_EIO, "%s: %s", path, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		err = nf_sha256_update(h, buf, (size_t)n);
	}
	if (!err)
		err = nf_sha256_final_hex(h, hex);
	nf_sha256_free(h);
	free(buf);
	close(fd);
	return err;
}

int nf_sha256_is_hex(const char *s)
{
	size_t i;
	for (i = 0; s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return i == 64;
}
