/*
 * ckpt_reader.h - a checkpoint opened for reading one slice at a time: its
 * config first, then any (tensor, layer) slice as float32 in the model's
 * layout (model.h: row-major, q and k rows in the interleaved order), read
 * from the file only when asked.
 *
 * Every loader is one of these.  nf_ckpt_load reads every slice into an
 * nf_model; the streaming engine builder (engine_stream.h) reads one layer
 * at a time and lets its file pages go, so that a model larger than memory
 * can be quantized.
 */
#ifndef NF_ENGINE_CKPT_READER_H
#define NF_ENGINE_CKPT_READER_H

#include "engine/arch.h"
#include "engine/checkpoint.h"
#include "engine/model.h"

typedef struct nf_ckpt_reader nf_ckpt_reader;

typedef struct nf_ckpt_reader_ops {
	/* Slice (t, layer) into dst (nf_arch_slice_elems floats), every
	 * weight checked finite; NF_EINPUT naming the file and tensor. */
	int (*read)(nf_ckpt_reader *r, const nf_arch_tensor *t, int layer, float *dst);
	/* The file's own blocks of the slice and their ggml type, when the
	 * file keeps them in the model's row order (GGUF), else NULL.
	 * Optional (NULL: never). */
	const void *(*blocks)(nf_ckpt_reader *r, const nf_arch_tensor *t, int layer,
			      int *ggml_type);
	/* The slice has been used: the memory its file pages take may go.
	 * Optional. */
	void (*drop)(nf_ckpt_reader *r, const nf_arch_tensor *t, int layer);
	void (*close)(nf_ckpt_reader *r);
} nf_ckpt_reader_ops;

/* Each format's reader embeds this as its first member. */
struct nf_ckpt_reader {
	const nf_ckpt_reader_ops *ops;
	nf_model_config cfg; /* validated */
};

/* Open path (NF_CKPT_AUTO: nf_ckpt_sniff) and check its config and every
 * tensor's presence and shape; no weight is read yet. */
int nf_ckpt_open(nf_ckpt_reader **out, const char *path, nf_ckpt_format format);
int nf_ckpt_open_llama2c(nf_ckpt_reader **out, const char *path);
int nf_ckpt_open_hf(nf_ckpt_reader **out, const char *path);
int nf_ckpt_open_gguf(nf_ckpt_reader **out, const char *path);

/* A reader over a model already in memory (borrowed: it must outlive the
 * reader); its blocks are the model's source blocks. */
int nf_ckpt_reader_of_model(nf_ckpt_reader **out, const nf_model *m);

/* Slice (tensor_id, layer) of r's table into dst; NF_EINTERNAL for a
 * tensor the config does not have or a layer out of range. */
int nf_ckpt_read(nf_ckpt_reader *r, int tensor_id, int layer, float *dst);
/* The file's blocks of the slice (see ops->blocks), or NULL with *ggml_type -1. */
const void *nf_ckpt_blocks(nf_ckpt_reader *r, int tensor_id, int layer, int *ggml_type);
/* Let the slice's file pages go (a hint; nothing when the reader has none). */
void nf_ckpt_drop(nf_ckpt_reader *r, int tensor_id, int layer);
void nf_ckpt_close(nf_ckpt_reader *r); /* NULL is fine */

/* Every per-layer tensor of layer l into layer (nf_model_alloc_layer of
 * r's config), then their file pages dropped. */
int nf_ckpt_read_layer(nf_ckpt_reader *r, nf_model *layer, int l);

/* Every slice of r into a new model.  r is consumed, closed or kept by
 * the model for its blocks (nf_model_source_blocks), even on error. */
int nf_ckpt_materialize(nf_model **out, nf_ckpt_reader *r);

/* Advise the kernel that the file pages under [p, p + len) of a read-only
 * mapping may be dropped (they read back from the file if touched). */
void nf_ckpt_drop_pages(const void *p, size_t len);

#endif
