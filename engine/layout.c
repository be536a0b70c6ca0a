/*
 * layout.c - tiling a matrix in place and reading a row back (layout.h).
 */
#include <stdlib.h>
#include <string.h>

#include "engine/layout.h"
#include "engine/quant.h"
#include "util/error.h"
#include "util/banned.h"

int nf_bk_can_tile(const nf_bk_matrix *m)
{
	size_t row_bytes = (size_t)m->cols * nf_bk_elem_size(m);
	return (m->kind == NF_QUANT_NONE || m->kind == NF_QUANT_INT8_ROW) && m->rows > 0 &&
	       m->cols > 0 && m->rows % NF_BK_TILE_ROWS == 0 && row_bytes % NF_BK_TILE_BYTES == 0;
}

int nf_bk_tile_in_place(nf_bk_matrix *m, void *data)
{
	size_t row_bytes = (size_t)m->cols * nf_bk_elem_size(m);
	size_t block = NF_BK_TILE_ROWS * row_bytes, chunks = row_bytes / NF_BK_TILE_BYTES;
	unsigned char *scratch, *p = data;
	if (m->layout == NF_BK_TILE8 || !nf_bk_can_tile(m))
		return 0;
	if (!(scratch = malloc(block)))
		return nf_error_set(NF_ENOMEM, "tiling weights: out of memory");
	/* one block of 8 rows at a time: copy it out, scatter it back by chunk */
	for (size_t r = 0; r < (size_t)m->rows; r += NF_BK_TILE_ROWS, p += block) {
		memcpy(scratch, p, block);
		for (size_t k = 0; k < chunks; k++)
			for (size_t i = 0; i < NF_BK_TILE_ROWS; i++)
				memcpy(p + (k * NF_BK_TILE_ROWS + i) * NF_BK_TILE_BYTES,
				       scratch + i * row_bytes + k * NF_BK_TILE_BYTES, NF_BK_TILE_BYTES);
	}
	free(scratch);
	m->layout = NF_BK_TILE8;
	return 0;
}

void nf_bk_row_f32(float *out, const nf_bk_matrix *m, size_t r)
{
	size_t cols = (size_t)m->cols, ch = nf_bk_chunk(m), cs = nf_bk_chunk_stride(m);
	size_t base = nf_bk_index(m, r, 0);
	for (size_t c = 0; c < cols; c += ch) {
		size_t n = cols - c < ch ? cols - c : ch, at = base + c / ch * cs;
		if (m->kind == NF_QUANT_INT8_ROW)
			nf_quant_int8_dequant_row(out + c, m->q8 + at, m->scale[r], n);
		else
			memcpy(out + c, m->f32 + at, n * sizeof(float));
	}
}
