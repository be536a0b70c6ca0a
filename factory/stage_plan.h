/*
 * stage_plan.h - the stage graph of a recipe before any work: its keys from
 * what is known without fetching (a pinned source's sha256, a local file's
 * bytes) and which stages the local cache already holds, with the seconds
 * each took when it ran, what --cache-from holds, how long each would take
 * and whether each profile fits its device.  What `nimfactory plan` prints.
 */
#ifndef NF_FACTORY_STAGE_PLAN_H
#define NF_FACTORY_STAGE_PLAN_H

#include "factory/cache.h"
#include "factory/plan.h"
#include "factory/recipe.h"
#include "factory/remote_cache.h"
#include "factory/stage_graph.h"

typedef struct nf_stage_plan_opts {
	const nf_cache *cache;   /* the local cache */
	const char *runtime_dir; /* as in nf_package_opts; NULL: the default */
	nf_remote_cache *remote; /* --cache-from: which stages it holds; NULL: none asked */
	uint64_t host_memory;    /* the CPU profiles' capacity (0: unknown) */
} nf_stage_plan_opts;

/*
 * Fill plan's stage keys and cached marks against o->cache, the remote
 * marks against o->remote, each stage's estimate (factory/stage_estimate.h),
 * and, when the checkpoint is at hand (a local file, or its pinned blob in
 * the cache), each profile's memory from its header (plan->fits), dropping
 * the profiles that do not fit (factory/plan_fit.h).  *known 0 (and no key
 * filled) when a source's digest is only learnt by fetching it (a git
 * source, an unpinned or archived download): pin it to plan its stages.
 */
int nf_stage_plan(nf_stage_graph_keys *keys, int *known, nf_plan *plan, const nf_recipe *r,
		  const nf_stage_plan_opts *o);

#endif
