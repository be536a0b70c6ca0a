/*
 * backend.c - the CUDA backend's lifecycle (see backend.h): the device's
 * primary context, the engine's cubin and its kernels, the weights uploaded
 * once in their stored formats, the KV caches and activations, and the
 * decode step with its graph per batch size.  The launches of a step are
 * backend_step.c's.
 */
#include "engine/cuda/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/arch.h"
#include "engine/cuda/backend_impl.h"
#include "engine/cuda/cubin.h"
#include "engine/layout.h"
#include "engine/sku.h"
#include "engine/wformat.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

int nf_cuda_backend_fail(const nf_cuda_backend *b, const char *what, nf_cu_result rc)
{
	char text[160];
	return nf_error_set(NF_EENV, "cuda: %s failed on GPU %d: %s", what, b->ordinal,
			    nf_cuda_error_text(text, sizeof text, b->d, rc));
}

int nf_cuda_backend_alloc(nf_cuda_backend *b, nf_cu_ptr *out, size_t bytes, const char *what)
{
	nf_cu_result rc;
	char text[160];
	*out = 0;
	if (b->n_allocs == b->cap_allocs) {
		size_t cap = b->cap_allocs ? 2 * b->cap_allocs : 64;
		nf_cu_ptr *p = realloc(b->allocs, cap * sizeof *p);
		if (!p)
			return nf_error_set(NF_ENOMEM, "cuda: out of memory");
		b->allocs = p;
		b->cap_allocs = cap;
	}
	if ((rc = b->api->cuMemAlloc(out, bytes ? bytes : 1)) != 0) {
		*out = 0;
		return nf_error_set(NF_EENV, "cuda: GPU %d refused %zu bytes for %s: %s", b->ordinal,
				    bytes, what, nf_cuda_error_text(text, sizeof text, b->d, rc));
	}
	b->allocs[b->n_allocs++] = *out;
	return 0;
}

/* ---- weights ---- */

/* A new device buffer holding bytes of host memory (a weight: counted). */
static int upload(nf_cuda_backend *b, nf_cu_ptr *out, const void *host, size_t bytes,
		  const char *what)
{
	nf_cu_result rc;
	int err;
	if ((err = nf_cuda_backend_alloc(b, out, bytes, what)))
		return err;
	if ((rc = b->api->cuMemcpyHtoD(*out, host, bytes)) != 0)
		return nf_cuda_backend_fail(b, what, rc);
	b->weight_bytes += bytes;
	return 0;
}

static const void *dev(nf_cu_ptr p) { return (const void *)(uintptr_t)p; }

/* A matrix in its stored format: data, and the scales or group scale/min
 * beside it (engine/wformat.h). */
static int upload_matrix(nf_cuda_backend *b, nf_cuda_wmat *out, const nf_bk_matrix *m,
			 const char *what)
{
	const nf_wformat *f = nf_wformat_of(m->kind);
	uint64_t rows = (uint64_t)m->rows, data = f ? nf_wformat_data_bytes(f, rows, (uint64_t)m->cols) : 0;
	nf_cu_ptr p = 0;
	int err;

	memset(out, 0, sizeof *out);
	if (!f || data == 0 || data > SIZE_MAX)
		return nf_error_set(NF_EINPUT, "cuda: %s has no device format", what);
	if (m->layout != NF_BK_ROWS)
		return nf_error_set(NF_EINPUT, "cuda: %s is tiled for the CPU (the device reads rows)", what);
	out->kind = m->kind;
	out->m.rows = m->rows;
	out->m.cols = m->cols;
	out->m.group = m->group;
	out->m.act_scale = m->act_scale;
	if ((err = upload(b, &p, nf_bk_elems(m), (size_t)data, what)))
		return err;
	out->m.data = dev(p);
	if (f->aux == NF_AUX_ROW_SCALE) {
		if ((err = upload(b, &p, m->scale, (size_t)rows * sizeof(float), what)))
			return err;
		out->m.scale = dev(p);
	} else if (f->aux == NF_AUX_GROUP_SM) {
		uint64_t aux = rows * nf_wformat_aux_cols(f, (uint64_t)m->cols, m->group) *
			       nf_wformat_aux_size(f);
		if ((err = upload(b, &p, m->gsm, (size_t)aux, what)))
			return err;
		out->m.aux = dev(p);
	}
	return 0;
}

