/*
 * log.h - what the factory tells the person (or log collector) watching it:
 * stages with their duration, events, warnings and errors, and progress.
 *
 * Three renderings of the same events:
 *   tty   text on a terminal; progress bars / spinners redrawn in place on
 *         one line (only when the stream is a TTY)
 *   text  quiet, line-oriented text for CI logs: "[+1.234s] stage: message";
 *         progress appears at most once per progress interval (default 10 s)
 *   json  one JSON object per line for log collectors:
 *         {"ts":"2024-05-01T12:00:00.000Z","level":"info","stage":"fetch",
 *          "event":"stage_end","msg":"done in 0.12s","seconds":0.12,...fields}
 *
 * A logger's settings are the only global mutable state of the program: the
 * CLI configures one logger at start-up (nf_log_set_default) and every
 * function that takes an `nf_log *` accepts NULL for that default.  A logger
 * serialises its writes with a mutex, so worker threads may report progress.
 * The clock is injectable so tests get deterministic timestamps.
 */
#ifndef NF_FACTORY_LOG_H
#define NF_FACTORY_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum nf_log_level {
	NF_LOG_DEBUG = 0,
	NF_LOG_INFO,
	NF_LOG_WARN,
	NF_LOG_ERROR,
	NF_LOG_OFF, /* as a threshold only: print nothing */
} nf_log_level;

typedef enum nf_log_format {
	NF_LOG_FMT_AUTO = 0, /* tty when the stream is a terminal, else text */
	NF_LOG_FMT_TEXT,     /* line-oriented text (even on a terminal) */
	NF_LOG_FMT_TTY,      /* redraw progress in place (even when not a terminal) */
	NF_LOG_FMT_JSON,     /* JSON lines */
} nf_log_format;

/* "debug" "info" "warn" (or "warning") "error" "off" / "auto" "text" "tty" "json";
 * NF_EINPUT naming the accepted values otherwise. */
int nf_log_level_parse(nf_log_level *out, const char *name);
int nf_log_format_parse(nf_log_format *out, const char *name);
const char *nf_log_level_name(nf_log_level l); /* "debug" ... */

/* Seconds since the Unix epoch (fractional). */
typedef double (*nf_log_clock_fn)(void *user);

typedef struct nf_log_opts {
	FILE *stream;               /* NULL = stderr; not owned */
	nf_log_format format;       /* AUTO: isatty(stream) ? TTY : TEXT */
	nf_log_level level;         /* messages below it are dropped; default (0) DEBUG,
				       so callers usually set NF_LOG_INFO */
	nf_log_clock_fn clock;      /* NULL = CLOCK_REALTIME */
	void *clock_user;
	double progress_interval;   /* seconds between progress outputs; 0 = the
				       default for the format (tty 0.1, text 10, json 1) */
	int width;                  /* tty line width; 0 = $COLUMNS or 80 */
} nf_log_opts;

typedef struct nf_log nf_log;

/* A new logger; opts may be NULL (stderr, AUTO, INFO).  Caller owns *out. */
int nf_log_new(nf_log **out, const nf_log_opts *opts);
/* Clears a progress line still on screen, then frees.  NULL is fine. */
void nf_log_free(nf_log *l);

/* The process-wide logger used when NULL is passed.  Until set it is a
 * stderr/AUTO/INFO logger created on first use.  set_default does not take
 * ownership: the caller keeps l alive until it sets NULL (back to built-in). */
nf_log *nf_log_default(void);
void nf_log_set_default(nf_log *l);

/* The rendering chosen (AUTO resolved) and the level threshold. */
nf_log_format nf_log_get_format(const nf_log *l);
int nf_log_enabled(const nf_log *l, nf_log_level level);

/* A structured field attached to an event (JSON keys; ignored by text). */
typedef enum nf_log_ftype { NF_LOG_F_STR, NF_LOG_F_INT, NF_LOG_F_DBL, NF_LOG_F_BOOL } nf_log_ftype;
typedef struct nf_log_field {
	const char *key; /* must not be ts, level, stage, event or msg (then skipped) */
	nf_log_ftype type;
	const char *s;
	int64_t i;
	double d;
} nf_log_field;
#define NF_LOG_STR(k, v) ((nf_log_field){.key = (k), .type = NF_LOG_F_STR, .s = (v)})
#define NF_LOG_INT(k, v) ((nf_log_field){.key = (k), .type = NF_LOG_F_INT, .i = (int64_t)(v)})
#define NF_LOG_DBL(k, v) ((nf_log_field){.key = (k), .type = NF_LOG_F_DBL, .d = (double)(v)})
#define NF_LOG_BOOL(k, v) ((nf_log_field){.key = (k), .type = NF_LOG_F_BOOL, .i = !!(v)})

/*
 * The general form: an event named `event` (e.g. "cache_hit") in `stage`
 * (may be NULL) with a printf message and n fields.  Text renderings print
 * "[+t] stage: msg" (warn/error add "warning: "/"error: ").
 */
void nf_log_event(nf_log *l, nf_log_level level, const char *stage, const char *event,
		  const nf_log_field *fields, size_t n_fields, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));
void nf_log_eventv(nf_log *l, nf_log_level level, const char *stage, const char *event,
		   const nf_log_field *fields, size_t n_fields, const char *fmt, va_list ap);

/* Shorthands for event "message". */
void nf_log_debug(nf_log *l, const char *stage, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void nf_log_info(nf_log *l, const char *stage, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void nf_log_warn(nf_log *l, const char *stage, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void nf_log_error(nf_log *l, const char *stage, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Stages.  begin prints "stage: what it does..." (event "stage_begin") and
 * starts its clock; end prints "stage: done in 1.23s[ (detail)]" or, when
 * rc < 0, "stage: failed after 1.23s: <nf_error_last()>" at error level
 * (event "stage_end", fields "seconds", "status" ok|failed, "code" on
 * failure) and returns the seconds elapsed (-1 for a stage never begun).
 * cached reports a stage that did not run because its output was cached
 * (event "stage_cached", status "cached").  Up to 32 stages may be open at
 * once (nested or parallel); stage names are copied.  fmt may be NULL.
 */
void nf_log_stage_begin(nf_log *l, const char *stage, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
double nf_log_stage_end(nf_log *l, const char *stage, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void nf_log_stage_cached(nf_log *l, const char *stage, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Progress of a long step: `done` of `total` units (total 0 = unknown: a
 * spinner and a count).  Rate-limited to the progress interval, except that
 * done == total is always drawn on a tty.  tty: one line redrawn in place,
 * e.g. "  fetch [=========>          ]  45%  1.2M/2.6M"; text: an occasional
 * "stage: 45% (1.2M/2.6M)" line; json: event "progress" with done/total.
 * Any other output first clears the progress line.  The shape fits a plain
 * callback: pass the logger as the user pointer.
 */
void nf_log_progress(nf_log *l, const char *stage, uint64_t done, uint64_t total);

/* Format n compactly with a 1000-based suffix ("999", "1.2k", "3.4M", "5.6G") into buf. */
void nf_log_fmt_count(char *buf, size_t size, uint64_t n);

#endif
