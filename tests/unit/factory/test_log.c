/* test_log.c - the factory logger: text, tty and JSON renderings, stages, progress, levels. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "factory/log.h"
#include "tests/tap.h"
#include "util/error.h"

typedef struct fake_clock {
	double now;
} fake_clock;

static double fake_now(void *user) { return ((fake_clock *)user)->now; }

typedef struct capture {
	FILE *f;
	char *buf;
	size_t len;
} capture;

static nf_log *open_log(capture *c, fake_clock *clk, nf_log_format fmt, nf_log_level level,
			double interval)
{
	nf_log *l = NULL;
	nf_log_opts o = {0};
	c->buf = NULL;
	c->len = 0;
	c->f = open_memstream(&c->buf, &c->len);
	o.stream = c->f;
	o.format = fmt;
	o.level = level;
	o.clock = fake_now;
	o.clock_user = clk;
	o.progress_interval = interval;
	o.width = 80;
	if (nf_log_new(&l, &o) < 0)
		return NULL;
	return l;
}

static void close_log(capture *c, nf_log *l)
{
	nf_log_free(l);
	fclose(c->f);
	free(c->buf);
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void test_text(void)
{
	fake_clock clk = {1000.0};
	capture c;
	nf_log *l = open_log(&c, &clk, NF_LOG_FMT_TEXT, NF_LOG_INFO, 0);
	ok(l != NULL, "text logger created");
	is_int(nf_log_get_format(l), NF_LOG_FMT_TEXT, "format is text");

	nf_log_stage_begin(l, "fetch", "downloading %d files", 2);
	clk.now += 1.5;
	double secs = nf_log_stage_end(l, "fetch", 0, "%s", "2 files");
	ok(secs > 1.49 && secs < 1.51, "stage_end returns the elapsed seconds (%g)", secs);
	nf_log_debug(l, "fetch", "hidden debug line");
	nf_log_warn(l, "gate", "slow");
	is_str(c.buf,
	       "[   0.000s] fetch: downloading 2 files...\n"
	       "[   1.500s] fetch: done in 1.50s (2 files)\n"
	       "[   1.500s] warning: gate: slow\n",
	       "text lines: stage begin/end with duration, debug filtered, warning prefixed");

	ok(nf_log_stage_end(l, "never", 0, NULL) < 0, "ending a stage never begun gives -1");

	nf_error_set(NF_EIO, "disk full");
	nf_log_stage_begin(l, "package", NULL);
	clk.now += 0.25;
	nf_log_stage_end(l, "package", NF_EIO, "writing layer");
	ok(strstr(c.buf, "error: package: failed after 0.25s: writing layer: disk full\n") != NULL,
	   "a failed stage is an error line naming the last error");

	nf_log_stage_cached(l, "compile", "engine %s", "abc");
	ok(strstr(c.buf, "compile: cached: engine abc\n") != NULL, "cached stage reported");

	nf_log_info(l, NULL, "line one\nline two");
	ok(strstr(c.buf, "] line one line two\n") != NULL, "newlines in a message do not split the line");
	close_log(&c, l);
}

static void test_text_progress(void)
{
	fake_clock clk = {0.0};
	capture c;
	nf_log *l = open_log(&c, &clk, NF_LOG_FMT_TEXT, NF_LOG_INFO, 10.0);

	nf_log_progress(l, "fetch", 0, 2000000);
	clk.now = 5;
	nf_log_progress(l, "fetch", 500000, 2000000);
	is_int(c.len, 0, "text progress is quiet before the interval");
	clk.now = 11;
	nf_log_progress(l, "fetch", 1000000, 2000000);
	clk.now = 12;
	nf_log_progress(l, "fetch", 1200000, 2000000);
	clk.now = 30;
	nf_log_progress(l, "fetch", 2000000, 2000000);
	is_str(c.buf, "[  11.000s] fetch: 50% (1.00M/2.00M)\n",
	       "one progress line per interval, none for completion");
	ok(strchr(c.buf, '\r') == NULL, "no carriage returns when not on a terminal");
	close_log(&c, l);
}

static void test_tty_progress(void)
{
	fake_clock clk = {0.0};
	capture c;
	nf_log *l = open_log(&c, &clk, NF_LOG_FMT_TTY, NF_LOG_INFO, 0.1);

	nf_log_progress(l, "convert", 10, 100);
	clk.now = 0.05;
	nf_log_progress(l, "convert", 20, 100);
	is_int(count(c.buf, "\r\033[K"), 1, "tty: drawn once, second update rate-limited");
	ok(strstr(c.buf, "  convert [") && strstr(c.buf, "]  10%  10/100"), "tty bar shows percent and counts");
	clk.now = 0.2;
	nf_log_progress(l, "convert", 50, 100);
	is_int(count(c.buf, "\r\033[K"), 2, "tty: redrawn after the interval");
	clk.now = 0.21;
	nf_log_progress(l, "convert", 100, 100);
	ok(strstr(c.buf, "100%  100/100") != NULL, "completion always drawn");
	nf_log_info(l, "convert", "wrote %s", "x");
	const char *want = "\r\033[Kconvert: wrote x\n";
	size_t n = strlen(c.buf), wn = strlen(want);
	ok(n > wn && strcmp(c.buf + n - wn, want) == 0,
	   "a message first clears the progress line, and tty text has no time prefix");
	for (int i = 0; i < 3; i++) {
		clk.now += 1;
		nf_log_progress(l, "load", (uint64_t)i * 1000, 0);
	}
	ok(strstr(c.buf, "  load | 0") && strstr(c.buf, "  load / 1.00k") && strstr(c.buf, "  load - 2.00k"),
	   "unknown total: a spinner and a count");
	close_log(&c, l);
}

static void test_json(void)
{
	fake_clock clk = {1714564800.25}; /* 2024-05-01T12:00:00.250Z */
	capture c;
	nf_log *l = open_log(&c, &clk, NF_LOG_FMT_JSON, NF_LOG_DEBUG, 1.0);
	nf_log_field f[4] = {NF_LOG_STR("file", "a\xff.bin"), NF_LOG_INT("bytes", 1234),
			     NF_LOG_BOOL("cached", 1), NF_LOG_STR("msg", "must not override")};
	json_error_t err;
	char *line, *save = NULL;
	int lines = 0, good = 1;

	nf_log_stage_begin(l, "fetch", "fetching");
	nf_log_event(l, NF_LOG_INFO, "fetch", "cache_hit", f, 4, "hit for %s", "x");
	nf_log_progress(l, "fetch", 0, 10);
	clk.now += 0.5;
	nf_log_progress(l, "fetch", 2, 10); /* rate-limited */
	clk.now += 1.5;
	nf_log_progress(l, "fetch", 5, 10);
	nf_log_stage_end(l, "fetch", 0, NULL);
	nf_log_error(l, NULL, "bad \"quote\" \xc3");
	fflush(c.f);

	char *copy = strdup(c.buf);
	json_t *objs[8] = {0};
	for (line = strtok_r(copy, "\n", &save); line && lines < 8; line = strtok_r(NULL, "\n", &save)) {
		objs[lines] = json_loads(line, 0, &err);
		if (!objs[lines])
			good = 0;
		lines++;
	}
	is_int(lines, 5, "five JSON lines");
	ok(good, "every line parses as JSON");
	if (good && lines == 5) {
		is_str(json_string_value(json_object_get(objs[0], "ts")), "2024-05-01T12:00:00.250Z",
		       "ts is ISO 8601 UTC with milliseconds from the injected clock");
		is_str(json_string_value(json_object_get(objs[0], "event")), "stage_begin", "stage_begin event");
		is_str(json_string_value(json_object_get(objs[1], "level")), "info", "level");
		is_str(json_string_value(json_object_get(objs[1], "stage")), "fetch", "stage");
		is_str(json_string_value(json_object_get(objs[1], "event")), "cache_hit", "custom event");
		is_str(json_string_value(json_object_get(objs[1], "msg")), "hit for x", "reserved key not overridden");
		is_int(json_integer_value(json_object_get(objs[1], "bytes")), 1234, "int field");
		ok(json_is_true(json_object_get(objs[1], "cached")), "bool field");
		is_str(json_string_value(json_object_get(objs[1], "file")), "a\xef\xbf\xbd.bin",
		       "invalid UTF-8 replaced by U+FFFD");
		is_str(json_string_value(json_object_get(objs[2], "event")), "progress", "progress event");
		is_int(json_integer_value(json_object_get(objs[2], "done")), 5, "progress done");
		is_int(json_integer_value(json_object_get(objs[2], "total")), 10, "progress total");
		ok(json_real_value(json_object_get(objs[3], "seconds")) == 2.0, "stage_end seconds field");
		is_str(json_string_value(json_object_get(objs[3], "status")), "ok", "stage_end status");
		ok(json_is_null(json_object_get(objs[4], "stage")), "no stage is null");
		is_str(json_string_value(json_object_get(objs[4], "level")), "error", "error level");
		is_str(json_string_value(json_object_get(objs[4], "msg")), "bad \"quote\" \xef\xbf\xbd",
		       "quotes kept, truncated UTF-8 replaced");
	}
	for (int i = 0; i < 8; i++)
		json_decref(objs[i]);
	free(copy);
	close_log(&c, l);
}

