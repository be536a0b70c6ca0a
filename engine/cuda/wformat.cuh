/*
 * wformat.cuh - the weight formats as the GEMV, GEMM and embedding kernels
 * read them: per format, one element (for edges and tiles), a 16-byte chunk
 * of a row decoded to floats (the GEMV's streaming load), and the factor
 * applied once per output row.  The per-element math is engine/kmath/'s.
 */
#ifndef NF_ENGINE_CUDA_WFORMAT_CUH
#define NF_ENGINE_CUDA_WFORMAT_CUH

#include "engine/cuda/launch.h"
#include "engine/kmath/dequant.h"

/* Each format: VEC columns a 16-byte chunk, chunk(w, r, k, out) decodes
 * chunk k of row r (all its columns inside the row), at(w, r, c) one
 * element, post(w, r) the factor of row r's sum in a product, and
 * row_scale(w, r) the factor of row r read alone (the embedding: fp8's
 * activation scale belongs to products only). */

struct nf_cu_fmt_f32 {
	enum { VEC = 4 };
	static __device__ const float *row(const nf_cu_wmat &w, int r)
	{
		return (const float *)w.data + (size_t)r * w.cols;
	}
	static __device__ float at(const nf_cu_wmat &w, int r, int c) { return row(w, r)[c]; }
	static __device__ void chunk(const nf_cu_wmat &w, int r, int k, float *out)
	{
		float4 v = ((const float4 *)row(w, r))[k];
		out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
	}
	static __device__ float post(const nf_cu_wmat &, int) { return 1.0f; }
	static __device__ float row_scale(const nf_cu_wmat &, int) { return 1.0f; }
};

/* Eight 16-bit values of a uint4, low half of each word first. */
static __device__ __forceinline__ void nf_cu_unpack_u16(const uint4 &v, uint16_t *h)
{
	const uint32_t w[4] = {v.x, v.y, v.z, v.w};
	for (int i = 0; i < 4; i++) {
		h[2 * i] = (uint16_t)(w[i] & 0xffffu);
		h[2 * i + 1] = (uint16_t)(w[i] >> 16);
	}
}

/* Sixteen bytes of a uint4, in memory order. */
static __device__ __forceinline__ void nf_cu_unpack_u8(const uint4 &v, uint8_t *b)
{
	const uint32_t w[4] = {v.x, v.y, v.z, v.w};
	for (int i = 0; i < 16; i++)
		b[i] = (uint8_t)(w[i / 4] >> (8 * (i % 4)));
}

template <bool BF16> struct nf_cu_fmt_h16 {
	enum { VEC = 8 };
	static __device__ const uint16_t *row(const nf_cu_wmat &w, int r)
	{
		return (const uint16_t *)w.data + (size_t)r * w.cols;
	}
	static __device__ float widen(uint16_t h)
	{
		return BF16 ? nf_km_bf16_to_f32(h) : nf_km_f16_to_f32(h);
	}
	static __device__ float at(const nf_cu_wmat &w, int r, int c) { return widen(row(w, r)[c]); }
	static __device__ void chunk(const nf_cu_wmat &w, int r, int k, float *out)
	{
		uint16_t h[8];
		nf_cu_unpack_u16(((const uint4 *)row(w, r))[k], h);
		for (int i = 0; i < 8; i++)
			out[i] = widen(h[i]);
	}
	static __device__ float post(const nf_cu_wmat &, int) { return 1.0f; }
	static __device__ float row_scale(const nf_cu_wmat &, int) { return 1.0f; }
};
typedef nf_cu_fmt_h16<false> nf_cu_fmt_f16;
typedef nf_cu_fmt_h16<true> nf_cu_fmt_bf16;

/* int8 per row: the levels are summed, the row's scale applied once. */
struct nf_cu_fmt_q8 {
	enum { VEC = 16 };
	static __device__ const int8_t *row(const nf_cu_wmat &w, int r)
	{
		return (const int8_t *)w.data + (size_t)r * w.cols;
	}
	static __device__ float at(const nf_cu_wmat &w, int r, int c) { return (float)row(w, r)[c]; }
	static __device__ void chunk(const nf_cu_wmat &w, int r, int k, float *out)
	{
		uint8_t b[16];
		nf_cu_unpack_u8(((const uint4 *)row(w, r))[k], b);
		for (int i = 0; i < 16; i++)
			out[i] = (float)(int8_t)b[i];
	}
	static __device__ float post(const nf_cu_wmat &w, int r) { return w.scale[r]; }
	static __device__ float row_scale(const nf_cu_wmat &w, int r) { return w.scale[r]; }
};

/* fp8 e4m3: the codes decoded exactly, scale[r] * act_scale applied once. */
struct nf_cu_fmt_f8 {
	enum { VEC = 16 };
	static __device__ const uint8_t *row(const nf_cu_wmat &w, int r)
	{
		return (const uint8_t *)w.data + (size_t)r * w.cols;
	}
	static __device__ float at(const nf_cu_wmat &w, int r, int c)
	{
		return nf_km_e4m3_to_f32(row(w, r)[c]);
	}
	static __device__ void chunk(const nf_cu_wmat &w, int r, int k, float *out)
	{
		uint8_t b[16];
		nf_cu_unpack_u8(((const uint4 *)row(w, r))[k], b);
		for (int i = 0; i < 16; i++)
			out[i] = nf_km_e4m3_to_f32(b[i]);
	}
	static __device__ float post(const nf_cu_wmat &w, int r) { return w.scale[r] * w.act_scale; }
	static __device__ float row_scale(const nf_cu_wmat &w, int r) { return w.scale[r]; }
};

/* int4 groups: a chunk is one packed block of 32 columns (16 bytes), inside
 * one group since groups are whole blocks; scale and min per group. */
struct nf_cu_fmt_q4 {
	enum { VEC = 32 };
	static __device__ const uint8_t *row(const nf_cu_wmat &w, int r)
	{
		return (const uint8_t *)w.data + (size_t)r * ((size_t)(w.cols + 31) / 32 * 16);
	}
	static __device__ const uint16_t *group_sm(const nf_cu_wmat &w, int r, int c)
	{
		int groups = (w.cols + w.group - 1) / w.group;
		return (const uint16_t *)w.aux + ((size_t)r * groups + c / w.group) * 2;
	}
	static __device__ float at(const nf_cu_wmat &w, int r, int c)
	{
		const uint16_t *sm = group_sm(w, r, c);
		return nf_km_q4_dequant(nf_km_q4_level(row(w, r), (size_t)c), nf_km_f16_to_f32(sm[0]),
					nf_km_f16_to_f32(sm[1]));
	}
	static __device__ void chunk(const nf_cu_wmat &w, int r, int k, float *out)
	{
		const uint16_t *sm = group_sm(w, r, k * 32);
		float s = nf_km_f16_to_f32(sm[0]), m = nf_km_f16_to_f32(sm[1]);
		uint8_t b[16];
		nf_cu_unpack_u8(((const uint4 *)row(w, r))[k], b);
		for (int j = 0; j < 16; j++) {
			out[j] = nf_km_q4_dequant(b[j] & 0x0fu, s, m);
			out[j + 16] = nf_km_q4_dequant(b[j] >> 4, s, m);
		}
	}
	static __device__ float post(const nf_cu_wmat &, int) { return 1.0f; }
	static __device__ float row_scale(const nf_cu_wmat &, int) { return 1.0f; }
};

#endif
