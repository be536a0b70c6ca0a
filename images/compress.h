/*
 * compress.h - the reproducible, multi-threaded compressor of layer streams.
 *
 * Bytes written in go out, compressed, through a sink callback, in order.
 * The output depends only on the input bytes and the compression (and the
 * library versions), never on the thread count, the machine, its load or how
 * the input was cut into writes:
 *
 *   gzip  the input is cut into fixed blocks of NF_OCI_GZ_BLOCK bytes; each
 *         block becomes one gzip member (RFC 1952 allows a file of several,
 *         and gzip, zlib's gzread, Go's gzip reader, Python's gzip read them
 *         all): header with no name, mtime 0, XFL 0, OS 255; a raw deflate
 *         stream from libdeflate at NF_OCI_GZ_LEVEL, or stored (level 0) when
 *         four 16 KiB samples of the block all save less than 2%; CRC-32 and
 *         size.  Blocks are compressed in parallel by worker threads and
 *         emitted in input order.  An empty input gives one empty member.
 *   zstd  libzstd level 3, no checksum, no content size, no dictionary id,
 *         always in its multi-threaded format (nbWorkers >= 1, whose output
 *         libzstd keeps identical for any worker count) with a fixed job size.
 *   none  the bytes as they are.
 */
#ifndef NF_IMAGES_COMPRESS_H
#define NF_IMAGES_COMPRESS_H

#include <stddef.h>

#include "images/layer.h"

#define NF_OCI_GZ_BLOCK ((size_t)1 << 20) /* input bytes per gzip member */
#define NF_OCI_GZ_LEVEL 1                 /* libdeflate level of a compressed member */
#define NF_OCI_ZSTD_LEVEL 3
#define NF_OCI_ZSTD_JOB ((size_t)4 << 20) /* zstd job size (fixed: part of the format) */
#define NF_OCI_COMPRESS_THREADS_MAX 64

/* Where the compressed bytes go, in order; returns 0 or a negative NF_E* (set). */
typedef int (*nf_oci_sink_fn)(void *ctx, const void *data, size_t len);

typedef struct nf_oci_compressor nf_oci_compressor;

/*
 * A compressor writing to sink(sink_ctx, ...).  threads: compression threads,
 * 0 = one per online CPU (at most 8; NF_OCI_COMPRESS_THREADS_MAX at most).
 * With more than 1, the caller's thread only fills blocks: `threads` workers
 * compress them (gzip; zstd has as many of libzstd's own) and one more thread
 * calls the sink, in order, never two calls at once.  With 1, gzip runs
 * inline and zstd uses one libzstd worker; the sink is called from the
 * caller's thread.  The output is the same for every thread count.
 * Free with nf_oci_compressor_free (which stops and joins the threads).
 */
int nf_oci_compressor_new(nf_oci_compressor **out, nf_oci_compression comp, unsigned threads,
			  nf_oci_sink_fn sink, void *sink_ctx);

/* Compress len bytes (may be 0); the sink may be called before it returns. */
int nf_oci_compressor_write(nf_oci_compressor *c, const void *data, size_t len);

/* Flush everything through the sink and end the stream (once; write no more). */
int nf_oci_compressor_finish(nf_oci_compressor *c);

/* The thread count in use (0 for none, which runs inline). */
unsigned nf_oci_compressor_threads(const nf_oci_compressor *c);

void nf_oci_compressor_free(nf_oci_compressor *c);

#endif
