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
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"n\":2}", 0, "n"), 422, "n=2: 422");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"n\":0}", 0, "n"), 400, "n=0: 400");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"echo\":true}", 0, "echo"), 422, "echo: 422");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":3}", 0, "logprobs"), 422, "logprobs: 422");
	is_int(status_of("{\"model\":\"m\",\"prompt\":\"x\",\"frequency_penalty\":0.5}", 0, "frequency_penalty"), 422, "penalty: 422");
	is_int(status_of("{\"model\":\"m\",\"prompt\":[\"a\",\"b\"]}", 0, "prompt"), 422, "two prompts: 422");
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
	is_int(status_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{}]}", 1, "tools"), 422, "tools: 422");

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
