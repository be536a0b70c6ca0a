/*
 * deploy_values.c - the values tree of the nimserve chart (see deploy.h):
 * one table of every setting with its default, in the order and shape of
 * templates/helm/nimserve/values.yaml (tests/e2e/deploy_helm.sh holds the two
 * to the same keys), plus what the build knows of its image.
 */
#include "factory/deploy.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

typedef enum setting_kind { S_STR, S_INT, S_BOOL, S_EMPTY_MAP, S_EMPTY_LIST } setting_kind;

typedef struct setting {
	const char *path; /* dotted: "probes.startup.periodSeconds" */
	setting_kind kind;
	const char *str;  /* S_STR */
	long num;         /* S_INT, S_BOOL */
} setting;

/* Every key of the chart's values.yaml; the image and the profiles are
 * filled from the build (NULL str: set by nf_deploy_values). */
static const setting settings[] = {
	{"image.repository", S_STR, NULL, 0},
	{"image.tag", S_STR, NULL, 0},
	{"image.digest", S_STR, NULL, 0},
	{"image.pullPolicy", S_STR, "IfNotPresent", 0},
	{"imagePullSecrets", S_EMPTY_LIST, NULL, 0},
	{"nameOverride", S_STR, "", 0},
	{"fullnameOverride", S_STR, "", 0},
	{"replicaCount", S_INT, NULL, 1},
	{"profile", S_STR, "", 0},
	{"defaultProfile", S_STR, NULL, 0},
	{"profiles", S_EMPTY_LIST, NULL, 0},
	{"server.port", S_INT, NULL, 8000},
	{"server.maxBatch", S_INT, NULL, NF_RECIPE_MAX_BATCH},
	{"server.maxContext", S_INT, NULL, 0},
	{"server.drainTimeoutSeconds", S_INT, NULL, 30},
	{"server.env", S_EMPTY_LIST, NULL, 0},
	{"probes.liveness.periodSeconds", S_INT, NULL, 10},
	{"probes.liveness.failureThreshold", S_INT, NULL, 3},
	{"probes.readiness.periodSeconds", S_INT, NULL, 5},
	{"probes.readiness.failureThreshold", S_INT, NULL, 3},
	{"probes.startup.periodSeconds", S_INT, NULL, 10},
	{"probes.startup.baseSeconds", S_INT, NULL, 60},
	{"probes.startup.loadMiBPerSecond", S_INT, NULL, 50},
	{"modelCache.enabled", S_BOOL, NULL, 1},
	{"modelCache.mountPath", S_STR, "/opt/nim/.cache", 0},
	{"modelCache.type", S_STR, "emptyDir", 0},
	{"modelCache.sizeLimit", S_STR, "", 0},
	{"modelCache.existingClaim", S_STR, "", 0},
	{"modelCache.storageClass", S_STR, "", 0},
	{"modelCache.size", S_STR, "20Gi", 0},
	{"modelCache.accessMode", S_STR, "ReadWriteOnce", 0},
	{"service.type", S_STR, "ClusterIP", 0},
	{"service.port", S_INT, NULL, 8000},
	{"service.annotations", S_EMPTY_MAP, NULL, 0},
	{"metrics.enabled", S_BOOL, NULL, 1},
	{"metrics.serviceMonitor.enabled", S_BOOL, NULL, 0},
	{"metrics.serviceMonitor.interval", S_STR, "30s", 0},
	{"metrics.serviceMonitor.labels", S_EMPTY_MAP, NULL, 0},
	{"autoscaling.enabled", S_BOOL, NULL, 0},
	{"autoscaling.minReplicas", S_INT, NULL, 1},
	{"autoscaling.maxReplicas", S_INT, NULL, 4},
	{"autoscaling.targetCPUUtilizationPercentage", S_INT, NULL, 80},
	{"podAnnotations", S_EMPTY_MAP, NULL, 0},
	{"nodeSelector", S_EMPTY_MAP, NULL, 0},
	{"tolerations", S_EMPTY_LIST, NULL, 0},
	{"affinity", S_EMPTY_MAP, NULL, 0},
};

