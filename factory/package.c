/* package.c - the package stage (see package.h). */
#define _GNU_SOURCE
#include "factory/package.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "factory/manifest.h"
#include "images/artifact.h"
#include "images/image.h"
#include "images/layout.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/version.h"
#include "util/banned.h"

#define MAX_RUNTIME_LIBS 64

static nf_oci_compression compression_of(const nf_recipe *r)
{
	switch (r->image.compression) {
	case NF_COMPRESS_NONE: return NF_OCI_COMPRESS_NONE;
	case NF_COMPRESS_ZSTD: return NF_OCI_COMPRESS_ZSTD;
	default: return NF_OCI_COMPRESS_GZIP;
	}
}

char *nf_package_find_nimserve(const char *runtime_dir)
{
	char exe[PATH_MAX];
	if (runtime_dir)
		return nf_path_join(runtime_dir, "nimserve");
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	char *p = nf_path_join(exe, "nimserve");
	if (p && access(p, X_OK) != 0) {
		free(p);
		return NULL;
	}
	return p;
}

/* The shared libraries `ldd` resolves for bin (absolute paths, sorted). */
static int runtime_libs(char ***out, size_t *n_out, const char *bin)
{
	/* A preloaded library (faketime, a profiler) is the builder's, not nimserve's. */
	char *cmd = nf_strdup_printf("env -u LD_PRELOAD ldd '%s' 2>/dev/null", bin);
	char line[1024], **libs = NULL;
	size_t n = 0;
	int err = 0;
	FILE *p;

	*out = NULL;
	*n_out = 0;
	if (!cmd || strchr(bin, '\''))
		return nf_error_set(NF_EINPUT, "%s: unusable path", bin);
	p = popen(cmd, "r");
	free(cmd);
	if (!p)
		return nf_error_set(NF_EENV, "cannot run ldd (Debian package libc-bin)");
	libs = calloc(MAX_RUNTIME_LIBS, sizeof(*libs));
	if (!libs)
		err = nf_error_set(NF_ENOMEM, "out of memory");
	while (!err && fgets(line, sizeof(line), p)) {
		/* "\tlibfoo.so.1 => /lib/x86_64-linux-gnu/libfoo.so.1 (0x...)" or "\t/lib64/ld-linux... (0x...)" */
		char *path = strstr(line, "=> ");
		path = path ? path + 3 : line;
		while (*path == ' ' || *path == '\t')
			path++;
		if (*path != '/')
			continue;
		char *end = strstr(path, " (");
		if (end)
			*end = '\0';
		path[strcspn(path, "\n")] = '\0';
		if (n == MAX_RUNTIME_LIBS) {
			err = nf_error_set(NF_EINPUT, "%s: more than %d shared libraries", bin,
					   MAX_RUNTIME_LIBS);
			break;
		}
		if (!(libs[n] = strdup(path)))
			err = nf_error_set(NF_ENOMEM, "out of memory");
		else
			n++;
	}
	if (pclose(p) != 0 && !err)
		err = nf_error_set(NF_EENV, "ldd failed on %s", bin);
	if (err) {
		for (size_t i = 0; i < n; i++)
			free(libs[i]);
		free(libs);
		return err;
	}
	for (size_t i = 1; i < n; i++) /* insertion sort: a few dozen names */
		for (size_t k = i; k > 0 && strcmp(libs[k - 1], libs[k]) > 0; k--) {
			char *t = libs[k];
			libs[k] = libs[k - 1];
			libs[k - 1] = t;
		}
	*out = libs;
	*n_out = n;
	return 0;
}

