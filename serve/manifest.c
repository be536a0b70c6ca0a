/*
 * manifest.c - strict reader of model_manifest.yaml (libyaml document API,
 * walked against a fixed schema, so depth and sizes are bounded by it).
 */
#include "serve/manifest.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "engine/engine.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

#define MAX_DEPTH 16

typedef struct mctx {
	yaml_document_t *doc;
	const char *what;
} mctx;

static int at_err(const mctx *c, const yaml_node_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int at_err(const mctx *c, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (n)
		return nf_error_set(NF_EINPUT, "%s:%zu:%zu: %s", c->what, n->start_mark.line + 1,
				    n->start_mark.column + 1, msg);
	return nf_error_set(NF_EINPUT, "%s: %s", c->what, msg);
}

static const char *scalar(const yaml_node_t *n, size_t *len)
{
	if (!n || n->type != YAML_SCALAR_NODE)
		return NULL;
	*len = n->data.scalar.length;
	return (const char *)n->data.scalar.value;
}

/* A string value, copied; "" allowed only when allow_empty. */
static int get_str(char **out, const mctx *c, yaml_node_t *n, const char *key, int allow_empty)
{
	size_t len = 0;
	const char *s = scalar(n, &len);
	if (!s)
		return at_err(c, n, "%s: expected a string", key);
	if (len > NF_MANIFEST_MAX_STR)
		return at_err(c, n, "%s: longer than %u bytes", key, NF_MANIFEST_MAX_STR);
	if (!allow_empty && len == 0)
		return at_err(c, n, "%s: must not be empty", key);
	if (memchr(s, '\0', len))
		return at_err(c, n, "%s: contains a NUL byte", key);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20)
			return at_err(c, n, "%s: contains a control character", key);
	*out = malloc(len + 1);
	if (!*out)
		return nf_error_set(NF_ENOMEM, "out of memory");
	memcpy(*out, s, len);
	(*out)[len] = '\0';
	return 0;
}

static int get_int(int *out, const mctx *c, yaml_node_t *n, const char *key, long lo, long hi)
{
	size_t len = 0;
	const char *s = scalar(n, &len);
	char buf[32];
	char *end = NULL;
	long v;
	if (!s || len == 0 || len >= sizeof buf || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return at_err(c, n, "%s: expected an integer", key);
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno || *end || end == buf)
		return at_err(c, n, "%s: expected an integer", key);
	if (v < lo || v > hi)
		return at_err(c, n, "%s: %ld is outside %ld..%ld", key, v, lo, hi);
	*out = (int)v;
	return 0;
}

static int key_is(const yaml_node_t *k, const char *name)
{
	size_t len = 0;
	const char *s = scalar(k, &len);
	return s && len == strlen(name) && memcmp(s, name, len) == 0;
}

/* Check a mapping: every key among `allowed`, none twice; required ones present. */
static int check_map(const mctx *c, yaml_node_t *map, const char *where, const char *const *allowed,
		     const char *const *required)
{
	yaml_node_pair_t *p;
	if (!map || map->type != YAML_MAPPING_NODE)
		return at_err(c, map, "%s: expected a mapping", where);
	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
		size_t len = 0;
		const char *s = scalar(k, &len);
		int known = 0;
		if (!s)
			return at_err(c, k, "%s: keys must be strings", where);
		for (const char *const *a = allowed; *a; a++)
			if (key_is(k, *a))
				known = 1;
		if (!known)
			return at_err(c, k, "%s: unknown key '%.*s'", where, (int)(len > 64 ? 64 : len), s);
		for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
			size_t l2 = 0;
			const char *s2 = scalar(yaml_document_get_node(c->doc, q->key), &l2);
			if (s2 && l2 == len && memcmp(s2, s, len) == 0)
				return at_err(c, k, "%s: duplicate key '%.*s'", where, (int)len, s);
		}
	}
	for (const char *const *r = required; r && *r; r++) {
		int found = 0;
		for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++)
			if (key_is(yaml_document_get_node(c->doc, p->key), *r))
				found = 1;
		if (!found)
			return at_err(c, map, "%s: missing key '%s'", where, *r);
	}
	return 0;
}

