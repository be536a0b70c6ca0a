/*
 * layer.h - a reproducible, streamed OCI layer (a tar, optionally gzip or zstd).
 *
 * Entries are collected first (files from a source tree under a destination
 * prefix, single files, in-memory bytes, symlinks, directories), then written
 * in one pass by nf_oci_layer_finish: sorted by path (bytewise), every parent
 * directory emitted before its entries, mtime = the caller's epoch, uid/gid 0
 * with empty user/group names, modes normalised (dirs 0755, files 0644, or
 * 0755 when any execute bit is set; symlinks 0777), no xattrs/ACLs/atime/ctime,
 * pax-restricted format.  libarchive writes the tar into a callback that hashes
 * it (diff_id), compresses it and streams the result into a blob of the layout.
 * Each source file is read once, at finish.  The same inputs give the same
 * bytes whatever the source folder, umask, clock or file times.
 */
#ifndef NF_IMAGES_LAYER_H
#define NF_IMAGES_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "images/blob.h"

typedef enum nf_oci_compression {
	NF_OCI_COMPRESS_NONE = 0, /* application/vnd.oci.image.layer.v1.tar */
	NF_OCI_COMPRESS_GZIP = 1, /* ...tar+gzip: one member per 1 MiB block (images/compress.h) */
	NF_OCI_COMPRESS_ZSTD = 2, /* ...tar+zstd: level 3, multi-threaded format, no checksum/size */
} nf_oci_compression;

#define NF_OCI_MT_LAYER "application/vnd.oci.image.layer.v1.tar"
#define NF_OCI_MT_LAYER_GZIP "application/vnd.oci.image.layer.v1.tar+gzip"
#define NF_OCI_MT_LAYER_ZSTD "application/vnd.oci.image.layer.v1.tar+zstd"

/* "none" | "gzip" | "zstd" -> *out; NF_EINPUT otherwise. */
int nf_oci_compression_parse(nf_oci_compression *out, const char *name);
const char *nf_oci_compression_name(nf_oci_compression c);
const char *nf_oci_compression_media_type(nf_oci_compression c);

/* What a finished layer is: its blob descriptor and the sha256 of the tar. */
typedef struct nf_oci_layer_desc {
	nf_oci_desc blob;                       /* media type, digest, size of the stored blob */
	char diff_id[NF_OCI_DIGEST_LEN + 1];    /* "sha256:..." of the uncompressed tar */
	uint64_t tar_size;                      /* bytes of the uncompressed tar */
	size_t entries;                         /* tar entries written (dirs included) */
} nf_oci_layer_desc;

typedef struct nf_oci_layer nf_oci_layer;

/*
 * Start a layer to be stored in layout_dir (blobs/sha256 created if missing).
 * epoch: the mtime of every entry (SOURCE_DATE_EPOCH or the recipe's time), >= 0.
 * Free with nf_oci_layer_free.
 */
int nf_oci_layer_new(nf_oci_layer **out, const char *layout_dir, nf_oci_compression comp,
		     int64_t epoch);

/*
 * Destination paths are relative to the image root ("opt/nim/x"; one leading
 * '/' is dropped); "", ".", ".." components, empty components and paths over
 * 4095 bytes are refused (NF_EINPUT).  The same path added twice is refused,
 * except a directory added again.
 */

/*
 * Every file, directory and symlink under src_dir (recursively, lstat, symlinks
 * kept as symlinks) mapped under dest_prefix ("" = image root); the prefix
 * directory itself is emitted too.  Other file types are refused.  The tree is
 * walked now; file contents are read at finish.
 */
int nf_oci_layer_add_tree(nf_oci_layer *l, const char *src_dir, const char *dest_prefix);

/* One regular file at dest; mode 0 = 0644/0755 from the source's execute bits,
 * else mode & 0777. */
int nf_oci_layer_add_file(nf_oci_layer *l, const char *src_path, const char *dest,
			  unsigned mode);

/* In-memory bytes as a file (copied now); mode 0 = 0644. */
int nf_oci_layer_add_bytes(nf_oci_layer *l, const char *dest, const void *data, size_t len,
			   unsigned mode);

/* A symlink dest -> target (target copied as is, may be relative or absolute). */
int nf_oci_layer_add_symlink(nf_oci_layer *l, const char *dest, const char *target);

/* A directory; mode 0 = 0755. */
int nf_oci_layer_add_dir(nf_oci_layer *l, const char *dest, unsigned mode);

/*
 * Compression threads for finish (default 0 = one per online CPU); the blob's
 * bytes are the same for every value.  At most NF_OCI_COMPRESS_THREADS_MAX.
 */
int nf_oci_layer_set_threads(nf_oci_layer *l, unsigned threads);

/*
 * Write the layer in one pass and store its blob; fills *out.  The layer may
 * only be freed afterwards (finish once).
 */
int nf_oci_layer_finish(nf_oci_layer_desc *out, nf_oci_layer *l);

void nf_oci_layer_free(nf_oci_layer *l);

#endif
