/*
 * grammar.c - the grammar's compile entry points: a JSON Schema, any JSON
 * object, a regex or a list of choices, each through its front end into one
 * NFA, finished (dead states marked) and wrapped with its lazy DFA.
 */
#include "engine/grammar_int.h"

#include <jansson.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

#define GR_DEFAULT_DEPTH 4
#define GR_MAX_DEPTH 8

static void nfa_for(gr_nfa *n, const nf_grammar_opts *o)
{
	gr_nfa_init(n, o && o->max_nfa_states ? o->max_nfa_states : (size_t)1 << 20);
}

static int json_for(gr_json *j, gr_nfa *n, const nf_grammar_opts *o)
{
	int depth = o && o->max_depth ? o->max_depth : GR_DEFAULT_DEPTH;
	int ws = o && o->whitespace ? o->whitespace : NF_GRAMMAR_WS_SPACE;
	if (depth < 0 || depth > GR_MAX_DEPTH)
		return nf_error_set(NF_EINPUT, "grammar: max_depth %d is not in [1, %d]", depth, GR_MAX_DEPTH);
	if (ws < NF_GRAMMAR_WS_NONE || ws > NF_GRAMMAR_WS_NEWLINE)
		return nf_error_set(NF_EINPUT, "grammar: unknown whitespace mode %d", ws);
	if (o && o->max_string < 0)
		return nf_error_set(NF_EINPUT, "grammar: max_string %d is negative", o->max_string);
	*j = (gr_json){n, ws, o ? o->max_string : 0, depth};
	return 0;
}

/* Finish the NFA at `whole` and build the grammar around it. */
static int finish(nf_grammar **out, gr_nfa *n, gr_frag whole, const char *what,
		  const nf_grammar_opts *o)
{
	int err = gr_nfa_finish(n, whole, what);
	if (err) {
		gr_nfa_release(n);
		return err;
	}
	return gr_grammar_new(out, n, o);
}

int nf_grammar_from_schema(nf_grammar **out, const json_t *schema, const nf_grammar_opts *o)
{
	gr_nfa n;
	gr_json j;
	gr_frag whole;
	int err;
	*out = NULL;
	nfa_for(&n, o);
	if ((err = json_for(&j, &n, o)) || (err = gr_schema_build(&j, schema, &whole))) {
		gr_nfa_release(&n);
		return err;
	}
	return finish(out, &n, whole, "schema", o);
}

int nf_grammar_from_schema_text(nf_grammar **out, const char *text, size_t len,
				const nf_grammar_opts *o)
{
	json_error_t jerr;
	*out = NULL;
	json_t *schema = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!schema)
		return nf_error_set(NF_EINPUT, "schema: %d:%d: %s", jerr.line, jerr.column, jerr.text);
	int err = nf_grammar_from_schema(out, schema, o);
	json_decref(schema);
	return err;
}

int nf_grammar_from_json_object(nf_grammar **out, const nf_grammar_opts *o)
{
	gr_nfa n;
	gr_json j;
	int err;
	*out = NULL;
	nfa_for(&n, o);
	if ((err = json_for(&j, &n, o))) {
		gr_nfa_release(&n);
		return err;
	}
	return finish(out, &n, gr_json_object(&j, j.max_depth), "json_object", o);
}

int nf_grammar_from_regex(nf_grammar **out, const char *re, size_t len, const nf_grammar_opts *o)
{
	gr_nfa n;
	gr_frag whole;
	int err;
	*out = NULL;
	nfa_for(&n, o);
	if ((err = gr_regex_build(&n, re, len, &whole))) {
		gr_nfa_release(&n);
		return err;
	}
	return finish(out, &n, whole, "regex", o);
}

int nf_grammar_from_choices(nf_grammar **out, const char *const *choices, const size_t *lens,
			    size_t n_choices, const nf_grammar_opts *o)
{
	gr_nfa n;
	*out = NULL;
	if (n_choices == 0)
		return nf_error_set(NF_EINPUT, "choices: the list is empty");
	nfa_for(&n, o);
	gr_frag whole = gr_never(&n);
	for (size_t i = 0; i < n_choices; i++) {
		if (!choices[i]) {
			gr_nfa_release(&n);
			return nf_error_set(NF_EINPUT, "choices: choice %zu is missing", i);
		}
		size_t len = lens ? lens[i] : strlen(choices[i]);
		whole = gr_alt(&n, whole, gr_lit(&n, choices[i], len));
	}
	return finish(out, &n, whole, "choices", o);
}
