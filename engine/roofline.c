/*
 * roofline.c - the roofline cost model of a GPU decode step (see roofline.h).
 */
#include "engine/roofline.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/arch.h"
#include "engine/cuda/cublaslt.h"
#include "engine/wformat.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

const int nf_roofline_batches[NF_ROOFLINE_BUCKETS] = {1, 2, 4, 8, 16, 32, 64};

/* Kernels a layer launches besides its GEMVs: two RMSNorms, RoPE, the KV
 * append, attention, SwiGLU and two residual adds. */
#define LAYER_SMALL_KERNELS 8
/* After the layers: the final RMSNorm and the argmax (the classifier is a GEMV). */
#define TAIL_SMALL_KERNELS 2

/* One GEMV shape of the model and how many a step runs. */
typedef struct shape {
	uint64_t rows, cols;
	int count;
	double bytes; /* of one matrix, in the precision's format */
} shape;

static double matrix_bytes(const nf_wformat *f, uint64_t rows, uint64_t cols, int group)
{
	double data = (double)nf_wformat_data_bytes(f, rows, cols);
	double aux = (double)rows * (double)nf_wformat_aux_cols(f, cols, group) *
		     (double)nf_wformat_aux_size(f);
	return data + aux;
}

/* The matrices of the architecture's table, grouped by shape: the layers'
 * (each n_layers times) and the classifier (the embedding when tied). */
static int collect_shapes(shape *out, const nf_model_config *cfg, nf_precision p)
{
	const nf_arch *a = nf_arch_get(cfg->arch);
	const nf_wformat *f = nf_wformat_of(nf_precision_info_of(p)->weights);
	int group = nf_precision_group(p, 0), n = 0, has_cls = 0;

	for (size_t i = 0; a && i < a->n_tensors; i++) {
		const nf_arch_tensor *t = &a->tensors[i];
		uint64_t rows, cols;
		int k;
		if (!t->matrix || t->id == NF_T_EMB || !nf_arch_present(t, cfg))
			continue;
		has_cls |= t->id == NF_T_WCLS;
		rows = nf_arch_dim_value(t->rows, cfg);
		cols = nf_arch_dim_value(t->cols, cfg);
		for (k = 0; k < n && (out[k].rows != rows || out[k].cols != cols); k++)
			;
		if (k == n) {
			if (n == NF_ROOFLINE_MAX_SHAPES)
				return nf_error_set(NF_EINTERNAL, "roofline: more than %d GEMV shapes",
						    NF_ROOFLINE_MAX_SHAPES);
			out[n++] = (shape){rows, cols, 0, matrix_bytes(f, rows, cols, group)};
		}
		out[k].count += t->per_layer ? cfg->n_layers : 1;
	}
	if (!has_cls) {
		/* tied: the classifier GEMV runs over the embedding, (vocab, dim) */
		uint64_t rows = (uint64_t)cfg->vocab_size, cols = (uint64_t)cfg->dim;
		if (n == NF_ROOFLINE_MAX_SHAPES)
			return nf_error_set(NF_EINTERNAL, "roofline: too many GEMV shapes");
		out[n++] = (shape){rows, cols, 1, matrix_bytes(f, rows, cols, group)};
	}
	return n;
}

/* One kernel under the roofline: max of its two limits, derated, plus its launch. */
static double kernel_seconds(double bytes, double flops, double bw, double peak, double occ,
			     int *compute_bound)
{
	double t_mem = bytes / bw, t_math = peak > 0 ? flops / peak : 0;
	if (t_math > t_mem)
		*compute_bound = 1;
	return (t_math > t_mem ? t_math : t_mem) / occ + NF_ROOFLINE_LAUNCH_S;
}

