/*
 * safetensors.h - reading and writing the safetensors format:
 *   u64 little-endian header length N, N bytes of JSON header
 *   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"k": "v"}}, then the data section.
 * The reader validates everything (header length bound, JSON, dtypes, shapes
 * matching byte sizes, offsets inside the data section, no overlaps) before
 * exposing a tensor.  The writer aligns each tensor's data to 64 bytes inside
 * the file (header padded with spaces) so a reader can mmap and use in place.
 */
#ifndef NF_ENGINE_SAFETENSORS_H
#define NF_ENGINE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define NF_ST_MAX_HEADER (100u << 20) /* refuse absurd header lengths */
#define NF_ST_MAX_DIMS 8

typedef enum nf_dtype {
	NF_DTYPE_F32,
	NF_DTYPE_F16,
	NF_DTYPE_BF16,
	NF_DTYPE_I8,
	NF_DTYPE_U8,
	NF_DTYPE_I32,
	NF_DTYPE_F8_E4M3,
} nf_dtype;

const char *nf_dtype_name(nf_dtype t); /* "F32", "F16", ... as in safetensors */
size_t nf_dtype_size(nf_dtype t);      /* bytes per element */

typedef struct nf_st_tensor {
	const char *name;      /* points into the file object */
	nf_dtype dtype;
	int ndim;
	uint64_t shape[NF_ST_MAX_DIMS];
	const void *data;      /* in the mapped file; valid while the file is open */
	uint64_t nbytes;
} nf_st_tensor;

typedef struct nf_st_file nf_st_file;

/* mmap and validate a safetensors file.  Errors name the file and what is wrong. */
int nf_st_open(nf_st_file **out, const char *path);
/* The same over bytes in memory (fuzzing, embedded data): data must stay
 * valid and unchanged until nf_st_close; `what` names it in messages. */
int nf_st_open_mem(nf_st_file **out, const void *data, size_t len, const char *what);
void nf_st_close(nf_st_file *f); /* NULL is fine */

size_t nf_st_count(const nf_st_file *f);
const nf_st_tensor *nf_st_at(const nf_st_file *f, size_t i);
/* NULL when absent. */
const nf_st_tensor *nf_st_find(const nf_st_file *f, const char *name);
/* A "__metadata__" string value, or NULL. */
const char *nf_st_metadata(const nf_st_file *f, const char *key);

/* Writer: add tensors (data is copied or referenced until finish), then
 * finish writes the file atomically.  Tensors are written in the order added. */
typedef struct nf_st_writer nf_st_writer;
int nf_st_writer_new(nf_st_writer **out);
/* data must stay valid until nf_st_writer_finish; shape has ndim entries. */
int nf_st_writer_add(nf_st_writer *w, const char *name, nf_dtype dtype, int ndim,
		     const uint64_t *shape, const void *data, uint64_t nbytes);
int nf_st_writer_set_metadata(nf_st_writer *w, const char *key, const char *value);
/* Write the file (atomically: path appears complete or not at all). */
int nf_st_writer_finish(nf_st_writer *w, const char *path);
/* The same in steps, for tensors too large to hold at once: reserve them
 * (shape and size, no data), begin (header and every added tensor written
 * to a temp file beside path), put each reserved tensor's bytes in any
 * order, commit (rename onto path).  Freeing a begun writer discards it. */
int nf_st_writer_reserve(nf_st_writer *w, const char *name, nf_dtype dtype, int ndim,
			 const uint64_t *shape, uint64_t nbytes);
int nf_st_writer_begin(nf_st_writer *w, const char *path);
/* Bytes [off, off + len) of reserved tensor name. */
int nf_st_writer_put(nf_st_writer *w, const char *name, uint64_t off, const void *data,
		     size_t len);
int nf_st_writer_commit(nf_st_writer *w);
void nf_st_writer_free(nf_st_writer *w); /* NULL is fine */

/* Half-precision conversions used by the loaders and quantizers. */
float nf_f16_to_f32(uint16_t h);
uint16_t nf_f32_to_f16(float f);
float nf_bf16_to_f32(uint16_t h);
uint16_t nf_f32_to_bf16(float f); /* round to nearest even */

#endif
