/*
 * recipe.h - the recipe (apiVersion nimfactory/v1): what to build, for which
 * devices and precisions, the gates every engine must pass, how to serve it
 * and how to package it.  docs/recipe.md is the reference of the format.
 *
 * Loading parses the YAML (factory/yaml_tree.h), validates it against the
 * schema tables in recipe.c and fills an nf_recipe with every default
 * applied.  The first mistake found is reported as one line
 * "FILE:LINE:COL: message" with NF_EINPUT (exit 2 in the CLI).
 *
 * Ownership: an nf_recipe owns every string and array it points to (except
 * the `sku` pointers, which point into the static device table); free it
 * with nf_recipe_free.  All fields are read-only for callers.
 */
#ifndef NF_FACTORY_RECIPE_H
#define NF_FACTORY_RECIPE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/sku.h"
#include "util/sha256.h"

#define NF_RECIPE_API_VERSION "nimfactory/v1"
#define NF_RECIPE_MAX_BYTES (1u << 20) /* 1 MiB */
#define NF_RECIPE_MAX_DEPTH 32
#define NF_RECIPE_MAX_NODES 10000
#define NF_RECIPE_MAX_SCALAR 16384
#define NF_RECIPE_MAX_TARGETS 64
#define NF_RECIPE_MAX_TP 7 /* distinct tensor-parallel degrees: 1 2 4 8 16 32 64 */

typedef enum nf_source_kind {
	NF_SOURCE_NONE = 0, /* absent (an optional tokenizer that was not given) */
	NF_SOURCE_URL,
	NF_SOURCE_PATH,
	NF_SOURCE_GIT,
} nf_source_kind;

typedef enum nf_source_format {
	NF_FORMAT_AUTO = 0,
	NF_FORMAT_LLAMA2C,
	NF_FORMAT_HF,
	NF_FORMAT_GGUF,
} nf_source_format;

typedef struct nf_recipe_git {
	char *url;    /* repository url (https, http, ssh, git, file, or user@host:path) */
	char *commit; /* 40 lowercase hex digits */
	char *path;   /* folder or file inside the repository, relative; NULL = the root */
} nf_recipe_git;

/* Where a model or tokenizer comes from: exactly one of url, path, git. */
typedef struct nf_recipe_source {
	nf_source_kind kind;
	char *url;          /* NF_SOURCE_URL: http(s) or file url */
	char *path;         /* NF_SOURCE_PATH: absolute (resolved against the recipe's folder) */
	char *path_written; /* NF_SOURCE_PATH: the path as written in the recipe */
	nf_recipe_git git;  /* NF_SOURCE_GIT */
	char *sha256;       /* 64 lowercase hex; required with url, optional with path, NULL if absent */
	nf_source_format format; /* default auto */
	bool archive;            /* unpack a .tar/.tar.gz/.tar.zst/.zip; default false */
} nf_recipe_source;

typedef enum nf_model_family {
	NF_FAMILY_LLAMA = 0,
	NF_FAMILY_MISTRAL,
	NF_FAMILY_QWEN2,
} nf_model_family;

typedef struct nf_recipe_model {
	char *name;    /* [a-z0-9][a-z0-9._-]*, at most 128 bytes */
	nf_model_family family;
	char *version; /* NULL if absent */
	char *license; /* NULL if absent */
	nf_recipe_source source;
	nf_recipe_source tokenizer; /* kind NF_SOURCE_NONE if absent: required for llama2c, refused
				     for gguf (the file holds its tokenizer), optional for hf
				     (tokenizer.json beside the weights by default) */
} nf_recipe_model;

typedef struct nf_recipe_target {
	const nf_sku *sku;                      /* never NULL; sku->name is the device name */
	nf_precision precisions[NF_PREC_COUNT]; /* in recipe order, no duplicates */
	size_t n_precisions;                    /* >= 1 */
	int tensor_parallel[NF_RECIPE_MAX_TP];  /* powers of two in 1..64, recipe order, no duplicates */
	size_t n_tensor_parallel;               /* >= 1 (default: {1}) */
	nf_kv_kind kv_caches[NF_KV_KIND_COUNT]; /* `kv_cache`: recipe order, no duplicates */
	size_t n_kv_caches;                     /* 0 when absent: each precision's default
						   cache (nf_kv_kind_default) */
} nf_recipe_target;

