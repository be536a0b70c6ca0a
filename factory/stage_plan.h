/*
 * stage_plan.h - the stage graph of a recipe before any work: its keys from
 * what is known without fetching (a pinned source's sha256, a local file's
 * bytes) and which stages the local cache already holds, with the seconds
 * each took when it ran.  What `nimfactory plan` prints.
 */
#ifndef NF_FACTORY_STAGE_PLAN_H
#define NF_FACTORY_STAGE_PLAN_H

#include "factory/cache.h"
#include "factory/plan.h"
#include "factory/recipe.h"
#include "factory/stage_graph.h"

/*
 * Fill plan's stage keys and cached marks against c.  *known 0 (and no key
 * filled) when a source's digest is only learnt by fetching it (a git
 * source, an unpinned or archived download): pin it to plan its stages.
 * runtime_dir as in nf_package_opts.
 */
int nf_stage_plan(nf_stage_graph_keys *keys, int *known, nf_plan *plan, const nf_recipe *r,
		  const nf_cache *c, const char *runtime_dir);

#endif
