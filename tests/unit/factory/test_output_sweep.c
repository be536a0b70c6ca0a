/*
 * test_output_sweep.c - the leftovers of dead builds beside OUT are removed,
 * a live build's are kept (its partial folder is flocked), an OUT moved aside
 * by a dead build is put back when OUT is gone, and other names are left alone.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "factory/output_sweep.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

static void make(const char *dir, const char *name)
{
	char *p = nf_path_join(dir, name);
	nf_fs_mkdir_p(p, 0755);
	free(p);
}

static bool has(const char *dir, const char *name)
{
	char *p = nf_path_join(dir, name);
	bool r = nf_fs_exists(p);
	free(p);
	return r;
}

int main(void)
{
	char dir[] = "/tmp/nf-test-sweep-XXXXXX";
	char *out, *live, *live_name;
	int fd = -1;

	ok(mkdtemp(dir) != NULL, "temp dir");
	out = nf_path_join(dir, "out");
	live_name = nf_strdup_printf("out.partial-%ld", (long)getpid());
	live = nf_path_join(dir, live_name);
	make(dir, "out");
	make(dir, live_name);
	ok(nf_fs_lock(&fd, live, LOCK_EX, false, false) == 0, "a live build holds its partial folder");
	char *live_gates = nf_strdup_printf("out.gates-%ld", (long)getpid());
	make(dir, live_gates);
	make(dir, "out.partial-999999");
	make(dir, "out.gates-999999");
	make(dir, "out.old-999998");
	make(dir, "out.partial-12a");
	make(dir, "outx.partial-1");
	make(dir, "out.partial-");
	make(dir, "out.partial-123456789012");

	is_int(nf_output_sweep(out), 0, "sweep");
	ok(has(dir, live_name) && has(dir, live_gates), "the live build's folders are kept");
	ok(!has(dir, "out.partial-999999") && !has(dir, "out.gates-999999"),
	   "a dead build's partial and gates folders are removed");
	ok(!has(dir, "out.old-999998") && has(dir, "out"),
	   "a dead build's old output is removed when OUT is there");
	ok(has(dir, "out.partial-12a") && has(dir, "outx.partial-1") && has(dir, "out.partial-") &&
	   has(dir, "out.partial-123456789012"), "names that are not leftovers are left alone");

	nf_fs_remove_tree(out);
	make(dir, "out.old-999997");
	char *mark = nf_path_join(dir, "out.old-999997/plan.json");
	nf_fs_write_atomic(mark, "{}", 2, 0644);
	free(mark);
	is_int(nf_output_sweep(out), 0, "sweep with OUT gone");
	ok(has(dir, "out/plan.json") && !has(dir, "out.old-999997"),
	   "the output a dead build moved aside is put back as OUT");

	close(fd);
	is_int(nf_output_sweep(out), 0, "sweep after the build ended");
	ok(!has(dir, live_name) && !has(dir, live_gates), "its folders are now leftovers, removed");
	is_int(nf_output_sweep("relative-out-that-is-not-here"), 0, "a relative OUT sweeps its folder");
	free(live_gates);
	free(live_name);
	free(live);
	free(out);
	nf_fs_remove_tree(dir);
	return done_testing();
}
