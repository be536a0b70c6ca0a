/*
 * push.c - `nimfactory push OCI_DIR[:TAG] REF`: push the tagged image or
 * index of a layout, with all its blobs and the artifacts (gate report) that
 * refer to it, to a registry (images/registry.h).  `nimfactory push --chart
 * CHART_DIR REF`: package a Helm chart (OUT/helm) and push it where `helm
 * push` would, REF/NAME:VERSION (factory/deploy.h).
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/nimfactory/commands.h"
#include "cmd/nimfactory/registry_cli.h"
#include "factory/deploy.h"
#include "images/layout.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

static const char push_usage[] =
	"usage: nimfactory push OCI_DIR[:TAG] REF [--insecure] [--chunk-size N] [--mount-from REPO] [--verbose]\n"
	"       nimfactory push --chart CHART_DIR HOST[:PORT][/NAMESPACE] [--insecure] [--verbose]\n"
	"  REF             HOST[:PORT]/NAME[:TAG], e.g. 127.0.0.1:5000/team/model:1.0.0\n"
	"                  (no TAG: the layout's TAG)\n"
	"  --insecure      plain HTTP, for a loopback registry only\n"
	"  --chunk-size N  blobs larger than N (bytes, or with k/M/G) go in resumable chunks (64M)\n"
	"  --mount-from R  try a cross-repository mount from repository R before uploading\n"
	"  --verbose       one line per request on stderr (never a secret)\n"
	"  --chart         push the Helm chart in CHART_DIR (e.g. OUT/helm), packaged as `helm\n"
	"                  package` does, to NAMESPACE/NAME:VERSION of its Chart.yaml, as Helm's\n"
	"                  OCI artifact: `helm install oci://HOST/NAMESPACE/NAME --version VERSION`\n"
	"Credentials: NIMFACTORY_REGISTRY_USER/NIMFACTORY_REGISTRY_PASSWORD, else docker's config.json.\n";

/* The chart's reference: REF/NAME:VERSION, as `helm push CHART oci://REF` makes it. */
static int chart_ref(nf_reg_ref *ref, const char *remote, const json_t *meta)
{
	char *full = nf_strdup_printf("%s/%s:%s", remote, json_string_value(json_object_get(meta, "name")),
				      json_string_value(json_object_get(meta, "version")));
	int err = full ? 0 : nf_error_set(NF_ENOMEM, "out of memory");
	if (!err && (strchr(remote, '@') || (strchr(remote, '/') && strchr(strchr(remote, '/'), ':'))))
		err = nf_error_set(NF_EINPUT, "%s: give HOST[:PORT][/NAMESPACE]; the chart's tag is its version",
				   remote);
	if (!err)
		err = nf_reg_ref_parse(ref, full);
	free(full);
	return err;
}

static int push_chart(const char *dir, const char *remote, bool insecure, bool verbose)
{
	json_t *meta = NULL;
	nf_reg_client *c = NULL;
	nf_reg_options o;
	nf_cli_reg st;
	nf_reg_ref ref;
	nf_oci_desc d;
	int err = nf_deploy_chart_meta(&meta, dir);

	if (!err)
		err = chart_ref(&ref, remote, meta);
	json_decref(meta);
	if (err)
		return nf_cmd_fail("push", err);
	nf_cli_reg_init(&o, &st, "push", insecure, verbose);
	if (!(err = nf_reg_client_new(&c, ref.host, &o)))
		err = nf_deploy_chart_push(&d, NULL, c, ref.name, dir);
	nf_cli_reg_done(&st);
	if (!err)
		printf("pushed chart %s/%s:%s@%s\n", ref.host, ref.name, ref.tag, d.digest);
	nf_reg_client_free(c);
	return err ? nf_cmd_fail("push", err) : NF_EXIT_OK;
}

/* What the options say. */
struct push_opts {
	bool insecure, verbose, chart;
	const char *mount_from;
	uint64_t chunk; /* 0: the client's default */
};

/* The options into *po, and the two operands checked to be there: -1 to go
 * on, else the exit code (usage, --help, a bad size). */
