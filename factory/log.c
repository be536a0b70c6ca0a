/* log.c - stages, events and progress on a terminal, in CI logs or as JSON lines (see log.h). */
#define _GNU_SOURCE
#include "factory/log.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "factory/escape.h"
#include "util/error.h"
#include "util/banned.h"

#define MAX_STAGES 32
#define NAME_MAX_LEN 64
#define MSG_MAX 2048

struct nf_log {
	FILE *f;
	nf_log_format fmt; /* resolved: never AUTO */
	nf_log_level level;
	nf_log_clock_fn clock;
	void *clock_user;
	double interval;
	int width;
	double t0;
	pthread_mutex_t mu;
	struct {
		bool used;
		char name[NAME_MAX_LEN];
		double start;
	} stages[MAX_STAGES];
	bool line_active;           /* tty: a progress line is on screen */
	char prog_stage[NAME_MAX_LEN];
	double prog_last;           /* when progress of prog_stage was last shown */
	bool prog_shown;            /* anything shown yet for prog_stage */
	unsigned spin;
};

static double real_clock(void *user)
{
	struct timespec ts;
	(void)user;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *level_names[] = {"debug", "info", "warn", "error", "off"};

const char *nf_log_level_name(nf_log_level l)
{
	return (unsigned)l <= NF_LOG_OFF ? level_names[l] : "info";
}

int nf_log_level_parse(nf_log_level *out, const char *name)
{
	for (int i = 0; i <= NF_LOG_OFF; i++) {
		if (name && strcmp(name, level_names[i]) == 0) {
			*out = (nf_log_level)i;
			return 0;
		}
	}
	if (name && strcmp(name, "warning") == 0) {
		*out = NF_LOG_WARN;
		return 0;
	}
	return nf_error_set(NF_EINPUT, "unknown log level '%s' (expected debug, info, warn, error or off)",
			    name ? name : "");
}

int nf_log_format_parse(nf_log_format *out, const char *name)
{
	static const struct {
		const char *name;
		nf_log_format fmt;
	} names[] = {{"auto", NF_LOG_FMT_AUTO}, {"text", NF_LOG_FMT_TEXT},
		     {"tty", NF_LOG_FMT_TTY},   {"json", NF_LOG_FMT_JSON}};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (name && strcmp(name, names[i].name) == 0) {
			*out = names[i].fmt;
			return 0;
		}
	}
	return nf_error_set(NF_EINPUT, "unknown log format '%s' (expected auto, text, tty or json)",
			    name ? name : "");
}

static int term_width(FILE *f)
{
	struct winsize ws;
	const char *cols = getenv("COLUMNS");
	if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20 && ws.ws_col <= 1000)
		return ws.ws_col;
	if (cols) {
		char *end = NULL;
		long v = strtol(cols, &end, 10);
		if (end != cols && *end == '\0' && v >= 20 && v <= 1000)
			return (int)v;
	}
	return 80;
}

int nf_log_new(nf_log **out, const nf_log_opts *opts)
{
	nf_log_opts def = {.level = NF_LOG_INFO};
	nf_log *l = NULL;

	*out = NULL;
	if (!opts)
		opts = &def;
	l = calloc(1, sizeof(*l));
	if (!l)
		return nf_error_set(NF_ENOMEM, "out of memory creating a logger");
	l->f = opts->stream ? opts->stream : stderr;
	l->fmt = opts->format;
	if (l->fmt == NF_LOG_FMT_AUTO)
		l->fmt = isatty(fileno(l->f)) ? NF_LOG_FMT_TTY : NF_LOG_FMT_TEXT;
	l->level = opts->level;
	l->clock = opts->clock ? opts->clock : real_clock;
	l->clock_user = opts->clock_user;
	l->interval = opts->progress_interval;
	if (!(l->interval > 0))
		l->interval = l->fmt == NF_LOG_FMT_TTY ? 0.1 : l->fmt == NF_LOG_FMT_JSON ? 1.0 : 10.0;
	l->width = opts->width > 0 ? opts->width : term_width(l->f);
	if (l->width < 20)
		l->width = 20;
	l->t0 = l->clock(l->clock_user);
	if (pthread_mutex_init(&l->mu, NULL) != 0) {
		free(l);
		return nf_error_set(NF_EINTERNAL, "cannot create the logger's mutex");
	}
	*out = l;
	return 0;
}

