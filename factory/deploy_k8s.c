/*
 * deploy_k8s.c - the chart's objects as plain manifests (see deploy.h): each
 * function here renders from the values tree what the template of the same
 * name in templates/helm/nimserve/templates/ renders, so that OUT/k8s and
 * `helm template OUT/helm` agree (tests/e2e/deploy_helm.sh compares them).
 */
#define _GNU_SOURCE
#include "factory/deploy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* ---- reading the values tree by dotted path ---- */

static const json_t *get(const json_t *v, const char *path)
{
	char part[64];
	const char *dot;
	while (v && (dot = strchr(path, '.'))) {
		size_t n = (size_t)(dot - path);
		if (n >= sizeof(part))
			return NULL;
		memcpy(part, path, n);
		part[n] = '\0';
		v = json_object_get(v, part);
		path = dot + 1;
	}
	return v ? json_object_get(v, path) : NULL;
}

static const char *vstr(const json_t *v, const char *path)
{
	const char *s = json_string_value(get(v, path));
	return s ? s : "";
}

static json_int_t vint(const json_t *v, const char *path)
{
	return json_integer_value(get(v, path));
}

static int vbool(const json_t *v, const char *path)
{
	return json_is_true(get(v, path));
}

/* A copy of a non-empty collection at path, else NULL. */
static json_t *vcopy(const json_t *v, const char *path)
{
	const json_t *c = get(v, path);
	if ((json_is_object(c) && json_object_size(c)) || (json_is_array(c) && json_array_size(c)))
		return json_deep_copy(c);
	return NULL;
}

/* ---- what _helpers.tpl defines ---- */

typedef struct render {
	const json_t *values;
	char name[64];      /* nimserve.name */
	char fullname[160]; /* nimserve.fullname (cut to 63) */
	char instance[64];  /* .Release.Name */
	char image[1024];   /* nimserve.image */
	const json_t *profile; /* nimserve.profile */
} render;

/* Cut to 63 characters and drop trailing '-', as the helpers' trunc/trimSuffix. */
static void dns_trim(char *s)
{
	size_t n = strlen(s);
	if (n > 63)
		n = 63;
	while (n && s[n - 1] == '-')
		n--;
	s[n] = '\0';
}

static int find_profile(render *r)
{
	const char *want = vstr(r->values, "profile");
	const json_t *profiles = get(r->values, "profiles"), *p;
	size_t i;
	if (!*want)
		want = vstr(r->values, "defaultProfile");
	json_array_foreach(profiles, i, p) {
		const char *name = json_string_value(json_object_get(p, "name"));
		const char *id = json_string_value(json_object_get(p, "id"));
		if ((name && !strcmp(name, want)) || (id && !strcmp(id, want)))
			r->profile = p;
	}
	if (!r->profile)
		return nf_error_set(NF_EINPUT, "profile \"%s\" is not one of the image's profiles", want);
	return 0;
}

static int render_init(render *r, const json_t *values, const char *chart, const char *instance)
{
	const char *override = vstr(values, "nameOverride");
	const char *name = *override ? override : chart;
	memset(r, 0, sizeof(*r));
	r->values = values;
	snprintf(r->instance, sizeof(r->instance), "%s", instance);
	snprintf(r->name, sizeof(r->name), "%s", name);
	dns_trim(r->name);
	if (*vstr(values, "fullnameOverride"))
		snprintf(r->fullname, sizeof(r->fullname), "%s", vstr(values, "fullnameOverride"));
	else if (strstr(instance, name))
		snprintf(r->fullname, sizeof(r->fullname), "%s", instance);
	else
		snprintf(r->fullname, sizeof(r->fullname), "%s-%s", instance, name);
	dns_trim(r->fullname);
	int n = *vstr(values, "image.digest")
			? snprintf(r->image, sizeof(r->image), "%s@%s", vstr(values, "image.repository"),
				   vstr(values, "image.digest"))
			: snprintf(r->image, sizeof(r->image), "%s:%s", vstr(values, "image.repository"),
				   vstr(values, "image.tag"));
	if (n < 0 || (size_t)n >= sizeof(r->image))
		return nf_error_set(NF_EINPUT, "image reference too long");
	return find_profile(r);
}