/* build.quantization: how the quantized precisions are made. */
typedef struct nf_recipe_quant {
	int group_size;                 /* int4: 32, 64 or 128; 0 = the precision's default */
	char *calibration_text;         /* resolved path, NULL = the tool's shipped text */
	char *calibration_text_written; /* as written in the recipe */
} nf_recipe_quant;

typedef struct nf_recipe_build {
	nf_recipe_target *targets; /* owned; devices are distinct */
	size_t n_targets;          /* 1..NF_RECIPE_MAX_TARGETS */
	bool autotune;             /* default true */
	nf_recipe_quant quant;     /* `quantization`, all optional */
} nf_recipe_build;

/* A precision's correctness thresholds.  In `def` a field the recipe does
 * not write is NAN; in tolerance[p] every field is resolved: the override,
 * else `default:`, else the table of factory/gate_defaults.h for p. */
typedef struct nf_recipe_tolerance {
	double min_token_agreement; /* greedy agreement on each prompt, in [0,1] */
	double max_logit_rel_error; /* >= 0 */
	double min_top1_agreement;  /* teacher-forced on the evaluation text, in [0,1] */
	double max_kl_mean;         /* nats, >= 0 */
	double min_ppl_ratio;       /* reference / engine perplexity, in [0, 100] */
} nf_recipe_tolerance;

#define NF_RECIPE_MAX_EVAL_TEXT (16u << 20) /* bytes of gates.correctness.eval_text */

typedef struct nf_recipe_correctness {
	char **prompts;                         /* owned; 1..64 strings, each <= 4096 bytes ("" allowed) */
	size_t n_prompts;
	int max_tokens;                         /* 1..4096; default 32 */
	char *eval_text;                        /* absolute path, NULL = the shipped text */
	char *eval_text_written;                /* as written, NULL when absent */
	int eval_tokens;                        /* 2..65536; default 1024 */
	nf_recipe_tolerance def;                /* `default`, with the built-in defaults filled in */
	nf_recipe_tolerance tolerance[NF_PREC_COUNT]; /* resolved per precision: override over def */
	bool overridden[NF_PREC_COUNT];         /* true where `precisions:` names the precision */
} nf_recipe_correctness;

typedef struct nf_recipe_performance {
	bool present;                   /* false when gates.performance is absent */
	char *prompt;                   /* <= 4096 bytes */
	int max_tokens;                 /* 1..4096; default 128 */
	double min_decode_tokens_per_s; /* > 0, or 0 when not gated */
	double max_peak_memory_mib;     /* > 0, or 0 when not gated */
	double min_prefill_tokens_per_s; /* > 0, or 0 when not gated */
	double max_ttft_ms;             /* > 0, or 0 when not gated */
	/* Bounds on ratios to the fp32 engine measured in the same run, per
	 * precision; 0 where not set (then reported only). */
	double min_decode_speedup[NF_PREC_COUNT];
	double min_prefill_speedup[NF_PREC_COUNT];
	double max_ttft_ratio[NF_PREC_COUNT];
	double max_memory_ratio[NF_PREC_COUNT];
	double max_size_ratio[NF_PREC_COUNT];
} nf_recipe_performance;

typedef struct nf_recipe_gates {
	nf_recipe_correctness correctness;
	nf_recipe_performance performance;
} nf_recipe_gates;

typedef enum nf_chat_template {
	NF_CHAT_AUTO = 0, /* the model's own template when it has one, else plain */
	NF_CHAT_MODEL,    /* the model's own Jinja template (the build fails without one) */
	NF_CHAT_PLAIN,
	NF_CHAT_LLAMA2,
	NF_CHAT_CHATML,
} nf_chat_template;

typedef enum nf_recipe_spec_method {
	NF_RECIPE_SPEC_NONE = 0,
	NF_RECIPE_SPEC_LOOKUP, /* prompt lookup */
	NF_RECIPE_SPEC_DRAFT,  /* a draft engine: another profile of the image */
} nf_recipe_spec_method;

/* serving.speculative: how the image's nimserve speculates by default
 * (its --speculative overrides); carried to the model manifest. */
typedef struct nf_recipe_speculative {
	bool present;                 /* written in the recipe */
	nf_recipe_spec_method method; /* default none */
	int k;                        /* tokens drafted per step, 1..16; 0 not written */
	char *draft_profile;          /* draft only, and then required: a profile's name
					 ("cpu-int8-wo-tp1"), which the image must hold */
} nf_recipe_speculative;

