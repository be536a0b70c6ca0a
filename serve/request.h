/*
 * request.h - an OpenAI completion or chat-completion request body, parsed
 * and validated (jansson), and the OpenAI error object returned when it is
 * not acceptable.
 *
 * Status codes: 400 malformed JSON, wrong types, out-of-range values and
 * unknown fields; 422 valid OpenAI parameters this server does not support
 * (best_of other than n, suffix, tools, non-text content parts).  Fields the API defines that change nothing
 * here (store, metadata, service_tier, user, ...) are checked for type and
 * ignored.
 */
#ifndef NF_SERVE_REQUEST_H
#define NF_SERVE_REQUEST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/sampling.h"
#include "serve/guide.h"
#include "serve/manifest.h"
#include "serve/sbuf.h"
#include "serve/template.h"

#define NF_REQ_MAX_STOP 4
#define NF_REQ_MAX_STOP_LEN 256
#define NF_REQ_MAX_MESSAGES 100000 /* the body limit bounds them first; too many tokens is context_length_exceeded */
#define NF_REQ_MAX_PROMPT (1u << 20)
#define NF_REQ_MAX_N 16            /* choices per request */
#define NF_REQ_MAX_STOP_IDS 64     /* stop_token_ids */

typedef struct nf_api_error {
	int status;          /* HTTP status */
	const char *type;    /* "invalid_request_error", ... (static) */
	const char *code;    /* static or NULL (JSON null) */
	char param[64];      /* "" for null */
	char message[512];
} nf_api_error;

/* Fill e; returns e->status. */
int nf_api_error_set(nf_api_error *e, int status, const char *type, const char *code,
		     const char *param, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* {"error": {"message","type","param","code"}} as a new string (free()). */
char *nf_api_error_json(const nf_api_error *e);

typedef struct nf_serve_req {
	int chat;             /* 1 for /v1/chat/completions */
	char *model;          /* owned */
	char *prompt;         /* owned, rendered through the chat template for chat */
	size_t prompt_len;
	int max_tokens;       /* -1: not given */
	float temperature;    /* default 1 */
	float top_p;          /* default 1 */
	uint64_t seed;
	int has_seed;
	char *stop[NF_REQ_MAX_STOP + 1]; /* owned; the template's implied stop may be added */
	size_t n_stop;
	int stream;
	int include_usage;    /* stream_options.include_usage */
	int n;                /* choices, 1..NF_REQ_MAX_N */
	int echo;             /* completions: the prompt leads the text (and the logprobs) */
	int logprobs;         /* 1: the chosen tokens' logprobs are returned */
	int top_logprobs;     /* 0..NF_SAMPLING_MAX_TOP alternatives per token */
	nf_sampling_params sampling; /* sampling.bias points at bias */
	nf_logit_bias *bias;  /* owned; token ids not yet checked against the vocabulary */
	int min_tokens;       /* end-of-generation and stop_token_ids masked before this many */
	int ignore_eos;       /* 1: the end-of-generation tokens do not stop */
	int *stop_token_ids;  /* owned; not yet checked against the vocabulary */
	size_t n_stop_token_ids;
	int *prompt_ids;      /* owned: a completion prompt given as token ids (used as
				 given, no BOS added; prompt then ""); not yet checked
				 against the vocabulary */
	size_t n_prompt_ids;
	nf_guide_spec guide;  /* response_format or nvext.guided_*: what the answer must match */
} nf_serve_req;

/* Parse body; on failure returns a negative code and fills err (status 400/422).
 * Token ids (logit_bias, stop_token_ids) are checked against the model's
 * vocabulary by nf_serve_req_check_vocab.  Caller owns *out (nf_serve_req_free). */
int nf_serve_req_parse(nf_serve_req **out, nf_api_error *err, const char *body, size_t len,
		       int chat, const nf_chat_format *fmt);
void nf_serve_req_free(nf_serve_req *r); /* NULL is fine */
/* The guide of root (request_guide.c): response_format or nvext's
 * guided_json, guided_regex, guided_choice; kind NONE when neither; 400
 * with err filled when malformed or both. */
int nf_serve_req_parse_guide(nf_guide_spec *g, nf_api_error *err, json_t *root);
/* Render a JSON messages array (the chat endpoint's "messages") through
 * fmt into out, as a chat request's prompt; negative with err filled. */
int nf_serve_render_messages(nf_sbuf *out, nf_api_error *err, json_t *messages,
			     const nf_chat_format *fmt);
/* 0, or a negative code with err filled (400, param logit_bias or
 * stop_token_ids) when a token id is not below vocab_size. */
int nf_serve_req_check_vocab(const nf_serve_req *r, nf_api_error *err, int vocab_size);

#endif
