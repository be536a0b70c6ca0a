/*
 * request.c - validation of OpenAI request bodies: every field checked for
 * type and range, unknown fields refused, unsupported ones named.
 */
#include "serve/request.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/sbuf.h"
#include "serve/template.h"
#include "util/error.h"
#include "util/banned.h"

#define BAD "invalid_request_error"

int nf_api_error_set(nf_api_error *e, int status, const char *type, const char *code,
		     const char *param, const char *fmt, ...)
{
	va_list ap;
	e->status = status;
	e->type = type;
	e->code = code;
	snprintf(e->param, sizeof e->param, "%s", param ? param : "");
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof e->message, fmt, ap);
	va_end(ap);
	return status;
}

char *nf_api_error_json(const nf_api_error *e)
{
	nf_sbuf msg, param;
	json_t *o = NULL;
	char *s = NULL;
	/* The message and param may quote the request (a key, jansson's text
	 * near a syntax error) cut at a byte limit: make them valid UTF-8 so
	 * that jansson takes them and the client sees what was wrong. */
	nf_sbuf_init(&msg, 4 * sizeof e->message);
	nf_sbuf_init(&param, 4 * sizeof e->param);
	if (nf_sbuf_add_utf8(&msg, e->message, strnlen(e->message, sizeof e->message)) < 0 ||
	    nf_sbuf_add_utf8(&param, e->param, strnlen(e->param, sizeof e->param)) < 0 ||
	    nf_sbuf_add(&msg, "", 0) < 0 || nf_sbuf_add(&param, "", 0) < 0)
		goto done;
	o = json_pack("{s:{s:s,s:s,s:o,s:o}}", "error", "message", msg.data, "type",
		      e->type ? e->type : BAD, "param", param.len ? json_string(param.data) : json_null(),
		      "code", e->code ? json_string(e->code) : json_null());
	s = o ? json_dumps(o, JSON_COMPACT) : NULL;
done:
	json_decref(o);
	nf_sbuf_release(&msg);
	nf_sbuf_release(&param);
	return s;
}

static int fail(nf_api_error *err, int status, const char *code, const char *param,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int fail(nf_api_error *err, int status, const char *code, const char *param,
		const char *fmt, ...)
{
	va_list ap;
	err->status = status;
	err->type = BAD;
	err->code = code;
	snprintf(err->param, sizeof err->param, "%s", param ? param : "");
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
	return nf_error_set(NF_EINPUT, "%s", err->message);
}

static const char *const completion_keys[] = {
	"model", "prompt", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options",
	"stop", "seed", "user", "echo", "logprobs", "presence_penalty", "frequency_penalty",
	"best_of", "logit_bias", "suffix", NULL};
static const char *const chat_keys[] = {
	"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n",
	"stream", "stream_options", "stop", "seed", "user", "logprobs", "top_logprobs",
	"presence_penalty", "frequency_penalty", "logit_bias", "response_format", "tools",
	"tool_choice", "parallel_tool_calls", NULL};

static int known(const char *const *keys, const char *k)
{
	for (; *keys; keys++)
		if (!strcmp(*keys, k))
			return 1;
	return 0;
}

/* A JSON number that is an integer (1 or 1.0). */
static int get_integer(json_t *v, long long *out)
{
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 1;
	}
	if (json_is_real(v)) {
		double d = json_real_value(v);
		if (d == floor(d) && fabs(d) < 9e15) {
			*out = (long long)d;
			return 1;
		}
	}
	return 0;
}

