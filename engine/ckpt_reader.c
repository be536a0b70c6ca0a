/*
 * ckpt_reader.c - what every checkpoint reader shares (ckpt_reader.h): the
 * dispatch by format, reading a whole model through a reader, and the
 * reader over a model already in memory.
 */
/* madvise: POSIX_MADV_DONTNEED is a no-op in glibc */
#define _DEFAULT_SOURCE
#include "engine/ckpt_reader.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

int nf_ckpt_open(nf_ckpt_reader **out, const char *path, nf_ckpt_format format)
{
	*out = NULL;
	if (format == NF_CKPT_AUTO) {
		if (!nf_fs_exists(path))
			return nf_error_set(NF_ENOTFOUND, "%s: no such file or directory", path);
		format = nf_ckpt_sniff(path);
	}
	switch (format) {
	case NF_CKPT_LLAMA2C: return nf_ckpt_open_llama2c(out, path);
	case NF_CKPT_HF: return nf_ckpt_open_hf(out, path);
	case NF_CKPT_GGUF: return nf_ckpt_open_gguf(out, path);
	default: return nf_error_set(NF_EINTERNAL, "bad checkpoint format %d", (int)format);
	}
}

/* The table entry of tensor_id when r's config has it and layer is one of
 * its slices, else NULL. */
static const nf_arch_tensor *slice_of(const nf_ckpt_reader *r, int tensor_id, int layer)
{
	const nf_arch_tensor *t = nf_arch_find(nf_arch_get(r->cfg.arch), (nf_tensor_id)tensor_id);
	if (!t || !nf_arch_present(t, &r->cfg) || layer < 0 ||
	    layer >= (t->per_layer ? r->cfg.n_layers : 1))
		return NULL;
	return t;
}

int nf_ckpt_read(nf_ckpt_reader *r, int tensor_id, int layer, float *dst)
{
	const nf_arch_tensor *t = slice_of(r, tensor_id, layer);
	if (!t)
		return nf_error_set(NF_EINTERNAL, "checkpoint: no tensor %d at layer %d", tensor_id,
				    layer);
	return r->ops->read(r, t, layer, dst);
}

const void *nf_ckpt_blocks(nf_ckpt_reader *r, int tensor_id, int layer, int *ggml_type)
{
	const nf_arch_tensor *t = slice_of(r, tensor_id, layer);
	*ggml_type = -1;
	return t && r->ops->blocks ? r->ops->blocks(r, t, layer, ggml_type) : NULL;
}

void nf_ckpt_drop(nf_ckpt_reader *r, int tensor_id, int layer)
{
	const nf_arch_tensor *t = slice_of(r, tensor_id, layer);
	if (t && r->ops->drop)
		r->ops->drop(r, t, layer);
}

int nf_ckpt_read_layer(nf_ckpt_reader *r, nf_model *layer, int l)
{
	const nf_arch *a = nf_arch_get(r->cfg.arch);
	for (size_t i = 0; i < a->n_tensors; i++) {
		const nf_arch_tensor *t = &a->tensors[i];
		if (!t->per_layer || !nf_arch_present(t, &r->cfg))
			continue;
		int err = nf_ckpt_read(r, t->id, l, *nf_model_slot(layer, t->id));
		if (err)
			return err;
		nf_ckpt_drop(r, t->id, l);
	}
	return 0;
}

void nf_ckpt_close(nf_ckpt_reader *r)
{
	if (r)
		r->ops->close(r);
}

void nf_ckpt_drop_pages(const void *p, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	if (!p || !len || page <= 0)
		return;
	/* whole pages only: a neighbour's pages that go too read back on use */
	uintptr_t lo = (uintptr_t)p / (uintptr_t)page * (uintptr_t)page;
	uintptr_t hi = (uintptr_t)p + len;
	(void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* ---- a whole model ---- */

static void close_reader(void *r) { nf_ckpt_close(r); }

/* Read every slice of r into m; record the blocks r keeps (1 in *kept
 * when any). */
static int read_all(nf_model *m, nf_ckpt_reader *r, int *kept)
{
	const nf_arch *a = nf_arch_get(r->cfg.arch);
	*kept = 0;
	for (size_t i = 0; i < a->n_tensors; i++) {
		const nf_arch_tensor *t = &a->tensors[i];
		uint64_t slice;
		if (!nf_arch_present(t, &r->cfg))
			continue;
		nf_arch_slice_elems(&slice, t, &r->cfg); /* bounded: the model is allocated */
		for (int l = 0; l < (t->per_layer ? r->cfg.n_layers : 1); l++) {
			int type, err = r->ops->read(r, t, l, *nf_model_slot(m, t->id) + (size_t)l * slice);
			if (err)
				return err;
			const void *b = r->ops->blocks ? r->ops->blocks(r, t, l, &type) : NULL;
			if (b) {
				if (!m->source && (err = nf_model_source_init(m, r, close_reader)))
					return err;
				nf_model_source_set(m, t->id, l, b, type);
				*kept = 1;
			}
		}
	}
	return 0;
}

int nf_ckpt_materialize(nf_model **out, nf_ckpt_reader *r)
{
	nf_model *m = NULL;
	int kept = 0, err = nf_model_alloc(&m, &r->cfg);
	*out = NULL;
	if (!err)
		err = read_all(m, r, &kept);
	if (!m || !m->source) /* else the model owns r */
		nf_ckpt_close(r);
	if (err) {
		nf_model_free(m);
		return err;
	}
	*out = m;
	return 0;
}

/* ---- over a model in memory ---- */

typedef struct model_reader {
	nf_ckpt_reader base;
	const nf_model *m;
} model_reader;

static int model_read(nf_ckpt_reader *r, const nf_arch_tensor *t, int layer, float *dst)
{
	const nf_model *m = ((model_reader *)r)->m;
	uint64_t slice;
	nf_arch_slice_elems(&slice, t, &m->cfg);
	const float *src = *nf_model_slot((nf_model *)m, t->id);
	memcpy(dst, src + (size_t)layer * slice, (size_t)slice * sizeof(float));
	return 0;
}

static const void *model_blocks(nf_ckpt_reader *r, const nf_arch_tensor *t, int layer,
				int *ggml_type)
{
	return nf_model_source_blocks(((model_reader *)r)->m, t->id, layer, ggml_type);
}

static void model_close(nf_ckpt_reader *r) { free(r); }

static const nf_ckpt_reader_ops model_ops = {
	.read = model_read,
	.blocks = model_blocks,
	.close = model_close,
};

int nf_ckpt_reader_of_model(nf_ckpt_reader **out, const nf_model *m)
{
	model_reader *r = calloc(1, sizeof *r);
	*out = NULL;
	if (!r)
		return nf_error_set(NF_ENOMEM, "checkpoint reader: out of memory");
	r->base = (nf_ckpt_reader){.ops = &model_ops, .cfg = m->cfg};
	r->m = m;
	*out = &r->base;
	return 0;
}
