/*
 * checkpoint_llama2c.c - the llama2.c checkpoint format: a header of seven
 * little-endian int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
 * vocab_size, max_seq_len; negative vocab = unshared classifier), then the
 * float32 tensors in a fixed order, two legacy RoPE tables and, when not
 * shared, the classifier.  The header is validated and the exact file size
 * computed with checked arithmetic before a byte of weights is trusted.
 */
#include "engine/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the checkpoint loaders assume a little-endian host"
#endif

#define HEADER_BYTES 28

/* The tensors of a model in llama2.c file order (classifier separate). */
static void tensor_list(const nf_model *m, float *t[11], size_t n[11])
{
	const nf_model_config *c = &m->cfg;
	size_t dim = (size_t)c->dim, hid = (size_t)c->hidden_dim, L = (size_t)c->n_layers;
	size_t kv = (size_t)nf_model_kv_dim(c), vocab = (size_t)c->vocab_size;
	/* Sizes were checked for overflow when the model was allocated. */
	t[0] = m->w.token_embedding; n[0] = vocab * dim;
	t[1] = m->w.rms_att;         n[1] = L * dim;
	t[2] = m->w.wq;              n[2] = L * dim * dim;
	t[3] = m->w.wk;              n[3] = L * kv * dim;
	t[4] = m->w.wv;              n[4] = L * kv * dim;
	t[5] = m->w.wo;              n[5] = L * dim * dim;
	t[6] = m->w.rms_ffn;         n[6] = L * dim;
	t[7] = m->w.w1;              n[7] = L * hid * dim;
	t[8] = m->w.w2;              n[8] = L * dim * hid;
	t[9] = m->w.w3;              n[9] = L * hid * dim;
	t[10] = m->w.rms_final;      n[10] = dim;
}

int nf_ckpt_llama2c_size(uint64_t *out, const nf_model_config *cfg)
{
	size_t params, rope, total;
	*out = 0;
	if (nf_model_param_count(&params, cfg))
		return NF_EINPUT;
	/* two tables of max_seq_len * head_size / 2 floats = max_seq_len * head_size */
	if (!nf_size_mul(&rope, (size_t)cfg->max_seq_len, (size_t)nf_model_head_size(cfg)) ||
	    !nf_size_add(&total, params, rope) || !nf_size_mul(&total, total, sizeof(float)) ||
	    !nf_size_add(&total, total, HEADER_BYTES))
		return nf_error_set(NF_EINPUT, "model: file size overflows");
	*out = total;
	return 0;
}

