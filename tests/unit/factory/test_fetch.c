/*
 * test_fetch.c - source fetching against nf_test_httpd on 127.0.0.1:
 * mirrors, sha256 pins, retries (500, 429, truncated bodies), no network on a
 * cache hit, offline seeding messages, redirects, size caps; path sources; git
 * sources from a local repository at a pinned commit; archives (tar.gz, zip,
 * tar.zst) and hostile archives refused.
 */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "factory/fetch.h"
#include "tests/tap.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/banned.h"

#define HF "https://huggingface.co/"

static char *g_tmp;    /* test folder */
static char *g_www;    /* what the server serves */
static char *g_cache;  /* cache root */
static nf_cache *g_c;

typedef struct server {
	pid_t pid;
	unsigned port;
	char *log;
} server;

/* Start nf_test_httpd with extra args (NULL-terminated); false when it could not start. */
static bool server_start(server *s, const char *const *extra)
{
	const char *build = tap_env("NF_BUILD", "build");
	char *bin = nf_strdup_printf("%s/tools/nf_test_httpd", build);
	static int nlog;
	const char *argv[32];
	int n = 0, pfd[2];
	char line[32];
	FILE *f;

	s->log = nf_strdup_printf("%s/server%d.log", g_tmp, nlog++);
	argv[n++] = bin;
	argv[n++] = "--root";
	argv[n++] = g_www;
	argv[n++] = "--max-seconds";
	argv[n++] = "30";
	argv[n++] = "--log";
	argv[n++] = s->log;
	for (int i = 0; extra && extra[i] && n < 30; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	if (pipe(pfd) < 0)
		return false;
	s->pid = fork();
	if (s->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the test */
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	free(bin);
	f = fdopen(pfd[0], "r");
	s->port = 0;
	if (f && fgets(line, sizeof(line), f))
		s->port = (unsigned)strtoul(line, NULL, 10);
	if (f)
		fclose(f);
	return s->port > 0;
}

static void server_stop(server *s)
{
	int status;
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		waitpid(s->pid, &status, 0);
	}
	s->pid = 0;
	free(s->log);
	s->log = NULL;
}

static int server_requests(const server *s)
{
	char *data = NULL;
	size_t len = 0;
	int n = 0;
	if (nf_fs_read_file(&data, &len, s->log, 1 << 20) < 0)
		return -1;
	for (size_t i = 0; i < len; i++)
		n += data[i] == '\n';
	free(data);
	return n;
}

static char *mirror_for(const server *s)
{
	return nf_strdup_printf(HF "=http://127.0.0.1:%u/", s->port);
}

/* Write n pseudo-random bytes to www/name; its sha256 into hex. */
static void make_file(char hex[65], const char *name, size_t n, unsigned seed)
{
	char *buf = malloc(n ? n : 1);
	char *path = nf_path_join(g_www, name);
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)((i + seed) * 2654435761u >> 11);
	nf_fs_write_atomic(path, buf, n, 0644);
	nf_sha256_hex(hex, buf, n);
	free(path);
	free(buf);
}