static int add_runtime_layer(nf_oci_image *img, const char *oci, const nf_package_opts *o,
			     int64_t epoch, const char *nimserve)
{
	nf_oci_layer *l = NULL;
	nf_oci_layer_desc ld;
	char **libs = NULL;
	size_t n_libs = 0;
	int err;

	if ((err = runtime_libs(&libs, &n_libs, nimserve)))
		return err;
	err = nf_oci_layer_new(&l, oci, compression_of(o->recipe), epoch);
	if (!err)
		err = nf_oci_layer_add_file(l, nimserve, NF_IMAGE_ROOT "/bin/nimserve", 0755);
	for (size_t i = 0; !err && i < n_libs; i++) {
		char real[PATH_MAX];
		/* The loader looks the library up by the name ldd printed; ship the
		 * bytes behind it under that name. */
		if (!realpath(libs[i], real))
			err = nf_error_set(NF_EENV, "%s: cannot resolve", libs[i]);
		else
			err = nf_oci_layer_add_file(l, real, libs[i] + 1, 0755);
	}
	if (!err)
		err = nf_oci_layer_add_dir(l, "tmp", 01777);
	if (!err)
		err = nf_oci_layer_finish(&ld, l);
	if (!err)
		err = nf_oci_image_add_layer(img, &ld, "nimfactory: runtime (nimserve " NF_VERSION ")");
	nf_oci_layer_free(l);
	for (size_t i = 0; i < n_libs; i++)
		free(libs[i]);
	free(libs);
	return err;
}

/* The engine's weights file, named by its digest so profiles that quantize
 * to the same bytes share one layer, and changing a gate or a kernel never
 * changes (or re-pushes) it. */
static int weights_digest(char hex[NF_SHA256_HEX_LEN + 1], const char *engine_dir)
{
	char *path = nf_path_join(engine_dir, "weights.safetensors");
	int err = path ? nf_sha256_file_hex(hex, path) : nf_error_set(NF_ENOMEM, "out of memory");
	free(path);
	return err;
}

static int add_weights_layer(nf_oci_image *img, const char *oci, const nf_package_opts *o,
			     int64_t epoch, const char *engine_dir, const char *hex)
{
	nf_oci_layer *l = NULL;
	nf_oci_layer_desc ld;
	char *src = nf_path_join(engine_dir, "weights.safetensors");
	char *dest = nf_strdup_printf(NF_IMAGE_ROOT "/weights/%s.safetensors", hex);
	char *created_by = nf_strdup_printf("nimfactory: weights sha256:%s", hex);
	int err = src && dest && created_by ? nf_oci_layer_new(&l, oci, compression_of(o->recipe), epoch)
					     : nf_error_set(NF_ENOMEM, "out of memory");
	if (!err)
		err = nf_oci_layer_add_file(l, src, dest, 0644);
	if (!err)
		err = nf_oci_layer_finish(&ld, l);
	if (!err)
		err = nf_oci_image_add_layer(img, &ld, created_by);
	nf_oci_layer_free(l);
	free(src);
	free(dest);
	free(created_by);
	return err;
}

/* A GPU profile's cuda/ part (engine/cuda/cubin.h): the folder, the cubin
 * of its arch and the PTX, those that exist. */
static int add_cuda_part(nf_oci_layer *l, const char *src_dir, const char *dest_dir,
			 const nf_profile *p)
{
	char *src = nf_path_join(src_dir, "cuda"), *dest = nf_path_join(dest_dir, "cuda");
	char *cubin = nf_strdup_printf("%s.cubin", p->arch);
	int err = src && dest && cubin ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
	if (!err && p->is_gpu && nf_fs_is_dir(src)) {
		const char *const files[] = {cubin, "kernels.ptx"};
		err = nf_oci_layer_add_dir(l, dest, 0755);
		for (size_t i = 0; !err && i < 2; i++) {
			char *s = nf_path_join(src, files[i]), *d = nf_path_join(dest, files[i]);
			if (!s || !d)
				err = nf_error_set(NF_ENOMEM, "out of memory");
			else if (nf_fs_exists(s))
				err = nf_oci_layer_add_file(l, s, d, 0644);
			free(s);
			free(d);
		}
	}
	free(src);
	free(dest);
	free(cubin);
	return err;
}

