/*
 * engine.c - engine folders: nf_engine_build quantizes a model and writes
 * config.json, weights.safetensors, tactics.json and the tokenizer files
 * (engine_tokenizer.c);
 * nf_engine_open validates and mmaps them; nf_seq and nf_engine_step run
 * the batched forward pass (forward.c) on the CPU backend.
 */
#define _GNU_SOURCE /* MADV_HUGEPAGE */
#include "engine/engine.h"

#include "engine/ckpt_reader.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/arch.h"
#include "engine/engine_tokenizer.h"
#include "engine/engine_weights.h"
#include "engine/cpu/cpu.h"
#include "engine/forward.h"
#include "engine/layout.h"
#include "engine/quant.h"
#include "engine/safetensors.h"
#include "engine/tactics.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "engine/cuda/backend.h"
#include "engine/cuda/cubin.h"
#include "engine/sku.h"
#include "util/sha256.h"
#include "util/version.h"
#include "util/banned.h"

#define ENGINE_FORMAT "nimfactory-engine"
#define ENGINE_FORMAT_VERSION 1
#define CONFIG_MAX (1u << 20)

struct nf_engine {
	char *dir;
	char *config_json;
	nf_model_config cfg;
	nf_precision precision;
	int group;  /* int4: columns per group (config.json quantization.group_size) */
	nf_kv_kind kv_kind; /* config.json's "kv_cache", else nf_kv_kind_default */
	nf_st_file *st;
	/* The tensor data copied into anonymous 2 MiB pages (NULL: used in
	 * place in the file mapping): bytes [wlo, wlo + wlen) of the mapping
	 * live at wcopy.  Decode streams every weight once per token, and with
	 * 4 KiB pages the page-table walks cost ~10% of the bandwidth. */
	void *wmap;
	size_t wmap_len;
	const char *wlo;
	char *wcopy;
	nf_tokenizer *tok;
	nf_fwd_weights w;
	nf_fwd *fwd;
	nf_fwd_kv **kv; /* (kv_cap) scratch for a step's sequence caches */
	size_t kv_cap;
	/* Freed sequences kept for reuse (nf_engine_keep_sequences): a server
	 * would otherwise map a fresh KV cache for every request, fault its
	 * pages in during decode steps (a few hundred per sequence every 16
	 * positions, head-major) and unmap it at the end, each a stall of the
	 * whole batch.  A reused cache needs no clearing: a step writes the
	 * rows of its positions before any token attends to them. */
	pthread_mutex_t spare_mu;
	nf_seq **spare;
	size_t n_spare, spare_cap;
	/* The CUDA device the steps run on (nf_engine_use_gpu; NULL: the CPU):
	 * each sequence holds one of its KV-cache slots (slot_used, under
	 * spare_mu); gpu_logits is a step's decode rows before they are put
	 * in the caller's order. */
	nf_cuda_driver *gpu_driver;
	nf_cuda_backend *gpu;
	unsigned char *slot_used;
	int gpu_slots;
	float *gpu_logits;
};

struct nf_seq {
	nf_engine *e;
	nf_fwd_kv kv;
	int slot; /* the device KV-cache slot (nf_engine_use_gpu), -1 on the CPU */
	/* the tokens consumed at positions [0, n_hist): the cache rows that
	 * are valid, so a later prompt with the same prefix can start after it */
	int *hist;
	size_t n_hist;
};

/* ---- the tensors of an engine ---- */

/* ---- build ---- */

/* The model's config.  The keys a plain Llama does not need are written
 * only when set, so its engine stays byte-identical to older builds. */
static json_t *config_model_json(const nf_model_config *c)
{
	const nf_rope_scaling *r = &c->rope_scaling;
	json_t *mo = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:b}",
			       "architecture", nf_arch_get(c->arch)->name, "dim", c->dim,
			       "hidden_dim", c->hidden_dim, "n_layers", c->n_layers, "n_heads",
			       c->n_heads, "n_kv_heads", c->n_kv_heads, "vocab_size", c->vocab_size,
			       "max_seq_len", c->max_seq_len, "norm_eps", (double)c->norm_eps,
			       "rope_theta", (double)c->rope_theta, "shared_classifier",
			       c->shared_classifier);
	int err = !mo;
	if (!err && c->attention_bias)
		err = json_object_set_new(mo, "attention_bias", json_true());
	if (!err && r->type == NF_ROPE_LLAMA3)
		err = json_object_set_new(mo, "rope_scaling",
					  json_pack("{s:s, s:f, s:f, s:f, s:i}", "rope_type", "llama3",
						    "factor", (double)r->factor, "low_freq_factor",
						    (double)r->low_freq_factor, "high_freq_factor",
						    (double)r->high_freq_factor,
						    "original_max_position_embeddings",
						    (int)r->original_max_pos));
	if (!err && c->sliding_window)
		err = json_object_set_new(mo, "sliding_window", json_integer(c->sliding_window));
	if (err) {
		json_decref(mo);
		return NULL;
	}
	return mo;
}

/* Check an optional caller JSON object; "null" when absent. */
static int check_json_object(const char *text, const char *what)
{
	json_error_t je;
	json_t *j;
	if (!text)
		return 0;
	j = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	if (!j || !json_is_object(j)) {
		json_decref(j);
		return nf_error_set(NF_EINPUT, "engine build: %s is not a JSON object (%s)", what,
				    j ? "not an object" : je.text);
	}
	json_decref(j);
	return 0;
}

