/* compress.c - reproducible parallel gzip (libdeflate blocks) and zstd (see compress.h). */
#define _GNU_SOURCE
#include "images/compress.h"

#include <libdeflate.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "util/error.h"
#include "util/banned.h"

#define GZ_HEADER 10
#define GZ_TRAILER 8
#define SAMPLE ((size_t)16 << 10) /* bytes of one incompressibility sample */
#define SAMPLES 4
#define AUTO_THREADS_MAX 8
#define ZBUF ((size_t)1 << 20)    /* zstd output chunk */
#define ZSLOTS 4                  /* zstd output chunks in flight */
#define ERRMSG 512

enum slot_state { S_FREE, S_PENDING, S_WORKING, S_DONE };

/* One block of input (gzip) and the compressed bytes made of it. */
struct slot {
	unsigned char *in; /* gzip only */
	size_t in_len;
	unsigned char *out;
	size_t out_len;
	enum slot_state state;
};

/* What one compressing thread owns. */
struct worker {
	nf_oci_compressor *c;
	struct libdeflate_compressor *fast;   /* NF_OCI_GZ_LEVEL */
	struct libdeflate_compressor *stored; /* level 0 */
	unsigned char *scratch;               /* samples are compressed here */
	size_t scratch_size;
	pthread_t tid;
	bool started;
};

/*
 * Threads (when threads > 1): the caller's thread fills slots (gzip: input
 * blocks; zstd: output chunks from libzstd's own workers), gzip workers
 * compress them, and one writer thread hands the finished slots to the sink in
 * order, so that the blob's hash and write run beside the tar's.  Slot i holds
 * block number k where k % nslots == i; the counters only grow:
 * emitted <= taken <= filled <= emitted + nslots.  With threads == 1 all of it
 * happens inline in the caller's thread.
 */
struct nf_oci_compressor {
	nf_oci_compression comp;
	nf_oci_sink_fn sink;
	void *sink_ctx;
	bool finished, failed;
	bool async;        /* worker and writer threads run */
	struct slot *slots;
	size_t nslots;
	size_t out_cap;    /* bytes of each slot's out */
	uint64_t filled;   /* slots handed over; the one being filled is number `filled` */
	size_t fill_len;   /* gzip: bytes in the block being filled */
	uint64_t taken;    /* gzip: blocks a worker has taken */
	uint64_t emitted;  /* slots given to the sink */
	struct worker *workers; /* gzip: nworkers of them (1, used inline, when !async) */
	unsigned nworkers;
	unsigned nthreads; /* threads asked for */
	pthread_t writer;
	bool writer_started;
	pthread_mutex_t mu;
	pthread_cond_t work_cv; /* a block waits for a worker (or stop) */
	pthread_cond_t done_cv; /* a slot is done (or stop): the writer looks */
	pthread_cond_t free_cv; /* a slot was emitted (or the writer failed) */
	bool sync_init, stop;
	int werr;               /* the writer's sink error, its message in werr_msg */
	char werr_msg[ERRMSG];
	ZSTD_CCtx *zc;
};

static void put_le32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

/* Does the sample at p save less than 2% when deflated? */
static bool sample_incompressible(struct worker *w, const unsigned char *p, size_t len)
{
	size_t n = libdeflate_deflate_compress(w->fast, p, len, w->scratch, w->scratch_size);
	return n == 0 || (uint64_t)n * 50 > (uint64_t)len * 49;
}

/* Whether to store a block: SAMPLES samples spread from its start to its end all
 * incompressible.  Depends on the block's bytes only. */
static bool block_incompressible(struct worker *w, const unsigned char *p, size_t len)
{
	if (len < SAMPLES * SAMPLE)
		return false;
	for (size_t i = 0; i < SAMPLES; i++) {
		size_t off = (len - SAMPLE) / (SAMPLES - 1) * i;
		if (!sample_incompressible(w, p + off, SAMPLE))
			return false;
	}
	return true;
}

