/*
 * registry_cli.c - shared by push, promote and inspect REF (see
 * registry_cli.h): options, progress, debug lines, and the remote inspect.
 */
#define _GNU_SOURCE
#include "cmd/nimfactory/registry_cli.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "images/artifact.h"
#include "images/manifest.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/banned.h"

static void on_log(void *ctx, const char *line)
{
	nf_cli_reg *st = ctx;
	if (st->line_open) {
		fputc('\n', stderr);
		st->line_open = false;
	}
	fprintf(stderr, "nimfactory %s: %s\n", st->cmd, line);
}

static void on_progress(void *ctx, const char *what, uint64_t done, uint64_t total, double seconds)
{
	nf_cli_reg *st = ctx;
	double now = nf_reg_now();
	char shortw[13];

	if (strncmp(st->what, what, sizeof(st->what) - 1)) {
		snprintf(st->what, sizeof(st->what), "%s", what);
		st->start = now;
	}
	snprintf(shortw, sizeof(shortw), "%s", what);
	double el = now - st->start;
	double rate = el > 0 ? (double)done / el / 1e6 : 0.0;
	if (seconds < 0) { /* finished */
		if (st->tty) {
			fprintf(stderr, "\r  %s %8.1f MiB  %7.1f MB/s  done\033[K\n", shortw,
				(double)total / 1048576.0, rate);
			st->line_open = false;
		} else if (total >= (1u << 20)) {
			fprintf(stderr, "nimfactory %s: blob %s: %.1f MiB at %.1f MB/s\n", st->cmd, shortw,
				(double)total / 1048576.0, rate);
		}
		st->what[0] = '\0';
		return;
	}
	if (!st->tty)
		return;
	fprintf(stderr, "\r  %s %8.1f / %.1f MiB  %7.1f MB/s\033[K", shortw, (double)done / 1048576.0,
		(double)total / 1048576.0, rate);
	st->line_open = true;
}

void nf_cli_reg_init(nf_reg_options *o, nf_cli_reg *st, const char *cmd, bool insecure,
		     bool verbose)
{
	const char *dbg = getenv("NIMFACTORY_DEBUG");
	memset(st, 0, sizeof(*st));
	st->cmd = cmd;
	st->tty = isatty(2);
	st->verbose = verbose || (dbg && *dbg && strcmp(dbg, "0"));
	nf_reg_options_init(o);
	o->insecure = insecure;
	o->progress = on_progress;
	o->progress_ctx = st;
	if (st->verbose) {
		o->log = on_log;
		o->log_ctx = st;
	}
}

void nf_cli_reg_done(nf_cli_reg *st)
{
	if (st->line_open) {
		fputc('\n', stderr);
		st->line_open = false;
	}
}

int nf_cli_parse_size(uint64_t *out, const char *s, const char *what)
{
	char buf[32];
	size_t n = strlen(s);
	uint64_t mul = 1, v = 0;
	int err;

	if (n == 0 || n >= sizeof(buf))
		return nf_error_set(NF_EINPUT, "%s: '%.40s' is not a size", what, s);
	memcpy(buf, s, n + 1);
	switch (buf[n - 1]) {
	case 'k': case 'K': mul = 1024; break;
	case 'm': case 'M': mul = 1024 * 1024; break;
	case 'g': case 'G': mul = 1024 * 1024 * 1024; break;
	default: break;
	}
	if (mul > 1)
		buf[n - 1] = '\0';
	if ((err = nf_parse_u64(&v, buf, ((uint64_t)4 << 30) / mul, what)))
		return err;
	v *= mul;
	if (v < 4096)
		return nf_error_set(NF_EINPUT, "%s: at least 4096 bytes", what);
	*out = v;
	return 0;
}

bool nf_cli_is_registry_ref(const char *path)
{
	nf_reg_ref r;
	if (access(path, F_OK) == 0)
		return false;
	if (nf_reg_ref_parse(&r, path)) {
		nf_error_clear();
		return false;
	}
	return true;
}

/* ---- inspect REF ---- */

