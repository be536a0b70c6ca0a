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
#include "util/parse.h"
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

/* Fields of the OpenAI API (and vLLM's sampling extensions) this server
 * reads; every other key is refused with 400 naming it. */
static const char *const completion_keys[] = {
	"model", "prompt", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options",
	"stop", "seed", "echo", "logprobs", "presence_penalty", "frequency_penalty", "best_of",
	"logit_bias", "suffix", "top_k", "min_p", "repetition_penalty", "min_tokens", "ignore_eos",
	"stop_token_ids", "response_format", "nvext", NULL};
static const char *const chat_keys[] = {
	"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n",
	"stream", "stream_options", "stop", "seed", "logprobs", "top_logprobs", "presence_penalty",
	"frequency_penalty", "logit_bias", "response_format", "tools", "tool_choice", "top_k",
	"min_p", "repetition_penalty", "min_tokens", "ignore_eos", "stop_token_ids", "nvext", NULL};
/* Fields the API defines that change nothing in what this server returns
 * (storage, billing, routing and abuse-tracking hints): checked for type,
 * then ignored (docs/serving.md lists them). */
static const struct ignored_field {
	const char *name;
	int type; /* JSON_* */
} ignored_fields[] = {
	{"user", JSON_STRING},          {"store", JSON_TRUE},           {"metadata", JSON_OBJECT},
	{"service_tier", JSON_STRING},  {"parallel_tool_calls", JSON_TRUE},
	{"prompt_cache_key", JSON_STRING}, {"safety_identifier", JSON_STRING},
	{"prompt_cache_retention", JSON_STRING},
};

static const struct ignored_field *ignored_field(const char *k)
{
	for (size_t i = 0; i < sizeof ignored_fields / sizeof *ignored_fields; i++)
		if (!strcmp(ignored_fields[i].name, k))
			return &ignored_fields[i];
	return NULL;
}

/* An ignored field of the wrong type is still a malformed request. */
static int check_ignored(nf_api_error *err, const char *k, json_t *v)
{
	const struct ignored_field *f = ignored_field(k);
	int type_ok;
	if (json_is_null(v))
		return 0;
	type_ok = f->type == JSON_TRUE ? json_is_boolean(v) : (int)json_typeof(v) == f->type;
	if (!type_ok)
		return fail(err, 400, NULL, k, "'%s' must be a %s", k,
			    f->type == JSON_TRUE ? "boolean" : f->type == JSON_OBJECT ? "object" : "string");
	if (f->type == JSON_OBJECT) { /* metadata: as OpenAI bounds it */
		const char *mk;
		json_t *mv;
		if (json_object_size(v) > 16)
			return fail(err, 400, NULL, k, "'%s' may hold at most 16 pairs", k);
		json_object_foreach(v, mk, mv)
			if (!json_is_string(mv) || strlen(mk) > 64 || json_string_length(mv) > 512)
				return fail(err, 400, NULL, k, "'%s' maps keys of at most 64 characters to "
					    "strings of at most 512", k);
	}
	return 0;
}

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

/* A message's content: a string; a list of text parts, joined with "\n"
 * as vLLM joins them (the joined text in *owned); or null for an assistant
 * turn (one that only called tools). */
