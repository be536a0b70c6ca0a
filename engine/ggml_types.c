/*
 * ggml_types.c - the ggml tensor types this reader knows: one table row per
 * type (id, name, block size in elements and bytes, dequantizer), and the
 * dequantizers, written from the block layouts of ggml's ggml-common.h and
 * checked against gguf-py's quants.py (tests/e2e/gguf_ref.sh).
 *
 * Each dequantizer walks whole blocks; the arithmetic is done in the same
 * order as ggml's reference (for example (d * sc) * q - dmin * m), in float,
 * so that results are bit-identical to ggml and gguf-py.
 */
#include "engine/gguf.h"

#include <string.h>

#include "engine/safetensors.h" /* nf_f16_to_f32, nf_bf16_to_f32: exact widening */
#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

#define QK_K 256 /* elements in a k-quant super-block */

typedef void (*dequant_fn)(float *out, const uint8_t *p, uint64_t n_blocks);

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static float rd_f16(const uint8_t *p) { return nf_f16_to_f32(rd16(p)); }

static void dq_f32(float *out, const uint8_t *p, uint64_t n)
{
	memcpy(out, p, n * sizeof(float)); /* the file is little-endian, as is every host we build for */
}

static void dq_f16(float *out, const uint8_t *p, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		out[i] = rd_f16(p + 2 * i);
}

static void dq_bf16(float *out, const uint8_t *p, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		out[i] = nf_bf16_to_f32(rd16(p + 2 * i));
}

/* Q8_0: fp16 d, 32 int8 q; x = q * d. */
static void dq_q8_0(float *out, const uint8_t *p, uint64_t nb)
{
	for (uint64_t b = 0; b < nb; b++, p += 34, out += 32) {
		float d = rd_f16(p);
		for (int j = 0; j < 32; j++)
			out[j] = (float)(int8_t)p[2 + j] * d;
	}
}

/* Q4_0: fp16 d, 16 bytes; weight j is the low nibble of byte j, weight j+16
 * its high nibble; x = (q - 8) * d. */
static void dq_q4_0(float *out, const uint8_t *p, uint64_t nb)
{
	for (uint64_t b = 0; b < nb; b++, p += 18, out += 32) {
		float d = rd_f16(p);
		const uint8_t *qs = p + 2;
		for (int j = 0; j < 16; j++) {
			out[j] = (float)((qs[j] & 0x0f) - 8) * d;
			out[j + 16] = (float)((qs[j] >> 4) - 8) * d;
		}
	}
}