static int write_config(const char *dir, const nf_model_config *cfg,
			const nf_engine_build_opts *o, json_t *files)
{
	json_t *root = NULL;
	char *body = NULL, *text = NULL, *path = NULL;
	int err = 0;
	json_t *quant = nf_engine_weights_describe(o->precision,
						   nf_precision_group(o->precision, o->group));
	root = json_pack("{s:s, s:i, s:{s:s, s:s}, s:o, s:s, s:o, s:s, s:O}",
			 "format", ENGINE_FORMAT, "format_version", ENGINE_FORMAT_VERSION, "tool",
			 "name", "nimfactory", "version", NF_VERSION, "model", config_model_json(cfg),
			 "precision", nf_precision_name(o->precision), "quantization", quant,
			 "weight_layout", "row-major (out, in), layers stacked, 64-byte aligned",
			 "files", files);
	if (!root || (o->kv_cache && json_object_set_new(root, "kv_cache", json_string(o->kv_cache)))) {
		err = nf_error_set(NF_ENOMEM, "engine build: cannot make config.json");
		goto done;
	}
	body = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
	if (!body) {
		err = nf_error_set(NF_ENOMEM, "engine build: out of memory");
		goto done;
	}
	/* splice the caller's profile and provenance in verbatim before the final brace */
	size_t len = strlen(body);
	while (len > 0 && body[len - 1] != '}')
		len--;
	if (len == 0) {
		err = nf_error_set(NF_EINTERNAL, "engine build: bad config.json text");
		goto done;
	}
	body[len - 1] = '\0';
	while (len > 1 && (body[len - 2] == '\n' || body[len - 2] == ' '))
		body[--len - 1] = '\0';
	text = nf_strdup_printf("%s,\n  \"profile\": %s,\n  \"provenance\": %s\n}\n", body,
				o->profile_json ? o->profile_json : "null",
				o->provenance_json ? o->provenance_json : "null");
	path = nf_path_join(dir, "config.json");
	if (!text || !path) {
		err = nf_error_set(NF_ENOMEM, "engine build: out of memory");
		goto done;
	}
	err = nf_fs_write_atomic(path, text, strlen(text), 0644);
done:
	json_decref(root);
	free(body);
	free(text);
	free(path);
	return err;
}

static const void *same_place(const void *ctx, const void *p)
{
	(void)ctx;
	return p;
}

/* The weights just written, mapped and bound as the forward pass's views
 * (the tactics time the GEMMs on them). */
static int map_written(nf_fwd_weights *fw, nf_st_file **st, const char *wpath,
		       const nf_model_config *cfg, const nf_engine_build_opts *o)
{
	int err = nf_st_open(st, wpath);
	if (err)
		return err;
	if (!(fw->layers = calloc((size_t)cfg->n_layers, sizeof *fw->layers)))
		return nf_error_set(NF_ENOMEM, "engine build: out of memory");
	err = nf_engine_weights_map(fw, cfg, *st, o->precision,
				    nf_precision_group(o->precision, o->group), wpath, same_place,
				    NULL);
	return err ? err : nf_fwd_weights_prepare(fw, cfg);
}

/* weights.safetensors: matrices in the engine's precision and what they
 * keep beside them, written a layer at a time from r; its entry in files. */
static int write_weights(json_t *files, const char *wpath, nf_ckpt_reader *r,
			 const nf_engine_build_opts *o)
{
	nf_st_writer *wr = NULL;
	char wsha[NF_SHA256_HEX_LEN + 1];
	uint64_t wbytes = 0;
	int err;
	if (!(err = nf_st_writer_new(&wr)) &&
	    !(err = nf_st_writer_set_metadata(wr, "format", ENGINE_FORMAT)) &&
	    !(err = nf_st_writer_set_metadata(wr, "precision", nf_precision_name(o->precision))))
		err = nf_engine_weights_write(wr, wpath, r, o);
	nf_st_writer_free(wr);
	if (err || (err = nf_sha256_file_hex(wsha, wpath)) || (err = nf_fs_file_size(&wbytes, wpath)))
		return err;
	if (json_object_set_new(files, "weights.safetensors",
				json_pack("{s:s, s:I}", "sha256", wsha, "bytes", (json_int_t)wbytes)))
		return nf_error_set(NF_ENOMEM, "engine build: out of memory");
	return 0;
}

static int check_build_opts(const nf_model_config *cfg, const nf_engine_build_opts *o)
{
	nf_kv_kind kv;
	int err;
	if ((err = nf_model_config_validate(cfg, "engine build")))
		return err;
	if (!nf_precision_cpu_supported(o->precision))
		return nf_error_set(NF_EUNSUPPORTED,
				    "engine build: precision %s is not supported by the CPU backend",
				    nf_precision_name(o->precision));
	if (o->kv_cache && (err = nf_kv_kind_parse(&kv, o->kv_cache)))
		return nf_error_wrap(err, "engine build");
	if ((err = check_json_object(o->profile_json, "profile")) ||
	    (err = check_json_object(o->provenance_json, "provenance")))
		return err;
	return 0;
}

static int build_from(const char *dir, nf_ckpt_reader *r, const nf_engine_build_opts *o)
{
	const nf_model_config *cfg = &r->cfg;
	char *wpath = NULL, *tacpath = NULL;
	json_t *files = NULL;
	nf_fwd_weights fw = {0};
	nf_st_file *st = NULL;
	int err;

	if ((err = check_build_opts(cfg, o)))
		return err;
	if ((err = nf_fs_mkdir_p(dir, 0755)))
		goto done;
	wpath = nf_path_join(dir, "weights.safetensors");
	tacpath = nf_path_join(dir, "tactics.json");
	files = json_object();
	if (!wpath || !tacpath || !files) {
		err = nf_error_set(NF_ENOMEM, "engine build: out of memory");
		goto done;
	}
	if ((err = write_weights(files, wpath, r, o)) ||
	    (err = nf_engine_tokenizer_write(files, dir, o, cfg->vocab_size)) ||
	    (err = map_written(&fw, &st, wpath, cfg, o)) ||
	    (err = nf_tactics_write(tacpath, &fw, cfg, o->autotune && !o->tactics_report,
				    o->threads)))
		goto done;
	/* Measured timings are of this host and vary run to run: with a report
	 * path they go there, and the engine keeps the reproducible model. */
	if (o->autotune && o->tactics_report &&
	    (err = nf_tactics_write(o->tactics_report, &fw, cfg, 1, o->threads)))
		goto done;
	/* config.json last: a folder with it is complete */
	err = write_config(dir, cfg, o, files);
done:
	if (err)
		nf_error_wrap(err, "engine build %s", dir);
	nf_fwd_weights_release(&fw);
	nf_st_close(st);
	json_decref(files);
	free(wpath);
	free(tacpath);
	return err;
}

int nf_engine_build(const char *dir, const nf_model *m, const nf_engine_build_opts *o)
{
	nf_ckpt_reader *r;
	int err = nf_ckpt_reader_of_model(&r, m);
	if (!err)
		err = build_from(dir, r, o);
	nf_ckpt_close(r);
	return err;
}

int nf_engine_build_stream(const char *dir, const char *checkpoint, nf_ckpt_format format,
			   const nf_engine_build_opts *o)
{
	nf_ckpt_reader *r;
	int err = nf_ckpt_open(&r, checkpoint, format);
	if (!err)
		err = build_from(dir, r, o);
	nf_ckpt_close(r);
	return err;
}

