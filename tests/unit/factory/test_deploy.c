/*
 * test_deploy.c - deployment templates (factory/deploy.h): the values tree,
 * YAML that reads back as written, the plain manifests for each setting the
 * chart branches on, memory per profile, chart versions and names, and the
 * packaged chart's layout and determinism.
 *
 * With NF_DEPLOY_OUT=DIR it also writes DIR/<variant>.values.json and
 * DIR/<variant>.objects.json, which tests/e2e/deploy_helm.sh renders with the
 * real Helm and compares.
 */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/forward.h"
#include "factory/deploy.h"
#include "factory/yaml_tree.h"
#include "util/error.h"
#include "util/fs.h"
#include "tests/tap.h"

#define ID_CPU "1111111111111111111111111111111111111111111111111111111111111111"
#define ID_GPU "2222222222222222222222222222222222222222222222222222222222222222"
#define DIGEST "sha256:3333333333333333333333333333333333333333333333333333333333333333"

static const nf_deploy_profile profiles[] = {
	{"cpu-int8-wo-tp1", ID_CPU, "cpu", "int8-wo", 0, 700},
	{"h100-sxm-fp8-e4m3-tp2", ID_GPU, "h100-sxm", "fp8-e4m3", 2, 81920},
};

static json_t *base_values(void)
{
	nf_deploy_image img = {"registry.example.com/team/model", "1.2.0", DIGEST, profiles, 2, 0, 0, 0};
	json_t *v = NULL;
	return nf_deploy_values(&v, &img) ? NULL : v;
}

/* The object of a kind in a list of objects, or NULL. */
static json_t *find_kind(json_t *objs, const char *kind)
{
	size_t i;
	json_t *o;
	json_array_foreach(objs, i, o) {
		if (!strcmp(json_string_value(json_object_get(o, "kind")), kind))
			return o;
	}
	return NULL;
}

static json_t *container_of(json_t *deployment)
{
	json_t *spec = json_object_get(json_object_get(json_object_get(deployment, "spec"), "template"), "spec");
	return json_array_get(json_object_get(spec, "containers"), 0);
}

static const char *env_value(json_t *c, const char *name)
{
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(c, "env"), i, e) {
		if (!strcmp(json_string_value(json_object_get(e, "name")), name))
			return json_string_value(json_object_get(e, "value"));
	}
	return NULL;
}

static const char *res_str(json_t *c, const char *which, const char *key)
{
	return json_string_value(json_object_get(json_object_get(json_object_get(c, "resources"), which), key));
}

static json_int_t res_int(json_t *c, const char *which, const char *key)
{
	return json_integer_value(json_object_get(json_object_get(json_object_get(c, "resources"), which), key));
}

/* Write a variant's values and objects for the e2e test's comparison with Helm. */
static void dump_variant(const char *name, const json_t *values, const json_t *objs)
{
	const char *dir = getenv("NF_DEPLOY_OUT");
	char path[4096];
	if (!dir || !*dir)
		return;
	snprintf(path, sizeof(path), "%s/%s.values.json", dir, name);
	json_dump_file(values, path, JSON_INDENT(1) | JSON_SORT_KEYS);
	snprintf(path, sizeof(path), "%s/%s.objects.json", dir, name);
	json_dump_file(objs, path, JSON_INDENT(1) | JSON_SORT_KEYS);
}