static void model_bucket(nf_roofline_bucket *b, const shape *shapes, int n_shapes,
			 const nf_model_config *cfg, nf_kv_kind kv, const nf_roofline *r)
{
	double bw = r->sku->mem_bw_gbs * 1e9, peak = nf_sku_peak_flops(r->sku, r->precision);
	int head = cfg->dim / cfg->n_heads;
	/* K and V rows of every KV head up to the context, per sequence and layer */
	double kv_bytes = 2.0 * r->context * cfg->n_kv_heads * (double)nf_kv_row_bytes(kv, (size_t)head);
	double attn_flops = 4.0 * r->context * cfg->dim;

	b->step_seconds = b->bytes = b->flops = 0;
	b->compute_bound = 0;
	for (int i = 0; i < n_shapes; i++) {
		double flops = 2.0 * (double)shapes[i].rows * (double)shapes[i].cols * b->batch;
		b->step_seconds += shapes[i].count * kernel_seconds(shapes[i].bytes, flops, bw, peak,
								    r->occupancy, &b->compute_bound);
		b->bytes += shapes[i].count * shapes[i].bytes;
		b->flops += shapes[i].count * flops;
	}
	/* attention reads each sequence's cache; its math runs on the fp16 units */
	b->step_seconds += cfg->n_layers * kernel_seconds(kv_bytes * b->batch, attn_flops * b->batch, bw,
							  r->sku->fp16_tflops * 1e12, r->occupancy,
							  &b->compute_bound);
	b->bytes += cfg->n_layers * kv_bytes * b->batch;
	b->flops += cfg->n_layers * attn_flops * b->batch;
	b->step_seconds += (cfg->n_layers * (LAYER_SMALL_KERNELS - 1) + TAIL_SMALL_KERNELS) *
			   NF_ROOFLINE_LAUNCH_S;
	b->tokens_per_s = b->batch / b->step_seconds;
	b->hbm_fraction = (b->bytes / bw) / b->step_seconds;
}

/* ---- tactics: the kernels' variants (launch.h's nf_cu_variant) ---- */

/* Warps an SM needs in flight to keep its share of HBM busy (enough loads
 * outstanding to cover the memory latency), and the most it holds. */
#define WARPS_TO_SATURATE 16
#define WARPS_PER_SM 64
/* Bytes a warp's lanes read in one step of a GEMV row (16 a lane). */
#define WARP_STRIDE_BYTES (NF_CU_WARP * 16)
/* Memory and math overlap imperfectly: this share of the smaller limit adds
 * to the larger (so a tile that computes padding costs something even when
 * memory-bound). */
#define OVERLAP_LOSS 0.05
/* Each wave of blocks ramps up and drains (its blocks start, their last
 * loads land): a cost per wave, which keeps a grid from being cut finer
 * than the SMs need. */
#define WAVE_S 1e-6

static double waves_of(int sm_count, double blocks, int warps)
{
	double waves = blocks / ((double)sm_count * (WARPS_PER_SM / warps));
	double whole = (double)(long)waves;
	return whole + (waves > whole ? 1 : 0);
}

/* A grid of `blocks` blocks of `warps` warps, each warp busy `busy` of its
 * lanes, reaches the bandwidth in proportion to the SMs' warps it fills,
 * and loses the idle part of its last wave. */
static double grid_efficiency(int sm_count, double blocks, int warps, double busy)
{
	double per_wave = (double)sm_count * (WARPS_PER_SM / warps);
	double waves = blocks / per_wave, full = (double)(long)waves;
	double fill = blocks * warps * busy / ((double)sm_count * WARPS_TO_SATURATE);
	double tail = waves <= 1 ? 1 : waves / (full + (waves > full ? 1 : 0));
	return (fill < 1 ? fill : 1) * tail;
}

double nf_roofline_variant_seconds(nf_cu_variant v, const nf_roofline_gpu *g, int rows, int cols,
				   double bytes, int n)
{
	nf_cu_variant_shape vs = nf_cu_variant_of(v);
	double row_bytes = bytes / rows, busy = 1, blocks, reads = 1, tokens = n;
	int gemm = v == NF_CU_VAR_GEMM || v == NF_CU_VAR_GEMM_N16;
	if (gemm) {
		/* each tile of tokens decodes the weights again, and computes its padding */
		double tiles = (double)((n + vs.tile_tokens - 1) / vs.tile_tokens);
		blocks = (double)((rows + vs.tile_rows - 1) / vs.tile_rows) * tiles;
		reads = tiles;
		tokens = tiles * vs.tile_tokens;
	} else {
		/* a row's split parts each stream whole warp strides, or leave lanes
		 * idle; a lane with two chunks in flight counts as two warps' loads */
		double inflight = vs.vector_bytes / 16.0;
		double parts = row_bytes / (WARP_STRIDE_BYTES * vs.split_k * inflight);
		busy = (parts < 1 ? parts : 1) * inflight;
		blocks = (double)((rows + vs.tile_rows - 1) / vs.tile_rows) * n;
	}
	double eff = grid_efficiency(g->sm_count, blocks, vs.warps, busy) * g->occupancy;
	double t_mem = bytes * reads / (g->bw * eff), t_math = 2.0 * rows * cols * tokens / g->peak;
	double t = t_mem > t_math ? t_mem + OVERLAP_LOSS * t_math : t_math + OVERLAP_LOSS * t_mem;
	if (vs.split_k > 1) /* the parts meet in shared memory: a barrier a row */
		t += (double)rows * n * vs.split_k * sizeof(float) / g->bw;
	return t + waves_of(g->sm_count, blocks, vs.warps) * WAVE_S + NF_ROOFLINE_LAUNCH_S;
}

