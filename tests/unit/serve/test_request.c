/* test_request.c - request validation, chat templates, stop strings and
 * UTF-8 hold-back, OpenAI error objects, Prometheus formatting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve/metrics.h"
#include "serve/request.h"
#include "serve/sbuf.h"
#include "serve/template.h"
#include "serve/textstream.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/banned.h"

static int status_of(const char *body, int chat, const char *param)
{
	nf_serve_req *r = NULL;
	nf_api_error e;
	memset(&e, 0, sizeof e);
	if (nf_serve_req_parse(&r, &e, body, strlen(body), chat, &(nf_chat_format){.kind = NF_CHAT_PLAIN}) == 0) {
		nf_serve_req_free(r);
		return 200;
	}
	if (param && strcmp(e.param, param)) {
		diag("param '%s', want '%s' (%s)", e.param, param, e.message);
		return -1;
	}
	return e.status;
}

int main(void)
{
	nf_serve_req *r = NULL;
	nf_api_error e;
	const char *body;

	body = "{\"model\":\"m\",\"prompt\":\"Once\",\"max_tokens\":7,\"temperature\":0,\"top_p\":0.5,"
	       "\"seed\":42,\"stop\":[\"a\",\"bc\"],\"stream\":true,\"stream_options\":{\"include_usage\":true},"
	       "\"n\":1,\"user\":\"u\",\"echo\":false,\"logprobs\":null,\"presence_penalty\":0}";
	is_int(nf_serve_req_parse(&r, &e, body, strlen(body), 0, &(nf_chat_format){.kind = NF_CHAT_PLAIN}), 0, "full completion request parses");
	if (r) {
		is_str(r->prompt, "Once", "prompt");
		is_int(r->max_tokens, 7, "max_tokens");
		ok(r->temperature == 0.0f && r->top_p == 0.5f, "temperature, top_p");
		ok(r->has_seed && r->seed == 42, "seed");
		is_int(r->n_stop, 2, "stop list");
		ok(r->stream && r->include_usage, "stream and include_usage");
		nf_serve_req_free(r);
		r = NULL;
	}
	body = "{\"model\":\"m\",\"prompt\":[\"x\"],\"stop\":\"\\n\"}";
	is_int(nf_serve_req_parse(&r, &e, body, strlen(body), 0, &(nf_chat_format){.kind = NF_CHAT_PLAIN}), 0,
	       "prompt as a one-element list, stop as a string");
	if (r) {
		ok(r->max_tokens == -1 && r->temperature == 1.0f && r->n_stop == 1 && !strcmp(r->stop[0], "\n"), "defaults");
		nf_serve_req_free(r);
		r = NULL;
	}

	is_int(status_of("{\"model\":", 0, NULL), 400, "malformed JSON: 400");
	is_int(status_of("[1,2]", 0, NULL), 400, "non-object body: 400");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"prompt\":\"y\"}", 0, NULL), 400, "duplicate key: 400");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"bogus\":1}", 0, "bogus"), 400, "unknown field: 400 naming it");
	is_int(status_of("{\"model\":\"m\",\"prompt\":5}", 0, "prompt"), 400, "prompt wrong type");
	is_int(status_of("{\"model\":\"m\"}", 0, "prompt"), 400, "prompt missing");
	is_int(status_of("{\"prompt\":\"x\"}", 0, "model"), 400, "model missing");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":\"5\"}", 0, "max_tokens"), 400, "max_tokens as string");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":0}", 0, "max_tokens"), 400, "max_tokens 0");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":2.5}", 0, "max_tokens"), 400, "max_tokens fractional");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":3.0}", 0, NULL), 200, "max_tokens 3.0 is an integer");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"temperature\":3}", 0, "temperature"), 400, "temperature out of range");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"temperature\":true}", 0, "temperature"), 400, "temperature wrong type");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"top_p\":0}", 0, "top_p"), 400, "top_p 0");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"seed\":1.5}", 0, "seed"), 400, "seed not integer");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", 0, "stop"), 400, "five stops");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"stop\":[1]}", 0, "stop"), 400, "stop not string");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"stop\":\"\"}", 0, "stop"), 400, "empty stop");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"stream\":1}", 0, "stream"), 400, "stream not boolean");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"stream_options\":{\"include_usage\":true}}", 0, "stream_options"),
	       400, "stream_options without stream");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"n\":17}", 0, "n"), 400, "n past 16: 400");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"n\":0}", 0, "n"), 400, "n=0: 400");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"n\":2,\"best_of\":3}", 0, "best_of"), 422,
	       "best_of other than n: 422");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"echo\":1}", 0, "echo"), 400, "echo not boolean");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":21}", 0, "logprobs"), 400, "logprobs past 20");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":true}", 0, "logprobs"), 400,
	       "completions logprobs is an integer");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"frequency_penalty\":2.5}", 0, "frequency_penalty"), 400,
	       "frequency penalty past 2");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"repetition_penalty\":0}", 0, "repetition_penalty"), 400,
	       "repetition penalty 0");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"top_k\":-2}", 0, "top_k"), 400, "top_k -2");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"min_p\":1.5}", 0, "min_p"), 400, "min_p past 1");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"logit_bias\":{\"abc\":1}}", 0, "logit_bias"), 400,
	       "logit_bias key not a token id");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"logit_bias\":{\"-1\":1}}", 0, "logit_bias"), 400,
	       "logit_bias negative token id");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"logit_bias\":{\"5\":101}}", 0, "logit_bias"), 400,
	       "logit_bias past 100");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"stop_token_ids\":[1.5]}", 0, "stop_token_ids"), 400,
	       "stop_token_ids not integers");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"ignore_eos\":\"yes\"}", 0, "ignore_eos"), 400,
	       "ignore_eos not boolean");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"store\":\"yes\"}", 0, "store"), 400,
	       "an ignored field is still type-checked");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"metadata\":{\"a\":1}}", 0, "metadata"), 400,
	       "metadata values must be strings");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"metadata\":{\"a\":\"b\",\"c\":\"d\",\"e\":\"f\",\"g\":\"h\","
			 "\"i\":\"j\",\"k\":\"l\",\"m\":\"n\",\"o\":\"p\",\"q\":\"r\",\"s\":\"t\",\"u\":\"v\",\"w\":\"x\","
			 "\"y\":\"z\",\"1\":\"2\",\"3\":\"4\",\"5\":\"6\",\"7\":\"8\"}}", 0, "metadata"), 400,
	       "metadata: at most 16 pairs");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"stream\":true,\"stream_options\":{\"include_usage\":true,"
			 "\"include_obfuscation\":false}}", 0, NULL), 200, "stream_options.include_obfuscation accepted");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"store\":true,\"metadata\":{\"a\":\"b\"},"
			 "\"service_tier\":\"auto\",\"user\":\"u\",\"prompt_cache_key\":\"k\",\"safety_identifier\":\"s\"}",
			 0, NULL), 200, "store, metadata, service_tier, user, prompt_cache_key, safety_identifier ignored");
	body = "{\"model\":\"m\",\"prompt\":\"x\",\"n\":3,\"best_of\":3,\"echo\":true,\"logprobs\":5,"
	       "\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,\"repetition_penalty\":1.2,\"top_k\":40,"
	       "\"min_p\":0.05,\"logit_bias\":{\"7\":100,\"9\":-100},\"min_tokens\":4,\"ignore_eos\":true,"
	       "\"stop_token_ids\":[2,13]}";
	is_int(nf_serve_req_parse(&r, &e, body, strlen(body), 0, &(nf_chat_format){.kind = NF_CHAT_PLAIN}), 0,
	       "every sampling field parses");
	if (r) {
		ok(r->n == 3 && r->echo && r->logprobs && r->top_logprobs == 5, "n, echo, logprobs 5");
		ok(r->sampling.presence_penalty == 0.5f && r->sampling.frequency_penalty == -0.5f &&
		   r->sampling.repetition_penalty == 1.2f && r->sampling.top_k == 40 && r->sampling.min_p == 0.05f,
		   "penalties, top_k, min_p");
		ok(r->sampling.n_bias == 2 && r->bias[0].token == 7 && r->bias[0].bias == 100 && r->bias[1].token == 9 &&
		   r->bias[1].bias == -100, "logit_bias as token ids");
		ok(r->min_tokens == 4 && r->ignore_eos && r->n_stop_token_ids == 2 && r->stop_token_ids[1] == 13,
		   "min_tokens, ignore_eos, stop_token_ids");
		memset(&e, 0, sizeof e);
		is_int(nf_serve_req_check_vocab(r, &e, 14), 0, "token ids below the vocabulary pass");
		ok(nf_serve_req_check_vocab(r, &e, 9) < 0 && e.status == 400 && !strcmp(e.param, "logit_bias"),
		   "a logit_bias id past the vocabulary: 400 naming logit_bias");
		ok(nf_serve_req_check_vocab(r, &e, 12) < 0 && !strcmp(e.param, "stop_token_ids"),
		   "a stop token id past the vocabulary: 400 naming stop_token_ids");
		nf_serve_req_free(r);
		r = NULL;
	}
	body = "{\"model\":\"m\",\"prompt\":\"x\",\"stop_token_ids\":[99]}";
	if (nf_serve_req_parse(&r, &e, body, strlen(body), 0, &(nf_chat_format){.kind = NF_CHAT_PLAIN}) == 0) {
		ok(nf_serve_req_check_vocab(r, &e, 100) == 0 && nf_serve_req_check_vocab(r, &e, 99) < 0,
		   "stop token id 99: vocabulary 100 takes it, 99 does not");
		ok(r->n == 1 && !r->logprobs && r->sampling.repetition_penalty == 1.0f && r->sampling.top_k == 0,
		   "defaults: n 1, no logprobs, no penalties");
		nf_serve_req_free(r);
		r = NULL;
	} else {
		ok(0, "stop_token_ids request parses");
		ok(0, "defaults");
	}
	is_int(status_of("{\"model\":\"m\",\"prompt\":[\"a\",\"b\"]}", 0, "prompt"), 422, "two prompts: 422");
	is_int(status_of("{\"model\":\"m\",\"prompt\":[[1],[2]]}", 0, "prompt"), 422, "two prompts of ids: 422");
	is_int(status_of("{\"model\":\"m\",\"prompt\":[]}", 0, "prompt"), 400, "an empty prompt list: 400");
	is_int(status_of("{\"model\":\"m\",\"prompt\":[1,\"a\"]}", 0, "prompt"), 400, "ids mixed with text: 400");
	is_int(status_of("{\"model\":\"m\",\"prompt\":[1,-2]}", 0, "prompt"), 400, "a negative token id: 400");
	body = "{\"model\":\"m\",\"prompt\":[[1,403,407]]}";
	is_int(nf_serve_req_parse(&r, &e, body, strlen(body), 0, &(nf_chat_format){.kind = NF_CHAT_PLAIN}), 0,
	       "a prompt of token ids (in a one-prompt list) parses");
	if (r) {
		ok(r->n_prompt_ids == 3 && r->prompt_ids[0] == 1 && r->prompt_ids[2] == 407 && r->prompt_len == 0,
		   "its ids, and no text");
		ok(nf_serve_req_check_vocab(r, &e, 408) == 0 && nf_serve_req_check_vocab(r, &e, 407) < 0 &&
		   !strcmp(e.param, "prompt"), "prompt ids checked against the vocabulary");
		nf_serve_req_free(r);
		r = NULL;
	}
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"a\\u0000b\"}", 0, NULL), 400, "NUL in prompt");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"\xff\"}", 0, NULL), 400, "invalid UTF-8 body");

	/* chat */
	is_int(status_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", 1, NULL), 200, "chat parses");
	is_int(status_of("{\"model\":\"m\",\"messages\":[]}", 1, "messages"), 400, "empty messages");
	is_int(status_of("{\"model\":\"m\",\"messages\":[{\"role\":\"wizard\",\"content\":\"hi\"}]}", 1, "messages[0]"), 400, "bad role");
	is_int(status_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":3}]}", 1, "messages[0]"), 400, "content not string");
	is_int(status_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"x\":1}]}", 1, "messages[0]"), 400, "unknown message field");
	is_int(status_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]}", 1, "messages[0]"),
	       422, "image part: 422");
	is_int(status_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}", 1, NULL),
	       200, "text part accepted");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\"}", 1, "prompt"), 400, "prompt on chat endpoint is unknown");
	is_int(status_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"echo\":true}", 1, "echo"),
	       400, "echo on the chat endpoint is unknown");
	is_int(status_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", 1,
			 "top_logprobs"), 400, "top_logprobs without logprobs");
	is_int(status_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":3}", 1,
			 "logprobs"), 400, "chat logprobs is a boolean");
	is_int(status_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,"
			 "\"top_logprobs\":20,\"parallel_tool_calls\":false,\"store\":false}", 1, NULL), 200,
	       "chat logprobs with top_logprobs 20, ignored fields");
	is_int(status_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":null}]}", 1, "messages[0]"), 400,
	       "null content only for the assistant");
	body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"A\"},"
	       "{\"type\":\"text\",\"text\":\"B\"}]},{\"role\":\"assistant\",\"content\":null},"
	       "{\"role\":\"user\",\"content\":\"C\"}]}";
	is_int(nf_serve_req_parse(&r, &e, body, strlen(body), 1, &(nf_chat_format){.kind = NF_CHAT_PLAIN}), 0,
	       "multi-part content and an assistant turn with null content");
	if (r) {
		is_str(r->prompt, "A\nB\n\nC", "parts joined with a newline, null content empty");
		nf_serve_req_free(r);
		r = NULL;
	}
	is_int(status_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{}]}", 1, "tools"), 422, "tools: 422");

	/* guides: response_format and nvext.guided_* */