static yaml_node_t *get(const mctx *c, yaml_node_t *map, const char *key)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++)
		if (key_is(yaml_document_get_node(c->doc, p->key), key))
			return yaml_document_get_node(c->doc, p->value);
	return NULL;
}

static int is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return 0;
	return 1;
}

static int parse_profile(nf_manifest_profile *p, const mctx *c, yaml_node_t *n, size_t idx,
			 const char *base_dir)
{
	static const char *const keys[] = {"id", "name", "device", "arch", "precision",
					   "tensor_parallel", "engine", "gate", NULL};
	static const char *const req[] = {"id", "name", "device", "precision", "tensor_parallel",
					  "engine", "gate", NULL};
	char where[48];
	char *gate = NULL;
	nf_precision prec;
	yaml_node_t *v;
	int rc;
	snprintf(where, sizeof where, "profiles[%zu]", idx);
	if ((rc = check_map(c, n, where, keys, req)) < 0)
		goto done;
	v = get(c, n, "id");
	if ((rc = get_str(&p->id, c, v, "id", 0)) < 0)
		goto done;
	if (strlen(p->id) != 64 || !is_hex(p->id, 64)) {
		rc = at_err(c, v, "%s.id: expected 64 lowercase hex digits", where);
		goto done;
	}
	if ((rc = get_str(&p->name, c, get(c, n, "name"), "name", 0)) < 0 ||
	    (rc = get_str(&p->device, c, get(c, n, "device"), "device", 0)) < 0)
		goto done;
	v = get(c, n, "arch");
	if (v) {
		if ((rc = get_str(&p->arch, c, v, "arch", 1)) < 0)
			goto done;
	} else if (!(p->arch = calloc(1, 1))) {
		rc = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (strcmp(p->device, "cpu") != 0 &&
	    (strncmp(p->arch, "sm_", 3) != 0 || strlen(p->arch) < 5 || strlen(p->arch) > 6 ||
	     strspn(p->arch + 3, "0123456789") != strlen(p->arch) - 3)) {
		rc = at_err(c, v ? v : n, "%s.arch: a GPU profile needs an arch like sm_90", where);
		goto done;
	}
	v = get(c, n, "precision");
	if ((rc = get_str(&p->precision, c, v, "precision", 0)) < 0)
		goto done;
	if (nf_precision_parse(&prec, p->precision) < 0) {
		rc = at_err(c, v, "%s.precision: unknown precision '%s'", where, p->precision);
		goto done;
	}
	if ((rc = get_int(&p->tensor_parallel, c, get(c, n, "tensor_parallel"), "tensor_parallel", 1,
			  NF_MANIFEST_MAX_TP)) < 0)
		goto done;
	v = get(c, n, "engine");
	if ((rc = get_str(&p->engine, c, v, "engine", 0)) < 0)
		goto done;
	p->engine_path = p->engine[0] == '/' ? nf_strdup_printf("%s", p->engine)
					     : nf_path_join(base_dir, p->engine);
	if (!p->engine_path) {
		rc = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	v = get(c, n, "gate");
	if ((rc = get_str(&gate, c, v, "gate", 0)) < 0)
		goto done;
	if (!strcmp(gate, "passed"))
		p->gate = NF_GATE_PASSED;
	else if (!strcmp(gate, "failed"))
		p->gate = NF_GATE_FAILED;
	else if (!strcmp(gate, "skipped"))
		p->gate = NF_GATE_SKIPPED;
	else {
		rc = at_err(c, v, "%s.gate: expected passed, failed or skipped", where);
		goto done;
	}
	rc = 0;
done:
	free(gate);
	return rc;
}

/* serving.speculative (n may be NULL): {method?, k?, draft_profile?};
 * a draft profile only with method draft, which needs one. */
static int parse_speculative(nf_manifest_spec *sp, const mctx *c, yaml_node_t *n)
{
	static const char *const keys[] = {"method", "k", "draft_profile", NULL};
	static const char *const none[] = {NULL};
	yaml_node_t *v;
	int rc, draft;
	if (!n)
		return 0;
	if ((rc = check_map(c, n, "serving.speculative", keys, none)) < 0)
		return rc;
	if ((v = get(c, n, "method")) && (rc = get_str(&sp->method, c, v, "serving.speculative.method", 0)) < 0)
		return rc;
	if (sp->method && strcmp(sp->method, "none") && strcmp(sp->method, "lookup") &&
	    strcmp(sp->method, "draft"))
		return at_err(c, v, "serving.speculative.method: expected none, lookup or draft");
	if ((v = get(c, n, "k")) && (rc = get_int(&sp->k, c, v, "serving.speculative.k", 1, 16)) < 0)
		return rc;
	if ((v = get(c, n, "draft_profile")) &&
	    (rc = get_str(&sp->draft_profile, c, v, "serving.speculative.draft_profile", 0)) < 0)
		return rc;
	draft = sp->method && !strcmp(sp->method, "draft");
	if (draft != (sp->draft_profile != NULL))
		return at_err(c, n, draft ? "serving.speculative: method draft needs a draft_profile"
				  : "serving.speculative.draft_profile: only with method draft");
	return 0;
}

/* The draft profile, if any, is one of the manifest's (by id or name). */
static int check_draft_profile(const nf_manifest *m, const mctx *c, yaml_node_t *n)
{
	const char *want = m->speculative.draft_profile;
	if (!want)
		return 0;
	for (size_t i = 0; i < m->n_profiles; i++)
		if (!strcmp(m->profiles[i].id, want) || !strcmp(m->profiles[i].name, want))
			return 0;
	return at_err(c, get(c, n, "draft_profile"),
		      "serving.speculative.draft_profile: '%s' is not one of the profiles", want);
}

/* The scalar at key of map must be the string want (apiVersion, kind). */
static int expect_str(const mctx *c, yaml_node_t *map, const char *key, const char *want)
{
	yaml_node_t *v = get(c, map, key);
	char *s = NULL;
	int rc = get_str(&s, c, v, key, 0);
	if (rc >= 0 && strcmp(s, want) != 0)
		rc = at_err(c, v, "%s: expected %s, got '%s'", key, want, s);
	free(s);
	return rc < 0 ? rc : 0;
}

static int parse_model(nf_manifest *m, const mctx *c, yaml_node_t *n)
{
	static const char *const keys[] = {"name", "family", "version", NULL};
	int rc;
	if ((rc = check_map(c, n, "model", keys, keys)) < 0 ||
	    (rc = get_str(&m->model_name, c, get(c, n, "name"), "model.name", 0)) < 0 ||
	    (rc = get_str(&m->model_family, c, get(c, n, "family"), "model.family", 0)) < 0 ||
	    (rc = get_str(&m->model_version, c, get(c, n, "version"), "model.version", 0)) < 0)
		return rc;
	for (const char *p = m->model_name; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-/:", *p))
			return at_err(c, get(c, n, "name"), "model.name: only letters, digits and ._-/: allowed");
	return 0;
}

static int parse_recipe_digest(nf_manifest *m, const mctx *c, yaml_node_t *v)
{
	int rc;
	if ((rc = get_str(&m->recipe_digest, c, v, "recipe_digest", 0)) < 0)
		return rc;
	if (strncmp(m->recipe_digest, "sha256:", 7) != 0 || strlen(m->recipe_digest) != 71 ||
	    !is_hex(m->recipe_digest + 7, 64))
		return at_err(c, v, "recipe_digest: expected sha256:<64 lowercase hex>");
	return 0;
}

static int parse_chat_template(nf_manifest *m, const mctx *c, yaml_node_t *v)
{
	char *s = NULL;
	int rc = get_str(&s, c, v, "serving.chat_template", 0);
	if (rc >= 0 && nf_chat_template_parse(&m->chat_template, s) < 0)
		rc = at_err(c, v, "serving.chat_template: expected model, plain, llama2 or chatml");
	free(s);
	return rc < 0 ? rc : 0;
}

static int want_list(const mctx *c, yaml_node_t *v, const char *key)
{
	return v->type == YAML_SEQUENCE_NODE ? 0 : at_err(c, v, "%s: expected a list", key);
}

/* Each entry of the list v (absent: none) through item, at most
 * NF_MANIFEST_MAX_PREFS of them, *count the entries read. */
static int parse_pref_list(nf_manifest *m, const mctx *c, yaml_node_t *v, const char *key,
			   const size_t *count,
			   int (*item)(nf_manifest *m, const mctx *c, yaml_node_t *e, const char *key))
{
	int rc;
	if (!v)
		return 0;
	if ((rc = want_list(c, v, key)) < 0)
		return rc;
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		yaml_node_t *e = yaml_document_get_node(c->doc, *it);
		if (*count == NF_MANIFEST_MAX_PREFS)
			return at_err(c, e, "%s: more than %d entries", key, NF_MANIFEST_MAX_PREFS);
		if ((rc = item(m, c, e, key)) < 0)
			return rc;
	}
	return 0;
}

static int precision_pref(nf_manifest *m, const mctx *c, yaml_node_t *e, const char *key)
{
	nf_precision prec;
	int rc = get_str(&m->precision_pref[m->n_precision_pref], c, e, key, 0);
	if (rc < 0)
		return rc;
	if (nf_precision_parse(&prec, m->precision_pref[m->n_precision_pref++]) < 0)
		return at_err(c, e, "%s: unknown precision", key);
	return 0;
}

static int tp_pref(nf_manifest *m, const mctx *c, yaml_node_t *e, const char *key)
{
	return get_int(&m->tp_pref[m->n_tp_pref++], c, e, key, 1, NF_MANIFEST_MAX_TP);
}

static int parse_precision_prefs(nf_manifest *m, const mctx *c, yaml_node_t *v)
{
	return parse_pref_list(m, c, v, "serving.precision_preference", &m->n_precision_pref,
			       precision_pref);
}

static int parse_tp_prefs(nf_manifest *m, const mctx *c, yaml_node_t *v)
{
	return parse_pref_list(m, c, v, "serving.tensor_parallel_preference", &m->n_tp_pref, tp_pref);
}

static int parse_serving(nf_manifest *m, const mctx *c, yaml_node_t *n)
{
	static const char *const keys[] = {"chat_template", "precision_preference",
					   "tensor_parallel_preference", "speculative",
					   "max_batch", "max_context", NULL};
	static const char *const required[] = {"chat_template", NULL};
	yaml_node_t *v;
	int rc;
	if ((rc = check_map(c, n, "serving", keys, required)) < 0 ||
	    (rc = parse_chat_template(m, c, get(c, n, "chat_template"))) < 0 ||
	    (rc = parse_precision_prefs(m, c, get(c, n, "precision_preference"))) < 0 ||
	    (rc = parse_tp_prefs(m, c, get(c, n, "tensor_parallel_preference"))) < 0)
		return rc;
	if ((v = get(c, n, "max_batch")) &&
	    (rc = get_int(&m->max_batch, c, v, "serving.max_batch", 1, 4096)) < 0)
		return rc;
	if ((v = get(c, n, "max_context")) &&
	    (rc = get_int(&m->max_context, c, v, "serving.max_context", 1, 1 << 24)) < 0)
		return rc;
	return parse_speculative(&m->speculative, c, get(c, n, "speculative"));
}

/* 1..NF_MANIFEST_MAX_PROFILES profiles, no two with the same id or name. */
static int parse_profiles(nf_manifest *m, const mctx *c, yaml_node_t *n, const char *base_dir)
{
	size_t count;
	int rc;
	if (n->type != YAML_SEQUENCE_NODE)
		return at_err(c, n, "profiles: expected a list");
	count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	if (count == 0 || count > NF_MANIFEST_MAX_PROFILES)
		return at_err(c, n, "profiles: expected 1..%d entries, got %zu", NF_MANIFEST_MAX_PROFILES,
			      count);
	m->profiles = calloc(count, sizeof *m->profiles);
	if (!m->profiles)
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (size_t i = 0; i < count; i++) {
		yaml_node_t *e = yaml_document_get_node(c->doc, n->data.sequence.items.start[i]);
		m->n_profiles = i + 1;
		if ((rc = parse_profile(&m->profiles[i], c, e, i, base_dir)) < 0)
			return rc;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(m->profiles[j].id, m->profiles[i].id) ||
			    !strcmp(m->profiles[j].name, m->profiles[i].name))
				return at_err(c, e, "profiles[%zu]: same id or name as profiles[%zu]", i, j);
	}
	return 0;
}

static int parse_root(nf_manifest *m, const mctx *c, yaml_node_t *root, const char *base_dir)
{
	static const char *const keys[] = {"apiVersion", "kind", "model", "recipe_digest",
					   "serving", "profiles", NULL};
	int rc;
	if ((rc = check_map(c, root, "manifest", keys, keys)) < 0 ||
	    (rc = expect_str(c, root, "apiVersion", "nimfactory/v1")) < 0 ||
	    (rc = expect_str(c, root, "kind", "ModelManifest")) < 0 ||
	    (rc = parse_model(m, c, get(c, root, "model"))) < 0 ||
	    (rc = parse_recipe_digest(m, c, get(c, root, "recipe_digest"))) < 0 ||
	    (rc = parse_serving(m, c, get(c, root, "serving"))) < 0 ||
	    (rc = parse_profiles(m, c, get(c, root, "profiles"), base_dir)) < 0)
		return rc;
	/* after the profiles: the draft must name one of them */
	return check_draft_profile(m, c, get(c, get(c, root, "serving"), "speculative"));
}

/* The schema nests four levels at most; refuse deeper documents from their
 * events before libyaml's loader builds them (its cost grows with depth
 * times size: a megabyte of "[" takes minutes). */
static int check_depth(const char *data, size_t len, const char *what)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	int depth = 0, rc = 0, done = 0;
	if (!yaml_parser_initialize(&parser))
		return nf_error_set(NF_ENOMEM, "out of memory");
	yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
	while (!done) {
		if (!yaml_parser_parse(&parser, &ev)) {
			rc = nf_error_set(NF_EINPUT, "%s:%zu:%zu: %s", what, parser.problem_mark.line + 1,
					  parser.problem_mark.column + 1,
					  parser.problem ? parser.problem : "YAML syntax error");
			break;
		}
		if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
			if (++depth > MAX_DEPTH) {
				rc = nf_error_set(NF_EINPUT, "%s:%zu:%zu: nested deeper than %d levels", what,
						  ev.start_mark.line + 1, ev.start_mark.column + 1, MAX_DEPTH);
				done = 1;
			}
		} else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
			depth--;
		} else if (ev.type == YAML_STREAM_END_EVENT) {
			done = 1;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	return rc;
}

