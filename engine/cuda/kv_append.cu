/*
 * kv_append.cu - store the keys and values of new positions into the cache
 * (head-major, engine/backend.h): a block per (KV head, position), a thread
 * per element.  f16 rows are the halves of the floats (nearest even); int8
 * rows are a float scale max|x| / 127 and the levels round(x / scale),
 * engine/quant.c's nf_quant_int8_vec per row.  Launch: nf_cu_launch_kv_append.
 */
#include "engine/cuda/kv.cuh"
#include "engine/cuda/reduce.cuh"

/* The cache row of KV head h at position p. */
static __device__ char *kv_row(char *c, int h, int p, size_t head_stride, size_t row_bytes)
{
	return c + (size_t)h * head_stride + (size_t)p * row_bytes;
}

static __device__ void kv_store_f16(char *row, const float *x, int hs)
{
	int i = threadIdx.x;
	if (i < hs)
		((uint16_t *)row)[i] = nf_km_f32_to_f16(x[i]);
}

static __device__ void kv_store_int8(char *row, const float *x, int hs)
{
	int i = threadIdx.x;
	float a = i < hs ? fabsf(x[i]) : 0.0f;
	float s = nf_cu_block_reduce<NF_CU_HEAD_MAX, true>(a) / 127.0f;
	if (i < hs)
		row[4 + i] = (char)nf_km_q8_quantize(x[i], nf_km_q8_inv(s));
	if (i == 0)
		nf_cu_store_f32_unaligned(row, s);
}

#define KV_APPEND_KERNEL(kind)                                                             \
	extern "C" __global__ void __launch_bounds__(NF_CU_HEAD_MAX)                           \
	nf_cu_kv_append_##kind(char *kc, char *vc, const float *k, const float *v, size_t ld, \
			       int pos0, int n_kv_heads, int head_size, size_t head_stride)    \
	{                                                                                  \
		int h = blockIdx.x, b = blockIdx.y;                                        \
		size_t rb = nf_cu_kv_##kind::row_bytes(head_size);                         \
		size_t off = (size_t)b * ld + (size_t)h * head_size;                       \
		kv_store_##kind(kv_row(kc, h, pos0 + b, head_stride, rb), k + off, head_size); \
		kv_store_##kind(kv_row(vc, h, pos0 + b, head_stride, rb), v + off, head_size); \
	}

KV_APPEND_KERNEL(f16)
KV_APPEND_KERNEL(int8)
