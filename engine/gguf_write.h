/*
 * gguf_write.h - a minimal GGUF writer, for tests, fuzz seeds and tools that
 * need small hand-made files (honest ones, and, through the raw calls, lying
 * ones).  Keys and tensors are written in the order they are added; tensor
 * data is placed at multiples of the alignment (32, or the value of a u32
 * general.alignment key that is a power of two).
 *
 *   nf_gguf_writer *w; nf_gguf_writer_new(&w);
 *   nf_gguf_writer_add_str(w, "general.architecture", "llama", 5);
 *   nf_gguf_writer_add_tensor(w, "x", NF_GGML_Q8_0, 2, ne, blocks, n_bytes);
 *   nf_gguf_writer_write(w, "x.gguf");  nf_gguf_writer_free(w);
 */
#ifndef NF_ENGINE_GGUF_WRITE_H
#define NF_ENGINE_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/gguf.h"

typedef struct nf_gguf_writer nf_gguf_writer;

int nf_gguf_writer_new(nf_gguf_writer **out);
void nf_gguf_writer_free(nf_gguf_writer *w); /* NULL is fine */

/* The version field (default 3); any value is written, so tests can lie. */
void nf_gguf_writer_set_version(nf_gguf_writer *w, uint32_t version);

/* ---- metadata (the key is copied; duplicate keys are written as given) ---- */

/* A scalar of a fixed-size type (every type but STRING and ARRAY): value
 * points to the C type of that width (uint8_t, int16_t, float, double, and
 * for BOOL one byte 0 or 1). */
int nf_gguf_writer_add_scalar(nf_gguf_writer *w, const char *key, nf_gguf_vtype type,
			      const void *value);
int nf_gguf_writer_add_u32(nf_gguf_writer *w, const char *key, uint32_t v);
int nf_gguf_writer_add_u64(nf_gguf_writer *w, const char *key, uint64_t v);
int nf_gguf_writer_add_i32(nf_gguf_writer *w, const char *key, int32_t v);
int nf_gguf_writer_add_f32(nf_gguf_writer *w, const char *key, float v);
int nf_gguf_writer_add_bool(nf_gguf_writer *w, const char *key, bool v);
int nf_gguf_writer_add_str(nf_gguf_writer *w, const char *key, const char *s, size_t len);
/* An array of n fixed-size values of type elem, packed as C values of that width. */
int nf_gguf_writer_add_array(nf_gguf_writer *w, const char *key, nf_gguf_vtype elem,
			     const void *values, uint64_t n);
/* An array of n NUL-terminated strings. */
int nf_gguf_writer_add_str_array(nf_gguf_writer *w, const char *key, const char *const *s,
				 uint64_t n);
/* A key with any type number and the value's bytes exactly as given (nested
 * arrays, lying counts, unknown types). */
int nf_gguf_writer_add_raw(nf_gguf_writer *w, const char *key, uint32_t type, const void *bytes,
			   size_t len);

/* ---- tensors ---- */

/* A tensor of a type this reader knows; ne has n_dims entries (1..4, each > 0) and
 * n_bytes must be what type and dims need.  data is copied. */
int nf_gguf_writer_add_tensor(nf_gguf_writer *w, const char *name, nf_ggml_type type, int n_dims,
			      const uint64_t *ne, const void *data, uint64_t n_bytes);

/* ---- output ---- */

/* The whole file in a new buffer (caller frees). */
int nf_gguf_writer_to_mem(nf_gguf_writer *w, uint8_t **out, size_t *len);
/* Write the file atomically (util/fs.h). */
int nf_gguf_writer_write(nf_gguf_writer *w, const char *path);

#endif
