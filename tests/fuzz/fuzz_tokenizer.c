/*
 * fuzz_tokenizer.c - libFuzzer target: the llama2.c tokenizer loader, then
 * encode and decode with what it accepted.  Input layout: 2 bytes vocab
 * size (1 + v % 1024), 1 byte text length k, k bytes of text, then the
 * tokenizer file.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	nf_tokenizer *t = NULL;
	int *ids = NULL;
	size_t n = 0, k;
	int vocab;
	const char *text;

	if (size < 3)
		return 0;
	vocab = 1 + (int)((data[0] | data[1] << 8) % 1024);
	k = data[2];
	data += 3;
	size -= 3;
	if (k > size)
		k = size;
	text = (const char *)data;
	if (nf_tokenizer_load_mem(&t, data + k, size - k, vocab, "fuzz") != 0)
		return 0;
	if (nf_tokenizer_vocab_size(t) != vocab)
		abort();
	if (nf_tokenizer_encode(t, text, k, NF_TOK_ADD_BOS | NF_TOK_ADD_EOS, &ids, &n) == 0) {
		if (n < 2 || n > k + 3)
			abort();
		for (size_t i = 0; i < n; i++) {
			size_t len;
			if (ids[i] < 0 || ids[i] >= vocab)
				abort();
			const char *s = nf_tokenizer_decode(t, i ? ids[i - 1] : 0, ids[i], &len);
			volatile char c = len ? s[len - 1] : 0;
			(void)c;
		}
		free(ids);
	}
	nf_tokenizer_free(t);
	return 0;
}
