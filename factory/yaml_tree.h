/*
 * yaml_tree.h - a small, bounded YAML document tree for the recipe parser.
 *
 * libyaml's event parser feeds a tree of scalars, mappings and sequences,
 * each node carrying its 1-based line:col.  Hostile input is refused early
 * with one "FILE:LINE:COL: message" error (NF_EINPUT): a file over the byte
 * limit, NUL bytes, control characters, invalid UTF-8, anchors, aliases and
 * tags, nesting deeper than the depth limit, more nodes than the node limit,
 * scalars longer than the scalar limit, and more than one document.  Memory
 * is bounded by the limits, never by what the input claims.
 */
#ifndef NF_FACTORY_YAML_TREE_H
#define NF_FACTORY_YAML_TREE_H

#include <stddef.h>

typedef enum nf_ynode_type {
	NF_YNODE_SCALAR,
	NF_YNODE_MAP,
	NF_YNODE_SEQ,
} nf_ynode_type;

typedef struct nf_ynode {
	nf_ynode_type type;
	int line, col;          /* 1-based position of the node's first character */
	int plain;              /* scalar: 1 when written plain (unquoted), so it may be a
	                         * number, boolean or null; 0 for quoted and block scalars */
	char *str;              /* scalar: the text, NUL-terminated (holds no NUL) */
	size_t len;             /* scalar: strlen(str) */
	struct nf_ynode **kids; /* seq: items; map: key, value, key, value, ... (owned) */
	size_t n;               /* entries in kids (for a map: twice the number of pairs) */
	size_t cap;
} nf_ynode;

typedef struct nf_yaml_limits {
	size_t max_bytes;  /* whole input */
	size_t max_depth;  /* nested mappings/sequences */
	size_t max_nodes;  /* every scalar, mapping and sequence */
	size_t max_scalar; /* bytes in one scalar */
} nf_yaml_limits;

/*
 * Parse one YAML document from data[0..len) (need not be NUL-terminated).
 * `file` names the input in error messages.  On success *out is the root
 * node, owned by the caller (nf_yaml_free), or NULL when the input holds no
 * document or only an empty (null) one.
 */
int nf_yaml_parse(nf_ynode **out, const char *file, const char *data, size_t len,
		  const nf_yaml_limits *lim);

void nf_yaml_free(nf_ynode *n); /* NULL is fine */

#endif
