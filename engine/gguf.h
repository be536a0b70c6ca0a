/*
 * gguf.h - read GGUF files (llama.cpp's model format), versions 2 and 3.
 *
 * Layout (little-endian): magic "GGUF", uint32 version, uint64 tensor count,
 * uint64 metadata count; the metadata key/value pairs (key: uint64 length +
 * bytes; uint32 value type; the value); the tensor infos (name, uint32
 * n_dims, n_dims uint64 dims fastest-varying first, uint32 ggml type, uint64
 * offset into the data section); then the data section at the next multiple
 * of general.alignment (default 32).
 *
 * The file is mapped, never copied: tensor data pointers point into the
 * mapping.  Opening checks everything before it is used (counts, lengths,
 * types, dims, offsets, overlaps, the data section's end); a lie is NF_EINPUT
 * with "PATH: offset N: what is wrong".  No allocation is sized by a number
 * the file gives before that number is bounded by the bytes left.
 */
#ifndef NF_ENGINE_GGUF_H
#define NF_ENGINE_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Metadata value types, as the format numbers them. */
typedef enum nf_gguf_vtype {
	NF_GGUF_U8 = 0,
	NF_GGUF_I8 = 1,
	NF_GGUF_U16 = 2,
	NF_GGUF_I16 = 3,
	NF_GGUF_U32 = 4,
	NF_GGUF_I32 = 5,
	NF_GGUF_F32 = 6,
	NF_GGUF_BOOL = 7,
	NF_GGUF_STRING = 8,
	NF_GGUF_ARRAY = 9,
	NF_GGUF_U64 = 10,
	NF_GGUF_I64 = 11,
	NF_GGUF_F64 = 12,
	NF_GGUF_VTYPE_COUNT
} nf_gguf_vtype;

/* ggml tensor types this reader knows (the format's numbering). */
typedef enum nf_ggml_type {
	NF_GGML_F32 = 0,
	NF_GGML_F16 = 1,
	NF_GGML_Q4_0 = 2,
	NF_GGML_Q4_1 = 3,
	NF_GGML_Q5_0 = 6,
	NF_GGML_Q5_1 = 7,
	NF_GGML_Q8_0 = 8,
	NF_GGML_Q4_K = 12,
	NF_GGML_Q5_K = 13,
	NF_GGML_Q6_K = 14,
	NF_GGML_BF16 = 30,
} nf_ggml_type;

#define NF_GGUF_MAX_DIMS 4

typedef struct nf_gguf_tensor {
	const char *name;      /* NUL-terminated copy */
	nf_ggml_type type;
	int n_dims;
	uint64_t ne[NF_GGUF_MAX_DIMS]; /* ne[0] fastest-varying (a matrix's columns); unused dims 1 */
	uint64_t n_elems;
	uint64_t offset;       /* byte offset of the data in the file */
	uint64_t n_bytes;
	const void *data;      /* into the mapping */
} nf_gguf_tensor;

typedef struct nf_gguf nf_gguf;

/* Map and check a file.  NF_EINPUT with "PATH: offset N: ..." for a damaged
 * or lying file, NF_EUNSUPPORTED for a valid file with a tensor type this
 * reader does not know, NF_EIO / NF_ENOTFOUND for the file itself. */
int nf_gguf_open(nf_gguf **out, const char *path);
/* The same over bytes in memory (borrowed: must outlive the handle); what
 * names them in messages. */
int nf_gguf_open_mem(nf_gguf **out, const void *data, size_t len, const char *what);
void nf_gguf_free(nf_gguf *g); /* NULL is fine */

const char *nf_gguf_path(const nf_gguf *g); /* the name used in messages */
uint32_t nf_gguf_version(const nf_gguf *g);

/* ---- metadata ---- */

/* Typed getters.  NF_ENOTFOUND (with a message naming the key) when the key
 * is absent; NF_EINPUT when it has another type or its value does not fit
 * (an integer getter accepts any integer type whose value is in range; the
 * float getter accepts F32 and F64).  *out is untouched on error. */
int nf_gguf_get_u64(const nf_gguf *g, const char *key, uint64_t *out);
int nf_gguf_get_u32(const nf_gguf *g, const char *key, uint32_t *out);
int nf_gguf_get_i64(const nf_gguf *g, const char *key, int64_t *out);
int nf_gguf_get_f32(const nf_gguf *g, const char *key, float *out);
int nf_gguf_get_bool(const nf_gguf *g, const char *key, bool *out);
/* A string value: pointer into the mapping (not NUL-terminated) and length. */
int nf_gguf_get_str(const nf_gguf *g, const char *key, const char **s, size_t *len);

/* Arrays: element type and count (NF_ENOTFOUND / NF_EINPUT as above). */
int nf_gguf_get_array(const nf_gguf *g, const char *key, nf_gguf_vtype *elem, uint64_t *n);
/* Element i of an array of strings (O(1): the offsets are indexed at open). */
int nf_gguf_array_str(const nf_gguf *g, const char *key, uint64_t i, const char **s, size_t *len);
/* Element i of a numeric array, converted (integers must fit; floats for f32). */
int nf_gguf_array_i64(const nf_gguf *g, const char *key, uint64_t i, int64_t *out);
int nf_gguf_array_f32(const nf_gguf *g, const char *key, uint64_t i, float *out);

/* Iterate the keys in file order (i < nf_gguf_kv_count); for inspect. */
uint64_t nf_gguf_kv_count(const nf_gguf *g);
const char *nf_gguf_kv_key(const nf_gguf *g, uint64_t i, nf_gguf_vtype *type);

/* ---- tensors ---- */

uint64_t nf_gguf_tensor_count(const nf_gguf *g);
const nf_gguf_tensor *nf_gguf_tensor_at(const nf_gguf *g, uint64_t i);
/* NULL when absent (no error set). */
const nf_gguf_tensor *nf_gguf_tensor_find(const nf_gguf *g, const char *name);

/* ---- tensor types ---- */

/* The type's name ("F32", "Q4_K", ...), or NULL for one this reader does not know. */
const char *nf_ggml_type_name(uint32_t type);
/* Elements per block and bytes per block (F32: 1 and 4); 0 when unknown. */
uint32_t nf_ggml_block_elems(uint32_t type);
uint32_t nf_ggml_block_bytes(uint32_t type);
/* Bytes of n elements of type (n a multiple of the block size), overflow-checked. */
int nf_ggml_row_bytes(uint64_t *out, uint32_t type, uint64_t n);
/* Dequantize n elements (a multiple of the block size) from data into out,
 * exactly as the format defines each type (fp16 and bf16 widened exactly). */
int nf_ggml_dequantize(float *out, const void *data, uint32_t type, uint64_t n);

#endif