static int upload_vector(nf_cuda_backend *b, nf_cu_ptr *out, const float *v, int n, const char *what)
{
	*out = 0;
	return v ? upload(b, out, v, (size_t)n * sizeof(float), what) : 0;
}

static int upload_layer(nf_cuda_backend *b, nf_cuda_layer *D, const nf_fwd_layer *L)
{
	const nf_model_config *c = b->cfg;
	int dim = c->dim, kvd = nf_model_kv_dim(c), err;
	if ((err = upload_vector(b, &D->rms_att, L->rms_att, dim, "rms_att")) ||
	    (err = upload_vector(b, &D->rms_ffn, L->rms_ffn, dim, "rms_ffn")) ||
	    (err = upload_matrix(b, &D->wq, &L->wq, "wq")) ||
	    (err = upload_matrix(b, &D->wk, &L->wk, "wk")) ||
	    (err = upload_matrix(b, &D->wv, &L->wv, "wv")) ||
	    (err = upload_matrix(b, &D->wo, &L->wo, "wo")) ||
	    (err = upload_matrix(b, &D->w1, &L->w1, "w1")) ||
	    (err = upload_matrix(b, &D->w2, &L->w2, "w2")) ||
	    (err = upload_matrix(b, &D->w3, &L->w3, "w3")) ||
	    (err = upload_vector(b, &D->bq, L->bq, dim, "bq")) ||
	    (err = upload_vector(b, &D->bk, L->bk, kvd, "bk")) ||
	    (err = upload_vector(b, &D->bv, L->bv, kvd, "bv")) ||
	    (err = upload_vector(b, &D->bo, L->bo, dim, "bo")))
		return err;
	return 0;
}

static int upload_weights(nf_cuda_backend *b, const nf_fwd_weights *w)
{
	const nf_model_config *c = b->cfg;
	int err;
	if (!(b->layers = calloc((size_t)c->n_layers, sizeof *b->layers)))
		return nf_error_set(NF_ENOMEM, "cuda: out of memory");
	if ((err = upload_matrix(b, &b->emb, &w->emb, "the embedding")))
		return err;
	for (int l = 0; l < c->n_layers; l++)
		if ((err = upload_layer(b, &b->layers[l], &w->layers[l])))
			return err;
	if ((err = upload_vector(b, &b->rms_final, w->rms_final, c->dim, "rms_final")))
		return err;
	/* a classifier tied to the embedding is the same memory (forward.c's rule) */
	if (nf_bk_elems(&w->cls) == nf_bk_elems(&w->emb)) {
		b->cls = b->emb;
		return 0;
	}
	return upload_matrix(b, &b->cls, &w->cls, "the classifier");
}

/* ---- state: KV caches, activations ---- */

static int alloc_floats(nf_cuda_backend *b, nf_cu_ptr *out, size_t rows, size_t width, const char *what)
{
	size_t n;
	if (!nf_size_mul3(&n, rows, width, sizeof(float)))
		return nf_error_set(NF_EINPUT, "cuda: %s overflows", what);
	return nf_cuda_backend_alloc(b, out, n, what);
}