static void test_values(void)
{
	json_t *v = base_values();
	ok(v != NULL, "values for an image with two profiles");
	is_str(json_string_value(json_object_get(json_object_get(v, "image"), "digest")), DIGEST,
	       "the image digest is in the values");
	is_str(json_string_value(json_object_get(v, "defaultProfile")), "cpu-int8-wo-tp1",
	       "the default profile is the one asked for");
	json_t *gpu = json_array_get(json_object_get(v, "profiles"), 1);
	is_int(json_integer_value(json_object_get(gpu, "gpus")), 2, "a tp2 GPU profile asks for 2 GPUs");
	is_int(json_integer_value(json_object_get(gpu, "memoryMiB")), 81920, "its memory is kept");
	is_int(json_integer_value(json_object_get(json_object_get(v, "server"), "maxBatch")),
	       NF_RECIPE_MAX_BATCH, "server.maxBatch is the batch the memory was computed for");
	nf_deploy_image sized = {"r", "t", NULL, profiles, 2, 0, .max_batch = 8, .max_context = 1024};
	json_t *sv = NULL;
	ok(nf_deploy_values(&sv, &sized) == 0 &&
		   json_integer_value(json_object_get(json_object_get(sv, "server"), "maxBatch")) == 8 &&
		   json_integer_value(json_object_get(json_object_get(sv, "server"), "maxContext")) == 1024,
	   "the recipe's serving.max_batch and max_context become server.maxBatch and maxContext");
	json_decref(sv);
	nf_deploy_image none = {"r", "t", NULL, profiles, 2, 2, 0, 0};
	json_t *bad = NULL;
	is_int(nf_deploy_values(&bad, &none), NF_EINPUT, "a default profile out of range is refused");
	json_decref(v);
}

/* YAML emitted from JSON parses back with the same strings and types. */
static void test_yaml(void)
{
	static const nf_yaml_limits lim = {1 << 20, 16, 4096, 4096};
	json_t *doc = json_pack("{s:s, s:s, s:s, s:i, s:b, s:[], s:{}}", "looks_bool", "true",
				"looks_int", "8000", "hostile", "a: b\n- c # d \"e\" \\ \x01",
				"port", 8000, "on", 1, "empty_list", "empty_map");
	const json_t *docs[] = {doc};
	char *yaml = NULL;
	size_t len = 0;
	nf_ynode *root = NULL;
	ok(nf_deploy_yaml(&yaml, &len, docs, 1, "# header\n") == 0, "JSON to YAML");
	ok(yaml && !strncmp(yaml, "# header\n", 9), "the header comes first");
	ok(nf_yaml_parse(&root, "t.yaml", yaml, len, &lim) == 0 && root && root->n == 14,
	   "it parses back as one mapping of seven keys");
	if (root && root->n == 14) {
		ok(!root->kids[1]->plain && !strcmp(root->kids[1]->str, "true"), "\"true\" stays a string");
		ok(!root->kids[3]->plain && !strcmp(root->kids[3]->str, "8000"), "\"8000\" stays a string");
		ok(!strcmp(root->kids[5]->str, "a: b\n- c # d \"e\" \\ \x01"),
		   "a string with YAML syntax, quotes and a control character reads back the same");
		ok(root->kids[7]->plain && !strcmp(root->kids[7]->str, "8000"), "an integer is plain");
		ok(root->kids[11]->type == NF_YNODE_SEQ && root->kids[11]->n == 0, "an empty list");
		ok(root->kids[13]->type == NF_YNODE_MAP && root->kids[13]->n == 0, "an empty mapping");
	}
	nf_yaml_free(root);
	free(yaml);
	json_decref(doc);
}