/* Make s->out the gzip member of s->in.  Cannot fail: out has the bound's room. */
static void gz_member(struct worker *w, struct slot *s, size_t out_cap)
{
	static const unsigned char hdr[GZ_HEADER] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
	struct libdeflate_compressor *dc =
		block_incompressible(w, s->in, s->in_len) ? w->stored : w->fast;
	size_t n;
	memcpy(s->out, hdr, GZ_HEADER);
	n = libdeflate_deflate_compress(dc, s->in, s->in_len, s->out + GZ_HEADER,
					out_cap - GZ_HEADER - GZ_TRAILER);
	if (n == 0) /* no room: out_cap is the larger bound, so never; stored fits it */
		n = libdeflate_deflate_compress(w->stored, s->in, s->in_len, s->out + GZ_HEADER,
						out_cap - GZ_HEADER - GZ_TRAILER);
	put_le32(s->out + GZ_HEADER + n, libdeflate_crc32(0, s->in, s->in_len));
	put_le32(s->out + GZ_HEADER + n + 4, (uint32_t)s->in_len);
	s->out_len = GZ_HEADER + n + GZ_TRAILER;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	nf_oci_compressor *c = w->c;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		struct slot *s;
		while (!c->stop && c->taken == c->filled)
			pthread_cond_wait(&c->work_cv, &c->mu);
		if (c->stop)
			break;
		s = &c->slots[c->taken % c->nslots];
		c->taken++;
		s->state = S_WORKING;
		pthread_mutex_unlock(&c->mu);
		gz_member(w, s, c->out_cap);
		pthread_mutex_lock(&c->mu);
		s->state = S_DONE;
		pthread_cond_broadcast(&c->done_cv);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

static void *writer_main(void *arg)
{
	nf_oci_compressor *c = arg;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		struct slot *s = &c->slots[c->emitted % c->nslots];
		int err;
		while (!c->stop && !(c->emitted < c->filled && s->state == S_DONE))
			pthread_cond_wait(&c->done_cv, &c->mu);
		if (c->stop)
			break;
		pthread_mutex_unlock(&c->mu);
		err = c->sink(c->sink_ctx, s->out, s->out_len);
		pthread_mutex_lock(&c->mu);
		if (err) {
			c->werr = err;
			snprintf(c->werr_msg, sizeof(c->werr_msg), "%s", nf_error_last());
			pthread_cond_broadcast(&c->free_cv);
			break;
		}
		s->state = S_FREE;
		c->emitted++;
		pthread_cond_broadcast(&c->free_cv);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

static unsigned auto_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		return 1;
	return n > AUTO_THREADS_MAX ? AUTO_THREADS_MAX : (unsigned)n;
}

static int worker_init(struct worker *w, nf_oci_compressor *c)
{
	w->c = c;
	w->fast = libdeflate_alloc_compressor(NF_OCI_GZ_LEVEL);
	w->stored = libdeflate_alloc_compressor(0);
	if (!w->fast || !w->stored)
		return nf_error_set(NF_ENOMEM, "gzip: out of memory");
	w->scratch_size = libdeflate_deflate_compress_bound(w->fast, SAMPLE);
	w->scratch = malloc(w->scratch_size);
	if (!w->scratch)
		return nf_error_set(NF_ENOMEM, "out of memory");
	return 0;
}

static int alloc_slots(nf_oci_compressor *c, size_t n, size_t in_size)
{
	c->nslots = n;
	c->slots = calloc(n, sizeof(*c->slots));
	if (!c->slots)
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		c->slots[i].in = in_size ? malloc(in_size) : NULL;
		c->slots[i].out = malloc(c->out_cap);
		if ((in_size && !c->slots[i].in) || !c->slots[i].out)
			return nf_error_set(NF_ENOMEM, "out of memory");
	}
	return 0;
}

