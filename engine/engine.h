/*
 * engine.h - an inference engine: built from an nf_model for one precision,
 * written to disk as a folder, opened (weights mmapped) and run.
 *
 * On disk (docs/ARCHITECTURE.md):
 *   config.json         model config, precision, profile, provenance, tool version
 *   weights.safetensors quantized tensors, scales beside them, 64-byte aligned
 *   tactics.json        per GEMM shape: chosen kernel, measured or modelled, timings
 *   tokenizer.bin       a llama2.c model's tokenizer, or for every other model
 *   tokenizer.json      its tokenizer in Hugging Face's format, and
 *   tokenizer_config.json  the special tokens and the chat template
 *
 * Running: a sequence (nf_seq) owns its KV cache; nf_engine_step advances a
 * batch of sequences by one token each, so concurrent requests share the
 * weight reads of every step (iteration-level batching);
 * nf_engine_step_ragged lets each sequence consume several consecutive
 * tokens in the same step (prompt prefill in one pass over the weights,
 * mixed with other sequences' decode tokens); nf_engine_prefill is its
 * one-sequence form.
 */
#ifndef NF_ENGINE_ENGINE_H
#define NF_ENGINE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/checkpoint.h"
#include "engine/kv_kind.h"
#include "engine/model.h"
#include "engine/quant.h"
#include "engine/tokenizer.h"

typedef enum nf_precision {
	NF_PREC_FP32,
	NF_PREC_FP16,
	NF_PREC_BF16,
	NF_PREC_INT8_WO,  /* int8 weights, per-output-channel float scales */
	NF_PREC_INT4_WO,  /* int4 weights in groups, a scale and min each */
	NF_PREC_INT4_AWQ, /* the same after activation-aware scaling (AWQ) */
	NF_PREC_FP8_E4M3, /* fp8 weights, per-channel scales; fp8 activations */
	NF_PREC_COUNT
} nf_precision;

/* What a precision is, as data (precision.c has the table). */
typedef struct nf_precision_info {
	const char *name;      /* "fp32" "fp16" "bf16" "int8-wo" "int4-wo" "int4-awq" "fp8-e4m3" */
	nf_quant_kind weights; /* how its matrices are stored (engine/wformat.h) */
	int group;             /* int4: default columns per group */
	int awq;               /* 1: AWQ scaling searched on calibration text first */
	int calibrated;        /* 1: the build needs calibration activations */
	const char *llama_type; /* the nearest llama.cpp type (benchmarks) */
} nf_precision_info;

const nf_precision_info *nf_precision_info_of(nf_precision p); /* NULL out of range */
const char *nf_precision_name(nf_precision p);
int nf_precision_parse(nf_precision *out, const char *name); /* NF_EINPUT if unknown */
/* The int4 group an engine of precision p is built with: `requested`, or
 * the precision's default when 0 (0 for precisions without groups). */
int nf_precision_group(nf_precision p, int requested);
/* Whether the CPU backend can build and run this precision. */
int nf_precision_cpu_supported(nf_precision p);

typedef struct nf_engine_build_opts {
	nf_precision precision;
	/* Exactly one of: */
	const char *tokenizer_path;  /* a llama2.c tokenizer, copied in as tokenizer.bin */
	const nf_tokenizer *tokenizer; /* any other: written as tokenizer.json and
					  tokenizer_config.json (with its chat template,
					  which must render) */
	const char *profile_json;    /* canonical profile JSON object, stored verbatim (may be NULL) */
	const char *provenance_json; /* JSON object: recipe digest, source digests, tool version (may be NULL) */
	int threads;                 /* autotuning threads; 0 = all cores */
	int autotune;                /* 1 = measure kernels on this CPU, 0 = cost model only */
	const char *tactics_report;  /* with autotune: write the measured table here and keep the
					engine's tactics.json modelled, so the engine is reproducible
					(NULL: the engine keeps the measured table) */
	int group;                   /* int4: columns per group (0: the precision's default) */
	const char *calib_text;      /* calibration text (int4-awq, fp8-e4m3), tokenized with the
					model's tokenizer; NULL: the tool's shipped default */
	const char *kv_cache;        /* "f32", "f16" or "int8", recorded as config.json's
					"kv_cache"; NULL: no field, and the engine keeps
					nf_kv_kind_default's cache */
} nf_engine_build_opts;

/* The KV cache of an engine whose config.json has no "kv_cache": floats for
 * fp32 (it must match the float32 reference), halves for the rest. */
nf_kv_kind nf_kv_kind_default(nf_precision p);

/* Quantize m and write the engine folder `dir` (created; every file written
 * atomically, the folder complete only when this returns 0). */