static int parse_push_opts(struct push_opts *po, int argc, char **argv)
{
	static const struct option options[] = {
		{"insecure", no_argument, NULL, 'k'},
		{"chunk-size", required_argument, NULL, 'c'},
		{"mount-from", required_argument, NULL, 'm'},
		{"verbose", no_argument, NULL, 'v'},
		{"chart", no_argument, NULL, 'C'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int ch, err;

	*po = (struct push_opts){0};
	optind = 1;
	while ((ch = getopt_long(argc, argv, "hv", options, NULL)) != -1) {
		switch (ch) {
		case 'k': po->insecure = true; break;
		case 'v': po->verbose = true; break;
		case 'C': po->chart = true; break;
		case 'm': po->mount_from = optarg; break;
		case 'c':
			if ((err = nf_cli_parse_size(&po->chunk, optarg, "--chunk-size")))
				return nf_cmd_fail("push", err);
			break;
		case 'h': fputs(push_usage, stdout); return NF_EXIT_OK;
		default: fputs(push_usage, stderr); return NF_EXIT_INPUT;
		}
	}
	if (optind + 2 != argc || (po->chart && (po->mount_from || po->chunk))) {
		fputs(push_usage, stderr);
		return NF_EXIT_INPUT;
	}
	return -1;
}

/* OCI_DIR or OCI_DIR:TAG into *dir (new string, caller frees) and *ltag
 * (inside *dir, NULL when not given).  A folder whose name has a colon is
 * taken whole first. */
static int split_layout_arg(char **dir, char **ltag, const char *arg)
{
	char *colon;
	*ltag = NULL;
	if (!(*dir = strdup(arg)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	if (nf_fs_is_dir(*dir))
		return 0;
	colon = strrchr(*dir, ':');
	if (colon) {
		*colon = '\0';
		*ltag = colon + 1;
	}
	if (!colon || !nf_fs_is_dir(*dir))
		return nf_error_set(NF_EINPUT, "%s: not an OCI layout folder", arg);
	return nf_oci_ref_check(*ltag);
}

/* REF into *ref, a tag and no digest; no tag in REF: the layout's ltag. */
static int push_ref(nf_reg_ref *ref, const char *arg, const char *ltag)
{
	int err;
	if ((err = nf_reg_ref_parse(ref, arg)))
		return err;
	if (ref->digest[0])
		return nf_error_set(NF_EINPUT, "%s: push to a tag, not a digest", arg);
	if (ref->tag[0])
		return 0;
	if (!ltag)
		return nf_error_set(NF_EINPUT, "%s: no tag (give REF:TAG or OCI_DIR:TAG)", arg);
	if (strlen(ltag) > NF_REG_TAG_MAX)
		return nf_error_set(NF_EINPUT, "tag '%.40s...' too long", ltag);
	snprintf(ref->tag, sizeof(ref->tag), "%s", ltag);
	return 0;
}

/* --mount-from names a repository (no tag, no digest) on ref's host. */
static int check_mount_from(const nf_reg_ref *ref, const char *mount_from)
{
	nf_reg_ref mr;
	char *probe = nf_strdup_printf("%s/%s", ref->host, mount_from);
	int err = probe ? nf_reg_ref_parse(&mr, probe) : nf_error_set(NF_ENOMEM, "out of memory");
	free(probe);
	if (err || mr.tag[0] || mr.digest[0])
		return nf_error_set(NF_EINPUT, "--mount-from '%.100s': not a repository name", mount_from);
	return 0;
}

static void print_push_stats(const nf_reg_ref *ref, const nf_oci_desc *d, const nf_reg_stats *s,
			     double secs)
{
	printf("pushed %s/%s:%s@%s\n", ref->host, ref->name, ref->tag, d->digest);
	printf("  blobs: %llu uploaded, %llu present, %llu mounted; %llu bytes sent in %.2f s (%.1f MB/s)\n",
	       (unsigned long long)s->blobs_uploaded, (unsigned long long)s->blobs_present,
	       (unsigned long long)s->blobs_mounted, (unsigned long long)s->blob_bytes_uploaded, secs,
	       secs > 0 ? (double)s->blob_bytes_uploaded / secs / 1e6 : 0.0);
	printf("  manifests: %llu put, %llu present; %llu requests, %llu retries, %llu resumed, %llu restarted\n",
	       (unsigned long long)s->manifests_put, (unsigned long long)s->manifests_present,
	       (unsigned long long)s->requests, (unsigned long long)s->retries,
	       (unsigned long long)s->resumes, (unsigned long long)s->restarts);
}

int nf_cmd_push(int argc, char **argv)
{
	struct push_opts po;
	char *dir = NULL, *ltag = NULL;
	nf_reg_ref ref;
	nf_reg_options o;
	nf_cli_reg st;
	nf_reg_client *c = NULL;
	nf_oci_desc d;
	int rc, err = 0;
	double t0;

	if ((rc = parse_push_opts(&po, argc, argv)) >= 0)
		return rc;
	if (po.chart)
		return push_chart(argv[optind], argv[optind + 1], po.insecure, po.verbose);
	if ((err = split_layout_arg(&dir, &ltag, argv[optind])) ||
	    (err = push_ref(&ref, argv[optind + 1], ltag)) ||
	    (po.mount_from && (err = check_mount_from(&ref, po.mount_from))))
		goto done;
	nf_cli_reg_init(&o, &st, "push", po.insecure, po.verbose);
	if (po.chunk)
		o.chunk_size = po.chunk;
	if ((err = nf_reg_client_new(&c, ref.host, &o)))
		goto done;
	t0 = nf_reg_now();
	err = nf_reg_push_layout(&d, c, dir, ltag, ref.name, ref.tag, po.mount_from);
	nf_cli_reg_done(&st);
	if (!err)
		print_push_stats(&ref, &d, nf_reg_client_stats(c), nf_reg_now() - t0);
done:
	nf_reg_client_free(c);
	free(dir);
	return err ? nf_cmd_fail("push", err) : NF_EXIT_OK;
}