/* The lock, the condition variables and the threads of an async compressor. */
static int start_threads(nf_oci_compressor *c)
{
	if (pthread_mutex_init(&c->mu, NULL))
		return nf_error_set(NF_ENOMEM, "cannot make a mutex");
	if (pthread_cond_init(&c->work_cv, NULL))
		goto fail_mu;
	if (pthread_cond_init(&c->done_cv, NULL))
		goto fail_work;
	if (pthread_cond_init(&c->free_cv, NULL))
		goto fail_done;
	c->sync_init = true;
	c->async = true;
	for (unsigned i = 0; i < c->nworkers; i++) {
		if (pthread_create(&c->workers[i].tid, NULL, worker_main, &c->workers[i]))
			return nf_error_set(NF_ENOMEM, "cannot start a compression thread");
		c->workers[i].started = true;
	}
	if (pthread_create(&c->writer, NULL, writer_main, c))
		return nf_error_set(NF_ENOMEM, "cannot start the writing thread");
	c->writer_started = true;
	return 0;
fail_done:
	pthread_cond_destroy(&c->done_cv);
fail_work:
	pthread_cond_destroy(&c->work_cv);
fail_mu:
	pthread_mutex_destroy(&c->mu);
	return nf_error_set(NF_ENOMEM, "cannot make a condition variable");
}

static int gz_start(nf_oci_compressor *c, unsigned threads)
{
	size_t b1, b2;
	int err;

	c->nworkers = threads > 1 ? threads : 1;
	c->workers = calloc(c->nworkers, sizeof(*c->workers));
	if (!c->workers)
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (unsigned i = 0; i < c->nworkers; i++)
		if ((err = worker_init(&c->workers[i], c)))
			return err;
	b1 = libdeflate_deflate_compress_bound(c->workers[0].fast, NF_OCI_GZ_BLOCK);
	b2 = libdeflate_deflate_compress_bound(c->workers[0].stored, NF_OCI_GZ_BLOCK);
	c->out_cap = (b1 > b2 ? b1 : b2) + GZ_HEADER + GZ_TRAILER;
	if ((err = alloc_slots(c, threads > 1 ? (size_t)threads * 2 + 2 : 1, NF_OCI_GZ_BLOCK)))
		return err;
	return threads > 1 ? start_threads(c) : 0;
}

static int zstd_start(nf_oci_compressor *c, unsigned threads)
{
	int err;
	c->zc = ZSTD_createCCtx();
	if (!c->zc)
		return nf_error_set(NF_ENOMEM, "zstd: out of memory");
	if (ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_compressionLevel, NF_OCI_ZSTD_LEVEL)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_checksumFlag, 0)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_contentSizeFlag, 0)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_dictIDFlag, 0)))
		return nf_error_set(NF_EINTERNAL, "zstd: cannot set parameters");
	/* Always the multi-threaded format (>= 1 worker): its bytes do not depend on
	 * the worker count, while single-threaded (0 workers) ones differ. */
	if (ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_nbWorkers, (int)threads)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_jobSize, (int)NF_OCI_ZSTD_JOB)))
		return nf_error_set(NF_EUNSUPPORTED,
				    "zstd: this libzstd cannot compress with threads (needed for "
				    "reproducible zstd layers)");
	c->out_cap = ZBUF;
	if ((err = alloc_slots(c, threads > 1 ? ZSLOTS : 1, 0)))
		return err;
	return threads > 1 ? start_threads(c) : 0;
}