static void test_default_objects(void)
{
	json_t *v = base_values(), *objs = NULL;
	ok(nf_deploy_k8s_objects(&objs, v, NF_DEPLOY_CHART_NAME, "prod") == 0, "objects of the default values");
	is_int(json_array_size(objs), 2, "a Service and a Deployment, nothing else");
	json_t *d = find_kind(objs, "Deployment"), *c = container_of(d);
	is_str(json_string_value(json_object_get(json_object_get(d, "metadata"), "name")), "prod-nimserve",
	       "named release-chart, as the chart's fullname helper does");
	is_str(json_string_value(json_object_get(c, "image")), "registry.example.com/team/model@" DIGEST,
	       "the image is pinned by digest");
	is_str(env_value(c, "NIM_MODEL_PROFILE"), ID_CPU, "NIM_MODEL_PROFILE is the default profile's id");
	is_str(res_str(c, "limits", "memory"), "700Mi", "the memory limit is the profile's");
	ok(!json_object_get(json_object_get(json_object_get(c, "resources"), "limits"), "nvidia.com/gpu"),
	   "a CPU profile asks for no GPU");
	json_t *sp = json_object_get(c, "startupProbe");
	is_int(json_integer_value(json_object_get(sp, "failureThreshold")), 1 + (60 + 700 / 50) / 10,
	       "startup budget: base 60 s + 700 MiB at 50 MiB/s, in 10 s periods");
	is_str(json_string_value(json_object_get(json_object_get(sp, "httpGet"), "path")),
	       "/v1/health/ready", "the startup probe waits for the model to load");
	is_int(json_integer_value(json_object_get(json_object_get(d, "spec"), "replicas")), 1,
	       "replicas without an autoscaler");
	json_t *ann = json_object_get(json_object_get(json_object_get(json_object_get(d, "spec"), "template"),
						      "metadata"), "annotations");
	is_str(json_string_value(json_object_get(ann, "prometheus.io/path")), "/v1/metrics",
	       "Prometheus scrapes /v1/metrics");
	dump_variant("default", v, objs);
	json_decref(objs);
	json_decref(v);
}

/* Every branch of the templates at once: a GPU profile by id, an autoscaler,
 * a claim the chart makes, a ServiceMonitor, extra env, annotations, nodeSelector. */
static void test_variant_objects(void)
{
	json_t *v = base_values(), *objs = NULL;
	json_object_set_new(v, "profile", json_string(ID_GPU));
	json_object_set_new(json_object_get(v, "autoscaling"), "enabled", json_true());
	json_object_set_new(json_object_get(v, "modelCache"), "type", json_string("pvc"));
	json_object_set_new(json_object_get(v, "modelCache"), "storageClass", json_string("fast"));
	json_object_set_new(json_object_get(json_object_get(v, "metrics"), "serviceMonitor"), "enabled", json_true());
	json_object_set_new(json_object_get(v, "server"), "env",
			    json_pack("[{s:s, s:s}]", "name", "NIM_THREADS", "value", "8"));
	json_object_set_new(v, "podAnnotations", json_pack("{s:s}", "team", "llm"));
	json_object_set_new(v, "nodeSelector", json_pack("{s:s}", "nvidia.com/gpu.product", "H100"));
	json_object_set_new(v, "fullnameOverride", json_string("llm"));

	ok(nf_deploy_k8s_objects(&objs, v, NF_DEPLOY_CHART_NAME, "prod") == 0, "objects of the variant values");
	json_t *d = find_kind(objs, "Deployment"), *c = container_of(d);
	is_str(env_value(c, "NIM_MODEL_PROFILE"), ID_GPU, "the profile chosen by id");
	is_str(env_value(c, "NIM_THREADS"), "8", "extra env follows nimserve's");
	is_int(res_int(c, "limits", "nvidia.com/gpu"), 2, "a GPU profile's limit holds its GPUs");
	is_int(res_int(c, "requests", "nvidia.com/gpu"), 2, "and so does its request");
	ok(find_kind(objs, "HorizontalPodAutoscaler") != NULL, "an autoscaler when enabled");
	ok(!json_object_get(json_object_get(d, "spec"), "replicas"), "which owns the replicas");
	json_t *pvc = find_kind(objs, "PersistentVolumeClaim");
	is_str(pvc ? json_string_value(json_object_get(json_object_get(pvc, "metadata"), "name")) : NULL,
	       "llm-cache", "the chart's own claim, named after the fullname override");
	ok(find_kind(objs, "ServiceMonitor") != NULL, "a ServiceMonitor when enabled");
	json_t *ann = json_object_get(json_object_get(json_object_get(json_object_get(d, "spec"), "template"),
						      "metadata"), "annotations");
	ok(ann && !json_object_get(ann, "prometheus.io/scrape") && json_object_get(ann, "team"),
	   "no scrape annotations beside a ServiceMonitor, the pod's own kept");
	dump_variant("variant", v, objs);
	json_decref(objs);

	json_object_set_new(json_object_get(v, "modelCache"), "existingClaim", json_string("shared"));
	ok(nf_deploy_k8s_objects(&objs, v, NF_DEPLOY_CHART_NAME, "prod") == 0 && !find_kind(objs, "PersistentVolumeClaim"),
	   "an existing claim is used, not made");
	json_decref(objs);
	objs = NULL;
	json_object_set_new(v, "profile", json_string("a100-fp16"));
	is_int(nf_deploy_k8s_objects(&objs, v, NF_DEPLOY_CHART_NAME, "prod"), NF_EINPUT, "an unknown profile is refused");
	json_decref(v);
}