static int read_at(int fd, void *buf, size_t len, uint64_t off, const char *path)
{
	unsigned char *p = buf;
	while (len > 0) {
		size_t chunk = len > (1u << 30) ? (1u << 30) : len;
		ssize_t r = pread(fd, p, chunk, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return nf_error_set(NF_EIO, "%s: offset %llu: %s", path,
					    (unsigned long long)off, strerror(errno));
		if (r == 0)
			return nf_error_set(NF_EINPUT, "%s: offset %llu: file ended early", path,
					    (unsigned long long)off);
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static int check_finite(const float *x, size_t n, uint64_t file_off, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return nf_error_set(NF_EINPUT, "%s: offset %llu: weight is not finite (%g)",
					    path, (unsigned long long)(file_off + 4 * i),
					    (double)x[i]);
	return 0;
}

int nf_ckpt_load_llama2c(nf_model **out, const char *path)
{
	int err = 0, fd = -1;
	struct stat st;
	int32_t h[7];
	nf_model_config cfg = {0};
	nf_model *m = NULL;
	uint64_t need, off;
	float *t[11];
	size_t n[11];

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = nf_error_set(errno == ENOENT ? NF_ENOTFOUND : NF_EINPUT, "%s: %s", path,
				   strerror(errno));
		goto done;
	}
	if (fstat(fd, &st) < 0) {
		err = nf_error_set(NF_EIO, "%s: %s", path, strerror(errno));
		goto done;
	}
	if (!S_ISREG(st.st_mode)) {
		err = nf_error_set(NF_EINPUT, "%s: not a regular file", path);
		goto done;
	}
	if (st.st_size < HEADER_BYTES) {
		err = nf_error_set(NF_EINPUT, "%s: file is %lld bytes, too small for the %d-byte "
				   "llama2.c header", path, (long long)st.st_size, HEADER_BYTES);
		goto done;
	}
	if ((err = read_at(fd, h, sizeof(h), 0, path)))
		goto done;
	cfg.dim = h[0];
	cfg.hidden_dim = h[1];
	cfg.n_layers = h[2];
	cfg.n_heads = h[3];
	cfg.n_kv_heads = h[4];
	cfg.shared_classifier = h[5] > 0;
	cfg.vocab_size = h[5] < 0 && h[5] != INT32_MIN ? -h[5] : h[5];
	cfg.max_seq_len = h[6];
	cfg.norm_eps = 1e-5f;
	cfg.rope_theta = 10000.0f;
	if ((err = nf_model_config_validate(&cfg, path)))
		goto done;
	if ((err = nf_ckpt_llama2c_size(&need, &cfg)))
		goto done;
	if ((uint64_t)st.st_size != need) {
		err = nf_error_set(NF_EINPUT, "%s: file is %lld bytes, header (dim %d, hidden_dim %d, "
				   "n_layers %d, n_heads %d, n_kv_heads %d, vocab_size %d, "
				   "max_seq_len %d) needs %llu", path, (long long)st.st_size,
				   (int)h[0], (int)h[1], (int)h[2], (int)h[3], (int)h[4], (int)h[5],
				   (int)h[6], (unsigned long long)need);
		goto done;
	}
	/* The file is exactly as large as the header says: allocation is bounded by it. */
	if ((err = nf_model_alloc(&m, &cfg)))
		goto done;
	tensor_list(m, t, n);
	off = HEADER_BYTES;
	for (int i = 0; i < 11; i++) {
		if ((err = read_at(fd, t[i], n[i] * sizeof(float), off, path)) ||
		    (err = check_finite(t[i], n[i], off, path)))
			goto done;
		off += n[i] * sizeof(float);
	}
	if (!cfg.shared_classifier) {
		off += (uint64_t)cfg.max_seq_len * (uint64_t)nf_model_head_size(&cfg) * sizeof(float);
		if ((err = read_at(fd, m->w.wcls, n[0] * sizeof(float), off, path)) ||
		    (err = check_finite(m->w.wcls, n[0], off, path)))
			goto done;
	}
	*out = m;
	m = NULL;
done:
	if (fd >= 0)
		close(fd);
	nf_model_free(m);
	return err;
}

int nf_ckpt_write_llama2c(const char *path, const nf_model *m)
{
	int err = 0;
	nf_atomic_file af = {.fd = -1};
	bool opened = false;
	const nf_model_config *c = &m->cfg;
	int32_t h[7];
	float *t[11], *rope = NULL;
	size_t n[11], half, rope_n;

	if ((err = nf_model_config_validate(c, path)))
		return err;
	h[0] = c->dim;
	h[1] = c->hidden_dim;
	h[2] = c->n_layers;
	h[3] = c->n_heads;
	h[4] = c->n_kv_heads;
	h[5] = c->shared_classifier ? c->vocab_size : -c->vocab_size;
	h[6] = c->max_seq_len;
	tensor_list(m, t, n);
	/* The legacy tables (cos, then sin, of pos * theta^(-2i/head_size)). */
	half = (size_t)nf_model_head_size(c) / 2;
	rope_n = (size_t)c->max_seq_len * half;
	if (!(rope = malloc(2 * rope_n * sizeof(float)))) {
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", path);
		goto done;
	}
	for (size_t p = 0; p < (size_t)c->max_seq_len; p++) {
		for (size_t i = 0; i < half; i++) {
			double freq = pow((double)c->rope_theta, -(double)(2 * i) / (double)(2 * half));
			rope[p * half + i] = (float)cos((double)p * freq);
			rope[rope_n + p * half + i] = (float)sin((double)p * freq);
		}
	}
	if ((err = nf_atomic_open(&af, path, 0644)))
		goto done;
	opened = true;
	if ((err = nf_atomic_write(&af, h, sizeof(h))))
		goto done;
	for (int i = 0; i < 11; i++)
		if ((err = nf_atomic_write(&af, t[i], n[i] * sizeof(float))))
			goto done;
	if ((err = nf_atomic_write(&af, rope, 2 * rope_n * sizeof(float))))
		goto done;
	if (!c->shared_classifier && (err = nf_atomic_write(&af, m->w.wcls, n[0] * sizeof(float))))
		goto done;
	opened = false;
	err = nf_atomic_commit(&af);
done:
	if (opened)
		nf_atomic_abort(&af);
	free(rope);
	return err;
}