int nf_oci_compressor_new(nf_oci_compressor **out, nf_oci_compression comp, unsigned threads,
			  nf_oci_sink_fn sink, void *sink_ctx)
{
	nf_oci_compressor *c = NULL;
	int err = 0;

	*out = NULL;
	if (comp != NF_OCI_COMPRESS_NONE && comp != NF_OCI_COMPRESS_GZIP &&
	    comp != NF_OCI_COMPRESS_ZSTD)
		return nf_error_set(NF_EINPUT, "unknown compression %d", (int)comp);
	if (threads > NF_OCI_COMPRESS_THREADS_MAX)
		return nf_error_set(NF_EINPUT, "%u compression threads, more than %d", threads,
				    NF_OCI_COMPRESS_THREADS_MAX);
	if (threads == 0)
		threads = auto_threads();
	c = calloc(1, sizeof(*c));
	if (!c)
		return nf_error_set(NF_ENOMEM, "out of memory");
	c->comp = comp;
	c->sink = sink;
	c->sink_ctx = sink_ctx;
	c->nthreads = comp == NF_OCI_COMPRESS_NONE ? 0 : threads;
	if (comp == NF_OCI_COMPRESS_GZIP)
		err = gz_start(c, threads);
	else if (comp == NF_OCI_COMPRESS_ZSTD)
		err = zstd_start(c, threads);
	if (err) {
		nf_oci_compressor_free(c);
		return err;
	}
	*out = c;
	return 0;
}

unsigned nf_oci_compressor_threads(const nf_oci_compressor *c)
{
	return c->nthreads;
}

/* The writer's error, as this thread's (call with the lock held, werr set). */
static int writer_error(nf_oci_compressor *c)
{
	return nf_error_set(c->werr, "%s", c->werr_msg);
}

/* Before filling slot number `filled`: wait until the writer has emitted it. */
static int wait_free_slot(nf_oci_compressor *c)
{
	int err = 0;
	if (!c->async)
		return 0;
	pthread_mutex_lock(&c->mu);
	while (!c->werr && c->filled - c->emitted == c->nslots)
		pthread_cond_wait(&c->free_cv, &c->mu);
	if (c->werr)
		err = writer_error(c);
	pthread_mutex_unlock(&c->mu);
	return err;
}

/* Wait until every slot handed over is emitted. */
static int wait_all_emitted(nf_oci_compressor *c)
{
	int err = 0;
	if (!c->async)
		return 0;
	pthread_mutex_lock(&c->mu);
	while (!c->werr && c->emitted < c->filled)
		pthread_cond_wait(&c->free_cv, &c->mu);
	if (c->werr)
		err = writer_error(c);
	pthread_mutex_unlock(&c->mu);
	return err;
}

