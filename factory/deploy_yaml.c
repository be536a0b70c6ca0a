/* deploy_yaml.c - JSON values as YAML through libyaml's emitter (see deploy.h). */
#include "factory/deploy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "util/error.h"
#include "util/banned.h"

/* Deeper than any manifest we write; a guard against a cycle-free but
 * runaway tree rather than a limit users meet. */
#define MAX_DEPTH 32

typedef struct out_buf {
	char *data;
	size_t len, cap;
} out_buf;

static int append(out_buf *b, const void *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *d = realloc(b->data, cap);
		if (!d)
			return -1;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

static int write_handler(void *user, unsigned char *buffer, size_t size)
{
	return append(user, buffer, size) == 0;
}

static int emit(yaml_emitter_t *e, yaml_event_t *ev) { return yaml_emitter_emit(e, ev) ? 0 : -1; }

static int scalar(yaml_emitter_t *e, const char *s, yaml_scalar_style_t style)
{
	yaml_event_t ev;
	if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), 1, 1,
					  style))
		return -1;
	return emit(e, &ev);
}

static int emit_value(yaml_emitter_t *e, const json_t *v, int depth);

/* Empty collections in flow style ({} and []), the rest in block style. */
static int emit_object(yaml_emitter_t *e, const json_t *v, int depth)
{
	yaml_event_t ev;
	const char *key;
	json_t *item;
	yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
					    json_object_size(v) ? YAML_BLOCK_MAPPING_STYLE
								: YAML_FLOW_MAPPING_STYLE);
	if (emit(e, &ev))
		return -1;
	/* jansson keeps insertion order: the order the objects were built in */
	json_object_foreach((json_t *)v, key, item) {
		/* keys are ours and plain when they can be; the emitter quotes the rest */
		if (scalar(e, key, YAML_ANY_SCALAR_STYLE) || emit_value(e, item, depth + 1))
			return -1;
	}
	yaml_mapping_end_event_initialize(&ev);
	return emit(e, &ev);
}

static int emit_array(yaml_emitter_t *e, const json_t *v, int depth)
{
	yaml_event_t ev;
	size_t i;
	json_t *item;
	yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
					     json_array_size(v) ? YAML_BLOCK_SEQUENCE_STYLE
								: YAML_FLOW_SEQUENCE_STYLE);
	if (emit(e, &ev))
		return -1;
	json_array_foreach(v, i, item) {
		if (emit_value(e, item, depth + 1))
			return -1;
	}
	yaml_sequence_end_event_initialize(&ev);
	return emit(e, &ev);
}

static int emit_value(yaml_emitter_t *e, const json_t *v, int depth)
{
	char num[64];
	if (depth > MAX_DEPTH)
		return -1;
	switch (json_typeof(v)) {
	case JSON_OBJECT: return emit_object(e, v, depth);
	case JSON_ARRAY: return emit_array(e, v, depth);
	case JSON_STRING:
		/* double-quoted: "true", "8000" or "1.0" stay strings when read back */
		return scalar(e, json_string_value(v), YAML_DOUBLE_QUOTED_SCALAR_STYLE);
	case JSON_INTEGER:
		snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
		return scalar(e, num, YAML_PLAIN_SCALAR_STYLE);
	case JSON_REAL:
		snprintf(num, sizeof(num), "%.17g", json_real_value(v));
		return scalar(e, num, YAML_PLAIN_SCALAR_STYLE);
	case JSON_TRUE: return scalar(e, "true", YAML_PLAIN_SCALAR_STYLE);
	case JSON_FALSE: return scalar(e, "false", YAML_PLAIN_SCALAR_STYLE);
	default: return scalar(e, "null", YAML_PLAIN_SCALAR_STYLE);
	}
}

static int emit_docs(yaml_emitter_t *e, const json_t *const *docs, size_t n)
{
	yaml_event_t ev;
	yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
	if (emit(e, &ev))
		return -1;
	for (size_t i = 0; i < n; i++) {
		/* the first document's "---" is implicit, the others' explicit */
		yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, i == 0);
		if (emit(e, &ev) || emit_value(e, docs[i], 0))
			return -1;
		yaml_document_end_event_initialize(&ev, 1);
		if (emit(e, &ev))
			return -1;
	}
	yaml_stream_end_event_initialize(&ev);
	return emit(e, &ev);
}

int nf_deploy_yaml(char **out, size_t *len, const json_t *const *docs, size_t n,
		   const char *header)
{
	yaml_emitter_t e;
	out_buf b = {0};
	int failed;

	*out = NULL;
	*len = 0;
	if (header && append(&b, header, strlen(header)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	if (!yaml_emitter_initialize(&e)) {
		free(b.data);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	yaml_emitter_set_output(&e, write_handler, &b);
	yaml_emitter_set_unicode(&e, 1);
	yaml_emitter_set_width(&e, -1); /* no folding of long strings */
	yaml_emitter_set_indent(&e, 2);
	failed = emit_docs(&e, docs, n) || !yaml_emitter_flush(&e);
	if (failed) {
		int err = nf_error_set(e.error == YAML_MEMORY_ERROR ? NF_ENOMEM : NF_EINTERNAL,
				       "YAML emitter: %s", e.problem ? e.problem : "value nested too deep");
		yaml_emitter_delete(&e);
		free(b.data);
		return err;
	}
	yaml_emitter_delete(&e);
	if (!b.data && append(&b, "", 0))
		return nf_error_set(NF_ENOMEM, "out of memory");
	*out = b.data;
	*len = b.len;
	return 0;
}