static int describe_manifest(json_t **out, nf_reg_client *c, const char *name, const char *ref)
{
	char *bytes = NULL, *cfg = NULL;
	size_t len = 0, clen = 0;
	nf_oci_desc d;
	nf_oci_manifest *m = NULL;
	json_t *j = NULL, *o = NULL, *layers, *cj = NULL;
	uint64_t total = 0;
	int err;

	*out = NULL;
	if ((err = nf_reg_manifest_get(&bytes, &len, &d, c, name, ref)))
		goto done;
	j = json_loadb(bytes, len, 0, NULL);
	if (!strcmp(d.media_type, NF_OCI_MT_INDEX) || !strcmp(d.media_type, NF_OCI_MT_DOCKER_LIST)) {
		err = nf_error_set(NF_EUNSUPPORTED, "%s@%s: nested image index", name, d.digest);
		goto done;
	}
	if ((err = nf_oci_manifest_parse(&m, j, name)))
		goto done;
	if ((err = nf_reg_blob_get(&cfg, &clen, c, name, &m->config, NF_OCI_JSON_MAX)))
		goto done;
	cj = json_loadb(cfg, clen, 0, NULL);
	o = json_pack("{s:s, s:s, s:I, s:{s:s, s:I}}", "mediaType", d.media_type, "digest", d.digest,
		      "size", (json_int_t)d.size, "config", "digest", m->config.digest, "size",
		      (json_int_t)m->config.size);
	if (!o) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (json_is_object(cj)) {
		json_t *co = json_object_get(o, "config");
		const char *k[] = {"architecture", "os", "created"};
		for (size_t i = 0; i < 3; i++)
			if (json_is_string(json_object_get(cj, k[i])))
				json_object_set(co, k[i], json_object_get(cj, k[i]));
	}
	json_object_set(o, "annotations", json_is_object(json_object_get(j, "annotations"))
						 ? json_object_get(j, "annotations")
						 : json_object());
	layers = json_array();
	json_object_set_new(o, "layers", layers);
	for (size_t i = 0; i < m->n_layers; i++) {
		json_array_append_new(layers, nf_oci_desc_json(&m->layers[i]));
		total += m->layers[i].size;
	}
	json_object_set_new(o, "layers_bytes", json_integer((json_int_t)total));
	*out = o;
	o = NULL;
done:
	json_decref(o);
	json_decref(j);
	json_decref(cj);
	nf_oci_manifest_free(m);
	free(bytes);
	free(cfg);
	return err;
}

/* The gate verdict from the report artifact referring to digest ("" when none). */
static int gate_of(json_t *rep, nf_reg_client *c, const char *name, const char *digest)
{
	json_t *refs = NULL, *am = NULL;
	char *ab = NULL, *rb = NULL, verdict[32] = "";
	size_t al = 0, rl = 0, n;
	nf_oci_desc ad, got;
	nf_oci_artifact a;
	bool via_api = false;
	int err;

	if ((err = nf_reg_referrers(&refs, &via_api, c, name, digest, NF_OCI_ARTIFACT_GATE_REPORT)))
		goto done;
	n = json_array_size(refs);
	if (n == 0)
		goto done;
	if ((err = nf_oci_desc_parse(&ad, json_array_get(refs, n - 1), "referrer")) ||
	    (err = nf_reg_manifest_get(&ab, &al, &got, c, name, ad.digest)))
		goto done;
	am = json_loadb(ab, al, 0, NULL);
	if ((err = nf_oci_artifact_parse(&a, am, "gate report artifact")))
		goto done;
	if ((err = nf_reg_blob_get(&rb, &rl, c, name, &a.blob, (size_t)4 << 20)) ||
	    (err = nf_oci_gate_verdict(verdict, rb, rl)))
		goto done;
	json_object_set_new(rep, "gate", json_pack("{s:s, s:s, s:s, s:O?}", "verdict", verdict, "report",
						   got.digest, "via", via_api ? "referrers API" : "referrers tag scheme",
						   "annotations", json_object_get(am, "annotations")));
done:
	json_decref(refs);
	json_decref(am);
	free(ab);
	free(rb);
	return err;
}

static void print_image(const json_t *m, const char *indent)
{
	const json_t *ann = json_object_get(m, "annotations"), *cfg = json_object_get(m, "config"), *l;
	const char *profiles = json_string_value(json_object_get(ann, "io.nimfactory.profiles"));
	const char *title = json_string_value(json_object_get(ann, NF_OCI_ANN_TITLE));
	const char *version = json_string_value(json_object_get(ann, NF_OCI_ANN_VERSION));
	size_t i;

	printf("%smanifest  %s (%lld bytes)\n", indent, json_string_value(json_object_get(m, "digest")),
	       (long long)json_integer_value(json_object_get(m, "size")));
	if (title || version)
		printf("%stitle     %s %s\n", indent, title ? title : "-", version ? version : "");
	if (profiles) {
		printf("%sprofiles ", indent);
		for (const char *p = profiles; *p;) {
			size_t n = strcspn(p, ",");
			printf(" %.*s", (int)n, p);
			p += n;
			if (*p == ',')
				p++;
		}
		printf("\n");
	}
	printf("%sconfig    %s (%lld bytes, %s/%s, created %s)\n", indent,
	       json_string_value(json_object_get(cfg, "digest")),
	       (long long)json_integer_value(json_object_get(cfg, "size")),
	       json_string_value(json_object_get(cfg, "os")) ? json_string_value(json_object_get(cfg, "os")) : "?",
	       json_string_value(json_object_get(cfg, "architecture")) ? json_string_value(json_object_get(cfg, "architecture")) : "?",
	       json_string_value(json_object_get(cfg, "created")) ? json_string_value(json_object_get(cfg, "created")) : "?");
	printf("%slayers    %zu, %.1f MiB\n", indent, json_array_size(json_object_get(m, "layers")),
	       (double)json_integer_value(json_object_get(m, "layers_bytes")) / 1048576.0);
	json_array_foreach(json_object_get(m, "layers"), i, l)
		printf("%s  %s %12lld  %s\n", indent, json_string_value(json_object_get(l, "digest")),
		       (long long)json_integer_value(json_object_get(l, "size")),
		       json_string_value(json_object_get(l, "mediaType")));
}