static int parse_stop(nf_serve_req *r, nf_api_error *err, json_t *v)
{
	json_t *items[NF_REQ_MAX_STOP];
	size_t n = 0;
	if (json_is_string(v)) {
		items[n++] = v;
	} else if (json_is_array(v)) {
		size_t i;
		json_t *e;
		if (json_array_size(v) > NF_REQ_MAX_STOP)
			return fail(err, 400, NULL, "stop", "'stop' may hold at most %d strings",
				    NF_REQ_MAX_STOP);
		json_array_foreach(v, i, e) {
			if (!json_is_string(e))
				return fail(err, 400, NULL, "stop", "'stop' must be a string or a list of strings");
			items[n++] = e;
		}
	} else {
		return fail(err, 400, NULL, "stop", "'stop' must be a string or a list of strings");
	}
	for (size_t i = 0; i < n; i++) {
		size_t len = json_string_length(items[i]);
		if (len == 0 || len > NF_REQ_MAX_STOP_LEN || memchr(json_string_value(items[i]), 0, len))
			return fail(err, 400, NULL, "stop",
				    "each stop string must be 1 to %d bytes without NUL", NF_REQ_MAX_STOP_LEN);
		r->stop[r->n_stop] = malloc(len + 1);
		if (!r->stop[r->n_stop])
			return fail(err, 500, NULL, NULL, "out of memory");
		memcpy(r->stop[r->n_stop], json_string_value(items[i]), len + 1);
		r->n_stop++;
	}
	return 0;
}

static int parse_messages(nf_sbuf *out, nf_api_error *err, json_t *v, const nf_chat_format *fmt)
{
	nf_chat_msg *msgs = NULL;
	size_t n, i;
	json_t *m;
	int rc;
	if (!json_is_array(v) || json_array_size(v) == 0)
		return fail(err, 400, NULL, "messages", "'messages' must be a non-empty list");
	n = json_array_size(v);
	if (n > NF_REQ_MAX_MESSAGES)
		return fail(err, 400, NULL, "messages", "at most %d messages", NF_REQ_MAX_MESSAGES);
	msgs = calloc(n, sizeof *msgs);
	if (!msgs)
		return fail(err, 500, NULL, NULL, "out of memory");
	json_array_foreach(v, i, m) {
		const char *k, *role;
		json_t *x, *content;
		char param[48];
		snprintf(param, sizeof param, "messages[%zu]", i);
		if (!json_is_object(m)) {
			rc = fail(err, 400, NULL, param, "'%s' must be an object", param);
			goto done;
		}
		json_object_foreach(m, k, x) {
			if (strcmp(k, "role") && strcmp(k, "content") && strcmp(k, "name")) {
				rc = fail(err, 400, NULL, param, "'%s' has an unrecognized field '%.48s'", param, k);
				goto done;
			}
		}
		x = json_object_get(m, "name");
		if (x && !json_is_string(x)) {
			rc = fail(err, 400, NULL, param, "'%s.name' must be a string", param);
			goto done;
		}
		x = json_object_get(m, "role");
		role = json_string_value(x);
		if (!role) {
			rc = fail(err, 400, NULL, param, "'%s.role' must be a string", param);
			goto done;
		}
		if (!strcmp(role, "system") || !strcmp(role, "developer"))
			msgs[i].role = NF_ROLE_SYSTEM;
		else if (!strcmp(role, "user"))
			msgs[i].role = NF_ROLE_USER;
		else if (!strcmp(role, "assistant"))
			msgs[i].role = NF_ROLE_ASSISTANT;
		else if (!strcmp(role, "tool") || !strcmp(role, "function")) {
			rc = fail(err, 422, "unsupported_parameter", param, "role '%s' is not supported", role);
			goto done;
		} else {
			rc = fail(err, 400, NULL, param, "'%s.role' must be system, user or assistant", param);
			goto done;
		}
		content = json_object_get(m, "content");
		if (json_is_string(content)) {
			msgs[i].content = json_string_value(content);
			msgs[i].len = json_string_length(content);
		} else if (json_is_array(content) && json_array_size(content) == 1 &&
			   json_is_object(json_array_get(content, 0))) {
			json_t *part = json_array_get(content, 0);
			json_t *text = json_object_get(part, "text");
			if (json_object_size(part) != 2 ||
			    !json_is_string(json_object_get(part, "type")) ||
			    strcmp(json_string_value(json_object_get(part, "type")), "text") ||
			    !json_is_string(text)) {
				rc = fail(err, 422, "unsupported_parameter", param,
					  "'%s.content': only text parts are supported", param);
				goto done;
			}
			msgs[i].content = json_string_value(text);
			msgs[i].len = json_string_length(text);
		} else {
			rc = fail(err, 400, NULL, param,
				  "'%s.content' must be a string or a list with one text part", param);
			goto done;
		}
		if (memchr(msgs[i].content, 0, msgs[i].len)) {
			rc = fail(err, 400, NULL, param, "'%s.content' contains a NUL character", param);
			goto done;
		}
	}
	if ((rc = nf_template_render(out, fmt, msgs, n)) < 0) {
		if (rc == NF_ENOMEM)
			rc = fail(err, 500, NULL, NULL, "out of memory");
		else if (fmt->kind == NF_CHAT_MODEL)
			/* the template's own refusal (raise_exception) or its output bound */
			rc = fail(err, 400, NULL, "messages", "the model's chat template: %.400s",
				  nf_error_last());
		else
			rc = fail(err, 400, NULL, "messages", "the rendered prompt exceeds %u bytes",
				  NF_REQ_MAX_PROMPT);
		goto done;
	}
	rc = 0;
done:
	free(msgs);
	return rc;
}