static void test_names(void)
{
	char out[54];
	nf_deploy_instance_name(out, "Stories260K");
	is_str(out, "stories260k", "a model name lowercased");
	nf_deploy_instance_name(out, "__My Model__v2.1__");
	is_str(out, "my-model-v2-1", "runs of other characters become one '-', none at the ends");
	nf_deploy_instance_name(out, "___");
	is_str(out, NF_DEPLOY_CHART_NAME, "nothing left: the chart's name");
	nf_deploy_instance_name(out, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	is_int(strlen(out), 53, "cut to 53 characters");

	is_str(nf_deploy_chart_version("1.0.0"), "1.0.0", "a SemVer tag is the chart version");
	is_str(nf_deploy_chart_version("2.10.3-rc.1"), "2.10.3-rc.1", "with a pre-release");
	is_str(nf_deploy_chart_version("latest"), "0.1.0", "not SemVer: 0.1.0");
	is_str(nf_deploy_chart_version("1.0"), "0.1.0", "two numbers are not SemVer");
	is_str(nf_deploy_chart_version("01.2.3"), "0.1.0", "a leading zero is not SemVer");
	is_str(nf_deploy_chart_version("1.2.3-01"), "0.1.0", "nor in a numeric pre-release");
	is_str(nf_deploy_chart_version("1.2.3-"), "0.1.0", "an empty pre-release is not SemVer");
	is_str(nf_deploy_chart_version("1.2.3-rc."), "0.1.0", "nor an empty identifier in one");
}

static int write_file(const char *dir, const char *name, const char *text)
{
	char *path = nf_path_join(dir, name);
	int err = nf_fs_write_atomic(path, text, strlen(text), 0644);
	free(path);
	return err;
}

static void test_memory(const char *tmp)
{
	char *dir = nf_path_join(tmp, "engine"), *w = nf_path_join(dir, "weights.safetensors");
	uint64_t mib = 0;
	nf_fs_mkdir_p(dir, 0755);
	write_file(dir, "config.json", "{\"model\": {\"dim\": 64, \"n_layers\": 5, \"n_heads\": 8, "
					"\"n_kv_heads\": 4, \"max_seq_len\": 512}}");
	int fd = open(w, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ok(fd >= 0 && ftruncate(fd, (off_t)3 << 20) == 0, "a 3 MiB weights file");
	if (fd >= 0)
		close(fd);
	/* K or V of one sequence in f16: 5 layers x 4 heads x 512 positions x 8 x 2 bytes */
	uint64_t kv = 5 * 4 * 512 * 8 * 2;
	uint64_t want = (2 * ((uint64_t)3 << 20) + 2 * 32 * kv + ((uint64_t)256 << 20) + (1 << 20) - 1) >> 20;
	ok(nf_deploy_profile_memory(&mib, dir, NF_KV_F16, 32, 0) == 0, "memory of an engine");
	is_int(mib, want, "twice the weights, 32 f16 KV caches and the runtime, in MiB rounded up");
	uint64_t f32 = 0;
	nf_deploy_profile_memory(&f32, dir, NF_KV_F32, 32, 0);
	ok(f32 > mib, "float KV caches take more");
	uint64_t capped = 0, want_capped = (2 * ((uint64_t)3 << 20) + 2 * 8 * (kv / 4) +
					  ((uint64_t)256 << 20) + (1 << 20) - 1) >> 20;
	ok(nf_deploy_profile_memory(&capped, dir, NF_KV_F16, 8, 128) == 0 && capped == want_capped,
	   "8 sequences of 128 of the 512 positions: %llu MiB", (unsigned long long)capped);
	write_file(dir, "config.json", "{\"model\": {\"dim\": 64, \"n_layers\": 5, \"n_heads\": 0, "
					"\"n_kv_heads\": 4, \"max_seq_len\": 512}}");
	is_int(nf_deploy_profile_memory(&mib, dir, NF_KV_F16, 32, 0), NF_EINPUT, "n_heads 0 is refused");
	free(dir);
	free(w);
}

/* The entries of a .tgz in order, joined by ' '. */
static char *tgz_entries(const char *tgz, size_t len)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	char *names = calloc(1, 4096);
	archive_read_support_filter_gzip(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_memory(a, tgz, len) == ARCHIVE_OK)
		while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
			strncat(names, archive_entry_pathname(e), 4000 - strlen(names));
			strncat(names, " ", 4000 - strlen(names));
		}
	archive_read_free(a);
	return names;
}

