/*
 * deploy.h - deployment templates for a built image: OUT/helm/, the nimserve
 * Helm chart (templates/helm/nimserve) with a values.yaml for the image, and
 * OUT/k8s/, the same Deployment, Service and (optional) HorizontalPodAutoscaler
 * as a kustomize base for users without Helm.
 *
 * One values tree (JSON, the shape of the chart's values.yaml) says what
 * varies: deploy_values.c builds it from one table of settings plus what the
 * build knows (image, digest, profiles, memory per profile); the chart reads
 * it as values.yaml, deploy_k8s.c renders the plain manifests from it the way
 * the chart's templates do.  YAML is written with libyaml's emitter
 * (deploy_yaml.c), never by pasting strings.
 */
#ifndef NF_FACTORY_DEPLOY_H
#define NF_FACTORY_DEPLOY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/kv_kind.h"
#include "images/blob.h"
#include "factory/plan.h"
#include "factory/recipe.h"

/* The chart's name, and where the build puts the chart and the manifests. */
#define NF_DEPLOY_CHART_NAME "nimserve"
#define NF_DEPLOY_HELM_DIR "helm"
#define NF_DEPLOY_K8S_DIR "k8s"


/* What a pod serving one profile needs.  Strings borrowed. */
typedef struct nf_deploy_profile {
	const char *name;      /* "cpu-fp32-tp1" */
	const char *id;        /* sha256 hex of the profile */
	const char *device;    /* SKU name, "cpu" */
	const char *precision; /* "fp32" */
	int gpus;              /* nvidia.com/gpu: the tensor parallelism; 0 on the CPU */
	uint64_t memory_mib;   /* request and limit */
} nf_deploy_profile;

/* What the build knows of its image.  Strings borrowed. */
typedef struct nf_deploy_image {
	const char *repository;    /* "nimfactory/stories260k" */
	const char *tag;           /* "1.0.0" */
	const char *digest;        /* "sha256:<hex>" of the tagged manifest or index, or NULL */
	const nf_deploy_profile *profiles;
	size_t n_profiles;         /* at least one */
	size_t default_profile;    /* index into profiles */
	int max_batch;             /* server.maxBatch (NIM_MAX_BATCH): the recipe's serving.max_batch */
	int max_context;           /* server.maxContext (NIM_MAX_CONTEXT): serving.max_context, 0 the model's */
} nf_deploy_image;

/*
 * The memory a pod serving the engine in engine_dir needs, in MiB (rounded
 * up): twice the weights file (the file mapping and the copy on huge pages
 * while loading), max_batch sequences' KV caches in kv (config.json's model
 * dimensions, at most max_context positions each when it is not 0) and the
 * runtime's own.  NF_EINPUT for a config.json without usable dimensions,
 * NF_EINPUT on overflow.
 */
int nf_deploy_profile_memory(uint64_t *mib, const char *engine_dir, nf_kv_kind kv, int max_batch,
			     int max_context);

/* The values tree (the chart's values.yaml) for img.  Caller owns *out. */
int nf_deploy_values(json_t **out, const nf_deploy_image *img);

/* A DNS-1123 label made from name (lowercase, [a-z0-9-], at most 53
 * characters, so "<it>-nimserve" fits 63), "nimserve" when nothing is left.
 * out has room for 54 bytes. */
void nf_deploy_instance_name(char out[54], const char *name);

/*
 * The plain manifests of values, as the chart named chart renders them for
 * the release instance: *objects gets an array of the objects the chart's
 * templates make with these values (the Service and the Deployment; the
 * HorizontalPodAutoscaler when autoscaling.enabled; a PersistentVolumeClaim
 * and a ServiceMonitor when the values ask for them), named by the chart's
 * fullname rule.  Caller owns *objects.
 */
int nf_deploy_k8s_objects(json_t **objects, const json_t *values, const char *chart,
			  const char *instance);

