/*
 * checkpoint_llama2c.c - the llama2.c checkpoint format: a header of seven
 * little-endian int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
 * vocab_size, max_seq_len; negative vocab = unshared classifier), then the
 * float32 tensors in a fixed order, two legacy RoPE tables and, when not
 * shared, the classifier.  The header is validated and the exact file size
 * computed with checked arithmetic before a byte of weights is trusted.
 */
#include "engine/checkpoint.h"

#include "engine/arch.h"
#include "engine/ckpt_reader.h"

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

/* Whether c fits the llama2.c format: its header says nothing of the
 * architecture, biases or RoPE beyond Llama's defaults. */
static int check_representable(const nf_model_config *c, const char *path)
{
	if (c->arch != NF_ARCH_LLAMA || c->attention_bias || c->rope_scaling.type != NF_ROPE_DEFAULT ||
	    c->rope_theta != 10000.0f || c->norm_eps != 1e-5f)
		return nf_error_set(NF_EUNSUPPORTED, "%s: the llama2.c format holds only a Llama "
				    "without biases, rope scaling, rope_theta other than 10000 or "
				    "norm_eps other than 1e-5", path);
	return 0;
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

/* The two legacy RoPE tables: max_seq_len * head_size / 2 floats each. */
static uint64_t rope_bytes(const nf_model_config *c)
{
	return (uint64_t)c->max_seq_len * (uint64_t)nf_model_head_size(c) * sizeof(float);
}

/* Call visit for every tensor of cfg in Llama's table order, which is the
 * file's order, with its element count and file offset: the classifier, when
 * not shared, comes after the legacy RoPE tables.  The reader and the writer
 * both walk this one list, so they cannot disagree on the layout. */
typedef int (*tensor_visit)(void *ctx, const nf_arch_tensor *t, uint64_t n, uint64_t off);

static int each_tensor(const nf_model_config *cfg, tensor_visit visit, void *ctx)
{
	const nf_arch *a = nf_arch_get(NF_ARCH_LLAMA);
	uint64_t at = HEADER_BYTES, n;
	int err;
	for (size_t i = 0; i < a->n_tensors; i++) {
		const nf_arch_tensor *t = &a->tensors[i];
		if (!nf_arch_present(t, cfg))
			continue;
		if (t->when == NF_W_UNTIED)
			at += rope_bytes(cfg);
		/* the file size (reader) or the model's allocation (writer) was
		 * checked for overflow: no overflow here */
		nf_arch_elems(&n, t, cfg);
		if ((err = visit(ctx, t, n, at)))
			return err;
		at += n * sizeof(float);
	}
	return 0;
}

static int record_offset(void *ctx, const nf_arch_tensor *t, uint64_t n, uint64_t off)
{
	uint64_t *offsets = ctx;
	(void)n;
	offsets[t->id] = off;
	return 0;
}

typedef struct llama2c_reader {
	nf_ckpt_reader base;
	int fd;
	char *path;
	uint64_t off[NF_T_COUNT];
} llama2c_reader;

static int llama2c_read(nf_ckpt_reader *base, const nf_arch_tensor *t, int layer, float *dst)
{
	const llama2c_reader *r = (const llama2c_reader *)base;
	uint64_t n;
	nf_arch_slice_elems(&n, t, &base->cfg);
	uint64_t off = r->off[t->id] + (uint64_t)layer * n * sizeof(float);
	int err = read_at(r->fd, dst, (size_t)n * sizeof(float), off, r->path);
	return err ? err : check_finite(dst, (size_t)n, off, r->path);
}

static void llama2c_close(nf_ckpt_reader *base)
{
	llama2c_reader *r = (llama2c_reader *)base;
	if (r->fd >= 0)
		close(r->fd);
	free(r->path);
	free(r);
}

/* pread, not a mapping: what was read is the caller's memory, and the
 * page cache lets the file's pages go by itself. */
static const nf_ckpt_reader_ops llama2c_ops = {
	.read = llama2c_read,
	.close = llama2c_close,
};

/* The header into a validated config matching the file's size. */
static int read_header(nf_model_config *cfg, int fd, const char *path)
{
	struct stat st;
	int32_t h[7];
	uint64_t need;
	int err;
	if (fstat(fd, &st) < 0)
		return nf_error_set(NF_EIO, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return nf_error_set(NF_EINPUT, "%s: not a regular file", path);
	if (st.st_size < HEADER_BYTES)
		return nf_error_set(NF_EINPUT, "%s: file is %lld bytes, too small for the %d-byte "
				    "llama2.c header", path, (long long)st.st_size, HEADER_BYTES);
	if ((err = read_at(fd, h, sizeof(h), 0, path)))
		return err;
	*cfg = (nf_model_config){.dim = h[0], .hidden_dim = h[1], .n_layers = h[2],
				 .n_heads = h[3], .n_kv_heads = h[4], .shared_classifier = h[5] > 0,
				 .vocab_size = h[5] < 0 && h[5] != INT32_MIN ? -h[5] : h[5],
				 .max_seq_len = h[6], .norm_eps = 1e-5f, .rope_theta = 10000.0f};
	if ((err = nf_model_config_validate(cfg, path)) ||
	    (err = nf_ckpt_llama2c_size(&need, cfg)))
		return err;
	if ((uint64_t)st.st_size != need)
		return nf_error_set(NF_EINPUT, "%s: file is %lld bytes, header (dim %d, hidden_dim "
				    "%d, n_layers %d, n_heads %d, n_kv_heads %d, vocab_size %d, "
				    "max_seq_len %d) needs %llu", path, (long long)st.st_size,
				    (int)h[0], (int)h[1], (int)h[2], (int)h[3], (int)h[4], (int)h[5],
				    (int)h[6], (unsigned long long)need);
	return 0;
}

int nf_ckpt_open_llama2c(nf_ckpt_reader **out, const char *path)
{
	llama2c_reader *r = calloc(1, sizeof *r);
	int err = 0;
	*out = NULL;
	if (!r || !(r->path = strdup(path))) {
		free(r);
		return nf_error_set(NF_ENOMEM, "%s: out of memory", path);
	}
	r->base.ops = &llama2c_ops;
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0)
		err = nf_error_set(errno == ENOENT ? NF_ENOTFOUND : NF_EINPUT, "%s: %s", path,
				   strerror(errno));
	/* the file is exactly as large as the header says: what is read is bounded by it */
	if (!err && !(err = read_header(&r->base.cfg, r->fd, path)))
		err = each_tensor(&r->base.cfg, record_offset, r->off);
	if (err) {
		llama2c_close(&r->base);
		return err;
	}
	*out = &r->base;
	return 0;
}

/* The legacy tables (cos, then sin, of pos * theta^(-2i/head_size)) into a
 * new array of max_seq_len * head_size floats (*out, caller frees). */
static int legacy_rope(float **out, const nf_model_config *c, const char *path)
{
	size_t half = (size_t)nf_model_head_size(c) / 2, rope_n = (size_t)c->max_seq_len * half;
	float *rope = malloc(2 * rope_n * sizeof(float));
	*out = rope;
	if (!rope)
		return nf_error_set(NF_ENOMEM, "%s: out of memory", path);
	for (size_t p = 0; p < (size_t)c->max_seq_len; p++) {
		for (size_t i = 0; i < half; i++) {
			double freq = pow((double)c->rope_theta, -(double)(2 * i) / (double)(2 * half));
			rope[p * half + i] = (float)cos((double)p * freq);
			rope[rope_n + p * half + i] = (float)sin((double)p * freq);
		}
	}
	return 0;
}

/* The rope tables go between the last layer tensor and the classifier:
 * each_tensor skips their bytes, so write them on the way. */
typedef struct writer {
	nf_atomic_file *af;
	nf_model *m;
	const float *rope;
	uint64_t rope_bytes;
	uint64_t at; /* bytes written so far */
} writer;

static int write_in_order(void *ctx, const nf_arch_tensor *t, uint64_t n, uint64_t off)
{
	writer *w = ctx;
	int err;
	if (off > w->at) {
		if ((err = nf_atomic_write(w->af, w->rope, (size_t)w->rope_bytes)))
			return err;
		w->at += w->rope_bytes;
	}
	if ((err = nf_atomic_write(w->af, *nf_model_slot(w->m, t->id), (size_t)n * sizeof(float))))
		return err;
	w->at += n * sizeof(float);
	return 0;
}

int nf_ckpt_write_llama2c(const char *path, const nf_model *m)
{
	int err = 0;
	nf_atomic_file af = {.fd = -1};
	bool opened = false;
	const nf_model_config *c = &m->cfg;
	int32_t h[7];
	float *rope = NULL;
	writer w = {&af, (nf_model *)m, NULL, rope_bytes(c), HEADER_BYTES};

	if ((err = nf_model_config_validate(c, path)) || (err = check_representable(c, path)))
		return err;
	h[0] = c->dim;
	h[1] = c->hidden_dim;
	h[2] = c->n_layers;
	h[3] = c->n_heads;
	h[4] = c->n_kv_heads;
	h[5] = c->shared_classifier ? c->vocab_size : -c->vocab_size;
	h[6] = c->max_seq_len;
	if ((err = legacy_rope(&rope, c, path)))
		goto done;
	w.rope = rope;
	if ((err = nf_atomic_open(&af, path, 0644)))
		goto done;
	opened = true;
	if ((err = nf_atomic_write(&af, h, sizeof(h))) ||
	    (err = each_tensor(c, write_in_order, &w)))
		goto done;
	/* a shared classifier: the tables end the file */
	if (c->shared_classifier && (err = nf_atomic_write(&af, rope, (size_t)w.rope_bytes)))
		goto done;
	opened = false;
	err = nf_atomic_commit(&af);
done:
	if (opened)
		nf_atomic_abort(&af);
	free(rope);
	return err;
}
