/*
 * loadgen_dataset.c - the serving benchmark's datasets (see
 * loadgen_dataset.h): parse the spec, then make each kind's items.
 */
#include "factory/loadgen_dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "factory/loadgen_stats.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/parse.h"
#include "util/banned.h"

#define MAX_WORDS 100000       /* of a generated prompt part */
#define MAX_TURNS 64
#define MAX_ITEMS 10000000
#define JSONL_MAX ((size_t)256 << 20)

/* Common words, each a single token in the usual BPE vocabularies. */
static const char *const words[] = {
	"the", "a", "little", "dog", "cat", "ran", "to", "park", "and", "saw", "big", "tree",
	"bird", "sang", "song", "sun", "was", "warm", "day", "girl", "boy", "played", "with",
	"ball", "in", "garden", "mom", "said", "time", "go", "home", "they", "were", "happy",
	"friend", "found", "box", "red", "blue", "green", "water", "fish", "swam", "sea", "it",
	"is", "good", "we", "can", "see", "how", "why", "what", "when", "make", "help", "new",
	"old", "book", "read", "story", "night", "moon", "star",
};
#define N_WORDS (sizeof(words) / sizeof(words[0]))

/* n random words, space-separated, as a new string. */
static char *random_words(nf_lg_rng *r, long n)
{
	size_t cap = (size_t)n * 9 + 1, len = 0; /* n <= MAX_WORDS: no overflow */
	char *s = malloc(cap);
	if (!s)
		return NULL;
	s[0] = '\0';
	for (long i = 0; i < n; i++) {
		const char *w = words[nf_lg_rng_next(r) % N_WORDS];
		size_t wl = strlen(w);
		if (i)
			s[len++] = ' ';
		memcpy(s + len, w, wl + 1);
		len += wl;
	}
	return s;
}