/* ---- open ---- */

static int get_int(int32_t *out, json_t *obj, const char *key, const char *path)
{
	json_t *v = json_object_get(obj, key);
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > (json_int_t)NF_MODEL_MAX_HIDDEN * 4)
		return nf_error_set(NF_EINPUT, "%s: model.%s must be a positive integer", path, key);
	*out = (int32_t)json_integer_value(v);
	return 0;
}

/* The int4 group of an int4 engine (quantization.group_size: 32, 64 or
 * 128); 0 for every other precision. */
static int parse_group(nf_engine *e, json_t *quant, const char *path)
{
	json_t *g = json_object_get(quant, "group_size");
	e->group = 0;
	if (nf_precision_info_of(e->precision)->weights != NF_QUANT_INT4_GROUP)
		return 0;
	if (!json_is_integer(g) || (json_integer_value(g) != 32 && json_integer_value(g) != 64 &&
				    json_integer_value(g) != 128))
		return nf_error_set(NF_EINPUT,
				    "%s: quantization.group_size must be 32, 64 or 128 for %s", path,
				    nf_precision_name(e->precision));
	e->group = (int)json_integer_value(g);
	return 0;
}

/* What engines since the architecture tables record: the architecture
 * (older engines: always llama), its biases, rope scaling and window. */
static int parse_arch_fields(nf_model_config *c, json_t *mo, const char *path)
{
	json_t *arch = json_object_get(mo, "architecture"), *bias = json_object_get(mo, "attention_bias");
	json_t *rs = json_object_get(mo, "rope_scaling"), *win = json_object_get(mo, "sliding_window");
	const nf_arch *a = arch ? nf_arch_by_name(json_string_value(arch)) : nf_arch_get(NF_ARCH_LLAMA);
	nf_rope_scaling *r = &c->rope_scaling;
	const char *type = NULL;
	double f, lo, hi;
	json_int_t orig, w = json_integer_value(win); /* 0 when absent */
	if (!a)
		return nf_error_set(NF_EINPUT, "%s: model.architecture is not one of llama, mistral, "
				    "qwen2", path);
	c->arch = a->id;
	if ((bias && !json_is_boolean(bias)) || (win && !json_is_integer(win)) || w < 0 ||
	    w > NF_MODEL_MAX_SEQ)
		return nf_error_set(NF_EINPUT, "%s: model.attention_bias must be a boolean and "
				    "model.sliding_window an integer in 0..%d", path, NF_MODEL_MAX_SEQ);
	c->attention_bias = json_is_true(bias);
	c->sliding_window = (int32_t)w;
	if (!rs)
		return 0;
	if (json_unpack_ex(rs, NULL, JSON_STRICT, "{s:s, s:F, s:F, s:F, s:I}", "rope_type", &type,
			   "factor", &f, "low_freq_factor", &lo, "high_freq_factor", &hi,
			   "original_max_position_embeddings", &orig) != 0 ||
	    strcmp(type, "llama3") != 0 || orig < 1 || orig > NF_MODEL_MAX_SEQ)
		return nf_error_set(NF_EINPUT, "%s: model.rope_scaling must be {rope_type \"llama3\", "
				    "factor, low_freq_factor, high_freq_factor, "
				    "original_max_position_embeddings}", path);
	*r = (nf_rope_scaling){NF_ROPE_LLAMA3, (float)f, (float)lo, (float)hi, (int32_t)orig};
	return 0;
}

/* config.json's optional "kv_cache" (absent: the precision's default). */
static int parse_kv_cache(nf_kv_kind *out, json_t *root, nf_precision p, const char *path)
{
	json_t *kv = json_object_get(root, "kv_cache");
	int err;
	*out = nf_kv_kind_default(p);
	if (!kv)
		return 0;
	if (!json_is_string(kv))
		return nf_error_set(NF_EINPUT, "%s: \"kv_cache\" is not a string", path);
	if ((err = nf_kv_kind_parse(out, json_string_value(kv))))
		return nf_error_wrap(err, "%s", path);
	return 0;
}

static int parse_config(nf_engine *e, const char *path)
{
	json_error_t je;
	json_t *root = json_loads(e->config_json, JSON_REJECT_DUPLICATES, &je), *mo;
	int err = 0;
	const char *fmt, *prec;
	if (!root)
		return nf_error_set(NF_EINPUT, "%s: line %d column %d: %s", path, je.line, je.column,
				    je.text);
	fmt = json_string_value(json_object_get(root, "format"));
	if (!fmt || strcmp(fmt, ENGINE_FORMAT) != 0 ||
	    json_integer_value(json_object_get(root, "format_version")) != ENGINE_FORMAT_VERSION) {
		err = nf_error_set(NF_EINPUT, "%s: not a %s config (version %d)", path, ENGINE_FORMAT,
				   ENGINE_FORMAT_VERSION);
		goto done;
	}
	mo = json_object_get(root, "model");
	if (!json_is_object(mo)) {
		err = nf_error_set(NF_EINPUT, "%s: \"model\" is missing", path);
		goto done;
	}
	nf_model_config *c = &e->cfg;
	if ((err = get_int(&c->dim, mo, "dim", path)) ||
	    (err = get_int(&c->hidden_dim, mo, "hidden_dim", path)) ||
	    (err = get_int(&c->n_layers, mo, "n_layers", path)) ||
	    (err = get_int(&c->n_heads, mo, "n_heads", path)) ||
	    (err = get_int(&c->n_kv_heads, mo, "n_kv_heads", path)) ||
	    (err = get_int(&c->vocab_size, mo, "vocab_size", path)) ||
	    (err = get_int(&c->max_seq_len, mo, "max_seq_len", path)))
		goto done;
	json_t *eps = json_object_get(mo, "norm_eps"), *theta = json_object_get(mo, "rope_theta");
	json_t *shared = json_object_get(mo, "shared_classifier");
	if (!json_is_number(eps) || !json_is_number(theta) || !json_is_boolean(shared)) {
		err = nf_error_set(NF_EINPUT,
				   "%s: model.norm_eps, rope_theta (numbers) and shared_classifier (bool) are required",
				   path);
		goto done;
	}
	c->norm_eps = (float)json_number_value(eps);
	c->rope_theta = (float)json_number_value(theta);
	c->shared_classifier = json_is_true(shared);
	if ((err = parse_arch_fields(c, mo, path)) || (err = nf_model_config_validate(c, path)))
		goto done;
	prec = json_string_value(json_object_get(root, "precision"));
	if ((err = nf_precision_parse(&e->precision, prec))) {
		nf_error_wrap(err, "%s", path);
		goto done;
	}
	if (!nf_precision_cpu_supported(e->precision)) {
		err = nf_error_set(NF_EUNSUPPORTED, "%s: precision %s is not supported on the CPU",
				   path, prec);
		goto done;
	}
	err = parse_group(e, json_object_get(root, "quantization"), path);
	if (!err)
		err = parse_kv_cache(&e->kv_kind, root, e->precision, path);
done:
	json_decref(root);
	return err;
}