nf_cu_variant nf_roofline_variant(const nf_roofline_gpu *g, int rows, int cols, double bytes, int n,
				  int prefill, double *seconds)
{
	/* decode runs a GEMV per token (the weights stream once a step); a
	 * prefill of several tokens a tiled GEMM */
	nf_cu_variant first = prefill && n > 1 ? NF_CU_VAR_GEMM : NF_CU_VAR_GEMV;
	nf_cu_variant last = prefill && n > 1 ? NF_CU_VAR_GEMM_N16 : NF_CU_VAR_GEMV_V32;
	nf_cu_variant best = first;
	double best_s = -1;
	for (int v = first; v <= (int)last; v++) {
		double sec = nf_roofline_variant_seconds((nf_cu_variant)v, g, rows, cols, bytes, n);
		if (best_s < 0 || sec < best_s) {
			best_s = sec;
			best = (nf_cu_variant)v;
		}
	}
	if (seconds)
		*seconds = best_s;
	return best;
}

/* The modelled variant of shape s at batch tokens (a prefill above one). */
static void choose_tactic(nf_roofline_tactic *t, const shape *s, const nf_roofline *r, int batch)
{
	nf_roofline_gpu g = {r->sku->sm_count, r->sku->mem_bw_gbs * 1e9,
			     nf_sku_peak_flops(r->sku, r->precision), r->occupancy};
	nf_cu_variant v = nf_roofline_variant(&g, (int)s->rows, (int)s->cols, s->bytes, batch,
					      batch > 1, &t->seconds);
	nf_cu_variant_shape vs = nf_cu_variant_of(v);
	t->batch = batch;
	t->rows = (int)s->rows;
	t->cols = (int)s->cols;
	t->count = s->count;
	t->kernel = vs.name;
	t->rows_per_block = vs.tile_rows;
	t->split_k = vs.split_k;
}

int nf_roofline_model(nf_roofline *out, const nf_model_config *cfg, nf_precision p, nf_kv_kind kv,
		      const nf_sku *sku, int context, double occupancy)
{
	shape shapes[NF_ROOFLINE_MAX_SHAPES];
	int n;

	memset(out, 0, sizeof *out);
	if (!sku || sku->kind != NF_SKU_GPU || !nf_sku_supports(sku, p) || sku->mem_bw_gbs <= 0 ||
	    sku->sm_count <= 0)
		return nf_error_set(NF_EINPUT, "roofline: %s is not a GPU that runs %s",
				    sku ? sku->name : "(null)", nf_precision_name(p));
	if (context < 1 || context > cfg->max_seq_len || !(occupancy > 0 && occupancy <= 1))
		return nf_error_set(NF_EINPUT,
				    "roofline: context %d must be in 1..%d and occupancy %g in (0, 1]",
				    context, cfg->max_seq_len, occupancy);
	if ((n = collect_shapes(shapes, cfg, p)) < 0)
		return n;
	out->sku = sku;
	out->precision = p;
	out->context = context;
	out->occupancy = occupancy;
	for (int i = 0; i < n; i++)
		out->weight_bytes += shapes[i].count * shapes[i].bytes;
	for (int i = 0; i < NF_ROOFLINE_BUCKETS; i++) {
		out->buckets[i].batch = nf_roofline_batches[i];
		model_bucket(&out->buckets[i], shapes, n, cfg, kv, out);
	}
	for (int i = 0; i < n; i++) {
		choose_tactic(&out->tactics[i], &shapes[i], out, 1);
		choose_tactic(&out->prefill[i], &shapes[i], out, NF_ROOFLINE_PREFILL);
	}
	out->n_tactics = n;
	return 0;
}

const nf_roofline_bucket *nf_roofline_at(const nf_roofline *r, int batch)
{
	for (int i = 0; i < NF_ROOFLINE_BUCKETS; i++)
		if (r->buckets[i].batch == batch)
			return &r->buckets[i];
	return NULL;
}

