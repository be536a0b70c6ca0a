/*
 * error.h - return codes and the per-thread "last error" message.
 *
 * Every public function returns 0 or a negative NF_E* code; the human message
 * for the most recent failure on this thread is kept here, in the manner of
 * libgit2's git_error_last().  Only main() turns a code into an exit status.
 */
#ifndef NF_UTIL_ERROR_H
#define NF_UTIL_ERROR_H

enum {
	NF_OK = 0,
	NF_EINTERNAL = -1,    /* a bug or an impossible state: exit 1 */
	NF_EINPUT = -2,       /* bad input: recipe, file, argument: exit 2 */
	NF_EGATE = -3,        /* a correctness or performance gate failed: exit 3 */
	NF_EENV = -4,         /* environment: missing tool, disk, permission: exit 4 */
	NF_ENOMEM = -5,       /* allocation failed: exit 4 */
	NF_EIO = -6,          /* read/write failed on a file we own: exit 4 */
	NF_ENOTFOUND = -7,    /* a named file, key or object does not exist: exit 2 */
	NF_ENET = -8,         /* network or remote server failure: exit 4 */
	NF_EUNSUPPORTED = -9, /* valid but not supported (format, dtype): exit 2 */
};

/* Exit statuses documented in the README. */
enum {
	NF_EXIT_OK = 0,
	NF_EXIT_INTERNAL = 1,
	NF_EXIT_INPUT = 2,
	NF_EXIT_GATE = 3,
	NF_EXIT_ENV = 4,
};

/* Set the thread's last error to the formatted message; returns `code`. */
int nf_error_set(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Prefix the current message with context ("ctx: previous message"); returns `code`. */
int nf_error_wrap(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The message of the last error on this thread, or "" when there is none. Never NULL. */
const char *nf_error_last(void);

/* The code recorded with the last error (NF_OK when none). */
int nf_error_last_code(void);

void nf_error_clear(void);

/* Map an NF_E* code to a process exit status. */
int nf_error_exit_status(int code);

/* Short stable name of a code, for logs and JSON ("input", "gate", ...). */
const char *nf_error_name(int code);

#endif