static int alloc_caches(nf_cuda_backend *b)
{
	size_t bytes = nf_fwd_kv_bytes(b->cfg, b->kv);
	int err = 0;
	b->head_stride = (size_t)b->cfg->max_seq_len *
			 nf_kv_row_bytes(b->kv, (size_t)nf_model_head_size(b->cfg));
	if (!bytes)
		return nf_error_set(NF_EINPUT, "cuda: the KV cache overflows");
	b->kc = calloc((size_t)b->max_batch, sizeof *b->kc);
	b->vc = calloc((size_t)b->max_batch, sizeof *b->vc);
	if (!b->kc || !b->vc)
		return nf_error_set(NF_ENOMEM, "cuda: out of memory");
	for (int s = 0; s < b->max_batch && !err; s++)
		if (!(err = nf_cuda_backend_alloc(b, &b->kc[s], bytes, "a K cache")))
			err = nf_cuda_backend_alloc(b, &b->vc[s], bytes, "a V cache");
	return err;
}

static int alloc_acts(nf_cuda_backend *b)
{
	const nf_model_config *c = b->cfg;
	size_t r = (size_t)b->rows, dim = (size_t)c->dim, kvd = (size_t)nf_model_kv_dim(c);
	size_t hid = (size_t)c->hidden_dim, hs = (size_t)nf_model_head_size(c);
	size_t splits = (size_t)nf_cu_decode_splits(c->max_seq_len - 1), heads = (size_t)c->n_heads;
	nf_cuda_acts *a = &b->a;
	int err;
	if ((err = alloc_floats(b, &a->x, r, dim, "activations")) ||
	    (err = alloc_floats(b, &a->xb, r, dim, "activations")) ||
	    (err = alloc_floats(b, &a->xb2, r, dim, "activations")) ||
	    (err = alloc_floats(b, &a->q, r, dim, "activations")) ||
	    (err = alloc_floats(b, &a->k, r, kvd, "activations")) ||
	    (err = alloc_floats(b, &a->v, r, kvd, "activations")) ||
	    (err = alloc_floats(b, &a->h1, r, hid, "activations")) ||
	    (err = alloc_floats(b, &a->h3, r, hid, "activations")) ||
	    (err = alloc_floats(b, &a->xr, r, hid > dim ? hid : dim, "activations")) ||
	    (err = alloc_floats(b, &a->logits, (size_t)b->max_batch, (size_t)c->vocab_size, "logits")) ||
	    (err = alloc_floats(b, &a->cs, r, hs, "the RoPE table")) ||
	    (err = nf_cuda_backend_alloc(b, &a->tokens, r * sizeof(int), "tokens")) ||
	    (err = nf_cuda_backend_alloc(b, &a->next, r * sizeof(int), "tokens")) ||
	    (err = alloc_floats(b, &a->part_o, heads * splits, hs, "attention splits")) ||
	    (err = alloc_floats(b, &a->part_ml, heads * splits, 2, "attention splits")))
		return err;
	b->inv_freq = calloc(hs / 2 + 1, sizeof(float));
	b->cs = calloc(r * hs, sizeof(float));
	if (!b->inv_freq || !b->cs)
		return nf_error_set(NF_ENOMEM, "cuda: out of memory");
	nf_arch_rope_inv_freq(b->inv_freq, c);
	return 0;
}

/* ---- lifecycle ---- */

static int check_opts(const nf_model_config *cfg, const nf_cuda_backend_opts *o)
{
	if (o->max_batch < 1 || o->max_batch > NF_CUDA_MAX_BATCH)
		return nf_error_set(NF_EINPUT, "cuda: max_batch %d is not in 1..%d", o->max_batch,
				    NF_CUDA_MAX_BATCH);
	if (o->max_prefill < 0 || o->max_prefill > 4096)
		return nf_error_set(NF_EINPUT, "cuda: max_prefill %d is not in 0..4096", o->max_prefill);
	if (!nf_cu_head_size_ok(nf_model_head_size(cfg)))
		return nf_error_set(NF_EUNSUPPORTED, "cuda: heads of %d elements (the kernels take even "
				    "sizes up to %d)", nf_model_head_size(cfg), NF_CU_HEAD_MAX);
	if (!o->engine_dir || !o->arch)
		return nf_error_set(NF_EINPUT, "cuda: no engine folder or arch to load the kernels from");
	return 0;
}

