/*
 * fuzz_tokenizer_json.c - libFuzzer target: the tokenizer.json reader, then
 * encode (control tokens matched, BOS/EOS as the file says) and decode with
 * what it accepted.  Input layout: 1 byte text length k, k bytes of text,
 * then the tokenizer.json.
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
	const char *text;

	if (size < 1)
		return 0;
	k = data[0];
	data++;
	size--;
	if (k > size)
		k = size;
	text = (const char *)data;
	if (nf_tokenizer_load_hf_mem(&t, (const char *)data + k, size - k, NULL, 0, "fuzz") != 0)
		return 0;
	int vocab = nf_tokenizer_vocab_size(t);
	if (nf_tokenizer_encode(t, text, k, NF_TOK_ADD_SPECIAL | NF_TOK_PARSE_SPECIAL, &ids, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			size_t len;
			if (ids[i] < 0 || ids[i] >= vocab)
				abort();
			const char *s = nf_tokenizer_decode_flags(t, i ? ids[i - 1] : -1, ids[i],
								  NF_TOK_DECODE_SPECIAL, &len);
			volatile char c = len ? s[len - 1] : 0;
			(void)c;
		}
		free(ids);
	}
	nf_tokenizer_free(t);
	return 0;
}