/* The gzip block being filled is complete (or the input ends): compress it. */
static int gz_submit(nf_oci_compressor *c)
{
	struct slot *s = &c->slots[c->filled % c->nslots];
	s->in_len = c->fill_len;
	c->fill_len = 0;
	if (!c->async) {
		gz_member(&c->workers[0], s, c->out_cap);
		c->filled++;
		c->emitted++;
		return c->sink(c->sink_ctx, s->out, s->out_len);
	}
	pthread_mutex_lock(&c->mu);
	s->state = S_PENDING;
	c->filled++;
	pthread_cond_signal(&c->work_cv);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

static int gz_write(nf_oci_compressor *c, const unsigned char *p, size_t len)
{
	int err;
	while (len > 0) {
		struct slot *s;
		size_t n;
		if (c->fill_len == 0 && (err = wait_free_slot(c)))
			return err;
		s = &c->slots[c->filled % c->nslots];
		n = NF_OCI_GZ_BLOCK - c->fill_len;
		if (n > len)
			n = len;
		memcpy(s->in + c->fill_len, p, n);
		c->fill_len += n;
		p += n;
		len -= n;
		if (c->fill_len == NF_OCI_GZ_BLOCK && (err = gz_submit(c)))
			return err;
	}
	return 0;
}

static int gz_finish(nf_oci_compressor *c)
{
	int err;
	/* The last partial block; an empty input still gives one (empty) member. */
	if (c->fill_len > 0 || c->filled == 0) {
		if (c->fill_len == 0 && (err = wait_free_slot(c)))
			return err;
		if ((err = gz_submit(c)))
			return err;
	}
	return wait_all_emitted(c);
}

/* Hand a slot of zstd output to the sink: through the writer, or now. */
static int zstd_emit(nf_oci_compressor *c, struct slot *s)
{
	if (!c->async)
		return c->sink(c->sink_ctx, s->out, s->out_len);
	pthread_mutex_lock(&c->mu);
	s->state = S_DONE;
	c->filled++;
	pthread_cond_signal(&c->done_cv);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

static int zstd_run(nf_oci_compressor *c, const void *data, size_t len, bool end)
{
	ZSTD_inBuffer in = {data, len, 0};
	int err;
	for (;;) {
		struct slot *s;
		ZSTD_outBuffer outb;
		size_t r;
		if ((err = wait_free_slot(c)))
			return err;
		s = &c->slots[c->filled % c->nslots];
		outb.dst = s->out;
		outb.size = c->out_cap;
		outb.pos = 0;
		r = ZSTD_compressStream2(c->zc, &outb, &in, end ? ZSTD_e_end : ZSTD_e_continue);
		if (ZSTD_isError(r))
			return nf_error_set(NF_EINTERNAL, "zstd: %s", ZSTD_getErrorName(r));
		if (outb.pos) {
			s->out_len = outb.pos;
			if ((err = zstd_emit(c, s)))
				return err;
		}
		if (end ? r == 0 : in.pos == in.size)
			return end ? wait_all_emitted(c) : 0;
	}
}

int nf_oci_compressor_write(nf_oci_compressor *c, const void *data, size_t len)
{
	int err;
	if (c->finished || c->failed)
		return nf_error_set(NF_EINTERNAL, "compressor used after %s",
				    c->failed ? "an error" : "finish");
	if (len == 0)
		return 0;
	switch (c->comp) {
	case NF_OCI_COMPRESS_GZIP: err = gz_write(c, data, len); break;
	case NF_OCI_COMPRESS_ZSTD: err = zstd_run(c, data, len, false); break;
	default: err = c->sink(c->sink_ctx, data, len); break;
	}
	if (err)
		c->failed = true;
	return err;
}

int nf_oci_compressor_finish(nf_oci_compressor *c)
{
	int err = 0;
	if (c->finished || c->failed)
		return nf_error_set(NF_EINTERNAL, "compressor finished after %s",
				    c->failed ? "an error" : "finish");
	c->finished = true;
	if (c->comp == NF_OCI_COMPRESS_GZIP)
		err = gz_finish(c);
	else if (c->comp == NF_OCI_COMPRESS_ZSTD)
		err = zstd_run(c, "", 0, true);
	if (err)
		c->failed = true;
	return err;
}

void nf_oci_compressor_free(nf_oci_compressor *c)
{
	if (!c)
		return;
	if (c->sync_init) {
		pthread_mutex_lock(&c->mu);
		c->stop = true;
		pthread_cond_broadcast(&c->work_cv);
		pthread_cond_broadcast(&c->done_cv);
		pthread_mutex_unlock(&c->mu);
	}
	for (unsigned i = 0; c->workers && i < c->nworkers; i++)
		if (c->workers[i].started)
			pthread_join(c->workers[i].tid, NULL);
	if (c->writer_started)
		pthread_join(c->writer, NULL);
	if (c->sync_init) {
		pthread_cond_destroy(&c->free_cv);
		pthread_cond_destroy(&c->done_cv);
		pthread_cond_destroy(&c->work_cv);
		pthread_mutex_destroy(&c->mu);
	}
	for (unsigned i = 0; c->workers && i < c->nworkers; i++) {
		if (c->workers[i].fast)
			libdeflate_free_compressor(c->workers[i].fast);
		if (c->workers[i].stored)
			libdeflate_free_compressor(c->workers[i].stored);
		free(c->workers[i].scratch);
	}
	free(c->workers);
	for (size_t i = 0; c->slots && i < c->nslots; i++) {
		free(c->slots[i].in);
		free(c->slots[i].out);
	}
	free(c->slots);
	ZSTD_freeCCtx(c->zc);
	free(c);
}