int nf_cli_inspect_ref(const char *refs, bool insecure, bool as_json)
{
	nf_reg_ref ref;
	nf_reg_options o;
	nf_cli_reg st;
	nf_reg_client *c = NULL;
	char *bytes = NULL;
	size_t len = 0;
	nf_oci_desc top;
	json_t *rep = NULL, *topj = NULL, *list;
	const char *r;
	int err;

	if ((err = nf_reg_ref_parse(&ref, refs)))
		return err;
	r = ref.digest[0] ? ref.digest : ref.tag[0] ? ref.tag : "latest";
	nf_cli_reg_init(&o, &st, "inspect", insecure, false);
	o.progress = NULL;
	if ((err = nf_reg_client_new(&c, ref.host, &o)) || (err = nf_reg_ping(c)))
		goto done;
	if ((err = nf_reg_manifest_get(&bytes, &len, &top, c, ref.name, r)))
		goto done;
	rep = json_pack("{s:s, s:s, s:I, s:[]}", "reference", refs, "digest", top.digest, "size",
			(json_int_t)top.size, "manifests");
	if (!rep) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	json_object_set_new(rep, "mediaType", json_string(top.media_type));
	list = json_object_get(rep, "manifests");
	if (!strcmp(top.media_type, NF_OCI_MT_INDEX) || !strcmp(top.media_type, NF_OCI_MT_DOCKER_LIST)) {
		const json_t *e;
		size_t i;
		topj = json_loadb(bytes, len, 0, NULL);
		json_array_foreach(json_object_get(topj, "manifests"), i, e) {
			json_t *m = NULL;
			nf_oci_desc kd;
			if ((err = nf_oci_desc_parse(&kd, e, "index")) ||
			    (err = describe_manifest(&m, c, ref.name, kd.digest)))
				goto done;
			if (json_is_object(json_object_get(e, "platform")))
				json_object_set(m, "platform", json_object_get(e, "platform"));
			json_array_append_new(list, m);
		}
	} else {
		json_t *m = NULL;
		if ((err = describe_manifest(&m, c, ref.name, top.digest)))
			goto done;
		json_array_append_new(list, m);
	}
	if ((err = gate_of(rep, c, ref.name, top.digest)))
		goto done;
	if (as_json) {
		json_dumpf(rep, stdout, JSON_SORT_KEYS | JSON_INDENT(2));
		fputc('\n', stdout);
		goto done;
	}
	printf("image %s\n  digest    %s (%s, %lld bytes)\n", refs, top.digest, top.media_type,
	       (long long)top.size);
	{
		const json_t *m, *g = json_object_get(rep, "gate");
		size_t i;
		json_array_foreach(list, i, m) {
			if (json_array_size(list) > 1)
				printf("  [%zu]\n", i);
			print_image(m, json_array_size(list) > 1 ? "    " : "  ");
		}
		if (g) {
			const char *forced = json_string_value(
				json_object_get(json_object_get(g, "annotations"), NF_OCI_ANN_PROMOTE_FORCED));
			printf("  gate      %s (report %s, %s)%s\n", json_string_value(json_object_get(g, "verdict")),
			       json_string_value(json_object_get(g, "report")),
			       json_string_value(json_object_get(g, "via")),
			       forced && !strcmp(forced, "true") ? " PROMOTED BY FORCE" : "");
		} else {
			printf("  gate      none (no gate report artifact refers to this image)\n");
		}
	}
done:
	json_decref(rep);
	json_decref(topj);
	free(bytes);
	nf_reg_client_free(c);
	return err;
}