static json_t *selector_labels(const render *r)
{
	return json_pack("{s:s, s:s}", "app.kubernetes.io/name", r->name, "app.kubernetes.io/instance",
			 r->instance);
}

static json_t *labels(const render *r)
{
	json_t *l = selector_labels(r);
	if (l && json_object_set_new(l, "app.kubernetes.io/version", json_string(vstr(r->values, "image.tag")))) {
		json_decref(l);
		return NULL;
	}
	return l;
}

static json_t *metadata(const render *r, const char *name)
{
	return json_pack("{s:s, s:o}", "name", name, "labels", labels(r));
}

/* nimserve.startupFailureThreshold: base + memory / rate seconds, in whole periods. */
static json_int_t startup_periods(const render *r)
{
	json_int_t rate = vint(r->values, "probes.startup.loadMiBPerSecond");
	json_int_t period = vint(r->values, "probes.startup.periodSeconds");
	json_int_t mem = json_integer_value(json_object_get(r->profile, "memoryMiB"));
	json_int_t seconds = vint(r->values, "probes.startup.baseSeconds") + mem / (rate > 1 ? rate : 1);
	return 1 + seconds / (period > 1 ? period : 1);
}

/* ---- templates/deployment.yaml ---- */

static json_t *pod_annotations(const render *r)
{
	json_t *a = json_object();
	const json_t *extra = get(r->values, "podAnnotations");
	char port[24];
	snprintf(port, sizeof(port), "%lld", (long long)vint(r->values, "server.port"));
	if (a && vbool(r->values, "metrics.enabled") && !vbool(r->values, "metrics.serviceMonitor.enabled") &&
	    (json_object_set_new(a, "prometheus.io/scrape", json_string("true")) ||
	     json_object_set_new(a, "prometheus.io/path", json_string("/v1/metrics")) ||
	     json_object_set_new(a, "prometheus.io/port", json_string(port)))) {
		json_decref(a);
		return NULL;
	}
	if (a && json_is_object(extra) && json_object_update(a, (json_t *)extra)) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static json_t *env_var(const char *name, const char *value)
{
	return json_pack("{s:s, s:s}", "name", name, "value", value);
}

static json_t *env_int(const char *name, json_int_t value)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "%lld", (long long)value);
	return env_var(name, buf);
}

static json_t *container_env(const render *r)
{
	const char *id = json_string_value(json_object_get(r->profile, "id"));
	const char *name = json_string_value(json_object_get(r->profile, "name"));
	json_t *env = json_pack("[o, o, o, o, o, o]",
				env_var("NIM_MODEL_PROFILE", id && *id ? id : name ? name : ""),
				env_var("NIM_HOST", "0.0.0.0"), env_int("NIM_PORT", vint(r->values, "server.port")),
				env_int("NIM_MAX_BATCH", vint(r->values, "server.maxBatch")),
				env_int("NIM_MAX_CONTEXT", vint(r->values, "server.maxContext")),
				env_int("NIM_DRAIN_TIMEOUT", vint(r->values, "server.drainTimeoutSeconds")));
	const json_t *extra = get(r->values, "server.env");
	if (env && json_is_array(extra) && json_array_extend(env, (json_t *)extra)) {
		json_decref(env);
		return NULL;
	}
	return env;
}

static json_t *probe(const char *path, json_int_t period, json_int_t failures)
{
	return json_pack("{s:{s:s, s:s}, s:I, s:I}", "httpGet", "path", path, "port", "http",
			 "periodSeconds", period, "failureThreshold", failures);
}