/* What is per profile and small: config, tactics, the tokenizer files of
 * either kind (engine_tokenizer.h), a GPU profile's roofline model and
 * cuda/ part, and a link to the shared weights. */
static int add_engine_layer(nf_oci_image *img, const char *oci, const nf_package_opts *o,
			    int64_t epoch, const nf_profile *p, const char *weights_hex)
{
	static const char *const files[] = {"config.json", "tactics.json", "tokenizer.bin",
					    "tokenizer.json", "tokenizer_config.json", "roofline.json"};
	nf_oci_layer *l = NULL;
	nf_oci_layer_desc ld;
	char *src_dir = nf_strdup_printf("%s/engines/%s", o->out_dir, p->id);
	char *dest_dir = nf_strdup_printf(NF_IMAGE_ROOT "/engines/%s", p->id);
	char *created_by = nf_strdup_printf("nimfactory: engine %s (%s)", p->name, p->id);
	char *link = nf_strdup_printf("../../weights/%s.safetensors", weights_hex);
	int err = src_dir && dest_dir && created_by && link
			  ? nf_oci_layer_new(&l, oci, compression_of(o->recipe), epoch)
			  : nf_error_set(NF_ENOMEM, "out of memory");

	if (!err)
		err = nf_oci_layer_add_dir(l, dest_dir, 0755);
	for (size_t i = 0; !err && i < sizeof(files) / sizeof(files[0]); i++) {
		char *src = nf_path_join(src_dir, files[i]), *dest = nf_path_join(dest_dir, files[i]);
		if (!src || !dest)
			err = nf_error_set(NF_ENOMEM, "out of memory");
		else if (nf_fs_exists(src))
			err = nf_oci_layer_add_file(l, src, dest, 0644);
		free(src);
		free(dest);
	}
	if (!err)
		err = add_cuda_part(l, src_dir, dest_dir, p);
	if (!err) {
		char *dest = nf_path_join(dest_dir, "weights.safetensors");
		err = dest ? nf_oci_layer_add_symlink(l, dest, link) : nf_error_set(NF_ENOMEM, "out of memory");
		free(dest);
	}
	if (!err)
		err = nf_oci_layer_finish(&ld, l);
	if (!err)
		err = nf_oci_image_add_layer(img, &ld, created_by);
	nf_oci_layer_free(l);
	free(src_dir);
	free(dest_dir);
	free(created_by);
	free(link);
	return err;
}

static int add_manifest_layer(nf_oci_image *img, const char *oci, const nf_package_opts *o,
			      int64_t epoch, const char *yaml, size_t len)
{
	nf_oci_layer *l = NULL;
	nf_oci_layer_desc ld;
	int err = nf_oci_layer_new(&l, oci, compression_of(o->recipe), epoch);
	if (!err)
		err = nf_oci_layer_add_bytes(l, NF_IMAGE_ROOT "/model_manifest.yaml", yaml, len, 0644);
	if (!err)
		err = nf_oci_layer_finish(&ld, l);
	if (!err)
		err = nf_oci_image_add_layer(img, &ld, "nimfactory: model manifest");
	nf_oci_layer_free(l);
	return err;
}