/* The device for the roofline model's choices where no timing is: its SKU
 * of the device table (bandwidth, peak), its own SM count. */
static void model_device(nf_cuda_backend *b, const nf_cuda_device *dev)
{
	/* a device of no SKU (checked by the caller's profile choice) gets H100-like figures */
	const nf_sku *sku = nf_cuda_device_sku(dev);
	b->model.sm_count = dev->sm_count > 0 ? dev->sm_count : 1;
	b->model.bw = sku && sku->mem_bw_gbs > 0 ? sku->mem_bw_gbs * 1e9 : 1e12;
	b->model.peak = sku ? sku->fp16_tflops * 1e12 : 1e14;
	b->model.occupancy = 1;
}

static int open_device(nf_cuda_backend *b, const nf_cuda_backend_opts *o)
{
	nf_cuda_device dev;
	nf_cu_result rc;
	int err;
	if ((err = nf_cuda_device_query(&dev, b->d, o->ordinal)) ||
	    (err = nf_cuda_context_retain(&b->ctx, b->d, o->ordinal)))
		return err;
	b->sm = dev.major * 10 + dev.minor;
	model_device(b, &dev);
	if ((err = nf_cubin_load(&b->mod, b->d, o->engine_dir, o->arch)) ||
	    (err = nf_cuk_resolve(&b->k, b->d, b->mod, b->sm)))
		return err;
	if ((rc = b->api->cuStreamCreate(&b->stream, 0)) != 0) {
		b->stream = NULL;
		return nf_cuda_backend_fail(b, "cuStreamCreate", rc);
	}
	return 0;
}

int nf_cuda_backend_new(nf_cuda_backend **out, const nf_cuda_driver *d, const nf_model_config *cfg,
			const nf_fwd_weights *w, const nf_cuda_backend_opts *o)
{
	nf_cuda_backend *b = NULL;
	int slot = 0, token = 0, pos = 0, err;

	*out = NULL;
	if ((err = check_opts(cfg, o)))
		return err;
	if (!(b = calloc(1, sizeof *b)))
		return nf_error_set(NF_ENOMEM, "cuda: out of memory");
	b->d = d;
	b->api = nf_cuda_driver_api(d);
	b->cfg = cfg;
	b->ordinal = o->ordinal;
	b->ctx = NULL;
	b->max_batch = o->max_batch;
	b->max_prefill = o->max_prefill ? o->max_prefill : NF_FWD_PASS_TOKENS;
	b->rows = b->max_prefill > b->max_batch ? b->max_prefill : b->max_batch;
	b->kv = o->kv == NF_KV_INT8 ? NF_KV_INT8 : NF_KV_F16;
	b->no_graphs = o->no_graphs;
	/* the measured tactics before the first step, which launches them;
	 * one decode step, so a device that cannot run it fails here */
	if ((err = open_device(b, o)) || (err = upload_weights(b, w)) ||
	    (err = nf_cuda_backend_load_tactics(b, o->engine_dir)) || (err = alloc_caches(b)) ||
	    (err = alloc_acts(b)) ||
	    (err = nf_cuda_backend_decode(b, &slot, &token, &pos, 1, NULL, NULL)))
		goto done;
done:
	if (err) {
		nf_cuda_backend_free(b);
		return err;
	}
	*out = b;
	return 0;
}

void nf_cuda_backend_free(nf_cuda_backend *b)
{
	if (!b)
		return;
	for (int i = 0; i <= NF_CUDA_MAX_BATCH; i++)
		if (b->graph[i])
			b->api->cuGraphExecDestroy(b->graph[i]);
	if (b->stream)
		b->api->cuStreamDestroy(b->stream);
	for (size_t i = 0; i < b->n_allocs; i++)
		b->api->cuMemFree(b->allocs[i]);
	if (b->mod)
		b->api->cuModuleUnload(b->mod);
	if (b->ctx)
		nf_cuda_context_release(b->d, b->ordinal);
	free(b->allocs);
	free(b->layers);
	free(b->kc);
	free(b->vc);
	free(b->inv_freq);
	free(b->cs);
	free(b->choice);
	free(b);
}