static void clear_line(nf_log *l)
{
	if (l->line_active) {
		fputs("\r\033[K", l->f);
		fflush(l->f);
		l->line_active = false;
	}
}

void nf_log_free(nf_log *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	clear_line(l);
	pthread_mutex_unlock(&l->mu);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

/* The one piece of global mutable state: which logger NULL means. */
static nf_log *g_default;
static nf_log *g_builtin;
static pthread_once_t g_builtin_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_default_mu = PTHREAD_MUTEX_INITIALIZER;

static void builtin_init(void)
{
	if (nf_log_new(&g_builtin, NULL) != 0)
		g_builtin = NULL;
}

nf_log *nf_log_default(void)
{
	nf_log *l;
	pthread_mutex_lock(&g_default_mu);
	l = g_default;
	pthread_mutex_unlock(&g_default_mu);
	if (l)
		return l;
	pthread_once(&g_builtin_once, builtin_init);
	return g_builtin;
}

void nf_log_set_default(nf_log *l)
{
	pthread_mutex_lock(&g_default_mu);
	g_default = l;
	pthread_mutex_unlock(&g_default_mu);
}

static nf_log *resolve(nf_log *l) { return l ? l : nf_log_default(); }

nf_log_format nf_log_get_format(const nf_log *l)
{
	const nf_log *r = l ? l : nf_log_default();
	return r ? r->fmt : NF_LOG_FMT_TEXT;
}

int nf_log_enabled(const nf_log *l, nf_log_level level)
{
	const nf_log *r = l ? l : nf_log_default();
	return r && level < NF_LOG_OFF && level >= r->level;
}

void nf_log_fmt_count(char *buf, size_t size, uint64_t n)
{
	static const char suffix[] = "kMGTPE";
	double v = (double)n;
	int s = -1;
	if (n < 1000) {
		snprintf(buf, size, "%llu", (unsigned long long)n);
		return;
	}
	while (v >= 999.95 && s < 5) {
		v /= 1000.0;
		s++;
	}
	snprintf(buf, size, "%.*f%c", v < 9.995 ? 2 : v < 99.95 ? 1 : 0, v, suffix[s]);
}

/* ISO 8601 UTC with milliseconds. */
static void fmt_ts(char *buf, size_t size, double t)
{
	time_t secs;
	long ms;
	struct tm tm;

	if (!(t >= 0) || t > 253402300799.0)
		t = 0;
	secs = (time_t)t;
	ms = (long)((t - (double)secs) * 1000.0 + 0.5);
	if (ms >= 1000) {
		secs++;
		ms -= 1000;
	}
	gmtime_r(&secs, &tm);
	snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", (tm.tm_year + 1900) % 10000,
		 (tm.tm_mon + 1) % 100, tm.tm_mday % 100, tm.tm_hour % 100, tm.tm_min % 100,
		 tm.tm_sec % 100, (int)(ms % 1000));
}

static bool reserved_key(const char *k)
{
	static const char *keys[] = {"ts", "level", "stage", "event", "msg"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strcmp(k, keys[i]) == 0)
			return true;
	return false;
}

static json_t *json_str_clean(const char *s)
{
	char *c = nf_escape_utf8(s, s ? strlen(s) : 0);
	json_t *j = c ? json_string(c) : NULL;
	free(c);
	return j ? j : json_string("");
}