static void test_parse_and_default(void)
{
	nf_log_level lv;
	nf_log_format fm;
	fake_clock clk = {0};
	capture c;
	nf_log *l;

	ok(nf_log_level_parse(&lv, "warning") == 0 && lv == NF_LOG_WARN, "level 'warning'");
	ok(nf_log_level_parse(&lv, "debug") == 0 && lv == NF_LOG_DEBUG, "level 'debug'");
	is_int(nf_log_level_parse(&lv, "loud"), NF_EINPUT, "unknown level refused");
	ok(strstr(nf_error_last(), "'loud'") != NULL, "error names the value");
	ok(nf_log_format_parse(&fm, "json") == 0 && fm == NF_LOG_FMT_JSON, "format 'json'");
	is_int(nf_log_format_parse(&fm, "xml"), NF_EINPUT, "unknown format refused");

	char b[16];
	nf_log_fmt_count(b, sizeof(b), 999);
	is_str(b, "999", "count 999");
	nf_log_fmt_count(b, sizeof(b), 1234);
	is_str(b, "1.23k", "count 1234");
	nf_log_fmt_count(b, sizeof(b), 56700000);
	is_str(b, "56.7M", "count 56.7M");
	nf_log_fmt_count(b, sizeof(b), 999999);
	is_str(b, "1.00M", "count 999999 rounds up a unit");

	l = open_log(&c, &clk, NF_LOG_FMT_TEXT, NF_LOG_WARN, 0);
	nf_log_set_default(l);
	ok(nf_log_default() == l, "default logger set");
	nf_log_info(NULL, "x", "filtered");
	nf_log_error(NULL, "x", "to the default");
	is_str(c.buf, "[   0.000s] error: x: to the default\n", "NULL logs to the default, level applies");
	ok(!nf_log_enabled(NULL, NF_LOG_INFO) && nf_log_enabled(NULL, NF_LOG_ERROR), "enabled follows level");
	nf_log_set_default(NULL);
	ok(nf_log_default() != l && nf_log_default() != NULL, "default back to the built-in");
	close_log(&c, l);
	nf_log_free(NULL);
}

int main(void)
{
	test_text();
	test_text_progress();
	test_tty_progress();
	test_json();
	test_parse_and_default();
	return done_testing();
}