static int parse_prompt(nf_sbuf *out, nf_api_error *err, json_t *v)
{
	if (json_is_array(v)) {
		if (json_array_size(v) != 1 || !json_is_string(json_array_get(v, 0))) {
			if (json_array_size(v) > 1)
				return fail(err, 422, "unsupported_parameter", "prompt",
					    "one prompt per request is supported");
			return fail(err, json_array_size(v) && json_is_integer(json_array_get(v, 0)) ? 422 : 400,
				    NULL, "prompt", "'prompt' must be a string");
		}
		v = json_array_get(v, 0);
	}
	if (!json_is_string(v))
		return fail(err, 400, NULL, "prompt", "'prompt' must be a string");
	if (memchr(json_string_value(v), 0, json_string_length(v)))
		return fail(err, 400, NULL, "prompt", "'prompt' contains a NUL character");
	if (nf_sbuf_add(out, json_string_value(v), json_string_length(v)) < 0)
		return fail(err, 400, NULL, "prompt", "'prompt' exceeds %u bytes", NF_REQ_MAX_PROMPT);
	return 0;
}

/* Unsupported parameters, accepted only at their neutral value. */
static int check_neutral(nf_api_error *err, json_t *root)
{
	const char *k;
	json_t *v;
	json_object_foreach(root, k, v) {
		long long iv;
		if (json_is_null(v))
			continue;
		if (!strcmp(k, "presence_penalty") || !strcmp(k, "frequency_penalty")) {
			if (!json_is_number(v))
				return fail(err, 400, NULL, k, "'%s' must be a number", k);
			if (json_number_value(v) != 0)
				return fail(err, 422, "unsupported_parameter", k, "'%s' is not supported", k);
		} else if (!strcmp(k, "echo") || (!strcmp(k, "logprobs") && json_is_boolean(v)) ||
			   !strcmp(k, "parallel_tool_calls")) {
			if (!json_is_boolean(v))
				return fail(err, 400, NULL, k, "'%s' must be a boolean", k);
			if (json_is_true(v) && strcmp(k, "parallel_tool_calls"))
				return fail(err, 422, "unsupported_parameter", k, "'%s' is not supported", k);
		} else if (!strcmp(k, "logprobs") || !strcmp(k, "top_logprobs")) {
			if (!get_integer(v, &iv))
				return fail(err, 400, NULL, k, "'%s' must be an integer", k);
			if (iv != 0)
				return fail(err, 422, "unsupported_parameter", k, "'%s' is not supported", k);
		} else if (!strcmp(k, "best_of") || !strcmp(k, "n")) {
			if (!get_integer(v, &iv))
				return fail(err, 400, NULL, k, "'%s' must be an integer", k);
			if (iv < 1)
				return fail(err, 400, NULL, k, "'%s' must be at least 1", k);
			if (iv != 1)
				return fail(err, 422, "unsupported_parameter", k, "only %s=1 is supported", k);
		} else if (!strcmp(k, "logit_bias")) {
			if (!json_is_object(v))
				return fail(err, 400, NULL, k, "'logit_bias' must be an object");
			if (json_object_size(v))
				return fail(err, 422, "unsupported_parameter", k, "'logit_bias' is not supported");
		} else if (!strcmp(k, "suffix")) {
			if (!json_is_string(v))
				return fail(err, 400, NULL, k, "'suffix' must be a string");
			if (json_string_length(v))
				return fail(err, 422, "unsupported_parameter", k, "'suffix' is not supported");
		} else if (!strcmp(k, "tools") || !strcmp(k, "tool_choice")) {
			if (!(json_is_array(v) && json_array_size(v) == 0) &&
			    !(json_is_string(v) && !strcmp(json_string_value(v), "none")))
				return fail(err, 422, "unsupported_parameter", k, "'%s' is not supported", k);
		} else if (!strcmp(k, "response_format")) {
			json_t *t = json_object_get(v, "type");
			if (!json_is_object(v) || !json_is_string(t))
				return fail(err, 400, NULL, k, "'response_format' must be an object with a type");
			if (strcmp(json_string_value(t), "text"))
				return fail(err, 422, "unsupported_parameter", k,
					    "only response_format type 'text' is supported");
		} else if (!strcmp(k, "user")) {
			if (!json_is_string(v))
				return fail(err, 400, NULL, k, "'user' must be a string");
		}
	}
	return 0;
}