/* The object holding the last component of path (made as needed); *leaf
 * points at that component.  NULL out of memory. */
static json_t *parent_of(json_t *root, const char *path, const char **leaf)
{
	char part[64];
	const char *dot;
	json_t *obj = root;
	while ((dot = strchr(path, '.'))) {
		size_t n = (size_t)(dot - path);
		if (n >= sizeof(part))
			return NULL;
		memcpy(part, path, n);
		part[n] = '\0';
		json_t *next = json_object_get(obj, part);
		if (!next && (!(next = json_object()) || json_object_set_new(obj, part, next)))
			return NULL;
		obj = next;
		path = dot + 1;
	}
	*leaf = path;
	return obj;
}

static json_t *setting_value(const setting *s)
{
	switch (s->kind) {
	case S_STR: return json_string(s->str ? s->str : "");
	case S_INT: return json_integer(s->num);
	case S_BOOL: return json_boolean(s->num);
	case S_EMPTY_MAP: return json_object();
	default: return json_array();
	}
}

/* Set path in root to v (taken). -1 out of memory. */
static int set_path(json_t *root, const char *path, json_t *v)
{
	const char *leaf;
	json_t *parent = v ? parent_of(root, path, &leaf) : NULL;
	if (!parent) {
		json_decref(v);
		return -1;
	}
	return json_object_set_new(parent, leaf, v);
}

/* A profile's entry, with the keys the chart's values.yaml documents. */
static json_t *profile_value(const nf_deploy_profile *p)
{
	/* Kubernetes' CPU request of a CPU profile: the engine threads nimserve
	 * can keep busy on a small node; a GPU profile's CPU only feeds it. */
	return json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:I}", "name", p->name, "id", p->id,
			 "device", p->device, "precision", p->precision, "gpus", p->gpus, "cpu",
			 p->gpus ? "1" : "2", "memoryMiB", (json_int_t)p->memory_mib);
}

static int fill_build(json_t *v, const nf_deploy_image *img)
{
	json_t *profiles = json_object_get(v, "profiles");
	if (set_path(v, "image.repository", json_string(img->repository)) ||
	    set_path(v, "image.tag", json_string(img->tag)) ||
	    set_path(v, "image.digest", json_string(img->digest ? img->digest : "")) ||
	    set_path(v, "defaultProfile", json_string(img->profiles[img->default_profile].name)) ||
	    (img->max_batch && set_path(v, "server.maxBatch", json_integer(img->max_batch))) ||
	    set_path(v, "server.maxContext", json_integer(img->max_context)))
		return -1;
	for (size_t i = 0; i < img->n_profiles; i++)
		if (json_array_append_new(profiles, profile_value(&img->profiles[i])))
			return -1;
	return 0;
}

int nf_deploy_values(json_t **out, const nf_deploy_image *img)
{
	json_t *v;
	*out = NULL;
	if (!img->n_profiles || img->default_profile >= img->n_profiles)
		return nf_error_set(NF_EINPUT, "deployment values: no profile to serve");
	v = json_object();
	for (size_t i = 0; v && i < sizeof(settings) / sizeof(settings[0]); i++)
		if (set_path(v, settings[i].path, setting_value(&settings[i]))) {
			json_decref(v);
			v = NULL;
		}
	if (!v || fill_build(v, img)) {
		json_decref(v);
		return nf_error_set(NF_ENOMEM, "out of memory");
	}
	*out = v;
	return 0;
}

void nf_deploy_instance_name(char out[54], const char *name)
{
	size_t n = 0;
	for (const char *p = name; *p && n < 53; p++) {
		char c = (char)tolower((unsigned char)*p);
		int ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (ok)
			out[n++] = c;
		else if (n && out[n - 1] != '-') /* never a leading or doubled '-' */
			out[n++] = '-';
	}
	while (n && out[n - 1] == '-')
		n--;
	out[n] = '\0';
	if (!n)
		snprintf(out, 54, "%s", NF_DEPLOY_CHART_NAME);
}