static int message_content(nf_chat_msg *msg, char **owned, nf_api_error *err, const char *param,
			   json_t *content)
{
	nf_sbuf joined;
	size_t i;
	json_t *part;
	if (json_is_string(content)) {
		msg->content = json_string_value(content);
		msg->len = json_string_length(content);
		return 0;
	}
	if ((!content || json_is_null(content)) && msg->role == NF_ROLE_ASSISTANT) {
		msg->content = "";
		msg->len = 0;
		return 0;
	}
	if (!json_is_array(content) || json_array_size(content) == 0)
		return fail(err, 400, NULL, param, "'%s.content' must be a string or a list of text parts", param);
	nf_sbuf_init(&joined, NF_REQ_MAX_PROMPT);
	json_array_foreach(content, i, part) {
		json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
		if (!json_is_object(part) || !json_is_string(type)) {
			nf_sbuf_release(&joined);
			return fail(err, 400, NULL, param, "'%s.content[%zu]' must be an object with a type", param, i);
		}
		if (strcmp(json_string_value(type), "text") || json_object_size(part) != 2 || !json_is_string(text)) {
			nf_sbuf_release(&joined);
			return fail(err, 422, "unsupported_parameter", param,
				    "'%s.content': only text parts ({type: text, text}) are supported", param);
		}
		if ((i && nf_sbuf_add(&joined, "\n", 1) < 0) ||
		    nf_sbuf_add(&joined, json_string_value(text), json_string_length(text)) < 0) {
			nf_sbuf_release(&joined);
			return fail(err, 400, NULL, param, "'%s.content' exceeds %u bytes", param, NF_REQ_MAX_PROMPT);
		}
	}
	if (nf_sbuf_add(&joined, "", 0) < 0 || !(*owned = nf_sbuf_detach(&joined, &msg->len))) {
		nf_sbuf_release(&joined);
		return fail(err, 500, NULL, NULL, "out of memory");
	}
	msg->content = *owned;
	return 0;
}

static int parse_messages(nf_sbuf *out, nf_api_error *err, json_t *v, const nf_chat_format *fmt)
{
	nf_chat_msg *msgs = NULL;
	char **owned = NULL; /* joined multi-part contents */
	size_t n, i;
	json_t *m;
	int rc;
	if (!json_is_array(v) || json_array_size(v) == 0)
		return fail(err, 400, NULL, "messages", "'messages' must be a non-empty list");
	n = json_array_size(v);
	if (n > NF_REQ_MAX_MESSAGES)
		return fail(err, 400, NULL, "messages", "at most %d messages", NF_REQ_MAX_MESSAGES);
	msgs = calloc(n, sizeof *msgs);
	owned = calloc(n, sizeof *owned);
	if (!msgs || !owned) {
		free(msgs);
		free(owned);
		return fail(err, 500, NULL, NULL, "out of memory");
	}
	json_array_foreach(v, i, m) {
		const char *k, *role;
		json_t *x;
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
		if ((rc = message_content(&msgs[i], &owned[i], err, param,
					  json_object_get(m, "content"))) < 0)
			goto done;
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
	for (i = 0; owned && i < n; i++)
		free(owned[i]);
	free(owned);
	free(msgs);
	return rc;
}

/* A prompt of token ids: a non-empty list of integers. */
static int parse_prompt_ids(nf_serve_req *r, nf_api_error *err, json_t *v)
{
	size_t i;
	json_t *x;
	if (json_array_size(v) == 0 || json_array_size(v) > NF_REQ_MAX_PROMPT / 2)
		return fail(err, 400, NULL, "prompt", "a prompt of token ids holds 1 to %u of them",
			    NF_REQ_MAX_PROMPT / 2);
	if (!(r->prompt_ids = calloc(json_array_size(v), sizeof *r->prompt_ids)))
		return fail(err, 500, NULL, NULL, "out of memory");
	json_array_foreach(v, i, x) {
		if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
			return fail(err, 400, NULL, "prompt", "a prompt of token ids holds non-negative integers");
		r->prompt_ids[r->n_prompt_ids++] = (int)json_integer_value(x);
	}
	return 0;
}

/* A completion's prompt: a string, a list of token ids, or a list of one
 * of either (a batch of several is not served). */
static int parse_prompt(nf_serve_req *r, nf_sbuf *out, nf_api_error *err, json_t *v)
{
	if (json_is_array(v) && json_array_size(v) && json_is_integer(json_array_get(v, 0)))
		return parse_prompt_ids(r, err, v);
	if (json_is_array(v)) {
		if (json_array_size(v) > 1)
			return fail(err, 422, "unsupported_parameter", "prompt", "one prompt per request is supported");
		if (json_array_size(v) != 1 || !(json_is_string(json_array_get(v, 0)) || json_is_array(json_array_get(v, 0))))
			return fail(err, 400, NULL, "prompt", "'prompt' must be a string or a list of token ids");
		v = json_array_get(v, 0);
		if (json_is_array(v))
			return parse_prompt_ids(r, err, v);
	}
	if (!json_is_string(v))
		return fail(err, 400, NULL, "prompt", "'prompt' must be a string or a list of token ids");
	if (memchr(json_string_value(v), 0, json_string_length(v)))
		return fail(err, 400, NULL, "prompt", "'prompt' contains a NUL character");
	if (nf_sbuf_add(out, json_string_value(v), json_string_length(v)) < 0)
		return fail(err, 400, NULL, "prompt", "'prompt' exceeds %u bytes", NF_REQ_MAX_PROMPT);
	return 0;
}

/* Parameters this server does not support, accepted only at their neutral value. */
static int check_neutral(nf_api_error *err, json_t *root, int n)
{
	const char *k;
	json_t *v;
	json_object_foreach(root, k, v) {
		long long iv;
		if (json_is_null(v))
			continue;
		if (ignored_field(k)) {
			if (check_ignored(err, k, v) < 0)
				return NF_EINPUT;
		} else if (!strcmp(k, "best_of")) {
			if (!get_integer(v, &iv))
				return fail(err, 400, NULL, k, "'%s' must be an integer", k);
			if (iv < 1)
				return fail(err, 400, NULL, k, "'%s' must be at least 1", k);
			if (iv != n)
				return fail(err, 422, "unsupported_parameter", k, "only best_of equal to n is supported");
		} else if (!strcmp(k, "suffix")) {
			if (!json_is_string(v))
				return fail(err, 400, NULL, k, "'suffix' must be a string");
			if (json_string_length(v))
				return fail(err, 422, "unsupported_parameter", k, "'suffix' is not supported");
		} else if (!strcmp(k, "tools") || !strcmp(k, "tool_choice")) {
			if (!(json_is_array(v) && json_array_size(v) == 0) &&
			    !(json_is_string(v) && !strcmp(json_string_value(v), "none")))
				return fail(err, 422, "unsupported_parameter", k, "'%s' is not supported", k);
		}
	}
	return 0;
}

/* An optional number field in [lo, hi]: 1 and *out set when given, 0 when
 * absent or null, negative (err filled) when of the wrong type or range. */
static int opt_number(nf_api_error *err, json_t *root, const char *k, double lo, double hi, double *out)
{
	json_t *v = json_object_get(root, k);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v))
		return fail(err, 400, NULL, k, "'%s' must be a number", k);
	*out = json_number_value(v);
	if (!(*out >= lo && *out <= hi))
		return fail(err, 400, NULL, k, "'%s' must be between %g and %g", k, lo, hi);
	return 1;
}