/* Write one JSON line; called with the mutex held. */
static void emit_json(nf_log *l, double now, nf_log_level level, const char *stage,
		      const char *event, const nf_log_field *fields, size_t n, const char *msg)
{
	char ts[96];
	json_t *o = json_object();
	char *line = NULL;

	if (!o)
		return;
	fmt_ts(ts, sizeof(ts), now);
	json_object_set_new(o, "ts", json_string(ts));
	json_object_set_new(o, "level", json_string(nf_log_level_name(level)));
	json_object_set_new(o, "stage", stage ? json_str_clean(stage) : json_null());
	json_object_set_new(o, "event", json_str_clean(event ? event : "message"));
	json_object_set_new(o, "msg", json_str_clean(msg));
	for (size_t i = 0; i < n; i++) {
		const nf_log_field *fl = &fields[i];
		json_t *v = NULL;
		char *key;
		if (!fl->key || reserved_key(fl->key))
			continue;
		switch (fl->type) {
		case NF_LOG_F_STR: v = fl->s ? json_str_clean(fl->s) : json_null(); break;
		case NF_LOG_F_INT: v = json_integer((json_int_t)fl->i); break;
		case NF_LOG_F_DBL: v = (fl->d == fl->d && fl->d - fl->d == 0) ? json_real(fl->d) : json_null(); break;
		case NF_LOG_F_BOOL: v = json_boolean(fl->i); break;
		}
		key = nf_escape_utf8(fl->key, strlen(fl->key));
		if (key && v)
			json_object_set_new(o, key, v);
		else
			json_decref(v);
		free(key);
	}
	line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
	if (line) {
		fputs(line, l->f);
		fputc('\n', l->f);
		fflush(l->f);
	}
	free(line);
	json_decref(o);
}

/* Write one text line; called with the mutex held. */
static void emit_text(nf_log *l, double now, nf_log_level level, const char *stage, const char *msg)
{
	clear_line(l);
	if (l->fmt == NF_LOG_FMT_TEXT)
		fprintf(l->f, "[%8.3fs] ", now - l->t0 >= 0 ? now - l->t0 : 0.0);
	if (level == NF_LOG_WARN)
		fputs("warning: ", l->f);
	else if (level == NF_LOG_ERROR)
		fputs("error: ", l->f);
	if (stage && *stage)
		fprintf(l->f, "%s: ", stage);
	/* One event, one line: newlines inside the message become spaces. */
	for (const char *p = msg; *p; p++)
		fputc(*p == '\n' || *p == '\r' ? ' ' : *p, l->f);
	fputc('\n', l->f);
	fflush(l->f);
}

static void emit_locked(nf_log *l, double now, nf_log_level level, const char *stage,
			const char *event, const nf_log_field *fields, size_t n, const char *msg)
{
	if (l->fmt == NF_LOG_FMT_JSON)
		emit_json(l, now, level, stage, event, fields, n, msg);
	else
		emit_text(l, now, level, stage, msg);
}

void nf_log_eventv(nf_log *l, nf_log_level level, const char *stage, const char *event,
		   const nf_log_field *fields, size_t n_fields, const char *fmt, va_list ap)
{
	char msg[MSG_MAX];
	double now;

	l = resolve(l);
	if (!nf_log_enabled(l, level))
		return;
	msg[0] = '\0';
	if (fmt)
		vsnprintf(msg, sizeof(msg), fmt, ap);
	pthread_mutex_lock(&l->mu);
	now = l->clock(l->clock_user);
	emit_locked(l, now, level, stage, event, fields, n_fields, msg);
	pthread_mutex_unlock(&l->mu);
}

void nf_log_event(nf_log *l, nf_log_level level, const char *stage, const char *event,
		  const nf_log_field *fields, size_t n_fields, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	nf_log_eventv(l, level, stage, event, fields, n_fields, fmt, ap);
	va_end(ap);
}

#define LOG_SHORTHAND(fn, lvl)                                                  \
	void fn(nf_log *l, const char *stage, const char *fmt, ...)             \
	{                                                                       \
		va_list ap;                                                     \
		va_start(ap, fmt);                                              \
		nf_log_eventv(l, lvl, stage, "message", NULL, 0, fmt, ap);      \
		va_end(ap);                                                     \
	}