void nf_roofline_summary(char *buf, size_t len, const nf_roofline *r)
{
	const nf_roofline_bucket *b = &r->buckets[0];
	double pct = 100 * b->hbm_fraction;
	/* a launch-bound tiny model sits well under 1%: keep a digit that says how far */
	snprintf(buf, len, "modelled %.0f tok/s at batch 1, %.*f%% of HBM roofline", b->tokens_per_s,
		 pct < 1 ? 2 : 0, pct);
}

/* ---- the model as JSON ---- */

static json_t *buckets_json(const nf_roofline *r)
{
	json_t *a = json_array();
	for (int i = 0; a && i < NF_ROOFLINE_BUCKETS; i++) {
		const nf_roofline_bucket *b = &r->buckets[i];
		if (json_array_append_new(a, json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:b}", "batch",
						       b->batch, "tokens_per_s", b->tokens_per_s,
						       "step_ms", b->step_seconds * 1e3,
						       "hbm_fraction", b->hbm_fraction, "bytes",
						       b->bytes, "flops", b->flops, "compute_bound",
						       b->compute_bound))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *tactics_json(const nf_roofline *r)
{
	json_t *a = json_array();
	for (int i = 0; a && i < r->n_tactics; i++) {
		const nf_roofline_tactic *t = &r->tactics[i];
		if (json_array_append_new(a, json_pack("{s:[i,i], s:i, s:s, s:i, s:i, s:s, s:f}", "shape",
						       t->rows, t->cols, "count", t->count, "kernel",
						       t->kernel, "rows_per_block", t->rows_per_block,
						       "split_k", t->split_k, "method", "modelled",
						       "modelled_us", t->seconds * 1e6))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* The candidates of a prefill product not modelled: cuBLASLt, for the
 * weights it takes, never timed where no GPU is and never chosen. */
static json_t *unmodelled_json(const nf_roofline *r)
{
	nf_quant_kind k = nf_precision_info_of(r->precision)->weights;
	json_t *a = json_array();
	if (a && nf_cublaslt_kind_ok(k, r->sku->sm) && !nf_cublaslt_may_choose() &&
	    json_array_append_new(a, json_pack("{s:s, s:s, s:s}", "kernel", "cublaslt", "method",
					       "skipped", "reason",
					       "not timed: cuBLASLt's algorithms are timed only on the "
					       "GPU; never chosen: the image carries no libcublasLt "
					       "(docs/cuda-kernels.md)"))) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static json_t *prefill_json(const nf_roofline *r)
{
	json_t *a = json_array();
	for (int i = 0; a && i < r->n_tactics; i++) {
		const nf_roofline_tactic *t = &r->prefill[i];
		if (json_array_append_new(a, json_pack("{s:[i,i], s:i, s:s, s:s, s:f, s:o*}", "shape",
						       t->rows, t->cols, "batch", t->batch, "kernel",
						       t->kernel, "method", "modelled", "modelled_us",
						       t->seconds * 1e6, "candidates",
						       unmodelled_json(r)))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

int nf_roofline_json(char **out, const nf_roofline *r)
{
	char summary[128];
	json_t *root;

	nf_roofline_summary(summary, sizeof summary, r);
	root = json_pack("{s:s, s:s, s:s, s:i, s:f, s:f, s:i, s:f, s:s, s:o*, s:o*, s:o*}", "method",
			 "modelled", "sku", r->sku->name, "precision", nf_precision_name(r->precision),
			 "context", r->context, "occupancy", r->occupancy, "weight_bytes",
			 r->weight_bytes, "mem_bw_gbs", r->sku->mem_bw_gbs, "peak_tflops",
			 nf_sku_peak_flops(r->sku, r->precision) / 1e12, "summary", summary,
			 "decode", buckets_json(r), "tactics", tactics_json(r), "prefill_tactics",
			 prefill_json(r));
	*out = root ? json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(6)) : NULL;
	json_decref(root);
	return *out ? 0 : nf_error_set(NF_ENOMEM, "roofline: cannot build JSON");
}

int nf_roofline_write(const char *path, const nf_roofline *r)
{
	char *text = NULL;
	int err = nf_roofline_json(&text, r);
	if (!err)
		err = nf_fs_write_atomic(path, text, strlen(text), 0644);
	free(text);
	return err;
}
