/*
 * test_pipeline.c - the CI pipeline graph and its renderings
 * (factory/pipeline.h): one compile job per profile on its device's runner
 * (a GPU SKU's name, else cpu), one package job per recipe needing exactly
 * its compile jobs, the remote cache on every build command, shell, YAML
 * and Groovy quoting that no recipe path can break out of, two recipes of
 * one model refused; and `build --profile`'s narrowed plan
 * (nf_plan_select_profile).  The YAML and the Jenkinsfile are checked
 * against GitLab's schema and structurally in tests/e2e/pipeline.sh.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "factory/pipeline.h"
#include "factory/plan.h"
#include "factory/recipe.h"
#include "tests/tap.h"
#include "util/error.h"

static nf_recipe *recipe_named(const char *model)
{
	char text[1024];
	nf_recipe *r = NULL;
	snprintf(text, sizeof text,
		 "apiVersion: nimfactory/v1\n"
		 "kind: Recipe\n"
		 "model: {name: %s, source: {path: m.bin}}\n"
		 "build:\n"
		 "  targets:\n"
		 "    - device: cpu\n"
		 "      precisions: [fp32, int8-wo]\n"
		 "gates: {correctness: {prompts: [hi]}}\n"
		 "image: {repository: team/%s, tag: \"2.0\"}\n",
		 model, model);
	if (nf_recipe_parse(&r, "p.yaml", text, strlen(text), "/recipes"))
		diag("recipe: %s", nf_error_last());
	return r;
}

/* The pipeline of the recipes in fmt, as a string (caller frees). */
static char *render(const json_t *graph, nf_pipeline_format fmt)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int err = f ? nf_pipeline_write(f, graph, fmt) : -1;
	if (f)
		fclose(f);
	if (err) {
		free(text);
		return NULL;
	}
	return text;
}

static const json_t *job_named(const json_t *graph, const char *name)
{
	size_t i;
	json_t *job;
	json_array_foreach(json_object_get(graph, "jobs"), i, job)
		if (!strcmp(json_string_value(json_object_get(job, "name")), name))
			return job;
	return NULL;
}

static const char *field(const json_t *job, const char *key)
{
	const char *s = job ? json_string_value(json_object_get(job, key)) : NULL;
	return s ? s : "(missing)";
}

static const char *script_line(const json_t *job, size_t i)
{
	const char *s = job ? json_string_value(json_array_get(json_object_get(job, "script"), i)) : NULL;
	return s ? s : "(missing)";
}

static void test_quote(void)
{
	char *a = nf_pipeline_shell_quote("recipes/llama.yaml");
	char *b = nf_pipeline_shell_quote("my recipes/it's.yaml");
	char *c = nf_pipeline_shell_quote("");
	char *d = nf_pipeline_shell_quote("$HOME;rm -rf /");
	is_str(a, "recipes/llama.yaml", "a plain word is left as it is");
	is_str(b, "'my recipes/it'\\''s.yaml'", "a space and a quote: single-quoted, ' as '\\''");
	is_str(c, "''", "an empty word is ''");
	is_str(d, "'$HOME;rm -rf /'", "a $ and a ; are quoted, never expanded or run");
	free(a);
	free(b);
	free(c);
	free(d);
}

static void test_format(void)
{
	nf_pipeline_format f = NF_PIPELINE_JSON;
	ok(nf_pipeline_format_parse(&f, "gitlab") == 0 && f == NF_PIPELINE_GITLAB, "gitlab parses");
	ok(nf_pipeline_format_parse(&f, "jenkins") == 0 && f == NF_PIPELINE_JENKINS, "jenkins parses");
	ok(nf_pipeline_format_parse(&f, "circleci") == NF_EINPUT &&
		   strstr(nf_error_last(), "not gitlab, jenkins or json"),
	   "another format is refused, naming the choices");
}

/* Two recipes; the second's int8 profile made a GPU profile, as a plan with
 * the CUDA backend would have it. */