LOG_SHORTHAND(nf_log_debug, NF_LOG_DEBUG)
LOG_SHORTHAND(nf_log_info, NF_LOG_INFO)
LOG_SHORTHAND(nf_log_warn, NF_LOG_WARN)
LOG_SHORTHAND(nf_log_error, NF_LOG_ERROR)

static void copy_name(char *dst, const char *src)
{
	size_t n = strlen(src);
	if (n >= NAME_MAX_LEN)
		n = NAME_MAX_LEN - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static int find_stage(nf_log *l, const char *stage)
{
	char name[NAME_MAX_LEN];
	copy_name(name, stage);
	for (int i = 0; i < MAX_STAGES; i++)
		if (l->stages[i].used && strcmp(l->stages[i].name, name) == 0)
			return i;
	return -1;
}

void nf_log_stage_begin(nf_log *l, const char *stage, const char *fmt, ...)
{
	char what[MSG_MAX], msg[MSG_MAX];
	va_list ap;
	double now;
	int slot;

	l = resolve(l);
	if (!l || !stage)
		return;
	what[0] = '\0';
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(what, sizeof(what), fmt, ap);
		va_end(ap);
	}
	snprintf(msg, sizeof(msg), "%s%s", what[0] ? what : "started", what[0] ? "..." : "");
	pthread_mutex_lock(&l->mu);
	now = l->clock(l->clock_user);
	slot = find_stage(l, stage);
	for (int i = 0; slot < 0 && i < MAX_STAGES; i++)
		if (!l->stages[i].used)
			slot = i;
	if (slot >= 0) { /* with 32 stages open the oldest timing is simply not kept */
		l->stages[slot].used = true;
		copy_name(l->stages[slot].name, stage);
		l->stages[slot].start = now;
	}
	if (nf_log_enabled(l, NF_LOG_INFO))
		emit_locked(l, now, NF_LOG_INFO, stage, "stage_begin", NULL, 0, msg);
	pthread_mutex_unlock(&l->mu);
}

double nf_log_stage_end(nf_log *l, const char *stage, int rc, const char *fmt, ...)
{
	char detail[MSG_MAX], msg[MSG_MAX];
	va_list ap;
	double now, secs = -1;
	int slot;
	nf_log_field fields[3];
	size_t nf = 0;
	nf_log_level level = rc < 0 ? NF_LOG_ERROR : NF_LOG_INFO;
	const char *why = rc < 0 ? nf_error_last() : "";

	l = resolve(l);
	if (!l || !stage)
		return -1;
	detail[0] = '\0';
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(detail, sizeof(detail), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_lock(&l->mu);
	now = l->clock(l->clock_user);
	slot = find_stage(l, stage);
	if (slot >= 0) {
		secs = now - l->stages[slot].start;
		if (secs < 0)
			secs = 0;
		l->stages[slot].used = false;
	}
	if (l->prog_stage[0] && strcmp(l->prog_stage, stage) == 0)
		l->prog_stage[0] = '\0';
	if (rc < 0)
		snprintf(msg, sizeof(msg), "failed after %.2fs: %s%s%s", secs < 0 ? 0.0 : secs,
			 detail, detail[0] && why[0] ? ": " : "", why);
	else
		snprintf(msg, sizeof(msg), "done in %.2fs%s%s%s", secs < 0 ? 0.0 : secs,
			 detail[0] ? " (" : "", detail, detail[0] ? ")" : "");
	fields[nf++] = NF_LOG_DBL("seconds", secs < 0 ? 0.0 : secs);
	fields[nf++] = NF_LOG_STR("status", rc < 0 ? "failed" : "ok");
	if (rc < 0)
		fields[nf++] = NF_LOG_STR("code", nf_error_name(rc));
	if (nf_log_enabled(l, level))
		emit_locked(l, now, level, stage, "stage_end", fields, nf, msg);
	else
		clear_line(l);
	pthread_mutex_unlock(&l->mu);
	return secs;
}

void nf_log_stage_cached(nf_log *l, const char *stage, const char *fmt, ...)
{
	char detail[MSG_MAX], msg[MSG_MAX];
	va_list ap;
	nf_log_field st = NF_LOG_STR("status", "cached");

	l = resolve(l);
	if (!l || !stage || !nf_log_enabled(l, NF_LOG_INFO))
		return;
	detail[0] = '\0';
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(detail, sizeof(detail), fmt, ap);
		va_end(ap);
	}
	snprintf(msg, sizeof(msg), "cached%s%s", detail[0] ? ": " : "", detail);
	pthread_mutex_lock(&l->mu);
	emit_locked(l, l->clock(l->clock_user), NF_LOG_INFO, stage, "stage_cached", &st, 1, msg);
	pthread_mutex_unlock(&l->mu);
}

