/* build_shared.c - what the builds of several recipes share (see build_shared.h). */
#define _GNU_SOURCE
#include "factory/build_shared.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer.h"
#include "util/error.h"
#include "util/banned.h"

/* A handful of recipes at a time: a linear search is the right tool. */
typedef struct shared_source {
	char *identity;
	char *path;
	char digest[NF_SHA256_HEX_LEN + 1];
} shared_source;

typedef struct shared_model {
	char key[NF_SHA256_HEX_LEN + 1];
	nf_model *model;
	nf_tokenizer *tokenizer;
} shared_model;

struct nf_build_shared {
	shared_source *sources;
	size_t n_sources;
	shared_model *models;
	size_t n_models;
	char **outputs;
	size_t n_outputs;
};

int nf_build_shared_new(nf_build_shared **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
}

void nf_build_shared_free(nf_build_shared *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_sources; i++) {
		free(s->sources[i].identity);
		free(s->sources[i].path);
	}
	for (size_t i = 0; i < s->n_models; i++) {
		nf_model_free(s->models[i].model);
		nf_tokenizer_free(s->models[i].tokenizer);
	}
	for (size_t i = 0; i < s->n_outputs; i++)
		free(s->outputs[i]);
	free(s->sources);
	free(s->models);
	free(s->outputs);
	free(s);
}

/* Room for one more element of size `size` in *arr holding n. */
static int grow(void **arr, size_t n, size_t size)
{
	void *p = reallocarray(*arr, n + 1, size);
	if (!p)
		return nf_error_set(NF_ENOMEM, "out of memory");
	*arr = p;
	return 0;
}

int nf_build_shared_source(const nf_build_shared *s, const char *identity, const char **path,
			   char digest[NF_SHA256_HEX_LEN + 1])
{
	for (size_t i = 0; s && i < s->n_sources; i++)
		if (!strcmp(s->sources[i].identity, identity)) {
			*path = s->sources[i].path;
			memcpy(digest, s->sources[i].digest, NF_SHA256_HEX_LEN + 1);
			return 0;
		}
	return NF_ENOTFOUND;
}

int nf_build_shared_add_source(nf_build_shared *s, const char *identity, const char *path,
			       const char *digest)
{
	shared_source src = {.identity = strdup(identity), .path = strdup(path)};
	int err = src.identity && src.path ? grow((void **)&s->sources, s->n_sources, sizeof(src))
					   : nf_error_set(NF_ENOMEM, "out of memory");
	if (err) {
		free(src.identity);
		free(src.path);
		return err;
	}
	snprintf(src.digest, sizeof(src.digest), "%s", digest);
	s->sources[s->n_sources++] = src;
	return 0;
}

int nf_build_shared_model(const nf_build_shared *s, const char *convert_key, nf_model **model,
			  nf_tokenizer **tokenizer)
{
	for (size_t i = 0; s && i < s->n_models; i++)
		if (!strcmp(s->models[i].key, convert_key)) {
			*model = s->models[i].model;
			*tokenizer = s->models[i].tokenizer;
			return 0;
		}
	return NF_ENOTFOUND;
}

int nf_build_shared_add_model(nf_build_shared *s, const char *convert_key, nf_model *model,
			      nf_tokenizer *tokenizer)
{
	/* One float32 checkpoint held at a time: the recipes that pin it come
	 * one after the other (the caller orders them), and two large models
	 * must not sit in memory together. */
	for (size_t i = 0; i < s->n_models; i++) {
		nf_model_free(s->models[i].model);
		nf_tokenizer_free(s->models[i].tokenizer);
	}
	s->n_models = 0;
	int err = grow((void **)&s->models, s->n_models, sizeof(*s->models));
	if (err) {
		nf_model_free(model);
		nf_tokenizer_free(tokenizer);
		return err;
	}
	shared_model *m = &s->models[s->n_models++];
	snprintf(m->key, sizeof(m->key), "%s", convert_key);
	m->model = model;
	m->tokenizer = tokenizer;
	return 0;
}

int nf_build_shared_claim_output(nf_build_shared *s, const char *out_dir)
{
	char *copy;
	for (size_t i = 0; i < s->n_outputs; i++)
		if (!strcmp(s->outputs[i], out_dir))
			return nf_error_set(NF_EINPUT, "%s: an earlier recipe of this build wrote it (the "
					    "same model name?): give each recipe its own model name",
					    out_dir);
	if (!(copy = strdup(out_dir)) || grow((void **)&s->outputs, s->n_outputs, sizeof(char *))) {
		free(copy);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	s->outputs[s->n_outputs++] = copy;
	return 0;
}