static void test_package(const char *tmp)
{
	char *chart = nf_path_join(tmp, "chart"), *tpl = nf_path_join(chart, "templates");
	char *a = NULL, *b = NULL;
	size_t alen = 0, blen = 0;
	nf_fs_mkdir_p(tpl, 0755);
	write_file(chart, "values.yaml", "x: 1\n");
	write_file(chart, "Chart.yaml", "apiVersion: v2\nname: demo\nversion: 0.2.0\n");
	write_file(tpl, "b.yaml", "kind: B\n");
	write_file(tpl, "a.yaml", "kind: A\n");
	ok(nf_deploy_chart_package(&a, &alen, chart) == 0, "package a chart");
	char *names = a ? tgz_entries(a, alen) : NULL;
	is_str(names, "demo/Chart.yaml demo/templates/a.yaml demo/templates/b.yaml demo/values.yaml ",
	       "Chart.yaml first, every file under the chart's name, in path order");
	ok(a && alen > 8 && !memcmp(a + 4, "\0\0\0\0", 4), "no time in the gzip header");
	ok(nf_deploy_chart_package(&b, &blen, chart) == 0 && alen == blen && !memcmp(a, b, alen),
	   "the same chart packages to the same bytes");
	write_file(chart, "Chart.yaml", "apiVersion: v2\nname: ../evil\nversion: 0.2.0\n");
	free(b);
	b = NULL;
	is_int(nf_deploy_chart_package(&b, &blen, chart), NF_EINPUT, "a chart name with a path is refused");
	write_file(chart, "Chart.yaml", "apiVersion: v2\nname: demo\nversion: 1.0.0+build.1\n");
	is_int(nf_deploy_chart_package(&b, &blen, chart), NF_EINPUT,
	       "a version that cannot be an OCI tag is refused");
	free(names);
	free(a);
	free(b);
	free(chart);
	free(tpl);
}

int main(void)
{
	char tmp[] = "/tmp/nf-test-deploy-XXXXXX";
	if (!mkdtemp(tmp)) {
		printf("Bail out! mkdtemp\n");
		return 1;
	}
	test_values();
	test_yaml();
	test_default_objects();
	test_variant_objects();
	test_names();
	test_memory(tmp);
	test_package(tmp);
	nf_fs_remove_tree(tmp);
	return done_testing();
}