/* The profile's resources: memory as request and limit, the GPUs of a GPU profile. */
static json_t *resources(const render *r)
{
	char mem[32];
	json_int_t gpus = json_integer_value(json_object_get(r->profile, "gpus"));
	const char *cpu = json_string_value(json_object_get(r->profile, "cpu"));
	snprintf(mem, sizeof(mem), "%lldMi",
		 (long long)json_integer_value(json_object_get(r->profile, "memoryMiB")));
	json_t *res = json_pack("{s:{s:s, s:s}, s:{s:s}}", "requests", "cpu", cpu ? cpu : "1", "memory",
				mem, "limits", "memory", mem);
	if (res && gpus > 0 &&
	    (json_object_set_new(json_object_get(res, "requests"), "nvidia.com/gpu", json_integer(gpus)) ||
	     json_object_set_new(json_object_get(res, "limits"), "nvidia.com/gpu", json_integer(gpus)))) {
		json_decref(res);
		return NULL;
	}
	return res;
}

static const char *cache_claim(const render *r, char buf[80])
{
	if (*vstr(r->values, "modelCache.existingClaim"))
		return vstr(r->values, "modelCache.existingClaim");
	snprintf(buf, 80, "%.63s-cache", r->fullname);
	return buf;
}

static json_t *cache_volume(const render *r)
{
	char claim[80];
	if (!strcmp(vstr(r->values, "modelCache.type"), "pvc"))
		return json_pack("{s:s, s:{s:s}}", "name", "model-cache", "persistentVolumeClaim",
				 "claimName", cache_claim(r, claim));
	json_t *dir = *vstr(r->values, "modelCache.sizeLimit")
			      ? json_pack("{s:s}", "sizeLimit", vstr(r->values, "modelCache.sizeLimit"))
			      : json_object();
	return json_pack("{s:s, s:o}", "name", "model-cache", "emptyDir", dir);
}

static json_t *container(const render *r)
{
	const json_t *v = r->values;
	json_t *c = json_pack(
		"{s:s, s:s, s:s, s:o, s:[{s:s, s:I, s:s}], s:o, s:o, s:o, s:o}", "name",
		"nimserve", "image", r->image, "imagePullPolicy", vstr(v, "image.pullPolicy"), "env",
		container_env(r), "ports", "name", "http", "containerPort", vint(v, "server.port"),
		"protocol", "TCP", "startupProbe",
		probe("/v1/health/ready", vint(v, "probes.startup.periodSeconds"), startup_periods(r)),
		"livenessProbe",
		probe("/v1/health/live", vint(v, "probes.liveness.periodSeconds"),
		      vint(v, "probes.liveness.failureThreshold")),
		"readinessProbe",
		probe("/v1/health/ready", vint(v, "probes.readiness.periodSeconds"),
		      vint(v, "probes.readiness.failureThreshold")),
		"resources", resources(r));
	if (c && vbool(v, "modelCache.enabled") &&
	    json_object_set_new(c, "volumeMounts",
				json_pack("[{s:s, s:s}]", "name", "model-cache", "mountPath",
					  vstr(v, "modelCache.mountPath")))) {
		json_decref(c);
		return NULL;
	}
	return c;
}

/* Optional pod-spec fields, set only when the values hold something. */
static int pod_spec_extras(json_t *spec, const render *r)
{
	static const char *const keys[][2] = {
		{"imagePullSecrets", "imagePullSecrets"}, {"nodeSelector", "nodeSelector"},
		{"affinity", "affinity"}, {"tolerations", "tolerations"}};
	if (vbool(r->values, "modelCache.enabled") &&
	    json_object_set_new(spec, "volumes", json_pack("[o]", cache_volume(r))))
		return -1;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		json_t *c = vcopy(r->values, keys[i][0]);
		if (c && json_object_set_new(spec, keys[i][1], c))
			return -1;
	}
	return 0;
}

