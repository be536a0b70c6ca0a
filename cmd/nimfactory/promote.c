/*
 * promote.c - `nimfactory promote SRC_REF DST_REF`: copy an image between
 * repositories of one registry by cross-repository mounts (no layer bytes
 * uploaded), only when its gate report artifact says it passed, unless
 * --force-unpassed, which is recorded on the copied report
 * (io.nimfactory.promote.forced=true) and logged.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/nimfactory/commands.h"
#include "cmd/nimfactory/registry_cli.h"
#include "images/artifact.h"
#include "util/error.h"
#include "util/banned.h"

static const char promote_usage[] =
	"usage: nimfactory promote SRC_REF DST_REF [--insecure] [--force-unpassed|--force] [--verbose]\n"
	"  SRC_REF, DST_REF  HOST[:PORT]/NAME:TAG (or @sha256:...) on the same registry\n"
	"  --force-unpassed  promote although the gate report is missing or did not pass\n"
	"                    (a skipped gate, a GPU profile's built where its GPU is not,\n"
	"                    is not passed); --force is the same\n"
	"                    (recorded as " NF_OCI_ANN_PROMOTE_FORCED "=true on the copied report)\n"
	"Exit 3 when the gate report is missing or did not pass.\n";

int nf_cmd_promote(int argc, char **argv)
{
	static const struct option options[] = {
		{"insecure", no_argument, NULL, 'k'},
		{"force-unpassed", no_argument, NULL, 'f'},
		{"force", no_argument, NULL, 'f'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	bool insecure = false, force = false, verbose = false;
	nf_reg_ref src, dst;
	nf_reg_options o;
	nf_cli_reg st;
	nf_reg_client *c = NULL;
	nf_reg_promotion p;
	int ch, err;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "hv", options, NULL)) != -1) {
		switch (ch) {
		case 'k': insecure = true; break;
		case 'f': force = true; break;
		case 'v': verbose = true; break;
		case 'h': fputs(promote_usage, stdout); return NF_EXIT_OK;
		default: fputs(promote_usage, stderr); return NF_EXIT_INPUT;
		}
	}
	if (optind + 2 != argc) {
		fputs(promote_usage, stderr);
		return NF_EXIT_INPUT;
	}
	if ((err = nf_reg_ref_parse(&src, argv[optind])) || (err = nf_reg_ref_parse(&dst, argv[optind + 1])))
		return nf_cmd_fail("promote", err);
	nf_cli_reg_init(&o, &st, "promote", insecure, verbose);
	if ((err = nf_reg_client_new(&c, src.host, &o)))
		goto done;
	err = nf_reg_promote(&p, c, &src, &dst, force);
	nf_cli_reg_done(&st);
	if (err)
		goto done;
	if (p.forced)
		fprintf(stderr, "nimfactory promote: FORCED: %s promoted to %s although its gate report %s%s%s (recorded as %s=true%s)\n",
			argv[optind], argv[optind + 1], p.report_found ? "says '" : "is missing",
			p.report_found ? p.verdict : "", p.report_found ? "'" : "",
			NF_OCI_ANN_PROMOTE_FORCED, p.report_found ? " on the copied report" : " nowhere: no report to annotate");
	{
		const nf_reg_stats *s = nf_reg_client_stats(c);
		printf("promoted %s to %s@%s\n", argv[optind], argv[optind + 1], p.manifest.digest);
		printf("  blobs: %llu mounted, %llu present, %llu uploaded (%llu bytes); gate: %s%s\n",
		       (unsigned long long)s->blobs_mounted, (unsigned long long)s->blobs_present,
		       (unsigned long long)s->blobs_uploaded, (unsigned long long)s->blob_bytes_uploaded,
		       p.report_found ? p.verdict : "no report", p.forced ? " (forced)" : "");
		if (p.report_found)
			printf("  gate report: %s\n", p.report.digest);
	}
done:
	nf_reg_client_free(c);
	return err ? nf_cmd_fail("promote", err) : NF_EXIT_OK;
}
