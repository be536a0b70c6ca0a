/*
 * fuzz_gguf.c - libFuzzer target: the GGUF reader on any bytes
 * (nf_gguf_open_mem), then every key through the getters, every tensor
 * checked to lie inside the input and found by name, and the first blocks of
 * each dequantized.  Seeds: tests/fuzz/corpus/gguf (made by
 * `nf_gguf_tool seeds DIR`).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every getter on one key: each either answers or refuses, never crashes. */
/* Bytes read from accepted strings land here, so the reads are not optimized away. */
static volatile uint8_t sink;

static void walk_key(const nf_gguf *g, const char *key, nf_gguf_vtype type)
{
	uint64_t u, n;
	uint32_t u32;
	int64_t i;
	float f;
	bool b;
	const char *s;
	size_t len;
	nf_gguf_vtype elem;

	(void)nf_gguf_get_u64(g, key, &u);
	(void)nf_gguf_get_u32(g, key, &u32);
	(void)nf_gguf_get_i64(g, key, &i);
	(void)nf_gguf_get_f32(g, key, &f);
	(void)nf_gguf_get_bool(g, key, &b);
	if (nf_gguf_get_str(g, key, &s, &len) == 0 && len)
		sink ^= (uint8_t)(s[0] ^ s[len - 1]);
	if (type != NF_GGUF_ARRAY || nf_gguf_get_array(g, key, &elem, &n) != 0)
		return;
	/* the first and last few elements: every index is O(1) */
	for (uint64_t k = 0; k < n && k < 4; k++) {
		uint64_t idx[2] = {k, n - 1 - k};
		for (int j = 0; j < 2; j++) {
			if (nf_gguf_array_str(g, key, idx[j], &s, &len) == 0 && len)
				sink ^= (uint8_t)(s[0] ^ s[len - 1]);
			(void)nf_gguf_array_i64(g, key, idx[j], &i);
			(void)nf_gguf_array_f32(g, key, idx[j], &f);
		}
	}
	(void)nf_gguf_array_str(g, key, n, &s, &len); /* one past the end: refused */
}

static void walk_tensor(const nf_gguf *g, const nf_gguf_tensor *t, const uint8_t *data,
			size_t size)
{
	const uint8_t *p = t->data;
	float out[512];
	uint64_t n = nf_ggml_block_elems(t->type), row;

	/* accepted tensors lie inside the input, are whole blocks and are found by name */
	if (!n || t->n_bytes == 0 || p < data || t->n_bytes > size || p + t->n_bytes > data + size)
		abort();
	if (nf_gguf_tensor_find(g, t->name) != t || t->ne[0] % n)
		abort();
	if (nf_ggml_row_bytes(&row, t->type, t->n_elems) != 0 || row != t->n_bytes)
		abort();
	/* the first blocks: 512 elements is whole blocks of every type (1, 32, 256),
	 * and so is n_elems, a multiple of ne[0] */
	n = t->n_elems < 512 ? t->n_elems : 512;
	if (nf_ggml_dequantize(out, t->data, t->type, n) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	nf_gguf *g = NULL;
	nf_gguf_vtype type;

	if (nf_gguf_open_mem(&g, data, size, "fuzz") != 0)
		return 0;
	for (uint64_t i = 0; i < nf_gguf_kv_count(g); i++) {
		const char *key = nf_gguf_kv_key(g, i, &type);
		if (!key || !*key)
			abort();
		walk_key(g, key, type);
	}
	for (uint64_t i = 0; i < nf_gguf_tensor_count(g); i++)
		walk_tensor(g, nf_gguf_tensor_at(g, i), data, size);
	(void)nf_gguf_tensor_find(g, "");
	nf_gguf_free(g);
	return 0;
}