static json_t *deployment(const render *r)
{
	json_t *annotations = pod_annotations(r);
	json_t *spec = json_pack("{s:I, s:[o]}", "terminationGracePeriodSeconds",
				 vint(r->values, "server.drainTimeoutSeconds") + 5, "containers",
				 container(r));
	json_t *tmeta = json_pack("{s:o}", "labels", selector_labels(r));
	json_t *d = NULL;
	if (!annotations || !spec || !tmeta || pod_spec_extras(spec, r))
		goto done;
	if (json_object_size(annotations) && json_object_set(tmeta, "annotations", annotations))
		goto done;
	d = json_pack("{s:s, s:s, s:o, s:{s:{s:o}, s:{s:O, s:O}}}", "apiVersion", "apps/v1", "kind",
		      "Deployment", "metadata", metadata(r, r->fullname), "spec", "selector",
		      "matchLabels", selector_labels(r), "template", "metadata", tmeta, "spec", spec);
	/* replicas stay unset under an autoscaler, which owns them */
	if (d && !vbool(r->values, "autoscaling.enabled") &&
	    json_object_set_new(json_object_get(d, "spec"), "replicas",
				json_integer(vint(r->values, "replicaCount")))) {
		json_decref(d);
		d = NULL;
	}
done:
	json_decref(annotations);
	json_decref(spec);
	json_decref(tmeta);
	return d;
}

/* ---- templates/service.yaml, hpa.yaml, pvc.yaml, servicemonitor.yaml ---- */

static json_t *service(const render *r)
{
	json_t *s = json_pack("{s:s, s:s, s:o, s:{s:s, s:[{s:s, s:I, s:s, s:s}], s:o}}",
			      "apiVersion", "v1", "kind", "Service", "metadata",
			      metadata(r, r->fullname), "spec", "type", vstr(r->values, "service.type"),
			      "ports", "name", "http", "port", vint(r->values, "service.port"),
			      "targetPort", "http", "protocol", "TCP", "selector", selector_labels(r));
	json_t *ann = vcopy(r->values, "service.annotations");
	if (s && ann && json_object_set_new(json_object_get(s, "metadata"), "annotations", ann)) {
		json_decref(s);
		return NULL;
	}
	return s;
}

static json_t *hpa(const render *r)
{
	return json_pack(
		"{s:s, s:s, s:o, s:{s:{s:s, s:s, s:s}, s:I, s:I, s:[{s:s, s:{s:s, s:{s:s, s:I}}}]}}",
		"apiVersion", "autoscaling/v2", "kind", "HorizontalPodAutoscaler", "metadata",
		metadata(r, r->fullname), "spec", "scaleTargetRef", "apiVersion", "apps/v1", "kind",
		"Deployment", "name", r->fullname, "minReplicas", vint(r->values, "autoscaling.minReplicas"),
		"maxReplicas", vint(r->values, "autoscaling.maxReplicas"), "metrics", "type", "Resource",
		"resource", "name", "cpu", "target", "type", "Utilization", "averageUtilization",
		vint(r->values, "autoscaling.targetCPUUtilizationPercentage"));
}

static json_t *pvc(const render *r)
{
	char claim[80];
	json_t *p = json_pack("{s:s, s:s, s:o, s:{s:[s], s:{s:{s:s}}}}", "apiVersion", "v1", "kind",
			      "PersistentVolumeClaim", "metadata", metadata(r, cache_claim(r, claim)),
			      "spec", "accessModes", vstr(r->values, "modelCache.accessMode"),
			      "resources", "requests", "storage", vstr(r->values, "modelCache.size"));
	if (p && *vstr(r->values, "modelCache.storageClass") &&
	    json_object_set_new(json_object_get(p, "spec"), "storageClassName",
				json_string(vstr(r->values, "modelCache.storageClass")))) {
		json_decref(p);
		return NULL;
	}
	return p;
}

static json_t *service_monitor(const render *r)
{
	json_t *m = json_pack("{s:s, s:s, s:o, s:{s:{s:o}, s:[{s:s, s:s, s:s}]}}", "apiVersion",
			      "monitoring.coreos.com/v1", "kind", "ServiceMonitor", "metadata",
			      metadata(r, r->fullname), "spec", "selector", "matchLabels",
			      selector_labels(r), "endpoints", "port", "http", "path", "/v1/metrics",
			      "interval", vstr(r->values, "metrics.serviceMonitor.interval"));
	const json_t *extra = get(r->values, "metrics.serviceMonitor.labels");
	if (m && json_is_object(extra) &&
	    json_object_update(json_object_get(json_object_get(m, "metadata"), "labels"), (json_t *)extra)) {
		json_decref(m);
		return NULL;
	}
	return m;
}

/* ---- the set of objects, and the kustomize base ---- */

