/*
 * kv.cuh - a KV cache row as the attention kernels read it, per cache kind
 * (engine/kv_kind.h): the element as the score's dot product takes it and
 * the row's scale.  f16: the half widened, scale 1.  int8: the level
 * (an exact small integer in float, so the float dot product of levels is
 * the CPU's exact integer one) and the float in front of the row, read
 * byte by byte since rows of 4 + head_size bytes leave it unaligned.
 */
#ifndef NF_ENGINE_CUDA_KV_CUH
#define NF_ENGINE_CUDA_KV_CUH

#include "engine/cuda/launch.h"
#include "engine/kmath/dequant.h"

struct nf_cu_kv_f16 {
	enum { QUANTISED_QUERY = 0 };
	static __device__ size_t row_bytes(int hs) { return 2 * (size_t)hs; }
	static __device__ float elem(const char *row, int i)
	{
		return nf_km_f16_to_f32(((const uint16_t *)row)[i]);
	}
	static __device__ float scale(const char *) { return 1.0f; }
};

static __device__ __forceinline__ float nf_cu_load_f32_unaligned(const char *p)
{
	const unsigned char *b = (const unsigned char *)p;
	return nf_km_bits_f32((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
			      (uint32_t)b[3] << 24);
}

static __device__ __forceinline__ void nf_cu_store_f32_unaligned(char *p, float v)
{
	uint32_t u = nf_km_f32_bits(v);
	for (int i = 0; i < 4; i++)
		p[i] = (char)(u >> (8 * i));
}

struct nf_cu_kv_int8 {
	enum { QUANTISED_QUERY = 1 }; /* scores are exact integer dot products */
	static __device__ size_t row_bytes(int hs) { return 4 + (size_t)hs; }
	static __device__ float elem(const char *row, int i) { return (float)(int8_t)row[4 + i]; }
	static __device__ float scale(const char *row) { return nf_cu_load_f32_unaligned(row); }
};

#endif