/* The same for an integer field (1 and 1.0 alike). */
static int opt_integer(nf_api_error *err, json_t *root, const char *k, long long lo, long long hi,
		       long long *out)
{
	json_t *v = json_object_get(root, k);
	if (!v || json_is_null(v))
		return 0;
	if (!get_integer(v, out))
		return fail(err, 400, NULL, k, "'%s' must be an integer", k);
	if (*out < lo || *out > hi)
		return fail(err, 400, NULL, k, "'%s' must be between %lld and %lld", k, lo, hi);
	return 1;
}

static int opt_boolean(nf_api_error *err, json_t *root, const char *k, int *out)
{
	json_t *v = json_object_get(root, k);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return fail(err, 400, NULL, k, "'%s' must be a boolean", k);
	*out = json_is_true(v);
	return 1;
}

/* logit_bias: {"token id": bias in [-100, 100]}, ids as decimal strings. */
static int parse_logit_bias(nf_serve_req *r, nf_api_error *err, json_t *v)
{
	const char *k;
	json_t *x;
	size_t n = 0;
	if (!json_is_object(v))
		return fail(err, 400, NULL, "logit_bias", "'logit_bias' must be an object");
	if (json_object_size(v) > NF_SAMPLING_MAX_BIAS)
		return fail(err, 400, NULL, "logit_bias", "'logit_bias' may hold at most %d tokens",
			    NF_SAMPLING_MAX_BIAS);
	if (!json_object_size(v))
		return 0;
	r->bias = calloc(json_object_size(v), sizeof *r->bias);
	if (!r->bias)
		return fail(err, 500, NULL, NULL, "out of memory");
	json_object_foreach(v, k, x) {
		long id;
		if (nf_parse_long(&id, k, 0, INT32_MAX, "token id") < 0)
			return fail(err, 400, NULL, "logit_bias",
				    "'logit_bias' keys must be token ids (decimal integers), not '%.32s'", k);
		if (!json_is_number(x) || !(json_number_value(x) >= -100 && json_number_value(x) <= 100))
			return fail(err, 400, NULL, "logit_bias",
				    "'logit_bias' values must be numbers between -100 and 100");
		r->bias[n++] = (nf_logit_bias){(int)id, (float)json_number_value(x)};
	}
	r->sampling.bias = r->bias;
	r->sampling.n_bias = n;
	return 0;
}

