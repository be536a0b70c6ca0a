/*
 * jinja.h - the subset of Jinja that model chat templates are written in
 * (Hugging Face tokenizer_config.json "chat_template", GGUF
 * "tokenizer.chat_template"), compiled once and rendered per request.
 *
 * Semantics are Hugging Face's: jinja2's ImmutableSandboxedEnvironment with
 * trim_blocks and lstrip_blocks, one trailing newline of the source dropped,
 * plus transformers' globals raise_exception(msg) and strftime_now(fmt) and
 * its tojson filter (ensure_ascii=False, indent, separators, sort_keys).
 *
 * Statements: for (loop.*, else, "if" filter, tuple targets, break/continue),
 * if/elif/else, set (names, tuples, ns.attr, {% set %}..{% endset %}), macro
 * and call of a macro, generation/endgeneration (rendered as its body).
 * Expressions: literals, names, .attr and [key], slices, calls, filters,
 * "is" tests, arithmetic, comparisons, and/or/not, in, ~, a if b else c.
 * Strings are UTF-8 and index, slice and measure by code point, as Python
 * does; upper/lower/title/capitalize change ASCII letters only.
 *
 * Errors are NF_EINPUT with "WHAT:LINE:COL: message": LINE:COL is the token
 * that did not compile, or the expression or statement that failed to render;
 * raise_exception's message is the template's own text.  Every render is
 * bounded: output bytes, memory, evaluation steps and nesting depth, so no
 * input hangs, exhausts memory or overflows the stack.
 */
#ifndef NF_ENGINE_JINJA_H
#define NF_ENGINE_JINJA_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

typedef struct nf_jinja nf_jinja;

/* The bounds of one render.  nf_jinja_limits_default() fills the defaults. */
typedef struct nf_jinja_limits {
	size_t max_out;   /* bytes of output */
	size_t max_mem;   /* bytes of values the render may allocate */
	size_t max_steps; /* statements, expressions and loop iterations evaluated */
	size_t max_depth; /* nested macro calls, and nesting of values printed or compared */
} nf_jinja_limits;

void nf_jinja_limits_default(nf_jinja_limits *l);

/* Compile src[0..len) (UTF-8, need not be NUL-terminated).  WHAT names the
 * template in error messages ("chat_template", a file name).  *out is owned
 * by the caller (nf_jinja_free) and may be shared by threads rendering it. */
int nf_jinja_compile(nf_jinja **out, const char *src, size_t len, const char *what);

void nf_jinja_free(nf_jinja *t);

/* Render with the variables of CONTEXT (a JSON object, not kept) and the
 * default limits, except output capped at max_out bytes.  *out is NUL-terminated,
 * owned by the caller (free()); on error *out is NULL. */
int nf_jinja_render(char **out, size_t *out_len, const nf_jinja *t, const json_t *context,
		    size_t max_out);

int nf_jinja_render_ex(char **out, size_t *out_len, const nf_jinja *t, const json_t *context,
		       const nf_jinja_limits *limits);

/* The usual chat context: messages (a JSON array of {role, content, ...}),
 * bos_token, eos_token (NULL for ""), add_generation_prompt. */
int nf_jinja_render_chat(char **out, size_t *out_len, const nf_jinja *t, const json_t *messages,
			 const char *bos_token, const char *eos_token, bool add_generation_prompt,
			 size_t max_out);

#endif