uint64_t nf_cuda_backend_weight_bytes(const nf_cuda_backend *b) { return b->weight_bytes; }
int nf_cuda_backend_graphs(const nf_cuda_backend *b) { return b->n_graphs; }

int nf_cuda_backend_choose(nf_cuda_backend *b, const nf_cuda_wmat *w, int batch, nf_cu_variant v)
{
	nf_cuda_choice c = {w->kind, w->m.rows, w->m.cols, batch, v}, *p;
	for (size_t i = 0; i < b->n_choice; i++)
		if (b->choice[i].kind == c.kind && b->choice[i].rows == c.rows &&
		    b->choice[i].cols == c.cols && b->choice[i].batch == c.batch) {
			b->choice[i].variant = v;
			return 0;
		}
	if (!(p = realloc(b->choice, (b->n_choice + 1) * sizeof *p)))
		return nf_error_set(NF_ENOMEM, "cuda: out of memory");
	b->choice = p;
	b->choice[b->n_choice++] = c;
	return 0;
}

static int is_gemm(nf_cu_variant v) { return v == NF_CU_VAR_GEMM || v == NF_CU_VAR_GEMM_N16; }

/* Bytes of w in its stored format, with its scales (what a product reads). */
static double matrix_bytes(const nf_cuda_wmat *w)
{
	const nf_wformat *f = nf_wformat_of(w->kind);
	uint64_t rows = (uint64_t)w->m.rows, cols = (uint64_t)w->m.cols;
	return (double)nf_wformat_data_bytes(f, rows, cols) +
	       (double)rows * (double)nf_wformat_aux_cols(f, cols, w->m.group) *
		       (double)nf_wformat_aux_size(f);
}

nf_cu_variant nf_cuda_backend_variant(const nf_cuda_backend *b, const nf_cuda_wmat *w, int n,
				      int prefill)
{
	int bucket = 1;
	while (bucket * 2 <= n)
		bucket *= 2;
	for (size_t i = 0; i < b->n_choice; i++) {
		const nf_cuda_choice *c = &b->choice[i];
		if (c->kind == w->kind && c->rows == w->m.rows && c->cols == w->m.cols &&
		    c->batch == bucket && (n > 1 || !is_gemm(c->variant)))
			return c->variant;
	}
	return nf_roofline_variant(&b->model, w->m.rows, w->m.cols, matrix_bytes(w), n, prefill, NULL);
}

/* ---- steps ---- */

static int check_step(const nf_cuda_backend *b, const int *slots, const int *tokens,
		      const int *pos, int n, int max)
{
	const nf_model_config *c = b->cfg;
	if (n < 1 || n > max)
		return nf_error_set(NF_EINPUT, "cuda: %d sequences in a step (1..%d)", n, max);
	for (int i = 0; i < n; i++) {
		if (slots && (slots[i] < 0 || slots[i] >= b->max_batch))
			return nf_error_set(NF_EINPUT, "cuda: slot %d is not in 0..%d", slots[i],
					    b->max_batch - 1);
		for (int j = 0; slots && j < i; j++)
			if (slots[j] == slots[i])
				return nf_error_set(NF_EINPUT, "cuda: slot %d twice in a step", slots[i]);
		if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
			return nf_error_set(NF_EINPUT, "cuda: token %d is not in the vocabulary", tokens[i]);
		if (pos[i] < 0 || pos[i] >= c->max_seq_len)
			return nf_error_set(NF_EINPUT, "cuda: position %d is not in 0..%d", pos[i],
					    c->max_seq_len - 1);
	}
	return 0;
}

/* Capture the step's launches, update (or instantiate) the graph of this
 * batch size with them, and launch it. */
