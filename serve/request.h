/*
 * request.h - an OpenAI completion or chat-completion request body, parsed
 * and validated (jansson), and the OpenAI error object returned when it is
 * not acceptable.
 *
 * Status codes: 400 malformed JSON, wrong types, out-of-range values and
 * unknown fields; 422 valid OpenAI parameters this server does not support
 * (n > 1, logprobs, echo, penalties, best_of, logit_bias, tools).
 */
#ifndef NF_SERVE_REQUEST_H
#define NF_SERVE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "serve/manifest.h"
#include "serve/template.h"

#define NF_REQ_MAX_STOP 4
#define NF_REQ_MAX_STOP_LEN 256
#define NF_REQ_MAX_MESSAGES 100000 /* the body limit bounds them first; too many tokens is context_length_exceeded */
#define NF_REQ_MAX_PROMPT (1u << 20)

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
} nf_serve_req;

/* Parse body; on failure returns a negative code and fills err (status 400/422).
 * Caller owns *out (nf_serve_req_free). */
int nf_serve_req_parse(nf_serve_req **out, nf_api_error *err, const char *body, size_t len,
		       int chat, const nf_chat_format *fmt);
void nf_serve_req_free(nf_serve_req *r); /* NULL is fine */

#endif