int nf_engine_build(const char *dir, const nf_model *m, const nf_engine_build_opts *opts);
/* The same straight from a checkpoint file (checkpoint.h formats), read a
 * layer at a time: memory holds the embedding and one layer in float32 and
 * one quantized slice, never the model, so that a model larger than memory
 * is quantized.  The engine is the same, byte for byte, as nf_engine_build
 * of the checkpoint loaded whole. */
int nf_engine_build_stream(const char *dir, const char *checkpoint, nf_ckpt_format format,
			   const nf_engine_build_opts *opts);

typedef struct nf_engine nf_engine;

/* Open an engine folder; threads 0 = all cores.  Validates everything it maps.
 * The weights are copied into anonymous memory on 2 MiB transparent huge
 * pages (faster decode; NF_WEIGHTS_COPY=0 keeps them in the file mapping)
 * and there laid out in 8-row tiles (engine/layout.h; NF_WEIGHTS_TILE=0
 * keeps them row-major).  Every layout gives bit-identical results. */
int nf_engine_open(nf_engine **out, const char *dir, int threads);
void nf_engine_free(nf_engine *e); /* NULL is fine */

const nf_model_config *nf_engine_config(const nf_engine *e);
nf_precision nf_engine_precision(const nf_engine *e);
const nf_tokenizer *nf_engine_tokenizer(const nf_engine *e);
/* config.json as read (NUL-terminated), for inspect and /v1/metadata. */
const char *nf_engine_config_json(const nf_engine *e);
/* Bytes of weights read per decode step (for bandwidth ceilings). */
uint64_t nf_engine_weight_bytes(const nf_engine *e);
/* Name of the CPU kernel family in use ("avx512-vnni", "avx2", "scalar"). */
const char *nf_engine_kernel_name(const nf_engine *e);

/* The engine's weight views (engine/forward.h; borrowed, live as long as
 * e): what a device backend (engine/cuda/backend.h) uploads.  Row-major
 * unless the opener tiled them (NF_WEIGHTS_TILE). */
struct nf_fwd_weights;
const struct nf_fwd_weights *nf_engine_fwd_weights(const nf_engine *e);

/* Run e's steps on the GPU its profile (config.json's profile.device) is
 * for, when the driver and such a device are here (engine/cuda/backend.h):
 * its weights uploaded, a KV cache for each of max_batch sequences on the
 * device, one decode step run.  Call right after nf_engine_open, before
 * any sequence.  Otherwise NF_EENV (or NF_EINPUT) with the one line that
 * says why, and e stays on the CPU.  On the GPU, sequences beyond
 * max_batch alive at once are refused; copying a sequence's prefix,
 * logits of several rows of a sequence and nf_engine_prefill_logits run on
 * the device as on the CPU. */
int nf_engine_use_gpu(nf_engine *e, int max_batch);
/* The GPU an engine was built for (config.json's profile.device, a GPU of
 * the device table), or NULL for a CPU engine. */
typedef struct nf_sku nf_sku;
const nf_sku *nf_engine_gpu_sku(const nf_engine *e);

/* Recompute the sha256 of every file config.json lists and compare
 * them with config.json (opening does not hash; call this to check). */
int nf_engine_verify(const nf_engine *e);
/* Force a kernel family ("avx512-vnni", "avx2", "scalar") for every GEMM,
 * overriding the tactics; NF_EUNSUPPORTED if this CPU cannot run it. */
int nf_engine_set_kernel(nf_engine *e, const char *name);
/* Threads the engine's pool uses. */
int nf_engine_threads(const nf_engine *e);
/* The kind of KV cache the engine's sequences get. */
nf_kv_kind nf_engine_kv_cache(const nf_engine *e);
/* Give the sequences created from now on a cache of another kind (a
 * benchmark's --kv; an engine's own is its config.json's); the kept spare
 * sequences are freed.  Sequences alive keep theirs (a step may mix them:
 * each cache is read and written in its own kind; nf_seq_copy_prefix
 * refuses two kinds).  NF_EINPUT for a kind out of range. */
int nf_engine_set_kv_cache(nf_engine *e, nf_kv_kind kind);

/* Give the sequences created from now on at most max_context positions
 * (nimserve's --max-context: less memory a sequence than the model's whole
 * context); the kept spare sequences are freed.  Call before
 * nf_engine_use_gpu and before any sequence is alive.  NF_EINPUT outside 1
 * to the engine's max_seq_len. */
int nf_engine_cap_context(nf_engine *e, int max_context);

typedef struct nf_seq nf_seq;
/* A sequence at position 0 with its KV cache (a kept one when there is). */
int nf_seq_new(nf_seq **out, nf_engine *e);
void nf_seq_free(nf_seq *s); /* NULL is fine */
/* Keep up to n freed sequences for reuse by nf_seq_new (0, the default:
 * none), so that a server does not map, fault in and unmap a KV cache per
 * request; past n the least recently kept is freed.  The memory bound is n
 * caches, what n sequences alive at once take anyway.  0 or NF_ENOMEM.
 * nf_seq_new, nf_seq_new_prefixed and nf_seq_free may be called from any
 * thread. */
