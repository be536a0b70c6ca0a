/*
 * tokenize.c - /tokenize and /detokenize (vLLM's shapes): the body read
 * with the same strictness as a completion's (unknown fields refused).
 */
#include "serve/tokenize.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "serve/sbuf.h"
#include "util/error.h"
#include "util/banned.h"

static int refuse(nf_api_error *err, int status, const char *code, const char *param, const char *msg,
		  const char *arg)
{
	nf_api_error_set(err, status, "invalid_request_error", code, param, msg, arg);
	return nf_error_set(NF_EINPUT, "%s", err->message);
}

/* The body as an object with only the given keys, and its model (if any) ours. */
static int load_body(json_t **out, nf_api_error *err, const char *body, size_t len, const char *model,
		     const char *const *keys)
{
	json_error_t jerr;
	json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr), *m;
	const char *k;
	json_t *v;
	*out = NULL;
	if (!root || !json_is_object(root)) {
		json_decref(root);
		return refuse(err, 400, "invalid_json", NULL, "the body must be a JSON object%s", "");
	}
	json_object_foreach(root, k, v) {
		const char *const *p = keys;
		while (*p && strcmp(*p, k))
			p++;
		if (!*p) {
			refuse(err, 400, NULL, k, "Unrecognized request argument supplied: %.64s", k);
			json_decref(root);
			return NF_EINPUT;
		}
	}
	m = json_object_get(root, "model");
	if (m && !json_is_null(m) && (!json_is_string(m) || strcmp(json_string_value(m), model))) {
		json_decref(root);
		return refuse(err, 404, "model_not_found", "model", "this server serves '%s' only", model);
	}
	*out = root;
	return 0;
}

static int opt_bool(json_t *root, const char *k, int dflt, int *out)
{
	json_t *v = json_object_get(root, k);
	if (!v || json_is_null(v)) {
		*out = dflt;
		return 0;
	}
	if (!json_is_boolean(v))
		return NF_EINPUT;
	*out = json_is_true(v);
	return 0;
}

/* The text to tokenize: "prompt", or "messages" rendered as a chat request's. */
static int tokenize_input(nf_sbuf *text, nf_api_error *err, json_t *root, const nf_chat_format *chat)
{
	json_t *prompt = json_object_get(root, "prompt"), *messages = json_object_get(root, "messages");
	json_t *agp = json_object_get(root, "add_generation_prompt");
	if (!prompt == !messages)
		return refuse(err, 400, NULL, "prompt", "give either 'prompt' or 'messages'%s", "");
	if (messages) {
		if (agp && !json_is_null(agp) && !json_is_true(agp))
			return refuse(err, 422, "unsupported_parameter", "add_generation_prompt",
				      "chat prompts always end in the generation prompt here%s", "");
		return nf_serve_render_messages(text, err, messages, chat);
	}
	if (agp)
		return refuse(err, 400, NULL, "add_generation_prompt", "'add_generation_prompt' goes with 'messages'%s", "");
	if (!json_is_string(prompt) || memchr(json_string_value(prompt), 0, json_string_length(prompt)))
		return refuse(err, 400, NULL, "prompt", "'prompt' must be a string without NUL%s", "");
	if (nf_sbuf_add(text, json_string_value(prompt), json_string_length(prompt)) < 0)
		return refuse(err, 400, NULL, "prompt", "'prompt' exceeds %s", "the body limit");
	return 0;
}

