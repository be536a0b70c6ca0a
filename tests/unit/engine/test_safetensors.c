/*
 * test_safetensors.c - the safetensors writer and reader: round trip of
 * every dtype, 64-byte alignment, deterministic bytes, metadata, lookup,
 * and the f16/bf16 conversions.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/safetensors.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

static float bits_f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static int write_sample(const char *path, const float *a, const uint16_t *h, const int8_t *q)
{
	nf_st_writer *w = NULL;
	uint64_t sa[2] = {3, 5}, sh[1] = {7}, sq[3] = {2, 2, 3}, s0[1] = {0};
	int err = nf_st_writer_new(&w);
	if (!err)
		err = nf_st_writer_add(w, "a.weight", NF_DTYPE_F32, 2, sa, a, 60);
	if (!err)
		err = nf_st_writer_add(w, "h", NF_DTYPE_F16, 1, sh, h, 14);
	if (!err)
		err = nf_st_writer_add(w, "empty", NF_DTYPE_BF16, 1, s0, NULL, 0);
	if (!err)
		err = nf_st_writer_add(w, "q", NF_DTYPE_I8, 3, sq, q, 12);
	if (!err)
		err = nf_st_writer_set_metadata(w, "format", "pt");
	if (!err)
		err = nf_st_writer_finish(w, path);
	nf_st_writer_free(w);
	return err;
}

int main(void)
{
	char dir[] = "/tmp/nf_test_st_XXXXXX";
	char *p1, *p2;
	float a[15];
	uint16_t h[7];
	int8_t q[12];
	nf_st_file *f = NULL;
	nf_st_writer *w = NULL;
	char *b1 = NULL, *b2 = NULL;
	size_t l1, l2;

	if (!mkdtemp(dir))
		return 1;
	p1 = nf_path_join(dir, "one.safetensors");
	p2 = nf_path_join(dir, "two.safetensors");
	for (int i = 0; i < 15; i++)
		a[i] = (float)i * 0.25f - 1.0f;
	for (int i = 0; i < 7; i++)
		h[i] = nf_f32_to_f16((float)i);
	for (int i = 0; i < 12; i++)
		q[i] = (int8_t)(i - 6);

	is_int(write_sample(p1, a, h, q), 0, "write a file");
	is_int(write_sample(p2, a, h, q), 0, "write it again");
	ok(nf_fs_read_file(&b1, &l1, p1, 1 << 20) == 0 && nf_fs_read_file(&b2, &l2, p2, 1 << 20) == 0 &&
	   l1 == l2 && memcmp(b1, b2, l1) == 0, "same input gives the same bytes");
	{
		uint64_t hl = 0;
		for (int i = 0; i < 8; i++)
			hl |= (uint64_t)(unsigned char)b1[i] << (8 * i);
		ok((8 + hl) % 64 == 0, "data section starts on a 64-byte boundary (header %llu)",
		   (unsigned long long)hl);
		ok(b1[8] == '{' && b1[8 + hl - 1] == ' ', "header is JSON padded with spaces");
		ok(strstr(b1 + 8, "\"__metadata__\":{\"format\":\"pt\"}") != NULL, "metadata first");
	}
	is_int(nf_st_open(&f, p1), 0, "open it");
	if (!f) {
		diag("%s", nf_error_last());
		return done_testing();
	}
	is_int(nf_st_count(f), 4, "4 tensors");
	is_str(nf_st_at(f, 0)->name, "a.weight", "insertion order kept: 0");
	is_str(nf_st_at(f, 3)->name, "q", "insertion order kept: 3");
	ok(nf_st_at(f, 4) == NULL, "out of range index gives NULL");
	{
		const nf_st_tensor *t = nf_st_find(f, "a.weight");
		ok(t && t->dtype == NF_DTYPE_F32 && t->ndim == 2 && t->shape[0] == 3 &&
		   t->shape[1] == 5 && t->nbytes == 60 && memcmp(t->data, a, 60) == 0,
		   "F32 tensor round trips");
		t = nf_st_find(f, "h");
		ok(t && t->dtype == NF_DTYPE_F16 && t->nbytes == 14 && memcmp(t->data, h, 14) == 0,
		   "F16 tensor round trips");
		ok(t && ((uintptr_t)t->data - (uintptr_t)nf_st_at(f, 0)->data) % 64 == 0,
		   "tensor data 64-byte aligned in the file");
		t = nf_st_find(f, "q");
		ok(t && t->dtype == NF_DTYPE_I8 && t->ndim == 3 && memcmp(t->data, q, 12) == 0,
		   "I8 tensor round trips");
		t = nf_st_find(f, "empty");
		ok(t && t->nbytes == 0 && t->shape[0] == 0, "zero-size tensor");
		ok(nf_st_find(f, "nope") == NULL, "missing tensor gives NULL");
		is_str(nf_st_metadata(f, "format"), "pt", "metadata value");
		ok(nf_st_metadata(f, "other") == NULL, "missing metadata gives NULL");
	}
	nf_st_close(f);
	f = NULL;
	nf_st_close(NULL);
	nf_st_writer_free(NULL);

	/* writer refuses inconsistent input */
	{
		uint64_t s[1] = {4};
		is_int(nf_st_writer_new(&w), 0, "new writer");
		ok(nf_st_writer_add(w, "x", NF_DTYPE_F32, 1, s, a, 15) < 0, "size mismatch refused");
		ok(nf_st_writer_add(w, "x", NF_DTYPE_F32, 1, s, a, 16) == 0, "add x");
		ok(nf_st_writer_add(w, "x", NF_DTYPE_F32, 1, s, a, 16) < 0, "duplicate refused");
		ok(nf_st_writer_add(w, "__metadata__", NF_DTYPE_F32, 1, s, a, 16) < 0,
		   "reserved name refused");
		nf_st_writer_free(w);
	}
	/* open_mem on the bytes read */
	is_int(nf_st_open_mem(&f, b1, l1, "mem"), 0, "open from memory");
	ok(f && nf_st_count(f) == 4, "same tensors from memory");
	nf_st_close(f);

	/* half conversions */
	{
		int bad = 0;
		for (uint32_t x = 0; x < 65536; x++) { /* every f16 round trips through f32 */
			float v = nf_f16_to_f32((uint16_t)x);
			uint16_t back = nf_f32_to_f16(v);
			if (isnan(v) ? !((back & 0x7c00) == 0x7c00 && (back & 0x3ff)) : back != x)
				bad++;
		}
		is_int(bad, 0, "all 65536 f16 values round trip");
		ok(nf_f16_to_f32(0x3c00) == 1.0f && nf_f16_to_f32(0xc000) == -2.0f &&
		   nf_f16_to_f32(0x0001) == bits_f(0x33800000u) && isinf(nf_f16_to_f32(0x7c00)),
		   "f16 decoding of 1, -2, smallest subnormal, inf");
		ok(nf_f32_to_f16(65520.0f) == 0x7c00 && nf_f32_to_f16(65519.0f) == 0x7bff,
		   "f16 overflow rounds to inf at 65520");
		ok(nf_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00 &&
		   nf_f32_to_f16(1.0f + 3.0f / 2048) == 0x3c02, "f16 ties to even");
		ok(nf_f32_to_f16(bits_f(0x33000001u)) == 0x0001 && nf_f32_to_f16(bits_f(0x33000000u)) == 0,
		   "f16 subnormal rounding");
		ok(nf_f32_to_bf16(1.0f) == 0x3f80 && nf_bf16_to_f32(0x3f80) == 1.0f, "bf16 of 1");
		ok(nf_f32_to_bf16(bits_f(0x3f808000u)) == 0x3f80 &&
		   nf_f32_to_bf16(bits_f(0x3f818000u)) == 0x3f82 &&
		   nf_f32_to_bf16(bits_f(0x3f808001u)) == 0x3f81, "bf16 rounds to nearest even");
		ok(isnan(nf_bf16_to_f32(nf_f32_to_bf16(NAN))) && isnan(nf_f16_to_f32(nf_f32_to_f16(NAN))),
		   "NaN stays NaN");
		is_str(nf_dtype_name(NF_DTYPE_BF16), "BF16", "dtype name");
		is_int(nf_dtype_size(NF_DTYPE_F8_E4M3), 1, "dtype size");
	}
	free(b1);
	free(b2);
	unlink(p1);
	unlink(p2);
	rmdir(dir);
	free(p1);
	free(p2);
	return done_testing();
}
