/*
 * fuzz_jinja.c - libFuzzer target for the Jinja interpreter (engine/jinja.h):
 * the input is a template, compiled and, when it compiles, rendered against
 * a fixed chat context (messages with tools and tool calls, tokens, flags)
 * under small limits, so loops, recursion and string growth hit a limit
 * quickly instead of timing out.
 *
 * Properties checked: compile and render return 0 or NF_EINPUT (NF_ENOMEM
 * only if malloc fails); an NF_EINPUT message names the template and a
 * position ("fuzz.jinja:LINE:COL: ..."); a rendering is NUL-terminated, of
 * the length returned, and within max_out; the same input renders the same
 * bytes twice (nothing leaks from one render into the next).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/jinja.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char CONTEXT[] =
	"{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"add_generation_prompt\": true,"
	" \"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
	" {\"role\": \"user\", \"content\": \"Hi {{ x }} \\u00e9\\n\"},"
	" {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call12345\", \"type\": \"function\","
	" \"function\": {\"name\": \"f\", \"arguments\": {\"a\": [1, 2.5, true, null]}}}]},"
	" {\"role\": \"tool\", \"tool_call_id\": \"call12345\", \"content\": \"42\"},"
	" {\"role\": \"assistant\", \"content\": \"  done  \"}],"
	" \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}]}";

static void check_error(int err)
{
	if (err == NF_EINPUT) {
		if (strncmp(nf_error_last(), "fuzz.jinja:", 11) != 0)
			abort();
	} else if (err != NF_ENOMEM) {
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static json_t *ctx;
	nf_jinja *t = NULL;
	nf_jinja_limits l;
	char *a = NULL, *b = NULL;
	size_t alen = 0, blen = 0;
	int err, err2;

	if (!ctx && !(ctx = json_loads(CONTEXT, 0, NULL)))
		abort();
	nf_jinja_limits_default(&l);
	l.max_out = 1 << 16;
	l.max_mem = 16 << 20;
	l.max_steps = 100000;
	l.max_depth = 32;
	err = nf_jinja_compile(&t, (const char *)data, size, "fuzz.jinja");
	if (err) {
		check_error(err);
		return 0;
	}
	err = nf_jinja_render_ex(&a, &alen, t, ctx, &l);
	err2 = nf_jinja_render_ex(&b, &blen, t, ctx, &l);
	if (err) {
		check_error(err);
		if (a)
			abort();
	} else {
		if (!a || a[alen] != '\0' || alen > l.max_out)
			abort();
	}
	/* strftime_now is the one input that may differ between two renders */
	if (err != err2 || (!err && (alen != blen || memcmp(a, b, alen) != 0) && !memmem(data, size, "strftime", 8)))
		abort();
	free(a);
	free(b);
	nf_jinja_free(t);
	return 0;
}