static int parse_stop_token_ids(nf_serve_req *r, nf_api_error *err, json_t *v)
{
	size_t i;
	json_t *x;
	if (!json_is_array(v) || json_array_size(v) > NF_REQ_MAX_STOP_IDS)
		return fail(err, 400, NULL, "stop_token_ids",
			    "'stop_token_ids' must be a list of at most %d token ids", NF_REQ_MAX_STOP_IDS);
	if (!json_array_size(v))
		return 0;
	r->stop_token_ids = calloc(json_array_size(v), sizeof *r->stop_token_ids);
	if (!r->stop_token_ids)
		return fail(err, 500, NULL, NULL, "out of memory");
	json_array_foreach(v, i, x) {
		long long id;
		if (!get_integer(x, &id) || id < 0 || id > INT32_MAX)
			return fail(err, 400, NULL, "stop_token_ids", "'stop_token_ids' must hold token ids");
		r->stop_token_ids[r->n_stop_token_ids++] = (int)id;
	}
	return 0;
}

/* The transforms of engine/sampling.h and vLLM's stopping extensions. */
static int parse_sampling(nf_serve_req *r, nf_api_error *err, json_t *root)
{
	double d = 0;
	long long iv = 0;
	int rc;
	json_t *v;
	if ((rc = opt_number(err, root, "presence_penalty", -2, 2, &d)) < 0)
		return rc;
	r->sampling.presence_penalty = rc ? (float)d : 0.0f;
	if ((rc = opt_number(err, root, "frequency_penalty", -2, 2, &d)) < 0)
		return rc;
	r->sampling.frequency_penalty = rc ? (float)d : 0.0f;
	if ((rc = opt_number(err, root, "repetition_penalty", 0.01, 100, &d)) < 0)
		return rc;
	r->sampling.repetition_penalty = rc ? (float)d : 1.0f;
	if ((rc = opt_integer(err, root, "top_k", -1, INT32_MAX, &iv)) < 0)
		return rc;
	r->sampling.top_k = rc && iv > 0 ? (int)iv : 0; /* -1 and 0: off, as vLLM */
	if ((rc = opt_number(err, root, "min_p", 0, 1, &d)) < 0)
		return rc;
	r->sampling.min_p = rc ? (float)d : 0.0f;
	if ((rc = opt_integer(err, root, "min_tokens", 0, 1000000, &iv)) < 0)
		return rc;
	r->min_tokens = rc ? (int)iv : 0;
	if ((rc = opt_boolean(err, root, "ignore_eos", &r->ignore_eos)) < 0)
		return rc;
	v = json_object_get(root, "logit_bias");
	if (v && !json_is_null(v) && (rc = parse_logit_bias(r, err, v)) < 0)
		return rc;
	v = json_object_get(root, "stop_token_ids");
	if (v && !json_is_null(v) && (rc = parse_stop_token_ids(r, err, v)) < 0)
		return rc;
	return 0;
}

/* n, echo and logprobs: chat's logprobs is a boolean with top_logprobs
 * beside it, completions' an integer count of alternatives. */
