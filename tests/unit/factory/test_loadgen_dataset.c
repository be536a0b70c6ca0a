/* test_loadgen_dataset.c - the serving benchmark's datasets: the same spec and
 * seed give the same prompts (another seed others), lengths inside their
 * ranges, a shared prefix, multi-turn units, JSON-lines files (prompts,
 * messages, max_tokens, reuse in order) and the one-line errors of bad specs
 * and bad lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "factory/loadgen_dataset.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"

static size_t words_of(const char *s)
{
	size_t n = 1;
	for (; *s; s++)
		n += *s == ' ';
	return n;
}

static void test_random(void)
{
	nf_lg_dataset *a = NULL, *b = NULL, *c = NULL;
	int same = 1, inside = 1, differs = 0;
	is_int(nf_lg_dataset_make(&a, "random:20,40", 50, 3), 0, "random:20,40");
	nf_lg_dataset_make(&b, "random:20,40", 50, 3);
	nf_lg_dataset_make(&c, "random:20,40", 50, 4);
	ok(a && a->n_items == 50 && a->turns == 1 && !a->needs_chat, "50 one-request items");
	for (size_t i = 0; a && b && c && i < 50; i++) {
		size_t w = words_of(a->items[i].prompt);
		same &= !strcmp(a->items[i].prompt, b->items[i].prompt) &&
			a->items[i].max_tokens == b->items[i].max_tokens;
		differs |= strcmp(a->items[i].prompt, c->items[i].prompt) != 0;
		inside &= w >= 10 && w <= 30 && a->items[i].max_tokens >= 20 && a->items[i].max_tokens <= 60;
	}
	ok(same, "the same seed gives the same prompts and lengths");
	ok(differs, "another seed gives other prompts");
	ok(inside, "prompt words in [10, 30], max_tokens in [20, 60]");
	nf_lg_dataset_free(a);
	nf_lg_dataset_free(b);
	nf_lg_dataset_free(c);
}

static void test_prefix_multiturn(void)
{
	nf_lg_dataset *d = NULL;
	is_int(nf_lg_dataset_make(&d, "prefix:30,5,16", 4, 1), 0, "prefix:30,5,16");
	if (d) {
		size_t plen = 0, spaces = 0;
		/* the first 30 words: up to the 30th space */
		for (const char *p = d->items[0].prompt; *p && spaces < 30; p++, plen++)
			spaces += *p == ' ';
		ok(!strncmp(d->items[0].prompt, d->items[3].prompt, plen) &&
			   strcmp(d->items[0].prompt, d->items[3].prompt) != 0,
		   "prompts share their first 30 words and differ after");
		ok(words_of(d->items[1].prompt) == 35 && d->items[1].max_tokens == 16, "35 words, max_tokens 16");
	}
	nf_lg_dataset_free(d);
	d = NULL;
	is_int(nf_lg_dataset_make(&d, "multiturn:3", 7, 1), 0, "multiturn:3 for 7 requests");
	ok(d && d->turns == 3 && d->n_items == 3 && nf_lg_dataset_units(d, 7) == 3 && d->needs_chat,
	   "3 conversations of 3 turns (the last cut to 1 by the run)");
	ok(d && json_array_size(d->items[2].turns) == 3, "each holds its 3 user messages");
	nf_lg_dataset_free(d);
}

static char *write_tmp(const char *text)
{
	char *path = strdup("/tmp/nf-test-jsonl-XXXXXX");
	int fd = mkstemp(path);
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		abort();
	close(fd);
	return path;
}

static void expect_error(const char *spec, const char *needle)
{
	nf_lg_dataset *d = NULL;
	int err = nf_lg_dataset_make(&d, spec, 4, 1);
	ok(err < 0 && !d && strstr(nf_error_last(), needle), "%s: refused with '%s'", spec, needle);
	if (!(err < 0 && strstr(nf_error_last(), needle)))
		diag("got '%s'", nf_error_last());
}

static void test_jsonl(void)
{
	char *good = write_tmp("{\"prompt\": \"Once upon a time\"}\n\n"
			       "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 9}\n");
	char *bad = write_tmp("{\"prompt\": \"a\"}\n{\"prompt\": 3}\n");
	char *notjson = write_tmp("{\"prompt\": \"a\"}\n\n[1,\n");
	char spec[64], spec_bad[64], spec_nj[64];
	nf_lg_dataset *d = NULL;
	snprintf(spec, sizeof spec, "jsonl:%s", good);
	snprintf(spec_bad, sizeof spec_bad, "jsonl:%s", bad);
	snprintf(spec_nj, sizeof spec_nj, "jsonl:%s", notjson);
	is_int(nf_lg_dataset_make(&d, spec, 5, 1), 0, "a JSON-lines file of a prompt and a conversation");
	ok(d && d->n_items == 2 && d->needs_chat && d->has_prompts, "2 items (the blank line skipped)");
	ok(d && !strcmp(d->items[0].prompt, "Once upon a time") && json_array_size(d->items[1].messages) == 1 &&
		   d->items[1].max_tokens == 9,
	   "the prompt, the messages and their max_tokens");
	ok(d && nf_lg_dataset_item(d, 4) == &d->items[0], "5 requests reuse the 2 lines in order");
	nf_lg_dataset_free(d);
	{
		char want[96];
		snprintf(want, sizeof want, "%s:2: wants a \"prompt\" string", bad);
		expect_error(spec_bad, want);
		snprintf(want, sizeof want, "%s:3: not a JSON object", notjson);
		expect_error(spec_nj, want);
	}
	expect_error("jsonl:/nonexistent/x.jsonl", "/nonexistent/x.jsonl");
	unlink(good);
	unlink(bad);
	unlink(notjson);
	free(good);
	free(bad);
	free(notjson);
}

int main(void)
{
	test_random();
	test_prefix_multiturn();
	test_jsonl();
	expect_error("random:10", "wants 2 numbers");
	expect_error("random:0,5", "from 1 to");
	expect_error("prefix:1,2", "wants 3 numbers");
	expect_error("multiturn:65", "from 1 to 64");
	expect_error("sharegpt:x", "not random:IN,OUT");
	return done_testing();
}