int nf_manifest_parse(nf_manifest **out, const char *data, size_t len, const char *what)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	int have_parser = 0, have_doc = 0;
	nf_manifest *m = NULL;
	char *base_dir = NULL;
	const char *slash;
	mctx c;
	int rc;

	*out = NULL;
	if (len > NF_MANIFEST_MAX_BYTES) {
		rc = nf_error_set(NF_EINPUT, "%s: larger than %u bytes", what, NF_MANIFEST_MAX_BYTES);
		goto done;
	}
	slash = strrchr(what, '/');
	base_dir = slash ? nf_strdup_printf("%.*s", (int)(slash - what), what) : nf_strdup_printf(".");
	if (base_dir && !*base_dir) {
		free(base_dir);
		base_dir = nf_strdup_printf("/");
	}
	if ((rc = check_depth(data, len, what)) < 0)
		goto done;
	m = calloc(1, sizeof *m);
	if (!m || !base_dir || !(m->path = nf_strdup_printf("%s", what))) {
		rc = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (!yaml_parser_initialize(&parser)) {
		rc = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	have_parser = 1;
	yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
	if (!yaml_parser_load(&parser, &doc)) {
		rc = nf_error_set(NF_EINPUT, "%s:%zu:%zu: %s", what, parser.problem_mark.line + 1,
				  parser.problem_mark.column + 1,
				  parser.problem ? parser.problem : "YAML syntax error");
		goto done;
	}
	have_doc = 1;
	c.doc = &doc;
	c.what = what;
	if (!yaml_document_get_root_node(&doc)) {
		rc = nf_error_set(NF_EINPUT, "%s: empty document", what);
		goto done;
	}
	if ((rc = parse_root(m, &c, yaml_document_get_root_node(&doc), base_dir)) < 0)
		goto done;
	*out = m;
	m = NULL;
	rc = 0;
done:
	if (have_doc)
		yaml_document_delete(&doc);
	if (have_parser)
		yaml_parser_delete(&parser);
	nf_manifest_free(m);
	free(base_dir);
	return rc;
}

int nf_manifest_load(nf_manifest **out, const char *path)
{
	char *data = NULL;
	size_t len = 0;
	int rc;
	*out = NULL;
	if ((rc = nf_fs_read_file(&data, &len, path, NF_MANIFEST_MAX_BYTES)) < 0)
		return rc;
	rc = nf_manifest_parse(out, data, len, path);
	free(data);
	return rc;
}

void nf_manifest_free(nf_manifest *m)
{
	if (!m)
		return;
	free(m->speculative.method);
	free(m->speculative.draft_profile);
	for (size_t i = 0; i < m->n_profiles; i++) {
		nf_manifest_profile *p = &m->profiles[i];
		free(p->id);
		free(p->name);
		free(p->device);
		free(p->arch);
		free(p->precision);
		free(p->engine);
		free(p->engine_path);
	}
	free(m->profiles);
	for (size_t i = 0; i < m->n_precision_pref; i++)
		free(m->precision_pref[i]);
	free(m->path);
	free(m->model_name);
	free(m->model_family);
	free(m->model_version);
	free(m->recipe_digest);
	free(m);
}

const char *nf_chat_template_name(nf_chat_template t)
{
	switch (t) {
	case NF_CHAT_PLAIN: return "plain";
	case NF_CHAT_LLAMA2: return "llama2";
	case NF_CHAT_CHATML: return "chatml";
	case NF_CHAT_MODEL: return "model";
	}
	return "?";
}

int nf_chat_template_parse(nf_chat_template *out, const char *name)
{
	if (!strcmp(name, "plain"))
		*out = NF_CHAT_PLAIN;
	else if (!strcmp(name, "llama2"))
		*out = NF_CHAT_LLAMA2;
	else if (!strcmp(name, "chatml"))
		*out = NF_CHAT_CHATML;
	else if (!strcmp(name, "model"))
		*out = NF_CHAT_MODEL;
	else
		return nf_error_set(NF_EINPUT, "unknown chat template '%s'", name);
	return 0;
}

const char *nf_gate_name(nf_gate_state g)
{
	switch (g) {
	case NF_GATE_PASSED: return "passed";
	case NF_GATE_FAILED: return "failed";
	case NF_GATE_SKIPPED: return "skipped";
	}
	return "?";
}
