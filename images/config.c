/* config.c - the OCI image configuration JSON (see config.h). */
#include "images/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/error.h"
#include "util/banned.h"

#define NS_PER_S 1000000000LL

int nf_oci_time_rfc3339(char buf[32], int64_t epoch)
{
	struct tm tm;
	time_t t = (time_t)epoch;
	if (epoch < 0 || (int64_t)t != epoch || !gmtime_r(&t, &tm) ||
	    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return nf_error_set(NF_EINPUT, "time %lld cannot be written as RFC 3339",
				    (long long)epoch);
	return 0;
}

static int str_array(json_t **out, const char *const *list, const char *what)
{
	json_t *a = json_array();
	*out = NULL;
	if (!a)
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (size_t i = 0; list[i]; i++) {
		json_t *s = json_string(list[i]);
		if (!s || json_array_append_new(a, s)) {
			json_decref(a);
			return nf_error_set(NF_EINPUT, "%s[%zu] is not UTF-8", what, i);
		}
	}
	*out = a;
	return 0;
}

static int set_list(json_t *obj, const char *key, const char *const *list)
{
	json_t *a = NULL;
	int err;
	if (!list)
		return 0;
	if ((err = str_array(&a, list, key)))
		return err;
	if (json_object_set_new(obj, key, a))
		return nf_error_set(NF_ENOMEM, "out of memory");
	return 0;
}

static int set_str(json_t *obj, const char *key, const char *v)
{
	json_t *s;
	if (!v)
		return 0;
	s = json_string(v);
	if (!s || json_object_set_new(obj, key, s))
		return nf_error_set(NF_EINPUT, "config %s is not UTF-8", key);
	return 0;
}

/* Env: the base's entries whose KEY the spec does not set, then the spec's. */
static int merge_env(json_t *cfg, const char *const *env)
{
	json_t *old = json_object_get(cfg, "Env"), *na = NULL;
	int err = 0;
	if (!env)
		return 0;
	na = json_array();
	if (!na)
		return nf_error_set(NF_ENOMEM, "out of memory");
	if (json_is_array(old)) {
		for (size_t i = 0; i < json_array_size(old); i++) {
			const char *o = json_string_value(json_array_get(old, i));
			size_t kl;
			bool replaced = false;
			if (!o)
				continue;
			kl = strcspn(o, "=");
			for (size_t k = 0; env[k]; k++)
				if (!strncmp(env[k], o, kl) && env[k][kl] == '=')
					replaced = true;
			if (!replaced)
				json_array_append_new(na, json_string(o));
		}
	}
	for (size_t k = 0; env[k]; k++) {
		json_t *s;
		if (!strchr(env[k], '=') || env[k][0] == '=') {
			err = nf_error_set(NF_EINPUT, "env '%.100s' is not KEY=VALUE", env[k]);
			goto done;
		}
		s = json_string(env[k]);
		if (!s || json_array_append_new(na, s)) {
			err = nf_error_set(NF_EINPUT, "env '%.100s' is not UTF-8", env[k]);
			goto done;
		}
	}
	json_object_set(cfg, "Env", na);
done:
	json_decref(na);
	return err;
}

static json_t *sub_object(json_t *parent, const char *key)
{
	json_t *o = json_object_get(parent, key);
	if (json_is_object(o))
		return o;
	o = json_object();
	if (!o || json_object_set_new(parent, key, o))
		return NULL;
	return o;
}

static int apply_spec(json_t *cfg, const nf_oci_config_spec *spec)
{
	int err;
	if ((err = set_str(cfg, "User", spec->user)) ||
	    (err = set_list(cfg, "Entrypoint", spec->entrypoint)) ||
	    (err = set_list(cfg, "Cmd", spec->cmd)) || (err = merge_env(cfg, spec->env)) ||
	    (err = set_str(cfg, "WorkingDir", spec->working_dir)) ||
	    (err = set_str(cfg, "StopSignal", spec->stop_signal)))
		return err;
	if (spec->exposed_ports && spec->exposed_ports[0]) {
		json_t *ports = sub_object(cfg, "ExposedPorts");
		if (!ports)
			return nf_error_set(NF_ENOMEM, "out of memory");
		for (size_t i = 0; spec->exposed_ports[i]; i++)
			if (json_object_set_new(ports, spec->exposed_ports[i], json_object()))
				return nf_error_set(NF_EINPUT, "exposed port '%.40s' is not UTF-8",
						    spec->exposed_ports[i]);
	}
	if (spec->n_labels) {
		json_t *labels = sub_object(cfg, "Labels");
		if (!labels)
			return nf_error_set(NF_ENOMEM, "out of memory");
		if ((err = nf_oci_json_set_kv(labels, spec->labels, spec->n_labels, "label")))
			return err;
	}
	if (spec->healthcheck && spec->healthcheck->test) {
		const nf_oci_healthcheck *h = spec->healthcheck;
		json_t *hc = json_object(), *test = NULL;
		if (!hc)
			return nf_error_set(NF_ENOMEM, "out of memory");
		json_object_set_new(cfg, "Healthcheck", hc);
		if ((err = str_array(&test, h->test, "Healthcheck.Test")))
			return err;
		json_object_set_new(hc, "Test", test);
		if (h->interval_s < 0 || h->timeout_s < 0 || h->start_period_s < 0 || h->retries < 0 ||
		    h->interval_s > 86400 || h->timeout_s > 86400 || h->start_period_s > 86400)
			return nf_error_set(NF_EINPUT, "healthcheck times must be 0..86400 s");
		if (h->interval_s)
			json_object_set_new(hc, "Interval", json_integer(h->interval_s * NS_PER_S));
		if (h->timeout_s)
			json_object_set_new(hc, "Timeout", json_integer(h->timeout_s * NS_PER_S));
		if (h->start_period_s)
			json_object_set_new(hc, "StartPeriod",
					    json_integer(h->start_period_s * NS_PER_S));
		if (h->retries)
			json_object_set_new(hc, "Retries", json_integer(h->retries));
	}
	return 0;
}

int nf_oci_config_check(const json_t *config, size_t n_layers, const char *what)
{
	const json_t *rootfs, *ids, *cfg;
	if (!json_is_object(config))
		return nf_error_set(NF_EINPUT, "%s: config is not an object", what);
	rootfs = json_object_get(config, "rootfs");
	ids = json_object_get(rootfs, "diff_ids");
	if (!json_is_string(json_object_get(rootfs, "type")) ||
	    strcmp(json_string_value(json_object_get(rootfs, "type")), "layers") ||
	    !json_is_array(ids))
		return nf_error_set(NF_EINPUT, "%s: rootfs is not {type: layers, diff_ids: [...]}", what);
	if (json_array_size(ids) != n_layers)
		return nf_error_set(NF_EINPUT, "%s: %zu diff_ids for %zu layers", what,
				    json_array_size(ids), n_layers);
	for (size_t i = 0; i < n_layers; i++)
		if (nf_oci_digest_check(json_string_value(json_array_get(ids, i))))
			return nf_error_wrap(NF_EINPUT, "%s: rootfs.diff_ids[%zu]", what, i);
	cfg = json_object_get(config, "config");
	if (cfg && !json_is_object(cfg) && !json_is_null(cfg))
		return nf_error_set(NF_EINPUT, "%s: config.config is not an object", what);
	if (json_object_get(config, "history") && !json_is_array(json_object_get(config, "history")))
		return nf_error_set(NF_EINPUT, "%s: history is not an array", what);
	return 0;
}

int nf_oci_config_json(json_t **out, const json_t *base, const nf_oci_config_spec *spec,
		       const char *const *diff_ids, const char *const *created_by, size_t n)
{
	json_t *root = NULL, *cfg, *rootfs, *ids, *hist;
	char created[32];
	const char *arch, *os;
	int err = 0;

	*out = NULL;
	if ((err = nf_oci_time_rfc3339(created, spec->created)))
		return err;
	root = json_object();
	if (!root)
		return nf_error_set(NF_ENOMEM, "out of memory");
	arch = spec->architecture ? spec->architecture
				  : json_string_value(json_object_get(base, "architecture"));
	os = spec->os ? spec->os : json_string_value(json_object_get(base, "os"));
	/* Deep copies: the base stays untouched. */
	cfg = json_is_object(json_object_get(base, "config"))
		      ? json_deep_copy(json_object_get(base, "config")) : json_object();
	ids = json_is_array(json_object_get(json_object_get(base, "rootfs"), "diff_ids"))
		      ? json_deep_copy(json_object_get(json_object_get(base, "rootfs"), "diff_ids"))
		      : json_array();
	hist = json_is_array(json_object_get(base, "history"))
		       ? json_deep_copy(json_object_get(base, "history")) : json_array();
	rootfs = json_object();
	if (json_object_set_new(root, "config", cfg) || json_object_set_new(root, "history", hist) ||
	    json_object_set_new(root, "rootfs", rootfs) ||
	    json_object_set_new(rootfs, "diff_ids", ids) ||
	    json_object_set_new(rootfs, "type", json_string("layers"))) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = set_str(root, "architecture", arch ? arch : "amd64")) ||
	    (err = set_str(root, "os", os ? os : "linux")) ||
	    (err = set_str(root, "created", created)) || (err = set_str(root, "author", spec->author)))
		goto done;
	if (base && json_is_string(json_object_get(base, "variant")) && !spec->architecture)
		json_object_set(root, "variant", json_object_get(base, "variant"));
	if ((err = apply_spec(cfg, spec)))
		goto done;
	for (size_t i = 0; i < n; i++) {
		json_t *h;
		if ((err = nf_oci_digest_check(diff_ids[i])))
			goto done;
		h = json_pack("{s:s, s:s}", "created", created, "created_by",
			      created_by && created_by[i] ? created_by[i] : "nimfactory layer");
		if (!h || json_array_append_new(hist, h) ||
		    json_array_append_new(ids, json_string(diff_ids[i]))) {
			err = nf_error_set(NF_EINPUT, "history of layer %zu is not UTF-8", i);
			goto done;
		}
	}
	*out = root;
	root = NULL;
done:
	json_decref(root);
	return err;
}