#define CHAT_X "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
	body = CHAT_X "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\","
		      "\"schema\":{\"type\":\"object\"},\"strict\":true}}}";
	is_int(nf_serve_req_parse(&r, &e, body, strlen(body), 1, &(nf_chat_format){.kind = NF_CHAT_PLAIN}), 0,
	       "response_format json_schema parses");
	if (r) {
		ok(r->guide.kind == NF_GUIDE_SCHEMA && json_is_object(r->guide.value), "it is a schema guide");
		nf_serve_req_free(r);
		r = NULL;
	}
	body = "{\"model\":\"m\",\"prompt\":\"x\",\"nvext\":{\"guided_choice\":[\"a\",\"b\"]}}";
	is_int(nf_serve_req_parse(&r, &e, body, strlen(body), 0, &(nf_chat_format){.kind = NF_CHAT_PLAIN}), 0,
	       "nvext.guided_choice on completions parses");
	if (r) {
		ok(r->guide.kind == NF_GUIDE_CHOICE && json_array_size(r->guide.value) == 2, "a choice guide of 2");
		nf_serve_req_free(r);
		r = NULL;
	}
	is_int(status_of(CHAT_X "\"response_format\":{\"type\":\"text\"}}", 1, NULL), 200, "response_format text");
	is_int(status_of(CHAT_X "\"response_format\":{\"type\":\"xml\"}}", 1, "response_format.type"), 400,
	       "an unknown response_format type: 400");
	is_int(status_of(CHAT_X "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{}}}}", 1,
			 "response_format.json_schema"), 400, "json_schema without a name: 400");
	is_int(status_of(CHAT_X "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"schema\":[]}}}",
			 1, "response_format.json_schema.schema"), 400, "a schema that is not an object: 400");
	is_int(status_of(CHAT_X "\"nvext\":{\"guided_json\":\"{not json\"}}", 1, "nvext.guided_json"), 400,
	       "guided_json text that is not a schema: 400");
	is_int(status_of(CHAT_X "\"nvext\":{\"guided_regex\":\"a\",\"guided_choice\":[\"a\"]}}", 1, "nvext"), 400,
	       "two nvext guides: 400");
	is_int(status_of(CHAT_X "\"nvext\":{\"guided_choice\":[]}}", 1, "nvext.guided_choice"), 400, "no choices: 400");
	is_int(status_of(CHAT_X "\"nvext\":{\"top_k\":3}}", 1, "nvext.top_k"), 400, "an unknown nvext field: 400");
	is_int(status_of(CHAT_X "\"response_format\":{\"type\":\"json_object\"},\"nvext\":{\"guided_regex\":\"a\"}}", 1,
			 "nvext"), 400, "response_format and nvext together: 400");