static int parse_choices(nf_serve_req *r, nf_api_error *err, json_t *root)
{
	long long iv = 0;
	int rc, b = 0;
	if ((rc = opt_integer(err, root, "n", 1, NF_REQ_MAX_N, &iv)) < 0)
		return rc;
	r->n = rc ? (int)iv : 1;
	if ((rc = opt_boolean(err, root, "echo", &r->echo)) < 0)
		return rc;
	if (!r->chat) {
		if ((rc = opt_integer(err, root, "logprobs", 0, NF_SAMPLING_MAX_TOP, &iv)) < 0)
			return rc;
		r->logprobs = rc;
		r->top_logprobs = rc ? (int)iv : 0;
		return 0;
	}
	if ((rc = opt_boolean(err, root, "logprobs", &b)) < 0)
		return rc;
	r->logprobs = b;
	if ((rc = opt_integer(err, root, "top_logprobs", 0, NF_SAMPLING_MAX_TOP, &iv)) < 0)
		return rc;
	if (rc && !r->logprobs)
		return fail(err, 400, NULL, "top_logprobs", "'top_logprobs' needs 'logprobs' true");
	r->top_logprobs = rc ? (int)iv : 0;
	return 0;
}

/* The body as a JSON object whose every key this endpoint knows. */
static int load_body(json_t **root, nf_api_error *err, const char *body, size_t len, int chat)
{
	json_error_t jerr;
	const char *k;
	json_t *v;
	*root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!*root)
		return fail(err, 400, "invalid_json", NULL, "invalid JSON body at line %d column %d: %s",
			    jerr.line, jerr.column, jerr.text);
	if (!json_is_object(*root))
		return fail(err, 400, "invalid_json", NULL, "the request body must be a JSON object");
	json_object_foreach(*root, k, v)
		if (!known(chat ? chat_keys : completion_keys, k) && !ignored_field(k))
			return fail(err, 400, NULL, k, "Unrecognized request argument supplied: %.64s", k);
	return 0;
}

/* model, and the prompt: completions' as given, chat's messages rendered. */
static int parse_input(nf_serve_req *r, nf_sbuf *prompt, nf_api_error *err, json_t *root,
		       const nf_chat_format *fmt)
{
	json_t *v = json_object_get(root, "model");
	const char *input = r->chat ? "messages" : "prompt";
	if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 256)
		return fail(err, 400, NULL, "model", "'model' must be a non-empty string");
	if (!(r->model = strdup(json_string_value(v))))
		return fail(err, 500, NULL, NULL, "out of memory");
	if (!(v = json_object_get(root, input)))
		return fail(err, 400, NULL, input, "'%s' is required", input);
	return r->chat ? parse_messages(prompt, err, v, fmt) : parse_prompt(r, prompt, err, v);
}

/* max_tokens (or chat's max_completion_tokens), temperature, top_p, seed. */
static int parse_limits(nf_serve_req *r, nf_api_error *err, json_t *root)
{
	long long iv = 0;
	double d = 0;
	json_t *v;
	int rc;
	for (int pass = 0; pass < 2; pass++) {
		if ((rc = opt_integer(err, root, pass ? "max_completion_tokens" : "max_tokens", 1, 1000000, &iv)) < 0)
			return rc;
		if (rc)
			r->max_tokens = (int)iv;
	}
	if ((rc = opt_number(err, root, "temperature", 0, 2, &d)) < 0)
		return rc;
	if (rc)
		r->temperature = (float)d;
	if ((rc = opt_number(err, root, "top_p", 0, 1, &d)) < 0 || (rc && d == 0))
		return fail(err, 400, NULL, "top_p", "'top_p' must be greater than 0 and at most 1");
	if (rc)
		r->top_p = (float)d;
	v = json_object_get(root, "seed");
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v))
			return fail(err, 400, NULL, "seed", "'seed' must be an integer");
		r->seed = (uint64_t)json_integer_value(v);
		r->has_seed = 1;
	}
	return 0;
}