/* Where tensor data p of the file mapping lives now. */
static const void *rebased(const nf_engine *e, const void *p)
{
	if (!e->wcopy)
		return p;
	return e->wcopy + ((const char *)p - e->wlo);
}

/* Copy every tensor's bytes into a 2 MiB-aligned anonymous mapping backed
 * by transparent huge pages (64-byte alignment kept), unless
 * NF_WEIGHTS_COPY=0.  Best effort: on failure the file mapping is used. */
static void copy_weights(nf_engine *e)
{
	const char *env = getenv("NF_WEIGHTS_COPY");
	const size_t huge = 2u << 20;
	const char *lo = NULL, *hi = NULL;
	if (env && env[0] == '0')
		return;
	for (size_t i = 0; i < nf_st_count(e->st); i++) {
		const nf_st_tensor *t = nf_st_at(e->st, i);
		const char *p = t->data;
		if (!t->nbytes)
			continue;
		if (!lo || p < lo)
			lo = p;
		if (!hi || p + t->nbytes > hi)
			hi = p + t->nbytes;
	}
	if (!lo)
		return;
	lo -= (uintptr_t)lo % 64;
	size_t len = (size_t)(hi - lo), maplen;
	if (!nf_size_add(&maplen, len, huge))
		return;
	void *m = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return;
	char *base = (char *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
	(void)madvise(base, len, MADV_HUGEPAGE); /* best effort */
#ifdef MADV_POPULATE_WRITE
	(void)madvise(base, len, MADV_POPULATE_WRITE);
#endif
	/* In 64 MiB steps: map the source in one call (instead of ~one fault per
	 * 64 KiB), copy, then drop the source pages from our RSS (they stay in
	 * the page cache), so the peak RSS is the copy plus one step. */
	const size_t step = 64u << 20;
	long pg = sysconf(_SC_PAGESIZE);
	for (size_t off = 0; off < len; off += step) {
		size_t n = len - off < step ? len - off : step;
		uintptr_t a = 0, b = 0;
		if (pg > 0) {
			a = ((uintptr_t)(lo + off) + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
			b = (uintptr_t)(lo + off + n) & ~((uintptr_t)pg - 1);
		}
#ifdef MADV_POPULATE_READ
		if (b > a)
			(void)madvise((void *)a, b - a, MADV_POPULATE_READ);
#endif
		memcpy(base + off, lo + off, n);
		if (b > a)
			(void)madvise((void *)a, b - a, MADV_DONTNEED);
	}
	e->wmap = m; /* writable until nf_engine_open has tiled it */
	e->wmap_len = maplen;
	e->wlo = lo;
	e->wcopy = base;
}

/* Below this size the largest matrix streams from the caches whatever its
 * layout, and a timing says nothing about memory: keep the tiles. */
#define LAYOUT_PROBE_MIN_BYTES ((size_t)16 << 20)

/* Whether this host decodes faster from 8-row tiles: the classifier (a
 * Llama's largest matrix) timed both ways.  Tiles win where the hardware
 * prefetchers follow eight row streams badly (the EPYC hosts), row-major
 * where they follow them well (the Xeon hosts): docs/benchmarks.md. */
static int want_tiles(const nf_engine *e, int threads)
{
	const nf_bk_matrix *m = &e->w.cls;
	size_t bytes = (size_t)m->rows * (size_t)m->cols * nf_bk_elem_size(m);
	if (bytes < LAYOUT_PROBE_MIN_BYTES)
		return 1;
	if (threads <= 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		threads = n > 0 ? (int)n : 1;
	}
	return nf_tactics_prefer_tiles(m, nf_cpu_best(), threads);
}

/* The SKU of the engine's profile (config.json's profile.device) when it
 * is a GPU of the device table, else NULL. */
static const nf_sku *profile_gpu(const nf_engine *e)
{
	json_t *root = json_loads(e->config_json, 0, NULL);
	const nf_sku *sku = nf_sku_find(
		json_string_value(json_object_get(json_object_get(root, "profile"), "device")));
	json_decref(root);
	return sku && sku->kind == NF_SKU_GPU ? sku : NULL;
}

/* Tile the copied weights for the kernels (engine/layout.h) when this host
 * reads tiles faster (NF_WEIGHTS_TILE=1: always, 0: never), then make the
 * copy read-only.  The file mapping (NF_WEIGHTS_COPY=0) stays row-major. */
static int tile_weights(nf_engine *e, int threads)
{
	const char *env = getenv("NF_WEIGHTS_TILE");
	int err = 0;
	if (!e->wmap)
		return 0;
	int tiles = env && (env[0] == '0' || env[0] == '1') ? env[0] == '1' : -1;
	/* a GPU profile's weights stay row-major unless forced: the device
	 * reads rows (nf_engine_use_gpu), the CPU is its fallback */
	if (tiles < 0)
		tiles = profile_gpu(e) ? 0 : want_tiles(e, threads);
	if (tiles)
		err = nf_fwd_weights_tile(&e->w, &e->cfg);
	(void)mprotect(e->wmap, e->wmap_len, PROT_READ);
	return err;
}

static const void *rebase_cb(const void *ctx, const void *p)
{
	return rebased(ctx, p);
}

static int map_weights(nf_engine *e, const char *path)
{
	e->w.layers = calloc((size_t)e->cfg.n_layers, sizeof *e->w.layers);
	if (!e->w.layers)
		return nf_error_set(NF_ENOMEM, "engine: out of memory");
	return nf_engine_weights_map(&e->w, &e->cfg, e->st, e->precision, e->group, path, rebase_cb,
				     e);
}

/* Every id the tokenizer gives must index the embedding. */
static int check_tokenizer(const nf_engine *e, const char *dir)
{
	if (nf_tokenizer_vocab_size(e->tok) > e->cfg.vocab_size)
		return nf_error_set(NF_EINPUT, "%s: the tokenizer has %d tokens, the model %d", dir,
				    nf_tokenizer_vocab_size(e->tok), e->cfg.vocab_size);
	return 0;
}

int nf_engine_open(nf_engine **out, const char *dir, int threads)
{
	nf_engine *e = NULL;
	char *cpath = NULL, *wpath = NULL, *tacpath = NULL;
	size_t len;
	int err = 0;
	*out = NULL;
	if ((e = calloc(1, sizeof *e)))
		pthread_mutex_init(&e->spare_mu, NULL);
	if (!e || !(e->dir = nf_path_join(dir, "")) ||
	    !(cpath = nf_path_join(dir, "config.json")) ||
	    !(wpath = nf_path_join(dir, "weights.safetensors")) ||
	    !(tacpath = nf_path_join(dir, "tactics.json"))) {
		err = nf_error_set(NF_ENOMEM, "engine: out of memory");
		goto done;
	}
	if ((err = nf_fs_read_file(&e->config_json, &len, cpath, CONFIG_MAX)) ||
	    (err = parse_config(e, cpath)) || (err = nf_st_open(&e->st, wpath)))
		goto done;
	copy_weights(e);
	if ((err = map_weights(e, wpath)) ||
	    (err = nf_tokenizer_load_dir(&e->tok, dir, e->cfg.vocab_size)) ||
	    (err = check_tokenizer(e, dir)) ||
	    (err = nf_fwd_weights_prepare(&e->w, &e->cfg)) || (err = tile_weights(e, threads)) ||
	    (err = nf_fwd_new(&e->fwd, &e->cfg, &e->w, nf_cpu_best(), threads)) ||
	    (err = nf_tactics_apply(e->fwd, tacpath)))
		goto done;
done:
	free(cpath);
	free(wpath);
	free(tacpath);
	if (err) {
		nf_engine_free(e);
		return err;
	}
	*out = e;
	return 0;
}

void nf_engine_free(nf_engine *e)
{
	if (!e)
		return;
	nf_engine_keep_sequences(e, 0);
	nf_cuda_backend_free(e->gpu);
	nf_cuda_driver_free(e->gpu_driver);
	free(e->slot_used);
	free(e->gpu_logits);
	free(e->spare);
	pthread_mutex_destroy(&e->spare_mu);
	nf_fwd_free(e->fwd);
	nf_fwd_weights_release(&e->w);
	nf_tokenizer_free(e->tok);
	if (e->wmap)
		munmap(e->wmap, e->wmap_len);
	nf_st_close(e->st);
	free(e->kv);
	free(e->config_json);
	free(e->dir);
	free(e);
}

int nf_engine_verify(const nf_engine *e)
{
	json_t *root = json_loads(e->config_json, 0, NULL);
	json_t *files = json_object_get(root, "files"), *v;
	const char *name;
	int err = json_is_object(files) && json_object_size(files) >= 2
			  ? 0
			  : nf_error_set(NF_EINPUT, "%s/config.json: no \"files\" to check", e->dir);
	json_object_foreach(files, name, v) {
		char hex[NF_SHA256_HEX_LEN + 1];
		const char *want = json_string_value(json_object_get(v, "sha256"));
		char *path;
		if (err)
			break;
		if (!want || !nf_engine_part_name_ok(name)) { /* plain names, and cuda/'s */
			err = nf_error_set(NF_EINPUT, "%s/config.json: bad entry for %s", e->dir, name);
			break;
		}
		if (!(path = nf_path_join(e->dir, name)))
			err = nf_error_set(NF_ENOMEM, "engine: out of memory");
		else if (!(err = nf_sha256_file_hex(hex, path)) && strcmp(hex, want) != 0)
			err = nf_error_set(NF_EINPUT, "%s: sha256 %s does not match config.json (%s)",
					   path, hex, want);
		free(path);
	}
	json_decref(root);
	return err;
}

const nf_model_config *nf_engine_config(const nf_engine *e) { return &e->cfg; }
nf_precision nf_engine_precision(const nf_engine *e) { return e->precision; }
const nf_tokenizer *nf_engine_tokenizer(const nf_engine *e) { return e->tok; }
const char *nf_engine_config_json(const nf_engine *e) { return e->config_json; }

const struct nf_fwd_weights *nf_engine_fwd_weights(const nf_engine *e) { return &e->w; }

uint64_t nf_engine_weight_bytes(const nf_engine *e)
{
	return nf_fwd_weights_bytes(&e->w, &e->cfg);
}

const char *nf_engine_kernel_name(const nf_engine *e)
{
	if (e->gpu)
		return "cuda";
	return nf_fwd_ops(e->fwd)->name;
}

int nf_engine_threads(const nf_engine *e)
{
	return nf_fwd_threads(e->fwd);
}

nf_kv_kind nf_kv_kind_default(nf_precision p)
{
	return p == NF_PREC_FP32 ? NF_KV_F32 : NF_KV_F16;
}

nf_kv_kind nf_engine_kv_cache(const nf_engine *e)
{
	return e->kv_kind;
}

int nf_engine_set_kv_cache(nf_engine *e, nf_kv_kind kind)
{
	if ((int)kind < 0 || kind >= NF_KV_KIND_COUNT)
		return nf_error_set(NF_EINPUT, "engine: KV cache kind %d out of range", (int)kind);
	pthread_mutex_lock(&e->spare_mu);
	size_t cap = e->spare_cap;
	e->kv_kind = kind;
	pthread_mutex_unlock(&e->spare_mu);
	/* the kept caches are of the old kind: drop them, keep the capacity */
	int err = nf_engine_keep_sequences(e, 0);
	return err ? err : nf_engine_keep_sequences(e, cap);
}

int nf_engine_cap_context(nf_engine *e, int max_context)
{
	if (e->gpu)
		return nf_error_set(NF_EINPUT, "engine: the context is capped before the GPU is chosen");
	if (max_context < 1 || max_context > e->cfg.max_seq_len)
		return nf_error_set(NF_EINPUT, "engine: a context of %d tokens (1 to the engine's %d)",
				    max_context, (int)e->cfg.max_seq_len);
	pthread_mutex_lock(&e->spare_mu);
	size_t cap = e->spare_cap;
	e->cfg.max_seq_len = max_context;
	pthread_mutex_unlock(&e->spare_mu);
	/* the kept sequences have caches of the old length */
	int err = nf_engine_keep_sequences(e, 0);
	return err ? err : nf_engine_keep_sequences(e, cap);
}

int nf_engine_set_kernel(nf_engine *e, const char *name)
{
	const nf_backend_ops *ops = nf_cpu_find(name);
	if (!ops)
		return nf_error_set(NF_EUNSUPPORTED, "kernel family '%s' does not exist or cannot run on this CPU",
				    name);
	nf_fwd_set_ops(e->fwd, ops);
	return 0;
}

/* ---- sequences and steps ---- */

static void seq_release(nf_seq *s)
{
	if (s->slot >= 0) {
		pthread_mutex_lock(&s->e->spare_mu);
		s->e->slot_used[s->slot] = 0;
		pthread_mutex_unlock(&s->e->spare_mu);
	}
	nf_fwd_kv_release(&s->kv);
	free(s->hist);
	free(s);
}

int nf_engine_keep_sequences(nf_engine *e, size_t n)
{
	nf_seq **keep = NULL, **drop = NULL;
	size_t n_drop = 0;
	int err = 0;
	pthread_mutex_lock(&e->spare_mu);
	if (n > e->spare_cap) {
		if (!(keep = realloc(e->spare, n * sizeof *keep))) {
			err = nf_error_set(NF_ENOMEM, "engine: out of memory");
		} else {
			e->spare = keep;
			e->spare_cap = n;
		}
	} else {
		/* the surplus is freed outside the lock */
		if (e->n_spare > n) {
			n_drop = e->n_spare - n;
			drop = e->spare + n;
			e->n_spare = n;
		}
		e->spare_cap = n;
	}
	pthread_mutex_unlock(&e->spare_mu);
	for (size_t i = 0; i < n_drop; i++)
		seq_release(drop[i]);
	return err;
}

size_t nf_seq_common_prefix(const nf_seq *s, const int *tokens, size_t n)
{
	size_t k = 0, max = n < s->n_hist ? n : s->n_hist;
	while (k < max && s->hist[k] == tokens[k])
		k++;
	return k;
}

size_t nf_seq_tokens(const nf_seq *s, const int **tokens)
{
	if (tokens)
		*tokens = s->hist;
	return s->n_hist;
}

/* A free device slot for s; NF_EENV when every one is taken. */
static int take_slot(nf_engine *e, nf_seq *s)
{
	pthread_mutex_lock(&e->spare_mu);
	for (int i = 0; i < e->gpu_slots && s->slot < 0; i++)
		if (!e->slot_used[i]) {
			e->slot_used[i] = 1;
			s->slot = i;
		}
	pthread_mutex_unlock(&e->spare_mu);
	if (s->slot < 0)
		return nf_error_set(NF_EENV, "engine: all %d sequences of the GPU are in use",
				    e->gpu_slots);
	return 0;
}

int nf_seq_new_prefixed(nf_seq **out, nf_engine *e, const int *tokens, size_t n, size_t *reused)
{
	nf_seq *s = NULL;
	size_t best = 0, at = 0;
	int err;
	*out = NULL;
	*reused = 0;
	pthread_mutex_lock(&e->spare_mu);
	if (e->n_spare > 0) {
		/* the longest shared prefix, short of the last token (its logits
		 * are wanted); without one the least recently kept (spare[0]),
		 * so the recent ones stay for the prompts that may follow */
		for (size_t i = 0; i < e->n_spare && n > 1; i++) {
			size_t c = nf_seq_common_prefix(e->spare[i], tokens, n - 1);
			if (c > best) {
				best = c;
				at = i;
			}
		}
		s = e->spare[at];
		memmove(e->spare + at, e->spare + at + 1, (e->n_spare - at - 1) * sizeof *e->spare);
		e->n_spare--;
	}
	pthread_mutex_unlock(&e->spare_mu);
	if (s) {
		s->n_hist = best;
		*reused = best;
		*out = s;
		return 0;
	}
	if (!(s = calloc(1, sizeof *s)) ||
	    !(s->hist = malloc((size_t)e->cfg.max_seq_len * sizeof *s->hist))) {
		free(s);
		return nf_error_set(NF_ENOMEM, "sequence: out of memory");
	}
	s->e = e;
	s->slot = -1;
	/* on a device the cache is the slot's: the host keeps none */
	if (e->gpu && (err = take_slot(e, s))) {
		free(s->hist);
		free(s);
		return err;
	}
	if (!e->gpu && (err = nf_fwd_kv_init(&s->kv, &e->cfg, e->kv_kind))) {
		free(s->hist);
		free(s);
		return err;
	}
	*out = s;
	return 0;
}

int nf_seq_new(nf_seq **out, nf_engine *e)
{
	size_t reused;
	return nf_seq_new_prefixed(out, e, NULL, 0, &reused);
}

int nf_seq_copy_prefix(nf_seq *dst, const nf_seq *src, size_t n)
{
	if (dst->e != src->e || dst->kv.kind != src->kv.kind)
		return nf_error_set(NF_EINPUT,
				    "sequence copy: the sequences belong to different engines or caches");
	if (n > src->n_hist)
		return nf_error_set(NF_EINPUT, "sequence copy: %zu positions asked, %zu consumed", n,
				    src->n_hist);
	if (dst == src)
		return 0;
	if (dst->e->gpu) {
		int err = nf_cuda_backend_copy_prefix(dst->e->gpu, dst->slot, src->slot, (int)n);
		if (err)
			return err;
	} else {
		nf_fwd_kv_copy_prefix(&dst->kv, &src->kv, &dst->e->cfg, n);
	}
	memcpy(dst->hist, src->hist, n * sizeof *dst->hist);
	dst->n_hist = n;
	return 0;
}

void nf_seq_free(nf_seq *s)
{
	nf_seq *drop = s;
	if (!s)
		return;
	nf_engine *e = s->e;
	pthread_mutex_lock(&e->spare_mu);
	if (e->spare_cap > 0) {
		/* full: the least recently kept one makes room */
		if (e->n_spare == e->spare_cap) {
			drop = e->spare[0];
			memmove(e->spare, e->spare + 1, (e->n_spare - 1) * sizeof *e->spare);
			e->n_spare--;
		} else {
			drop = NULL;
		}
		e->spare[e->n_spare++] = s;
	}
	pthread_mutex_unlock(&e->spare_mu);
	if (drop)
		seq_release(drop);
}

/* Before a step feeds seqs[i] positions pos0 .. pos0 + n - 1: rows from
 * pos0 on are about to change (and a position past the consumed ones
 * leaves the history unknown). */
static void hist_truncate(nf_seq *s, int pos0)
{
	if ((size_t)pos0 > s->n_hist)
		s->n_hist = 0;
	else
		s->n_hist = (size_t)pos0;
}

/* After the step: those positions hold these tokens. */
static void hist_extend(nf_seq *s, const int *tokens, int pos0, int n)
{
	if ((size_t)pos0 != s->n_hist)
		return; /* a gap: unknown stays unknown */
	memcpy(s->hist + pos0, tokens, (size_t)n * sizeof *tokens);
	s->n_hist = (size_t)pos0 + (size_t)n;
}

/* Room for n sequence caches in e->kv. */
static int kv_reserve(nf_engine *e, size_t n, const char *what)
{
	if (n <= e->kv_cap)
		return 0;
	nf_fwd_kv **kv = realloc(e->kv, n * sizeof *kv);
	if (!kv)
		return nf_error_set(NF_ENOMEM, "%s: out of memory", what);
	e->kv = kv;
	e->kv_cap = n;
	return 0;
}

/* Sequence i of a step: it belongs to e and is not among seqs[0, i). */
static int check_seq(nf_engine *e, nf_seq *const *seqs, size_t i, const char *what)
{
	if (!seqs[i] || seqs[i]->e != e)
		return nf_error_set(NF_EINPUT, "%s: sequence %zu belongs to another engine", what, i);
	for (size_t j = 0; j < i; j++)
		if (seqs[j] == seqs[i])
			return nf_error_set(NF_EINPUT, "%s: sequence %zu appears twice", what, i);
	return 0;
}

/* ---- steps on the GPU (nf_engine_use_gpu) ---- */

/* One decode token of each of n sequences (n <= the device's slots, since
 * each sequence holds one). */
static int gpu_decode(nf_engine *e, nf_seq *const *seqs, const int *tokens, const int *pos,
		      size_t n, float *logits)
{
	int slots[NF_CUDA_MAX_BATCH];
	if (n > NF_CUDA_MAX_BATCH)
		return nf_error_set(NF_EINPUT, "engine step: %zu sequences on the GPU", n);
	for (size_t i = 0; i < n; i++)
		slots[i] = seqs[i]->slot;
	return nf_cuda_backend_decode(e->gpu, slots, tokens, pos, (int)n, logits, NULL);
}

/* A ragged step: the single tokens in one decode, each longer run a
 * prefill with the logits of its last n_rows[i] tokens (1 when NULL),
 * sequence i's rows after those of the sequences before it. */
static int gpu_ragged(nf_engine *e, nf_seq *const *seqs, const int *tokens, const int *n_tokens,
		      const int *pos0, const int *n_rows, size_t n_seqs, float *logits)
{
	size_t vocab = (size_t)e->cfg.vocab_size, n = 0, at = 0, row = 0;
	int slots[NF_CUDA_MAX_BATCH], dtok[NF_CUDA_MAX_BATCH], dpos[NF_CUDA_MAX_BATCH];
	int err = 0;
	if (n_seqs > NF_CUDA_MAX_BATCH)
		return nf_error_set(NF_EINPUT, "engine ragged step: %zu sequences on the GPU", n_seqs);
	for (size_t i = 0; i < n_seqs && !err; at += (size_t)n_tokens[i], i++) {
		int rows = n_rows ? n_rows[i] : 1;
		if (n_tokens[i] > 1)
			err = nf_cuda_backend_prefill_rows(e->gpu, seqs[i]->slot, tokens + at, n_tokens[i],
							   pos0[i], logits ? rows : 0,
							   logits ? logits + row * vocab : NULL);
		else {
			slots[n] = seqs[i]->slot;
			dtok[n] = tokens[at];
			dpos[n++] = pos0[i];
		}
		row += (size_t)rows;
	}
	if (err || n == 0)
		return err;
	if ((err = nf_cuda_backend_decode(e->gpu, slots, dtok, dpos, (int)n,
					  logits ? e->gpu_logits : NULL, NULL)) || !logits)
		return err;
	/* the decode rows back in the order of the sequences */
	row = 0;
	for (size_t i = 0, k = 0; i < n_seqs; row += n_rows ? (size_t)n_rows[i] : 1, i++)
		if (n_tokens[i] == 1)
			memcpy(logits + row * vocab, e->gpu_logits + k++ * vocab, vocab * sizeof *logits);
	return 0;
}

const nf_sku *nf_engine_gpu_sku(const nf_engine *e)
{
	json_t *root = json_loads(e->config_json ? e->config_json : "{}", 0, NULL);
	const char *device = json_string_value(json_object_get(json_object_get(root, "profile"), "device"));
	const nf_sku *sku = device ? nf_sku_find(device) : NULL;
	json_decref(root);
	return sku && sku->kind == NF_SKU_GPU ? sku : NULL;
}

int nf_engine_use_gpu(nf_engine *e, int max_batch)
{
	const nf_sku *sku = profile_gpu(e);
	nf_cuda_backend_opts o = {0};
	nf_cuda_device dev;
	int exact = 0, err;

	if (!sku)
		return nf_error_set(NF_EINPUT, "engine: its profile is for no GPU of the device table");
	if (e->gpu || e->n_spare)
		return nf_error_set(NF_EINPUT, "engine: the GPU is chosen before any sequence");
	if (max_batch < 1 || max_batch > NF_CUDA_MAX_BATCH)
		return nf_error_set(NF_EINPUT, "engine: %d sequences on the GPU (1..%d)", max_batch,
				    NF_CUDA_MAX_BATCH);
	o.ordinal = 0;
	o.engine_dir = e->dir;
	o.arch = sku->cuda_arch;
	o.max_batch = max_batch;
	o.kv = e->kv_kind;
	if ((err = nf_cuda_find_device(&dev, &exact, sku)) ||
	    (err = nf_cuda_driver_open(&e->gpu_driver)))
		goto done;
	o.ordinal = dev.ordinal;
	if (!(e->slot_used = calloc((size_t)max_batch, 1)) ||
	    !(e->gpu_logits = calloc((size_t)max_batch * (size_t)e->cfg.vocab_size, sizeof(float)))) {
		err = nf_error_set(NF_ENOMEM, "engine: out of memory");
		goto done;
	}
	err = nf_cuda_backend_new(&e->gpu, e->gpu_driver, &e->cfg, &e->w, &o);
done:
	if (err) {
		nf_cuda_driver_free(e->gpu_driver);
		free(e->slot_used);
		free(e->gpu_logits);
		e->gpu_driver = NULL;
		e->slot_used = NULL;
		e->gpu_logits = NULL;
		return err;
	}
	e->gpu_slots = max_batch;
	return 0;
}

int nf_engine_step(nf_engine *e, nf_seq *const *seqs, const int *tokens, const int *pos,
		   size_t n, float *logits)
{
	int err;
	if (n == 0)
		return 0;
	if ((err = kv_reserve(e, n, "engine step")))
		return err;
	for (size_t i = 0; i < n; i++) {
		if ((err = check_seq(e, seqs, i, "engine step")))
			return err;
		if (tokens[i] < 0 || tokens[i] >= e->cfg.vocab_size)
			return nf_error_set(NF_EINPUT, "engine step: token %d out of range (vocab %d)",
					    tokens[i], (int)e->cfg.vocab_size);
		if (pos[i] < 0 || pos[i] >= e->cfg.max_seq_len)
			return nf_error_set(NF_EINPUT,
					    "engine step: position %d out of range (max_seq_len %d)",
					    pos[i], (int)e->cfg.max_seq_len);
		e->kv[i] = &seqs[i]->kv;
	}
	for (size_t i = 0; i < n; i++)
		hist_truncate(seqs[i], pos[i]);
	if (e->gpu)
		err = gpu_decode(e, seqs, tokens, pos, n, logits);
	else
		err = nf_fwd_step(e->fwd, e->kv, tokens, pos, n, logits);
	if (err)
		return err;
	for (size_t i = 0; i < n; i++)
		hist_extend(seqs[i], tokens + i, pos[i], 1);
	return 0;
}

int nf_engine_step_ragged(nf_engine *e, nf_seq *const *seqs, const int *tokens,
			  const int *n_tokens, const int *pos0, size_t n_seqs, float *logits)
{
	return nf_engine_step_ragged_rows(e, seqs, tokens, n_tokens, pos0, NULL, n_seqs, logits);
}

int nf_engine_step_ragged_rows(nf_engine *e, nf_seq *const *seqs, const int *tokens,
			       const int *n_tokens, const int *pos0, const int *n_rows,
			       size_t n_seqs, float *logits)
{
	const char *what = "engine ragged step";
	size_t at = 0;
	int err;
	if (n_seqs == 0)
		return 0;
	if ((err = kv_reserve(e, n_seqs, what)))
		return err;
	for (size_t i = 0; i < n_seqs; i++) {
		if ((err = check_seq(e, seqs, i, what)))
			return err;
		if (n_tokens[i] <= 0)
			return nf_error_set(NF_EINPUT, "%s: sequence %zu has %d tokens (at least 1)",
					    what, i, n_tokens[i]);
		if (n_rows && (n_rows[i] < 1 || n_rows[i] > n_tokens[i]))
			return nf_error_set(NF_EINPUT, "%s: sequence %zu: %d rows of logits for %d "
					    "tokens", what, i, n_rows[i], n_tokens[i]);
		/* in 64 bits: pos0 + n cannot overflow */
		if (pos0[i] < 0 || (int64_t)pos0[i] + n_tokens[i] > (int64_t)e->cfg.max_seq_len)
			return nf_error_set(NF_EINPUT,
					    "%s: sequence %zu: positions %d..%lld out of range (max_seq_len %d)",
					    what, i, pos0[i], (long long)pos0[i] + n_tokens[i] - 1,
					    (int)e->cfg.max_seq_len);
		for (int k = 0; k < n_tokens[i]; k++, at++)
			if (tokens[at] < 0 || tokens[at] >= e->cfg.vocab_size)
				return nf_error_set(NF_EINPUT,
						    "%s: sequence %zu: token %d out of range (vocab %d)",
						    what, i, tokens[at], (int)e->cfg.vocab_size);
		e->kv[i] = &seqs[i]->kv;
	}
	for (size_t i = 0; i < n_seqs; i++)
		hist_truncate(seqs[i], pos0[i]);
	if (e->gpu)
		err = gpu_ragged(e, seqs, tokens, n_tokens, pos0, n_rows, n_seqs, logits);
	else
		err = nf_fwd_step_ragged_rows(e->fwd, e->kv, tokens, n_tokens, pos0, n_rows, n_seqs,
					      logits);
	if (err)
		return err;
	at = 0;
	for (size_t i = 0; i < n_seqs; i++) {
		hist_extend(seqs[i], tokens + at, pos0[i], n_tokens[i]);
		at += (size_t)n_tokens[i];
	}
	return 0;
}

int nf_engine_prefill(nf_engine *e, nf_seq *s, const int *tokens, size_t n, int pos0,
		      float *logits_last)
{
	if (n == 0 || n > (size_t)e->cfg.max_seq_len)
		return nf_error_set(NF_EINPUT, "engine prefill: %zu tokens (1 to max_seq_len %d)", n,
				    (int)e->cfg.max_seq_len);
	int nt = (int)n;
	return nf_engine_step_ragged(e, &s, tokens, &nt, &pos0, 1, logits_last);
}

int nf_engine_prefill_logits(nf_engine *e, nf_seq *s, const int *tokens, size_t n, int pos0,
			     float *logits)
{
	const char *what = "engine prefill with logits";
	int err;
	if (n == 0 || pos0 < 0 || (uint64_t)pos0 + n > (uint64_t)e->cfg.max_seq_len)
		return nf_error_set(NF_EINPUT, "%s: %zu tokens at position %d (max_seq_len %d)", what,
				    n, pos0, (int)e->cfg.max_seq_len);
	if ((err = check_seq(e, &s, 0, what)))
		return err;
	for (size_t i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= e->cfg.vocab_size)
			return nf_error_set(NF_EINPUT, "%s: token %d out of range (vocab %d)", what,
					    tokens[i], (int)e->cfg.vocab_size);
	hist_truncate(s, pos0);
	if (e->gpu)
		err = nf_cuda_backend_prefill_rows(e->gpu, s->slot, tokens, (int)n, pos0, (int)n, logits);
	else
		err = nf_fwd_prefill_logits(e->fwd, &s->kv, tokens, n, pos0, logits);
	if (err)
		return err;
	hist_extend(s, tokens, pos0, (int)n);
	return 0;
}