typedef struct object_kind {
	const char *file;                  /* in the kustomize base */
	int (*wanted)(const json_t *values);
	json_t *(*make)(const render *r);
} object_kind;

static int always(const json_t *v) { return 1; }
static int with_hpa(const json_t *v) { return vbool(v, "autoscaling.enabled"); }
static int with_pvc(const json_t *v)
{
	return vbool(v, "modelCache.enabled") && !strcmp(vstr(v, "modelCache.type"), "pvc") &&
	       !*vstr(v, "modelCache.existingClaim");
}
static int with_monitor(const json_t *v)
{
	return vbool(v, "metrics.enabled") && vbool(v, "metrics.serviceMonitor.enabled");
}

/* The chart's templates, in the order Helm installs their kinds. */
static const object_kind kinds[] = {
	{"pvc.yaml", with_pvc, pvc},
	{"service.yaml", always, service},
	{"deployment.yaml", always, deployment},
	{"hpa.yaml", with_hpa, hpa},
	{"servicemonitor.yaml", with_monitor, service_monitor},
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

/* The objects of values, one slot per kind (NULL where not wanted). */
static int make_objects(json_t *objs[N_KINDS], const json_t *values, const char *chart,
			const char *instance)
{
	render r;
	int err = render_init(&r, values, chart, instance);
	for (size_t i = 0; i < N_KINDS; i++)
		objs[i] = NULL;
	for (size_t i = 0; !err && i < N_KINDS; i++)
		if (kinds[i].wanted(values) && !(objs[i] = kinds[i].make(&r)))
			err = nf_error_set(NF_ENOMEM, "out of memory");
	if (err)
		for (size_t i = 0; i < N_KINDS; i++)
			json_decref(objs[i]);
	return err;
}

int nf_deploy_k8s_objects(json_t **objects, const json_t *values, const char *chart,
			  const char *instance)
{
	json_t *objs[N_KINDS], *arr = json_array();
	int err = arr ? make_objects(objs, values, chart, instance) : nf_error_set(NF_ENOMEM, "out of memory");
	for (size_t i = 0; !err && i < N_KINDS; i++)
		if (objs[i] && json_array_append_new(arr, objs[i]))
			err = nf_error_set(NF_ENOMEM, "out of memory");
	if (err) {
		json_decref(arr);
		arr = NULL;
	}
	*objects = arr;
	return err;
}

static int write_yaml(const char *dir, const char *file, const json_t *doc)
{
	static const char header[] = "# Written by nimfactory build (factory/deploy_k8s.c) from ../helm/values.yaml.\n";
	char *yaml = NULL, *path = nf_path_join(dir, file);
	size_t len;
	int err = path ? nf_deploy_yaml(&yaml, &len, &doc, 1, header)
		       : nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = nf_fs_write_atomic(path, yaml, len, 0644);
	free(yaml);
	free(path);
	return err;
}

int nf_deploy_write_k8s(const char *dir, const json_t *values, const char *chart,
			const char *instance)
{
	json_t *objs[N_KINDS], *files = json_array(), *kust = NULL;
	int err = files ? make_objects(objs, values, chart, instance) : nf_error_set(NF_ENOMEM, "out of memory");
	if (err) {
		json_decref(files);
		return err;
	}
	err = nf_fs_mkdir_p(dir, 0755);
	for (size_t i = 0; !err && i < N_KINDS; i++) {
		if (!objs[i])
			continue;
		err = write_yaml(dir, kinds[i].file, objs[i]);
		if (!err && json_array_append_new(files, json_string(kinds[i].file)))
			err = nf_error_set(NF_ENOMEM, "out of memory");
	}
	if (!err && !(kust = json_pack("{s:s, s:s, s:O}", "apiVersion", "kustomize.config.k8s.io/v1beta1",
				       "kind", "Kustomization", "resources", files)))
		err = nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = write_yaml(dir, "kustomization.yaml", kust);
	for (size_t i = 0; i < N_KINDS; i++)
		json_decref(objs[i]);
	json_decref(files);
	json_decref(kust);
	return err;
}