/* stop, stream and stream_options; a chat template's own stop string. */
static int parse_output(nf_serve_req *r, nf_api_error *err, json_t *root, const nf_chat_format *fmt)
{
	json_t *v = json_object_get(root, "stop");
	int rc;
	if (v && !json_is_null(v) && (rc = parse_stop(r, err, v)) < 0)
		return rc;
	if ((rc = opt_boolean(err, root, "stream", &r->stream)) < 0)
		return rc;
	v = json_object_get(root, "stream_options");
	if (v && !json_is_null(v)) {
		/* include_obfuscation (pads chunks against length side channels) is
		 * accepted and ignored: the chunks here are not padded */
		json_t *iu = json_object_get(v, "include_usage"), *io = json_object_get(v, "include_obfuscation");
		if (!json_is_object(v) || json_object_size(v) > (iu ? 1u : 0u) + (io ? 1u : 0u) ||
		    (iu && !json_is_boolean(iu)) || (io && !json_is_boolean(io)))
			return fail(err, 400, NULL, "stream_options", "'stream_options' must be an object with "
				    "only the booleans include_usage and include_obfuscation");
		if (!r->stream)
			return fail(err, 400, NULL, "stream_options",
				    "'stream_options' is only allowed when 'stream' is true");
		r->include_usage = iu && json_is_true(iu);
	}
	if (r->chat && nf_template_stop(fmt->kind)) {
		if (!(r->stop[r->n_stop] = strdup(nf_template_stop(fmt->kind))))
			return fail(err, 500, NULL, NULL, "out of memory");
		r->n_stop++;
	}
	return 0;
}

int nf_serve_req_parse(nf_serve_req **out, nf_api_error *err, const char *body, size_t len,
		       int chat, const nf_chat_format *fmt)
{
	json_t *root = NULL;
	nf_serve_req *r = NULL;
	nf_sbuf prompt;
	int rc;

	*out = NULL;
	nf_sbuf_init(&prompt, NF_REQ_MAX_PROMPT);
	if ((rc = load_body(&root, err, body, len, chat)) < 0)
		goto done;
	if (!(r = calloc(1, sizeof *r))) {
		rc = fail(err, 500, NULL, NULL, "out of memory");
		goto done;
	}
	r->chat = chat;
	r->max_tokens = -1;
	r->temperature = 1.0f;
	r->top_p = 1.0f;
	if ((rc = parse_choices(r, err, root)) < 0 || (rc = check_neutral(err, root, r->n)) < 0 ||
	    (rc = parse_sampling(r, err, root)) < 0 || (rc = parse_input(r, &prompt, err, root, fmt)) < 0 ||
	    (rc = parse_limits(r, err, root)) < 0 || (rc = parse_output(r, err, root, fmt)) < 0 ||
	    (rc = nf_serve_req_parse_guide(&r->guide, err, root)) < 0)
		goto done;
	if (!(r->prompt = nf_sbuf_detach(&prompt, &r->prompt_len))) {
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
	free(r->bias);
	free(r->stop_token_ids);
	free(r->prompt_ids);
	nf_guide_spec_release(&r->guide);
	for (size_t i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
	free(r);
}

int nf_serve_req_check_vocab(const nf_serve_req *r, nf_api_error *err, int vocab_size)
{
	for (size_t i = 0; i < r->sampling.n_bias; i++)
		if (r->bias[i].token >= vocab_size)
			return fail(err, 400, NULL, "logit_bias", "'logit_bias': token %d is not below the "
				    "vocabulary size %d", r->bias[i].token, vocab_size);
	for (size_t i = 0; i < r->n_prompt_ids; i++)
		if (r->prompt_ids[i] >= vocab_size)
			return fail(err, 400, NULL, "prompt", "'prompt': token %d is not below the "
				    "vocabulary size %d", r->prompt_ids[i], vocab_size);
	for (size_t i = 0; i < r->n_stop_token_ids; i++)
		if (r->stop_token_ids[i] >= vocab_size)
			return fail(err, 400, NULL, "stop_token_ids", "'stop_token_ids': token %d is not "
				    "below the vocabulary size %d", r->stop_token_ids[i], vocab_size);
	return 0;
}

int nf_serve_render_messages(nf_sbuf *out, nf_api_error *err, json_t *messages,
			     const nf_chat_format *fmt)
{
	return parse_messages(out, err, messages, fmt);
}
