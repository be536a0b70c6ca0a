/*
 * cache.c - `nimfactory cache`: seed and inspect the local cache.
 *
 *   nimfactory cache add FILE...   copy files in; prints "sha256:<hex>  FILE"
 *   nimfactory cache path          print the cache's root folder
 *   nimfactory cache ls            list blobs and stage outputs
 *   nimfactory cache fetch URL SHA256
 *                                  download a pinned url into the cache (honours
 *                                  NIMFACTORY_URL_MIRROR and NIMFACTORY_OFFLINE);
 *                                  prints "sha256:<hex>  PATH"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/nimfactory/commands.h"
#include "factory/cache.h"
#include "factory/fetch.h"
#include "util/error.h"
#include "util/banned.h"

static void usage(FILE *to)
{
	fprintf(to, "usage: nimfactory cache add FILE...\n"
		    "       nimfactory cache path\n"
		    "       nimfactory cache ls\n"
		    "       nimfactory cache fetch URL SHA256\n"
		    "       nimfactory cache verify     check every blob against its digest\n\n"
		    "The cache is $NIMFACTORY_CACHE, else $XDG_CACHE_HOME/nimfactory, else\n"
		    "~/.cache/nimfactory.  'add' seeds it with files a recipe pins by sha256,\n"
		    "so that builds with NIMFACTORY_OFFLINE=1 find them.\n");
}

static int print_entry(void *user, const nf_cache_entry *e)
{
	(void)user;
	if (!strcmp(e->kind, "blob"))
		printf("blob   sha256:%s  %llu\n", e->hex, (unsigned long long)e->size);
	else
		printf("stage  %s\n", e->hex);
	return 0;
}

static void print_bad(void *user, const char *path, const char *why)
{
	(void)user;
	fprintf(stderr, "nimfactory cache verify: %s: %s\n", path, why);
}

/* Exit 1 naming each blob whose bytes do not hash to its name. */
static int verify(nf_cache *c)
{
	size_t n_bad = 0;
	int err = nf_cache_verify_blobs(c, &n_bad, print_bad, NULL);
	if (err < 0)
		return nf_cmd_fail("cache", err);
	if (n_bad) {
		fprintf(stderr, "nimfactory cache verify: %zu damaged blobs\n", n_bad);
		return NF_EXIT_INTERNAL;
	}
	return NF_EXIT_OK;
}

int nf_cmd_cache(int argc, char **argv)
{
	nf_cache *c = NULL;
	int err = 0, status = 0;

	if (argc < 2) {
		usage(stderr);
		return NF_EXIT_INPUT;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return NF_EXIT_OK;
	}
	if (strcmp(argv[1], "add") && strcmp(argv[1], "path") && strcmp(argv[1], "ls") &&
	    strcmp(argv[1], "fetch") && strcmp(argv[1], "verify")) {
		fprintf(stderr, "nimfactory cache: unknown subcommand '%s'\n", argv[1]);
		usage(stderr);
		return NF_EXIT_INPUT;
	}
	if (!strcmp(argv[1], "add") && argc < 3) {
		fprintf(stderr, "nimfactory cache add: no files given\n");
		return NF_EXIT_INPUT;
	}
	if (!strcmp(argv[1], "fetch") && argc != 4) {
		fprintf(stderr, "nimfactory cache fetch: needs URL SHA256\n");
		return NF_EXIT_INPUT;
	}
	if (strcmp(argv[1], "add") && strcmp(argv[1], "fetch") && argc > 2) {
		fprintf(stderr, "nimfactory cache %s: takes no arguments\n", argv[1]);
		return NF_EXIT_INPUT;
	}
	if ((err = nf_cache_open(&c, NULL)) < 0)
		return nf_cmd_fail("cache", err);
	if (!strcmp(argv[1], "path")) {
		printf("%s\n", nf_cache_root(c));
	} else if (!strcmp(argv[1], "fetch")) {
		nf_source_spec spec = {0};
		char *path = NULL;
		spec.kind = NF_FETCH_URL;
		spec.url = argv[2];
		spec.sha256 = argv[3];
		if ((err = nf_fetch_source(&path, c, &spec, NULL)) < 0)
			status = nf_cmd_fail("cache", err);
		else
			printf("sha256:%s  %s\n", argv[3], path);
		free(path);
	} else if (!strcmp(argv[1], "verify")) {
		status = verify(c);
	} else if (!strcmp(argv[1], "ls")) {
		if ((err = nf_cache_foreach(c, print_entry, NULL)) < 0)
			status = nf_cmd_fail("cache", err);
	} else {
		for (int i = 2; i < argc; i++) {
			char hex[NF_SHA256_HEX_LEN + 1];
			if ((err = nf_cache_add_file(hex, NULL, c, argv[i], NULL)) < 0) {
				status = nf_cmd_fail("cache", err);
				break;
			}
			printf("sha256:%s  %s\n", hex, argv[i]);
		}
	}
	nf_cache_free(c);
	if (fflush(stdout) != 0 && !status)
		status = NF_EXIT_ENV;
	return status;
}
