/*
 * nf_oci_tool - a small CLI over images/ for tests and benchmarks.
 *
 *   nf_oci_tool layer LAYOUT COMPRESSION SPEC...
 *       one layer; prints "<blob digest> <blob size> <diff_id> <media type>"
 *   nf_oci_tool image LAYOUT REF [--base DIR[:REF]] [--compression C]
 *       [--entrypoint ARG]... [--cmd ARG]... [--env K=V]... [--port P]...
 *       [--label K=V]... [--annotation K=V]... [--workdir DIR]
 *       --layer SPEC[,SPEC...]...      one layer per --layer; prints the manifest digest
 *   nf_oci_tool index LAYOUT REF TAG...   an image index of the tagged manifests
 *   nf_oci_tool inspect LAYOUT [--json]
 *
 * SPEC: SRC_DIR:DEST_PREFIX (a tree) | file=SRC:DEST[:OCTAL_MODE] | bytes=DEST:TEXT
 *       | link=DEST:TARGET | dir=DEST
 * Entry times come from SOURCE_DATE_EPOCH (default 0).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "images/image.h"
#include "images/inspect.h"
#include "images/layer.h"
#include "images/layout.h"
#include "util/error.h"
#include "util/banned.h"

#define MAX_LIST 64

static int usage(void)
{
	fprintf(stderr, "usage: nf_oci_tool layer|image|index|inspect ... (see the source header)\n");
	return NF_EXIT_INPUT;
}

static int epoch_from_env(int64_t *out)
{
	const char *s = getenv("SOURCE_DATE_EPOCH");
	char *end = NULL;
	long long v;
	*out = 0;
	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < 0)
		return nf_error_set(NF_EINPUT, "SOURCE_DATE_EPOCH '%.40s' is not a time", s);
	*out = v;
	return 0;
}

/* Add one SPEC to a layer; spec is modified in place. */
static int add_spec(nf_oci_layer *l, char *spec)
{
	char *a, *b;
	if (!strncmp(spec, "file=", 5)) {
		unsigned mode = 0;
		a = spec + 5;
		b = strchr(a, ':');
		if (!b)
			return nf_error_set(NF_EINPUT, "spec '%s': want file=SRC:DEST[:MODE]", spec);
		*b++ = '\0';
		char *m = strchr(b, ':');
		if (m) {
			char *end = NULL;
			*m++ = '\0';
			mode = (unsigned)strtoul(m, &end, 8);
			if (*end || mode > 0777)
				return nf_error_set(NF_EINPUT, "bad mode '%s'", m);
		}
		return nf_oci_layer_add_file(l, a, b, mode);
	}
	if (!strncmp(spec, "bytes=", 6) || !strncmp(spec, "link=", 5)) {
		bool bytes = spec[0] == 'b';
		a = strchr(spec, '=') + 1;
		b = strchr(a, ':');
		if (!b)
			return nf_error_set(NF_EINPUT, "spec '%s': want KIND=DEST:VALUE", spec);
		*b++ = '\0';
		return bytes ? nf_oci_layer_add_bytes(l, a, b, strlen(b), 0)
			     : nf_oci_layer_add_symlink(l, a, b);
	}
	if (!strncmp(spec, "dir=", 4))
		return nf_oci_layer_add_dir(l, spec + 4, 0);
	b = strrchr(spec, ':');
	if (!b)
		return nf_error_set(NF_EINPUT, "spec '%s': want SRC_DIR:DEST_PREFIX", spec);
	*b++ = '\0';
	return nf_oci_layer_add_tree(l, spec, b);
}

/* Build one layer from comma-separated specs (or an array of them). */
static int build_layer(nf_oci_layer_desc *out, const char *layout, nf_oci_compression comp,
		       char **specs, int n)
{
	nf_oci_layer *l = NULL;
	int64_t epoch;
	int err;
	if ((err = epoch_from_env(&epoch)))
		return err;
	if ((err = nf_oci_layer_new(&l, layout, comp, epoch)))
		return err;
	for (int i = 0; i < n && !err; i++)
		err = add_spec(l, specs[i]);
	if (!err)
		err = nf_oci_layer_finish(out, l);
	nf_oci_layer_free(l);
	return err;
}

static int cmd_layer(int argc, char **argv)
{
	nf_oci_compression comp;
	nf_oci_layer_desc d;
	int err;
	if (argc < 5)
		return usage();
	if ((err = nf_oci_compression_parse(&comp, argv[3])))
		return err;
	if ((err = nf_oci_layout_init(argv[2])))
		return err;
	if ((err = build_layer(&d, argv[2], comp, argv + 4, argc - 4)))
		return err;
	printf("%s %llu %s %s\n", d.blob.digest, (unsigned long long)d.blob.size, d.diff_id,
	       d.blob.media_type);
	return 0;
}

static int split_kv(nf_oci_kv *kv, char *s)
{
	char *eq = strchr(s, '=');
	if (!eq || eq == s)
		return nf_error_set(NF_EINPUT, "'%s' is not KEY=VALUE", s);
	*eq = '\0';
	kv->key = s;
	kv->value = eq + 1;
	return 0;
}