int nf_engine_keep_sequences(nf_engine *e, size_t n);

/* Prefix caching.  A sequence remembers the tokens it has consumed (the
 * positions whose cache rows are valid); since every token's result is the
 * same whatever else shares its step, those rows are exactly what a new
 * prompt with the same first tokens would compute.
 *
 * nf_seq_new_prefixed: a sequence for a prompt tokens[0, n): the kept one
 * whose consumed tokens share the longest prefix with it, at most n - 1 of
 * them (the last prompt token must still run, for its logits); *reused is
 * that length, the position the caller continues at.  Without a shared
 * prefix: the least recently kept one, or a new one, and *reused 0. */
int nf_seq_new_prefixed(nf_seq **out, nf_engine *e, const int *tokens, size_t n, size_t *reused);
/* The positions consumed so far (valid cache rows), their tokens in *tokens
 * (may be NULL); valid until s is stepped or freed. */
size_t nf_seq_tokens(const nf_seq *s, const int **tokens);
/* How many of tokens[0, n) s has consumed as its first tokens. */
size_t nf_seq_common_prefix(const nf_seq *s, const int *tokens, size_t n);
/* dst takes src's first n consumed positions (cache rows and tokens) and
 * continues at position n: the prefix of a running request, copied for a
 * new one with the same first tokens.  NF_EINPUT if src has consumed fewer
 * or belongs to another engine. */
int nf_seq_copy_prefix(nf_seq *dst, const nf_seq *src, size_t n);

/* Advance n sequences by one token each: seqs[i] consumes tokens[i] at
 * position pos[i] (0 <= pos < max_seq_len, positions before it already
 * consumed).  Writes vocab_size logits per sequence to logits + i*vocab.
 * Thread-compatible: one caller at a time per engine. */
int nf_engine_step(nf_engine *e, nf_seq *const *seqs, const int *tokens, const int *pos,
		   size_t n, float *logits);

/* A ragged step: sequence seqs[i] consumes n_tokens[i] >= 1 consecutive
 * tokens at positions pos0[i], pos0[i] + 1, ..., pos0[i] + n_tokens[i] - 1
 * (pos0[i] >= 0, pos0[i] + n_tokens[i] <= max_seq_len; positions before
 * pos0[i] already consumed).  `tokens` holds them all, sequence by
 * sequence: sequence 0's n_tokens[0], then sequence 1's, ...  The KV cache
 * is written for every position; logits (vocab_size floats) only for each
 * sequence's LAST token, at logits + i*vocab (logits NULL: none computed,
 * e.g. for a prompt chunk that is not the last).  Every token's result
 * equals nf_engine_step one token at a time (fp32 and int8-wo alike: the
 * activation quantization is per token), so a scheduler may mix decode
 * tokens (n_tokens 1) and prompt chunks in one call.  Each sequence at most
 * once.  The weights are read once per NF_FWD_PASS_TOKENS (256) tokens.
 * n_seqs 0 does nothing; NF_EINPUT for a bad count, position or token
 * (nothing is run then).  Thread-compatible like nf_engine_step. */
int nf_engine_step_ragged(nf_engine *e, nf_seq *const *seqs, const int *tokens,
			  const int *n_tokens, const int *pos0, size_t n_seqs, float *logits);
/* The same with logits for the last n_rows[i] tokens of sequence i (1 to
 * n_tokens[i]; NULL: 1 each), rows one after the other, sequence 0's
 * first: a pending token and its drafts verified in one step. */
int nf_engine_step_ragged_rows(nf_engine *e, nf_seq *const *seqs, const int *tokens,
			       const int *n_tokens, const int *pos0, const int *n_rows,
			       size_t n_seqs, float *logits);

/* Prefill: s consumes tokens[0, n) at positions pos0 .. pos0 + n - 1; the
 * logits of the last one go to logits_last (vocab_size floats; NULL: none).
 * n == 0 or pos0 + n > max_seq_len: NF_EINPUT. */
int nf_engine_prefill(nf_engine *e, nf_seq *s, const int *tokens, size_t n, int pos0,
		      float *logits_last);

/* Prefill that keeps every position's logits: s consumes tokens[0, n) at
 * positions pos0 .. pos0 + n - 1 in passes over the weights, and the logits
 * after token i go to logits + i*vocab_size (caller's n x vocab_size
 * floats).  Each row equals what nf_engine_step gives one token at a time:
 * teacher-forced evaluation (the gates) in one pass.  n == 0 or
 * pos0 + n > max_seq_len: NF_EINPUT. */
int nf_engine_prefill_logits(nf_engine *e, nf_seq *s, const int *tokens, size_t n, int pos0,
			     float *logits);

#endif
