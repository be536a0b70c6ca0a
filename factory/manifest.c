/* manifest.c - render model_manifest.yaml with libyaml's emitter (see manifest.h). */
#include "factory/manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "util/error.h"
#include "util/banned.h"

typedef struct out_buf {
	char *data;
	size_t len, cap;
	int failed;
} out_buf;

static int write_handler(void *user, unsigned char *buffer, size_t size)
{
	out_buf *b = user;
	if (b->len + size + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + size + 1)
			cap *= 2;
		char *p = realloc(b->data, cap);
		if (!p) {
			b->failed = 1;
			return 0;
		}
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, buffer, size);
	b->len += size;
	b->data[b->len] = '\0';
	return 1;
}

/* Emitting helpers: each returns 0 or -1 (emitter error). */
static int emit(yaml_emitter_t *e, yaml_event_t *ev) { return yaml_emitter_emit(e, ev) ? 0 : -1; }

static int scalar_styled(yaml_emitter_t *e, const char *s, yaml_scalar_style_t style)
{
	yaml_event_t ev;
	if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), 1, 1,
					  style))
		return -1;
	return emit(e, &ev);
}

static int scalar(yaml_emitter_t *e, const char *s) { return scalar_styled(e, s, YAML_ANY_SCALAR_STYLE); }

/* Strings that could read as another type are quoted. */
static int string(yaml_emitter_t *e, const char *s)
{
	return scalar_styled(e, s, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
}

static int integer(yaml_emitter_t *e, long v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%ld", v);
	return scalar(e, buf);
}

static int map_start(yaml_emitter_t *e, int flow)
{
	yaml_event_t ev;
	yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
					    flow ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE);
	return emit(e, &ev);
}

static int map_end(yaml_emitter_t *e)
{
	yaml_event_t ev;
	yaml_mapping_end_event_initialize(&ev);
	return emit(e, &ev);
}

static int seq_start(yaml_emitter_t *e, int flow)
{
	yaml_event_t ev;
	yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
					     flow ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE);
	return emit(e, &ev);
}

static int seq_end(yaml_emitter_t *e)
{
	yaml_event_t ev;
	yaml_sequence_end_event_initialize(&ev);
	return emit(e, &ev);
}

static int kv_string(yaml_emitter_t *e, const char *k, const char *v)
{
	return scalar(e, k) || string(e, v) ? -1 : 0;
}

static int emit_profile(yaml_emitter_t *e, const nf_manifest_info *info, const nf_profile *p)
{
	char engine[256];
	snprintf(engine, sizeof(engine), "%s/%s", info->engine_prefix ? info->engine_prefix : "engines",
		 p->id);
	if (map_start(e, 0) || kv_string(e, "id", p->id) || kv_string(e, "name", p->name) ||
	    kv_string(e, "device", p->device) || kv_string(e, "arch", p->arch) ||
	    kv_string(e, "precision", nf_precision_name(p->precision)) ||
	    scalar(e, "tensor_parallel") || integer(e, p->tensor_parallel) ||
	    kv_string(e, "engine", engine) || kv_string(e, "gate", nf_verdict_name(p->verdict)) ||
	    map_end(e))
		return -1;
	return 0;
}

/* serving.speculative, when the recipe names it. */
static int emit_speculative(yaml_emitter_t *e, const nf_manifest_info *info)
{
	if (!info->spec_method)
		return 0;
	if (scalar(e, "speculative") || map_start(e, 1) || kv_string(e, "method", info->spec_method) ||
	    (info->spec_k && (scalar(e, "k") || integer(e, info->spec_k))) ||
	    (info->spec_draft_profile && kv_string(e, "draft_profile", info->spec_draft_profile)))
		return -1;
	return map_end(e);
}