static int cmd_image(int argc, char **argv)
{
	const char *layout, *ref, *base = NULL;
	const char *entry[MAX_LIST + 1] = {0}, *cmd[MAX_LIST + 1] = {0}, *env[MAX_LIST + 1] = {0},
		   *ports[MAX_LIST + 1] = {0};
	nf_oci_kv labels[MAX_LIST], ann[MAX_LIST];
	size_t ne = 0, nc = 0, nv = 0, np = 0, nl = 0, na = 0;
	nf_oci_compression comp = NF_OCI_COMPRESS_GZIP;
	nf_oci_config_spec spec = {0};
	nf_oci_image *img = NULL;
	nf_oci_desc m;
	char *layers[MAX_LIST];
	size_t nlay = 0;
	int err = 0;

	if (argc < 4)
		return usage();
	layout = argv[2];
	ref = argv[3];
	if ((err = epoch_from_env(&spec.created)))
		return err;
	for (int i = 4; i < argc; i++) {
		const char *o = argv[i];
		char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			return nf_error_set(NF_EINPUT, "%s needs a value", o);
		i++;
		if (ne >= MAX_LIST || nc >= MAX_LIST || nv >= MAX_LIST || np >= MAX_LIST ||
		    nl >= MAX_LIST || na >= MAX_LIST || nlay >= MAX_LIST)
			return nf_error_set(NF_EINPUT, "too many options");
		if (!strcmp(o, "--base"))
			base = v;
		else if (!strcmp(o, "--compression"))
			err = nf_oci_compression_parse(&comp, v);
		else if (!strcmp(o, "--entrypoint"))
			entry[ne++] = v;
		else if (!strcmp(o, "--cmd"))
			cmd[nc++] = v;
		else if (!strcmp(o, "--env"))
			env[nv++] = v;
		else if (!strcmp(o, "--port"))
			ports[np++] = v;
		else if (!strcmp(o, "--label"))
			err = split_kv(&labels[nl++], v);
		else if (!strcmp(o, "--annotation"))
			err = split_kv(&ann[na++], v);
		else if (!strcmp(o, "--workdir"))
			spec.working_dir = v;
		else if (!strcmp(o, "--layer"))
			layers[nlay++] = v;
		else
			return nf_error_set(NF_EINPUT, "unknown option %s", o);
		if (err)
			return err;
	}
	spec.entrypoint = ne ? entry : NULL;
	spec.cmd = nc ? cmd : NULL;
	spec.env = nv ? env : NULL;
	spec.exposed_ports = np ? ports : NULL;
	spec.labels = labels;
	spec.n_labels = nl;
	spec.stop_signal = "SIGTERM";
	if ((err = nf_oci_image_new(&img, layout)))
		goto done;
	if (base) {
		char *b = strdup(base), *colon;
		if (!b) {
			err = nf_error_set(NF_ENOMEM, "out of memory");
			goto done;
		}
		colon = strrchr(b, ':');
		if (colon)
			*colon++ = '\0';
		err = nf_oci_image_set_base(img, b, colon);
		free(b);
		if (err)
			goto done;
	}
	for (size_t k = 0; k < nlay; k++) {
		char *specs[MAX_LIST], *save = NULL, *tok;
		int ns = 0;
		nf_oci_layer_desc d;
		for (tok = strtok_r(layers[k], ",", &save); tok && ns < MAX_LIST;
		     tok = strtok_r(NULL, ",", &save))
			specs[ns++] = tok;
		if ((err = build_layer(&d, layout, comp, specs, ns)))
			goto done;
		char by[256];
		snprintf(by, sizeof(by), "nf_oci_tool layer %zu (%s)", k, nf_oci_compression_name(comp));
		if ((err = nf_oci_image_add_layer(img, &d, by)))
			goto done;
	}
	if ((err = nf_oci_image_write(&m, img, &spec, ann, na, ref)))
		goto done;
	printf("%s %llu\n", m.digest, (unsigned long long)m.size);
done:
	nf_oci_image_free(img);
	return err;
}

static int cmd_index(int argc, char **argv)
{
	nf_oci_index_entry e[MAX_LIST];
	nf_oci_kv kv[MAX_LIST];
	nf_oci_platform p = {"amd64", "linux", NULL};
	nf_oci_desc out;
	int n = argc - 4, err;
	if (argc < 5 || n > MAX_LIST)
		return usage();
	for (int i = 0; i < n; i++) {
		memset(&e[i], 0, sizeof(e[i]));
		if ((err = nf_oci_layout_resolve(&e[i].manifest, argv[2], argv[4 + i])))
			return err;
		kv[i].key = "org.nimfactory.device";
		kv[i].value = argv[4 + i];
		e[i].platform = &p;
		e[i].annotations = &kv[i];
		e[i].n_annotations = 1;
	}
	if ((err = nf_oci_layout_write_index(&out, argv[2], e, (size_t)n, NULL, 0, argv[3])))
		return err;
	printf("%s %llu\n", out.digest, (unsigned long long)out.size);
	return 0;
}

static int cmd_inspect(int argc, char **argv)
{
	json_t *rep = NULL;
	int err;
	if (argc < 3)
		return usage();
	if ((err = nf_oci_inspect(&rep, argv[2])))
		return err;
	if (argc > 3 && !strcmp(argv[3], "--json")) {
		if (json_dumpf(rep, stdout, JSON_SORT_KEYS | JSON_INDENT(2)) == 0)
			putchar('\n');
	} else {
		err = nf_oci_inspect_print(stdout, rep);
	}
	json_decref(rep);
	return err;
}

int main(int argc, char **argv)
{
	int err;
	if (argc < 2)
		return usage();
	if (!strcmp(argv[1], "layer"))
		err = cmd_layer(argc, argv);
	else if (!strcmp(argv[1], "image"))
		err = cmd_image(argc, argv);
	else if (!strcmp(argv[1], "index"))
		err = cmd_index(argc, argv);
	else if (!strcmp(argv[1], "inspect"))
		err = cmd_inspect(argc, argv);
	else
		return usage();
	if (err > 0)
		return err; /* usage() */
	if (err) {
		fprintf(stderr, "nf_oci_tool: %s\n", nf_error_last());
		return nf_error_exit_status(err);
	}
	return 0;
}
