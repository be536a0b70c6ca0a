/* version.c - `nimfactory version`. */
#include <stdio.h>

#include "cmd/nimfactory/commands.h"
#include "util/version.h"
#include "util/banned.h"

int nf_cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("nimfactory %s\n", NF_VERSION);
	return 0;
}