int nf_package_render_manifest(char **yaml, size_t *len, const nf_recipe *r, const nf_plan *plan,
			       const char *device)
{
	const char *prefs[NF_PREC_COUNT];
	const nf_recipe_speculative *sp = &r->serving.speculative;
	nf_profile *subset = calloc(plan->n_profiles, sizeof(*subset));
	size_t n = 0;
	int err;

	if (!subset)
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (size_t i = 0; i < plan->n_profiles; i++)
		if (!device || !strcmp(plan->profiles[i].device, device))
			subset[n++] = plan->profiles[i]; /* shallow: strings stay owned by the plan */
	for (size_t i = 0; i < r->serving.n_precision_preference; i++)
		prefs[i] = nf_precision_name(r->serving.precision_preference[i]);
	nf_manifest_info info = {
		.model_name = r->model.name,
		.model_family = nf_model_family_name(r->model.family),
		.model_version = r->model.version,
		.recipe_digest = plan->recipe_digest,
		.chat_template = plan->chat_template ? plan->chat_template
						     : nf_chat_template_name(r->serving.chat_template),
		.precision_preference = prefs,
		.n_precision_preference = r->serving.n_precision_preference,
		.tp_preference = r->serving.tensor_parallel_preference,
		.n_tp_preference = r->serving.n_tensor_parallel_preference,
		.engine_prefix = "engines",
		.spec_method = sp->present ? nf_recipe_spec_method_name(sp->method) : NULL,
		.spec_k = sp->k,
		.spec_draft_profile = sp->draft_profile,
		.max_batch = r->serving.max_batch != NF_RECIPE_MAX_BATCH ? r->serving.max_batch : 0,
		.max_context = r->serving.max_context,
	};
	err = nf_manifest_render(yaml, len, &info, subset, n);
	free(subset);
	return err;
}

static const char *label_value(const nf_recipe *r, const char *key)
{
	for (size_t i = 0; i < r->image.n_labels; i++)
		if (!strcmp(r->image.labels[i].key, key))
			return r->image.labels[i].value;
	return NULL;
}

/* One image holding the profiles of `device` (all when NULL); tagged ref. */
/* Whether profile p goes into the image for device (NULL: every device). */
static bool for_device(const nf_profile *p, const char *device)
{
	return !device || !strcmp(p->device, device);
}

/* A weights layer per distinct weights digest, then an engine layer per
 * profile that points to its weights; *ids gets the profiles' ids, comma
 * separated (new string, caller frees). */
static int add_profile_layers(char **ids, nf_oci_image *img, const char *oci,
			      const nf_package_opts *o, int64_t epoch, const char *device)
{
	const nf_plan *plan = o->plan;
	char (*weights)[NF_SHA256_HEX_LEN + 1] = calloc(plan->n_profiles, sizeof(*weights));
	size_t ids_len = 0;
	int err = 0;

	*ids = calloc(plan->n_profiles, NF_SHA256_HEX_LEN + 1);
	if (!*ids || !weights) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; !err && i < plan->n_profiles; i++) {
		const nf_profile *p = &plan->profiles[i];
		int seen = 0;
		if (!for_device(p, device))
			continue;
		if ((err = weights_digest(weights[i], p->engine_dir)))
			break;
		for (size_t k = 0; k < i; k++)
			seen |= !strcmp(weights[k], weights[i]);
		if (!seen)
			err = add_weights_layer(img, oci, o, epoch, p->engine_dir, weights[i]);
	}
	for (size_t i = 0; !err && i < plan->n_profiles; i++) {
		const nf_profile *p = &plan->profiles[i];
		if (!for_device(p, device))
			continue;
		err = add_engine_layer(img, oci, o, epoch, p, weights[i]);
		if (ids_len)
			(*ids)[ids_len++] = ',';
		memcpy(*ids + ids_len, p->id, NF_SHA256_HEX_LEN);
		ids_len += NF_SHA256_HEX_LEN;
	}
done:
	free(weights);
	return err;
}

#define IMAGE_ANNOTATIONS_MAX 8

/* The manifest's annotations into ann (IMAGE_ANNOTATIONS_MAX), their count
 * returned; they point into r, o->plan, created and ids. */
