/*
 * engine_tokenizer.c - an engine's tokenizer files and the build-time check
 * of its chat template (see engine_tokenizer.h).
 */
#include "engine/engine_tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "engine/chat.h"
#include "engine/tokenizer.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/banned.h"

#define TOKENIZER_MAX (64u << 20)

/* files[name] = {"sha256": hex of dir/name}. */
static int record(json_t *files, const char *dir, const char *name)
{
	char hex[NF_SHA256_HEX_LEN + 1];
	char *path = nf_path_join(dir, name);
	int err = path ? nf_sha256_file_hex(hex, path) : nf_error_set(NF_ENOMEM, "out of memory");
	free(path);
	if (!err && json_object_set_new(files, name, json_pack("{s:s}", "sha256", hex)))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	return err;
}

/* llama2.c: the file as given, after checking it loads for this model. */
static int write_llama2c(json_t *files, const char *dir, const char *src, int vocab_size)
{
	char *buf = NULL, *dst = nf_path_join(dir, "tokenizer.bin");
	size_t len = 0;
	nf_tokenizer *t = NULL;
	int err = dst ? nf_fs_read_file(&buf, &len, src, TOKENIZER_MAX)
		      : nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = nf_tokenizer_load_mem(&t, buf, len, vocab_size, src);
	if (!err)
		err = nf_fs_write_atomic(dst, buf, len, 0644);
	if (!err)
		err = record(files, dir, "tokenizer.bin");
	nf_tokenizer_free(t);
	free(buf);
	free(dst);
	return err;
}

/* Every other kind: the Hugging Face pair, template checked first. */
static int write_hf(json_t *files, const char *dir, const nf_tokenizer *t, int vocab_size)
{
	const char *tmpl = nf_tokenizer_chat_template(t);
	int err = 0;
	if (nf_tokenizer_vocab_size(t) > vocab_size)
		return nf_error_set(NF_EINPUT, "engine build: the tokenizer has %d tokens, the model %d",
				    nf_tokenizer_vocab_size(t), vocab_size);
	if (tmpl && (err = nf_chat_template_check(t, "chat_template")))
		return err;
	if ((err = nf_tokenizer_write_hf(t, dir)) || (err = record(files, dir, "tokenizer.json")))
		return err;
	return record(files, dir, "tokenizer_config.json");
}

int nf_engine_tokenizer_write(json_t *files, const char *dir, const nf_engine_build_opts *o,
			      int vocab_size)
{
	if (!o->tokenizer_path == !o->tokenizer)
		return nf_error_set(NF_EINPUT, "engine build: give exactly one tokenizer (a llama2.c "
				    "file or a tokenizer)");
	if (o->tokenizer_path)
		return write_llama2c(files, dir, o->tokenizer_path, vocab_size);
	return write_hf(files, dir, o->tokenizer, vocab_size);
}