static int alloc_items(nf_lg_dataset *ds, size_t n)
{
	if (n == 0 || n > MAX_ITEMS)
		return nf_error_set(NF_EINPUT, "%zu requests: must be from 1 to %d", n, MAX_ITEMS);
	if (!(ds->items = calloc(n, sizeof *ds->items)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	ds->n_items = n;
	return 0;
}

/* "A,B[,C]" after the kind: exactly n whole numbers in [lo, hi]. */
static int spec_numbers(long *v, size_t n, const char *args, long lo, long hi, const char *spec)
{
	char buf[128];
	char *p = buf;
	if (strlen(args) >= sizeof buf)
		return nf_error_set(NF_EINPUT, "--dataset %s: too long", spec);
	memcpy(buf, args, strlen(args) + 1);
	for (size_t i = 0; i < n; i++) {
		char *comma = strchr(p, ',');
		if ((comma != NULL) != (i + 1 < n))
			return nf_error_set(NF_EINPUT, "--dataset %s: wants %zu numbers", spec, n);
		if (comma)
			*comma = '\0';
		if (nf_parse_long(&v[i], p, lo, hi, "--dataset") < 0)
			return nf_error_wrap(NF_EINPUT, "%s", spec);
		p = comma + 1;
	}
	return 0;
}

static int make_random(nf_lg_dataset *ds, const char *args, const char *spec, size_t n,
		       nf_lg_rng *r)
{
	long v[2];
	int err;
	if ((err = spec_numbers(v, 2, args, 1, MAX_WORDS, spec)) < 0 || (err = alloc_items(ds, n)) < 0)
		return err;
	for (size_t i = 0; i < n; i++) {
		long in = nf_lg_rng_range(r, (v[0] + 1) / 2, v[0] + v[0] / 2);
		ds->items[i].max_tokens = nf_lg_rng_range(r, (v[1] + 1) / 2, v[1] + v[1] / 2);
		if (!(ds->items[i].prompt = random_words(r, in)))
			return nf_error_set(NF_ENOMEM, "out of memory");
	}
	ds->has_prompts = true;
	return 0;
}

static int make_prefix(nf_lg_dataset *ds, const char *args, const char *spec, size_t n,
		       nf_lg_rng *r)
{
	long v[3];
	char *shared = NULL;
	int err;
	if ((err = spec_numbers(v, 3, args, 1, MAX_WORDS, spec)) < 0 || (err = alloc_items(ds, n)) < 0)
		return err;
	if (!(shared = random_words(r, v[0])))
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (size_t i = 0; i < n && !err; i++) {
		char *own = random_words(r, v[1]);
		ds->items[i].max_tokens = v[2];
		if (!own || !(ds->items[i].prompt = nf_strdup_printf("%s %s", shared, own)))
			err = nf_error_set(NF_ENOMEM, "out of memory");
		free(own);
	}
	free(shared);
	ds->has_prompts = true;
	return err;
}

static int make_multiturn(nf_lg_dataset *ds, const char *args, const char *spec, size_t requests,
			  nf_lg_rng *r)
{
	long turns;
	size_t n;
	int err;
	if ((err = spec_numbers(&turns, 1, args, 1, MAX_TURNS, spec)) < 0)
		return err;
	ds->turns = (size_t)turns;
	n = (requests + ds->turns - 1) / ds->turns;
	if ((err = alloc_items(ds, n)) < 0)
		return err;
	for (size_t i = 0; i < n; i++) {
		if (!(ds->items[i].turns = json_array()))
			return nf_error_set(NF_ENOMEM, "out of memory");
		for (long t = 0; t < turns; t++) {
			char *q = random_words(r, nf_lg_rng_range(r, 8, 24));
			if (!q || json_array_append_new(ds->items[i].turns, json_string(q)) < 0) {
				free(q);
				return nf_error_set(NF_ENOMEM, "out of memory");
			}
			free(q);
		}
	}
	ds->needs_chat = true;
	return 0;
}

/* One line of a JSON-lines file into item it. */
static int jsonl_item(nf_lg_dataset *ds, nf_lg_item *it, const char *line, size_t len,
		      const char *path, size_t lineno)
{
	json_error_t jerr;
	json_t *j = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr), *p, *m, *mt;
	int err = 0;
	if (!json_is_object(j)) {
		err = nf_error_set(NF_EINPUT, "%s:%zu: not a JSON object%s%s", path, lineno,
				   j ? "" : ": ", j ? "" : jerr.text);
		goto done;
	}
	p = json_object_get(j, "prompt");
	m = json_object_get(j, "messages");
	mt = json_object_get(j, "max_tokens");
	if (json_is_string(p) && !m) {
		if (!(it->prompt = strdup(json_string_value(p))))
			err = nf_error_set(NF_ENOMEM, "out of memory");
		ds->has_prompts = true;
	} else if (json_is_array(m) && json_array_size(m) > 0 && !p) {
		it->messages = json_incref(m);
		ds->needs_chat = true;
	} else {
		err = nf_error_set(NF_EINPUT, "%s:%zu: wants a \"prompt\" string or a non-empty "
				   "\"messages\" array", path, lineno);
	}
	if (!err && mt) {
		if (!json_is_integer(mt) || json_integer_value(mt) < 1 || json_integer_value(mt) > 1000000)
			err = nf_error_set(NF_EINPUT, "%s:%zu: max_tokens must be from 1 to 1000000",
					   path, lineno);
		else
			it->max_tokens = (long)json_integer_value(mt);
	}
done:
	json_decref(j);
	return err;
}

static int make_jsonl(nf_lg_dataset *ds, const char *path)
{
	char *text = NULL, *p, *end;
	size_t len = 0, n = 0, lineno = 0;
	int err;
	if ((err = nf_fs_read_file(&text, &len, path, JSONL_MAX)) < 0)
		return err;
	for (p = text; p < text + len; p = end + 1) {
		end = memchr(p, '\n', (size_t)(text + len - p));
		if (!end)
			end = text + len;
		n += p + strspn(p, " \t\r") < end; /* a line that is not blank */
	}
	if (n == 0)
		err = nf_error_set(NF_EINPUT, "%s: no requests", path);
	else
		err = alloc_items(ds, n);
	n = 0;
	for (p = text; !err && p < text + len; p = end + 1) {
		size_t blank;
		end = memchr(p, '\n', (size_t)(text + len - p));
		if (!end)
			end = text + len;
		lineno++;
		blank = strspn(p, " \t\r");
		if (p + blank >= end)
			continue;
		err = jsonl_item(ds, &ds->items[n++], p, (size_t)(end - p), path, lineno);
	}
	free(text);
	return err;
}

int nf_lg_dataset_make(nf_lg_dataset **out, const char *spec, size_t requests, uint64_t seed)
{
	nf_lg_dataset *ds = calloc(1, sizeof *ds);
	nf_lg_rng r;
	int err;
	*out = NULL;
	if (!ds)
		return nf_error_set(NF_ENOMEM, "out of memory");
	ds->turns = 1;
	nf_lg_rng_seed(&r, seed);
	if (!strncmp(spec, "random:", 7))
		err = make_random(ds, spec + 7, spec, requests, &r);
	else if (!strncmp(spec, "prefix:", 7))
		err = make_prefix(ds, spec + 7, spec, requests, &r);
	else if (!strncmp(spec, "multiturn:", 10))
		err = make_multiturn(ds, spec + 10, spec, requests, &r);
	else if (!strncmp(spec, "jsonl:", 6))
		err = make_jsonl(ds, spec + 6);
	else
		err = nf_error_set(NF_EINPUT, "--dataset %s: not random:IN,OUT, prefix:SHARED,IN,OUT, "
				   "multiturn:TURNS or jsonl:FILE", spec);
	if (err < 0) {
		nf_lg_dataset_free(ds);
		return err;
	}
	*out = ds;
	return 0;
}

int nf_lg_dataset_prompts(nf_lg_dataset **out, const char *const *prompts, size_t n)
{
	nf_lg_dataset *ds = calloc(1, sizeof *ds);
	int err;
	*out = NULL;
	if (!ds)
		return nf_error_set(NF_ENOMEM, "out of memory");
	ds->turns = 1;
	ds->has_prompts = true;
	err = alloc_items(ds, n);
	for (size_t i = 0; !err && i < n; i++)
		if (!(ds->items[i].prompt = strdup(prompts[i])))
			err = nf_error_set(NF_ENOMEM, "out of memory");
	if (err < 0) {
		nf_lg_dataset_free(ds);
		return err;
	}
	*out = ds;
	return 0;
}

void nf_lg_dataset_free(nf_lg_dataset *ds)
{
	if (!ds)
		return;
	for (size_t i = 0; i < ds->n_items; i++) {
		free(ds->items[i].prompt);
		json_decref(ds->items[i].messages);
		json_decref(ds->items[i].turns);
	}
	free(ds->items);
	free(ds);
}

const nf_lg_item *nf_lg_dataset_item(const nf_lg_dataset *ds, size_t j)
{
	return &ds->items[j % ds->n_items];
}

size_t nf_lg_dataset_units(const nf_lg_dataset *ds, size_t requests)
{
	return (requests + ds->turns - 1) / ds->turns;
}
