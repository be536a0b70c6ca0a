/* deploy.c - a build's deployment outputs, OUT/helm and OUT/k8s (see deploy.h). */
#define _GNU_SOURCE
#include "factory/deploy.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* The profile a release serves unless told otherwise: the first of the
 * recipe's precision preference the image has, else the first profile. */
static size_t default_profile(const nf_recipe *r, const nf_plan *plan)
{
	for (size_t k = 0; k < r->serving.n_precision_preference; k++)
		for (size_t i = 0; i < plan->n_profiles; i++)
			if (plan->profiles[i].precision == r->serving.precision_preference[k])
				return i;
	return 0;
}

/* Each profile's entry: its GPUs and the memory of its engine in out_dir. */
static int describe_profiles(nf_deploy_profile *dp, const char *out_dir, const nf_plan *plan,
			     const nf_recipe_serving *sv)
{
	int err = 0;
	for (size_t i = 0; !err && i < plan->n_profiles; i++) {
		const nf_profile *p = &plan->profiles[i];
		char *engine = nf_strdup_printf("%s/engines/%s", out_dir, p->id);
		dp[i] = (nf_deploy_profile){
			.name = p->name,
			.id = p->id,
			.device = p->device,
			.precision = nf_precision_name(p->precision),
			.gpus = p->is_gpu ? p->tensor_parallel : 0,
		};
		err = engine ? nf_deploy_profile_memory(&dp[i].memory_mib, engine, p->kv_cache,
							sv->max_batch, sv->max_context)
			     : nf_error_set(NF_ENOMEM, "out of memory");
		free(engine);
	}
	return err;
}

/* OUT/helm: the chart with the build's values, or the values alone without a chart. */
static int write_helm(const char *out_dir, const nf_recipe *r, const json_t *values,
		      const char *chart_name, const char **note)
{
	char *chart = NULL, *dst = nf_path_join(out_dir, NF_DEPLOY_HELM_DIR);
	int err = dst ? nf_deploy_chart_find(&chart) : nf_error_set(NF_ENOMEM, "out of memory");
	if (!err) {
		err = nf_deploy_chart_write(dst, chart, chart_name, nf_deploy_chart_version(r->image.tag),
					    r->image.tag, values);
		*note = "Helm chart in helm/, kustomize base in k8s/";
	} else if (err == NF_ENOTFOUND && dst) {
		/* a nimfactory installed without its templates still says what to deploy */
		char *path = nf_path_join(dst, "values.yaml"), *yaml = NULL;
		size_t len;
		err = path ? nf_fs_mkdir_p(dst, 0755) : nf_error_set(NF_ENOMEM, "out of memory");
		if (!err)
			err = nf_deploy_yaml(&yaml, &len, &values, 1, NULL);
		if (!err)
			err = nf_fs_write_atomic(path, yaml, len, 0644);
		*note = "no chart found (NIMFACTORY_CHART): helm/values.yaml only, kustomize base in k8s/";
		free(path);
		free(yaml);
	}
	free(chart);
	free(dst);
	return err;
}

int nf_deploy_write_build(const char *out_dir, const nf_recipe *r, const nf_plan *plan,
			  const char *digest, const char **note)
{
	nf_deploy_profile *dp = calloc(plan->n_profiles ? plan->n_profiles : 1, sizeof(*dp));
	json_t *values = NULL;
	char instance[54], *k8s = nf_path_join(out_dir, NF_DEPLOY_K8S_DIR);
	const char *unused;
	int err = dp && k8s ? describe_profiles(dp, out_dir, plan, &r->serving)
			    : nf_error_set(NF_ENOMEM, "out of memory");

	if (!note)
		note = &unused;
	*note = "";
	nf_deploy_image img = {
		.repository = r->image.repository,
		.tag = r->image.tag,
		.digest = digest,
		.profiles = dp,
		.n_profiles = plan->n_profiles,
		.default_profile = default_profile(r, plan),
		.max_batch = r->serving.max_batch,
		.max_context = r->serving.max_context,
	};
	if (!err)
		err = nf_deploy_values(&values, &img);
	/* The chart is named after the model and a release of it is too, so
	 * objects are named "<model>" rather than "<model>-nimserve". */
	nf_deploy_instance_name(instance, r->model.name);
	if (!err)
		err = write_helm(out_dir, r, values, instance, note);
	if (!err)
		err = nf_deploy_write_k8s(k8s, values, instance, instance);
	json_decref(values);
	free(dp);
	free(k8s);
	return err ? nf_error_wrap(err, "deployment templates") : 0;
}