/*
 * Write dir/ as a kustomize base of those objects, one file each
 * (service.yaml, deployment.yaml, hpa.yaml, ...) and kustomization.yaml
 * listing them.
 */
int nf_deploy_write_k8s(const char *dir, const json_t *values, const char *chart,
			const char *instance);

/*
 * YAML text of the JSON values in docs[0..n), one document each ("---"
 * between them), with libyaml's emitter: strings double-quoted, so no string
 * reads back as another type.  header (may be NULL) is a comment block
 * written first, each line already starting with '#'.  Caller frees *out.
 */
int nf_deploy_yaml(char **out, size_t *len, const json_t *const *docs, size_t n,
		   const char *header);

/*
 * The chart shipped with nimfactory: $NIMFACTORY_CHART when set, else
 * templates/helm/nimserve found from the running binary upwards (build/bin,
 * build/san/bin).  NF_ENOTFOUND when there is none.  Caller frees *dir.
 */
int nf_deploy_chart_find(char **dir);

/*
 * Copy the chart in src to dst (made; must not exist) with its Chart.yaml's
 * name set to name (the build's: the model's instance name, so that each
 * model's chart has its own repository in a registry), version to version
 * and appVersion to app_version, and values.yaml replaced by values.
 */
int nf_deploy_chart_write(const char *dst, const char *src, const char *name,
			  const char *version, const char *app_version, const json_t *values);

/* The chart version for an image tag: the tag when it is SemVer 2 without
 * build metadata (an OCI tag cannot hold '+'), else "0.1.0". */
const char *nf_deploy_chart_version(const char *tag);

/*
 * `nimfactory build`'s deployment outputs: OUT/helm/ (the chart found by
 * nf_deploy_chart_find with a values.yaml for the image; left out with a
 * warning line in *note when there is no chart) and OUT/k8s/ in out_dir,
 * for recipe r, its plan (engines in out_dir/engines/<id>/) and the image
 * digest ("sha256:<hex>", or NULL when no image was made).  *note (may be
 * NULL; static text) says what was written.
 */
int nf_deploy_write_build(const char *out_dir, const nf_recipe *r, const nf_plan *plan,
			  const char *digest, const char **note);

/* Chart metadata read from dir/Chart.yaml as JSON (Helm's OCI config):
 * name, version, apiVersion and the other fields, as strings.  The name must
 * be [a-z0-9][a-z0-9._-]* and the version [0-9A-Za-z][0-9A-Za-z._-]* (it is
 * the OCI tag), at most 128 bytes each.  Caller owns *out. */
int nf_deploy_chart_meta(json_t **out, const char *dir);

/* Helm's OCI media types (helm.sh/helm/v3/pkg/registry). */
#define NF_DEPLOY_MT_CHART_CONFIG "application/vnd.cncf.helm.config.v1+json"
#define NF_DEPLOY_MT_CHART_CONTENT "application/vnd.cncf.helm.chart.content.v1.tar+gzip"

/*
 * Push the chart in dir, packaged (nf_deploy_chart_package), to repository
 * `name` of the client's registry as Helm does: the chart metadata as the
 * config, the .tgz as the one layer, the manifest tagged with the chart's
 * version.  Blobs already there are not sent again.  *manifest gets the
 * pushed manifest's descriptor, *meta (may be NULL) the chart metadata
 * (caller owns it).
 */
struct nf_reg_client;
int nf_deploy_chart_push(nf_oci_desc *manifest, json_t **meta, struct nf_reg_client *c,
			 const char *name, const char *dir);

/*
 * The chart in dir as `helm package` makes it: a gzip'd tar of
 * NAME/Chart.yaml first, then every other file under NAME/ in byte order of
 * their paths, with fixed times and owners, so the same chart gives the same
 * bytes.  Caller frees *tgz.
 */
int nf_deploy_chart_package(char **tgz, size_t *len, const char *dir);

#endif
