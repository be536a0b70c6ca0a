/*
 * fuzz_grammar.c - libFuzzer target for the structured-output compilers
 * (engine/grammar.h): a JSON Schema's text or a regular expression from
 * the client, compiled with small bounds, then matched against the input
 * itself.
 *
 * Input layout: byte 0 bit 0 = regex (else schema), the rest the schema
 * text or the pattern.
 *
 * Properties checked: compiling either succeeds or fails with NF_EINPUT
 * (or NF_ENOMEM past the automaton's bound) and a message; a compiled
 * grammar matches any text without failing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdlib.h>

#include "engine/grammar.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	nf_grammar_opts o = {.max_nfa_states = 1 << 14, .max_dfa_states = 1 << 12, .max_string = 64};
	const char *text = (const char *)data + 1;
	size_t len = size - 1;
	nf_grammar *g = NULL;
	int err = data[0] & 1 ? nf_grammar_from_regex(&g, text, len, &o)
			      : nf_grammar_from_schema_text(&g, text, len, &o);
	if (err) {
		if ((err != NF_EINPUT && err != NF_ENOMEM) || !*nf_error_last())
			abort();
		return 0;
	}
	bool matches;
	err = nf_grammar_match(g, text, len, &matches);
	if (err && err != NF_ENOMEM)
		abort();
	nf_grammar_free(g);
	return 0;
}