/* serving.max_batch and serving.max_context, when the recipe sets them. */
static int emit_sizes(yaml_emitter_t *e, const nf_manifest_info *info)
{
	if (info->max_batch && (scalar(e, "max_batch") || integer(e, info->max_batch)))
		return -1;
	if (info->max_context && (scalar(e, "max_context") || integer(e, info->max_context)))
		return -1;
	return 0;
}

/* The draft profile, if any, is one of those rendered: nimserve refuses a
 * manifest naming another. */
static int check_draft_profile(const nf_manifest_info *info, const nf_profile *profiles, size_t n)
{
	if (!info->spec_draft_profile)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(profiles[i].name, info->spec_draft_profile))
			return 0;
	return nf_error_set(NF_EINPUT, "serving.speculative.draft_profile: '%s' is not one of the "
			    "image's profiles", info->spec_draft_profile);
}

static int emit_document(yaml_emitter_t *e, const nf_manifest_info *info,
			 const nf_profile *profiles, size_t n)
{
	yaml_event_t ev;
	char digest[80];

	snprintf(digest, sizeof(digest), "sha256:%s", info->recipe_digest);
	yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
	if (emit(e, &ev))
		return -1;
	yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
	if (emit(e, &ev) || map_start(e, 0))
		return -1;
	if (kv_string(e, "apiVersion", "nimfactory/v1") || kv_string(e, "kind", "ModelManifest"))
		return -1;
	if (scalar(e, "model") || map_start(e, 0) || kv_string(e, "name", info->model_name) ||
	    kv_string(e, "family", info->model_family) ||
	    (info->model_version && kv_string(e, "version", info->model_version)) || map_end(e))
		return -1;
	if (kv_string(e, "recipe_digest", digest))
		return -1;
	if (scalar(e, "serving") || map_start(e, 0) ||
	    kv_string(e, "chat_template", info->chat_template ? info->chat_template : "plain"))
		return -1;
	if (scalar(e, "precision_preference") || seq_start(e, 1))
		return -1;
	for (size_t i = 0; i < info->n_precision_preference; i++)
		if (string(e, info->precision_preference[i]))
			return -1;
	if (seq_end(e) || scalar(e, "tensor_parallel_preference") || seq_start(e, 1))
		return -1;
	for (size_t i = 0; i < info->n_tp_preference; i++)
		if (integer(e, info->tp_preference[i]))
			return -1;
	if (seq_end(e) || emit_speculative(e, info) || emit_sizes(e, info) || map_end(e))
		return -1;
	if (scalar(e, "profiles") || seq_start(e, 0))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (emit_profile(e, info, &profiles[i]))
			return -1;
	if (seq_end(e) || map_end(e))
		return -1;
	yaml_document_end_event_initialize(&ev, 1);
	if (emit(e, &ev))
		return -1;
	yaml_stream_end_event_initialize(&ev);
	return emit(e, &ev);
}

int nf_manifest_render(char **out, size_t *len, const nf_manifest_info *info,
		       const nf_profile *profiles, size_t n_profiles)
{
	yaml_emitter_t emitter;
	out_buf buf = {0};
	int err = 0;

	*out = NULL;
	*len = 0;
	if ((err = check_draft_profile(info, profiles, n_profiles)) < 0)
		return err;
	if (!yaml_emitter_initialize(&emitter))
		return nf_error_set(NF_ENOMEM, "model manifest: cannot start the YAML emitter");
	yaml_emitter_set_output(&emitter, write_handler, &buf);
	yaml_emitter_set_unicode(&emitter, 1);
	yaml_emitter_set_width(&emitter, 4096);
	if (emit_document(&emitter, info, profiles, n_profiles) || buf.failed) {
		err = nf_error_set(buf.failed ? NF_ENOMEM : NF_EINTERNAL, "model manifest: %s",
				   emitter.problem ? emitter.problem : "out of memory");
		free(buf.data);
	} else {
		*out = buf.data;
		*len = buf.len;
	}
	yaml_emitter_delete(&emitter);
	return err;
}
