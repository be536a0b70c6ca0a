/*
 * kv_kind.h - how a KV cache stores its rows (one per KV head and
 * position): the one list of cache kinds, their names in config.json and
 * recipes, and the bytes of a row.  docs/quantization.md, "The KV cache".
 */
#ifndef NF_ENGINE_KV_KIND_H
#define NF_ENGINE_KV_KIND_H

#include <stddef.h>

typedef enum nf_kv_kind {
	NF_KV_F32,  /* head_size floats */
	NF_KV_F16,  /* head_size IEEE halves, widened exactly when read */
	NF_KV_INT8, /* a float scale (max|x| / 127), then head_size int8: x = scale * q */
	NF_KV_KIND_COUNT
} nf_kv_kind;

/* "f32", "f16", "int8" ("unknown" out of range). */
const char *nf_kv_kind_name(nf_kv_kind kind);
/* NF_EINPUT (naming the choices) for NULL or an unknown name. */
int nf_kv_kind_parse(nf_kv_kind *out, const char *name);

/* Bytes of one cache row of head_size elements. */
static inline size_t nf_kv_row_bytes(nf_kv_kind kind, size_t head_size)
{
	switch (kind) {
	case NF_KV_F16: return 2 * head_size;
	case NF_KV_INT8: return sizeof(float) + head_size;
	default: return sizeof(float) * head_size;
	}
}

#endif