/* Q4_1: fp16 d, fp16 m, 16 bytes of nibbles as Q4_0; x = d * q + m. */
static void dq_q4_1(float *out, const uint8_t *p, uint64_t nb)
{
	for (uint64_t b = 0; b < nb; b++, p += 20, out += 32) {
		float d = rd_f16(p), m = rd_f16(p + 2);
		const uint8_t *qs = p + 4;
		for (int j = 0; j < 16; j++) {
			out[j] = d * (float)(qs[j] & 0x0f) + m;
			out[j + 16] = d * (float)(qs[j] >> 4) + m;
		}
	}
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Q5_0: fp16 d, uint32 qh (bit j = the fifth bit of weight j), 16 bytes of
 * nibbles as Q4_0; x = (q - 16) * d. */
static void dq_q5_0(float *out, const uint8_t *p, uint64_t nb)
{
	for (uint64_t b = 0; b < nb; b++, p += 22, out += 32) {
		float d = rd_f16(p);
		uint32_t qh = rd32(p + 2);
		const uint8_t *qs = p + 6;
		for (int j = 0; j < 16; j++) {
			int lo = (qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
			int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
			out[j] = (float)(lo - 16) * d;
			out[j + 16] = (float)(hi - 16) * d;
		}
	}
}

/* Q5_1: fp16 d, fp16 m, uint32 qh, 16 bytes; x = d * q + m. */
static void dq_q5_1(float *out, const uint8_t *p, uint64_t nb)
{
	for (uint64_t b = 0; b < nb; b++, p += 24, out += 32) {
		float d = rd_f16(p), m = rd_f16(p + 2);
		uint32_t qh = rd32(p + 4);
		const uint8_t *qs = p + 8;
		for (int j = 0; j < 16; j++) {
			int lo = (qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
			int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
			out[j] = d * (float)lo + m;
			out[j + 16] = d * (float)hi + m;
		}
	}
}

/* The 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes of a
 * Q4_K/Q5_K super-block: bytes 0-3 hold scales 0-3 and bytes 4-7 mins 0-3 in
 * their low 6 bits; sub-blocks 4-7 take their low 4 bits from bytes 8-11 and
 * their top 2 bits from the spare top bits of bytes 0-7. */
static void scale_min_k4(int j, const uint8_t *q, float *sc, float *m)
{
	if (j < 4) {
		*sc = (float)(q[j] & 63);
		*m = (float)(q[j + 4] & 63);
	} else {
		*sc = (float)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
		*m = (float)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
	}
}

/* Q4_K: fp16 d, fp16 dmin, 12 bytes of scales, 128 bytes of nibbles.  Each
 * 64 weights take 32 bytes: low nibbles are sub-block 2i, high nibbles 2i+1;
 * x = (d * sc) * q - dmin * m. */
static void dq_q4_k(float *out, const uint8_t *p, uint64_t nb)
{
	for (uint64_t b = 0; b < nb; b++, p += 144) {
		float d = rd_f16(p), dmin = rd_f16(p + 2);
		const uint8_t *sc = p + 4, *q = p + 16;
		for (int i = 0; i < 4; i++, q += 32, out += 64) {
			float s0, m0, s1, m1;
			scale_min_k4(2 * i, sc, &s0, &m0);
			scale_min_k4(2 * i + 1, sc, &s1, &m1);
			float d0 = d * s0, dm0 = dmin * m0, d1 = d * s1, dm1 = dmin * m1;
			for (int l = 0; l < 32; l++) {
				out[l] = d0 * (float)(q[l] & 0x0f) - dm0;
				out[l + 32] = d1 * (float)(q[l] >> 4) - dm1;
			}
		}
	}
}

/* Q5_K: as Q4_K plus 32 bytes qh before the nibbles: bit s of qh[l] is the
 * fifth bit of weight l of sub-block s. */
static void dq_q5_k(float *out, const uint8_t *p, uint64_t nb)
{
	for (uint64_t b = 0; b < nb; b++, p += 176) {
		float d = rd_f16(p), dmin = rd_f16(p + 2);
		const uint8_t *sc = p + 4, *qh = p + 16, *q = p + 48;
		for (int i = 0; i < 4; i++, q += 32, out += 64) {
			float s0, m0, s1, m1;
			scale_min_k4(2 * i, sc, &s0, &m0);
			scale_min_k4(2 * i + 1, sc, &s1, &m1);
			float d0 = d * s0, dm0 = dmin * m0, d1 = d * s1, dm1 = dmin * m1;
			for (int l = 0; l < 32; l++) {
				int lo = (q[l] & 0x0f) | ((qh[l] >> (2 * i)) & 1) << 4;
				int hi = (q[l] >> 4) | ((qh[l] >> (2 * i + 1)) & 1) << 4;
				out[l] = d0 * (float)lo - dm0;
				out[l + 32] = d1 * (float)hi - dm1;
			}
		}
	}
}

/* Q6_K: 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8 scales
 * (one per 16 weights), fp16 d.  Each half of 128 weights uses 64 bytes of ql
 * and 32 of qh: weight l, l+32, l+64, l+96 take ql[l] low, ql[l+32] low,
 * ql[l] high, ql[l+32] high and bits 0-1, 2-3, 4-5, 6-7 of qh[l];
 * x = (d * sc) * (q - 32). */
static void dq_q6_k(float *out, const uint8_t *p, uint64_t nb)
{
	for (uint64_t b = 0; b < nb; b++, p += 210) {
		float d = rd_f16(p + 208);
		const uint8_t *ql = p, *qh = p + 128;
		const int8_t *sc = (const int8_t *)(p + 192);
		for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, out += 128) {
			for (int l = 0; l < 32; l++) {
				int is = l / 16;
				int q1 = ((ql[l] & 0x0f) | ((qh[l] >> 0) & 3) << 4) - 32;
				int q2 = ((ql[l + 32] & 0x0f) | ((qh[l] >> 2) & 3) << 4) - 32;
				int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
				int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
				out[l] = d * (float)sc[is] * (float)q1;
				out[l + 32] = d * (float)sc[is + 2] * (float)q2;
				out[l + 64] = d * (float)sc[is + 4] * (float)q3;
				out[l + 96] = d * (float)sc[is + 6] * (float)q4;
			}
		}
	}
}

static const struct ggml_type_row {
	uint32_t id;
	const char *name;
	uint32_t block_elems, block_bytes;
	dequant_fn dequant; /* called once per tensor or row, never per element */
} types[] = {
	{NF_GGML_F32, "F32", 1, 4, dq_f32},
	{NF_GGML_F16, "F16", 1, 2, dq_f16},
	{NF_GGML_BF16, "BF16", 1, 2, dq_bf16},
	{NF_GGML_Q4_0, "Q4_0", 32, 18, dq_q4_0},
	{NF_GGML_Q4_1, "Q4_1", 32, 20, dq_q4_1},
	{NF_GGML_Q5_0, "Q5_0", 32, 22, dq_q5_0},
	{NF_GGML_Q5_1, "Q5_1", 32, 24, dq_q5_1},
	{NF_GGML_Q8_0, "Q8_0", 32, 34, dq_q8_0},
	{NF_GGML_Q4_K, "Q4_K", QK_K, 144, dq_q4_k},
	{NF_GGML_Q5_K, "Q5_K", QK_K, 176, dq_q5_k},
	{NF_GGML_Q6_K, "Q6_K", QK_K, 210, dq_q6_k},
};

static const struct ggml_type_row *type_row(uint32_t type)
{
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (types[i].id == type)
			return &types[i];
	return NULL;
}

const char *nf_ggml_type_name(uint32_t type)
{
	const struct ggml_type_row *r = type_row(type);
	return r ? r->name : NULL;
}

uint32_t nf_ggml_block_elems(uint32_t type)
{
	const struct ggml_type_row *r = type_row(type);
	return r ? r->block_elems : 0;
}

uint32_t nf_ggml_block_bytes(uint32_t type)
{
	const struct ggml_type_row *r = type_row(type);
	return r ? r->block_bytes : 0;
}

int nf_ggml_row_bytes(uint64_t *out, uint32_t type, uint64_t n)
{
	const struct ggml_type_row *r = type_row(type);
	if (!r)
		return nf_error_set(NF_EUNSUPPORTED, "ggml type %u is not supported", type);
	if (n % r->block_elems)
		return nf_error_set(NF_EINPUT, "%llu elements of %s are not whole blocks of %u",
				    (unsigned long long)n, r->name, r->block_elems);
	if (!nf_u64_mul(out, n / r->block_elems, r->block_bytes))
		return nf_error_set(NF_EINPUT, "%llu elements of %s: byte size overflows",
				    (unsigned long long)n, r->name);
	return 0;
}

int nf_ggml_dequantize(float *out, const void *data, uint32_t type, uint64_t n)
{
	const struct ggml_type_row *r = type_row(type);
	uint64_t bytes;
	int err = nf_ggml_row_bytes(&bytes, type, n);
	if (err)
		return err;
	r->dequant(out, data, n / r->block_elems);
	return 0;
}
