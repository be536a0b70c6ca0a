/* plan.c - `nimfactory plan RECIPE`: the profiles and stages a build would run. */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/nimfactory/commands.h"
#include "factory/plan.h"
#include "factory/recipe.h"
#include "util/error.h"
#include "util/banned.h"

static const char plan_usage[] = "usage: nimfactory plan RECIPE [--json]\n";

int nf_cmd_plan(int argc, char **argv)
{
	static const struct option options[] = {
		{"json", no_argument, NULL, 'J'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	nf_recipe *recipe = NULL;
	nf_plan *plan = NULL;
	int as_json = 0, c, err;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
		switch (c) {
		case 'J': as_json = 1; break;
		case 'h': fputs(plan_usage, stdout); return NF_EXIT_OK;
		default: fputs(plan_usage, stderr); return NF_EXIT_INPUT;
		}
	}
	if (optind + 1 != argc) {
		fputs(plan_usage, stderr);
		return NF_EXIT_INPUT;
	}
	err = nf_recipe_load(&recipe, argv[optind]);
	if (!err)
		err = nf_plan_make(&plan, recipe);
	if (err)
		goto done;
	if (as_json) {
		json_t *j = NULL;
		if (!(err = nf_plan_to_json(&j, plan))) {
			json_dumpf(j, stdout, JSON_SORT_KEYS | JSON_INDENT(2));
			fputc('\n', stdout);
		}
		json_decref(j);
		goto done;
	}
	printf("recipe %s (sha256:%s)\n\nprofiles:\n", recipe->model.name, plan->recipe_digest);
	for (size_t i = 0; i < plan->n_profiles; i++)
		printf("  %-28s %s\n", plan->profiles[i].name, plan->profiles[i].id);
	if (plan->n_dropped)
		printf("\ndropped:\n");
	for (size_t i = 0; i < plan->n_dropped; i++)
		printf("  %s-%s-tp%d: %s\n", plan->dropped[i].device, plan->dropped[i].precision,
		       plan->dropped[i].tensor_parallel, plan->dropped[i].reason);
	printf("\nstages:\n");
	for (size_t i = 0; i < plan->n_stages; i++) {
		printf("  %2zu %-36s", i, plan->stages[i].name);
		for (size_t k = 0; k < plan->stages[i].n_deps; k++)
			printf("%s%zu", k ? "," : " after ", plan->stages[i].deps[k]);
		printf("\n");
	}
done:
	nf_plan_free(plan);
	nf_recipe_free(recipe);
	if (err) {
		fprintf(stderr, "%s\n", nf_error_last());
		return nf_error_exit_status(err);
	}
	return NF_EXIT_OK;
}