static size_t image_annotations(nf_oci_kv *ann, const nf_package_opts *o, const char *created,
				const char *ids)
{
	const nf_recipe *r = o->recipe;
	size_t n = 0;
	/* source and revision: the recipe's labels when it gives them; else the
	 * model's source and the recipe's digest, which say what this was built from. */
	const char *source = label_value(r, NF_OCI_ANN_SOURCE), *revision = label_value(r, NF_OCI_ANN_REVISION);
	if (!source && r->model.source.kind == NF_SOURCE_URL)
		source = r->model.source.url;
	if (!source && r->model.source.kind == NF_SOURCE_GIT)
		source = r->model.source.git.url;
	ann[n++] = (nf_oci_kv){NF_OCI_ANN_TITLE, r->model.name};
	ann[n++] = (nf_oci_kv){NF_OCI_ANN_VERSION, r->image.tag};
	ann[n++] = (nf_oci_kv){NF_OCI_ANN_CREATED, created};
	if (source)
		ann[n++] = (nf_oci_kv){NF_OCI_ANN_SOURCE, source};
	ann[n++] = (nf_oci_kv){NF_OCI_ANN_REVISION, revision ? revision : o->plan->recipe_digest};
	ann[n++] = (nf_oci_kv){"io.nimfactory.recipe.digest", o->plan->recipe_digest};
	ann[n++] = (nf_oci_kv){"io.nimfactory.profiles", ids};
	ann[n++] = (nf_oci_kv){"io.nimfactory.gate", "passed"};
	return n;
}

/* The image config (nimserve's entrypoint and health check when the image
 * has the runtime) and the manifest, tagged ref. */
static int write_config(nf_oci_desc *manifest, nf_oci_image *img, const nf_package_opts *o,
			bool runtime, const char *ids, const char *ref)
{
	static const char *const entrypoint[] = {"/" NF_IMAGE_ROOT "/bin/nimserve", NULL};
	static const char *const env[] = {"NIM_MANIFEST=/" NF_IMAGE_ROOT "/model_manifest.yaml",
					  "NIM_HOST=0.0.0.0", "NIM_PORT=8000", NULL};
	static const char *const ports[] = {"8000/tcp", NULL};
	static const char *const health[] = {"CMD", "/" NF_IMAGE_ROOT "/bin/nimserve", "--health",
					     NULL};
	const nf_recipe *r = o->recipe;
	nf_oci_healthcheck hc = {.test = health, .interval_s = 10, .timeout_s = 5,
				 .start_period_s = 30, .retries = 3};
	nf_oci_kv ann[IMAGE_ANNOTATIONS_MAX], *labels = calloc(r->image.n_labels + 1, sizeof(*labels));
	char created[32];
	int err;

	if (!labels)
		return nf_error_set(NF_ENOMEM, "out of memory");
	for (size_t i = 0; i < r->image.n_labels; i++)
		labels[i] = (nf_oci_kv){r->image.labels[i].key, r->image.labels[i].value};
	nf_oci_time_rfc3339(created, r->image.created_epoch);
	nf_oci_config_spec spec = {
		.created = r->image.created_epoch,
		.entrypoint = runtime ? entrypoint : NULL,
		.env = env,
		.exposed_ports = ports,
		.labels = labels,
		.n_labels = r->image.n_labels,
		.working_dir = "/" NF_IMAGE_ROOT,
		.stop_signal = "SIGTERM",
		.healthcheck = runtime ? &hc : NULL,
	};
	err = nf_oci_image_write(manifest, img, &spec, ann, image_annotations(ann, o, created, ids),
				 ref);
	free(labels);
	return err;
}

static int write_image(nf_oci_desc *manifest, const char *oci, const nf_package_opts *o,
		       const char *device, const char *nimserve, const char *ref)
{
	const nf_recipe *r = o->recipe;
	int64_t epoch = r->image.created_epoch;
	nf_oci_image *img = NULL;
	char *yaml = NULL, *ids = NULL;
	size_t yaml_len = 0;
	int err;

	if ((err = nf_oci_image_new(&img, oci)) ||
	    (r->image.base && (err = nf_oci_image_set_base(img, r->image.base, NULL))) ||
	    (nimserve && (err = add_runtime_layer(img, oci, o, epoch, nimserve))) ||
	    (err = add_profile_layers(&ids, img, oci, o, epoch, device)) ||
	    (err = nf_package_render_manifest(&yaml, &yaml_len, o->recipe, o->plan, device)) ||
	    (err = add_manifest_layer(img, oci, o, epoch, yaml, yaml_len)))
		goto done;
	err = write_config(manifest, img, o, nimserve != NULL, ids, ref);
done:
	nf_oci_image_free(img);
	free(yaml);
	free(ids);
	return err;
}