int nf_serve_req_parse(nf_serve_req **out, nf_api_error *err, const char *body, size_t len,
		       int chat, const nf_chat_format *fmt)
{
	json_t *root = NULL, *v;
	json_error_t jerr;
	nf_serve_req *r = NULL;
	nf_sbuf prompt;
	const char *k;
	long long iv;
	int rc;

	*out = NULL;
	nf_sbuf_init(&prompt, NF_REQ_MAX_PROMPT);
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		rc = fail(err, 400, "invalid_json", NULL, "invalid JSON body at line %d column %d: %s",
			  jerr.line, jerr.column, jerr.text);
		goto done;
	}
	if (!json_is_object(root)) {
		rc = fail(err, 400, "invalid_json", NULL, "the request body must be a JSON object");
		goto done;
	}
	json_object_foreach(root, k, v) {
		if (!known(chat ? chat_keys : completion_keys, k)) {
			rc = fail(err, 400, NULL, k, "Unrecognized request argument supplied: %.64s", k);
			goto done;
		}
	}
	if ((rc = check_neutral(err, root)) < 0)
		goto done;
	r = calloc(1, sizeof *r);
	if (!r) {
		rc = fail(err, 500, NULL, NULL, "out of memory");
		goto done;
	}
	r->chat = chat;
	r->max_tokens = -1;
	r->temperature = 1.0f;
	r->top_p = 1.0f;

	v = json_object_get(root, "model");
	if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 256) {
		rc = fail(err, 400, NULL, "model", "'model' must be a non-empty string");
		goto done;
	}
	r->model = strdup(json_string_value(v));
	if (!r->model) {
		rc = fail(err, 500, NULL, NULL, "out of memory");
		goto done;
	}
	if (chat) {
		if (!(v = json_object_get(root, "messages"))) {
			rc = fail(err, 400, NULL, "messages", "'messages' is required");
			goto done;
		}
		if ((rc = parse_messages(&prompt, err, v, fmt)) < 0)
			goto done;
	} else {
		if (!(v = json_object_get(root, "prompt"))) {
			rc = fail(err, 400, NULL, "prompt", "'prompt' is required");
			goto done;
		}
		if ((rc = parse_prompt(&prompt, err, v)) < 0)
			goto done;
	}
	for (int pass = 0; pass < 2; pass++) {
		const char *name = pass ? "max_completion_tokens" : "max_tokens";
		v = json_object_get(root, name);
		if (!v || json_is_null(v))
			continue;
		if (!get_integer(v, &iv)) {
			rc = fail(err, 400, NULL, name, "'%s' must be an integer", name);
			goto done;
		}
		if (iv < 1 || iv > 1000000) {
			rc = fail(err, 400, NULL, name, "'%s' must be between 1 and 1000000", name);
			goto done;
		}
		r->max_tokens = (int)iv;
	}
	v = json_object_get(root, "temperature");
	if (v && !json_is_null(v)) {
		double d;
		if (!json_is_number(v)) {
			rc = fail(err, 400, NULL, "temperature", "'temperature' must be a number");
			goto done;
		}
		d = json_number_value(v);
		if (!(d >= 0 && d <= 2)) {
			rc = fail(err, 400, NULL, "temperature", "'temperature' must be between 0 and 2");
			goto done;
		}
		r->temperature = (float)d;
	}
	v = json_object_get(root, "top_p");
	if (v && !json_is_null(v)) {
		double d;
		if (!json_is_number(v)) {
			rc = fail(err, 400, NULL, "top_p", "'top_p' must be a number");
			goto done;
		}
		d = json_number_value(v);
		if (!(d > 0 && d <= 1)) {
			rc = fail(err, 400, NULL, "top_p", "'top_p' must be greater than 0 and at most 1");
			goto done;
		}
		r->top_p = (float)d;
	}
	v = json_object_get(root, "seed");
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v)) {
			rc = fail(err, 400, NULL, "seed", "'seed' must be an integer");
			goto done;
		}
		r->seed = (uint64_t)json_integer_value(v);
		r->has_seed = 1;
	}
	v = json_object_get(root, "stop");
	if (v && !json_is_null(v) && (rc = parse_stop(r, err, v)) < 0)
		goto done;
	v = json_object_get(root, "stream");
	if (v && !json_is_null(v)) {
		if (!json_is_boolean(v)) {
			rc = fail(err, 400, NULL, "stream", "'stream' must be a boolean");
			goto done;
		}
		r->stream = json_is_true(v);
	}
	v = json_object_get(root, "stream_options");
	if (v && !json_is_null(v)) {
		json_t *iu = json_object_get(v, "include_usage");
		if (!json_is_object(v) || json_object_size(v) > (iu ? 1u : 0u) ||
		    (iu && !json_is_boolean(iu))) {
			rc = fail(err, 400, NULL, "stream_options",
				  "'stream_options' must be an object with only a boolean include_usage");
			goto done;
		}
		if (!r->stream) {
			rc = fail(err, 400, NULL, "stream_options",
				  "'stream_options' is only allowed when 'stream' is true");
			goto done;
		}
		r->include_usage = iu && json_is_true(iu);
	}
	if (chat && nf_template_stop(fmt->kind)) {
		r->stop[r->n_stop] = strdup(nf_template_stop(fmt->kind));
		if (!r->stop[r->n_stop]) {
			rc = fail(err, 500, NULL, NULL, "out of memory");
			goto done;
		}
		r->n_stop++;
	}
	r->prompt = nf_sbuf_detach(&prompt, &r->prompt_len);
	if (!r->prompt) {
		rc = fail(err, 500, NULL, NULL, "out of memory");
		goto done;
	}
	*out = r;
	r = NULL;
	rc = 0;
done:
	nf_sbuf_release(&prompt);
	nf_serve_req_free(r);
	json_decref(root);
	return rc;
}

void nf_serve_req_free(nf_serve_req *r)
{
	if (!r)
		return;
	free(r->model);
	free(r->prompt);
	for (size_t i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
	free(r);
}
