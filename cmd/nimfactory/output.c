/* output.c - profiles of a build output (see output.h). */
#include "cmd/nimfactory/output.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

int nf_output_engine_dir(char **out, const char *path, const char *profile)
{
	char *config = nf_path_join(path, "config.json"), *plan_path = nf_path_join(path, "plan.json");
	char names[1024] = "";
	size_t used = 0, i;
	json_t *plan = NULL, *profiles, *p;
	json_error_t jerr;
	int err = 0;

	*out = NULL;
	if (!config || !plan_path) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (nf_fs_exists(config) && !profile) {
		*out = strdup(path);
		err = *out ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (!nf_fs_exists(plan_path)) {
		err = nf_error_set(NF_EINPUT, "%s: neither an engine (config.json) nor a build output (plan.json)",
				   path);
		goto done;
	}
	plan = json_load_file(plan_path, 0, &jerr);
	profiles = plan ? json_object_get(plan, "profiles") : NULL;
	if (!json_is_array(profiles)) {
		err = nf_error_set(NF_EINPUT, "%s: not a plan: %s", plan_path, plan ? "no profiles" : jerr.text);
		goto done;
	}
	json_array_foreach(profiles, i, p) {
		const char *id = json_string_value(json_object_get(p, "id"));
		const char *name = json_string_value(json_object_get(p, "name"));
		if (!id || !name || strlen(id) != 64 || strchr(id, '/'))
			continue;
		if ((profile && (!strcmp(profile, id) || !strcmp(profile, name))) ||
		    (!profile && json_array_size(profiles) == 1)) {
			*out = nf_strdup_printf("%s/engines/%s", path, id);
			err = *out ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
		int n = snprintf(names + used, sizeof(names) - used, "%s%s", used ? ", " : "", name);
		if (n > 0 && (size_t)n < sizeof(names) - used)
			used += (size_t)n;
	}
	err = nf_error_set(NF_EINPUT, "%s: %s; profiles: %s", path,
			   profile ? "no such profile" : "several profiles: choose one with --profile",
			   names);
done:
	json_decref(plan);
	free(config);
	free(plan_path);
	return err;
}
