/*
 * layout.h - how a weight matrix's elements are laid out in memory.
 *
 * NF_BK_ROWS is plain row-major.  NF_BK_TILE8 stores each block of 8 rows
 * as its 64-byte column chunks in turn: chunk 0 of rows 0..7, then chunk 1
 * of rows 0..7, and so on.  A GEMV kernel that consumes 8 rows at a time
 * (64 bytes of each per step) then reads memory as one sequential stream,
 * which the hardware prefetchers follow at full bandwidth, instead of eight
 * short streams of one row each, which they do not (measured on the EPYC
 * VMs here: ~27 GB/s for the 8-row pattern against ~50 GB/s sequential,
 * docs/benchmarks.md).  The arithmetic is unchanged: kernels compute the
 * same sums in the same order whatever the layout.
 *
 * Kernels address a block of rows through two strides, in elements, valid
 * while rows r..r+i stay within one 8-row tile (and always for row-major
 * matrices):
 *   element (r + i, c) = m + nf_bk_index(m, r, 0)
 *                        + i * nf_bk_row_stride(m)
 *                        + (c / nf_bk_chunk(m)) * nf_bk_chunk_stride(m)
 *                        + c % nf_bk_chunk(m)
 */
#ifndef NF_ENGINE_LAYOUT_H
#define NF_ENGINE_LAYOUT_H

#include <stddef.h>

#include "engine/backend.h"

#define NF_BK_TILE_ROWS 8
#define NF_BK_TILE_BYTES 64

/* Bytes of one element of m. */
static inline size_t nf_bk_elem_size(const nf_bk_matrix *m)
{
	return m->kind == NF_QUANT_INT8_ROW ? 1 : sizeof(float);
}

/* m's elements (its data, not the scales beside it), whichever kind. */
static inline const void *nf_bk_elems(const nf_bk_matrix *m)
{
	switch (m->kind) {
	case NF_QUANT_INT8_ROW:
		return m->q8;
	case NF_QUANT_INT4_GROUP:
		return m->q4;
	case NF_QUANT_FP8_E4M3:
		return m->f8;
	case NF_QUANT_F16:
	case NF_QUANT_BF16:
		return m->h16;
	default:
		return m->f32;
	}
}

/* Elements in one 64-byte chunk of a row (16 floats or 64 int8). */
static inline size_t nf_bk_chunk(const nf_bk_matrix *m)
{
	return NF_BK_TILE_BYTES / nf_bk_elem_size(m);
}

/* Elements from (r, c) to (r + 1, c) within a tile. */
static inline size_t nf_bk_row_stride(const nf_bk_matrix *m)
{
	return m->layout == NF_BK_TILE8 ? nf_bk_chunk(m) : (size_t)m->cols;
}

/* Elements from one chunk of a row to the next. */
static inline size_t nf_bk_chunk_stride(const nf_bk_matrix *m)
{
	return m->layout == NF_BK_TILE8 ? NF_BK_TILE_ROWS * nf_bk_chunk(m) : nf_bk_chunk(m);
}

/* Where element (r, c) is, in elements from the start of the matrix. */
static inline size_t nf_bk_index(const nf_bk_matrix *m, size_t r, size_t c)
{
	if (m->layout != NF_BK_TILE8)
		return r * (size_t)m->cols + c;
	size_t ch = nf_bk_chunk(m), tile = r / NF_BK_TILE_ROWS * NF_BK_TILE_ROWS;
	return tile * (size_t)m->cols + c / ch * NF_BK_TILE_ROWS * ch + (r - tile) * ch + c % ch;
}

/* Non-zero when m can be tiled: whole tiles of rows and of row bytes. */
int nf_bk_can_tile(const nf_bk_matrix *m);

/* Re-lay m's elements (row-major now) as NF_BK_TILE8 in place and set its
 * layout; `data` is m's element memory, which the caller owns writable.
 * NF_ENOMEM when the one-block scratch cannot be had (m is unchanged). */
int nf_bk_tile_in_place(nf_bk_matrix *m, void *data);

/* Row r of m as floats (int8 rows dequantized by their scale), whatever the
 * layout: the embedding lookup. */
void nf_bk_row_f32(float *out, const nf_bk_matrix *m, size_t r);

#endif
