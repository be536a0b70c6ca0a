/*
 * nf_artifact_tool - attach a file to an image of an OCI layout as an OCI
 * artifact (images/artifact.h), for tests until `nimfactory build` does it.
 *
 *   nf_artifact_tool attach LAYOUT TAG FILE [--type ARTIFACT_TYPE] [--media-type MT]
 *       default type: the gate report type; default media type application/json.
 *       Prints the artifact manifest digest.
 *   nf_artifact_tool list LAYOUT TAG     the artifacts referring to TAG's manifest (JSON)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "images/artifact.h"
#include "images/layout.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

int main(int argc, char **argv)
{
	const char *type = NF_OCI_ARTIFACT_GATE_REPORT, *mt = "application/json";
	nf_oci_desc subject, out;
	char *data = NULL;
	size_t len = 0;
	json_t *list = NULL;
	int err;

	if (argc >= 4 && !strcmp(argv[1], "list")) {
		if ((err = nf_oci_layout_resolve(&subject, argv[2], argv[3])) ||
		    (err = nf_oci_artifact_list(&list, argv[2], subject.digest, NULL)))
			goto fail;
		json_dumpf(list, stdout, JSON_SORT_KEYS);
		fputc('\n', stdout);
		json_decref(list);
		return 0;
	}
	if (argc < 5 || strcmp(argv[1], "attach")) {
		fprintf(stderr, "usage: nf_artifact_tool attach LAYOUT TAG FILE [--type T] [--media-type MT]\n");
		return 2;
	}
	for (int i = 5; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--type"))
			type = argv[i + 1];
		else if (!strcmp(argv[i], "--media-type"))
			mt = argv[i + 1];
	}
	if ((err = nf_oci_layout_resolve(&subject, argv[2], argv[3])) ||
	    (err = nf_fs_read_file(&data, &len, argv[4], (size_t)4 << 20)) ||
	    (err = nf_oci_artifact_attach(&out, argv[2], &subject, type, mt, data, len, NULL, 0)))
		goto fail;
	printf("%s\n", out.digest);
	free(data);
	return 0;
fail:
	free(data);
	fprintf(stderr, "nf_artifact_tool: %s\n", nf_error_last());
	return nf_error_exit_status(err);
}
