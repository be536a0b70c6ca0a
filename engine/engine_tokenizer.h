/*
 * engine_tokenizer.h - the tokenizer files of an engine folder (internal to
 * engine/): a llama2.c model's tokenizer.bin as given, or for every other
 * tokenizer the Hugging Face pair tokenizer.json + tokenizer_config.json
 * (which carries the chat template), each recorded with its sha256 in
 * config.json's "files".
 */
#ifndef NF_ENGINE_ENGINE_TOKENIZER_H
#define NF_ENGINE_ENGINE_TOKENIZER_H

#include <jansson.h>

#include "engine/engine.h"

/* Write the tokenizer files of o (o->tokenizer_path or o->tokenizer, exactly
 * one) into dir and add {"NAME": {"sha256": HEX}} for each to files.  The
 * tokenizer must fit the model's vocab_size, and its chat template, when it
 * has one, must render (NF_EINPUT naming the template's line:col). */
int nf_engine_tokenizer_write(json_t *files, const char *dir, const nf_engine_build_opts *o,
			      int vocab_size);

#endif