typedef struct nf_recipe_serving {
	nf_chat_template chat_template; /* default auto */
	/* Every precision listed is built by some target.  Default: the targets'
	 * precisions in order of first appearance. */
	nf_precision precision_preference[NF_PREC_COUNT];
	size_t n_precision_preference;
	/* Every degree listed is built by some target.  Default: the targets'
	 * degrees, ascending. */
	int tensor_parallel_preference[NF_RECIPE_MAX_TP];
	size_t n_tensor_parallel_preference;
	nf_recipe_speculative speculative;
	/* What nimserve is sized for, and what plan checks fits a device:
	 * sequences decoded together (default NF_RECIPE_MAX_BATCH, nimserve's
	 * --max-batch) and tokens a sequence may hold (0: the model's context;
	 * less caps each sequence's KV cache, nimserve's --max-context). */
	int max_batch;
	int max_context;
} nf_recipe_serving;

#define NF_RECIPE_MAX_BATCH 32

typedef enum nf_compression {
	NF_COMPRESS_NONE = 0,
	NF_COMPRESS_GZIP,
	NF_COMPRESS_ZSTD,
} nf_compression;

typedef enum nf_image_layout {
	NF_LAYOUT_SINGLE = 0, /* one image holding every profile */
	NF_LAYOUT_PER_DEVICE, /* an image index, one image per device */
} nf_image_layout;

typedef struct nf_recipe_label {
	char *key;   /* [A-Za-z0-9._/-]+, at most 128 bytes */
	char *value; /* at most 4096 bytes */
} nf_recipe_label;

typedef struct nf_recipe_image {
	char *repository;         /* OCI name grammar, optionally host[:port]/ first */
	char *tag;                /* [A-Za-z0-9_][A-Za-z0-9._-]{0,127} */
	nf_recipe_label *labels;  /* owned; sorted by key, keys distinct */
	size_t n_labels;          /* 0..64 */
	nf_compression compression; /* default gzip */
	nf_image_layout layout;     /* default single */
	char *base;               /* absolute path of the base image, NULL for none */
	char *base_written;       /* as written, NULL for none */
	char *created;            /* as written (RFC 3339, UTC "Z"), NULL if absent */
	int64_t created_epoch;    /* resolved: created, else $SOURCE_DATE_EPOCH, else 0 */
} nf_recipe_image;

typedef struct nf_recipe {
	char *file; /* the name given to load/parse (used in messages) */
	char *dir;  /* absolute folder that relative paths were resolved against */
	nf_recipe_model model;
	nf_recipe_build build;
	nf_recipe_gates gates;
	nf_recipe_serving serving;
	nf_recipe_image image;
} nf_recipe;

/* Read and validate the recipe file at path (at most NF_RECIPE_MAX_BYTES).
 * Relative paths in it are resolved against the file's folder. */
int nf_recipe_load(nf_recipe **out, const char *path);

/*
 * Validate a recipe held in memory (data need not be NUL-terminated).
 * `file` names it in messages; relative paths resolve against base_dir
 * (NULL = the current directory; made absolute).
 */
int nf_recipe_parse(nf_recipe **out, const char *file, const char *data, size_t len,
		    const char *base_dir);

void nf_recipe_free(nf_recipe *r); /* NULL is fine */

/*
 * The canonical JSON of the recipe: same keys as the YAML, every default
 * filled in, sources' paths as written (so the digest does not depend on
 * where the repository is checked out).  New reference, caller owns it.
 */
int nf_recipe_to_json(json_t **out, const nf_recipe *r);

/* sha256 hex of the canonical JSON dumped with JSON_SORT_KEYS | JSON_COMPACT:
 * equal for recipes that differ only in formatting, comments or key order. */
int nf_recipe_digest(char hex[NF_SHA256_HEX_LEN + 1], const nf_recipe *r);

/* Names of the enums, as written in recipes. */
const char *nf_source_format_name(nf_source_format f);  /* "auto" "llama2c" "hf" */
const char *nf_source_kind_name(nf_source_kind k);      /* "none" "url" "path" "git" */
const char *nf_chat_template_name(nf_chat_template t);
const char *nf_recipe_spec_method_name(nf_recipe_spec_method m); /* "none" "lookup" "draft" */  /* "plain" "llama2" "chatml" */
const char *nf_compression_name(nf_compression c);      /* "none" "gzip" "zstd" */
const char *nf_image_layout_name(nf_image_layout l);    /* "single" "per-device" */
const char *nf_model_family_name(nf_model_family f);    /* "llama" */

#endif