int nf_serve_tokenize(char **reply, nf_api_error *err, const nf_tokenizer *t, const char *model,
		      int max_model_len, const nf_chat_format *chat, const char *body, size_t len)
{
	static const char *const keys[] = {"model", "prompt", "messages", "add_special_tokens",
					   "add_generation_prompt", "return_token_strs", NULL};
	json_t *root = NULL, *ids = NULL, *strs = NULL;
	int *tokens = NULL, special, want_strs, rc;
	size_t n = 0;
	nf_sbuf text;
	*reply = NULL;
	nf_sbuf_init(&text, NF_REQ_MAX_PROMPT);
	if ((rc = load_body(&root, err, body, len, model, keys)) < 0 ||
	    (rc = tokenize_input(&text, err, root, chat)) < 0)
		goto done;
	if (opt_bool(root, "add_special_tokens", 1, &special) < 0 ||
	    opt_bool(root, "return_token_strs", 0, &want_strs) < 0) {
		rc = refuse(err, 400, NULL, NULL, "add_special_tokens and return_token_strs are booleans%s", "");
		goto done;
	}
	if ((rc = nf_tokenizer_encode(t, text.data ? text.data : "", text.len,
				      special ? NF_TOK_ADD_SPECIAL | NF_TOK_PARSE_SPECIAL : 0, &tokens, &n)) < 0) {
		refuse(err, 400, NULL, "prompt", "cannot tokenize the prompt: %s", nf_error_last());
		goto done;
	}
	ids = json_array();
	strs = want_strs ? json_array() : json_null();
	for (size_t i = 0; ids && strs && i < n; i++) {
		size_t tl = 0;
		const char *ts = nf_tokenizer_token(t, tokens[i], &tl);
		json_array_append_new(ids, json_integer(tokens[i]));
		if (want_strs)
			json_array_append_new(strs, json_stringn(ts ? ts : "", ts ? tl : 0));
	}
	json_decref(root);
	root = json_pack("{s:I,s:i,s:o,s:o}", "count", (json_int_t)n, "max_model_len", max_model_len,
			 "tokens", ids, "token_strs", strs);
	ids = strs = NULL;
	*reply = root ? json_dumps(root, JSON_COMPACT) : NULL;
	rc = *reply ? 0 : refuse(err, 500, NULL, NULL, "out of memory%s", "");
done:
	nf_sbuf_release(&text);
	free(tokens);
	json_decref(ids);
	json_decref(strs);
	json_decref(root);
	return rc;
}

int nf_serve_detokenize(char **reply, nf_api_error *err, const nf_tokenizer *t, const char *model,
			const char *body, size_t len)
{
	static const char *const keys[] = {"model", "tokens", NULL};
	json_t *root = NULL, *tokens, *x, *o;
	nf_sbuf text;
	size_t i;
	int prev = -1, rc;
	*reply = NULL;
	if ((rc = load_body(&root, err, body, len, model, keys)) < 0)
		return rc;
	nf_sbuf_init(&text, 4u << 20);
	tokens = json_object_get(root, "tokens");
	if (!json_is_array(tokens)) {
		rc = refuse(err, 400, NULL, "tokens", "'tokens' must be a list of token ids%s", "");
		goto done;
	}
	json_array_foreach(tokens, i, x) {
		size_t pl = 0;
		const char *piece;
		if (!json_is_integer(x) || json_integer_value(x) < 0 ||
		    json_integer_value(x) >= nf_tokenizer_vocab_size(t)) {
			rc = refuse(err, 400, NULL, "tokens", "'tokens' must hold ids below the vocabulary size%s", "");
			goto done;
		}
		piece = nf_tokenizer_decode(t, prev, (int)json_integer_value(x), &pl);
		if (nf_sbuf_add(&text, piece, pl) < 0) {
			rc = refuse(err, 400, NULL, "tokens", "the text exceeds 4 MiB%s", "");
			goto done;
		}
		prev = (int)json_integer_value(x);
	}
	{
		nf_sbuf valid; /* byte tokens may leave a character cut */
		nf_sbuf_init(&valid, 16u << 20);
		nf_sbuf_add_utf8(&valid, text.data ? text.data : "", text.len);
		o = json_pack("{s:s%}", "prompt", valid.data ? valid.data : "", valid.len);
		nf_sbuf_release(&valid);
	}
	*reply = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	rc = *reply ? 0 : refuse(err, 500, NULL, NULL, "out of memory%s", "");
done:
	nf_sbuf_release(&text);
	json_decref(root);
	return rc;
}