/* Draw the in-place progress line; called with the mutex held. */
static void draw_tty(nf_log *l, const char *stage, uint64_t done, uint64_t total)
{
	static const char spinner[] = "|/-\\";
	char line[1024], a[16], b[16];
	int n, bar;

	nf_log_fmt_count(a, sizeof(a), done);
	if (total) {
		double frac = done >= total ? 1.0 : (double)done / (double)total;
		nf_log_fmt_count(b, sizeof(b), total);
		n = snprintf(line, sizeof(line), "  %s [", stage);
		bar = l->width - n - 24;
		if (bar > 40)
			bar = 40;
		if (bar < 5)
			bar = 5;
		int fill = (int)(frac * bar);
		for (int i = 0; i < bar && n < (int)sizeof(line) - 64; i++)
			line[n++] = i < fill ? '=' : (i == fill ? '>' : ' ');
		snprintf(line + n, sizeof(line) - (size_t)n, "] %3d%%  %s/%s", (int)(frac * 100.0), a, b);
	} else {
		snprintf(line, sizeof(line), "  %s %c %s", stage, spinner[l->spin++ % 4], a);
	}
	if ((int)strlen(line) >= l->width)
		line[l->width - 1] = '\0';
	fputs("\r\033[K", l->f);
	fputs(line, l->f);
	fflush(l->f);
	l->line_active = true;
}

void nf_log_progress(nf_log *l, const char *stage, uint64_t done, uint64_t total)
{
	double now;
	bool fresh, due, finished = total && done >= total;

	l = resolve(l);
	if (!l || !nf_log_enabled(l, NF_LOG_INFO))
		return;
	if (!stage)
		stage = "";
	pthread_mutex_lock(&l->mu);
	now = l->clock(l->clock_user);
	fresh = strncmp(l->prog_stage, stage, NAME_MAX_LEN - 1) != 0;
	if (fresh) {
		copy_name(l->prog_stage, stage);
		l->prog_last = now;
		l->prog_shown = false;
	}
	due = now - l->prog_last >= l->interval;
	if (l->fmt == NF_LOG_FMT_TTY) {
		/* On a terminal: at once, then at the interval, and the final state. */
		if (fresh || due || finished || !l->prog_shown) {
			draw_tty(l, stage, done, total);
			l->prog_last = now;
			l->prog_shown = true;
		}
	} else if (due && !finished) {
		/* Logs stay quiet: a line only when a step runs longer than the
		 * interval, and none for the end (stage_end says it). */
		char msg[128], a[16], b[16];
		nf_log_field f[2] = {NF_LOG_INT("done", done), NF_LOG_INT("total", total)};
		nf_log_fmt_count(a, sizeof(a), done);
		nf_log_fmt_count(b, sizeof(b), total);
		if (total)
			snprintf(msg, sizeof(msg), "%d%% (%s/%s)",
				 (int)((double)done / (double)total * 100.0), a, b);
		else
			snprintf(msg, sizeof(msg), "%s so far", a);
		emit_locked(l, now, NF_LOG_INFO, stage[0] ? stage : NULL, "progress", f, 2, msg);
		l->prog_last = now;
		l->prog_shown = true;
	}
	pthread_mutex_unlock(&l->mu);
}