static void test_graph(void)
{
	nf_recipe *r1 = recipe_named("alpha"), *r2 = recipe_named("beta");
	nf_plan *p1 = NULL, *p2 = NULL;
	json_t *g = NULL;
	int err = r1 && r2 ? nf_plan_make(&p1, r1) : -1;
	if (!err)
		err = nf_plan_make(&p2, r2);
	ok(!err && p1->n_profiles == 2 && p2->n_profiles == 2, "two recipes, two profiles each");
	if (err)
		goto done;
	p2->profiles[1].is_gpu = 1;
	snprintf(p2->profiles[1].device, sizeof(p2->profiles[1].device), "h100-sxm");
	snprintf(p2->profiles[1].name, sizeof(p2->profiles[1].name), "h100-sxm-int8-wo-tp1");
	nf_pipeline_recipe rs[] = {{"recipes/alpha.yaml", r1, p1}, {"my recipes/beta's.yaml", r2, p2}};
	nf_pipeline_opts o = {.cache_ref = "reg.example:5000/cache/ci"};
	if (!ok(nf_pipeline_graph(&g, rs, 2, &o) == 0, "the graph is made"))
		goto done;
	is_int((int)json_array_size(json_object_get(g, "jobs")), 6, "six jobs: 4 compile, 2 package");
	const json_t *cpu = job_named(g, "compile beta cpu-fp32-tp1");
	const json_t *gpu = job_named(g, "compile beta h100-sxm-int8-wo-tp1");
	const json_t *pkg = job_named(g, "package beta");
	is_str(field(cpu, "runner"), "cpu", "a CPU profile's job runs on the cpu runner");
	is_str(field(gpu, "runner"), "h100-sxm", "a GPU profile's job runs on its SKU's runner");
	is_str(script_line(gpu, 0),
	       "nimfactory build 'my recipes/beta'\\''s.yaml' --profile h100-sxm-int8-wo-tp1 --out "
	       "out/beta/h100-sxm-int8-wo-tp1 --cache-from reg.example:5000/cache/ci --cache-to "
	       "reg.example:5000/cache/ci",
	       "compile: build --profile, the recipe quoted, the remote cache both ways");
	is_str(field(gpu, "junit"), "out/beta/h100-sxm-int8-wo-tp1/reports/junit.xml",
	       "compile: its gate report as JUnit");
	char *needs = pkg ? json_dumps(json_object_get(pkg, "needs"), JSON_COMPACT) : NULL;
	is_str(needs, "[\"compile beta cpu-fp32-tp1\",\"compile beta h100-sxm-int8-wo-tp1\"]",
	       "the package job needs exactly its recipe's compile jobs");
	free(needs);
	is_str(script_line(pkg, 1),
	       "nimfactory push out/beta/image/oci:2.0 \"$NIMFACTORY_REGISTRY/team/beta:2.0\"",
	       "package: pushes the image under the registry variable");

	char *gl = render(g, NF_PIPELINE_GITLAB), *jf = render(g, NF_PIPELINE_JENKINS);
	ok(gl && strstr(gl, "\"compile beta h100-sxm-int8-wo-tp1\":\n  stage: \"compile\"\n  tags:\n"
			    "    - \"h100-sxm\"\n"),
	   "gitlab: the GPU job is tagged with its SKU");
	ok(gl && strstr(gl, "    - job: \"compile alpha cpu-int8-wo-tp1\"\n      artifacts: false\n"),
	   "gitlab: the package job needs the compile job, not its artifacts");
	ok(gl && strstr(gl, "    - \"nimfactory build 'my recipes/beta'\\\\''s.yaml' --profile"),
	   "gitlab: the backslash of the shell quoting is escaped in the YAML string");
	ok(gl && strstr(gl, "      junit: \"out/alpha/image/reports/junit.xml\"\n"),
	   "gitlab: the package job's gate report is a junit report");
	ok(jf && strstr(jf, "stage('compile beta h100-sxm-int8-wo-tp1') {\n"
			    "                    agent { label 'h100-sxm' }\n"),
	   "jenkins: the GPU stage runs on an agent labelled with its SKU");
	ok(jf && strstr(jf, "sh 'nimfactory build \\'my recipes/beta\\'\\\\\\'\\'s.yaml\\' --profile"),
	   "jenkins: quotes and backslashes are escaped in the Groovy string");
	ok(jf && strstr(jf, "testResults: 'out/beta/h100-sxm-int8-wo-tp1/reports/junit.xml'"),
	   "jenkins: the junit step reads the stage's gate report");
	free(gl);
	free(jf);
	json_decref(g);
	g = NULL;

	rs[1].recipe = r1;
	ok(nf_pipeline_graph(&g, rs, 2, NULL) == NF_EINPUT && strstr(nf_error_last(), "both build model alpha"),
	   "two recipes of one model are refused");
done:
	json_decref(g);
	nf_plan_free(p1);
	nf_plan_free(p2);
	nf_recipe_free(r1);
	nf_recipe_free(r2);
}

static void test_select_profile(void)
{
	nf_recipe *r = recipe_named("gamma");
	nf_plan *p = NULL;
	if (!ok(r && nf_plan_make(&p, r) == 0, "a plan of two profiles"))
		goto done;
	ok(nf_plan_select_profile(p, "cpu-fp32-tp9") == NF_EINPUT &&
		   strstr(nf_error_last(), "it has: cpu-fp32-tp1, cpu-int8-wo-tp1"),
	   "an unknown profile is refused, naming the plan's profiles");
	if (!ok(nf_plan_select_profile(p, "cpu-int8-wo-tp1") == 0, "select the second profile"))
		goto done;
	is_int((int)p->n_profiles, 1, "one profile left");
	is_str(p->profiles[0].name, "cpu-int8-wo-tp1", "the one asked for");
	/* fetch model, convert, reference, compile, gate: no package stage for one profile */
	is_int((int)p->n_stages, 5, "its stages: fetch, convert, reference, compile, gate");
	nf_stage *compile = nf_plan_stage(p, NF_STAGE_COMPILE, 0), *gate = nf_plan_stage(p, NF_STAGE_GATE, 0);
	ok(compile && gate && !nf_plan_stage(p, NF_STAGE_PACKAGE, -1), "compile and gate of profile 0, no package");
	nf_stage *reference = nf_plan_stage(p, NF_STAGE_REFERENCE, -1);
	ok(compile && gate && reference && gate->n_deps == 2 && &p->stages[gate->deps[0]] == compile &&
		   &p->stages[gate->deps[1]] == reference &&
		   compile->n_deps == 1 && p->stages[compile->deps[0]].kind == NF_STAGE_CONVERT,
	   "deps renumbered: gate after compile (after convert) and the reference");
done:
	nf_plan_free(p);
	nf_recipe_free(r);
}

int main(void)
{
	test_quote();
	test_format();
	test_graph();
	test_select_profile();
	return done_testing();
}