static int replay_graph(nf_cuda_backend *b, const int *slots, const int *pos, int n)
{
	nf_cu_graph graph = NULL;
	nf_cu_graph_update_info info;
	nf_cu_result rc;
	int err;

	if ((rc = b->api->cuStreamBeginCapture(b->stream, NF_CU_STREAM_CAPTURE_MODE_GLOBAL)) != 0)
		return nf_cuda_backend_fail(b, "cuStreamBeginCapture", rc);
	err = nf_cuda_step_decode(b, slots, pos, n);
	/* end the capture also after a failed launch, or the stream stays capturing */
	rc = b->api->cuStreamEndCapture(b->stream, &graph);
	if (err || rc != 0) {
		if (graph)
			b->api->cuGraphDestroy(graph);
		return err ? err : nf_cuda_backend_fail(b, "cuStreamEndCapture", rc);
	}
	if (b->graph[n] && (!b->api->cuGraphExecUpdate ||
			    b->api->cuGraphExecUpdate(b->graph[n], graph, &info) != 0)) {
		b->api->cuGraphExecDestroy(b->graph[n]);
		b->graph[n] = NULL;
	}
	if (!b->graph[n]) {
		if ((rc = b->api->cuGraphInstantiateWithFlags(&b->graph[n], graph, 0)) != 0) {
			b->graph[n] = NULL;
			b->api->cuGraphDestroy(graph);
			return nf_cuda_backend_fail(b, "cuGraphInstantiateWithFlags", rc);
		}
		b->n_graphs++;
	}
	b->api->cuGraphDestroy(graph);
	if ((rc = b->api->cuGraphLaunch(b->graph[n], b->stream)) != 0)
		return nf_cuda_backend_fail(b, "cuGraphLaunch", rc);
	return 0;
}

/* Copy n rows of logits and argmax tokens back and wait for the stream. */
static int fetch(nf_cuda_backend *b, int n, float *logits, int *next)
{
	size_t vocab = (size_t)b->cfg->vocab_size;
	nf_cu_result rc;
	if (logits && (rc = b->api->cuMemcpyDtoHAsync(logits, b->a.logits,
						      (size_t)n * vocab * sizeof(float), b->stream)))
		return nf_cuda_backend_fail(b, "the logits' copy", rc);
	if (next && (rc = b->api->cuMemcpyDtoHAsync(next, b->a.next, (size_t)n * sizeof(int),
						    b->stream)))
		return nf_cuda_backend_fail(b, "the tokens' copy", rc);
	if ((rc = b->api->cuStreamSynchronize(b->stream)) != 0)
		return nf_cuda_backend_fail(b, "the step", rc);
	return 0;
}

int nf_cuda_backend_decode(nf_cuda_backend *b, const int *slots, const int *tokens,
			   const int *pos, int n, float *logits, int *next)
{
	int err;
	if ((err = check_step(b, slots, tokens, pos, n, b->max_batch)) ||
	    (err = nf_cuda_step_upload(b, tokens, pos, n)))
		return err;
	err = b->no_graphs ? nf_cuda_step_decode(b, slots, pos, n) : replay_graph(b, slots, pos, n);
	return err ? err : fetch(b, n, logits, next);
}

/* The logits of pass rows [lo, hi) (lo >= 0) into out, row by row, through
 * the classifier max_batch rows at a time. */
static int pass_logits(nf_cuda_backend *b, int lo, int hi, float *out)
{
	size_t vocab = (size_t)b->cfg->vocab_size;
	int err = 0;
	for (int r = lo; r < hi && !err; r += b->max_batch) {
		int m = hi - r < b->max_batch ? hi - r : b->max_batch;
		if (!(err = nf_cuda_step_head(b, r, m)))
			err = fetch(b, m, out + (size_t)(r - lo) * vocab, NULL);
	}
	return err;
}