static int count_dir(const char *sub)
{
	char *p = nf_path_join(g_cache, sub);
	DIR *d = opendir(p);
	struct dirent *de;
	int n = 0;
	free(p);
	if (!d)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void fast_opts(nf_fetch_opts *o, const char *mirrors)
{
	nf_fetch_opts_init(o);
	o->offline = false;
	o->mirrors = mirrors;
	o->backoff_ms = 10;
	o->max_backoff_ms = 2000;
	o->connect_timeout_s = 5;
	o->low_speed_time_s = 10;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct prog {
	uint64_t done, total;
	int calls;
} prog;

static void on_progress(void *user, uint64_t done, uint64_t total)
{
	prog *p = user;
	p->done = done;
	p->total = total;
	p->calls++;
}

static void test_rewrite(void)
{
	char *out = NULL;

	is_int(nf_fetch_rewrite_url(&out, HF "a/b", HF "=http://m/"), 0, "rewrite");
	is_str(out, "http://m/a/b", "prefix replaced");
	free(out);
	nf_fetch_rewrite_url(&out, HF "a/b", "  https://=http://short/ \n" HF "a/=http://long/  ");
	is_str(out, "http://long/b", "the longest prefix wins, whitespace separates rules");
	free(out);
	nf_fetch_rewrite_url(&out, "https://other/x", HF "=http://m/");
	is_str(out, "https://other/x", "no match: unchanged");
	free(out);
	nf_fetch_rewrite_url(&out, "https://other/x", NULL);
	is_str(out, "https://other/x", "no rules: unchanged");
	free(out);
	is_int(nf_fetch_rewrite_url(&out, "x", "nonsense"), NF_EINPUT, "a rule without '=' is refused");
	is_int(nf_fetch_rewrite_url(&out, "x", "=foo"), NF_EINPUT, "an empty prefix is refused");
}

static void test_url(void)
{
	char hex[65], badhex[65], big[65], *mirror = NULL, *out = NULL, *data = NULL, *want = NULL;
	nf_source_spec spec = {0};
	nf_fetch_opts o;
	server s = {0};
	prog p = {0};
	size_t len, wlen;
	int blobs;

	make_file(hex, "org/m/resolve/main/model.bin", 200000, 1);
	if (!server_start(&s, NULL)) {
		ok(0, "server started");
		return;
	}
	mirror = mirror_for(&s);
	fast_opts(&o, mirror);
	o.progress = on_progress;
	o.progress_user = &p;
	spec.kind = NF_FETCH_URL;
	spec.url = HF "org/m/resolve/main/model.bin";
	spec.sha256 = hex;
	is_int(nf_fetch_source(&out, g_c, &spec, &o), 0, "url source through the mirror: %s",
	       nf_error_last());
	want = nf_strdup_printf("%s/blobs/sha256/%s", g_cache, hex);
	is_str(out, want, "result is the blob named by its pin");
	free(want);
	want = nf_path_join(g_www, "org/m/resolve/main/model.bin");
	ok(out && nf_fs_read_file(&data, &len, out, 1 << 20) == 0 && len == 200000,
	   "blob has all the bytes");
	free(data);
	free(want);
	ok(p.calls > 0 && p.done == 200000, "progress reported %llu bytes in %d calls",
	   (unsigned long long)p.done, p.calls);
	is_int(server_requests(&s), 1, "one request");
	free(out);
	out = NULL;

	/* A pin the bytes do not match: refused, nothing stored. */
	make_file(badhex, "org/m/resolve/main/other.bin", 5000, 2);
	badhex[0] = badhex[0] == '0' ? '1' : '0';
	spec.url = HF "org/m/resolve/main/other.bin";
	spec.sha256 = badhex;
	blobs = count_dir("blobs/sha256");
	is_int(nf_fetch_source(&out, g_c, &spec, &o), NF_EINPUT, "sha256 mismatch refused");
	ok(strstr(nf_error_last(), "sha256 mismatch") != NULL, "says so: %s", nf_error_last());
	is_int(count_dir("blobs/sha256"), blobs, "nothing added to blobs/");
	is_int(count_dir("tmp"), 0, "no temp file left");
	ok(out == NULL, "no path on failure");

	/* 404: NF_ENET with the seeding hint, not retried. */
	spec.url = HF "org/m/resolve/main/missing.bin";
	spec.sha256 = hex + 0;
	{
		char h404[65];
		memset(h404, 'a', 64);
		h404[64] = '\0';
		spec.sha256 = h404;
		int before = server_requests(&s);
		is_int(nf_fetch_source(&out, g_c, &spec, &o), NF_ENET, "404 is NF_ENET");
		ok(strstr(nf_error_last(), "HTTP 404") &&
			   strstr(nf_error_last(), "seed it with: nimfactory cache add FILE"),
		   "message names the status and how to seed: %s", nf_error_last());
		is_int(server_requests(&s) - before, 1, "a 404 is not retried");
	}

	/* The size cap. */
	make_file(big, "org/m/resolve/main/big.bin", 100000, 3);
	spec.url = HF "org/m/resolve/main/big.bin";
	spec.sha256 = big;
	o.max_bytes = 1000;
	is_int(nf_fetch_source(&out, g_c, &spec, &o), NF_EINPUT, "larger than max_bytes refused");
	ok(strstr(nf_error_last(), "larger than the limit"), "says so: %s", nf_error_last());
	o.max_bytes = 1 << 30;

	/* Stop the server: the cached blob is used without the network. */
	server_stop(&s);
	spec.url = HF "org/m/resolve/main/model.bin";
	spec.sha256 = hex;
	is_int(nf_fetch_source(&out, g_c, &spec, &o), 0, "second fetch with the server stopped");
	free(out);
	out = NULL;
	o.offline = true;
	is_int(nf_fetch_source(&out, g_c, &spec, &o), 0, "and offline");
	free(out);
	out = NULL;

	/* Offline with nothing seeded: the exact message. */
	spec.url = HF "org/m/resolve/main/big.bin";
	spec.sha256 = big;
	is_int(nf_fetch_source(&out, g_c, &spec, &o), NF_ENET, "offline and not cached: NF_ENET");
	want = nf_strdup_printf("source " HF "org/m/resolve/main/big.bin (sha256 %s) is not in the "
				"cache %s and the network is off; seed it with: nimfactory cache add FILE",
				big, g_cache);
	is_str(nf_error_last(), want, "offline message says how to seed");
	free(want);

	/* Seed it and the offline fetch works. */
	{
		char *f = nf_path_join(g_www, "org/m/resolve/main/big.bin");
		char seeded[65];
		is_int(nf_cache_add_file(seeded, NULL, g_c, f, NULL), 0, "seed with cache add");
		free(f);
		is_int(nf_fetch_source(&out, g_c, &spec, &o), 0, "offline fetch after seeding");
		free(out);
		out = NULL;
	}

	/* Connection refused: retried, then NF_ENET. */
	o.offline = false;
	o.retries = 1;
	{
		char h[65];
		make_file(h, "org/m/resolve/main/refused.bin", 10, 4);
		spec.url = HF "org/m/resolve/main/refused.bin";
		spec.sha256 = h;
		is_int(nf_fetch_source(&out, g_c, &spec, &o), NF_ENET, "connection refused: NF_ENET");
		ok(strstr(nf_error_last(), "after 2 attempts") &&
			   strstr(nf_error_last(), "seed it with"),
		   "retried and hints: %s", nf_error_last());
	}
	free(mirror);
	wlen = 0;
	(void)wlen;
}

static char *g_last_log; /* request log of the last fetch_with_fault */

static bool log_has(const char *what)
{
	return g_last_log && strstr(g_last_log, what) != NULL;
}

/* One server with a fault; fetch name and return the request count (or -1). */
static int fetch_with_fault(int *rc, const char *name, size_t size, unsigned seed,
			    const char *const *fault, unsigned retries, double *secs)
{
	char hex[65], *mirror, *out = NULL, *url;
	nf_source_spec spec = {0};
	nf_fetch_opts o;
	server s = {0};
	double t0;
	int n;

	make_file(hex, name, size, seed);
	if (!server_start(&s, fault))
		return -1;
	mirror = mirror_for(&s);
	fast_opts(&o, mirror);
	o.retries = retries;
	url = nf_strdup_printf(HF "%s", name);
	spec.kind = NF_FETCH_URL;
	spec.url = url;
	spec.sha256 = hex;
	t0 = now_s();
	*rc = nf_fetch_source(&out, g_c, &spec, &o);
	if (secs)
		*secs = now_s() - t0;
	if (!*rc) {
		char got[65];
		if (nf_sha256_file_hex(got, out) != 0 || strcmp(got, hex) != 0)
			*rc = -100;
	}
	n = server_requests(&s);
	free(g_last_log);
	g_last_log = NULL;
	{
		size_t len;
		nf_fs_read_file(&g_last_log, &len, s.log, 1 << 20);
	}
	server_stop(&s);
	free(out);
	free(url);
	free(mirror);
	return n;
}

static void test_faults(void)
{
	int rc = 0, n, blobs;
	double secs = 0;
	const char *fail2[] = {"--fail-first", "2", NULL};
	const char *fail9[] = {"--fail-first", "9", NULL};
	const char *throttle[] = {"--throttle-first", "1", "--retry-after", "1", NULL};
	const char *trunc[] = {"--truncate-first", "1", "--truncate-after", "1000", NULL};
	const char *trunc_norange[] = {"--truncate-first", "1", "--truncate-after", "1000",
				       "--no-range", NULL};

	n = fetch_with_fault(&rc, "f/500.bin", 30000, 5, fail2, 4, NULL);
	is_int(rc, 0, "500, 500, then 200: fetched (%s)", rc ? nf_error_last() : "");
	is_int(n, 3, "three requests");

	blobs = count_dir("blobs/sha256");
	n = fetch_with_fault(&rc, "f/500b.bin", 30000, 6, fail9, 2, NULL);
	is_int(rc, NF_ENET, "500 every time: NF_ENET after the retries");
	is_int(n, 3, "1 + 2 retries");
	ok(strstr(nf_error_last(), "HTTP 500"), "names the status: %s", nf_error_last());
	is_int(count_dir("blobs/sha256"), blobs, "nothing stored");

	n = fetch_with_fault(&rc, "f/429.bin", 30000, 7, throttle, 4, &secs);
	is_int(rc, 0, "429 with Retry-After, then 200: fetched");
	is_int(n, 2, "two requests");
	ok(secs >= 0.9, "waited for Retry-After (%.2f s)", secs);

	n = fetch_with_fault(&rc, "f/trunc.bin", 300000, 8, trunc, 4, NULL);
	is_int(rc, 0, "truncated body retried: fetched (%s)", rc ? nf_error_last() : "");
	is_int(n, 2, "two requests");
	ok(log_has(" 206\n"), "the retry resumed with a Range request (206)");

	n = fetch_with_fault(&rc, "f/trunc-norange.bin", 300000, 12, trunc_norange, 4, NULL);
	is_int(rc, 0, "truncated, server cannot resume: fetched from the start (%s)",
	       rc ? nf_error_last() : "");
	is_int(n, 3, "cut, refused range (200), then whole");

	blobs = count_dir("blobs/sha256");
	n = fetch_with_fault(&rc, "f/trunc2.bin", 300000, 9, trunc, 0, NULL);
	is_int(rc, NF_ENET, "truncated body without retries: NF_ENET");
	is_int(count_dir("blobs/sha256"), blobs, "a partial body is never stored");
	is_int(count_dir("tmp"), 0, "no temp file left");
}

static void test_redirect(void)
{
	char hex[65], h2[65], *mirror, *out = NULL, *target;
	nf_source_spec spec = {0};
	nf_fetch_opts o;
	server a = {0}, b = {0};
	int rc;

	make_file(hex, "r/moved.bin", 4000, 10);
	if (!server_start(&b, NULL)) {
		ok(0, "server b");
		return;
	}
	target = nf_strdup_printf("http://localhost:%u/", b.port);
	{
		const char *redir[] = {"--redirect", target, NULL};
		if (!server_start(&a, redir)) {
			ok(0, "server a");
			server_stop(&b);
			free(target);
			return;
		}
	}
	mirror = mirror_for(&a);
	fast_opts(&o, mirror);
	spec.kind = NF_FETCH_URL;
	spec.url = HF "r/moved.bin";
	spec.sha256 = hex;
	rc = nf_fetch_source(&out, g_c, &spec, &o);
	is_int(rc, 0, "redirect to another host followed (%s)", rc ? nf_error_last() : "");
	is_int(server_requests(&b), 1, "the other host served it");
	free(out);
	out = NULL;
	server_stop(&a);
	free(mirror);

	/* A redirect to a protocol other than http(s) is refused. */
	{
		const char *redir[] = {"--redirect", "file:///etc/", NULL};
		memset(h2, 'b', 64);
		h2[64] = '\0';
		if (server_start(&a, redir)) {
			mirror = mirror_for(&a);
			fast_opts(&o, mirror);
			spec.url = HF "passwd";
			spec.sha256 = h2;
			rc = nf_fetch_source(&out, g_c, &spec, &o);
			ok(rc == NF_ENET && strstr(nf_error_last(), "seed it with"),
			   "redirect to file:// refused: %s", nf_error_last());
			server_stop(&a);
			free(mirror);
		}
	}
	/* Not http(s) at all. */
	o.mirrors = NULL;
	spec.url = "ftp://127.0.0.1/x";
	is_int(nf_fetch_source(&out, g_c, &spec, &o), NF_EINPUT, "ftp url refused");
	spec.sha256 = NULL;
	spec.url = HF "x";
	is_int(nf_fetch_source(&out, g_c, &spec, &o), NF_EINPUT, "url without a pin refused");
	server_stop(&b);
	free(target);
}

static void test_path(void)
{
	char hex[65], bad[65], *out = NULL, *file;
	nf_source_spec spec = {0};
	nf_fetch_opts o;

	fast_opts(&o, NULL);
	make_file(hex, "p/local.bin", 1000, 11);
	file = nf_path_join(g_www, "p/local.bin");
	spec.kind = NF_FETCH_PATH;
	spec.path = file;
	is_int(nf_fetch_source(&out, g_c, &spec, &o), 0, "path source");
	is_str(out, file, "is the path itself");
	free(out);
	spec.sha256 = hex;
	is_int(nf_fetch_source(&out, g_c, &spec, &o), 0, "path source with the right sha256");
	free(out);
	memcpy(bad, hex, 65);
	bad[5] = bad[5] == 'a' ? 'b' : 'a';
	spec.sha256 = bad;
	is_int(nf_fetch_source(&out, g_c, &spec, &o), NF_EINPUT, "path source with a wrong sha256");
	spec.sha256 = NULL;
	spec.path = g_www;
	is_int(nf_fetch_source(&out, g_c, &spec, &o), 0, "a folder");
	free(out);
	spec.subpath = "p";
	is_int(nf_fetch_source(&out, g_c, &spec, &o), 0, "a folder with a subpath");
	ok(out && strstr(out, "/p"), "subpath joined: %s", out ? out : "");
	free(out);
	spec.subpath = "../etc";
	is_int(nf_fetch_source(&out, g_c, &spec, &o), NF_EINPUT, "subpath with .. refused");
	spec.subpath = NULL;
	spec.path = "/nonexistent/nf";
	is_int(nf_fetch_source(&out, g_c, &spec, &o), NF_ENOTFOUND, "missing path");
	free(file);
}

static int sh(const char *fmt, const char *a)
{
	char *cmd = nf_strdup_printf(fmt, a, a, a, a);
	int rc = system(cmd);
	free(cmd);
	return rc;
}

static char *git_head(const char *repo)
{
	char *cmd = nf_strdup_printf("git -C '%s' rev-parse HEAD", repo);
	char line[64] = "";
	FILE *p = popen(cmd, "r");
	free(cmd);
	if (!p)
		return NULL;
	if (!fgets(line, sizeof(line), p))
		line[0] = '\0';
	pclose(p);
	line[strcspn(line, "\n")] = '\0';
	return strdup(line);
}

static void test_git(void)
{
	char *repo = nf_path_join(g_tmp, "repo"), *url = NULL, *c1 = NULL, *c2 = NULL;
	char *out = NULL, *f = NULL, *data = NULL;
	nf_source_spec spec = {0};
	nf_fetch_opts o;
	size_t len;

	if (system("git --version >/dev/null 2>&1") != 0) {
		skip("git CLI not installed");
		free(repo);
		return;
	}
	ok(sh("set -e; git init -q '%s'; cd '%s'; mkdir -p models/tiny; echo v1 > models/tiny/w.txt; "
	      "echo top > README; git add -A; git -c user.name=t -c user.email=t@t commit -qm one",
	      repo) == 0,
	   "made a git repository");
	c1 = git_head(repo);
	ok(sh("set -e; cd '%s'; echo v2 > models/tiny/w.txt; "
	      "git -c user.name=t -c user.email=t@t commit -qam two", repo) == 0,
	   "second commit");
	c2 = git_head(repo);
	url = nf_strdup_printf("file://%s", repo);
	fast_opts(&o, NULL);
	spec.kind = NF_FETCH_GIT;
	spec.url = url;
	spec.commit = c1;
	spec.subpath = "models/tiny";
	is_int(nf_fetch_source(&out, g_c, &spec, &o), 0, "git source at the first commit (%s)",
	       nf_error_last());
	f = out ? nf_path_join(out, "w.txt") : NULL;
	ok(f && nf_fs_read_file(&data, &len, f, 100) == 0 && !strcmp(data, "v1\n"),
	   "the pinned commit's content, not the branch head's");
	free(data);
	free(f);
	free(out);
	out = NULL;
	spec.commit = c2;
	spec.subpath = NULL;
	is_int(nf_fetch_source(&out, g_c, &spec, &o), 0, "second commit");
	f = out ? nf_path_join(out, "models/tiny/w.txt") : NULL;
	ok(f && nf_fs_read_file(&data, &len, f, 100) == 0 && !strcmp(data, "v2\n"), "its content");
	free(data);
	free(f);
	ok(out && !nf_fs_exists(out) == 0, "checked out");
	{
		char *dotgit = out ? nf_path_join(out, ".git") : NULL;
		ok(dotgit && !nf_fs_exists(dotgit), "no .git in the checkout");
		free(dotgit);
	}
	free(out);
	out = NULL;

	/* Remove the remote: the stage is reused. */
	nf_fs_remove_tree(repo);
	spec.commit = c1;
	o.offline = true;
	is_int(nf_fetch_source(&out, g_c, &spec, &o), 0, "cached checkout reused with the remote gone");
	free(out);
	out = NULL;
	o.offline = false;
	sh("set -e; git init -q '%s'; cd '%s'; echo x > x; git add x; "
	   "git -c user.name=t -c user.email=t@t commit -qm x",
	   repo);
	spec.commit = "0123456789abcdef0123456789abcdef01234567";
	is_int(nf_fetch_source(&out, g_c, &spec, &o), NF_ENOTFOUND, "unknown commit refused");
	ok(strstr(nf_error_last(), "0123456789abcdef") != NULL, "names the commit: %s",
	   nf_error_last());
	spec.commit = "HEAD";
	is_int(nf_fetch_source(&out, g_c, &spec, &o), NF_EINPUT, "a ref name is not a pin");
	free(url);
	free(c1);
	free(c2);
	free(repo);
}

/* Write an archive with libarchive: entries name=content; a content starting
 * with "->" makes a symlink to the rest. */
static int write_archive(const char *path, int zip, int zstd, const char *const *entries)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	int rc = 0;

	if (zip)
		archive_write_set_format_zip(a);
	else
		archive_write_set_format_pax_restricted(a);
	if (!zip)
		rc = zstd ? archive_write_add_filter_zstd(a) : archive_write_add_filter_gzip(a);
	/* gzip stamps its header with the time: without this, the same entries
	 * written twice across a second boundary are two archives (two stages) */
	if (rc == ARCHIVE_OK && !zip && !zstd)
		rc = archive_write_set_filter_option(a, "gzip", "timestamp", NULL);
	if (rc == ARCHIVE_OK)
		rc = archive_write_open_filename(a, path);
	for (int i = 0; rc == ARCHIVE_OK && entries[i]; i += 2) {
		const char *body = entries[i + 1];
		archive_entry_clear(e);
		archive_entry_set_pathname(e, entries[i]);
		if (!strncmp(body, "->", 2)) {
			archive_entry_set_filetype(e, AE_IFLNK);
			archive_entry_set_perm(e, 0777);
			archive_entry_set_symlink(e, body + 2);
			archive_entry_set_size(e, 0);
			rc = archive_write_header(a, e);
		} else {
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_perm(e, 0644);
			archive_entry_set_size(e, (la_int64_t)strlen(body));
			rc = archive_write_header(a, e);
			if (rc == ARCHIVE_OK)
				archive_write_data(a, body, strlen(body));
		}
	}
	archive_entry_free(e);
	if (archive_write_close(a) != ARCHIVE_OK)
		rc = -1;
	archive_write_free(a);
	return rc;
}

static int unpack_file(char **out, const char *name, int zip, int zstd,
		       const char *const *entries, const char *subpath)
{
	char *path = nf_path_join(g_www, name);
	nf_source_spec spec = {0};
	nf_fetch_opts o;
	int rc;

	fast_opts(&o, NULL);
	*out = NULL;
	if (write_archive(path, zip, zstd, entries) != ARCHIVE_OK) {
		free(path);
		return -1000;
	}
	spec.kind = NF_FETCH_PATH;
	spec.path = path;
	spec.archive = true;
	spec.subpath = subpath;
	rc = nf_fetch_source(out, g_c, &spec, &o);
	free(path);
	return rc;
}

static bool file_is(const char *dir, const char *name, const char *want)
{
	char *f = nf_path_join(dir, name), *data = NULL;
	size_t len;
	bool ok_ = nf_fs_read_file(&data, &len, f, 1000) == 0 && !strcmp(data, want);
	free(f);
	free(data);
	return ok_;
}

static void test_archives(void)
{
	const char *good[] = {"model/", "", "./model/config.json", "{}", "model/w.bin", "weights",
			      "model/link", "->w.bin", NULL};
	const char *dotdot[] = {"ok.txt", "fine", "../evil.txt", "pwned", NULL};
	const char *deep[] = {"a/b/../../../evil2.txt", "pwned", NULL};
	const char *abs[] = {"ok.txt", "fine", "/tmp/nf_evil_abs.txt", "pwned", NULL};
	const char *symout[] = {"sub/link", "->../../etc", NULL};
	const char *symthrough[] = {"link", "->/tmp", "link/nf_evil_through.txt", "pwned", NULL};
	char *out = NULL, *evil;
	int stages = count_dir("stages"), rc;

	/* "model/" as a folder entry: write_archive makes it a 0-byte file, so skip it. */
	good[0] = "model/readme";
	good[1] = "hi";
	rc = unpack_file(&out, "good.tar.gz", 0, 0, good, NULL);
	is_int(rc, 0, "tar.gz unpacked (%s)", rc ? nf_error_last() : "");
	ok(out && file_is(out, "model/config.json", "{}") && file_is(out, "model/w.bin", "weights"),
	   "files in place");
	ok(out && file_is(out, "model/link", "weights"), "an inside symlink kept");
	free(out);
	is_int(count_dir("stages"), stages + 1, "one stage folder");
	rc = unpack_file(&out, "good.tar.gz", 0, 0, good, "model");
	is_int(rc, 0, "same archive again: reused, with a subpath");
	ok(out && file_is(out, "w.bin", "weights"), "subpath inside the unpacked tree");
	is_int(count_dir("stages"), stages + 1, "no second stage");
	free(out);

	rc = unpack_file(&out, "good.zip", 1, 0, good, NULL);
	ok(rc == 0 && file_is(out, "model/w.bin", "weights"), "zip unpacked (%s)",
	   rc ? nf_error_last() : "");
	free(out);
	rc = unpack_file(&out, "good.tar.zst", 0, 1, good, NULL);
	ok(rc == 0 && file_is(out, "model/w.bin", "weights"), "tar.zst unpacked (%s)",
	   rc ? nf_error_last() : "");
	free(out);
	stages = count_dir("stages");

	evil = nf_path_join(g_tmp, "cache/stages/evil.txt");
	rc = unpack_file(&out, "dotdot.tar.gz", 0, 0, dotdot, NULL);
	is_int(rc, NF_EINPUT, "an archive with ../ refused");
	ok(strstr(nf_error_last(), "'..'") != NULL, "says why: %s", nf_error_last());
	ok(out == NULL && !nf_fs_exists(evil), "nothing written outside");
	free(evil);
	rc = unpack_file(&out, "deep.tar.gz", 0, 0, deep, NULL);
	is_int(rc, NF_EINPUT, "a/b/../../../ refused");
	rc = unpack_file(&out, "abs.tar.gz", 0, 0, abs, NULL);
	is_int(rc, NF_EINPUT, "an absolute entry refused");
	ok(!nf_fs_exists("/tmp/nf_evil_abs.txt"), "not written");
	rc = unpack_file(&out, "symout.tar.gz", 0, 0, symout, NULL);
	is_int(rc, NF_EINPUT, "a symlink out of the tree refused");
	rc = unpack_file(&out, "symthrough.tar.gz", 0, 0, symthrough, NULL);
	is_int(rc, NF_EINPUT, "writing through an absolute symlink refused");
	ok(!nf_fs_exists("/tmp/nf_evil_through.txt"), "not written");
	is_int(count_dir("stages"), stages, "no stage kept for a refused archive");
	is_int(count_dir("tmp"), 0, "no temp folder left");

	{
		char *junk = nf_path_join(g_www, "junk.tar.gz");
		nf_source_spec spec = {0};
		nf_fs_write_atomic(junk, "not an archive at all", 21, 0644);
		spec.kind = NF_FETCH_PATH;
		spec.path = junk;
		spec.archive = true;
		is_int(nf_fetch_source(&out, g_c, &spec, NULL), NF_EINPUT, "junk is not an archive");
		free(junk);
	}
	{
		/* Entry-count bound. */
		const char *many[] = {"a", "1", "b", "2", "c", "3", NULL};
		char *path = nf_path_join(g_www, "many.tar");
		nf_source_spec spec = {0};
		nf_fetch_opts o;
		fast_opts(&o, NULL);
		o.max_unpack_entries = 2;
		write_archive(path, 0, 0, many);
		spec.kind = NF_FETCH_PATH;
		spec.path = path;
		spec.archive = true;
		is_int(nf_fetch_source(&out, g_c, &spec, &o), NF_EINPUT, "too many entries refused");
		o.max_unpack_entries = 100;
		o.max_unpack_bytes = 2;
		is_int(nf_fetch_source(&out, g_c, &spec, &o), NF_EINPUT, "too many bytes refused");
		free(path);
	}
}

/* A url archive source: download + unpack + subpath. */
static void test_url_archive(void)
{
	const char *entries[] = {"snap/config.json", "{\"dim\":8}", NULL};
	char *path = nf_path_join(g_www, "org/m/resolve/main/snap.tar.gz");
	char hex[65], *mirror = NULL, *out = NULL;
	nf_source_spec spec = {0};
	nf_fetch_opts o;
	server s = {0};

	write_archive(path, 0, 0, entries);
	nf_sha256_file_hex(hex, path);
	if (!server_start(&s, NULL)) {
		ok(0, "server");
		free(path);
		return;
	}
	mirror = mirror_for(&s);
	fast_opts(&o, mirror);
	spec.kind = NF_FETCH_URL;
	spec.url = HF "org/m/resolve/main/snap.tar.gz";
	spec.sha256 = hex;
	spec.archive = true;
	spec.subpath = "snap";
	is_int(nf_fetch_source(&out, g_c, &spec, &o), 0, "url archive source (%s)", nf_error_last());
	ok(out && file_is(out, "config.json", "{\"dim\":8}"), "unpacked under the subpath");
	free(out);
	server_stop(&s);
	free(mirror);
	free(path);
}

int main(void)
{
	char tmpl[] = "/tmp/nf_test_fetch.XXXXXX";

	unsetenv("NIMFACTORY_OFFLINE");
	unsetenv("NIMFACTORY_URL_MIRROR");
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(tmpl)) {
		ok(0, "mkdtemp");
		return done_testing();
	}
	g_tmp = tmpl;
	g_www = nf_path_join(tmpl, "www");
	g_cache = nf_path_join(tmpl, "cache");
	nf_fs_mkdir_p(g_www, 0755);
	sh("mkdir -p '%s/org/m/resolve/main' '%s/f' '%s/r' '%s/p'", g_www);
	if (nf_cache_open(&g_c, g_cache) < 0) {
		ok(0, "cache open: %s", nf_error_last());
		return done_testing();
	}
	test_rewrite();
	test_url();
	test_faults();
	test_redirect();
	test_path();
	test_git();
	test_archives();
	test_url_archive();
	nf_cache_free(g_c);
	/* Blobs are read-only: remove_tree unlinks them fine (the folder is writable). */
	nf_fs_remove_tree(tmpl);
	free(g_www);
	free(g_cache);
	free(g_last_log);
	return done_testing();
}
