/*
 * checkpoint.h - load model checkpoints into an nf_model (float32), and write
 * a model out in the Hugging Face layout.
 *
 * Formats:
 *   llama2.c  - one file: 7 int32 header + float32 tensors (../shared/models/README.md)
 *   hf        - a folder with config.json and model.safetensors, or sharded
 *               model-0000N-of-0000M.safetensors + model.safetensors.index.json;
 *               F32, F16 and BF16 tensors, Hugging Face tensor names of the
 *               architecture's table (engine/arch.h): llama, mistral, qwen2.
 *
 * HF q_proj/k_proj weights are stored permuted for rotate-half RoPE; the loader
 * un-permutes them to llama2.c's interleaved-pair convention and the writer
 * permutes them, so a round trip is exact.
 */
#ifndef NF_ENGINE_CHECKPOINT_H
#define NF_ENGINE_CHECKPOINT_H

#include "engine/model.h"
#include "engine/safetensors.h"

typedef enum nf_ckpt_format {
	NF_CKPT_AUTO,    /* a directory is hf; a .safetensors file is hf; a file that starts
			    with "GGUF" is gguf; else llama2.c */
	NF_CKPT_LLAMA2C,
	NF_CKPT_HF,
	NF_CKPT_GGUF,
} nf_ckpt_format;

/* Parse "auto" | "llama2c" | "hf" | "gguf"; NF_EINPUT otherwise. */
int nf_ckpt_format_parse(nf_ckpt_format *out, const char *name);

/* Load a checkpoint.  Every inconsistency (truncated, oversized, header dims
 * not matching the size, bad offsets, overlapping tensors, missing tensors)
 * is NF_EINPUT with "PATH: what is wrong" (byte offset where it applies). */
int nf_ckpt_load(nf_model **out, const char *path, nf_ckpt_format format);

/* Write m to dir (created) as config.json + model.safetensors with tensors of
 * dtype (F32, F16 or BF16).  Files are written atomically. */
int nf_ckpt_write_hf(const char *dir, const nf_model *m, nf_dtype dtype);

/* Write m as a llama2.c checkpoint file (tests and the synthetic-model tool).
 * NF_EUNSUPPORTED for what the format cannot hold: another architecture,
 * biases, rope scaling, rope_theta other than 10000, norm_eps other than 1e-5. */
int nf_ckpt_write_llama2c(const char *path, const nf_model *m);

/* The format-specific loaders nf_ckpt_load dispatches to (same contract). */
int nf_ckpt_load_llama2c(nf_model **out, const char *path);
/* path: a folder, a .safetensors file (config.json beside it) or a
 * model.safetensors.index.json file. */
int nf_ckpt_load_hf(nf_model **out, const char *path);
/* A GGUF v2/v3 file (llama, qwen2 architectures; every tensor type of
 * engine/gguf.h dequantized to float32; q/k in the interleaved order). */
int nf_ckpt_load_gguf(nf_model **out, const char *path);
typedef struct nf_gguf nf_gguf;
typedef struct nf_tokenizer nf_tokenizer;

/* The tokenizer a GGUF file carries (tokenizer.ggml.*, its chat template);
 * vocab_size > 0 must equal its token count. */
int nf_tokenizer_from_gguf(nf_tokenizer **out, const nf_gguf *g, int vocab_size);

/* The tokenizer that goes with a checkpoint: tokenizer_path when given (a
 * folder holding tokenizer.json and tokenizer_config.json, a tokenizer.json
 * file with its config beside it, or a llama2.c tokenizer.bin), else a GGUF
 * file's own, else the tokenizer.json beside Hugging Face weights.  A
 * llama2.c checkpoint without tokenizer_path is NF_EINPUT. */
int nf_ckpt_load_tokenizer(nf_tokenizer **out, const char *model_path, nf_ckpt_format fmt,
			   const char *tokenizer_path, int vocab_size);

/* Write t beside a Hugging Face checkpoint in dir: tokenizer.json,
 * tokenizer_config.json (with the chat template) and generation_config.json
 * (BOS and EOS ids).  NF_EUNSUPPORTED for a llama2.c tokenizer. */
int nf_ckpt_write_hf_tokenizer(const char *dir, const nf_tokenizer *t);

/* The format nf_ckpt_load would pick for path under NF_CKPT_AUTO. */
nf_ckpt_format nf_ckpt_sniff(const char *path);

/* Parse a Hugging Face config.json (len bytes, need not be NUL-terminated)
 * into *out and validate it; `what` names it in messages.  model_type /
 * architectures llama, mistral or qwen2 (neither: llama), rope_scaling
 * default or llama3, Llama's attention_bias, a sliding window (the context
 * capped to it).  Unsupported features (another rope scaling, mlp_bias,
 * another activation, a head_dim other than hidden_size / heads) are
 * NF_EUNSUPPORTED, malformed values NF_EINPUT. */
int nf_ckpt_hf_config_parse(nf_model_config *out, const char *json, size_t len, const char *what);

/* The llama2.c file size for cfg: 28-byte header, the weights, the two legacy
 * RoPE tables and, when not shared, the classifier.  NF_EINPUT on overflow. */
int nf_ckpt_llama2c_size(uint64_t *out, const nf_model_config *cfg);

#endif