#undef CHAT_X

	body = "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"U\"}]}";
	is_int(nf_serve_req_parse(&r, &e, body, strlen(body), 1, &(nf_chat_format){.kind = NF_CHAT_CHATML}), 0, "chatml request");
	if (r) {
		is_str(r->prompt, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n", "chatml render");
		ok(r->n_stop == 1 && !strcmp(r->stop[0], "<|im_end|>"), "chatml implies <|im_end|> as a stop");
		nf_serve_req_free(r);
		r = NULL;
	}
	{
		nf_chat_msg msgs[4] = {{NF_ROLE_SYSTEM, "S", 1}, {NF_ROLE_USER, "U1", 2},
				       {NF_ROLE_ASSISTANT, "A1", 2}, {NF_ROLE_USER, "U2", 2}};
		nf_sbuf b;
		nf_sbuf_init(&b, 4096);
		is_int(nf_template_render(&b, &(nf_chat_format){.kind = NF_CHAT_LLAMA2}, msgs, 4), 0, "llama2 render");
		is_str(b.data, "[INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST] A1 [INST] U2 [/INST]", "llama2 text");
		nf_sbuf_release(&b);
		nf_sbuf_init(&b, 4096);
		is_int(nf_template_render(&b, &(nf_chat_format){.kind = NF_CHAT_PLAIN}, msgs, 4), 0, "plain render");
		is_str(b.data, "S\nU1\nA1\nU2", "plain text");
		nf_sbuf_release(&b);
		nf_sbuf_init(&b, 8);
		ok(nf_template_render(&b, &(nf_chat_format){.kind = NF_CHAT_CHATML}, msgs, 4) < 0, "render bounded by the buffer cap");
		nf_sbuf_release(&b);
	}

	/* error object */
	{
		char *s;
		nf_api_error_set(&e, 429, "rate_limit_error", "queue_full", NULL, "busy %d", 3);
		s = nf_api_error_json(&e);
		is_str(s, "{\"error\":{\"message\":\"busy 3\",\"type\":\"rate_limit_error\",\"param\":null,\"code\":\"queue_full\"}}",
		       "OpenAI error object");
		free(s);
	}

	/* stop strings and hold-back */
	{
		char *stops[] = {"END", "\n\n"};
		nf_textstream t;
		nf_textstream_init(&t, stops, 2, 1024);
		is_int(nf_textstream_push(&t, "Hello E", 7), 0, "no stop yet");
		is_int(nf_textstream_ready(&t, 0), 6, "'E' held back as a possible stop prefix");
		is_int(nf_textstream_push(&t, "N", 1), 0, "still no stop");
		is_int(nf_textstream_ready(&t, 0), 6, "'EN' held back");
		is_int(nf_textstream_push(&t, "Dless", 5), 1, "stop found across pieces");
		is_str(t.buf, "Hello ", "text cut before the stop");
		is_int(nf_textstream_ready(&t, 0), 6, "all released once stopped");
		nf_textstream_release(&t);
		nf_textstream_init(&t, NULL, 0, 1024);
		nf_textstream_push(&t, "a\xe2\x82", 3);
		is_int(nf_textstream_ready(&t, 0), 1, "incomplete UTF-8 held back");
		nf_textstream_push(&t, "\xac", 1);
		is_int(nf_textstream_ready(&t, 0), 4, "complete character released");
		nf_textstream_release(&t);
		/* a byte-level tokenizer gives a 4-byte emoji (U+1F600) one byte per token */
		nf_textstream_init(&t, NULL, 0, 1024);
		nf_textstream_push(&t, "x", 1);
		size_t held[3];
		for (int k = 0; k < 3; k++) {
			nf_textstream_push(&t, &"\xf0\x9f\x98"[k], 1);
			held[k] = nf_textstream_ready(&t, 0);
		}
		ok(held[0] == 1 && held[1] == 1 && held[2] == 1,
		   "the first three bytes of a 4-byte emoji are held back");
		nf_textstream_push(&t, "\x80", 1);
		is_int(nf_textstream_ready(&t, 0), 5, "the emoji is released whole with its fourth byte");
		nf_textstream_release(&t);
		nf_textstream_init(&t, NULL, 0, 4);
		ok(nf_textstream_push(&t, "12345", 5) < 0, "text bounded");
		nf_textstream_release(&t);
	}
	{
		nf_sbuf b;
		nf_sbuf_init(&b, 64);
		nf_sbuf_add_utf8(&b, "a\xff" "b\xc3\xa9\xed\xa0\x80", 8);
		is_str(b.data, "a\xef\xbf\xbd" "b\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", "invalid UTF-8 replaced");
		nf_sbuf_release(&b);
	}

	/* metrics */
	{
		nf_metrics *m = NULL;
		nf_sbuf b;
		is_int(nf_metrics_new(&m), 0, "metrics");
		nf_metrics_request(m, "/v1/completions", 200);
		nf_metrics_request(m, "/v1/completions", 429);
		nf_metrics_request(m, "/nope", 404);
		nf_metrics_tokens(m, 5, 3, 7);
		nf_metrics_observe(m, NF_HIST_TTFT, 0.003);
		nf_metrics_observe(m, NF_HIST_TTFT, 100);
		nf_metrics_set_gauges(m, 3, 2, 1);
		nf_sbuf_init(&b, 1 << 20);
		is_int(nf_metrics_format(m, &b), 0, "format");
		ok(strstr(b.data, "nimserve_requests_total{endpoint=\"/v1/completions\",status=\"429\"} 1\n") != NULL, "429 counted");
		ok(strstr(b.data, "\nnimserve_prompt_tokens_cached_total 3\n") != NULL, "cached prompt tokens counted");
		ok(strstr(b.data, "nimserve_requests_total{endpoint=\"other\",status=\"404\"} 1\n") != NULL, "unknown path as other");
		ok(strstr(b.data, "nimserve_generation_tokens_total 7\n") != NULL, "tokens");
		ok(strstr(b.data, "nimserve_time_to_first_token_seconds_bucket{le=\"0.0025\"} 0\n") &&
		   strstr(b.data, "nimserve_time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n") &&
		   strstr(b.data, "nimserve_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n") &&
		   strstr(b.data, "nimserve_time_to_first_token_seconds_count 2\n"), "cumulative histogram buckets");
		ok(strstr(b.data, "# TYPE nimserve_queue_depth gauge\nnimserve_queue_depth 3\n") != NULL, "queue depth gauge");
		if (system("command -v promtool >/dev/null 2>&1") == 0) {
			char path[] = "/tmp/nf_metrics_XXXXXX";
			int fd = mkstemp(path);
			FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
			char cmd[128];
			if (f) {
				fwrite(b.data, 1, b.len, f);
				fclose(f);
			}
			snprintf(cmd, sizeof cmd, "promtool check metrics < %s", path);
			is_int(system(cmd), 0, "promtool check metrics accepts the text");
			unlink(path);
		} else {
			skip("promtool not installed");
		}
		nf_sbuf_release(&b);
		nf_metrics_free(m);
	}
	return done_testing();
}