static int check_prefill(const nf_cuda_backend *b, int slot, int n, int pos0, int n_rows,
			 const float *logits)
{
	if (n < 1 || pos0 < 0 || pos0 > b->cfg->max_seq_len - n)
		return nf_error_set(NF_EINPUT, "cuda: a prefill of %d tokens at %d overruns the context", n,
				    pos0);
	if (slot < 0 || slot >= b->max_batch)
		return nf_error_set(NF_EINPUT, "cuda: slot %d is not in 0..%d", slot, b->max_batch - 1);
	if (n_rows < 0 || n_rows > n || (n_rows > 0 && !logits))
		return nf_error_set(NF_EINPUT, "cuda: %d rows of logits of a prefill of %d tokens", n_rows,
				    n);
	return 0;
}

int nf_cuda_backend_prefill_rows(nf_cuda_backend *b, int slot, const int *tokens, int n, int pos0,
				 int n_rows, float *logits)
{
	size_t vocab = (size_t)b->cfg->vocab_size;
	int *pos = NULL, first = n - n_rows, err;
	if ((err = check_prefill(b, slot, n, pos0, n_rows, logits)))
		return err;
	if (!(pos = malloc((size_t)n * sizeof *pos)))
		return nf_error_set(NF_ENOMEM, "cuda: out of memory");
	for (int i = 0; i < n; i++)
		pos[i] = pos0 + i;
	for (int at = 0; at < n && !err; at += b->max_prefill) {
		int k = n - at < b->max_prefill ? n - at : b->max_prefill;
		/* the wanted rows of this pass: tokens [lo, at + k) */
		int lo = first > at ? first : at;
		if ((err = check_step(b, NULL, tokens + at, pos + at, k, b->max_prefill)) ||
		    (err = nf_cuda_step_upload(b, tokens + at, pos + at, k)) ||
		    (err = nf_cuda_step_prefill(b, slot, pos0 + at, k)))
			break;
		if (lo < at + k)
			err = pass_logits(b, lo - at, k, logits + (size_t)(lo - first) * vocab);
		else
			err = fetch(b, 0, NULL, NULL);
	}
	free(pos);
	return err;
}

int nf_cuda_backend_prefill(nf_cuda_backend *b, int slot, const int *tokens, int n, int pos0,
			    float *logits_last)
{
	return nf_cuda_backend_prefill_rows(b, slot, tokens, n, pos0, logits_last ? 1 : 0, logits_last);
}

int nf_cuda_backend_copy_prefix(nf_cuda_backend *b, int dst, int src, int n)
{
	const nf_model_config *c = b->cfg;
	size_t bytes = (size_t)n * nf_kv_row_bytes(b->kv, (size_t)nf_model_head_size(c));
	nf_cu_result rc;
	if (dst < 0 || dst >= b->max_batch || src < 0 || src >= b->max_batch)
		return nf_error_set(NF_EINPUT, "cuda: a prefix copy from slot %d to %d (slots 0..%d)",
				    src, dst, b->max_batch - 1);
	if (n < 0 || n > c->max_seq_len)
		return nf_error_set(NF_EINPUT, "cuda: a prefix of %d positions (0..%d)", n,
				    c->max_seq_len);
	if (dst == src || n == 0)
		return 0;
	/* a head's rows are one run of bytes (head-major cache): one copy per
	 * layer, KV head and K or V */
	for (int l = 0; l < c->n_layers; l++)
		for (int g = 0; g < c->n_kv_heads; g++)
			if ((rc = b->api->cuMemcpyDtoDAsync(nf_cuda_cache_rows(b, b->kc, dst, l, g),
							    nf_cuda_cache_rows(b, b->kc, src, l, g),
							    bytes, b->stream)) != 0 ||
			    (rc = b->api->cuMemcpyDtoDAsync(nf_cuda_cache_rows(b, b->vc, dst, l, g),
							    nf_cuda_cache_rows(b, b->vc, src, l, g),
							    bytes, b->stream)) != 0)
				return nf_cuda_backend_fail(b, "a prefix copy", rc);
	if ((rc = b->api->cuStreamSynchronize(b->stream)) != 0)
		return nf_cuda_backend_fail(b, "a prefix copy", rc);
	return 0;
}