/* The gate report travels with the image: an OCI artifact whose subject is
 * the tagged image (or index), pushed with it and read by `promote`. */
static int attach_gate_report(const nf_package_opts *o, const char *oci, const nf_oci_desc *subject)
{
	char *path = nf_path_join(o->out_dir, "reports/gates.json"), *data = NULL;
	nf_oci_desc artifact;
	size_t len = 0;
	char created[32];
	int err = path ? nf_fs_read_file(&data, &len, path, NF_OCI_JSON_MAX)
		       : nf_error_set(NF_ENOMEM, "out of memory");

	nf_oci_time_rfc3339(created, o->recipe->image.created_epoch);
	const nf_oci_kv ann[] = {
		{NF_OCI_ANN_CREATED, created},
		{"io.nimfactory.recipe.digest", o->plan->recipe_digest},
	};
	if (!err)
		err = nf_oci_artifact_attach(&artifact, oci, subject, NF_OCI_ARTIFACT_GATE_REPORT,
					     "application/json", data, len, ann,
					     sizeof(ann) / sizeof(ann[0]));
	free(path);
	free(data);
	return err;
}

int nf_package_image(const nf_package_opts *o, char key[NF_SHA256_HEX_LEN + 1])
{
	const nf_recipe *r = o->recipe;
	char *oci = nf_path_join(o->out_dir, "oci"), *nimserve = nf_package_find_nimserve(o->runtime_dir);
	nf_oci_desc top;
	int err = oci ? 0 : nf_error_set(NF_ENOMEM, "out of memory");

	if (!err && !nimserve)
		nf_log_warn(o->log, "package",
			    "no nimserve binary beside nimfactory: the image has no runtime layer");
	if (!err && nimserve && access(nimserve, X_OK) != 0)
		err = nf_error_set(NF_EENV, "%s: not an executable nimserve", nimserve);
	if (!err && r->image.layout == NF_LAYOUT_SINGLE) {
		err = write_image(&top, oci, o, NULL, nimserve, r->image.tag);
	} else if (!err) {
		/* One image per device, listed in an index that carries the tag. */
		nf_oci_index_entry *entries = calloc(o->plan->n_profiles, sizeof(*entries));
		nf_oci_kv *dev_ann = calloc(o->plan->n_profiles, sizeof(*dev_ann));
		static const nf_oci_platform platform = {"amd64", "linux", NULL};
		size_t n = 0;
		if (!entries || !dev_ann)
			err = nf_error_set(NF_ENOMEM, "out of memory");
		for (size_t i = 0; !err && i < o->plan->n_profiles; i++) {
			const char *dev = o->plan->profiles[i].device;
			int seen = 0;
			for (size_t k = 0; k < i; k++)
				seen |= !strcmp(o->plan->profiles[k].device, dev);
			if (seen)
				continue;
			char ref[160];
			snprintf(ref, sizeof(ref), "%s-%s", r->image.tag, dev);
			err = write_image(&entries[n].manifest, oci, o, dev, nimserve, ref);
			dev_ann[n] = (nf_oci_kv){"io.nimfactory.device", dev};
			entries[n].platform = &platform;
			entries[n].annotations = &dev_ann[n];
			entries[n].n_annotations = 1;
			n++;
		}
		if (!err)
			err = nf_oci_layout_write_index(&top, oci, entries, n, NULL, 0, r->image.tag);
		free(entries);
		free(dev_ann);
	}
	if (!err)
		err = attach_gate_report(o, oci, &top);
	if (!err)
		memcpy(key, top.digest + strlen("sha256:"), NF_SHA256_HEX_LEN + 1);
	free(oci);
	free(nimserve);
	return err;
}
